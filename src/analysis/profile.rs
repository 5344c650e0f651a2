//! What the analysis leaves for the later stages: the [`Profile`], its
//! counts by raw key ([`SampleKey`], [`TargetKey`]) and its totals.

use rustc_hash::FxHashMap;

use crate::analysis::classify::{Access, ClassCounts, FaultClass};
use crate::analysis::process::{ModuleId, Processes, ProgramId};
use crate::analysis::stacks::{FrameKey, StackId, StackTable};
use crate::analysis::startup::StartupTracker;
use crate::analysis::{latency, timeline};
use crate::format::decode::{self, DecodeStats};
use crate::format::perf_data::RecordingMeta;
use pfprof_symbolize::Symbolizer;

/// Where a fault landed, before symbolization.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKey {
    /// In a module (file mapping or its bss tail) at this file offset.
    Module {
        /// The module.
        module: ModuleId,
        /// File offset of the faulting address.
        file_offset: u64,
        /// True for the anonymous bss tail.
        bss_tail: bool,
    },
    /// A named pseudo mapping (`[vdso]`).
    Pseudo(ModuleId),
    /// `[heap]`.
    Heap,
    /// `[stack]` (reported or inferred).
    Stack,
    /// Other anonymous memory.
    Anon,
    /// No known mapping.
    Unknown,
}

impl TargetKey {
    /// The label of a target no object names: `[heap]`, `[stack]`,
    /// `[anon]`, `[unknown]`; and `[anon]` for a bss tail the symbolizer
    /// placed in none of its object's sections (`in_object` false):
    /// anonymous memory that merely follows the object's data, beyond its
    /// last segment. None: the object's path names the target.
    pub fn label(self, in_object: bool) -> Option<&'static str> {
        match self {
            TargetKey::Module { bss_tail: true, .. } if !in_object => Some("[anon]"),
            TargetKey::Module { .. } | TargetKey::Pseudo(_) => None,
            TargetKey::Heap => Some("[heap]"),
            TargetKey::Stack => Some("[stack]"),
            TargetKey::Anon => Some("[anon]"),
            TargetKey::Unknown => Some("[unknown]"),
        }
    }

    /// The module the target lies in, if any.
    pub fn module(self) -> Option<ModuleId> {
        match self {
            TargetKey::Module { module, .. } | TargetKey::Pseudo(module) => Some(module),
            _ => None,
        }
    }
}

/// Whose faults a key counts: a process's, or in a system-wide recording
/// those of every process that runs a program (by its command name), so
/// that the thousands of short-lived processes of a build do not multiply
/// the keys (each process keeps its own totals, [`Profile::process_counts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Owner {
    /// A process.
    Process(i32),
    /// Every process of a program.
    Program(ProgramId),
}

impl Owner {
    /// The process, when it is one.
    pub fn pid(self) -> Option<i32> {
        match self {
            Owner::Process(pid) => Some(pid),
            Owner::Program(_) => None,
        }
    }
}

/// One process's faults by class, and which of its major faults were
/// swap-ins.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ProcessTally {
    /// Faults by class.
    pub faults: ClassCounts,
    /// Of the major ones, those on anonymous memory.
    pub major_swap: u64,
}

/// What a fault is counted under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SampleKey {
    /// The process, or its program (system-wide).
    pub owner: Owner,
    /// Class.
    pub class: FaultClass,
    /// Access.
    pub access: Access,
    /// Interned user (and optionally kernel) stack.
    pub stack: StackId,
    /// Target.
    pub target: TargetKey,
    /// Taken during a program's start-up (exec until `main`): the index of
    /// its window in [`StartupTracker::windows`].
    pub startup: Option<u32>,
}

/// Faults counted under one key, and the time they spent in the kernel.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    /// Faults.
    pub faults: u64,
    /// Sum of their latencies (entry tracepoint to completion), ns.
    pub latency_ns: u64,
}

/// Records the kernel dropped, by the event that lost them (`report.json`'s
/// `totals.lost_by_class`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LostByClass {
    /// Samples of `minor-faults` (PERF_RECORD_LOST_SAMPLES).
    pub minor: u64,
    /// Samples of `major-faults`.
    pub major: u64,
    /// Fault-entry tracepoint records.
    pub entries: u64,
    /// Records of the syscalls that give memory back (the resident pages
    /// they took away are still counted).
    pub memory_calls: u64,
    /// Records whose event the kernel does not say: PERF_RECORD_LOST counts
    /// everything a full ring buffer dropped (samples of any event, mmaps,
    /// comms), whichever event it was.
    pub unattributed: u64,
}

impl LostByClass {
    pub(super) fn add(&mut self, kind: Option<decode::EventKind>, count: u64) {
        use decode::EventKind as K;
        let slot = match kind {
            Some(K::Minor) => &mut self.minor,
            Some(K::Major) => &mut self.major,
            Some(K::EntryUser | K::EntryKernel) => &mut self.entries,
            Some(K::Munmap | K::Madvise | K::Mremap | K::MremapDone | K::BrkDone | K::RssStat) => {
                &mut self.memory_calls
            }
            Some(K::MainEntry | K::Other) | None => &mut self.unattributed,
        };
        *slot = slot.saturating_add(count);
    }
}

