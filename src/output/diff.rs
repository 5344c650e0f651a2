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

/// Rows for every key present in either recording, largest change first.
pub fn compare(before: &Model, after: &Model, startup: bool) -> Vec<DiffRow> {
    let (a, b) = (counts(before, startup), counts(after, startup));
    let mut keys: Vec<_> = a.keys().chain(b.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let mut rows: Vec<DiffRow> = keys
        .into_iter()
        .map(|key| {
            let (x, y) = (
                a.get(&key).copied().unwrap_or(0),
                b.get(&key).copied().unwrap_or(0),
            );
            DiffRow {
                object: key.0,
                section: key.1,
                class: key.2,
                before: x,
                after: y,
                delta: y as i64 - x as i64,
            }
        })
        .collect();
    rows.sort_by(|p, q| {
        q.delta
            .unsigned_abs()
            .cmp(&p.delta.unsigned_abs())
            .then_with(|| (&p.object, &p.section, p.class).cmp(&(&q.object, &q.section, q.class)))
    });
    rows
}

/// The folded stacks a differential flame graph compares.
pub fn folded_lines(model: &Model, startup: bool) -> Vec<String> {
    let folded = fold(model);
    if startup {
        folded
            .startup
            .iter()
            .map(|(stack, n)| format!("{stack} {n}"))
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
    let mut s = String::new();
    let scope = if startup { "start-up faults" } else { "faults" };
    let total = |r: &Report| match (startup, &r.startup) {
        (true, Some(st)) => st.faults.total(),
        (true, None) => 0,
        (false, _) => r.captured(),
    };
    let (x, y) = (total(before), total(after));
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
        "object", "section", "class", "before", "after", "delta"
    );
    // Rows come largest change first.
    let changed: Vec<&DiffRow> = rows.iter().filter(|r| r.delta != 0).collect();
    for r in changed.iter().take(top) {
        let _ = writeln!(
            s,
            "{:<32} {:<16} {:<6}{:>11}{:>11}{:>11}",
            truncate(&r.object, 32),
            truncate(r.section.as_deref().unwrap_or("-"), 16),
            r.class.name(),
            thousands(r.before),
            thousands(r.after),
            signed(r.delta)
        );
    }
    if changed.len() > top {
        let rest = &changed[top..];
        let _ = writeln!(
            s,
            "and {} more changed rows ({} before, {} after; --top N shows more)",
            thousands(rest.len() as u64),
            thousands(rest.iter().map(|r| r.before).sum()),
            thousands(rest.iter().map(|r| r.after).sum()),
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
