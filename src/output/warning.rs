//! The report's warnings and modules' problems in words: one sentence each,
//! as report.txt, index.html, `record`'s last lines and report.json (which
//! holds the sentences) say them. Names they quote are made safe to show.

use std::fmt;

use serde::{Serialize, Serializer};

use crate::analysis::foreign::{KernelMismatch, PerfNote};
use crate::format::jitmaps::JitMapProblem;
use crate::model::warning::{ModuleProblem, Recorder, Warning};
use crate::text::{display_safe, hex, thousands};

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Names from the profiled world and the recording's own notes are
        // quoted: the whole sentence is made safe.
        f.write_str(&display_safe(&sentence(self)))
    }
}

/// report.json's `warnings`: the sentences.
impl Serialize for Warning {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for ModuleProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModuleProblem::Symbolizer(reason) => f.write_str(&display_safe(&reason.to_string())),
            ModuleProblem::SeveralFiles { files } => write!(
                f,
                "{files} different files without a build-id were mapped under this path while \
                 recording (a file replaced, or containers); its addresses are shown unnamed"
            ),
            ModuleProblem::Changed { was, now } => write!(
                f,
                "The file has no build-id and changed since recording (size {} -> {} bytes, \
                 mtime {} -> {} ns); its addresses are shown unnamed",
                was.size, now.size, was.mtime_ns, now.mtime_ns
            ),
        }
    }
}

