//! Start-up windows: which faults of each program happen between its `exec`
//! and the moment it enters `main`.
//!
//! Every exec opens a window for the program it loads, in every process: a
//! wrapper (`env`, `sh -c`, a pyenv shim, `make`, a compiler driver) and each
//! program it runs get one each, and a process that execs several programs
//! gets one per program. A window closes at the uprobe on `main` where it
//! fired (`record` places it on the first program only), else at the first
//! fault of the process whose stack holds `main`, libc's
//! `__libc_start_call_main` (the frame that calls `main`; constructors run
//! from `__libc_start_main` before it) or the exit path (`exit`, `_dl_fini`);
//! at the process's next exec (a wrapper that execs without reaching `main`);
//! or, with `--until-ms N`, N ms after its exec. Faults are replayed in time
//! order, so every fault of the process before the closing one belongs to the
//! window. A forked child that has not exec'd is in no window.

use std::ops::Range;
use std::path::Path;

use pfprof_symbolize::Symbolizer;
use rustc_hash::FxHashMap;

use crate::analysis::process::{ModuleId, Modules};
use crate::analysis::stacks::FrameKey;

/// Functions whose presence on a stack means `main` has been entered: `main`
/// itself, libc's frame that calls it, and the exit path that runs after it
/// returns (libc has no frame pointers, so a fault in `exit` often shows no
/// caller at all).
const MAIN_MARKERS: [&str; 6] = [
    "main",
    "__libc_start_call_main",
    "exit",
    "__run_exit_handlers",
    "_dl_fini",
    "_exit",
];

/// How a window ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Cut {
    /// Still open (the recording ended before `main` was seen).
    Open,
    /// `main` was entered at this time.
    Main(u64),
    /// `--until-ms` elapsed at this time.
    UntilMs(u64),
    /// The process exec'd another program at this time, before `main`.
    Exec(u64),
}

impl Cut {
    /// `main`, `until-ms`, `exec` or `end`, as the reports name it.
    pub fn name(&self) -> &'static str {
        match self {
            Cut::Main(_) => "main",
            Cut::UntilMs(_) => "until-ms",
            Cut::Exec(_) => "exec",
            Cut::Open => "end",
        }
    }
}

/// One program's start-up: from an exec to its `main`.
#[derive(Debug, Clone)]
pub struct Window {
    /// The process.
    pub pid: i32,
    /// `comm` at the exec (the program's name when no file was mapped).
    pub comm: String,
    /// Time of the exec.
    pub exec_time: u64,
    /// How (and when) it closed.
    pub cut: Cut,
    /// Modules in the order the program mapped them (load order); the first
    /// is the program itself.
    pub load_order: Vec<ModuleId>,
    /// Faults in the window.
    pub faults: ClassCounts,
}

impl Window {
    /// Milliseconds from exec to the cut (or to `last_time` when still open).
    pub fn window_ms(&self, last_time: Option<u64>) -> Option<f64> {
        let end = match self.cut {
            Cut::Main(t) | Cut::UntilMs(t) | Cut::Exec(t) => t,
            Cut::Open => last_time?,
        };
        Some(end.saturating_sub(self.exec_time) as f64 / 1e6)
    }
}

/// Tracks the start-up windows during replay.
pub struct StartupTracker {
    until_ns: Option<u64>,
    /// Every window, in exec order.
    pub windows: Vec<Window>,
    /// Each process's open window.
    open: FxHashMap<i32, usize>,
    /// An exec record was seen (a perf recording may have none).
    saw_exec: bool,
    markers: FxHashMap<ModuleId, Vec<Range<u64>>>,
    disabled: bool,
    /// The program (path, file name or pid) whose window the report shows
    /// in full (`--startup-of`); by default the one with the most faults.
    pub startup_of: Option<String>,
}

impl StartupTracker {
    /// A tracker; `until_ms` replaces `main` detection; `startup_of` chooses
    /// the window shown in full.
    pub fn new(until_ms: Option<f64>, startup_of: Option<String>) -> Self {
        StartupTracker {
            until_ns: until_ms.map(|ms| (ms * 1e6) as u64),
            windows: Vec::new(),
            open: FxHashMap::default(),
            saw_exec: false,
            markers: FxHashMap::default(),
            disabled: false,
            startup_of,
        }
    }

    /// No start-up window (attached or system-wide recordings).
    pub fn disable(&mut self) {
        self.disabled = true;
    }

    /// Time of the first exec.
    pub fn first_exec(&self) -> Option<u64> {
        self.windows.first().map(|w| w.exec_time)
    }

    fn open_window(&mut self, pid: i32, comm: &str, time: u64) {
        self.open.insert(pid, self.windows.len());
        self.windows.push(Window {
            pid,
            comm: comm.to_string(),
            exec_time: time,
            cut: Cut::Open,
            load_order: Vec::new(),
            faults: ClassCounts::default(),
        });
    }

    /// An exec by `pid`: the window of the program it ran before (if still
    /// open) closes, a new one opens.
    pub fn on_exec(&mut self, pid: i32, comm: &str, time: u64) {
        if self.disabled {
            return;
        }
        self.saw_exec = true;
        if let Some(i) = self.open.remove(&pid) {
            self.windows[i].cut = Cut::Exec(time);
        }
        self.open_window(pid, comm, time);
    }

