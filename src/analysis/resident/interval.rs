//! `record --interval --resident`: the ledger goes on across intervals
//! (pages stay resident from one to the next), and each interval takes
//! its own view of it: the peak within the interval, and the pages each
//! process held at its exit in the interval or at the interval's end.
//!
//! An interval gives its stack table away with its profile, so the sites
//! that still hold pages carry their stacks into the next one's table;
//! sites that hold none are forgotten, and their slots reused once they
//! outnumber the living: the ledger's memory follows the pages resident
//! now, not the run's length.

use rustc_hash::FxHashMap;

use crate::analysis::stacks::StackTable;

use super::{KernelCounts, Ledger, Peak, Series};

/// Forgotten sites kept as slots at most beyond the living, before the
/// slots are renumbered.
const DEAD_SLACK: usize = 4096;

impl Ledger {
    /// Ends an interval: its view (keyed by `old`'s stacks, which the
    /// interval's profile takes), then the next interval starts from what
    /// is resident now, its sites keyed by stacks interned in `new`.
    pub fn take_interval(&mut self, old: &StackTable, new: &mut StackTable) -> Ledger {
        let view = self.interval_view();
        // The sites are renumbered and rekeyed below.
        self.forget_recent_sites();
        self.restart_peak();
        self.forget_dead_sites();
        self.carry_stacks(old, new);
        view
    }

