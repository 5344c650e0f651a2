//! The start-up report: per object and section, the loader's relocations,
//! the data symbols that fault, and hints tied to their figures; built from
//! the faults of the window shown in full (`analysis::startup` finds the
//! windows). The outputs word it (the window's span, the hints, the places).

use std::collections::{BTreeMap, BTreeSet};

use pfprof_symbolize::RelocType;
use serde::Serialize;

use crate::analysis::classify::{ClassCounts, FaultClass};
use crate::analysis::relocation_pages::{credit_pages, Credited, LoaderWrite, RelocationKind};
use crate::analysis::startup::{Cut, Window};
use crate::model::region::Region;

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

/// Where in an object start-up faults landed (report.json's `section`
/// names it: the section, `(none)`, or the region as `[anon]`). The
/// variants are in the order of those names: rows sort as they did.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StartupPlace {
    /// A file page outside every section.
    NoSection,
    /// An ELF section.
    Section(String),
    /// Memory of no file: heap, stack, anonymous, special.
    Region(Region),
}

impl StartupPlace {
    /// Whether it is the ELF section `name`.
    pub fn is_section(&self, name: &str) -> bool {
        matches!(self, StartupPlace::Section(s) if s == name)
    }
}

/// One section of an object.
#[derive(Debug, Clone, Serialize)]
pub struct StartupSection {
    /// The section, or where else the faults landed.
    pub section: StartupPlace,
    /// Faults.
    #[serde(flatten)]
    pub faults: ClassCounts,
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
    pub relocations: BTreeMap<RelocType, u64>,
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
    pub section: StartupPlace,
    /// Symbol.
    pub symbol: String,
    /// Faults.
    pub faults: u64,
    /// The function that touched it first.
    pub first_toucher: Option<String>,
}

/// A suggestion about an object, with the figures that justify it (the
/// outputs word it; report.json has its sentence as `text`).
#[derive(Debug, Clone, PartialEq)]
pub struct Hint {
    /// The object it is about.
    pub object: String,
    /// What it suggests, and from what.
    pub kind: HintKind,
}

/// What a hint is about.
#[derive(Debug, Clone, PartialEq)]
pub enum HintKind {
    /// The loader's relocations of one kind dirty pages (one COW fault per
    /// page in every process).
    Relocations {
        /// Relocations of that kind on the pages.
        of_kind: u64,
        /// The object uses DT_RELR (which does not spare the pages).
        uses_relr: bool,
        /// The pages and what is on them.
        pages: HintRelocations,
    },
    /// Major faults on `.text`: code read from disk.
    TextMajor {
        /// How many.
        faults: u64,
    },
    /// A large `.bss` symbol zeroed at start-up.
    BssZeroed {
        /// The symbol.
        symbol: String,
        /// Its faults (pages).
        faults: u64,
        /// The function that touched it first.
        by: Option<String>,
    },
    /// `.data` copied at start-up.
    DataCopied {
        /// The symbol.
        symbol: String,
        /// Its faults (pages).
        faults: u64,
    },
}

/// The pages a relocation hint is about, and what is on them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HintRelocations {
    /// What wrote them.
    pub kind: RelocationKind,
    /// Pages (one COW fault each).
    pub pages: u64,
    /// Every section among them.
    pub sections: Vec<String>,
    /// The relocations on them, by type.
    pub relocations: BTreeMap<RelocType, u64>,
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
    pub section: StartupPlace,
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

/// The first code to touch each data symbol: (object, section, symbol) to
/// the function.
pub type FirstTouchers = BTreeMap<(String, String, String), String>;

