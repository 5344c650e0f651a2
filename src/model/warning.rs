//! What the user should know beyond the figures, as data: each warning and
//! each module's problem carries the figures and names it is about; the
//! outputs say it (report.json holds the sentences, as it always has).

use pfprof_symbolize::Reason;
use serde::Serialize;

use crate::analysis::foreign::{KernelMismatch, PerfNote};
use crate::analysis::LostByClass;
use crate::format::jitmaps::JitMapProblem;
use crate::format::perf_data::FileStamp;

/// One warning of the report (`report.json`'s `warnings`, one sentence
/// each).
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    /// The kernel dropped records: the ring buffers were too small.
    LostRecords {
        /// Records dropped, every kind together.
        lost: u64,
        /// The same by the event that lost them.
        by_class: LostByClass,
        /// Faults missing from the recording.
        missing: u64,
        /// Their share of the faults expected, in percent.
        missing_pct: f64,
        /// Who recorded (whose option gives the buffers more pages).
        recorder: Recorder,
    },
    /// Faults the kernel counted that no lost record accounts for.
    UnexplainedMissing {
        /// How many.
        faults: u64,
    },
    /// Faults the kernel counted without running pfprof's collector.
    CollectorSkipped {
        /// How many.
        faults: u64,
    },
    /// pfprof's own faults, left out of a system-wide profile.
    OwnFaultsLeftOut {
        /// How many.
        faults: u64,
    },
    /// Frame-pointer stacks cut at the kernel's frame limit.
    FpStacksCut {
        /// How many.
        stacks: u64,
    },
    /// A module that could not be symbolized.
    Module {
        /// Its path.
        path: String,
        /// Why.
        problem: ModuleProblem,
    },
    /// A debug file found for a module, but of another build.
    RejectedDebugFile {
        /// The debug file.
        path: String,
        /// The module it was found for.
        module: String,
        /// Why it was not used.
        reason: pfprof_symbolize::Rejection,
    },
    /// The recording is damaged; the intact part was analysed.
    Damaged {
        /// Where and how (the decoder's words).
        why: String,
    },
    /// A file whose unwind information could not be read while recording.
    UnreadableUnwindInfo {
        /// Its path.
        file: String,
    },
    /// The fault-entry tracepoints were not recorded.
    NoTracepoints {
        /// Why (the kernel's error, as the recorder noted it).
        note: String,
    },
    /// What a recording perf made cannot say.
    Perf(PerfNote),
    /// Kernel frames of another kernel stay addresses.
    KernelMismatch(KernelMismatch),
    /// A JIT perf map that was not used or not kept.
    JitMap(JitMapProblem),
    /// The program asked for huge pages, whose other 511 pages the
    /// resident-page ledger cannot see without the kernel's anonymous
    /// counts.
    HugePagesUnseen {
        /// KiB of the ranges `madvise(MADV_HUGEPAGE)` named.
        advised_kib: u64,
    },
}

impl Warning {
    /// Whether it says the profile is incomplete or leaves faults out:
    /// `record` repeats these last, also with `-q`.
    pub fn is_completeness(&self) -> bool {
        matches!(
            self,
            Warning::LostRecords { .. }
                | Warning::UnexplainedMissing { .. }
                | Warning::CollectorSkipped { .. }
                | Warning::OwnFaultsLeftOut { .. }
                | Warning::FpStacksCut { .. }
        )
    }
}

/// Who wrote the recording: the advice for lost records differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Recorder {
    /// `pfprof record`.
    Pfprof,
    /// `perf record`.
    Perf,
}

impl Recorder {
    /// Whether it is pfprof (report.json names only perf).
    pub fn is_pfprof(&self) -> bool {
        *self == Recorder::Pfprof
    }
}

/// Why a module's addresses stay unnamed (`report.json`'s module
/// `problem`).
#[derive(Debug, Clone, PartialEq)]
pub enum ModuleProblem {
    /// The symbolizer could not read it.
    Symbolizer(Reason),
    /// Several files without a build-id were mapped under its path while
    /// recording: nothing tells which one an address was in.
    SeveralFiles {
        /// How many.
        files: usize,
    },
    /// It has no build-id and is not the file recorded.
    Changed {
        /// Its size and mtime when recorded.
        was: FileStamp,
        /// And now.
        now: FileStamp,
    },
}
