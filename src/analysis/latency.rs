//! Fault latency: the time a fault spent in the kernel, from its entry
//! tracepoint to the event that completes it (same thread). Percentiles and
//! a log2 histogram per class, as bpftrace's `hist()` prints them.
//!
//! Latencies are counted per distinct value ([`Latencies`]), not kept per
//! fault: exact while there are at most [`EXACT_DISTINCT`] distinct values
//! (in practice always: faults take from a few hundred ns to a few ms),
//! then rounded to 12 significant bits (0.025%), which bounds the table.

use serde::Serialize;

/// One log2 bucket: `[lo_ns, hi_ns)`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Bucket {
    /// Inclusive lower bound.
    pub lo_ns: u64,
    /// Exclusive upper bound.
    pub hi_ns: u64,
    /// Faults in the bucket.
    pub count: u64,
}

/// Latency of one class.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct LatencyStats {
    /// Faults with a measured latency.
    pub count: u64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// Slowest.
    pub max_ns: u64,
    /// Non-empty log2 buckets, from the first to the last non-empty one.
    pub log2_hist: Vec<Bucket>,
}

/// Distinct latencies kept exactly; past this, values are rounded.
pub const EXACT_DISTINCT: usize = 1 << 18;

/// Significant bits kept once values are rounded.
const ROUNDED_BITS: u32 = 12;

/// The latencies of one class: how many faults took each (distinct) time.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    counts: rustc_hash::FxHashMap<u64, u64>,
    rounded: bool,
}

/// `ns` with the bits below its 12 most significant cleared.
fn round(ns: u64) -> u64 {
    let low = (64 - ns.leading_zeros()).saturating_sub(ROUNDED_BITS);
    ns >> low << low
}

impl Latencies {
    /// Counts `count` faults that took `ns`.
    pub fn add(&mut self, ns: u64, count: u64) {
        let ns = if self.rounded { round(ns) } else { ns };
        *self.counts.entry(ns).or_default() += count;
        if !self.rounded && self.counts.len() > EXACT_DISTINCT {
            self.rounded = true;
            let exact = std::mem::take(&mut self.counts);
            for (ns, n) in exact {
                *self.counts.entry(round(ns)).or_default() += n;
            }
        }
    }

