//! The report model (serialized as `report.json`, a stable contract documented
//! in the README): the summary, the tables, and the figures of completeness
//! (expected, missing, incomplete). The outputs word it.

use serde::Serialize;

use crate::analysis::classify::{Access, ClassCounts, FaultClass};
use crate::analysis::latency::LatencyStats;
pub use crate::analysis::LostByClass;
use crate::format::call_graph::CallGraph;
use crate::format::perf_data::{Exit, RecordClass};
use crate::format::recorder::Collector;
pub use crate::model::region::Region;
pub use crate::model::warning::Recorder;
use crate::model::warning::{ModuleProblem, Warning};

/// Fault totals.
#[derive(Debug, Clone, Serialize)]
pub struct Totals {
    /// Faults recorded, by class.
    #[serde(flatten)]
    pub faults: ClassCounts,
    /// Records the kernel dropped (ring buffer full), every kind together.
    pub lost: u64,
    /// The same by the event that lost them, where the kernel says
    /// (PERF_RECORD_LOST_SAMPLES); PERF_RECORD_LOST's are `unattributed`.
    pub lost_by_class: LostByClass,
    /// Faults of pfprof itself in a system-wide recording (counted by the
    /// kernel, left out of the profile).
    pub pfprof_faults: u64,
    /// The kernel's own minor-fault count for the process tree.
    pub kernel_minor: Option<u64>,
    /// The kernel's own major-fault count.
    pub kernel_major: Option<u64>,
    /// Faults either way that the kernel's counts may hold across the
    /// interval's edges (see [`RecordingMeta::kernel_spread`]): a shortfall
    /// within it is no fault missing. Absent when the counts are exact.
    ///
    /// [`RecordingMeta::kernel_spread`]: crate::format::perf_data::RecordingMeta::kernel_spread
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_spread: Option<u64>,
    /// Faults in the kernel's counts that it never ran pfprof's collector
    /// for (see [`RecordingMeta::collector_skipped`]): missing, with their
    /// reason. Absent without the collector.
    ///
    /// [`RecordingMeta::collector_skipped`]: crate::format::perf_data::RecordingMeta::collector_skipped
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collector_skipped: Option<u64>,
    /// False when the tracepoints were unavailable: COW cannot be told apart.
    pub cow_available: bool,
    /// Major faults on files.
    pub major_file: u64,
    /// Major faults on anonymous memory (swap-ins).
    pub major_swap: u64,
    /// Faults taken in kernel mode on user memory.
    pub kernel_mode: u64,
    /// Completed faults without an entry tracepoint (no error code).
    pub unpaired: u64,
    /// Entry tracepoints without a completion (spurious, SIGSEGV, ...).
    pub entries_without_completion: u64,
    /// Records that did not parse.
    pub bad_records: u64,
    /// Samples without a call chain.
    pub no_callchain: u64,
    /// How call chains were recorded: `dwarf,BYTES`, `fp` or `none`
    /// (unknown for recordings pfprof did not finish).
    pub call_graph: Option<CallGraph>,
    /// Who copied the user stacks in dwarf mode: `bpf` (pfprof's collector)
    /// or `perf`; absent in recordings made before the collector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector: Option<Collector>,
    /// Call chains whose unwinding stopped early (they end in `[unknown]`).
    pub truncated_stacks: u64,
    /// Why chains stopped early, counted while recording (dwarf mode).
    pub unwind: Option<crate::unwind::UnwindStats>,
}

/// One process.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessRow {
    /// Pid.
    pub pid: i32,
    /// Parent pid.
    pub ppid: i32,
    /// Name.
    pub comm: String,
    /// Executable.
    pub exe: Option<String>,
    /// Minor faults.
    pub minor: u64,
    /// Major faults.
    pub major: u64,
    /// COW faults.
    pub cow: u64,
    /// Of the major faults, those on anonymous memory (swap-ins).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub major_swap: u64,
    /// Threads seen.
    pub threads: u32,
    /// The programs the process ran, in order, when it ran more than one
    /// (a wrapper that exec'd the next: `env` then `app`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub execs: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A fault target.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetRow {
    /// File path, object owning a `.bss` tail, or `[heap]`, `[stack]`, `[anon]`, `[vdso]`.
    pub object: String,
    /// What kind of memory.
    pub region: Region,
    /// ELF section.
    pub section: Option<String>,
    /// Data symbol.
    pub symbol: Option<String>,
}