    /// A new process `pid` (a fork): a window still open under that pid was
    /// an earlier process's, which died before `main`; it takes no more
    /// faults.
    pub fn on_new_process(&mut self, pid: i32) {
        self.open.remove(&pid);
    }

    /// The uprobe on `main` fired in `pid`: its start-up ends here, exactly.
    pub fn on_main(&mut self, pid: i32, time: u64) {
        if let Some(i) = self.open.remove(&pid) {
            self.windows[i].cut = Cut::Main(time);
        }
    }

    /// A module mapped by `pid`.
    pub fn on_module(&mut self, pid: i32, module: ModuleId) {
        if let Some(&i) = self.open.get(&pid) {
            let order = &mut self.windows[i].load_order;
            if !order.contains(&module) {
                order.push(module);
            }
        }
    }

    /// Decides whether a fault of `pid` at `time` with `frames` (leaf first)
    /// belongs to a start-up window, closing the window when it should, and
    /// counts it there. Returns the window's index.
    #[allow(clippy::too_many_arguments)]
    pub fn is_startup(
        &mut self,
        pid: i32,
        time: u64,
        frames: &[FrameKey],
        class: FaultClass,
        weight: u64,
        modules: &Modules,
        symbolizer: &mut Symbolizer,
    ) -> Option<u32> {
        if self.disabled {
            return None;
        }
        if !self.saw_exec && self.windows.is_empty() {
            // A perf recording without exec records: the first faulting process.
            self.open_window(pid, "", time);
        }
        let i = *self.open.get(&pid)?;
        let window = &mut self.windows[i];
        let closed = if let Some(until) = self.until_ns {
            let over = time.saturating_sub(window.exec_time) >= until;
            if over {
                window.cut = Cut::UntilMs(time);
            }
            over
        } else {
            let mut main = false;
            for frame in frames {
                let FrameKey::Code {
                    module,
                    lookup_file_offset,
                } = *frame
                else {
                    continue;
                };
                let ranges = self.markers.entry(module).or_insert_with(|| {
                    let m = modules.get(module);
                    if !m.path.starts_with('/') {
                        return Vec::new();
                    }
                    symbolizer
                        .function_ranges(Path::new(&m.path), m.build_id.as_deref(), &MAIN_MARKERS)
                        .into_iter()
                        .map(|(_, range)| range)
                        .collect()
                });
                if ranges.iter().any(|r| r.contains(&lookup_file_offset)) {
                    main = true;
                    break;
                }
            }
            if main {
                window.cut = Cut::Main(time);
            }
            main
        };
        if closed {
            self.open.remove(&pid);
            return None;
        }
        window.faults.add(class, weight);
        u32::try_from(i).ok()
    }

    /// The window a report shows in full: the one of the program named `of`
    /// (its path, file name, the name it was exec'd by, or pid) with the most faults, else (no `of`)
    /// the one with the most faults; the earliest on a tie. `name` gives a
    /// window's program path.
    pub fn choose(&self, of: Option<&str>, name: impl Fn(&Window) -> String) -> Option<usize> {
        let matches = |w: &Window| match of {
            None => true,
            Some(of) => {
                let path = name(w);
                // The name it was exec'd by (`sh` for /usr/bin/dash) too.
                path == of
                    || path.rsplit('/').next() == Some(of)
                    || w.comm == of
                    || w.pid.to_string() == of
            }
        };
        self.windows
            .iter()
            .enumerate()
            .filter(|(_, w)| matches(w))
            .max_by_key(|(i, w)| (w.faults.total(), std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
    }
}

/// One start-up window, compactly (report.json `startups`).
#[derive(Debug, Clone, Serialize)]
pub struct StartupWindow {
    /// The program's path (its `comm` when no file was mapped).
    pub program: String,
    /// The process.
    pub pid: i32,
    /// Exec time, ms after the first exec of the recording.
    pub exec_ms: f64,
    /// End of the window, ms after the first exec (the recording's end when
    /// `main` was not seen).
    pub end_ms: Option<f64>,
    /// What ended it: `main`, `exec` (the process exec'd another program
    /// first), `until-ms`, or `end`.
    pub until: String,
    /// Faults in the window.
    pub faults: ClassCounts,
}

/// The compact list of the start-up windows other than `shown`, by faults,
/// at most `top` lines (and a line that sums the rest).
pub fn others_text(windows: &[StartupWindow], shown: Option<usize>, top: usize) -> String {
    use std::fmt::Write as _;
    let mut others: Vec<&StartupWindow> = windows
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != shown)
        .map(|(_, w)| w)
        .collect();
    let mut s = String::new();
    if others.is_empty() {
        return s;
    }
    others.sort_by_key(|w| std::cmp::Reverse(w.faults.total()));
    let _ = writeln!(
        s,
        "\nOther start-up windows ({}, by faults; --startup-of NAME|PID shows one):",
        thousands(others.len() as u64)
    );
    let _ = writeln!(
        s,
        "{:<30}{:>9}{:>9}{:>8}{:>9}{:>12}  until",
        "program", "pid", "minor", "major", "cow", "window"
    );
    for w in others.iter().take(top) {
        let window = match w.end_ms {
            Some(end) => format!("{:.1} ms", (end - w.exec_ms).max(0.0)),
            None => "-".to_string(),
        };
        let _ = writeln!(
            s,
            "{:<30}{:>9}{:>9}{:>8}{:>9}{:>12}  {}",
            crate::text::truncate(short(&w.program), 30),
            w.pid,
            thousands(w.faults.minor),
            thousands(w.faults.major),
            thousands(w.faults.cow),
            window,
            w.until
        );
    }
    if others.len() > top {
        let mut rest = ClassCounts::default();
        for w in &others[top..] {
            rest.minor += w.faults.minor;
            rest.major += w.faults.major;
            rest.cow += w.faults.cow;
        }
        let _ = writeln!(
            s,
            "{:<39}{:>9}{:>8}{:>9}",
            format!("and {} more", thousands((others.len() - top) as u64)),
            thousands(rest.minor),
            thousands(rest.major),
            thousands(rest.cow)
        );
    }
    s
}

// ---------------------------------------------------------------------------
// The start-up report: per object and section, the loader's relocations, the
// data symbols that fault, and hints tied to their figures.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::classify::FaultClass;
use crate::analysis::relocation_pages::{credit_pages, Credited, LoaderWrite, RelocationKind};
use crate::text::thousands;

/// Faults by class.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct ClassCounts {
    /// Minor faults.
    pub minor: u64,
    /// Major faults.
    pub major: u64,
    /// COW faults.
    pub cow: u64,
}