/// Everything counted while replaying.
#[derive(Debug, Default, Clone)]
pub struct Totals {
    /// Faults by class.
    pub by_class: ClassCounts,
    /// Faults by class × access.
    pub by_class_access: [[u64; 4]; 3],
    /// Major faults on anonymous memory (swap-ins).
    pub major_swap: u64,
    /// Major faults on files.
    pub major_file: u64,
    /// Faults taken in kernel mode on user memory.
    pub kernel_mode: u64,
    /// Records the kernel dropped.
    pub lost: u64,
    /// The same, by the event that lost them.
    pub lost_by_class: LostByClass,
    /// Faults of pfprof itself, left out of a system-wide profile.
    pub pfprof_faults: u64,
    /// Completed faults without a matching entry tracepoint.
    pub unpaired: u64,
    /// Entry tracepoints with no completion (spurious faults, SIGSEGV, retries).
    pub entries_without_completion: u64,
    /// Samples without a call chain.
    pub no_callchain: u64,
    /// Call chains whose unwinding stopped early (dwarf mode marks them).
    pub truncated_stacks: u64,
}

/// The counted, unsymbolized profile.
pub struct Profile {
    /// The resident pages and who made them present, when the recording
    /// allows (see [`crate::analysis::resident`]).
    pub resident: Option<crate::analysis::resident::Ledger>,
    /// Metadata written by `record`.
    pub meta: Option<RecordingMeta>,
    /// Command line from the perf header.
    pub cmdline: Option<Vec<String>>,
    /// Processes and modules.
    pub processes: Processes,
    /// Per-process totals.
    pub process_counts: FxHashMap<i32, ProcessTally>,
    /// Interned stacks.
    pub stacks: StackTable,
    /// Fault counts.
    pub counts: FxHashMap<SampleKey, Tally>,
    /// Latencies of the paired faults, per class.
    pub latencies: [latency::Latencies; 3],
    /// Faults per time bucket, for the timeline.
    pub timeline: timeline::Timeline,
    /// Totals.
    pub totals: Totals,
    /// Whether the recording has fault-entry tracepoints.
    pub has_entries: bool,
    /// Replay counters.
    pub decode: DecodeStats,
    /// The start-up window.
    pub startup: StartupTracker,
    /// First start-up fault on each target, per window: (time, stack).
    pub first_touch: FxHashMap<(u32, TargetKey), (u64, StackId)>,
    /// The symbolizer, with the modules it already opened during replay.
    pub symbolizer: Symbolizer,
    /// How perf sampled the faults (counts are scaled by the period).
    pub sampling: Option<decode::Sampling>,
    /// perf's `page-faults` event: minor and major not told apart.
    pub any_fault_event: bool,
    /// Unwinding counters of perf's `--call-graph dwarf` samples.
    pub unwind: Option<crate::unwind::UnwindStats>,
    /// The recorded kernel's build-id, when the recording says.
    pub kernel_build_id: Option<Vec<u8>>,
    /// The perf maps (`perf-PID.map`) naming JIT frames, by pid; filled
    /// after the replay by whoever knows where they are.
    pub jit_maps: FxHashMap<i32, pfprof_symbolize::PerfMap>,
    /// Why perf maps of processes with JIT frames were not used.
    pub jit_warnings: Vec<crate::format::jitmaps::JitMapProblem>,
    /// Faults of the latest key not yet in `counts` and `process_counts`
    /// (key, pid, swap-ins, tally): a run of one key (a loop touching
    /// pages) costs two hash lookups, not two a fault. Added by
    /// [`Profile::settle`], before anything reads the counts.
    pub(super) run: Option<(SampleKey, i32, bool, Tally)>,
}

impl Profile {
    /// The processes with JIT frames (code in anonymous memory), sorted.
    pub fn jit_pids(&self) -> Vec<i32> {
        let pids: std::collections::BTreeSet<i32> = self
            .stacks
            .unique_frames()
            .filter_map(|frame| match frame {
                FrameKey::Jit { pid, .. } => Some(pid),
                _ => None,
            })
            .collect();
        pids.into_iter().collect()
    }

    /// The modules with faults or frames, each once, in id order.
    pub fn modules_in_use(&self) -> Vec<ModuleId> {
        let in_frames = self.stacks.unique_frames().filter_map(|frame| match frame {
            FrameKey::Code { module, .. } => Some(module),
            _ => None,
        });
        let in_targets = self.counts.keys().filter_map(|key| key.target.module());
        let ids: std::collections::BTreeSet<ModuleId> = in_frames.chain(in_targets).collect();
        ids.into_iter().collect()
    }
}

impl Profile {
    /// Adds `weight` faults of `key` (of process `pid`, swap-ins when
    /// `swap_in`) to the totals, the process's counts and the key's tally,
    /// with their latency if measured.
    pub(super) fn count(
        &mut self,
        key: SampleKey,
        pid: i32,
        (weight, swap_in): (u64, bool),
        latency_ns: Option<u64>,
    ) {
        let class_index = key.class as usize;
        self.totals.by_class.add(key.class, weight);
        self.totals.by_class_access[class_index][key.access as usize] += weight;
        let latency = latency_ns.map_or(0, |ns| ns.saturating_mul(weight));
        if let Some(ns) = latency_ns {
            self.latencies[class_index].add(ns, 1);
        }
        match &mut self.run {
            Some((k, p, s, tally)) if *k == key && *p == pid && *s == swap_in => {
                tally.faults += weight;
                tally.latency_ns += latency;
            }
            _ => {
                self.settle();
                let tally = Tally {
                    faults: weight,
                    latency_ns: latency,
                };
                self.run = Some((key, pid, swap_in, tally));
            }
        }
    }

    /// Adds the run of faults of one key to the counts: after the last
    /// fault, before anything reads them.
    pub(crate) fn settle(&mut self) {
        let Some((key, pid, swap_in, run)) = self.run.take() else {
            return;
        };
        let process = self.process_counts.entry(pid).or_default();
        process.faults.add(key.class, run.faults);
        if swap_in {
            process.major_swap += run.faults;
        }
        let tally = self.counts.entry(key).or_default();
        tally.faults += run.faults;
        tally.latency_ns += run.latency_ns;
    }
}
