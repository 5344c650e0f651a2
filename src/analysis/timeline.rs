//! The faults over time, kept as counts per time bucket instead of one entry
//! per fault: what the timeline draws. A bucket holds, per (class,
//! process), how many faults completed in it and the slowest of them (bars
//! per class, lanes per process, the latency lane); and apart, the faults
//! of its busiest leaf frames, which label its bursts ([`SITES_KEPT`] at
//! most: a busy host has tens of thousands of stacks, and a bucket of each
//! stack held 60 MB). Buckets double in width as the recording grows, so
//! there are never more than [`BUCKETS`] of them and the memory is bounded
//! by what is distinct in a bucket, not by the number of faults. The
//! timeline draws 200 bars: a thousand buckets place each fault within a
//! fifth of a bar.

use rustc_hash::FxHashMap;

use crate::analysis::classify::FaultClass;
use crate::analysis::stacks::FrameKey;
use crate::analysis::Owner;

/// At most this many buckets: when a fault falls past the last one, every
/// bucket is merged with its neighbour.
pub const BUCKETS: u64 = 1024;

/// Leaf frames a bucket keeps at most: past it, the less busy half goes
/// (a burst is labelled by its busiest site; the sites a bucket drops are
/// those it could not be labelled by).
pub const SITES_KEPT: usize = 64;

/// What a bucket counts under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cell {
    /// Bucket index (its start is `origin + bucket × width`).
    pub bucket: u32,
    /// Class.
    pub class: FaultClass,
    /// Process (or program, system-wide).
    pub owner: Owner,
}

/// The faults of each leaf frame (None: no stack) in a bucket.
type Sites = FxHashMap<Option<FrameKey>, u64>;

/// Faults of one cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CellTally {
    /// Faults (samples) that completed in the bucket.
    pub faults: u64,
    /// The slowest of them whose latency was measured: (latency ns, the time
    /// it completed).
    pub slowest: Option<(u32, u64)>,
}

impl CellTally {
    fn merge(&mut self, other: CellTally) {
        self.faults += other.faults;
        if other.slowest.map(|s| s.0) > self.slowest.map(|s| s.0) {
            self.slowest = other.slowest;
        }
    }
}

/// Faults per time bucket.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Time of the first fault: bucket 0 starts here.
    origin: Option<u64>,
    /// Bucket width is `1 << shift` ns.
    shift: u32,
    /// First and last completion seen.
    first: u64,
    last: u64,
    /// Every cell and its faults, in the order first met.
    cells: Vec<(Cell, CellTally)>,
    /// Where each cell is in `cells`.
    cell_index: FxHashMap<Cell, usize>,
    /// The cell the last fault went to: faults come in runs of one
    /// process, class and bucket, which then need no lookup.
    last_cell: Option<(Cell, usize)>,
    /// Per bucket, its busiest leaf frames.
    sites: Vec<Sites>,
    /// Emptied bucket maps, kept for the buckets to come: coarsening frees
    /// half of them and the recording's next stretch needs as many again,
    /// so the faults of a long run allocate nothing.
    spare: Vec<Sites>,
    /// Scratch for pruning a bucket's sites.
    busiest: Vec<(Option<FrameKey>, u64)>,
    /// Faults of one bucket and leaf frame not yet in `sites`: a run of
    /// them (a loop's faults) costs one lookup, not one each. Added by
    /// [`Timeline::settle`], before anything reads the sites.
    site_run: Option<(u32, Option<FrameKey>, u64)>,
}

impl Timeline {
    /// Counts one sample completed at `time`.
    pub fn add(
        &mut self,
        time: u64,
        class: FaultClass,
        owner: Owner,
        leaf: Option<FrameKey>,
        latency_ns: Option<u32>,
    ) {
        let origin = *self.origin.get_or_insert_with(|| {
            self.first = time;
            self.last = time;
            time
        });
        self.first = self.first.min(time);
        self.last = self.last.max(time);
        // A record slightly out of order, before the first: bucket 0.
        let offset = time.saturating_sub(origin);
        while offset >> self.shift >= BUCKETS {
            self.coarsen();
        }
        let bucket = (offset >> self.shift) as u32;
        let cell = Cell {
            bucket,
            class,
            owner,
        };
        self.count_in(
            cell,
            CellTally {
                faults: 1,
                slowest: latency_ns.map(|ns| (ns, time)),
            },
        );
        match &mut self.site_run {
            Some((b, l, n)) if *b == bucket && *l == leaf => *n += 1,
            _ => {
                self.settle();
                self.site_run = Some((bucket, leaf, 1));
            }
        }
    }

    /// Adds the run of faults of one bucket and leaf frame to the bucket's
    /// sites: after the last fault, before the sites are read.
    pub fn settle(&mut self) {
        let Some((bucket, leaf, n)) = self.site_run.take() else {
            return;
        };
        if self.sites.len() <= bucket as usize {
            let spare = &mut self.spare;
            self.sites
                .resize_with(bucket as usize + 1, || spare.pop().unwrap_or_default());
        }
        add_site(&mut self.sites[bucket as usize], &mut self.busiest, leaf, n);
    }