impl ClassCounts {
    /// Adds `n` faults of `class`.
    pub fn add(&mut self, class: FaultClass, n: u64) {
        match class {
            FaultClass::Minor => self.minor += n,
            FaultClass::Major => self.major += n,
            FaultClass::Cow => self.cow += n,
        }
    }
    /// All classes.
    pub fn total(&self) -> u64 {
        self.minor + self.major + self.cow
    }
}

/// One section of an object.
#[derive(Debug, Clone, Serialize)]
pub struct StartupSection {
    /// Section name (`(none)` for file pages outside every section, or the
    /// region for anonymous memory).
    pub section: String,
    /// Minor faults.
    pub minor: u64,
    /// Major faults.
    pub major: u64,
    /// COW faults.
    pub cow: u64,
    /// Distinct pages faulted.
    pub pages_touched: Option<u64>,
    /// Pages the section spans.
    pub pages_total: Option<u64>,
}

/// One object (executable, library, mapped file, or anonymous memory).
#[derive(Debug, Clone, Serialize)]
pub struct StartupObject {
    /// Path, or `[heap]`, `[stack]`, `[anon]`.
    pub object: String,
    /// Faults on it.
    pub faults: ClassCounts,
    /// Share of the start-up total, in percent.
    pub share: f64,
    /// By section.
    pub sections: Vec<StartupSection>,
    /// Dynamic relocations by type (without RELR).
    pub relocations: BTreeMap<String, u64>,
    /// Relocations packed in DT_RELR.
    pub relr: u64,
    /// Uses DT_RELR.
    pub uses_relr: bool,
    /// Linked with `-z now` (BIND_NOW).
    pub bind_now: bool,
    /// Has a PT_GNU_RELRO segment.
    pub relro: bool,
    /// Pages the start-up relocations write.
    pub relocation_pages: u64,
    /// Faults the dynamic loader's relocation code took on this object.
    pub loader: ClassCounts,
}

impl StartupObject {
    /// Its relocations in one line (types, pages, BIND_NOW, RELRO, the
    /// loader's faults), as report.txt and index.html show them; None when
    /// it has none.
    pub fn relocation_summary(&self) -> Option<String> {
        if self.relocations.is_empty() && self.relr == 0 {
            return None;
        }
        let mut types: Vec<String> = self
            .relocations
            .iter()
            .map(|(t, n)| format!("{t} {}", thousands(*n)))
            .collect();
        if self.uses_relr {
            types.push(format!("RELR {}", thousands(self.relr)));
        }
        let yes = |b: bool| if b { "yes" } else { "no" };
        Some(format!(
            "{} on {} pages; BIND_NOW {}, RELRO {}; loader faults: cow {}, minor {}",
            types.join(", "),
            thousands(self.relocation_pages),
            yes(self.bind_now),
            yes(self.relro),
            thousands(self.loader.cow),
            thousands(self.loader.minor)
        ))
    }
}

/// A data symbol whose pages fault at start-up.
#[derive(Debug, Clone, Serialize)]
pub struct StartupSymbol {
    /// Object.
    pub object: String,
    /// Section.
    pub section: String,
    /// Symbol.
    pub symbol: String,
    /// Faults.
    pub faults: u64,
    /// The function that touched it first.
    pub first_toucher: Option<String>,
}

/// A suggestion, with the figure that justifies it.
#[derive(Debug, Clone, Serialize)]
pub struct Hint {
    /// The object it is about.
    pub object: String,
    /// The suggestion.
    pub text: String,
    /// For a hint about relocations: what wrote the pages it counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relocations: Option<HintRelocations>,
}

/// The pages a relocation hint is about, and what is on them.
#[derive(Debug, Clone, Serialize)]
pub struct HintRelocations {
    /// What wrote them.
    pub kind: RelocationKind,
    /// Pages (one COW fault each).
    pub pages: u64,
    /// Every section among them.
    pub sections: Vec<String>,
    /// The relocations on them, by type.
    pub relocations: BTreeMap<String, u64>,
}

