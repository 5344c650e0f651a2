//! The faults over time, kept as counts per time bucket instead of one entry
//! per fault: a bucket holds, per (class, process, stack), how many faults
//! completed in it and the slowest of them. Buckets double in width as the
//! recording grows, so there are never more than [`BUCKETS`] of them and the
//! memory is bounded by what is distinct (stacks, processes), not by the
//! number of faults. The timeline draws 200 bars: a thousand buckets place
//! each fault within a fifth of a bar.

use rustc_hash::FxHashMap;

use crate::analysis::classify::FaultClass;
use crate::analysis::stacks::StackId;
use crate::analysis::Owner;

/// At most this many buckets: when a fault falls past the last one, every
/// bucket is merged with its neighbour.
pub const BUCKETS: u64 = 1024;

/// What a bucket counts under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cell {
    /// Bucket index (its start is `origin + bucket × width`).
    pub bucket: u32,
    /// Class.
    pub class: FaultClass,
    /// Process (or program, system-wide).
    pub owner: Owner,
    /// Stack.
    pub stack: StackId,
}

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
    cells: FxHashMap<Cell, CellTally>,
}

impl Timeline {
    /// Counts one sample completed at `time`.
    pub fn add(
        &mut self,
        time: u64,
        class: FaultClass,
        owner: Owner,
        stack: StackId,
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
        let cell = Cell {
            bucket: (offset >> self.shift) as u32,
            class,
            owner,
            stack,
        };
        self.cells.entry(cell).or_default().merge(CellTally {
            faults: 1,
            slowest: latency_ns.map(|ns| (ns, time)),
        });
    }

    /// Doubles the bucket width, merging neighbours.
    fn coarsen(&mut self) {
        self.shift += 1;
        let cells = std::mem::take(&mut self.cells);
        self.cells.reserve(cells.len());
        for (cell, tally) in cells {
            let cell = Cell {
                bucket: cell.bucket / 2,
                ..cell
            };
            self.cells.entry(cell).or_default().merge(tally);
        }
    }

    /// Bucket width, ns.
    pub fn bucket_ns(&self) -> u64 {
        1 << self.shift
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }

    /// Number of cells (distinct bucket, class, process and stack).
    pub fn len(&self) -> usize {
        self.cells.len()
    }

    /// Every cell with the time that stands for its bucket: the bucket's
    /// middle, kept within the first and last fault.
    pub fn cells(&self) -> impl Iterator<Item = (u64, &Cell, &CellTally)> + '_ {
        let origin = self.origin.unwrap_or(0);
        let half = self.bucket_ns() / 2;
        self.cells.iter().map(move |(cell, tally)| {
            let start = origin.saturating_add(u64::from(cell.bucket) << self.shift);
            let time = start.saturating_add(half).clamp(self.first, self.last);
            (time, cell, tally)
        })
    }

    /// Forgets every fault (a new interval), keeping nothing of the old.
    pub fn clear(&mut self) {
        *self = Timeline::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                0,
                latency,
            );
        }
        t.add(1_000, FaultClass::Major, Owner::Process(2), 0, None);
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

    /// Four times the faults over the same stacks: no more cells.
    #[test]
    fn memory_is_bounded_by_what_is_distinct() {
        let cells = |n: u64| {
            let mut t = Timeline::default();
            for i in 0..n {
                t.add(
                    i * 100_000_000 / n,
                    FaultClass::Minor,
                    Owner::Process((i % 3) as i32),
                    (i % 5) as u32,
                    None,
                );
            }
            t.len()
        };
        assert!(cells(400_000) <= cells(100_000));
        assert!(cells(100_000) <= BUCKETS as usize * 15);
    }
}
