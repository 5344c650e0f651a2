//! `pfprof diff`: two recordings compared per object, section and class.
//!
//! Objects are keyed by file name, not path, so that a library rebuilt in
//! another directory lines up; folded stacks are already ASLR-free (symbol
//! names, or `object+file offset`), so the differential flame graph lines up
//! too.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::analysis::classify::FaultClass;
use crate::model::report::Report;
use crate::model::Model;
use crate::output::diff_svg::signed;
use crate::output::flamegraph::{folded_lines as class_lines, ClassSelection};
use crate::output::folded::fold;
use crate::output::startup::place_label;
use crate::output::text::command_line;
use crate::text::{thousands, truncate};

/// One (object, section, class) compared.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DiffRow {
    /// Object file name, or `[heap]`, `[anon]`...
    pub object: String,
    /// Section, `null` when none (as in report.json).
    pub section: Option<String>,
    /// Class.
    pub class: FaultClass,
    /// Faults in the first recording.
    pub before: u64,
    /// Faults in the second.
    pub after: u64,
    /// after - before.
    pub delta: i64,
}

fn short(object: &str) -> String {
    crate::text::short(object).to_string()
}

/// Faults per (object, section, class) of one recording.
fn counts(model: &Model, startup: bool) -> BTreeMap<(String, Option<String>, FaultClass), u64> {
    let mut out = BTreeMap::new();
    if startup {
        for o in model.report.startup.iter().flat_map(|s| &s.objects) {
            for s in &o.sections {
                for class in FaultClass::ALL {
                    let n = s.faults.of(class);
                    if n > 0 {
                        let section = Some(place_label(&s.section).into_owned());
                        *out.entry((short(&o.object), section, class)).or_default() += n;
                    }
                }
            }
        }
    } else {
        for t in &model.report.targets {
            *out.entry((short(&t.object), t.section.clone(), t.class))
                .or_default() += t.count;
        }
    }
    out
}

/// Every key of either map with its count in each (0 where absent),
/// largest change first, then by key.
fn merged<K: Ord + Clone>(a: &BTreeMap<K, u64>, b: &BTreeMap<K, u64>) -> Vec<(K, u64, u64)> {
    let mut keys: Vec<&K> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut rows: Vec<(K, u64, u64)> = (keys.into_iter())
        .map(|key| {
            let count = |m: &BTreeMap<K, u64>| m.get(key).copied().unwrap_or(0);
            (key.clone(), count(a), count(b))
        })
        .collect();
    rows.sort_by(|p, q| {
        let change = |r: &(K, u64, u64)| r.1.abs_diff(r.2);
        change(q).cmp(&change(p)).then_with(|| p.0.cmp(&q.0))
    });
    rows
}

/// Rows for every key present in either recording, largest change first.
pub fn compare(before: &Model, after: &Model, startup: bool) -> Vec<DiffRow> {
    let (a, b) = (counts(before, startup), counts(after, startup));
    (merged(&a, &b).into_iter())
        .map(|((object, section, class), x, y)| DiffRow {
            object,
            section,
            class,
            before: x,
            after: y,
            delta: y as i64 - x as i64,
        })
        .collect()
}

/// One (object, section, kind of memory) compared at the peak of resident
/// memory (`diff --resident`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ResidentDiffRow {
    /// Object file name, or `[heap]`, `[anon]`...
    pub object: String,
    /// Section, `null` when none.
    pub section: Option<String>,
    /// `anon`, `file` or `shmem`.
    pub kind: &'static str,
    /// KiB at the first recording's peak.
    pub before_kib: u64,
    /// KiB at the second's.
    pub after_kib: u64,
    /// after - before.
    pub delta_kib: i64,
}

