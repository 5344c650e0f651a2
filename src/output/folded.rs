//! Folded stacks (`comm;root;…;leaf;target count`, one line per unique
//! stack), per class, per class weighted by latency, and for the start-up:
//! what the flame graphs and `diff` draw.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::analysis::stacks::StackId;
use crate::model::report::{FrameKind, Region, TargetRow};
use crate::model::{Model, SampleRow};

/// Folded stacks as `(stack line, count)`, stack root first.
pub type Folded = BTreeMap<String, u64>;

/// The frames of folded stacks drawn apart (what nothing named, JIT code
/// without a name), by their name in the lines.
pub type Special = BTreeMap<String, FrameKind>;

/// The model's faults, folded.
#[derive(Default)]
pub struct FoldedStacks {
    /// Faults per class.
    pub by_class: [Folded; 3],
    /// Nanoseconds in the kernel per class.
    pub latency: [Folded; 3],
    /// Start-up faults, class as the root frame.
    pub startup: Folded,
    /// Their frames drawn apart.
    pub special: Special,
}

/// What the rows of one line add up to: faults, their latency, the
/// start-up's faults.
#[derive(Default)]
struct LineSum {
    faults: u64,
    latency_ns: u64,
    startup: u64,
}

/// Folds every counted row of the model: per class, by latency, start-up.
/// Rows that make the same line (they differ in process or access) are
/// summed first, on the names they share, so that each line is written and
/// placed once.
pub fn fold(model: &Model) -> FoldedStacks {
    fold_with(model, true)
}

/// Folds the faults per class only (what an interval writes).
pub fn fold_classes(model: &Model) -> FoldedStacks {
    fold_with(model, false)
}

/// Adds `n` to `line`'s count, copying the line only when it is new.
fn add(folded: &mut Folded, line: &str, n: u64) {
    match folded.get_mut(line) {
        Some(count) => *count += n,
        None => {
            folded.insert(line.to_string(), n);
        }
    }
}

fn fold_with(model: &Model, everything: bool) -> FoldedStacks {
    let mut out = FoldedStacks::default();
    let mut sums: FxHashMap<(usize, usize, StackId, usize), (&SampleRow, LineSum)> =
        FxHashMap::default();
    for row in &model.samples {
        let key = (
            row.class as usize,
            std::sync::Arc::as_ptr(&row.comm) as *const u8 as usize,
            row.stack,
            std::sync::Arc::as_ptr(&row.target) as usize,
        );
        let (_, sum) = sums.entry(key).or_insert((row, LineSum::default()));
        sum.faults += row.faults;
        sum.latency_ns += row.latency_ns;
        if row.startup {
            sum.startup += row.faults;
        }
    }
    // The maps below order the lines: the order they come in does not
    // matter. A stack's names are joined for each line (a stack makes
    // about one line once rows of a process or access are summed).
    // One buffer for every line; each key is an exact-size copy (a deep
    // stack's line is a kilobyte, and a grown String's spare capacity
    // would double the memory of a busy interval's 25,000 lines).
    let mut line = String::with_capacity(4096);
    for (row, sum) in sums.into_values() {
        line.clear();
        push_frame_name(&mut line, &row.comm);
        for f in model.functions_root_first(row.stack) {
            line.push(';');
            let start = line.len();
            push_frame_name(&mut line, &f.function);
            if matches!(
                f.kind,
                FrameKind::Unknown | FrameKind::Exec | FrameKind::UnnamedJit
            ) && !out.special.contains_key(&line[start..])
            {
                out.special.insert(line[start..].to_string(), f.kind);
            }
        }
        let target = target_frame(&row.target);
        if row.target.region == Region::Unknown {
            // Memory nothing names, drawn as a frame nothing names.
            out.special.insert(target.clone(), FrameKind::Unknown);
        }
        line.push(';');
        line.push_str(&target);
        if sum.startup > 0 && everything {
            *out.startup
                .entry(format!("{};{line}", row.class.name()))
                .or_default() += sum.startup;
        }
        if sum.latency_ns > 0 && everything {
            add(&mut out.latency[row.class as usize], &line, sum.latency_ns);
        }
        add(&mut out.by_class[row.class as usize], &line, sum.faults);
    }
    out
}