/// The start-up section of the report.
#[derive(Debug, Clone, Serialize)]
pub struct StartupReport {
    /// The program (path) whose start-up this is.
    pub program: Option<String>,
    /// Its process.
    pub pid: Option<i32>,
    /// Its index in report.json's `startups`.
    pub window: Option<usize>,
    /// What ended the window: `main`, `until-ms`, `exec` (the process exec'd
    /// another program before `main`), or `end` (main never seen).
    pub until: String,
    /// Length of the window in ms.
    pub until_ms: Option<f64>,
    /// Faults in the window.
    pub faults: ClassCounts,
    /// Objects, in load order, then the rest by faults.
    pub objects: Vec<StartupObject>,
    /// Data symbols by faults.
    pub symbols: Vec<StartupSymbol>,
    /// Hints.
    pub hints: Vec<Hint>,
}

/// One aggregated start-up fault row, symbolized.
pub struct StartupFault {
    /// Target object.
    pub object: String,
    /// Section (or region).
    pub section: String,
    /// Data symbol.
    pub symbol: Option<String>,
    /// Class.
    pub class: FaultClass,
    /// svma page of the target, for ELF objects.
    pub page: Option<u64>,
    /// Faults.
    pub count: u64,
    /// Taken by the loader's relocation code: which part of it.
    pub loader: Option<LoaderWrite>,
}

/// ELF facts about an object, from the symbolizer.
#[derive(Default)]
pub struct ObjectFacts {
    /// Section name → pages spanned.
    pub section_pages: BTreeMap<String, u64>,
    /// Relocations.
    pub relocations: Option<pfprof_symbolize::RelocationInfo>,
}

use crate::text::short;

