//! How pfprof's recorder ran, as its metadata keeps it: who copied the
//! user stacks in dwarf mode, and at what priority the draining thread ran.
//! A name this pfprof does not know (a newer recorder's) reads as
//! `Unknown`, not as an error.

use serde::{Deserialize, Serialize};

/// Who copied the user stacks in dwarf mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Collector {
    /// pfprof's BPF collector.
    Bpf,
    /// The kernel's stack copies (`PERF_SAMPLE_STACK_USER`).
    Perf,
    /// A name this pfprof does not know.
    #[serde(other)]
    Unknown,
}

/// How the draining thread was scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecorderPriority {
    /// The real-time class (SCHED_FIFO).
    #[serde(rename = "fifo")]
    Fifo,
    /// nice -10.
    #[serde(rename = "nice -10")]
    Nice,
    /// As it was started.
    #[serde(rename = "ordinary")]
    Ordinary,
    /// A name this pfprof does not know.
    #[serde(other, rename = "unknown")]
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in recordings read back; an unknown one reads as Unknown.
    #[test]
    fn names_in_recordings() {
        for (json, collector) in [
            ("\"bpf\"", Collector::Bpf),
            ("\"perf\"", Collector::Perf),
            ("\"ebpf-v2\"", Collector::Unknown),
        ] {
            assert_eq!(serde_json::from_str::<Collector>(json).unwrap(), collector);
        }
        for (json, priority) in [
            ("\"fifo\"", RecorderPriority::Fifo),
            ("\"nice -10\"", RecorderPriority::Nice),
            ("\"ordinary\"", RecorderPriority::Ordinary),
            ("\"deadline\"", RecorderPriority::Unknown),
        ] {
            assert_eq!(
                serde_json::from_str::<RecorderPriority>(json).unwrap(),
                priority
            );
            if priority != RecorderPriority::Unknown {
                assert_eq!(serde_json::to_string(&priority).unwrap(), json);
            }
        }
        assert_eq!(serde_json::to_string(&Collector::Bpf).unwrap(), "\"bpf\"");
    }
}
