//! The records the kernel turned away that no `PERF_RECORD_LOST` says yet.
//!
//! The kernel writes a ring's LOST record only when it next writes to that
//! ring, so what a full ring refused just before the events stopped is
//! never said: 2 to 27 faults of 500,000 in a 10 s system-wide `--no-bpf`
//! recording beside a build went missing with no lost record, and the
//! report said INCOMPLETE. Each event also counts what it could not write
//! (`PERF_FORMAT_LOST`, kernels from 6.0), whole; at the end pfprof writes
//! those counts as perf does (a `PERF_RECORD_LOST_SAMPLES` of each event
//! and CPU), and the replay takes the LOST records as part of them
//! (`RecordingMeta::lost_samples_whole`).

use std::os::fd::OwnedFd;

use crate::format::events::own;
use crate::sys;

/// The `PERF_RECORD_LOST_SAMPLES` of each event fd that lost records, at
/// `time`; None when the kernel does not count them (before 6.0).
pub(super) fn lost_samples(fds: &[Vec<OwnedFd>], time: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for fd in fds.iter().flatten() {
        let lost = sys::read_lost(fd).ok()??;
        if lost > 0 {
            own::write_lost_samples(sys::event_id(fd).ok()?, lost, time, &mut out);
        }
    }
    Some(out)
}
