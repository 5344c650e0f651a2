//! The start-up report: per object and section, the loader's relocations,
//! the data symbols that fault, and hints tied to their figures; built from
//! the faults of the window shown in full (`analysis::startup` finds the
//! windows).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::classify::FaultClass;
use crate::analysis::relocation_pages::{credit_pages, Credited, LoaderWrite, RelocationKind};
use crate::analysis::startup::{ClassCounts, Cut, Window};
use crate::text::thousands;

/// What ended a start-up window (report.json's `until`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Until {
    /// `main` was entered.
    Main,
    /// `--until-ms` elapsed.
    UntilMs,
    /// The process exec'd another program before `main`.
    Exec,
    /// The recording ended before `main` was seen.
    End,
}

impl Until {
    /// How `cut` closed its window.
    pub fn of(cut: &Cut) -> Until {
        match cut {
            Cut::Main(_) => Until::Main,
            Cut::UntilMs(_) => Until::UntilMs,
            Cut::Exec(_) => Until::Exec,
            Cut::Open => Until::End,
        }
    }

    /// As in report.json: `main`, `until-ms`, `exec`, `end`.
    pub fn name(self) -> &'static str {
        match self {
            Until::Main => "main",
            Until::UntilMs => "until-ms",
            Until::Exec => "exec",
            Until::End => "end",
        }
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
    /// What ended it.
    pub until: Until,
    /// Faults in the window.
    pub faults: ClassCounts,
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
    /// What ended the window.
    pub until: Until,
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
        until: Until::of(&window.cut),
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
