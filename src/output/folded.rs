//! Folded stacks (`comm;root;…;leaf;target count`, one line per unique
//! stack), per class, per class weighted by latency, and for the start-up:
//! what the flame graphs and `diff` draw.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::analysis::stacks::StackId;
use crate::model::report::{FrameKind, Region, TargetRow};
use crate::model::Model;

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

/// Folds every counted row of the model, each stack's names joined once.
pub fn fold(model: &Model) -> FoldedStacks {
    let mut out = FoldedStacks::default();
    let mut joined: FxHashMap<StackId, String> = FxHashMap::default();
    for row in &model.samples {
        let special = &mut out.special;
        let functions = joined.entry(row.stack).or_insert_with(|| {
            let mut s = String::new();
            for f in model.functions_root_first(row.stack) {
                let name = f.function.replace(';', ":");
                s.push(';');
                s.push_str(&name);
                if matches!(
                    f.kind,
                    FrameKind::Unknown | FrameKind::Exec | FrameKind::UnnamedJit
                ) {
                    special.insert(name, f.kind);
                }
            }
            s
        });
        let target = target_frame(&row.target);
        if row.target.region == Region::Unknown {
            // Memory nothing names, drawn as a frame nothing names.
            out.special.insert(target.clone(), FrameKind::Unknown);
        }
        let line = format!("{}{functions};{target}", row.comm.replace(';', ":"));
        if row.startup {
            *out.startup
                .entry(format!("{};{line}", row.class.name()))
                .or_default() += row.faults;
        }
        if row.latency_ns > 0 {
            *out.latency[row.class as usize]
                .entry(line.clone())
                .or_default() += row.latency_ns;
        }
        *out.by_class[row.class as usize].entry(line).or_default() += row.faults;
    }
    out
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
        let model = Model {
            report: crate::model::report::tests::sample_report(),
            samples: vec![SampleRow {
                pid: 1,
                comm: "app".into(),
                class: FaultClass::Minor,
                access: Access::Read,
                stack: 7,
                target,
                faults: 1,
                latency_ns: 0,
                startup: false,
            }],
            stacks: [(7, keys.to_vec())].into_iter().collect(),
            frames: keys.into_iter().zip(rows.map(|r| vec![r])).collect(),
            timeline: Vec::new(),
            timeline_origin: 0,
            startup_of_one: false,
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
