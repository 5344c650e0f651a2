//! What a report of perf's own recording (`perf record`, not `pfprof
//! record`) cannot say, as warnings: pfprof reads such a file as it reads
//! its own, but perf's options decide what is in it.

use crate::analysis::Profile;
use crate::format::decode::Sampling;

/// The warnings of a recording written by perf (none for pfprof's own).
pub fn warnings(profile: &Profile) -> Vec<String> {
    if profile.meta.is_some() {
        return Vec::new();
    }
    let mut out = Vec::new();
    match profile.sampling {
        Some(Sampling::Period(n)) => out.push(format!(
            "sampled recording (perf record -c {n}): each sample counted as {n} faults; counts are estimates"
        )),
        Some(Sampling::Frequency(hz)) => out.push(format!(
            "sampled recording (perf record -F {hz}): each sample counted as its period; counts are estimates"
        )),
        None => {}
    }
    if profile.any_fault_event {
        out.push(
            "perf's page-faults event does not tell minor from major faults: all are counted as minor (record -e minor-faults,major-faults)".into(),
        );
    }
    if !profile.has_entries {
        out.push(
            "COW and access types unavailable: perf recorded no fault-entry tracepoints (add -e exceptions:page_fault_user,exceptions:page_fault_kernel)".into(),
        );
    } else if profile.sampling.is_some() {
        out.push(
            "COW and access types only for the faults whose entry and completion were both sampled (record with -c 1)".into(),
        );
    }
    out
}

/// Why the recording's kernel frames cannot be named from this machine's
/// `/proc/kallsyms`: the recorded kernel's build-id is not the running
/// kernel's. None when they match or the recording does not say.
pub fn kernel_mismatch(profile: &Profile) -> Option<String> {
    let recorded = profile.kernel_build_id.as_deref()?;
    let running = crate::sys::procfs::kernel_build_id();
    if running.as_deref() == Some(recorded) {
        return None;
    }
    Some(format!(
        "kernel frames stay addresses: the recording's kernel (build-id {}) is not the running one ({})",
        crate::text::hex(recorded),
        running.as_deref().map_or_else(|| "unknown".into(), crate::text::hex)
    ))
}