    /// Faults counted.
    pub fn len(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Whether none was counted.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// Distinct values held.
    pub fn distinct(&self) -> usize {
        self.counts.len()
    }

    /// Whether values were rounded (more than [`EXACT_DISTINCT`] distinct).
    pub fn rounded(&self) -> bool {
        self.rounded
    }

    /// Forgets every latency.
    pub fn clear(&mut self) {
        *self = Latencies::default();
    }
}

/// Nearest-rank percentile of (value, count) pairs sorted by value, of
/// `total` values in all.
fn percentile_of_counts(sorted: &[(u64, u64)], total: u64, p: f64) -> u64 {
    if total == 0 {
        return 0;
    }
    let rank = (((p / 100.0) * total as f64).ceil() as u64).clamp(1, total);
    let mut seen = 0;
    for &(ns, n) in sorted {
        seen += n;
        if seen >= rank {
            return ns;
        }
    }
    sorted.last().map_or(0, |&(ns, _)| ns)
}

/// Nearest-rank percentile of sorted values.
#[cfg(test)]
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl LatencyStats {
    /// Statistics of `latencies_ns`.
    pub fn from_values(latencies_ns: &[u64]) -> LatencyStats {
        let mut counted = Latencies::default();
        for &ns in latencies_ns {
            counted.add(ns, 1);
        }
        LatencyStats::from_counts(&counted)
    }

    /// Statistics of counted latencies.
    pub fn from_counts(latencies: &Latencies) -> LatencyStats {
        let mut sorted: Vec<(u64, u64)> =
            latencies.counts.iter().map(|(&ns, &n)| (ns, n)).collect();
        sorted.sort_unstable();
        let total: u64 = sorted.iter().map(|&(_, n)| n).sum();
        let mut counts = [0u64; 65];
        for &(ns, n) in &sorted {
            // bucket k holds [2^(k-1), 2^k); bucket 0 holds 0.
            counts[(64 - ns.leading_zeros()) as usize] += n;
        }
        let first = counts.iter().position(|&c| c > 0);
        let last = counts.iter().rposition(|&c| c > 0);
        let log2_hist = match (first, last) {
            (Some(first), Some(last)) => (first..=last)
                .map(|k| Bucket {
                    lo_ns: if k == 0 { 0 } else { 1u64 << (k - 1) },
                    hi_ns: if k == 0 {
                        1
                    } else if k == 64 {
                        u64::MAX
                    } else {
                        1u64 << k
                    },
                    count: counts[k],
                })
                .collect(),
            _ => Vec::new(),
        };
        LatencyStats {
            count: total,
            p50_ns: percentile_of_counts(&sorted, total, 50.0),
            p90_ns: percentile_of_counts(&sorted, total, 90.0),
            p99_ns: percentile_of_counts(&sorted, total, 99.0),
            max_ns: sorted.last().map_or(0, |&(ns, _)| ns),
            log2_hist,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Percentiles (nearest rank), max, and log2 buckets from first to last non-empty.
    #[test]
    fn stats() {
        let values: Vec<u64> = (1..=100).map(|i| i * 100).collect();
        let s = LatencyStats::from_values(&values);
        assert_eq!(
            (s.count, s.p50_ns, s.p90_ns, s.p99_ns, s.max_ns),
            (100, 5000, 9000, 9900, 10000)
        );
        assert_eq!(
            s.log2_hist.first().unwrap(),
            &Bucket {
                lo_ns: 64,
                hi_ns: 128,
                count: 1
            }
        );
        assert_eq!(
            s.log2_hist.last().unwrap(),
            &Bucket {
                lo_ns: 8192,
                hi_ns: 16384,
                count: 19
            }
        );
        assert_eq!(s.log2_hist.iter().map(|b| b.count).sum::<u64>(), 100);
        assert_eq!(LatencyStats::from_values(&[]), LatencyStats::default());
        let zero = LatencyStats::from_values(&[0, 0, 1]);
        assert_eq!(
            zero.log2_hist,
            [
                Bucket {
                    lo_ns: 0,
                    hi_ns: 1,
                    count: 2
                },
                Bucket {
                    lo_ns: 1,
                    hi_ns: 2,
                    count: 1
                }
            ]
        );
    }

    /// Counting distinct values gives the percentiles of the values; past
    /// the exact limit the table stays bounded and the values close.
    #[test]
    fn counted_latencies_are_bounded() {
        let mut values: Vec<u64> = (0..200_000u64)
            .map(|i| (i * 7919) % 100_003 + 300)
            .collect();
        let mut counted = Latencies::default();
        for &v in &values {
            counted.add(v, 1);
        }
        assert!(!counted.rounded());
        values.sort_unstable();
        let stats = LatencyStats::from_counts(&counted);
        assert_eq!(stats.count, 200_000);
        assert_eq!(stats.p90_ns, percentile(&values, 90.0));
        assert_eq!(stats.p99_ns, percentile(&values, 99.0));
        assert_eq!(stats.max_ns, *values.last().unwrap());

        let mut wide = Latencies::default();
        for i in 0..(EXACT_DISTINCT as u64 * 4) {
            wide.add(1_000_000 + i * 3, 1);
        }
        assert!(wide.rounded());
        assert!(wide.distinct() <= EXACT_DISTINCT);
        assert_eq!(wide.len(), EXACT_DISTINCT as u64 * 4);
        let p50 = LatencyStats::from_counts(&wide).p50_ns as f64;
        let exact = (1_000_000 + EXACT_DISTINCT as u64 * 6) as f64;
        assert!((p50 - exact).abs() / exact < 1e-3, "{p50} vs {exact}");
        assert_eq!(round(0), 0);
        assert_eq!(round(4095), 4095);
        assert_eq!(round(4097), 4096);
    }
}
