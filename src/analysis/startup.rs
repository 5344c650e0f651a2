//! Start-up window: which faults of the profiled program happen between its
//! `exec` and the moment it enters `main`.
//!
//! The window closes at the first fault of the program's process whose stack
//! holds `main`, libc's `__libc_start_call_main` (the frame that calls
//! `main`; constructors run from `__libc_start_main` before it) or the exit
//! path (`exit`, `_dl_fini`), or, with
//! `--until-ms N`, N ms after the exec. Faults are replayed in time order, so
//! every fault before the closing one belongs to start-up. Child processes and
//! other programs are not part of the program's start-up.

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

/// How the window ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Cut {
    /// Still open (the recording ended before `main` was seen).
    Open,
    /// `main` was entered at this time.
    Main(u64),
    /// `--until-ms` elapsed at this time.
    UntilMs(u64),
}

/// Tracks the start-up window during replay.
pub struct StartupTracker {
    until_ns: Option<u64>,
    /// The program's process: the first one that execs.
    pub root_pid: Option<i32>,
    /// Time of its exec.
    pub exec_time: Option<u64>,
    /// How (and when) the window closed.
    pub cut: Cut,
    /// Modules in the order the program mapped them (load order).
    pub load_order: Vec<ModuleId>,
    markers: FxHashMap<ModuleId, Vec<Range<u64>>>,
    disabled: bool,
}

impl StartupTracker {
    /// A tracker; `until_ms` replaces `main` detection.
    pub fn new(until_ms: Option<f64>) -> Self {
        StartupTracker {
            until_ns: until_ms.map(|ms| (ms * 1e6) as u64),
            root_pid: None,
            exec_time: None,
            cut: Cut::Open,
            load_order: Vec::new(),
            markers: FxHashMap::default(),
            disabled: false,
        }
    }

    /// No start-up window (attached or system-wide recordings).
    pub fn disable(&mut self) {
        self.disabled = true;
    }

    /// An exec: the first one names the program.
    pub fn on_exec(&mut self, pid: i32, time: u64) {
        if self.root_pid.is_none() && !self.disabled {
            self.root_pid = Some(pid);
            self.exec_time = Some(time);
        }
    }

    /// The uprobe on `main` fired in `pid`: start-up ends here, exactly.
    pub fn on_main(&mut self, pid: i32, time: u64) {
        if self.root_pid == Some(pid) && matches!(self.cut, Cut::Open) {
            self.cut = Cut::Main(time);
        }
    }

    /// A module mapped by `pid`.
    pub fn on_module(&mut self, pid: i32, module: ModuleId) {
        if self.root_pid == Some(pid)
            && matches!(self.cut, Cut::Open)
            && !self.load_order.contains(&module)
        {
            self.load_order.push(module);
        }
    }

    /// Decides whether a fault of `pid` at `time` with `frames` (leaf first)
    /// belongs to start-up, closing the window when it should.
    pub fn is_startup(
        &mut self,
        pid: i32,
        time: u64,
        frames: &[FrameKey],
        modules: &Modules,
        symbolizer: &mut Symbolizer,
    ) -> bool {
        if self.disabled {
            return false;
        }
        if self.root_pid.is_none() {
            // A perf recording without exec records: the first faulting process.
            self.root_pid = Some(pid);
            self.exec_time = Some(time);
        }
        if self.root_pid != Some(pid) || !matches!(self.cut, Cut::Open) {
            return false;
        }
        if let (Some(until), Some(exec)) = (self.until_ns, self.exec_time) {
            if time.saturating_sub(exec) >= until {
                self.cut = Cut::UntilMs(time);
                return false;
            }
            return true;
        }
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
                self.cut = Cut::Main(time);
                return false;
            }
        }
        true
    }

    /// Milliseconds from exec to the cut (or to `last_time` when still open).
    pub fn window_ms(&self, last_time: Option<u64>) -> Option<f64> {
        let exec = self.exec_time?;
        let end = match self.cut {
            Cut::Main(t) | Cut::UntilMs(t) => t,
            Cut::Open => last_time?,
        };
        Some(end.saturating_sub(exec) as f64 / 1e6)
    }
}

// ---------------------------------------------------------------------------
// The start-up report: per object and section, the loader's relocations, the
// data symbols that fault, and hints tied to their figures.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::classify::FaultClass;
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
    fn add(&mut self, class: FaultClass, n: u64) {
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
}

/// The start-up section of the report.
#[derive(Debug, Clone, Serialize)]
pub struct StartupReport {
    /// What ended the window: `main`, `until-ms`, or `end` (main never seen).
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
    /// Taken by the loader's relocation code.
    pub loader: bool,
}