/// Builds the start-up report from the symbolized start-up faults.
pub fn build(
    window: &Window,
    program: String,
    last_time: Option<u64>,
    rows: &[StartupFault],
    first_touchers: &FirstTouchers,
    facts: &BTreeMap<String, ObjectFacts>,
    load_order: &[String],
) -> StartupReport {
    let summed = Summed::of(rows);
    let no_facts = ObjectFacts::default();
    let mut credited = CreditedPages::new();
    let objects: Vec<StartupObject> = object_order(&summed.objects, load_order)
        .into_iter()
        .map(|object| {
            let acc = &summed.objects[object];
            let f = facts.get(object).unwrap_or(&no_facts);
            if let Some(r) = &f.relocations {
                let pages = credit_pages(&acc.written, &r.page_writes, r.bind_now);
                credited.insert(object.to_string(), pages);
            }
            object_row(object, acc, f, summed.total)
        })
        .collect();
    let symbols = symbol_rows(summed.symbols, first_touchers);
    let hints = hints(&objects, &symbols, &credited);
    StartupReport {
        program: Some(program),
        pid: Some(window.pid),
        window: None,
        until: Until::of(&window.cut),
        until_ms: window.window_ms(last_time),
        faults: summed.total,
        objects,
        symbols,
        hints,
    }
}

/// The start-up faults summed per object, section and data symbol.
struct Summed<'r> {
    total: ClassCounts,
    objects: BTreeMap<&'r str, ObjectSums>,
    symbols: BTreeMap<(&'r str, &'r StartupPlace, &'r str), u64>,
}

/// One object's faults.
#[derive(Default)]
struct ObjectSums {
    faults: ClassCounts,
    /// Those the loader's relocation code took.
    loader: ClassCounts,
    /// Per section: faults and the pages they touched.
    sections: BTreeMap<StartupPlace, (ClassCounts, BTreeSet<u64>)>,
    /// Pages the loader copied, and its code that did.
    written: BTreeMap<u64, LoaderWrite>,
}

impl<'r> Summed<'r> {
    fn of(rows: &'r [StartupFault]) -> Summed<'r> {
        let mut summed = Summed {
            total: ClassCounts::default(),
            objects: BTreeMap::new(),
            symbols: BTreeMap::new(),
        };
        for row in rows {
            summed.total.add(row.class, row.count);
            summed.objects.entry(&row.object).or_default().add(row);
            if let Some(symbol) = &row.symbol {
                *summed
                    .symbols
                    .entry((&row.object, &row.section, symbol))
                    .or_default() += row.count;
            }
        }
        summed
    }
}

impl ObjectSums {
    fn add(&mut self, row: &StartupFault) {
        self.faults.add(row.class, row.count);
        if let Some(write) = row.loader {
            self.loader.add(row.class, row.count);
            if let (FaultClass::Cow, Some(page)) = (row.class, row.page) {
                // A function that tells the kind wins over one that does not.
                let at = self.written.entry(page).or_insert(write);
                if *at == LoaderWrite::Any {
                    *at = write;
                }
            }
        }
        let section = self.sections.entry(row.section.clone()).or_default();
        section.0.add(row.class, row.count);
        if let Some(page) = row.page {
            section.1.insert(page);
        }
    }
}

/// The objects in load order, then the rest by faults.
fn object_order<'r>(
    objects: &BTreeMap<&'r str, ObjectSums>,
    load_order: &'r [String],
) -> Vec<&'r str> {
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
    order
}

/// An object's row: its faults, sections (busiest first) and relocations.
fn object_row(
    object: &str,
    acc: &ObjectSums,
    f: &ObjectFacts,
    total: ClassCounts,
) -> StartupObject {
    let mut sections: Vec<StartupSection> = acc
        .sections
        .iter()
        .map(|(place, (faults, pages))| StartupSection {
            section: place.clone(),
            faults: *faults,
            pages_touched: (!pages.is_empty()).then_some(pages.len() as u64),
            pages_total: match place {
                StartupPlace::Section(name) => f.section_pages.get(name).copied(),
                _ => None,
            },
        })
        .collect();
    sections.sort_by_key(|s| std::cmp::Reverse(s.faults.total()));
    let r = f.relocations.as_ref();
    StartupObject {
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
        relocation_pages: r.map_or(0, relocation_pages),
        loader: acc.loader,
    }
}