/// One code site × target.
#[derive(Debug, Clone, Serialize)]
pub struct SiteRow {
    /// Fault class.
    pub class: FaultClass,
    /// Access.
    pub access: Access,
    /// Faults.
    pub count: u64,
    /// Processes.
    pub pids: Vec<i32>,
    /// Name of the process with most of these faults.
    pub comm: String,
    /// Innermost (possibly inlined) function.
    pub function: String,
    /// Its source file.
    pub file: Option<String>,
    /// Its line.
    pub line: Option<u32>,
    /// Object containing the code.
    pub object: Option<String>,
    /// The most common stack of this row: an index into
    /// [`Report::stacks`].
    pub stack_id: u32,
    /// Where the faults landed.
    pub target: TargetRow,
}

/// What a frame is, as far as the outputs show kinds apart (report.json
/// has only the name).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FrameKind {
    /// Code of a module: its function, or `module+0x…` without a name.
    #[default]
    Code,
    /// The kernel's code: `name_[k]`.
    Kernel,
    /// JIT code a perf map names.
    Jit,
    /// JIT code without a name: `[jit 0x…]`.
    UnnamedJit,
    /// The exec itself: `[execve]`.
    Exec,
    /// Where a stack was lost or cut short: `[unknown]`.
    Unknown,
}

impl FrameKind {
    /// The name of a frame of this kind that nothing else names.
    pub fn placeholder(self) -> Option<&'static str> {
        match self {
            FrameKind::Exec => Some("[execve]"),
            FrameKind::Unknown => Some("[unknown]"),
            _ => None,
        }
    }
}

/// report.json's function of a site whose faults came without a stack.
pub const NO_STACK: &str = "[no stack]";

/// One frame of a stack.
#[derive(Debug, Clone, Serialize)]
pub struct FrameRow {
    /// Function (demangled).
    pub function: String,
    /// What kind of frame.
    #[serde(skip)]
    pub kind: FrameKind,
    /// Source file.
    pub file: Option<String>,
    /// Line (for an outer frame of an inlined call: the call site).
    pub line: Option<u32>,
    /// Inlined into the frame before it.
    pub inlined: bool,
    /// Object holding the code.
    pub object: Option<String>,
}

/// Faults per class and target object + section.
#[derive(Debug, Clone, Serialize)]
pub struct TargetSummaryRow {
    /// Class.
    pub class: FaultClass,
    /// Object.
    pub object: String,
    /// Region.
    pub region: Region,
    /// Section.
    pub section: Option<String>,
    /// Faults.
    pub count: u64,
}

/// Faults per target file (or anonymous region), for "which file causes
/// the major faults".
#[derive(Debug, Clone, Serialize)]
pub struct FileRow {
    /// File path, or `[heap]`, `[anon]`, `[stack]`.
    pub path: String,
    /// Major faults.
    pub major: u64,
    /// Minor faults.
    pub minor: u64,
    /// COW faults.
    pub cow: u64,
    /// Major faults on its anonymous memory: swap-ins.
    pub swap: u64,
}

/// A module seen in the recording.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleRow {
    /// Path.
    pub path: String,
    /// Build-id (hex) as recorded.
    pub build_id: Option<String>,
    /// Why it could not be symbolized, if so.
    pub problem: Option<ModuleProblem>,
}

/// Faults of one class by access. The fields are in name order, as the
/// JSON has always listed them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AccessCounts {
    /// Instruction fetches.
    pub exec: u64,
    /// Reads.
    pub read: u64,
    /// Faults whose access is not known (no error code recorded).
    pub unknown: u64,
    /// Writes.
    pub write: u64,
}

impl AccessCounts {
    /// The faults of `access`.
    pub fn of(&self, access: Access) -> u64 {
        match access {
            Access::Read => self.read,
            Access::Write => self.write,
            Access::Exec => self.exec,
            Access::Unknown => self.unknown,
        }
    }

    fn of_mut(&mut self, access: Access) -> &mut u64 {
        match access {
            Access::Read => &mut self.read,
            Access::Write => &mut self.write,
            Access::Exec => &mut self.exec,
            Access::Unknown => &mut self.unknown,
        }
    }
}

/// Something of each class, indexed by [`FaultClass`]; the fields in name
/// order, as report.json has always listed `by_access` and `latency`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ByClass<T> {
    /// Copy-on-write faults'.
    pub cow: T,
    /// Major faults'.
    pub major: T,
    /// Minor faults'.
    pub minor: T,
}

impl<T> ByClass<T> {
    /// From each class's value.
    pub fn from_fn(mut value: impl FnMut(FaultClass) -> T) -> Self {
        ByClass {
            minor: value(FaultClass::Minor),
            major: value(FaultClass::Major),
            cow: value(FaultClass::Cow),
        }
    }

