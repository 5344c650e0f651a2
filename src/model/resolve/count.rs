//! The profile's counts on named keys: sites, targets, stacks kept for
//! the outputs, the start-up chosen.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::classify::{Access, FaultClass};
use crate::analysis::process::ProgramId;
use crate::analysis::relocation_pages;
use crate::analysis::stacks::{FrameKey, StackId, StackTable};
use crate::analysis::startup::Window;
use crate::analysis::{Owner, Profile, TargetKey};
use crate::model::report::{FrameRow, Region, TargetRow};
use crate::model::startup::{self, StartupFault, StartupPlace};
use crate::model::SampleRow;
use crate::text::safe;

use super::names::{expand, leaf_of, Names};
use super::Named;

/// The names of the frames of the model's stacks, each frame named once.
#[derive(Default)]
pub(super) struct KeptStacks {
    pub(super) frames: FxHashMap<FrameKey, Vec<FrameRow>>,
    /// The stacks kept already.
    pub(super) kept: FxHashSet<StackId>,
}

impl KeptStacks {
    pub(super) fn keep(&mut self, names: &Names, stack: StackId) {
        if !self.kept.insert(stack) {
            return;
        }
        for frame in names.profile.stacks.frames(stack) {
            self.keep_frame(names, frame);
        }
    }

    pub(super) fn keep_frame(&mut self, names: &Names, frame: FrameKey) {
        self.frames.entry(frame).or_insert_with(|| {
            names
                .frame(frame)
                .iter()
                .map(|n| names.frame_row(n.clone()))
                .collect()
        });
    }
}

/// The start-up windows, one per exec'd program, and the one shown in full.
pub(super) struct StartupChoice {
    pub(super) windows: Vec<startup::StartupWindow>,
    /// Index into the profile's windows of the one shown in full.
    pub(super) chosen_index: Option<usize>,
    pub(super) chosen: Option<u32>,
}

impl StartupChoice {
    pub(super) fn of(profile: &Profile, names: &Names) -> StartupChoice {
        let chosen_index = profile
            .startup
            .choose(profile.startup.startup_of.as_deref(), |w| {
                program_of(names, w)
            });
        let origin = profile.startup.first_exec().unwrap_or(0);
        let ms = |t: u64| t.saturating_sub(origin) as f64 / 1e6;
        let last = profile.decode.last_time;
        let windows = profile
            .startup
            .windows
            .iter()
            .map(|w| startup::StartupWindow {
                program: program_of(names, w),
                pid: w.pid,
                exec_ms: ms(w.exec_time),
                end_ms: w.window_ms(last).map(|d| ms(w.exec_time) + d),
                until: startup::Until::of(&w.cut),
                faults: w.faults,
            })
            .collect();
        StartupChoice {
            windows,
            chosen_index,
            chosen: chosen_index.and_then(|i| u32::try_from(i).ok()),
        }
    }
}

/// A start-up window's program: its first module, else its command name.
pub(super) fn program_of(names: &Names, w: &Window) -> String {
    match w.load_order.first() {
        Some(&module) => names.path_of(module),
        None => safe(&w.comm),
    }
}

/// A site: class, access, innermost function, target (the last two as
/// [`Interned`] ids).
pub(super) type SiteKey = (FaultClass, Access, Option<u32>, u32);

/// What is counted under a site: faults, per process (or program,
/// system-wide), per raw stack.
#[derive(Default)]
pub(super) struct SiteAcc {
    pub(super) count: u64,
    pub(super) pids: PerKey<i32>,
    pub(super) programs: PerKey<ProgramId>,
    pub(super) stacks: PerKey<StackId>,
}

/// Faults per key under one site. Most sites have one process and one
/// stack, kept inline: a map holding one entry took about 100 bytes (its
/// smallest allocation), three per site.
#[derive(Debug, Default)]
pub(super) enum PerKey<K> {
    #[default]
    Empty,
    One(K, u64),
    Many(FxHashMap<K, u64>),
}

impl<K: Copy + Eq + std::hash::Hash> PerKey<K> {
    pub(super) fn add(&mut self, key: K, count: u64) {
        match self {
            PerKey::Empty => *self = PerKey::One(key, count),
            PerKey::One(one, n) if *one == key => *n += count,
            PerKey::One(one, n) => {
                let map = FxHashMap::from_iter([(*one, *n), (key, count)]);
                *self = PerKey::Many(map);
            }
            PerKey::Many(map) => *map.entry(key).or_default() += count,
        }
    }

