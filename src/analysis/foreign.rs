//! What a report of perf's own recording (`perf record`, not `pfprof
//! record`) cannot say, as facts the report warns of: pfprof reads such a
//! file as it reads its own, but perf's options decide what is in it.

use crate::analysis::Profile;
use crate::format::decode::Sampling;

/// What a recording perf made cannot say (the outputs word it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfNote {
    /// `perf record -c N`: each sample counted as N faults.
    SampledPeriod(u64),
    /// `perf record -F HZ`: each sample counted as its period.
    SampledFrequency(u64),
    /// perf's `page-faults` event: minor and major not told apart.
    AnyFaultEvent,
    /// No fault-entry tracepoints: no COW, no access types.
    NoEntries,
    /// Entries sampled too: COW and access only where both ends were.
    EntriesSampled,
}

/// What a recording written by perf cannot say (nothing for pfprof's own).
pub fn notes(profile: &Profile) -> Vec<PerfNote> {
    if profile.meta.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    match profile.sampling {
        Some(Sampling::Period(n)) => out.push(PerfNote::SampledPeriod(n)),
        Some(Sampling::Frequency(hz)) => out.push(PerfNote::SampledFrequency(hz)),
        None => {}
    }
    if profile.any_fault_event {
        out.push(PerfNote::AnyFaultEvent);
    }
    if !profile.has_entries {
        out.push(PerfNote::NoEntries);
    } else if profile.sampling.is_some() {
        out.push(PerfNote::EntriesSampled);
    }
    out
}

/// The recorded kernel is not the running one: its frames cannot be named
/// from this machine's `/proc/kallsyms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelMismatch {
    /// The recorded kernel's build-id.
    pub recorded: Vec<u8>,
    /// The running kernel's, when it can be read.
    pub running: Option<Vec<u8>>,
}

/// Whether the recording's kernel frames cannot be named here: the
/// recorded kernel's build-id is not the running kernel's. None when they
/// match or the recording does not say.
pub fn kernel_mismatch(profile: &Profile) -> Option<KernelMismatch> {
    let recorded = profile.kernel_build_id.as_deref()?;
    let running = crate::sys::procfs::kernel_build_id();
    if running.as_deref() == Some(recorded) {
        return None;
    }
    Some(KernelMismatch {
        recorded: recorded.to_vec(),
        running,
    })
}