    /// Adds `tally` to `cell`'s.
    fn count_in(&mut self, cell: Cell, tally: CellTally) {
        let index = match self.last_cell {
            Some((last, index)) if last == cell => index,
            _ => {
                let next = self.cells.len();
                let index = *self.cell_index.entry(cell).or_insert(next);
                if index == next {
                    self.cells.push((cell, CellTally::default()));
                }
                self.last_cell = Some((cell, index));
                index
            }
        };
        self.cells[index].1.merge(tally);
    }

    /// Doubles the bucket width, merging neighbours.
    fn coarsen(&mut self) {
        self.settle();
        self.shift += 1;
        let cells = std::mem::take(&mut self.cells);
        self.cell_index.clear();
        self.last_cell = None;
        self.cells.reserve(cells.len());
        for (cell, tally) in cells {
            let cell = Cell {
                bucket: cell.bucket / 2,
                ..cell
            };
            self.count_in(cell, tally);
        }
        // In place: bucket i takes 2i and drains 2i+1 (whose map is kept).
        let merged_len = self.sites.len().div_ceil(2);
        for i in 0..merged_len {
            let mut merged = std::mem::take(&mut self.sites[2 * i]);
            if let Some(odd) = self.sites.get_mut(2 * i + 1) {
                let mut odd = std::mem::take(odd);
                for (leaf, n) in odd.drain() {
                    add_site(&mut merged, &mut self.busiest, leaf, n);
                }
                self.spare.push(odd);
            }
            self.sites[i] = merged;
        }
        self.sites.truncate(merged_len);
    }

    /// Every bucket's busiest leaf frames with the time that stands for the
    /// bucket (as [`Timeline::cells`]) and their faults (once settled).
    pub fn sites(&self) -> impl Iterator<Item = (u64, Option<FrameKey>, u64)> + '_ {
        self.sites
            .iter()
            .enumerate()
            .flat_map(move |(bucket, sites)| {
                let time = self.time_of(bucket as u32);
                sites.iter().map(move |(&leaf, &n)| (time, leaf, n))
            })
    }

    /// The time that stands for a bucket: its middle, kept within the
    /// first and last fault.
    fn time_of(&self, bucket: u32) -> u64 {
        let origin = self.origin.unwrap_or(0);
        let start = origin.saturating_add(u64::from(bucket) << self.shift);
        start
            .saturating_add(self.bucket_ns() / 2)
            .clamp(self.first, self.last)
    }

    /// Bucket width, ns.
    pub fn bucket_ns(&self) -> u64 {
        1 << self.shift
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Number of cells (distinct bucket, class, process and leaf frame).
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Every cell with the time that stands for its bucket: the bucket's
    /// middle, kept within the first and last fault.
    pub fn cells(&self) -> impl Iterator<Item = (u64, &Cell, &CellTally)> + '_ {
        self.cells
            .iter()
            .map(move |(cell, tally)| (self.time_of(cell.bucket), cell, tally))
    }

    /// Forgets every fault (a new interval), keeping nothing of the old.
    pub fn clear(&mut self) {
        let mut spare = std::mem::take(&mut self.spare);
        for mut sites in self.sites.drain(..) {
            sites.clear();
            spare.push(sites);
        }
        *self = Timeline {
            spare,
            ..Timeline::default()
        };
    }
}