    /// The value of `class`.
    pub fn of(&self, class: FaultClass) -> &T {
        match class {
            FaultClass::Minor => &self.minor,
            FaultClass::Major => &self.major,
            FaultClass::Cow => &self.cow,
        }
    }
}

/// Faults by class, then access (`report.json`'s `by_access`).
pub type ByAccess = ByClass<AccessCounts>;

/// Time in the kernel per fault, by class (`report.json`'s `latency`).
pub type Latencies = ByClass<LatencyStats>;

impl ByAccess {
    /// From counts indexed `[class][access]` (the analysis's order).
    pub fn from_counts(counts: &[[u64; 4]; 3]) -> Self {
        ByClass::from_fn(|class| {
            let mut row = AccessCounts::default();
            for access in Access::ALL {
                *row.of_mut(access) = counts[class as usize][access as usize];
            }
            row
        })
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// pfprof version.
    pub pfprof_version: String,
    /// Profiled command.
    pub command: Vec<String>,
    /// How it ended.
    pub exit: Option<Exit>,
    /// Sample period.
    pub period: u64,
    /// Which faults were sampled (`record --class`).
    pub sampled_class: crate::format::perf_data::RecordClass,
    /// Who wrote the recording (shown only when it was `perf record`).
    #[serde(skip_serializing_if = "Recorder::is_pfprof")]
    pub recorder: Recorder,
    /// Totals.
    pub totals: Totals,
    /// Faults by class, then access.
    pub by_access: ByAccess,
    /// Processes.
    pub processes: Vec<ProcessRow>,
    /// Sites, most faults first.
    pub sites: Vec<SiteRow>,
    /// The sites' stacks, each once: indices into [`Report::frames`], root
    /// first.
    pub stacks: Vec<Vec<u32>>,
    /// The frames of [`Report::stacks`], each once.
    pub frames: Vec<FrameRow>,
    /// Targets, most faults first.
    pub targets: Vec<TargetSummaryRow>,
    /// Target files and regions, most major faults first.
    pub files: Vec<FileRow>,
    /// Modules.
    pub modules: Vec<ModuleRow>,
    /// Things the user should know, what was lost first.
    pub warnings: Vec<Warning>,
    /// Wall time of the recording.
    pub wall_ns: Option<u64>,
    /// Bytes recorded.
    pub data_bytes: Option<u64>,
    /// Records replayed.
    pub records: u64,
    /// Interned stack nodes.
    pub stack_frames: usize,
    /// Start-up analysis of the profiled program (exec until `main`).
    pub startup: Option<crate::model::startup::StartupReport>,
    /// Every start-up window (one per exec'd program, in exec order).
    pub startups: Vec<crate::model::startup::StartupWindow>,
    /// Time in the kernel per fault, by class (from the entry tracepoint).
    pub latency: Latencies,
    /// Resident memory by the code that made it present, at the peak and
    /// at exit; absent when the recording cannot say (see
    /// [`crate::analysis::resident`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resident: Option<ResidentReport>,
}

/// KiB resident, by kind (as the kernel's `RssAnon`, `RssFile`,
/// `RssShmem`) and in all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KindKib {
    /// Private memory.
    pub anon: u64,
    /// Files' page cache.
    pub file: u64,
    /// Shared memory.
    pub shmem: u64,
    /// All three.
    pub total: u64,
}

impl KindKib {
    /// From pages by kind (`MemoryKind` order).
    pub fn of_pages(pages: [u64; 3]) -> KindKib {
        let kib = |n: u64| n * crate::analysis::resident::PAGE_BYTES / 1024;
        KindKib {
            anon: kib(pages[0]),
            file: kib(pages[1]),
            shmem: kib(pages[2]),
            total: kib(pages.iter().sum()),
        }
    }
}

/// The kernel's count of a process's file and shared pages, KiB. Its
/// anonymous pages only where transparent huge pages are always on:
/// `kmem:rss_stat` changes with every anonymous page, and a record of each
/// cost a third more CPU (the ledger counts them exactly by the faults that
/// make them, but for huge pages).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KernelKib {
    /// Anonymous memory, when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anon: Option<u64>,
    /// Files' page cache.
    pub file: u64,
    /// Shared memory.
    pub shmem: u64,
}

impl KernelKib {
    /// From pages by kind (`MemoryKind` order), anonymous ones with `anon`.
    pub fn of_pages(pages: [u64; 3], anon: bool) -> KernelKib {
        let all = KindKib::of_pages(pages);
        KernelKib {
            anon: anon.then_some(all.anon),
            file: all.file,
            shmem: all.shmem,
        }
    }
}

