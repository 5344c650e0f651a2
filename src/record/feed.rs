//! The live tap's feed (`record --interval`, `live`, `top`): the records as
//! they are drained, typed or decoded, and the kernel's counts of the faults
//! at the moments the tap asks for them.

use std::os::fd::OwnedFd;

use super::{KernelCounts, Tap};
use crate::format::decode::LiveDecoder;
use crate::sys;

/// The tap and how records reach it: typed from the rewriter, or (without
/// one: `--call-graph fp` or `none` through perf's own samples) decoded from
/// the drained bytes, in time order once settled.
pub(super) struct Feed<'a> {
    pub(super) tap: &'a mut (dyn Tap + 'static),
    pub(super) decoder: Option<LiveDecoder>,
}

impl Feed<'_> {
    pub(super) fn bytes(&mut self, bytes: &[u8]) {
        if let Some(decoder) = &mut self.decoder {
            decoder.push(bytes);
        }
    }

    pub(super) fn settled(&mut self, cutoff: u64) {
        if let Some(decoder) = &mut self.decoder {
            let tap = &mut *self.tap;
            decoder.flush_before(cutoff, |time, event| tap.event(time, event));
        }
        self.tap.settled(cutoff);
    }

    /// Reads the kernel's counts for the tap, at a pass's start (before
    /// its cutoff): when it asks (a read per event and CPU, so not every
    /// pass), or `always`.
    pub(super) fn count(&mut self, fds: &[Vec<OwnedFd>], always: bool) {
        let at = sys::monotonic_ns();
        if always || self.tap.wants_counts(at) {
            // Each CPU's count is read through an interrupt to it (25-60 us
            // in a VM), and faults go on meanwhile: a second read says
            // about how many.
            let counts = kernel_counts(fds);
            let read = sys::monotonic_ns();
            let (Some(counts), Some(again)) = (counts, kernel_counts(fds)) else {
                return;
            };
            let total = |c: KernelCounts| c.minor + c.major;
            let spread = 2 * total(again).saturating_sub(total(counts));
            // Each CPU's count is of some moment of the read: the middle
            // cuts as many faults counted late as it leaves uncounted.
            self.tap.counted(at + (read - at) / 2, counts, spread);
        }
    }
}

/// The kernel's counts of the faults the events follow (`fds[0]`, minor;
/// `fds[1]`, major).
pub(super) fn kernel_counts(fds: &[Vec<OwnedFd>]) -> Option<KernelCounts> {
    let sum = |event: &[OwnedFd]| -> Option<u64> {
        event.iter().map(|fd| sys::read_counter(fd).ok()).sum()
    };
    Some(KernelCounts {
        minor: sum(fds.first()?)?,
        major: sum(fds.get(1)?)?,
    })
}