/// Adds `n` faults of `leaf` to a bucket's sites, keeping the busiest
/// [`SITES_KEPT`] (ties by frame, so that the same faults keep the same).
fn add_site(
    sites: &mut Sites,
    busiest: &mut Vec<(Option<FrameKey>, u64)>,
    leaf: Option<FrameKey>,
    n: u64,
) {
    *sites.entry(leaf).or_default() += n;
    if sites.len() > SITES_KEPT {
        busiest.clear();
        busiest.extend(sites.drain());
        busiest.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        sites.extend(busiest.drain(..).take(SITES_KEPT / 2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs of one cell and faults that alternate between cells count
    /// alike, across the merges of buckets too: the cell of the last fault
    /// is remembered, not assumed.
    #[test]
    fn runs_and_alternations_count_alike() {
        let mut t = Timeline::default();
        let mut expected: std::collections::HashMap<(i32, u8), (u64, u32)> = Default::default();
        let mut time = 0u64;
        for i in 0..50_000u32 {
            // Runs of 1-7 faults of one process, then another; every 13th
            // fault a major of process 3 in between.
            let pid = 1 + (i / (1 + i % 7)) as i32 % 2;
            let (class, pid, code) = if i % 13 == 0 {
                (FaultClass::Major, 3, 1)
            } else {
                (FaultClass::Minor, pid, 0)
            };
            time += 1 + u64::from(i % 5) * 1_000;
            let latency = i % 1_000;
            t.add(time, class, Owner::Process(pid), None, Some(latency));
            let e = expected.entry((pid, code)).or_default();
            e.0 += 1;
            e.1 = e.1.max(latency);
        }
        let mut got: std::collections::HashMap<(i32, u8), (u64, u32)> = Default::default();
        for (_, cell, tally) in t.cells() {
            let Owner::Process(pid) = cell.owner else {
                unreachable!()
            };
            let code = u8::from(cell.class == FaultClass::Major);
            let e = got.entry((pid, code)).or_default();
            e.0 += tally.faults;
            e.1 = e.1.max(tally.slowest.map_or(0, |s| s.0));
        }
        assert_eq!(got, expected);
        let distinct: std::collections::HashSet<_> = t.cells().map(|(_, c, _)| *c).collect();
        assert_eq!(distinct.len(), t.len(), "a cell counted in two places");
    }

    /// Buckets stay few however long the recording, and a bucket's slowest
    /// fault and counts survive the merges.
    #[test]
    fn buckets_merge_as_the_span_grows() {
        let mut t = Timeline::default();
        for i in 0..100_000u64 {
            let latency = if i == 77_777 { Some(9_999) } else { Some(10) };
            t.add(
                1_000 + i * 1_000,
                FaultClass::Minor,
                Owner::Process(1),
                None,
                latency,
            );
        }
        t.add(1_000, FaultClass::Major, Owner::Process(2), None, None);
        let buckets: std::collections::BTreeSet<u32> =
            t.cells().map(|(_, c, _)| c.bucket).collect();
        assert!(buckets.len() as u64 <= BUCKETS, "{} buckets", buckets.len());
        assert!(
            buckets.len() as u64 > BUCKETS / 2,
            "{} buckets",
            buckets.len()
        );
        let faults: u64 = t.cells().map(|(_, _, n)| n.faults).sum();
        assert_eq!(faults, 100_001);
        let slowest = t.cells().filter_map(|(_, _, n)| n.slowest).max().unwrap();
        assert_eq!(slowest, (9_999, 1_000 + 77_777 * 1_000));
        // The cell of the slowest fault stands for a time near it.
        let (time, _, _) = t
            .cells()
            .find(|(_, _, n)| n.slowest == Some(slowest))
            .unwrap();
        assert!(time.abs_diff(slowest.1) <= t.bucket_ns());
        // Times stay within the faults.
        assert!(t
            .cells()
            .all(|(time, _, _)| (1_000..=100_000_000).contains(&time)));
        let major: Vec<_> = t
            .cells()
            .filter(|(_, c, _)| c.class == FaultClass::Major)
            .collect();
        assert_eq!(major.len(), 1);
        assert_eq!(major[0].1.bucket, 0);
        assert_eq!(major[0].2.slowest, None);
    }

    /// Leaf frames in runs and alternating count alike once settled, and
    /// across a merge of buckets.
    #[test]
    fn site_runs_settle_into_their_buckets() {
        let leaf = |avma| Some(FrameKey::Jit { pid: 1, avma });
        let mut t = Timeline::default();
        let mut time = 0;
        for (avma, n) in [(1, 5), (2, 1), (1, 1), (2, 3), (3, 1)] {
            for _ in 0..n {
                t.add(time, FaultClass::Minor, Owner::Process(1), leaf(avma), None);
                time += 1;
            }
        }
        t.settle();
        t.settle();
        let mut by_leaf = std::collections::BTreeMap::new();
        for (_, leaf, n) in t.sites() {
            *by_leaf.entry(leaf).or_insert(0) += n;
        }
        let want = [(leaf(1), 6), (leaf(2), 4), (leaf(3), 1)];
        assert_eq!(by_leaf.into_iter().collect::<Vec<_>>(), want);
        // A fault far later merges buckets: the pending run goes in first.
        t.add(time, FaultClass::Minor, Owner::Process(1), leaf(3), None);
        t.add(1 << 40, FaultClass::Minor, Owner::Process(1), leaf(3), None);
        t.settle();
        let total: u64 = t.sites().map(|(_, _, n)| n).sum();
        assert_eq!(total, 13);
    }

    /// Four times the faults over the same leaf frames: no more cells.
    #[test]
    fn memory_is_bounded_by_what_is_distinct() {
        let cells = |n: u64| {
            let mut t = Timeline::default();
            for i in 0..n {
                t.add(
                    i * 100_000_000 / n,
                    FaultClass::Minor,
                    Owner::Process((i % 3) as i32),
                    Some(FrameKey::Jit {
                        pid: 1,
                        avma: i % 5,
                    }),
                    None,
                );
            }
            t.len()
        };
        assert!(cells(400_000) <= cells(100_000));
        assert!(cells(100_000) <= BUCKETS as usize * 15);
    }
}