/// The recorded processes' resident memory at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct ResidentMoment {
    /// When, ns after the timeline's origin (the exec, else the first
    /// record); none for the exit view, whose processes end apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ns: Option<u64>,
    /// KiB by kind.
    pub kib: KindKib,
    /// The kernel's own count of file and shared pages at the same moment
    /// (`kmem:rss_stat`), when recorded: what pfprof could not attribute
    /// is the difference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_kib: Option<KernelKib>,
    /// Of `kib`, what the kernel had taken back without a syscall that
    /// frees memory (reclaim, `MADV_PAGEOUT`): `kib` less these is what
    /// stayed resident by pfprof's account. Which pages went the kernel
    /// does not say, so the sites keep them. Present when the kernel took
    /// any back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reconciled_kib: Option<KindKib>,
    /// The sites with the most KiB, most first.
    pub top: Vec<ResidentSite>,
}

/// KiB one code site made resident (its innermost function) in one target.
#[derive(Debug, Clone, Serialize)]
pub struct ResidentSite {
    /// KiB.
    pub kib: u64,
    /// Kind of memory (`anon`, `file`, `shmem`).
    pub kind: &'static str,
    /// Name of the process.
    pub comm: String,
    /// Innermost function of the fault's stack.
    pub function: String,
    /// Where the pages are.
    pub target: TargetRow,
}

/// Resident memory: at the peak of the recorded processes' total, and what
/// each process still held at its exit (or the recording's end).
#[derive(Debug, Clone, Serialize)]
pub struct ResidentReport {
    /// At the peak.
    pub peak: ResidentMoment,
    /// At exit.
    pub end: ResidentMoment,
    /// Pages each cause added or took away.
    pub pages: crate::analysis::resident::LedgerCounts,
    /// What the ledger does not see, in words.
    pub unseen: &'static str,
}

impl Report {
    /// The `top` sites of `class` with most faults.
    pub fn top_sites(&self, class: FaultClass, top: usize) -> Vec<&SiteRow> {
        self.sites
            .iter()
            .filter(|r| r.class == class)
            .take(top)
            .collect()
    }

    /// The `top` targets of `class` with most faults.
    pub fn top_targets(&self, class: FaultClass, top: usize) -> Vec<&TargetSummaryRow> {
        self.targets
            .iter()
            .filter(|r| r.class == class)
            .take(top)
            .collect()
    }