/// Builds the start-up report from the symbolized start-up faults.
pub fn build(
    window: &Window,
    program: String,
    last_time: Option<u64>,
    rows: &[StartupFault],
    first_touchers: &BTreeMap<(String, String, String), String>,
    facts: &BTreeMap<String, ObjectFacts>,
    load_order: &[String],
) -> StartupReport {
    let mut total = ClassCounts::default();
    #[derive(Default)]
    struct Acc {
        faults: ClassCounts,
        loader: ClassCounts,
        sections: BTreeMap<String, (ClassCounts, std::collections::BTreeSet<u64>)>,
        /// Pages the loader copied, and its code that did.
        written: BTreeMap<u64, LoaderWrite>,
    }
    let mut objects: BTreeMap<&str, Acc> = BTreeMap::new();
    let mut symbols: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for row in rows {
        total.add(row.class, row.count);
        let acc = objects.entry(&row.object).or_default();
        acc.faults.add(row.class, row.count);
        if let Some(write) = row.loader {
            acc.loader.add(row.class, row.count);
            if let (FaultClass::Cow, Some(page)) = (row.class, row.page) {
                // A function that tells the kind wins over one that does not.
                let at = acc.written.entry(page).or_insert(write);
                if *at == LoaderWrite::Any {
                    *at = write;
                }
            }
        }
        let section = acc.sections.entry(row.section.clone()).or_default();
        section.0.add(row.class, row.count);
        if let Some(page) = row.page {
            section.1.insert(page);
        }
        if let Some(symbol) = &row.symbol {
            *symbols
                .entry((row.object.clone(), row.section.clone(), symbol.clone()))
                .or_default() += row.count;
        }
    }
    let mut order: Vec<&str> = load_order
        .iter()
        .map(String::as_str)
        .filter(|o| objects.contains_key(o))
        .collect();
    let mut rest: Vec<&str> = objects
        .keys()
        .copied()
        .filter(|o| !order.contains(o))
        .collect();
    rest.sort_by_key(|o| std::cmp::Reverse(objects[o].faults.total()));
    order.extend(rest);

    let no_facts = ObjectFacts::default();
    let mut out_objects = Vec::new();
    let mut credited = BTreeMap::new();
    for object in order {
        let acc = &objects[object];
        let f = facts.get(object).unwrap_or(&no_facts);
        if let Some(r) = &f.relocations {
            credited.insert(
                object.to_string(),
                credit_pages(&acc.written, &r.page_writes, r.bind_now),
            );
        }
        let mut sections: Vec<StartupSection> = acc
            .sections
            .iter()
            .map(|(name, (c, pages))| StartupSection {
                section: name.clone(),
                minor: c.minor,
                major: c.major,
                cow: c.cow,
                pages_touched: (!pages.is_empty()).then_some(pages.len() as u64),
                pages_total: f.section_pages.get(name).copied(),
            })
            .collect();
        sections.sort_by_key(|s| std::cmp::Reverse(s.minor + s.major + s.cow));
        let r = f.relocations.as_ref();
        out_objects.push(StartupObject {
            object: object.to_string(),
            faults: acc.faults,
            share: if total.total() == 0 {
                0.0
            } else {
                acc.faults.total() as f64 * 100.0 / total.total() as f64
            },
            sections,
            relocations: r.map(|r| r.by_type.clone()).unwrap_or_default(),
            relr: r.map_or(0, |r| r.relr),
            uses_relr: r.is_some_and(|r| r.uses_relr),
            bind_now: r.is_some_and(|r| r.bind_now),
            relro: r.is_some_and(|r| r.relro.is_some()),
            // ld.so also rebases lazy JUMP_SLOT entries of a relocated object
            // at start-up, so their pages are written too.
            relocation_pages: r.map_or(0, |r| {
                let mut pages: Vec<u64> = r
                    .pages
                    .iter()
                    .chain(&r.lazy_jump_slot_pages)
                    .copied()
                    .collect();
                pages.sort_unstable();
                pages.dedup();
                pages.len() as u64
            }),
            loader: acc.loader,
        });
    }
    let mut out_symbols: Vec<StartupSymbol> = symbols
        .into_iter()
        .map(|((object, section, symbol), faults)| StartupSymbol {
            first_toucher: first_touchers
                .get(&(object.clone(), section.clone(), symbol.clone()))
                .cloned(),
            object,
            section,
            symbol,
            faults,
        })
        .collect();
    out_symbols.sort_by(|a, b| {
        b.faults
            .cmp(&a.faults)
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    let hints = hints(&out_objects, &out_symbols, &credited);
    StartupReport {
        program: Some(program),
        pid: Some(window.pid),
        window: None,
        until: window.cut.name().to_string(),
        until_ms: window.window_ms(last_time),
        faults: total,
        objects: out_objects,
        symbols: out_symbols,
        hints,
    }
}

/// Hints, each tied to the figures that justify it; `credited` holds each
/// object's loader-written pages by the kind of relocation on them.
fn hints(
    objects: &[StartupObject],
    symbols: &[StartupSymbol],
    credited: &BTreeMap<String, BTreeMap<RelocationKind, Credited>>,
) -> Vec<Hint> {
    let mut hints = Vec::new();
    for o in objects {
        if let Some(kinds) = credited.get(&o.object) {
            hints.extend(relocation_hints(o, kinds));
        }
        let text_major: u64 = o
            .sections
            .iter()
            .filter(|s| s.section == ".text")
            .map(|s| s.major)
            .sum();
        if text_major > 0 {
            hints.push(Hint {
                object: o.object.clone(),
                text: format!(
                    "{}: {} major faults on .text at start-up read code from disk; a smaller or better-laid-out \
                     binary (-Os, PGO, BOLT) reads fewer pages",
                    short(&o.object),
                    thousands(text_major)
                ),
                relocations: None,
            });
        }
    }
    for s in symbols
        .iter()
        .filter(|s| s.section == ".bss" && s.faults >= 64)
    {
        let by = s
            .first_toucher
            .as_deref()
            .map(|f| format!(" by {f}()"))
            .unwrap_or_default();
        hints.push(Hint {
            object: s.object.clone(),
            text: format!(
                "{}: {} .bss pages of {} zeroed{by} at start-up; consider allocating them lazily, on first use \
                 (or MAP_POPULATE when all of them are needed)",
                short(&s.object),
                thousands(s.faults),
                s.symbol
            ),
            relocations: None,
        });
    }
    for s in symbols
        .iter()
        .filter(|s| s.section == ".data" && s.faults >= 16)
    {
        hints.push(Hint {
            object: s.object.clone(),
            text: format!(
                "{}: {} pages of .data ({}) copied at start-up (COW), in every process; data that is never \
                 written belongs in .rodata (const)",
                short(&s.object),
                thousands(s.faults),
                s.symbol
            ),
            relocations: None,
        });
    }
    hints
}

/// An object's relocation hints, one per kind of relocation that wrote its
/// pages, when the loader copied at least 4 of them (every process pays
/// one COW fault per page); an object with fewer has nothing worth advice.
fn relocation_hints(o: &StartupObject, kinds: &BTreeMap<RelocationKind, Credited>) -> Vec<Hint> {
    let pages: usize = kinds.values().map(|c| c.pages.len()).sum();
    if pages < 4 {
        return Vec::new();
    }
    kinds
        .iter()
        .map(|(&kind, c)| {
            let sections: Vec<String> = c.sections.iter().cloned().collect();
            let of_kind: u64 = c
                .by_type
                .iter()
                .filter(|(t, _)| crate::analysis::relocation_pages::kind_of(t, o.bind_now) == kind)
                .map(|(_, n)| n)
                .sum();
            let types: Vec<String> = c
                .by_type
                .iter()
                .map(|(t, n)| format!("{} {}", short_type(t), thousands(*n)))
                .collect();
            let head = match kind {
                RelocationKind::Relative => format!("{} RELATIVE relocations", thousands(of_kind)),
                RelocationKind::LazyBinding => {
                    format!("lazy binding of {} functions (JUMP_SLOT)", thousands(of_kind))
                }
                RelocationKind::Symbol => format!("{} symbol relocations", thousands(of_kind)),
            };
            let pages = c.pages.len() as u64;
            let mut text = format!(
                "{}: {head} dirty {} {} of {} at start-up ({} on them), one COW fault per page in every process; {}",
                short(&o.object),
                thousands(pages),
                if pages == 1 { "page" } else { "pages" },
                if sections.is_empty() { "its data".to_string() } else { sections.join(", ") },
                types.join(", "),
                advice(kind),
            );
            if kind == RelocationKind::Relative && o.uses_relr {
                text.push_str(" (DT_RELR already shrinks the table the loader reads, not the pages it writes)");
            }
            Hint {
                object: o.object.clone(),
                text,
                relocations: Some(HintRelocations {
                    kind,
                    pages,
                    sections,
                    relocations: c.by_type.clone(),
                }),
            }
        })
        .collect()
}

/// `RELATIVE` for `R_X86_64_RELATIVE`; `R_X86_64_64` stays whole.
fn short_type(r_type: &str) -> &str {
    match r_type.strip_prefix("R_X86_64_") {
        Some(rest) if !rest.starts_with(|c: char| c.is_ascii_digit()) => rest,
        _ => r_type,
    }
}

/// What removes the pages a kind of relocation writes.
fn advice(kind: RelocationKind) -> &'static str {
    match kind {
        RelocationKind::Relative => {
            "they are pointers in data: tables of offsets (or indices) instead of pointers avoid them"
        }
        RelocationKind::LazyBinding => {
            "ld.so rebases each .got.plt slot at start-up and rewrites it at the function's first call; \
             -z now moves the writes to start-up and makes them read-only (RELRO), -fno-plt or prelinking \
             remove them"
        }
        RelocationKind::Symbol => {
            "each looks a symbol up: hidden visibility (-fvisibility=hidden), -Bsymbolic or fewer \
             exported variables avoid them, and -fPIE avoids COPY relocations"
        }
    }
}

impl StartupReport {
    /// The start-up section of `report.txt`.
    pub fn to_text(&self, top: usize) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let window = match (self.until.as_str(), self.until_ms) {
            ("main", Some(ms)) => format!("exec → main entered after {ms:.1} ms"),
            ("until-ms", Some(ms)) => format!("exec → +{ms:.1} ms (--until-ms)"),
            ("exec", Some(ms)) => format!("exec → next exec after {ms:.1} ms, before main"),
            (_, Some(ms)) => format!("exec → end of recording ({ms:.1} ms; main was not seen)"),
            _ => "exec → main".to_string(),
        };
        let f = &self.faults;
        let of = match (&self.program, self.pid) {
            (Some(program), Some(pid)) => {
                format!(
                    " of {} [pid {pid}]",
                    crate::text::truncate(short(program), 30)
                )
            }
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "Start-up{of} ({window}):\n{} faults (minor {}, major {}, cow {})",
            thousands(f.total()),
            thousands(f.minor),
            thousands(f.major),
            thousands(f.cow)
        );
        let _ = writeln!(
            s,
            "{:<38}{:>9}{:>8}{:>9}{:>9}{:>9}{:>8}",
            "object / section", "minor", "major", "cow", "pages", "of", "share"
        );
        // The objects with most faults, each with its busiest sections;
        // the rest summed, so a big program's table stays readable.
        let mut objects: Vec<&StartupObject> = self.objects.iter().collect();
        objects.sort_by_key(|o| std::cmp::Reverse(o.faults.total()));
        let more = |s: &mut String, what: &str, n: usize, c: ClassCounts, indent: usize| {
            let label = format!(
                "{}and {} more {what}",
                " ".repeat(indent),
                thousands(n as u64)
            );
            let _ = writeln!(
                s,
                "{label:<38}{:>9}{:>8}{:>9}",
                thousands(c.minor),
                thousands(c.major),
                thousands(c.cow)
            );
        };
        for o in objects.iter().take(top) {
            let _ = writeln!(
                s,
                "{:<38}{:>9}{:>8}{:>9}{:>9}{:>9}{:>7.1}%",
                crate::text::truncate(short(&o.object), 38),
                thousands(o.faults.minor),
                thousands(o.faults.major),
                thousands(o.faults.cow),
                "",
                "",
                o.share
            );
            let mut sections: Vec<&StartupSection> = o.sections.iter().collect();
            sections.sort_by_key(|sec| std::cmp::Reverse(sec.minor + sec.major + sec.cow));
            let shown = top.min(sections.len());
            for sec in &sections[..shown] {
                let opt = |v: Option<u64>| v.map(thousands).unwrap_or_default();
                let _ = writeln!(
                    s,
                    "  {:<36}{:>9}{:>8}{:>9}{:>9}{:>9}",
                    crate::text::truncate(&sec.section, 36),
                    thousands(sec.minor),
                    thousands(sec.major),
                    thousands(sec.cow),
                    opt(sec.pages_touched),
                    opt(sec.pages_total)
                );
            }
            if sections.len() > shown {
                let rest = sections[shown..]
                    .iter()
                    .fold(ClassCounts::default(), |mut c, sec| {
                        c.minor += sec.minor;
                        c.major += sec.major;
                        c.cow += sec.cow;
                        c
                    });
                more(&mut s, "sections", sections.len() - shown, rest, 2);
            }
            if let Some(summary) = o.relocation_summary() {
                wrap(&mut s, "  relocations:", "    ", &summary);
            }
        }
        if objects.len() > top {
            let rest = objects[top..]
                .iter()
                .fold(ClassCounts::default(), |mut c, o| {
                    c.minor += o.faults.minor;
                    c.major += o.faults.major;
                    c.cow += o.faults.cow;
                    c
                });
            more(&mut s, "objects", objects.len() - top, rest, 0);
        }
        if !self.symbols.is_empty() {
            let _ = writeln!(s, "\nStart-up data symbols:");
            let _ = writeln!(
                s,
                "{:>9}  {:<22} {:<14} {:<24} first touched by",
                "faults", "object", "section", "symbol"
            );
            for sym in self.symbols.iter().take(top) {
                let _ = writeln!(
                    s,
                    "{:>9}  {:<22} {:<14} {:<24} {}",
                    thousands(sym.faults),
                    crate::text::truncate(short(&sym.object), 22),
                    crate::text::truncate(&sym.section, 14),
                    crate::text::truncate(&sym.symbol, 24),
                    crate::text::truncate(sym.first_toucher.as_deref().unwrap_or("-"), 24)
                );
            }
        }
        if !self.hints.is_empty() {
            let _ = writeln!(s, "\nHints:");
            for h in &self.hints {
                wrap(&mut s, "  -", "   ", &h.text);
            }
        }
        s
    }
}