    /// Each key with its faults, in no particular order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (K, u64)> + '_ {
        let (one, many) = match self {
            PerKey::Empty => (None, None),
            PerKey::One(key, n) => (Some((*key, *n)), None),
            PerKey::Many(map) => (None, Some(map.iter().map(|(&k, &n)| (k, n)))),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

/// Faults per class and target (its [`Interned`] id).
pub(super) type TargetCounts = FxHashMap<(FaultClass, u32), u64>;

/// Names and targets numbered as they are met, so that the counting keys
/// on numbers and each name or target is built and compared once.
#[derive(Default)]
pub(super) struct Interned {
    /// Each distinct target, by id.
    pub(super) targets: Vec<Arc<TargetRow>>,
    pub(super) target_ids: FxHashMap<Arc<TargetRow>, u32>,
    /// The id of each raw target met.
    pub(super) of_key: FxHashMap<TargetKey, u32>,
    /// Each distinct innermost function, by id.
    pub(super) leaves: Vec<Named>,
    pub(super) leaf_ids: FxHashMap<Named, u32>,
    /// The id of each stack's innermost function (None: no stack).
    pub(super) leaf_of: FxHashMap<StackId, Option<u32>>,
    /// Each process's (or program's) command name, made safe once.
    pub(super) comms: FxHashMap<Owner, Arc<str>>,
}

impl Interned {
    /// The id of the target `key`, named once.
    pub(super) fn target(&mut self, names: &Names, key: TargetKey) -> u32 {
        if let Some(&id) = self.of_key.get(&key) {
            return id;
        }
        let row = Arc::new(names.target(key));
        let next = self.targets.len() as u32;
        let id = *self.target_ids.entry(Arc::clone(&row)).or_insert(next);
        if id == next {
            self.targets.push(row);
        }
        self.of_key.insert(key, id);
        id
    }

    /// The id of the innermost function of `stack`.
    pub(super) fn leaf(
        &mut self,
        names: &Names,
        stacks: &StackTable,
        stack: StackId,
    ) -> Option<u32> {
        if let Some(&id) = self.leaf_of.get(&stack) {
            return id;
        }
        let id = leaf_of(names, stacks, stack).map(|leaf| {
            let next = self.leaves.len() as u32;
            let id = *self.leaf_ids.entry(Named::clone(leaf)).or_insert(next);
            if id == next {
                self.leaves.push(Named::clone(leaf));
            }
            id
        });
        self.leaf_of.insert(stack, id);
        id
    }

    pub(super) fn comm(&mut self, names: &Names, owner: Owner) -> Arc<str> {
        Arc::clone(
            self.comms
                .entry(owner)
                .or_insert_with(|| Arc::from(names.owner_name(owner))),
        )
    }
}

/// The profile's counts, named and summed per site, target and row.
pub(super) struct Counted {
    pub(super) samples: Vec<SampleRow>,
    pub(super) sites: FxHashMap<SiteKey, SiteAcc>,
    pub(super) targets: TargetCounts,
    pub(super) interned: Interned,
    /// The faults of the start-up window shown in full.
    pub(super) startup_rows: Vec<StartupFault>,
}

/// One pass over the profile's counts (one per distinct key): the model's
/// sample rows, the sites, the targets, the chosen start-up's faults.
pub(super) fn count(
    profile: &Profile,
    names: &Names,
    kept: &mut KeptStacks,
    chosen: Option<u32>,
) -> Counted {
    let mut counted = Counted {
        samples: Vec::with_capacity(profile.counts.len()),
        sites: FxHashMap::default(),
        targets: FxHashMap::default(),
        interned: Interned::default(),
        startup_rows: Vec::new(),
    };
    let interned = &mut counted.interned;
    // Keys that differ only in the page of a target name one row: the
    // pages of a file's `.text` are one target.
    let mut rows: FxHashMap<(Owner, FaultClass, Access, StackId, u32, bool), usize> =
        FxHashMap::default();
    for (key, tally) in &profile.counts {
        let count = tally.faults;
        let target_id = interned.target(names, key.target);
        let leaf = interned.leaf(names, &profile.stacks, key.stack);
        // startup.svg: every window, or the chosen one's.
        let startup = key.startup.is_some()
            && (profile.startup.startup_of.is_none() || key.startup == chosen);
        let row_key = (
            key.owner, key.class, key.access, key.stack, target_id, startup,
        );
        match rows.get(&row_key) {
            Some(&at) => {
                let row = &mut counted.samples[at];
                row.faults += count;
                row.latency_ns += tally.latency_ns;
            }
            None => {
                kept.keep(names, key.stack);
                rows.insert(row_key, counted.samples.len());
                let comm = interned.comm(names, key.owner);
                let target = &interned.targets[target_id as usize];
                counted.samples.push(SampleRow {
                    owner: key.owner,
                    comm,
                    class: key.class,
                    access: key.access,
                    stack: key.stack,
                    target: Arc::clone(target),
                    faults: count,
                    latency_ns: tally.latency_ns,
                    startup,
                });
            }
        }
        let acc = counted
            .sites
            .entry((key.class, key.access, leaf, target_id))
            .or_default();
        acc.count += count;
        if let Some(pid) = key.owner.pid() {
            acc.pids.add(pid, count);
        }
        if let Owner::Program(program) = key.owner {
            acc.programs.add(program, count);
        }
        acc.stacks.add(key.stack, count);
        *counted.targets.entry((key.class, target_id)).or_default() += count;
        if key.startup.is_some() && key.startup == chosen {
            let target = &interned.targets[target_id as usize];
            let stack_names = expand(names, &profile.stacks, key.stack);
            let row = startup_fault(names, key.target, target, key.class, count, &stack_names);
            counted.startup_rows.push(row);
        }
    }
    counted
}

/// Faults per class, object, region and section, in that order.
pub(super) fn target_sections(
    targets: &TargetCounts,
    interned: &Interned,
) -> BTreeMap<(FaultClass, String, Region, Option<String>), u64> {
    let mut sections = BTreeMap::new();
    for (&(class, id), &count) in targets {
        let t = &interned.targets[id as usize];
        *sections
            .entry((class, t.object.clone(), t.region, t.section.clone()))
            .or_default() += count;
    }
    sections
}

/// A fault of the start-up window shown in full, for `startup::build`.
fn startup_fault(
    names: &Names,
    key: TargetKey,
    target: &TargetRow,
    class: FaultClass,
    count: u64,
    stack_names: &[&Named],
) -> StartupFault {
    let (page, section) = match key {
        TargetKey::Module {
            module,
            file_offset,
            ..
        } => (
            names.svma(module, file_offset).map(|a| a >> 12),
            target
                .section
                .clone()
                .map_or(StartupPlace::NoSection, StartupPlace::Section),
        ),
        _ => (None, StartupPlace::Region(target.region)),
    };
    StartupFault {
        object: target.object.clone(),
        section,
        symbol: target.symbol.clone(),
        class,
        page,
        count,
        loader: relocation_pages::loader_write(
            stack_names.iter().rev().map(|n| n.function.as_str()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys added in any order and any repetition count as a map would,
    /// whether the first is held inline or all went to a map.
    #[test]
    fn per_key_counts_as_a_map() {
        let adds: [&[(i32, u64)]; 4] = [
            &[],
            &[(7, 2), (7, 3)],
            &[(7, 2), (9, 1), (7, 3), (9, 4), (1, 1)],
            &[(5, 1), (6, 1), (5, 1)],
        ];
        for adds in adds {
            let mut tally = PerKey::default();
            let mut map: FxHashMap<i32, u64> = FxHashMap::default();
            for &(key, n) in adds {
                tally.add(key, n);
                *map.entry(key).or_default() += n;
            }
            let mut got: Vec<_> = tally.iter().collect();
            got.sort_unstable();
            let mut want: Vec<_> = map.into_iter().collect();
            want.sort_unstable();
            assert_eq!(got, want, "{adds:?}");
            let inline = matches!(tally, PerKey::Empty | PerKey::One(..));
            assert_eq!(inline, want.len() <= 1, "{adds:?}");
        }
    }
}
