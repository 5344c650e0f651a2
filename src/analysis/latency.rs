//! Fault latency: the time a fault spent in the kernel, from its entry
//! tracepoint to the event that completes it (same thread). Percentiles and
//! a log2 histogram per class, as bpftrace's `hist()` prints them.

use std::fmt::Write as _;

use serde::Serialize;

use crate::text::thousands;

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

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl LatencyStats {
    /// Statistics of `latencies_ns` (sorted in place).
    pub fn from_values(latencies_ns: &mut [u64]) -> LatencyStats {
        latencies_ns.sort_unstable();
        let mut counts = [0u64; 65];
        for &ns in latencies_ns.iter() {
            // bucket k holds [2^(k-1), 2^k); bucket 0 holds 0.
            counts[(64 - ns.leading_zeros()) as usize] += 1;
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
            count: latencies_ns.len() as u64,
            p50_ns: percentile(latencies_ns, 50.0),
            p90_ns: percentile(latencies_ns, 90.0),
            p99_ns: percentile(latencies_ns, 99.0),
            max_ns: latencies_ns.last().copied().unwrap_or(0),
            log2_hist,
        }
    }

    /// `minor latency: 262,144 faults, p50 1.1µs p90 1.6µs p99 4.2µs max 1.2ms`
    /// and the histogram.
    pub fn to_text(&self, class: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{class} latency: {} faults, p50 {} p90 {} p99 {} max {}",
            thousands(self.count),
            human_ns(self.p50_ns),
            human_ns(self.p90_ns),
            human_ns(self.p99_ns),
            human_ns(self.max_ns)
        );
        let widest = self
            .log2_hist
            .iter()
            .map(|b| b.count)
            .max()
            .unwrap_or(0)
            .max(1);
        for b in &self.log2_hist {
            let bar = "@".repeat(((b.count * 52).div_ceil(widest)) as usize);
            let _ = writeln!(
                s,
                "[{:>6}, {:>6}) {:>10} |{bar:<52}|",
                short_ns(b.lo_ns),
                short_ns(b.hi_ns),
                thousands(b.count)
            );
        }
        s
    }
}

/// `1500` → `1.5µs`.
pub fn human_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// Powers of two as bpftrace prints them: `512`, `1K`, `4M`.
fn short_ns(ns: u64) -> String {
    match ns {
        u64::MAX => "inf".into(),
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{}G", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Percentiles (nearest rank), max, and log2 buckets from first to last non-empty.
    #[test]
    fn stats() {
        let mut values: Vec<u64> = (1..=100).map(|i| i * 100).collect();
        let s = LatencyStats::from_values(&mut values);
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
        assert_eq!(LatencyStats::from_values(&mut []), LatencyStats::default());
        let zero = LatencyStats::from_values(&mut [0, 0, 1]);
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

    /// Human-readable durations and bucket bounds.
    #[test]
    fn formatting() {
        for (ns, want) in [
            (0, "0ns"),
            (999, "999ns"),
            (1500, "1.5µs"),
            (2_500_000, "2.5ms"),
            (3_000_000_000, "3.00s"),
        ] {
            assert_eq!(human_ns(ns), want);
        }
        for (ns, want) in [
            (512, "512"),
            (1024, "1K"),
            (4 << 20, "4M"),
            (1 << 30, "1G"),
            (u64::MAX, "inf"),
        ] {
            assert_eq!(short_ns(ns), want);
        }
    }
}