/// report.json's module `problem`: the sentence.
impl Serialize for ModuleProblem {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A warning's sentence, before it is made safe.
fn sentence(warning: &Warning) -> String {
    match warning {
        Warning::LostRecords {
            lost,
            by_class: l,
            missing,
            missing_pct,
            recorder,
        } => {
            // perf's recording: perf's buffers were too small, not pfprof's.
            let option = match recorder {
                Recorder::Pfprof => "--mmap-pages",
                Recorder::Perf => "perf record -m PAGES",
            };
            // Memory events only when some were lost: the resident view
            // then keeps pages a lost munmap gave back.
            let memory = match l.memory_calls {
                0 => String::new(),
                n => format!(
                    ", memory events {} (resident memory overstated)",
                    thousands(n)
                ),
            };
            format!(
                "results incomplete: the kernel dropped {} records (ring buffer full; minor {}, \
                 major {}, fault entries {}{memory}, unattributed {}), {} of the faults \
                 ({missing_pct:.1}%) are missing; give the ring buffers more pages with {option}",
                thousands(*lost),
                thousands(l.minor),
                thousands(l.major),
                thousands(l.entries),
                thousands(l.unattributed),
                thousands(*missing)
            )
        }
        Warning::UnexplainedMissing { faults } => format!(
            "results incomplete: {} counted by the kernel {} missing from the recording \
             and no lost record accounts for {}",
            faults_noun(*faults),
            if *faults == 1 { "is" } else { "are" },
            if *faults == 1 { "it" } else { "them" },
        ),
        Warning::CollectorSkipped { faults } => format!(
            "results incomplete: the kernel counted {} without running pfprof's collector \
             (it runs no perf event's BPF program while that CPU is in BPF code \
             already); no record holds {}",
            faults_noun(*faults),
            if *faults == 1 { "it" } else { "them" },
        ),
        Warning::OwnFaultsLeftOut { faults } => format!(
            "pfprof's own {} faults are left out of this system-wide profile",
            thousands(*faults)
        ),
        Warning::FpStacksCut { stacks } => format!(
            "{} call stacks were cut at the kernel's frame limit \
             (kernel.perf_event_max_stack) and end in [unknown]: recursion deeper than the \
             limit (raise it with sysctl), or a frame-pointer walk gone astray in code built \
             without frame pointers (--call-graph dwarf has neither problem)",
            thousands(*stacks)
        ),
        Warning::Module { path, problem } => format!("{path}: {problem}"),
        Warning::RejectedDebugFile {
            path,
            module,
            reason,
        } => format!(
            "{path}: not used as the debug file of {module}: {}",
            display_safe(&reason.to_string())
        ),
        Warning::Damaged { why } => {
            format!("recording damaged, analysed the intact part: {why}")
        }
        Warning::UnreadableUnwindInfo { file } => format!(
            "{file}: no unwind information could be read while recording; stacks through it \
             end in [unknown]"
        ),
        Warning::NoTracepoints { note } => format!("COW and access types unavailable: {note}"),
        Warning::Perf(note) => perf_note(*note),
        Warning::KernelMismatch(m) => kernel_mismatch(m),
        Warning::JitMap(problem) => jit_map(problem),
        Warning::HugePagesUnseen { advised_kib } => format!(
            "resident memory: the program asked for huge pages on {} KiB \
             (madvise MADV_HUGEPAGE); a huge page counts as the one page its fault touched, so \
             anonymous KiB may be low (the kernel's anonymous count is recorded only where \
             transparent huge pages are always on)",
            crate::text::thousands(*advised_kib)
        ),
    }
}

/// What a recording perf made cannot say.
/// `1 fault`, `1,000 faults`.
fn faults_noun(faults: u64) -> String {
    let s = if faults == 1 { "" } else { "s" };
    format!("{} fault{s}", thousands(faults))
}

fn perf_note(note: PerfNote) -> String {
    match note {
        PerfNote::SampledPeriod(n) => format!(
            "sampled recording (perf record -c {n}): each sample counted as {n} faults; counts \
             are estimates"
        ),
        PerfNote::SampledFrequency(hz) => format!(
            "sampled recording (perf record -F {hz}): each sample counted as its period; counts \
             are estimates"
        ),
        PerfNote::AnyFaultEvent => "perf's page-faults event does not tell minor from major \
                                    faults: all are counted as minor (record -e \
                                    minor-faults,major-faults)"
            .into(),
        PerfNote::NoEntries => "COW and access types unavailable: perf recorded no fault-entry \
                                tracepoints (add -e \
                                exceptions:page_fault_user,exceptions:page_fault_kernel)"
            .into(),
        PerfNote::EntriesSampled => "COW and access types only for the faults whose entry and \
                                     completion were both sampled (record with -c 1)"
            .into(),
    }
}

/// Why the kernel's frames stay addresses.
fn kernel_mismatch(m: &KernelMismatch) -> String {
    format!(
        "kernel frames stay addresses: the recording's kernel (build-id {}) is not the running \
         one ({})",
        hex(&m.recorded),
        m.running.as_deref().map_or_else(|| "unknown".into(), hex)
    )
}

/// Why a JIT perf map was not used or not kept.
fn jit_map(problem: &JitMapProblem) -> String {
    match problem {
        JitMapProblem::NotKept { path, error } => format!(
            "{}: cannot keep it with the recording: {error}",
            path.display()
        ),
        JitMapProblem::Refused { path, error } => {
            format!("{}: not used to name JIT frames: {error}", path.display())
        }
        JitMapProblem::Malformed { path, lines } => {
            format!("{}: {lines} malformed lines skipped", path.display())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::LostByClass;
    use crate::format::perf_data::FileStamp;

    /// Every kind of warning in words, as report.json has always held them;
    /// quoted names are made safe.
    #[test]
    fn sentences() {
        let lost = LostByClass {
            minor: 1,
            major: 2,
            entries: 3,
            memory_calls: 0,
            unattributed: 4_000,
        };
        let cases: Vec<(Warning, &str)> =
            vec![
            (
                Warning::LostRecords {
                    lost: 4_006,
                    by_class: lost,
                    missing: 1_234,
                    missing_pct: 12.34,
                    recorder: Recorder::Perf,
                },
                "results incomplete: the kernel dropped 4,006 records (ring buffer full; minor 1, \
                 major 2, fault entries 3, unattributed 4,000), 1,234 of the faults (12.3%) are \
                 missing; give the ring buffers more pages with perf record -m PAGES",
            ),
            (
                Warning::UnexplainedMissing { faults: 1000 },
                "results incomplete: 1,000 faults counted by the kernel are missing from the \
                 recording and no lost record accounts for them",
            ),
            (
                Warning::UnexplainedMissing { faults: 1 },
                "results incomplete: 1 fault counted by the kernel is missing from the \
                 recording and no lost record accounts for it",
            ),
            (
                Warning::CollectorSkipped { faults: 3 },
                "results incomplete: the kernel counted 3 faults without running pfprof's \
                 collector (it runs no perf event's BPF program while that CPU is in BPF code \
                 already); no record holds them",
            ),
            (
                Warning::Module {
                    path: "/lib/a\nb.so".into(),
                    problem: ModuleProblem::SeveralFiles { files: 2 },
                },
                "/lib/a\\nb.so: 2 different files without a build-id were mapped under this path \
                 while recording (a file replaced, or containers); its addresses are shown unnamed",
            ),
            (
                Warning::Module {
                    path: "/lib/c.so".into(),
                    problem: ModuleProblem::Changed {
                        was: FileStamp { size: 9, mtime_ns: 1 },
                        now: FileStamp { size: 10, mtime_ns: 2 },
                    },
                },
                "/lib/c.so: The file has no build-id and changed since recording (size 9 -> 10 \
                 bytes, mtime 1 -> 2 ns); its addresses are shown unnamed",
            ),
            (
                Warning::NoTracepoints {
                    note: "Permission denied".into(),
                },
                "COW and access types unavailable: Permission denied",
            ),
            (
                Warning::Perf(PerfNote::SampledPeriod(10)),
                "sampled recording (perf record -c 10): each sample counted as 10 faults; counts \
                 are estimates",
            ),
            (
                Warning::Perf(PerfNote::AnyFaultEvent),
                "perf's page-faults event does not tell minor from major faults: all are counted \
                 as minor (record -e minor-faults,major-faults)",
            ),
            (
                Warning::Perf(PerfNote::NoEntries),
                "COW and access types unavailable: perf recorded no fault-entry tracepoints (add \
                 -e exceptions:page_fault_user,exceptions:page_fault_kernel)",
            ),
            (
                Warning::KernelMismatch(KernelMismatch {
                    recorded: vec![0xab, 0x01],
                    running: None,
                }),
                "kernel frames stay addresses: the recording's kernel (build-id ab01) is not the \
                 running one (unknown)",
            ),
            (
                Warning::JitMap(JitMapProblem::Malformed {
                    path: "/tmp/perf-7.map".into(),
                    lines: 3,
                }),
                "/tmp/perf-7.map: 3 malformed lines skipped",
            ),
        ];
        for (warning, want) in cases {
            assert_eq!(warning.to_string(), want);
            assert_eq!(
                serde_json::to_string(&warning).unwrap(),
                serde_json::to_string(want).unwrap()
            );
        }
    }
}
