//! The one symbolized profile model that every output reads: the counted
//! rows with their stacks, classes, accesses, targets and latency, the
//! names of each unique frame, the fault times, and the report's summary
//! and side tables (processes, modules with build-ids, start-up, warnings).
//! [`resolve::resolve`] builds it from an analysed recording.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::analysis::classify::{Access, FaultClass};
use crate::analysis::stacks::{FrameKey, StackId, Stacks};
use crate::analysis::Owner;
use report::{FrameRow, Report, TargetRow};

pub mod region;
pub mod report;
pub mod resolve;
pub mod startup;
pub mod warning;

/// A symbolized profile.
pub struct Model {
    /// The summary and side tables (serialized as `report.json`).
    pub report: Report,
    /// The counted rows, one per (process, class, access, stack, target).
    pub samples: Vec<SampleRow>,
    /// The raw frames of the stacks in `samples` and `timeline`.
    pub stacks: Stacks,
    /// The functions of each frame in `stacks`, innermost (inlined) first,
    /// the real function last; never empty.
    pub frames: FxHashMap<FrameKey, Vec<FrameRow>>,
    /// The faults per time bucket, class and process, in time order.
    pub timeline: Vec<TimePoint>,
    /// The busiest leaf frames of each time bucket, which label its bursts.
    pub timeline_sites: Vec<SitePoint>,
    /// Where the timeline's clock starts: the exec, else the first record.
    pub timeline_origin: u64,
    /// Whether the rows marked `startup` are one window's (`--startup-of`,
    /// the report's `startup`), not every window's.
    pub startup_of_one: bool,
    /// The programs of [`Owner::Program`] rows and points (a system-wide
    /// recording's), by id, made safe to show.
    pub programs: Vec<String>,
    /// Resident memory per site, when the recording can say.
    pub resident: Option<ResidentRows>,
}

/// Resident memory per site at the peak and at exit (see
/// [`crate::analysis::resident`]).
#[derive(Debug, Default)]
pub struct ResidentRows {
    /// At the peak of the recorded processes' total.
    pub peak: Vec<ResidentRow>,
    /// At each process's exit, or the recording's end.
    pub exit: Vec<ResidentRow>,
    /// The recorded processes' total over time, for the timeline.
    pub series: Vec<ResidentPoint>,
}

/// The recorded processes' resident pages at a time: (ns, the recording's
/// clock; pages by kind: anon, file, shmem).
pub type ResidentPoint = (u64, [u64; 3]);

/// Pages one (process, stack, target, kind) held.
#[derive(Debug, Clone)]
pub struct ResidentRow {
    /// Its process.
    pub owner: Owner,
    /// Its process's command name.
    pub comm: Arc<str>,
    /// Key into [`Model::stacks`]: the stack of the fault that made the
    /// pages present.
    pub stack: StackId,
    /// Where they are.
    pub target: Arc<TargetRow>,
    /// How the kernel counts them.
    pub kind: crate::analysis::resident::MemoryKind,
    /// Pages.
    pub pages: u64,
}

/// Faults counted under one (process or program, class, access, stack,
/// target).
#[derive(Debug, Clone)]
pub struct SampleRow {
    /// The process, or (system-wide) the program.
    pub owner: Owner,
    /// Its command name (shared by its rows).
    pub comm: Arc<str>,
    /// Class.
    pub class: FaultClass,
    /// Access.
    pub access: Access,
    /// Key into [`Model::stacks`].
    pub stack: StackId,
    /// What the faults touched (shared by the rows of the same target).
    pub target: Arc<TargetRow>,
    /// Faults.
    pub faults: u64,
    /// Their summed latency, ns (0 without the entry tracepoints).
    pub latency_ns: u64,
    /// In a program's start-up (exec to `main`): any window's, or under
    /// `--startup-of` the chosen one's.
    pub startup: bool,
}

/// One fault in time.
#[derive(Debug, Clone, Copy)]
pub struct TimePoint {
    /// The time its bucket stands for, ns.
    pub time: u64,
    /// Its class.
    pub class: FaultClass,
    /// Its process, or (system-wide) program.
    pub owner: Owner,
    /// Faults (samples) in the bucket.
    pub faults: u64,
    /// The slowest of them whose entry was seen: time in the kernel (ns, at
    /// most u32::MAX) and when it completed.
    pub slowest: Option<(u32, u64)>,
}

/// The faults of one leaf frame in one time bucket.
#[derive(Debug, Clone, Copy)]
pub struct SitePoint {
    /// The time its bucket stands for, ns.
    pub time: u64,
    /// The leaf frame (None: no stack), a key into [`Model::frames`].
    pub leaf: Option<FrameKey>,
    /// Faults.
    pub faults: u64,
}

impl Model {
    /// The functions of `stack`, root first: each frame's real function
    /// before the functions inlined into it.
    pub fn functions_root_first(&self, stack: StackId) -> impl Iterator<Item = &FrameRow> {
        let leaf_first: Vec<FrameKey> = self.stacks.frames(stack).collect();
        leaf_first
            .into_iter()
            .rev()
            .flat_map(|frame| self.frames.get(&frame).into_iter().flatten().rev())
    }

    /// The real (not inlined) function of a frame, the name a user knows a
    /// site by.
    pub fn frame_function(&self, frame: FrameKey) -> Option<&str> {
        self.frames
            .get(&frame)?
            .iter()
            .find(|row| !row.inlined)
            .map(|row| row.function.as_str())
    }

    /// The innermost real (not inlined) function of `stack`, the name a
    /// user knows a site by.
    pub fn leaf_function(&self, stack: StackId) -> Option<&str> {
        self.stacks
            .frames(stack)
            .flat_map(|frame| self.frames.get(&frame).into_iter().flatten())
            .find(|row| !row.inlined)
            .map(|row| row.function.as_str())
    }
}