/// Pages the start-up relocations write: ld.so also rebases lazy JUMP_SLOT
/// entries of a relocated object at start-up, so their pages are written
/// too.
fn relocation_pages(r: &pfprof_symbolize::RelocationInfo) -> u64 {
    let mut pages: Vec<u64> = r
        .pages
        .iter()
        .chain(&r.lazy_jump_slot_pages)
        .copied()
        .collect();
    pages.sort_unstable();
    pages.dedup();
    pages.len() as u64
}

/// The data symbols, most faults first, with the code that touched each
/// first.
fn symbol_rows(
    symbols: BTreeMap<(&str, &StartupPlace, &str), u64>,
    first_touchers: &FirstTouchers,
) -> Vec<StartupSymbol> {
    let mut rows: Vec<StartupSymbol> = symbols
        .into_iter()
        .map(|((object, place, symbol), faults)| StartupSymbol {
            first_toucher: match place {
                StartupPlace::Section(section) => first_touchers
                    .get(&(object.to_string(), section.clone(), symbol.to_string()))
                    .cloned(),
                _ => None,
            },
            object: object.to_string(),
            section: place.clone(),
            symbol: symbol.to_string(),
            faults,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.faults
            .cmp(&a.faults)
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    rows
}

/// Each object's loader-written pages by the kind of relocation on them.
type CreditedPages = BTreeMap<String, BTreeMap<RelocationKind, Credited>>;

/// Hints, each tied to the figures that justify it; `credited` holds each
/// object's loader-written pages by the kind of relocation on them.
fn hints(
    objects: &[StartupObject],
    symbols: &[StartupSymbol],
    credited: &CreditedPages,
) -> Vec<Hint> {
    let mut hints = Vec::new();
    let hint = |object: &str, kind| Hint {
        object: object.to_string(),
        kind,
    };
    for o in objects {
        if let Some(kinds) = credited.get(&o.object) {
            hints.extend(relocation_hints(o, kinds));
        }
        let text_major: u64 = o
            .sections
            .iter()
            .filter(|s| s.section.is_section(".text"))
            .map(|s| s.faults.major)
            .sum();
        if text_major > 0 {
            hints.push(hint(&o.object, HintKind::TextMajor { faults: text_major }));
        }
    }
    for s in symbols
        .iter()
        .filter(|s| s.section.is_section(".bss") && s.faults >= 64)
    {
        let kind = HintKind::BssZeroed {
            symbol: s.symbol.clone(),
            faults: s.faults,
            by: s.first_toucher.clone(),
        };
        hints.push(hint(&s.object, kind));
    }
    for s in symbols
        .iter()
        .filter(|s| s.section.is_section(".data") && s.faults >= 16)
    {
        let kind = HintKind::DataCopied {
            symbol: s.symbol.clone(),
            faults: s.faults,
        };
        hints.push(hint(&s.object, kind));
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
        .map(|(&kind, c)| Hint {
            object: o.object.clone(),
            kind: HintKind::Relocations {
                of_kind: c
                    .by_type
                    .iter()
                    .filter(|(t, _)| {
                        crate::analysis::relocation_pages::kind_of(**t, o.bind_now) == kind
                    })
                    .map(|(_, n)| n)
                    .sum(),
                uses_relr: o.uses_relr,
                pages: HintRelocations {
                    kind,
                    pages: c.pages.len() as u64,
                    sections: c.sections.iter().cloned().collect(),
                    relocations: c.by_type.clone(),
                },
            },
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// One object with every kind of hint: relocations of each kind (RELR
    /// in use), major faults on .text, a big .bss symbol and copied .data.
    fn hint_input() -> (Vec<StartupObject>, Vec<StartupSymbol>, CreditedPages) {
        const R_64: RelocType = RelocType(1);
        const GLOB_DAT: RelocType = RelocType(6);
        let section = |name: &str, major| StartupSection {
            section: StartupPlace::Section(name.into()),
            faults: ClassCounts {
                minor: 1,
                major,
                cow: 0,
            },
            pages_touched: None,
            pages_total: None,
        };
        let object = StartupObject {
            object: "/usr/lib/libbig.so.1".into(),
            faults: ClassCounts::default(),
            share: 0.0,
            sections: vec![section(".text", 7), section(".data", 0)],
            relocations: BTreeMap::new(),
            relr: 0,
            uses_relr: true,
            bind_now: false,
            relro: true,
            relocation_pages: 9,
            loader: ClassCounts::default(),
        };
        let credited =
            |pages: std::ops::Range<u64>, sections: &[&str], types: &[(RelocType, u64)]| Credited {
                pages: pages.collect(),
                sections: sections.iter().map(|s| s.to_string()).collect(),
                by_type: types.iter().copied().collect(),
            };
        let kinds = [
            (
                RelocationKind::Relative,
                credited(
                    0..5,
                    &[".data.rel.ro", ".init_array"],
                    &[(RelocType::RELATIVE, 8195), (R_64, 3)],
                ),
            ),
            (
                RelocationKind::LazyBinding,
                credited(10..11, &[".got.plt"], &[(RelocType::JUMP_SLOT, 1_200)]),
            ),
            (
                RelocationKind::Symbol,
                credited(20..23, &[], &[(GLOB_DAT, 40), (R_64, 2)]),
            ),
        ];
        let symbol =
            |section: &str, symbol: &str, faults, first_toucher: Option<&str>| StartupSymbol {
                object: "/usr/lib/libbig.so.1".into(),
                section: StartupPlace::Section(section.into()),
                symbol: symbol.into(),
                faults,
                first_toucher: first_toucher.map(Into::into),
            };
        let symbols = vec![
            symbol(".bss", "arena", 1_024, Some("init_arena")),
            symbol(".bss", "pool", 64, None),
            symbol(".bss", "small", 63, None),
            symbol(".data", "table", 16, None),
            symbol(".data", "tiny", 15, None),
        ];
        (
            vec![object],
            symbols,
            [(
                "/usr/lib/libbig.so.1".to_string(),
                kinds.into_iter().collect(),
            )]
            .into_iter()
            .collect(),
        )
    }

    /// The hints of [`hint_input`].
    pub(crate) fn hints_of_input() -> Vec<Hint> {
        let (objects, symbols, credited) = hint_input();
        hints(&objects, &symbols, &credited)
    }

    /// Each kind of hint from its figures: a relocation hint per kind
    /// that wrote pages (counting only that kind's relocations), .text
    /// majors, .bss from 64 pages, .data from 16.
    #[test]
    fn hints_from_figures() {
        let (objects, symbols, credited) = hint_input();
        let kinds: Vec<HintKind> = hints(&objects, &symbols, &credited)
            .into_iter()
            .map(|h| h.kind)
            .collect();
        let of_kind: Vec<(RelocationKind, u64)> = kinds
            .iter()
            .filter_map(|k| match k {
                HintKind::Relocations { of_kind, pages, .. } => Some((pages.kind, *of_kind)),
                _ => None,
            })
            .collect();
        assert_eq!(
            of_kind,
            [
                (RelocationKind::Relative, 8195),
                (RelocationKind::LazyBinding, 1200),
                (RelocationKind::Symbol, 42)
            ]
        );
        assert_eq!(kinds[3], HintKind::TextMajor { faults: 7 });
        let symbols: Vec<(&str, u64)> = kinds[4..]
            .iter()
            .map(|k| match k {
                HintKind::BssZeroed { symbol, faults, .. }
                | HintKind::DataCopied { symbol, faults } => (symbol.as_str(), *faults),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(symbols, [("arena", 1024), ("pool", 64), ("table", 16)]);
    }
}