/// (object file name, section, kind of memory).
type ResidentKey = (String, Option<String>, &'static str);

/// KiB at the peak per (object, section, kind); None without `--resident`.
fn resident_kib(model: &Model) -> Option<BTreeMap<ResidentKey, u64>> {
    let rows = &model.resident.as_ref()?.peak;
    let mut out = BTreeMap::new();
    for row in rows {
        let key = (
            short(&row.target.object),
            row.target.section.clone(),
            row.kind.name(),
        );
        *out.entry(key).or_default() += row.pages * crate::analysis::resident::PAGE_BYTES / 1024;
    }
    Some(out)
}

/// The resident memory at the peak of both recordings, per object, section
/// and kind, largest change first; None names the recording (0: before,
/// 1: after) made without `record --resident`.
pub fn compare_resident(before: &Model, after: &Model) -> Result<Vec<ResidentDiffRow>, usize> {
    let a = resident_kib(before).ok_or(0usize)?;
    let b = resident_kib(after).ok_or(1usize)?;
    Ok((merged(&a, &b).into_iter())
        .map(|((object, section, kind), x, y)| ResidentDiffRow {
            object,
            section,
            kind,
            before_kib: x,
            after_kib: y,
            delta_kib: y as i64 - x as i64,
        })
        .collect())
}

/// The resident comparison as a table, as [`to_text`].
pub fn resident_to_text(
    rows: &[ResidentDiffRow],
    before: &Model,
    after: &Model,
    top: usize,
) -> String {
    let peak = |m: &Model| m.report.resident.as_ref().map_or(0, |r| r.peak.kib.total);
    let rows: Vec<Row<'_>> = (rows.iter())
        .map(|r| {
            (
                &r.object[..],
                r.section.as_deref(),
                r.kind,
                r.before_kib,
                r.after_kib,
            )
        })
        .collect();
    table(
        (&before.report, &after.report),
        (
            "resident memory at the peak (KiB)",
            peak(before),
            peak(after),
        ),
        "kind",
        &rows,
        top,
    )
}

/// The folded stacks of the resident memory at the peak, in KiB.
pub fn resident_lines(model: &Model) -> Vec<String> {
    let Some(resident) = &model.resident else {
        return Vec::new();
    };
    let (folded, _) = crate::output::folded::fold_resident(&resident.peak, model);
    crate::output::folded::into_counted_lines(folded)
}

/// The folded stacks a differential flame graph compares.
pub fn folded_lines(model: &Model, startup: bool) -> Vec<String> {
    let folded = fold(model);
    if startup {
        folded
            .startup
            .iter()
            .map(|(stack, n)| crate::output::folded::counted_line(stack, *n))
            .collect()
    } else {
        class_lines(&folded.by_class, ClassSelection::All)
    }
}

/// The comparison as a table: the `top` largest changes, numbers with
/// thousands separators.
pub fn to_text(
    rows: &[DiffRow],
    before: &Report,
    after: &Report,
    startup: bool,
    top: usize,
) -> String {
    let scope = if startup { "start-up faults" } else { "faults" };
    let total = |r: &Report| match (startup, &r.startup) {
        (true, Some(st)) => st.faults.total(),
        (true, None) => 0,
        (false, _) => r.captured(),
    };
    let rows: Vec<Row<'_>> = (rows.iter())
        .map(|r| {
            (
                &r.object[..],
                r.section.as_deref(),
                r.class.name(),
                r.before,
                r.after,
            )
        })
        .collect();
    table(
        (before, after),
        (scope, total(before), total(after)),
        "class",
        &rows,
        top,
    )
}

/// A row of a comparison's table: object, section, the third column
/// (class or kind), before, after.
type Row<'a> = (&'a str, Option<&'a str>, &'a str, u64, u64);

/// Who ran, the totals of `scope` (before, after), and the `top` largest
/// changes of `rows` (largest first), under a header naming the third
/// column; then how many more changed and how many did not.
fn table(
    (before, after): (&Report, &Report),
    (scope, x, y): (&str, u64, u64),
    third: &str,
    rows: &[Row<'_>],
    top: usize,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "before: {}",
        truncate(&command_line(&before.command), 90)
    );
    let _ = writeln!(s, "after:  {}", truncate(&command_line(&after.command), 90));
    let _ = writeln!(
        s,
        "{scope}: {} → {} ({})\n",
        thousands(x),
        thousands(y),
        signed(y as i64 - x as i64)
    );
    let _ = writeln!(
        s,
        "{:<32} {:<16} {:<6}{:>11}{:>11}{:>11}",
        "object", "section", third, "before", "after", "delta"
    );
    let changed: Vec<&Row<'_>> = rows.iter().filter(|r| r.3 != r.4).collect();
    for &&(object, section, kind, b, a) in changed.iter().take(top) {
        let _ = writeln!(
            s,
            "{:<32} {:<16} {:<6}{:>11}{:>11}{:>11}",
            truncate(object, 32),
            truncate(section.unwrap_or("-"), 16),
            kind,
            thousands(b),
            thousands(a),
            signed(a as i64 - b as i64)
        );
    }
    if changed.len() > top {
        let rest = &changed[top..];
        let _ = writeln!(
            s,
            "and {} more changed rows ({} before, {} after; --top N shows more)",
            thousands(rest.len() as u64),
            thousands(rest.iter().map(|r| r.3).sum()),
            thousands(rest.iter().map(|r| r.4).sum()),
        );
    }
    let unchanged = rows.len() - changed.len();
    if unchanged > 0 {
        let _ = writeln!(
            s,
            "({} unchanged rows not shown)",
            thousands(unchanged as u64)
        );
    }
    s
}
