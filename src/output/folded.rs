//! Folded stacks (`comm;root;…;leaf;target count`, one line per unique
//! stack), per class, per class weighted by latency, and for the start-up:
//! what the flame graphs and `diff` draw.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::analysis::stacks::StackId;
use crate::model::report::TargetRow;
use crate::model::Model;

/// Folded stacks as `(stack line, count)`, stack root first.
pub type Folded = BTreeMap<String, u64>;

/// The model's faults, folded.
#[derive(Default)]
pub struct FoldedStacks {
    /// Faults per class.
    pub by_class: [Folded; 3],
    /// Nanoseconds in the kernel per class.
    pub latency: [Folded; 3],
    /// Start-up faults, class as the root frame.
    pub startup: Folded,
}

/// Folds every counted row of the model, each stack's names joined once.
pub fn fold(model: &Model) -> FoldedStacks {
    let mut out = FoldedStacks::default();
    let mut joined: FxHashMap<StackId, String> = FxHashMap::default();
    for row in &model.samples {
        let functions = joined.entry(row.stack).or_insert_with(|| {
            let mut s = String::new();
            for f in model.functions_root_first(row.stack) {
                s.push(';');
                s.push_str(&f.function.replace(';', ":"));
            }
            s
        });
        let line = format!(
            "{}{functions};{}",
            row.comm.replace(';', ":"),
            target_frame(&row.target)
        );
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