/// ELF facts about an object, from the symbolizer.
#[derive(Default)]
pub struct ObjectFacts {
    /// Section name → pages spanned.
    pub section_pages: BTreeMap<String, u64>,
    /// Relocations.
    pub relocations: Option<pfprof_symbolize::RelocationInfo>,
}

/// Functions of ld.so that apply relocations (inlined ones included).
pub fn is_loader_relocation(function: &str) -> bool {
    [
        "_dl_relocate_object",
        "elf_dynamic_do_Rel",
        "elf_machine_rel",
        "_dl_relocate_static_pie",
    ]
    .iter()
    .any(|f| function.starts_with(f))
}

fn short(object: &str) -> &str {
    if object.starts_with('[') {
        object
    } else {
        object.rsplit('/').next().unwrap_or(object)
    }
}

/// Builds the start-up report from the symbolized start-up faults.
pub fn build(
    tracker: &StartupTracker,
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
    }
    let mut objects: BTreeMap<&str, Acc> = BTreeMap::new();
    let mut symbols: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for row in rows {
        total.add(row.class, row.count);
        let acc = objects.entry(&row.object).or_default();
        acc.faults.add(row.class, row.count);
        if row.loader {
            acc.loader.add(row.class, row.count);
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
    for object in order {
        let acc = &objects[object];
        let f = facts.get(object).unwrap_or(&no_facts);
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
    let hints = hints(&out_objects, &out_symbols);
    StartupReport {
        until: match tracker.cut {
            Cut::Main(_) => "main",
            Cut::UntilMs(_) => "until-ms",
            Cut::Open => "end",
        }
        .to_string(),
        until_ms: tracker.window_ms(last_time),
        faults: total,
        objects: out_objects,
        symbols: out_symbols,
        hints,
    }
}

/// Hints, each tied to the figures that justify it.
fn hints(objects: &[StartupObject], symbols: &[StartupSymbol]) -> Vec<Hint> {
    let mut hints = Vec::new();
    for o in objects {
        let relative = o.relocations.get("R_X86_64_RELATIVE").copied().unwrap_or(0) + o.relr;
        // The loader's relocation writes: one COW per page, in every process.
        if o.loader.cow >= 4 && relative > 0 {
            let sections: Vec<&str> = o
                .sections
                .iter()
                .filter(|s| {
                    s.cow > 0
                        && [
                            ".data.rel.ro",
                            ".got",
                            ".data",
                            ".init_array",
                            ".fini_array",
                        ]
                        .contains(&s.section.as_str())
                })
                .map(|s| s.section.as_str())
                .collect();
            let mut text = format!(
                "{}: {} RELATIVE relocations dirty {} pages of {} at start-up, one COW fault per page in every \
                 process; tables of offsets instead of pointers avoid them",
                short(&o.object),
                thousands(relative),
                thousands(o.loader.cow),
                if sections.is_empty() { "its data".to_string() } else { sections.join(", ") }
            );
            if o.uses_relr {
                text.push_str(" (DT_RELR already shrinks the table the loader reads, not the pages it writes)");
            }
            hints.push(Hint {
                object: o.object.clone(),
                text,
            });
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
        });
    }
    hints
}

impl StartupReport {
    /// The start-up section of `report.txt`.
    pub fn to_text(&self, top: usize) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let window = match (self.until.as_str(), self.until_ms) {
            ("main", Some(ms)) => format!("exec → main entered after {ms:.1} ms"),
            ("until-ms", Some(ms)) => format!("exec → +{ms:.1} ms (--until-ms)"),
            (_, Some(ms)) => format!("exec → end of recording ({ms:.1} ms; main was not seen)"),
            _ => "exec → main".to_string(),
        };
        let f = &self.faults;
        let _ = writeln!(
            s,
            "Start-up ({window}): {} faults (minor {}, major {}, cow {})",
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
        for o in &self.objects {
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
            for sec in &o.sections {
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
            if !o.relocations.is_empty() || o.relr > 0 {
                let mut types: Vec<String> = o
                    .relocations
                    .iter()
                    .map(|(t, n)| format!("{t} {}", thousands(*n)))
                    .collect();
                if o.uses_relr {
                    types.push(format!("RELR {}", thousands(o.relr)));
                }
                let yes = |b: bool| if b { "yes" } else { "no" };
                wrap(
                    &mut s,
                    "  relocations:",
                    "    ",
                    &format!(
                        "{} on {} pages; BIND_NOW {}, RELRO {}; loader faults: cow {}, minor {}",
                        types.join(", "),
                        thousands(o.relocation_pages),
                        yes(o.bind_now),
                        yes(o.relro),
                        thousands(o.loader.cow),
                        thousands(o.loader.minor)
                    ),
                );
            }
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