    /// The processes of the sites an interval's view shows.
    pub fn owners(&self) -> impl Iterator<Item = i32> + '_ {
        (self.keys.iter().zip(self.at_peak.iter().zip(&self.at_exit)))
            .filter(|(_, (&peak, &exit))| peak > 0 || exit > 0)
            .filter_map(|(key, _)| key.owner.pid())
    }

    /// The interval's peak, and its exits with the pages held now.
    fn interval_view(&mut self) -> Ledger {
        let mut at_exit = std::mem::replace(&mut self.at_exit, vec![0; self.keys.len()]);
        for (exit, now) in at_exit.iter_mut().zip(&self.now) {
            *exit += now;
        }
        let mut kernel_at_exit = std::mem::take(&mut self.kernel.at_exit);
        for (exit, now) in kernel_at_exit.iter_mut().zip(self.kernel.total) {
            *exit += now;
        }
        let mut reconciled_at_exit = std::mem::take(&mut self.reconciled_at_exit);
        for (exit, now) in reconciled_at_exit.iter_mut().zip(self.reconciled_now()) {
            *exit += now;
        }
        Ledger {
            keys: self.keys.clone(),
            now: self.now.clone(),
            at_peak: self.at_peak.clone(),
            at_exit,
            total: self.total,
            peak: self.peak,
            peak_resident: self.peak_resident,
            counts: std::mem::take(&mut self.counts),
            last_time: self.last_time,
            kernel: KernelCounts {
                seen: self.kernel.seen,
                seen_anon: self.kernel.seen_anon,
                total: self.kernel.total,
                taken_back: std::mem::take(&mut self.kernel.taken_back),
                at_peak: self.kernel.at_peak,
                at_exit: kernel_at_exit,
                ..KernelCounts::default()
            },
            reconciled_at_peak: self.reconciled_at_peak,
            reconciled_at_exit,
            series: std::mem::take(&mut self.series),
            ..Ledger::default()
        }
    }

    /// The next interval's peak starts at what is resident now.
    fn restart_peak(&mut self) {
        let reconciled = self.reconciled_now();
        self.at_peak.clone_from(&self.now);
        self.changed.clear();
        self.epoch = self.epoch.wrapping_add(1);
        self.peak = Peak {
            time: self.last_time,
            pages: self.total,
        };
        self.peak_resident = self.total.iter().sum::<u64>() - reconciled.iter().sum::<u64>();
        self.kernel.at_peak = self.kernel.total;
        self.reconciled_at_peak = reconciled;
        self.series = Series::default();
        self.series.note(self.last_time, self.total);
    }

    /// Renumbers the sites that hold pages when those that hold none
    /// outnumber them (and [`DEAD_SLACK`]): the pages' ids with them.
    fn forget_dead_sites(&mut self) {
        let living = self.now.iter().filter(|&&n| n > 0).count();
        if self.keys.len() - living <= living.max(DEAD_SLACK) {
            return;
        }
        let mut renumbered = vec![u32::MAX; self.keys.len()];
        let mut keys = Vec::with_capacity(living);
        let mut now = Vec::with_capacity(living);
        for (id, (&key, &n)) in self.keys.iter().zip(&self.now).enumerate() {
            if n > 0 {
                renumbered[id] = keys.len() as u32;
                keys.push(key);
                now.push(n);
            }
        }
        for space in self.spaces.values_mut() {
            space.pages.renumber(|id| renumbered[id as usize]);
        }
        self.keys = keys;
        self.at_peak.clone_from(&now);
        self.now = now;
        self.at_exit = vec![0; living];
        self.stamp = vec![0; living];
        self.epoch = 0;
    }

    /// Keys the sites that hold pages by their stacks interned in `new`;
    /// the others leave the index (their stack ids mean nothing there).
    fn carry_stacks(&mut self, old: &StackTable, new: &mut StackTable) {
        self.ids.clear();
        let mut carried = FxHashMap::default();
        let mut frames = Vec::new();
        for (id, key) in self.keys.iter_mut().enumerate() {
            if self.now[id] == 0 {
                continue;
            }
            key.stack = *carried.entry(key.stack).or_insert_with(|| {
                frames.clear();
                frames.extend(old.frames(key.stack));
                new.intern_leaf_first(&frames)
            });
            self.ids.insert(*key, id as u32);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::resident::{Effect, MemoryKind, SiteOf, PAGE_BYTES};
    use crate::analysis::stacks::FrameKey;
    use crate::analysis::{Owner, TargetKey};
    use crate::format::decode::MemoryCall;

    const ANON: Effect = Effect::Present {
        kind: MemoryKind::Anon,
        replaced: false,
    };

    /// Process 1's faults on `pages` pages from `base` by `stack`.
    fn touch(ledger: &mut Ledger, base: u64, pages: u64, stack: u32, time: u64) {
        let site = SiteOf {
            owner: Owner::Process(1),
            stack,
            target: TargetKey::Anon,
        };
        for i in 0..pages {
            ledger.fault((1, 1), base + i * PAGE_BYTES, None, site, ANON, time + i);
        }
    }

    /// A stack of one frame at `offset`.
    fn stack(table: &mut StackTable, offset: u64) -> u32 {
        table.intern_leaf_first(&[FrameKey::Jit {
            pid: 1,
            avma: offset,
        }])
    }

    /// (leaf frame, pages) of each site in a view's `pages`, by `table`.
    fn by_frame(view: &Ledger, pages: &[u64], table: &StackTable) -> Vec<(FrameKey, u64)> {
        let mut rows: Vec<(FrameKey, u64)> = (view.keys.iter().zip(pages))
            .filter(|(_, &n)| n > 0)
            .map(|(key, &n)| (table.frames(key.stack).next().unwrap(), n))
            .collect();
        rows.sort_by_key(|&(frame, _)| format!("{frame:?}"));
        rows
    }

    /// Ten pages in interval 1; four more and the ten unmapped in interval
    /// 2: interval 1 ends with the ten, interval 2 peaks at fourteen and
    /// ends with the four, named by stacks of its own table.
    #[test]
    fn each_interval_has_its_own_peak_and_end() {
        let mut ledger = Ledger::default();
        let mut table = StackTable::default();
        let first = stack(&mut table, 0x100);
        touch(&mut ledger, 0x10000, 10, first, 0);
        let one = std::mem::take(&mut table);
        let view = ledger.take_interval(&one, &mut table);
        let frame = |offset| FrameKey::Jit {
            pid: 1,
            avma: offset,
        };
        assert_eq!(by_frame(&view, &view.at_exit, &one), [(frame(0x100), 10)]);
        assert_eq!(by_frame(&view, &view.at_peak, &one), [(frame(0x100), 10)]);
        assert_eq!(view.peak().pages, [10, 0, 0]);

        // The carried stack is in the new table; a new one beside it.
        let second = stack(&mut table, 0x200);
        touch(&mut ledger, 0x80000, 4, second, 100);
        let munmap = MemoryCall::Munmap {
            addr: 0x10000,
            len: 10 * PAGE_BYTES,
        };
        ledger.on_call((1, 1), 200, munmap);
        let two = std::mem::take(&mut table);
        let view = ledger.take_interval(&two, &mut table);
        assert_eq!(by_frame(&view, &view.at_exit, &two), [(frame(0x200), 4)]);
        assert_eq!(
            by_frame(&view, &view.at_peak, &two),
            [(frame(0x100), 10), (frame(0x200), 4)]
        );
        assert_eq!(view.counts().munmap, 10);
        // Interval 3 saw nothing: it starts and ends with the four.
        let three = std::mem::take(&mut table);
        let view = ledger.take_interval(&three, &mut table);
        assert_eq!(by_frame(&view, &view.at_peak, &three), [(frame(0x200), 4)]);
        assert_eq!(view.counts().munmap, 0);
    }

    /// Sites that hold no page go once they outnumber the living: the
    /// pages keep their sites through the renumbering.
    #[test]
    fn dead_sites_are_forgotten() {
        let mut ledger = Ledger::default();
        let mut table = StackTable::default();
        let n = DEAD_SLACK as u64 + 10;
        for i in 0..n {
            let s = stack(&mut table, i);
            touch(&mut ledger, 0x1000_0000 + i * PAGE_BYTES, 1, s, i);
        }
        let keep = stack(&mut table, 1 << 40);
        touch(&mut ledger, 0x9000_0000, 3, keep, n);
        let munmap = MemoryCall::Munmap {
            addr: 0x1000_0000,
            len: n * PAGE_BYTES,
        };
        ledger.on_call((1, 1), n + 10, munmap);
        let old = std::mem::take(&mut table);
        ledger.take_interval(&old, &mut table);
        assert_eq!(ledger.keys.len(), 1);
        // The kept pages still count for their site: unmapping them empties it.
        let munmap = MemoryCall::Munmap {
            addr: 0x9000_0000,
            len: 3 * PAGE_BYTES,
        };
        ledger.on_call((1, 1), n + 20, munmap);
        assert_eq!(ledger.now, [0]);
        assert_eq!(ledger.counts().munmap, 3);
    }
}
