//! How far up each thread's stack its chains read, given to the BPF
//! collector (its `stack_tops` map, see [`super::bpf`]) so that its stack
//! copies end there: every chain of a thread ends at the same outermost
//! frame, and what lies above it (the environment, auxv, the thread's
//! control block) was about half of each copy on a busy host. A copy that
//! turns out too short (a thread that switches stacks: sigaltstack,
//! goroutines) drops its thread's entry for good.

use rustc_hash::FxHashMap;

use super::bpf::FaultCollector;

/// Bytes above the farthest word a complete chain read: its thread's
/// later chains read the same words, so this is slack, not need.
const SLACK: u64 = 64;

/// Threads followed at most (then they are all forgotten: the map is
/// LRU and forgets by itself).
const THREADS_MAX: usize = 1 << 16;

/// pfprof's copy of the collector's `stack_tops`: the top given each
/// thread, or [`Top::Never`].
#[derive(Default)]
pub(super) struct StackTops {
    by_tid: FxHashMap<i32, Top>,
    /// The kernel refused an entry: no more are tried.
    off: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Top {
    /// The copies of the thread end at this address.
    At(u64),
    /// A copy that ended at the thread's top was too short.
    Never,
}

impl StackTops {
    /// A complete chain of thread `tid` read `needed` bytes above `sp`.
    pub(super) fn learn(&mut self, collector: &FaultCollector, tid: i32, sp: u64, needed: usize) {
        // A chain of one frame read nothing: its stack pointer may be above
        // the root's words (the first faults of ld.so's start).
        if self.off || needed == 0 {
            return;
        }
        let top = sp.saturating_add(needed as u64).saturating_add(SLACK) & !7;
        match self.by_tid.get(&tid) {
            Some(Top::Never) => return,
            Some(Top::At(known)) if *known >= top => return,
            _ => {}
        }
        if self.by_tid.len() >= THREADS_MAX {
            self.by_tid.clear();
        }
        match collector.set_stack_top(tid, top) {
            Ok(()) => {
                self.by_tid.insert(tid, Top::At(top));
            }
            Err(_) => self.off = true,
        }
    }

    /// A copy of thread `tid` that ended at its top was too short for the
    /// chain: its copies go as far as asked from now on.
    pub(super) fn too_short(&mut self, collector: &FaultCollector, tid: i32) {
        let _ = collector.forget_stack_top(tid);
        self.by_tid.insert(tid, Top::Never);
    }

    /// Thread `tid` exited (or exec'd: a new stack).
    pub(super) fn forget(&mut self, collector: &FaultCollector, tid: i32) {
        if let Some(Top::At(_)) = self.by_tid.remove(&tid) {
            let _ = collector.forget_stack_top(tid);
        }
    }
}