/// Appends a frame's name, `;` (which separates frames) written `:`.
fn push_frame_name(line: &mut String, name: &str) {
    if name.contains(';') {
        line.push_str(&name.replace(';', ":"));
    } else {
        line.push_str(name);
    }
}

/// The leaf frame of folded stacks, the target: `[libfoo.so .data.rel.ro
/// table]`.
fn target_frame(target: &TargetRow) -> String {
    let name = crate::text::short(&target.object);
    let mut s = String::from("[");
    s.push_str(name.trim_matches(|c| c == '[' || c == ']'));
    if let Some(section) = &target.section {
        s.push(' ');
        s.push_str(section);
    }
    if let Some(symbol) = &target.symbol {
        s.push(' ');
        s.push_str(symbol);
    }
    s.push(']');
    s.replace(';', ":")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::report::Region;

    /// Frames nothing named, the exec and unnamed JIT code are marked
    /// special by their kind, as is memory nothing names; named frames are
    /// not, whatever their names.
    #[test]
    fn special_frames_by_kind() {
        use crate::analysis::classify::{Access, FaultClass};
        use crate::analysis::stacks::FrameKey;
        use crate::model::report::FrameRow;
        use crate::model::SampleRow;
        let frame = |kind, function: &str| FrameRow {
            function: function.into(),
            kind,
            file: None,
            line: None,
            inlined: false,
            object: None,
        };
        let keys = [
            FrameKey::Exec,
            FrameKey::Unknown,
            FrameKey::Jit { pid: 1, avma: 16 },
            FrameKey::Jit { pid: 1, avma: 32 },
        ];
        let rows = [
            frame(FrameKind::Exec, "[execve]"),
            frame(FrameKind::Unknown, "[unknown]"),
            frame(FrameKind::UnnamedJit, "[jit 0x10]"),
            // A perf map may name code anything: the name is not the kind.
            frame(FrameKind::Jit, "[unknown]x"),
        ];
        let target = TargetRow {
            object: "[unknown]".into(),
            region: Region::Unknown,
            section: None,
            symbol: None,
        };
        let mut table = crate::analysis::stacks::StackTable::default();
        let stack = table.intern_leaf_first(&keys);
        let model = Model {
            report: crate::model::report::tests::sample_report(),
            samples: vec![SampleRow {
                owner: crate::analysis::Owner::Process(1),
                comm: "app".into(),
                class: FaultClass::Minor,
                access: Access::Read,
                stack,
                target: target.into(),
                faults: 1,
                latency_ns: 0,
                startup: false,
            }],
            stacks: table.stacks().clone(),
            frames: keys.into_iter().zip(rows.map(|r| vec![r])).collect(),
            timeline: Vec::new(),
            timeline_sites: Vec::new(),
            timeline_origin: 0,
            startup_of_one: false,
            programs: Vec::new(),
        };
        let folded = fold(&model);
        let special: Vec<(&str, FrameKind)> = folded
            .special
            .iter()
            .map(|(name, kind)| (name.as_str(), *kind))
            .collect();
        assert_eq!(
            special,
            [
                ("[execve]", FrameKind::Exec),
                ("[jit 0x10]", FrameKind::UnnamedJit),
                ("[unknown]", FrameKind::Unknown),
            ]
        );
        assert_eq!(
            folded.by_class[0].keys().next().unwrap(),
            "app;[unknown]x;[jit 0x10];[unknown];[execve];[unknown]"
        );
    }

    /// Folded target frames are compact and never contain `;`.
    #[test]
    fn target_frames() {
        let t = TargetRow {
            object: "/usr/lib/libx.so".into(),
            region: Region::File,
            section: Some(".got".into()),
            symbol: Some("a;b".into()),
        };
        assert_eq!(target_frame(&t), "[libx.so .got a:b]");
        let t = TargetRow {
            object: "[heap]".into(),
            region: Region::Heap,
            section: None,
            symbol: None,
        };
        assert_eq!(target_frame(&t), "[heap]");
    }
}