    /// The frames of `site`'s stack, root first.
    pub fn site_frames<'a>(
        &'a self,
        site: &SiteRow,
    ) -> impl DoubleEndedIterator<Item = &'a FrameRow> {
        self.stacks
            .get(site.stack_id as usize)
            .into_iter()
            .flatten()
            .filter_map(|&i| self.frames.get(i as usize))
    }

    /// Faults the kernel counted without running the collector, when
    /// there were any (see [`Totals::collector_skipped`]).
    pub fn skipped_by_kernel(&self) -> Option<u64> {
        self.totals.collector_skipped.filter(|&n| n > 0)
    }

    /// Total faults recorded.
    pub fn captured(&self) -> u64 {
        self.totals.faults.total()
    }

    /// The kernel's own count of the sampled classes (None without its
    /// counts): what the completeness line compares with.
    pub fn kernel_sampled(&self) -> Option<u64> {
        let (minor, major) = (self.totals.kernel_minor?, self.totals.kernel_major?);
        Some(match self.sampled_class {
            RecordClass::Major => major,
            RecordClass::Minor => minor,
            // --class cow samples both events.
            RecordClass::Cow | RecordClass::All => minor + major,
        })
    }

    /// The faults a complete recording holds: the kernel's count of the
    /// sampled classes divided by the sample period (None without counts).
    pub fn expected(&self) -> Option<u64> {
        Some(self.kernel_sampled()?.div_ceil(self.period.max(1)))
    }

    /// The faults captured, in percent of those expected (100 when none
    /// were expected; None without the kernel's counts).
    pub fn captured_pct(&self) -> Option<f64> {
        let expected = self.expected()?;
        Some(if expected == 0 {
            100.0
        } else {
            self.captured() as f64 * 100.0 / expected as f64
        })
    }

    /// Faults the recording should hold but does not (pfprof's own, in a
    /// system-wide recording, excepted), and their share of the expected in
    /// percent: the measure `record --max-lost` checks. Without the kernel's
    /// counts, the lost records that can be faults (all but fault entries)
    /// stand for the missing faults, over captured plus those.
    pub fn missing(&self) -> (u64, f64) {
        let captured = self.captured() + self.totals.pfprof_faults;
        let spread = self.totals.kernel_spread.unwrap_or(0);
        let (missing, whole) = match self.expected() {
            Some(expected) => (expected.saturating_sub(captured + spread), expected),
            None => {
                let l = &self.totals.lost_by_class;
                let lost = l.minor + l.major + l.unattributed;
                (lost, captured + lost)
            }
        };
        let pct = if whole == 0 {
            0.0
        } else {
            missing as f64 * 100.0 / whole as f64
        };
        (missing, pct)
    }

    /// Whether faults are missing or records were lost.
    pub fn incomplete(&self) -> bool {
        self.totals.lost > 0 || self.missing().0 > 0
    }

    /// The warnings about completeness (lost records, faults missing
    /// without a lost record to explain them, pfprof's own faults left
    /// out, stacks cut at the kernel's frame limit), first in `warnings`.
    pub fn completeness_warnings(&self) -> Vec<Warning> {
        let mut warnings = Vec::new();
        let t = &self.totals;
        let (missing, missing_pct) = self.missing();
        if t.lost > 0 {
            warnings.push(Warning::LostRecords {
                lost: t.lost,
                by_class: t.lost_by_class,
                missing,
                missing_pct,
                recorder: self.recorder,
            });
        }
        let skipped = self.skipped_by_kernel().unwrap_or(0).min(missing);
        if skipped > 0 {
            warnings.push(Warning::CollectorSkipped { faults: skipped });
        }
        let explained =
            t.lost_by_class.minor + t.lost_by_class.major + t.lost_by_class.unattributed + skipped;
        if missing > explained {
            warnings.push(Warning::UnexplainedMissing {
                faults: missing - explained,
            });
        }
        if t.pfprof_faults > 0 {
            warnings.push(Warning::OwnFaultsLeftOut {
                faults: t.pfprof_faults,
            });
        }
        if t.truncated_stacks > 0 && t.call_graph == Some(CallGraph::Fp) {
            warnings.push(Warning::FpStacksCut {
                stacks: t.truncated_stacks,
            });
        }
        warnings
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// What is missing and the warnings, from the counts: complete; ring
    /// buffer overrun; faults missing with no lost record; pfprof's own
    /// left out; no kernel counts (lost records stand for the faults).
    #[test]
    fn completeness() {
        // captured minor, lost (unattributed), pfprof's own, kernel minor,
        // missing, captured %, warnings
        type Case = (u64, u64, u64, Option<u64>, u64, Option<f64>, usize);
        let cases: [Case; 5] = [
            (1000, 0, 0, Some(1000), 0, Some(100.0), 0),
            (0, 12_344, 0, Some(12_344), 12_344, Some(0.0), 1),
            (900, 0, 0, Some(1000), 100, Some(90.0), 1),
            (900, 0, 100, Some(1000), 0, Some(90.0), 1),
            (900, 100, 0, None, 100, None, 1),
        ];
        for (i, (captured, lost, own, kernel_minor, missing, pct, warnings)) in
            cases.into_iter().enumerate()
        {
            let r = completeness_case(captured, lost, own, kernel_minor);
            assert_eq!(r.missing().0, missing, "case {i}");
            assert_eq!(r.captured_pct(), pct, "case {i}");
            assert_eq!(r.completeness_warnings().len(), warnings, "case {i}");
            assert_eq!(r.incomplete(), missing > 0 || lost > 0, "case {i}");
        }
    }

    /// An interval's count, read while faults went on, may hold a few
    /// faults either side of its edges: a shortfall within that spread is
    /// no fault missing, one beyond it is all missing.
    #[test]
    fn a_shortfall_within_the_kernels_spread_is_complete() {
        let mut r = completeness_case(577_591, 0, 0, Some(577_596));
        assert_eq!(r.missing().0, 5);
        r.totals.kernel_spread = Some(7);
        assert_eq!(r.missing().0, 0);
        assert!(!r.incomplete());
        assert!(r.completeness_warnings().is_empty());
        r.totals.kernel_spread = Some(2);
        assert_eq!(r.missing().0, 3);
    }

    /// Faults the kernel counted without running the collector are
    /// missing, with their reason: the warning says why and no more is
    /// left unexplained; the shortfall beyond them still is.
    #[test]
    fn faults_the_kernel_skipped_the_collector_for_are_explained() {
        let mut r = completeness_case(1_398_666, 0, 0, Some(1_398_669));
        r.totals.collector_skipped = Some(3);
        assert_eq!(r.missing().0, 3);
        assert!(r.incomplete());
        assert_eq!(
            r.completeness_warnings(),
            vec![Warning::CollectorSkipped { faults: 3 }]
        );
        r.totals.faults.minor -= 2;
        assert_eq!(
            r.completeness_warnings(),
            vec![
                Warning::CollectorSkipped { faults: 3 },
                Warning::UnexplainedMissing { faults: 2 }
            ]
        );
    }

    /// The sample report with `captured` minor faults, `lost` records
    /// (unattributed), pfprof's `own` faults and the kernel's count.
    pub(crate) fn completeness_case(
        captured: u64,
        lost: u64,
        own: u64,
        kernel_minor: Option<u64>,
    ) -> Report {
        let mut r = sample_report();
        r.period = 1;
        r.totals.faults = ClassCounts {
            minor: captured,
            major: 0,
            cow: 0,
        };
        r.totals.lost = lost;
        r.totals.lost_by_class.unattributed = lost;
        r.totals.pfprof_faults = own;
        r.totals.kernel_minor = kernel_minor;
        r.totals.kernel_major = kernel_minor.map(|_| 0);
        r.totals.truncated_stacks = 0;
        r
    }

    fn frame(function: &str, file: Option<&str>, line: Option<u32>, inlined: bool) -> FrameRow {
        FrameRow {
            kind: FrameKind::Code,
            function: function.into(),
            file: file.map(Into::into),
            line,
            inlined,
            object: Some("/opt/app/bin/app".into()),
        }
    }

    /// A small report with every kind of row, for the golden files.
    pub(crate) fn sample_report() -> Report {
        let target =
            |object: &str, region: Region, section: Option<&str>, symbol: Option<&str>| TargetRow {
                object: object.into(),
                region,
                section: section.map(Into::into),
                symbol: symbol.map(Into::into),
            };
        let site = |class, access, count, function: &str, line, target: TargetRow| SiteRow {
            class,
            access,
            count,
            pids: vec![4242],
            comm: "app".into(),
            function: function.into(),
            file: Some("/src/app/main.c".into()),
            line: Some(line),
            object: Some("/opt/app/bin/app".into()),
            // Site n's stack is stacks[n]: main, then frame n + 1.
            stack_id: [
                "touch_pages",
                "init_tables",
                "load_index",
                "_dl_relocate_object",
            ]
            .iter()
            .position(|f| *f == function)
            .unwrap() as u32,
            target,
        };
        let leaves = [
            ("touch_pages", 14),
            ("init_tables", 21),
            ("load_index", 33),
            ("_dl_relocate_object", 301),
        ];
        let mut frames = vec![frame("main", Some("/src/app/main.c"), Some(40), false)];
        frames.extend(
            leaves
                .iter()
                .map(|(f, line)| frame(f, Some("/src/app/main.c"), Some(*line), false)),
        );
        // [class][access]: minor, major, cow × read, write, exec, unknown.
        let by_access =
            ByAccess::from_counts(&[[130, 262_400, 15, 0], [64, 0, 3, 0], [0, 210, 0, 0]]);
        Report {
            pfprof_version: "0.0.0-golden".into(),
            command: vec!["./app".into(), "--size".into(), "1G".into()],
            exit: Some(Exit::Code(0)),
            period: 1,
            sampled_class: crate::format::perf_data::RecordClass::All,
            recorder: Recorder::Pfprof,
            totals: Totals {
                faults: ClassCounts {
                    minor: 262_545,
                    major: 67,
                    cow: 210,
                },
                lost: 0,
                lost_by_class: LostByClass::default(),
                pfprof_faults: 0,
                kernel_minor: Some(262_755),
                kernel_major: Some(67),
                kernel_spread: None,
                collector_skipped: None,
                cow_available: true,
                major_file: 67,
                major_swap: 0,
                kernel_mode: 32,
                unpaired: 0,
                entries_without_completion: 2,
                bad_records: 0,
                no_callchain: 0,
                call_graph: Some(CallGraph::Dwarf { stack_bytes: 8192 }),
                collector: None,
                truncated_stacks: 3,
                unwind: Some(crate::unwind::UnwindStats {
                    samples: 1000,
                    complete: 997,
                    stack_copy: 3,
                    stack_needed: [0, 0, 5, 900, 90, 2, 0, 0, 0, 0, 0, 0],
                    ..Default::default()
                }),
            },
            by_access,
            processes: vec![ProcessRow {
                pid: 4242,
                ppid: 4241,
                comm: "app".into(),
                exe: Some("/opt/app/bin/app".into()),
                minor: 262_545,
                major: 67,
                cow: 210,
                major_swap: 0,
                threads: 3,
                execs: vec!["/usr/bin/env".into(), "/opt/app/bin/app".into()],
            }],
            stacks: (1..=leaves.len() as u32).map(|n| vec![0, n]).collect(),
            frames,
            sites: vec![
                site(
                    FaultClass::Minor,
                    Access::Write,
                    262_144,
                    "touch_pages",
                    14,
                    target("[anon]", Region::Anon, None, None),
                ),
                site(
                    FaultClass::Cow,
                    Access::Write,
                    128,
                    "init_tables",
                    21,
                    target(
                        "/opt/app/bin/app",
                        Region::Anon,
                        Some(".bss"),
                        Some("tables"),
                    ),
                ),
                site(
                    FaultClass::Major,
                    Access::Read,
                    64,
                    "load_index",
                    33,
                    target("/var/lib/app/index.bin", Region::File, None, None),
                ),
                site(
                    FaultClass::Cow,
                    Access::Write,
                    16,
                    "_dl_relocate_object",
                    301,
                    target(
                        "/opt/app/lib/libplugin_with_a_very_long_name_for_truncation.so",
                        Region::File,
                        Some(".data.rel.ro"),
                        Some("plugin_table"),
                    ),
                ),
            ],
            targets: vec![
                TargetSummaryRow {
                    class: FaultClass::Minor,
                    object: "[anon]".into(),
                    region: Region::Anon,
                    section: None,
                    count: 262_144,
                },
                TargetSummaryRow {
                    class: FaultClass::Cow,
                    object: "/opt/app/bin/app".into(),
                    region: Region::Anon,
                    section: Some(".bss".into()),
                    count: 128,
                },
            ],
            files: vec![FileRow {
                path: "/var/lib/app/index.bin".into(),
                major: 64,
                minor: 0,
                cow: 0,
                swap: 0,
            }],
            modules: vec![ModuleRow {
                path: "/opt/app/bin/app".into(),
                build_id: Some("abcdef".into()),
                problem: None,
            }],
            warnings: vec![Warning::Module {
                path: "/opt/app/lib/libgone.so".into(),
                problem: ModuleProblem::Symbolizer(pfprof_symbolize::Reason::MissingFile),
            }],
            wall_ns: Some(1_000_000),
            data_bytes: Some(44_000_000),
            records: 525_000,
            stack_frames: 120,
            startup: Some(sample_startup()),
            startups: sample_startups(),
            latency: Latencies {
                minor: LatencyStats::from_values(&[900, 1100, 1200, 1300, 2500, 40_000]),
                major: LatencyStats::from_values(&[120_000, 250_000, 3_100_000]),
                cow: LatencyStats::default(),
            },
            resident: Some(sample_resident()),
        }
    }

    /// The 1 GiB the app touched, resident at the peak and freed before
    /// exit; a little of libc's data still there.
    fn sample_resident() -> ResidentReport {
        let site =
            |kib, kind, function: &str, object: &str, region, section: Option<&str>| ResidentSite {
                kib,
                kind,
                comm: "app".into(),
                function: function.into(),
                target: TargetRow {
                    object: object.into(),
                    region,
                    section: section.map(Into::into),
                    symbol: None,
                },
            };
        ResidentReport {
            peak: ResidentMoment {
                time_ns: Some(812_000_000),
                kib: KindKib::of_pages([262_150, 410, 0]),
                kernel_kib: Some(KernelKib::of_pages([0, 412, 0], false)),
                reconciled_kib: None,
                top: vec![
                    site(
                        1_048_576,
                        "anon",
                        "touch_pages",
                        "[anon]",
                        Region::Anon,
                        None,
                    ),
                    site(
                        1_200,
                        "file",
                        "_dl_map_object",
                        "/usr/lib/libc.so.6",
                        Region::File,
                        Some(".text"),
                    ),
                    site(
                        24,
                        "anon",
                        "_dl_relocate_object",
                        "/usr/lib/libc.so.6",
                        Region::File,
                        Some(".data.rel.ro"),
                    ),
                ],
            },
            end: ResidentMoment {
                time_ns: None,
                kib: KindKib::of_pages([6, 410, 0]),
                kernel_kib: None,
                reconciled_kib: None,
                top: vec![site(
                    1_200,
                    "file",
                    "_dl_map_object",
                    "/usr/lib/libc.so.6",
                    Region::File,
                    Some(".text"),
                )],
            },
            pages: crate::analysis::resident::LedgerCounts {
                faulted: 262_560,
                munmap: 262_144,
                exit: 416,
                ..Default::default()
            },
            unseen: "pages made present without a fault of their own",
        }
    }

    /// A wrapper (`env`) that exec'd the program: two windows in one pid.
    fn sample_startups() -> Vec<crate::model::startup::StartupWindow> {
        use crate::model::startup::StartupWindow;
        vec![
            StartupWindow {
                program: "/usr/bin/env".into(),
                pid: 4242,
                exec_ms: 0.0,
                end_ms: Some(0.95),
                until: crate::model::startup::Until::Main,
                faults: ClassCounts {
                    minor: 35,
                    major: 0,
                    cow: 14,
                },
            },
            StartupWindow {
                program: "/opt/app/bin/app".into(),
                pid: 4242,
                exec_ms: 1.05,
                end_ms: Some(2.3),
                until: crate::model::startup::Until::Main,
                faults: ClassCounts {
                    minor: 520,
                    major: 0,
                    cow: 17,
                },
            },
        ]
    }

    fn sample_startup() -> crate::model::startup::StartupReport {
        use crate::model::startup::{
            Hint, HintKind, HintRelocations, StartupObject, StartupPlace, StartupReport,
            StartupSection, StartupSymbol,
        };
        use pfprof_symbolize::RelocType;
        let section = |name: &str, minor, cow, touched, total| StartupSection {
            section: StartupPlace::Section(name.into()),
            faults: ClassCounts {
                minor,
                major: 0,
                cow,
            },
            pages_touched: touched,
            pages_total: total,
        };
        StartupReport {
            program: Some("/opt/app/bin/app".into()),
            pid: Some(4242),
            window: Some(1),
            until: crate::model::startup::Until::Main,
            until_ms: Some(1.25),
            faults: ClassCounts {
                minor: 520,
                major: 0,
                cow: 17,
            },
            objects: vec![
                StartupObject {
                    object: "/opt/app/bin/app".into(),
                    faults: ClassCounts {
                        minor: 520,
                        major: 0,
                        cow: 0,
                    },
                    share: 96.83,
                    sections: vec![
                        section(".bss", 512, 0, Some(512), Some(513)),
                        section(".text", 8, 0, Some(8), Some(40)),
                    ],
                    // 6: GLOB_DAT
                    relocations: [(RelocType::RELATIVE, 3), (RelocType(6), 5)]
                        .into_iter()
                        .collect(),
                    relr: 0,
                    uses_relr: false,
                    bind_now: false,
                    relro: true,
                    relocation_pages: 2,
                    loader: ClassCounts::default(),
                },
                StartupObject {
                    object: "/opt/app/lib/libplugin.so".into(),
                    faults: ClassCounts {
                        minor: 0,
                        major: 0,
                        cow: 17,
                    },
                    share: 3.17,
                    sections: vec![
                        section(".data.rel.ro", 0, 16, Some(16), Some(16)),
                        section(".init_array", 0, 1, Some(1), Some(1)),
                    ],
                    relocations: [(RelocType::RELATIVE, 8195)].into_iter().collect(),
                    relr: 0,
                    uses_relr: false,
                    bind_now: false,
                    relro: true,
                    relocation_pages: 19,
                    loader: ClassCounts {
                        minor: 3,
                        major: 0,
                        cow: 17,
                    },
                },
            ],
            symbols: vec![StartupSymbol {
                object: "/opt/app/bin/app".into(),
                section: StartupPlace::Section(".bss".into()),
                symbol: "tables".into(),
                faults: 512,
                first_toucher: Some("init_tables".into()),
            }],
            hints: vec![Hint {
                object: "/opt/app/lib/libplugin.so".into(),
                kind: HintKind::Relocations {
                    of_kind: 8195,
                    uses_relr: false,
                    pages: HintRelocations {
                        kind: crate::analysis::relocation_pages::RelocationKind::Relative,
                        pages: 17,
                        sections: vec![".data.rel.ro".into(), ".init_array".into()],
                        relocations: [(RelocType::RELATIVE, 8195)].into_iter().collect(),
                    },
                },
            }],
        }
    }

    /// Compares with tests/golden/NAME, or rewrites it when PFPROF_BLESS=1.
    pub(crate) fn golden(name: &str, actual: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name);
        if std::env::var_os("PFPROF_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; run with PFPROF_BLESS=1 to create it",
                path.display()
            )
        });
        assert_eq!(
            actual,
            expected,
            "{} differs; run with PFPROF_BLESS=1 to update it if the change is intended",
            path.display()
        );
    }

    /// report.json field names are a contract.
    #[test]
    fn golden_json() {
        golden(
            "report.json",
            &(serde_json::to_string_pretty(&sample_report()).unwrap() + "\n"),
        );
    }
}