/// Appends `text` word-wrapped at 98 columns: `first` starts the first line,
/// `rest` the following ones.
fn wrap(out: &mut String, first: &str, rest: &str, text: &str) {
    let mut line = String::from(first);
    for word in text.split(' ') {
        if line.chars().count() + 1 + word.chars().count() > 98 && line.len() > rest.len() {
            out.push_str(&line);
            out.push('\n');
            line = String::from(rest);
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfprof_symbolize::Options;

    /// One step of a replay: what happened, and (for a fault) the window the
    /// tracker must put it in.
    enum Step {
        Exec(i32, &'static str, u64),
        Main(i32, u64),
        Fork(i32),
        Module(i32, &'static str),
        Fault(i32, u64, FaultClass, Option<u32>),
    }
    use Step::*;

    fn replay(tracker: &mut StartupTracker, steps: &[Step]) -> Modules {
        let mut modules = Modules::default();
        let mut symbolizer = Symbolizer::new(Options::default());
        for (i, step) in steps.iter().enumerate() {
            match *step {
                Exec(pid, comm, t) => tracker.on_exec(pid, comm, t),
                Main(pid, t) => tracker.on_main(pid, t),
                Fork(pid) => tracker.on_new_process(pid),
                Module(pid, path) => {
                    let id = modules.intern(path, None);
                    tracker.on_module(pid, id);
                }
                Fault(pid, t, class, want) => {
                    let got = tracker.is_startup(pid, t, &[], class, 1, &modules, &mut symbolizer);
                    assert_eq!(got, want, "step {i}");
                }
            }
        }
        modules
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn a_window_per_exec_in_every_process() {
        use FaultClass::{Cow, Minor};
        let mut t = StartupTracker::new(None, None);
        let modules = replay(
            &mut t,
            &[
                // sh: exec, faults, main (the uprobe), no more start-up.
                Exec(1, "sh", MS),
                Module(1, "/usr/bin/dash"),
                Module(1, "/usr/lib/ld.so"),
                Module(1, "/usr/bin/dash"),
                Fault(1, 2 * MS, Minor, Some(0)),
                Fault(1, 3 * MS, Cow, Some(0)),
                Main(1, 4 * MS),
                Fault(1, 5 * MS, Minor, None),
                // Its forked child: no window until it execs.
                Fault(2, 6 * MS, Cow, None),
                Exec(2, "env", 7 * MS),
                Module(2, "/usr/bin/env"),
                Fault(2, 8 * MS, Minor, Some(1)),
                // env execs the program before main: its window closes there.
                Exec(2, "app", 9 * MS),
                Module(2, "/opt/app"),
                Fault(2, 10 * MS, Minor, Some(2)),
                Fault(2, 11 * MS, Minor, Some(2)),
                // Another process's main does not close it.
                Main(1, 12 * MS),
                Fault(2, 13 * MS, Cow, Some(2)),
                // pid 2 reused by a new process: the old window takes no more.
                Fork(2),
                Fault(2, 14 * MS, Cow, None),
            ],
        );
        let w = &t.windows;
        assert_eq!(w.len(), 3);
        let pids: Vec<i32> = w.iter().map(|w| w.pid).collect();
        assert_eq!(pids, [1, 2, 2]);
        let cuts: Vec<&Cut> = w.iter().map(|w| &w.cut).collect();
        assert_eq!(cuts, [&Cut::Main(4 * MS), &Cut::Exec(9 * MS), &Cut::Open]);
        let counts: Vec<(u64, u64)> = w.iter().map(|w| (w.faults.minor, w.faults.cow)).collect();
        assert_eq!(counts, [(1, 1), (1, 0), (2, 1)]);
        let load: Vec<Vec<&str>> = w
            .iter()
            .map(|w| {
                w.load_order
                    .iter()
                    .map(|m| modules.get(*m).path.as_str())
                    .collect()
            })
            .collect();
        assert_eq!(
            load,
            [
                vec!["/usr/bin/dash", "/usr/lib/ld.so"],
                vec!["/usr/bin/env"],
                vec!["/opt/app"]
            ]
        );
        assert_eq!(w[1].window_ms(None), Some(2.0));
        assert_eq!(w[2].window_ms(Some(20 * MS)), Some(11.0));
        assert_eq!(w[2].window_ms(None), None);
        assert_eq!(t.first_exec(), Some(MS));
    }

    #[test]
    fn until_ms_closes_each_window_after_its_exec() {
        use FaultClass::Minor;
        let mut t = StartupTracker::new(Some(2.0), None);
        replay(
            &mut t,
            &[
                Exec(1, "a", 0),
                Fault(1, MS, Minor, Some(0)),
                Exec(2, "b", 2 * MS),
                Fault(1, 2 * MS, Minor, None),
                Fault(1, MS, Minor, None),
                Fault(2, 3 * MS, Minor, Some(1)),
                Fault(2, 4 * MS, Minor, None),
            ],
        );
        let cuts: Vec<&Cut> = t.windows.iter().map(|w| &w.cut).collect();
        assert_eq!(cuts, [&Cut::UntilMs(2 * MS), &Cut::UntilMs(4 * MS)]);
    }

    #[test]
    fn without_exec_records_the_first_faulting_process() {
        use FaultClass::Minor;
        let mut t = StartupTracker::new(None, None);
        replay(
            &mut t,
            &[
                Fault(7, 5, Minor, Some(0)),
                Fault(8, 6, Minor, None),
                Fault(7, 7, Minor, Some(0)),
            ],
        );
        assert_eq!(t.windows.len(), 1);
        assert_eq!(t.windows[0].exec_time, 5);

        let mut off = StartupTracker::new(None, None);
        off.disable();
        replay(
            &mut off,
            &[
                Exec(1, "a", 0),
                Fault(1, 1, Minor, None),
                Fault(2, 2, Minor, None),
            ],
        );
        assert!(off.windows.is_empty());
    }

    #[test]
    fn choose_by_faults_name_or_pid() {
        use FaultClass::Minor;
        let mut t = StartupTracker::new(None, None);
        replay(
            &mut t,
            &[
                Exec(1, "sh", 0),
                Fault(1, 1, Minor, Some(0)),
                Fault(1, 2, Minor, Some(0)),
                Exec(2, "app", 3),
                Fault(2, 4, Minor, Some(1)),
                Fault(2, 5, Minor, Some(1)),
                Fault(2, 6, Minor, Some(1)),
                Exec(3, "app", 7),
                Fault(3, 8, Minor, Some(2)),
                Exec(4, "cc1", 9),
                Fault(4, 10, Minor, Some(3)),
                Fault(4, 11, Minor, Some(3)),
                Fault(4, 12, Minor, Some(3)),
            ],
        );
        let path = |w: &Window| match w.comm.as_str() {
            "sh" => "/usr/bin/dash".to_string(),
            c => format!("/opt/{c}"),
        };
        for (of, want) in [
            // The most faults; the earliest of a tie.
            (None, Some(1)),
            (Some("sh"), Some(0)),
            (Some("dash"), Some(0)),
            (Some("/usr/bin/dash"), Some(0)),
            (Some("app"), Some(1)),
            (Some("/opt/cc1"), Some(3)),
            (Some("3"), Some(2)),
            (Some("opt/app"), None),
            (Some("ls"), None),
        ] {
            assert_eq!(t.choose(of, path), want, "{of:?}");
        }
    }

    #[test]
    fn others_are_listed_by_faults_up_to_top() {
        let window = |program: &str, minor| StartupWindow {
            program: program.to_string(),
            pid: 10,
            exec_ms: 1.0,
            end_ms: Some(3.5),
            until: "main".to_string(),
            faults: ClassCounts {
                minor,
                major: 0,
                cow: 1,
            },
        };
        let all = vec![
            window("/bin/a", 5),
            window("/bin/b", 50),
            window("/bin/c", 500),
            window("/bin/d", 7),
        ];
        let text = others_text(&all, Some(2), 2);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert!(lines[1].starts_with("Other start-up windows (3,"), "{text}");
        assert!(lines[3].starts_with("b ") && lines[3].contains("2.5 ms  main"));
        assert!(lines[4].starts_with("d "));
        assert!(
            lines[5].starts_with("and 1 more") && lines[5].contains(" 5 "),
            "{text}"
        );
        assert_eq!(others_text(&all[..1], Some(0), 10), "");
    }

    /// `--top` bounds the objects and each object's sections; the rest is
    /// summed, never dropped.
    #[test]
    fn objects_and_sections_are_bounded_by_top() {
        let counts = |minor, cow| ClassCounts {
            minor,
            major: 0,
            cow,
        };
        let object = |name: &str, minor: u64| StartupObject {
            object: name.into(),
            faults: counts(minor * 3, 0),
            share: 0.0,
            sections: [".data", ".bss", ".text"]
                .iter()
                .enumerate()
                .map(|(i, sec)| StartupSection {
                    section: sec.to_string(),
                    minor: minor + i as u64,
                    major: 0,
                    cow: 0,
                    pages_touched: None,
                    pages_total: None,
                })
                .collect(),
            relocations: BTreeMap::new(),
            relr: 0,
            uses_relr: false,
            bind_now: false,
            relro: false,
            relocation_pages: 0,
            loader: ClassCounts::default(),
        };
        let report = StartupReport {
            program: None,
            pid: None,
            window: None,
            until: "main".into(),
            until_ms: Some(1.0),
            faults: counts(66, 0),
            objects: vec![
                object("/lib/a.so", 1),
                object("/lib/b.so", 10),
                object("/lib/c.so", 11),
            ],
            symbols: Vec::new(),
            hints: Vec::new(),
        };
        let text = report.to_text(2);
        let lines: Vec<&str> = text.lines().collect();
        // The two busiest objects, each with its two busiest sections.
        let c = lines.iter().position(|l| l.starts_with("c.so")).unwrap();
        let b = lines.iter().position(|l| l.starts_with("b.so")).unwrap();
        assert!(c < b, "{text}");
        assert!(lines[c + 1].trim_start().starts_with(".text"), "{text}");
        assert!(lines[c + 2].trim_start().starts_with(".bss"), "{text}");
        assert!(lines[c + 3].contains("and 1 more sections"), "{text}");
        assert!(lines[c + 3].split_whitespace().any(|w| w == "11"), "{text}");
        assert!(!text.contains("a.so"), "{text}");
        let more = lines
            .iter()
            .find(|l| l.starts_with("and 1 more objects"))
            .unwrap();
        assert!(more.split_whitespace().any(|w| w == "3"), "{text}");
    }
}
