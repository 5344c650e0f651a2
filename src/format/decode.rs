//! Bytes → typed events: replays a perf.data recording (pfprof's own; its
//! header, attrs and feature sections read by [`read_layout`] with every size
//! checked, its records parsed by `linux-perf-event-reader`), merged across
//! CPUs by time, and hands each record to a callback as a borrowed [`Event`].
//! Nothing here allocates per sample, or more than the file's size (but
//! for the decompressed records of perf's `-z`, bounded by a multiple of it).
//!
//! A record that does not parse is counted in [`DecodeStats`], never fatal;
//! a file that is not a usable recording is one [`DecodeError`] line naming
//! the file (and, for damage, the byte offset and record type).

use std::path::Path;

use linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, PerfEventAttr, PerfEventType, RawData, RawDataU64, RawEventRecord,
    SampleFormat, SamplingPolicy, SoftwareCounterType,
};
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use thiserror::Error;

use crate::format::events::stream::{Broken, HEAD_BYTES};
use crate::format::events::{
    parse_record, records, sample, EventTable, Indexed, Mapping, RecordHead, Sample, TimeOrdered,
    TimeQueue,
};
use crate::format::perf_data::{
    read_layout, repair, HeaderFacts, Layout, LayoutError, RecordingMeta,
    PERF_RECORD_FINISHED_ROUND,
};
use crate::format::records as rec;
use crate::sys::MappedFile;
use crate::unwind::{UserRegs, TRUNCATED_FRAME};

mod record_event;
mod replay;

pub use record_event::*;
pub use replay::*;

/// Why a recording cannot be read. Each is one line naming the file; the
/// binary prints it once.
#[derive(Debug, Error)]
pub enum DecodeError {
    /// The file cannot be opened or read.
    #[error("cannot read {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// Not a recording at all: a directory, a FIFO, an empty file, another
    /// format, a perf.data without page-fault events.
    #[error("{path} is not a pfprof recording: {what}")]
    NotRecording {
        /// The file.
        path: String,
        /// What it is instead.
        what: String,
    },
    /// The header, attributes or feature sections do not hold together.
    #[error("{path} is not a readable recording: {what} at byte {offset}")]
    Header {
        /// The file.
        path: String,
        /// Byte offset of the bad field.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// The data section ends early or is corrupt.
    #[error("{path} is truncated or corrupt at byte {offset}{record}, after {records} records: {what}; rerun with --partial to analyse the intact part")]
    Truncated {
        /// The file.
        path: String,
        /// Byte offset of the damage.
        offset: u64,
        /// ` (record type N, NAME)` when a record header was read there.
        record: String,
        /// Records read before the damage.
        records: u64,
        /// What is wrong.
        what: String,
    },
    /// Every record was damaged, or there were none.
    #[error("{path}: {what}")]
    NoRecords {
        /// The file.
        path: String,
        /// Why.
        what: String,
    },
}

/// perf's name of a record type, for messages.
pub fn record_type_name(record_type: u32) -> &'static str {
    match record_type {
        1 => "MMAP",
        2 => "LOST",
        3 => "COMM",
        4 => "EXIT",
        5 => "THROTTLE",
        6 => "UNTHROTTLE",
        7 => "FORK",
        8 => "READ",
        9 => "SAMPLE",
        10 => "MMAP2",
        11 => "AUX",
        12 => "ITRACE_START",
        13 => "LOST_SAMPLES",
        14 => "SWITCH",
        15 => "SWITCH_CPU_WIDE",
        16 => "NAMESPACES",
        17 => "KSYMBOL",
        18 => "BPF_EVENT",
        19 => "CGROUP",
        20 => "TEXT_POKE",
        21 => "AUX_OUTPUT_HW_ID",
        64..=99 => "perf user record",
        _ => "unknown",
    }
}

/// Which of the recorded events a sample belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// `minor-faults` (completed minor fault).
    Minor,
    /// `major-faults` (completed major fault).
    Major,
    /// `exceptions:page_fault_user` (fault entry, user mode).
    EntryUser,
    /// `exceptions:page_fault_kernel` (fault entry, kernel mode).
    EntryKernel,
    /// The uprobe on the program's `main` (`pfprof:main_entry`).
    MainEntry,
    /// `syscalls:sys_enter_munmap`.
    Munmap,
    /// `syscalls:sys_enter_madvise`.
    Madvise,
    /// `syscalls:sys_enter_mremap`.
    Mremap,
    /// `syscalls:sys_exit_mremap`.
    MremapDone,
    /// `syscalls:sys_exit_brk`.
    BrkDone,
    /// `kmem:rss_stat`.
    RssStat,
    /// Anything else (ignored).
    Other,
}

/// A syscall that may give memory back, as its tracepoint saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryCall {
    /// `munmap(addr, len)`, entered.
    Munmap {
        /// Start (avma).
        addr: u64,
        /// Bytes.
        len: u64,
    },
    /// `madvise(addr, len, advice)`, entered.
    Madvise {
        /// Start (avma).
        addr: u64,
        /// Bytes.
        len: u64,
        /// `MADV_*`.
        advice: u64,
    },
    /// `mremap(addr, old_len, new_len, flags, new_addr)`, entered.
    Mremap {
        /// Start of the old mapping (avma).
        addr: u64,
        /// Its bytes.
        old_len: u64,
        /// Bytes asked for.
        new_len: u64,
        /// `MREMAP_*`.
        flags: u64,
        /// Where, with `MREMAP_FIXED`.
        new_addr: u64,
    },
    /// `mremap` returned: the mapping's new start, or `-errno`.
    MremapDone {
        /// The result.
        ret: i64,
    },
    /// `brk` returned: the program break now.
    BrkDone {
        /// The result.
        ret: u64,
    },
    /// An RSS counter of an address space changed (`kmem:rss_stat`).
    RssStat {
        /// The address space is the recording thread's own.
        curr: bool,
        /// The tracepoint's hash of the address space; 0 in the BPF
        /// collector's records, whose pid is the address space's owner's
        /// also when another task changed it (`curr` false).
        mm_id: u32,
        /// `MM_FILEPAGES` 0, `MM_ANONPAGES` 1, `MM_SWAPENTS` 2,
        /// `MM_SHMEMPAGES` 3.
        member: i32,
        /// Bytes counted now.
        bytes: i64,
    },
}

/// A call chain, leaf first, with perf's context marks: as a record holds
/// it, or as pfprof unwound it (or its collector wrote it) while recording,
/// or a recorded kernel part with the user frames unwound while reading.
#[derive(Clone, Copy)]
pub enum Chain<'a> {
    /// In a record.
    Raw(RawDataU64<'a>),
    /// Words in memory.
    Words(&'a [u64]),
    /// Unwound from a recorded stack copy (perf's `--call-graph dwarf`).
    Unwound(&'a UnwoundChain<'a>),
}

impl Chain<'_> {
    /// Entries, marks included.
    pub fn len(&self) -> usize {
        match self {
            Chain::Raw(raw) => raw.len(),
            Chain::Words(words) => words.len(),
            Chain::Unwound(unwound) => unwound.len(),
        }
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i`.
    pub fn get(&self, i: usize) -> Option<u64> {
        match self {
            Chain::Raw(raw) => raw.get(i),
            Chain::Words(words) => words.get(i).copied(),
            Chain::Unwound(unwound) => unwound.get(i),
        }
    }

    /// Every entry, leaf first.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.len()).map_while(|i| self.get(i))
    }
}

/// A sample's chain whose user part was unwound from its stack copy: the
/// kernel's part as recorded, and the user frames as found (the sampled
/// IP, then each return address), kept apart and typed. Read as a
/// [`Chain`], it is what the kernel writes when it walks the user stack
/// itself: the kernel's part, perf's user mark, the frames, and
/// [`TRUNCATED_FRAME`] after them when the walk stopped early.
#[derive(Clone, Copy)]
pub struct UnwoundChain<'a> {
    kernel: Option<Chain<'a>>,
    /// Entries of `kernel` before its own user part, if it has one.
    kernel_len: usize,
    frames: &'a [u64],
    truncated: bool,
}

impl<'a> UnwoundChain<'a> {
    /// The chain of `kernel` (as recorded) and user `frames` found by a
    /// walk that stopped early when `truncated`. A kernel part that goes
    /// on into user frames (recorded without `exclude_callchain_user`)
    /// is read up to its user mark: the unwound frames replace those.
    pub fn new(kernel: Option<Chain<'a>>, frames: &'a [u64], truncated: bool) -> Self {
        let kernel_len = kernel.map_or(0, |chain| {
            let user = chain.iter().position(|a| a == rec::CONTEXT_USER);
            user.unwrap_or(chain.len())
        });
        UnwoundChain {
            kernel,
            kernel_len,
            frames,
            truncated,
        }
    }

    /// Entries, marks included.
    fn len(&self) -> usize {
        self.kernel_len + 1 + self.frames.len() + usize::from(self.truncated)
    }

    /// Entry `i`.
    fn get(&self, i: usize) -> Option<u64> {
        if i < self.kernel_len {
            return self.kernel?.get(i);
        }
        match i - self.kernel_len {
            0 => Some(rec::CONTEXT_USER),
            n if n <= self.frames.len() => Some(self.frames[n - 1]),
            n if self.truncated && n == self.frames.len() + 1 => Some(TRUNCATED_FRAME),
            _ => None,
        }
    }
}

/// What the collector paired with a fault in the kernel: its entry's error
/// code and the time from entry to completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairedEntry {
    /// x86 error code: bit 0 present, bit 1 write, bit 4 instruction fetch.
    pub error_code: u64,
    /// Time in the kernel, ns.
    pub latency_ns: u64,
    /// The kernel-mode tracepoint's entry (a fault on user memory in a
    /// system call).
    pub kernel_mode: bool,
}

/// A completed fault, from `minor-faults` / `major-faults`.
#[derive(Clone, Copy)]
pub struct FaultSample<'a> {
    /// Major or minor, as the kernel counted it.
    pub major: bool,
    /// Process.
    pub pid: i32,
    /// Thread.
    pub tid: i32,
    /// Time (ns, perf clock).
    pub time: u64,
    /// The faulting data address (avma).
    pub addr_avma: u64,
    /// Whether the fault was taken in kernel mode.
    pub kernel_mode: bool,
    /// Call chain, leaf first, with perf's context markers.
    pub callchain: Option<Chain<'a>>,
    /// Faults this sample stands for: 1, or the sample's period in perf's
    /// sampled recordings (`-c N`, `-F`).
    pub weight: u64,
    /// User registers and stack copy, to unwind (perf's `--call-graph dwarf`).
    pub user_stack: Option<(UserRegs, &'a [u8])>,
    /// Its entry, when the collector paired it (a recording's faults are
    /// paired with their entry records while replaying).
    pub entry: Option<PairedEntry>,
}

/// A fault entry, from the `exceptions:page_fault_*` tracepoints.
#[derive(Debug, Clone, Copy)]
pub struct FaultEntry {
    /// Thread.
    pub tid: i32,
    /// Time (ns).
    pub time: u64,
    /// Faulting address.
    pub addr_avma: u64,
    /// x86 error code: bit 0 present, bit 1 write, bit 4 instruction fetch.
    pub error_code: u64,
    /// Kernel-mode fault (`page_fault_kernel`).
    pub kernel_mode: bool,
}

/// What an mmap/mmap2 record says of a new mapping, but its path and
/// build-id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmapRecord {
    /// The process.
    pub pid: i32,
    /// First address.
    pub avma: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset of `avma`.
    pub file_offset: u64,
    /// PROT_* bits (mmap2 only).
    pub prot: u32,
    /// MAP_* bits (mmap2 only).
    pub flags: u32,
}

/// One decoded record.
pub enum Event<'a> {
    /// Before any record: the recording's header facts.
    Begin(&'a Header),
    /// A completed fault.
    Fault(FaultSample<'a>),
    /// A fault entry with its error code.
    Entry(FaultEntry),
    /// A new mapping (mmap, mprotect split, brk growth, exec's segments).
    Mmap {
        /// Where the mapping is, of which process, and how.
        mapping: MmapRecord,
        /// Path, or `//anon`, `[heap]`, `[vdso]` ...
        path: RawData<'a>,
        /// GNU build-id when the kernel provided it (mmaps are rare: owned is fine).
        build_id: Option<Vec<u8>>,
    },
    /// Thread name change; `exec` = the process exec'd (address space reset).
    Comm {
        /// Process.
        pid: i32,
        /// Thread.
        tid: i32,
        /// New name.
        name: RawData<'a>,
        /// Set for exec.
        exec: bool,
        /// Time (ns).
        time: u64,
    },
    /// New thread or process.
    Fork {
        /// New process.
        pid: i32,
        /// Parent process.
        ppid: i32,
        /// New thread.
        tid: i32,
    },
    /// Thread exit (the process's when `pid == tid`).
    Exit {
        /// Process.
        pid: i32,
        /// Thread.
        tid: i32,
    },
    /// A syscall that may give memory back.
    MemoryCall {
        /// Process.
        pid: i32,
        /// Thread.
        tid: i32,
        /// Time (ns).
        time: u64,
        /// Which, with its arguments or result.
        call: MemoryCall,
    },
    /// A thread entered the program's `main`.
    MainEntry {
        /// Process.
        pid: i32,
        /// Time.
        time: u64,
    },
    /// The kernel dropped `count` records (ring buffer full).
    Lost {
        /// Number of records lost.
        count: u64,
        /// The event that lost them: known for PERF_RECORD_LOST_SAMPLES;
        /// None for PERF_RECORD_LOST, whose id names whichever event next
        /// wrote to the shared ring, not the ones lost.
        kind: Option<EventKind>,
    },
}

/// Counters of what replay saw.
#[derive(Debug, Default, Clone)]
pub struct DecodeStats {
    /// Records read.
    pub records: u64,
    /// Records that did not parse (counted, skipped).
    pub bad_records: u64,
    /// Set when the recording was repaired or `--partial` stopped at a damaged spot.
    pub truncated: Option<String>,
    /// Time of the first and last record.
    pub first_time: Option<u64>,
    /// Time of the last record.
    pub last_time: Option<u64>,
}

/// A recording's header facts.
pub struct Header {
    /// pfprof's metadata, if the recording was finished by pfprof.
    pub meta: Option<RecordingMeta>,
    /// Event kinds by attr index.
    pub kinds: Vec<EventKind>,
    /// Command line from the perf header.
    pub cmdline: Option<Vec<String>>,
    /// How perf sampled the faults, when not every one (perf's `-c N`,
    /// `-F`): counts are then scaled by the period.
    pub sampling: Option<Sampling>,
    /// perf's `page-faults` event: faults of both kinds, counted as minor.
    pub any_fault_event: bool,
    /// The recorded kernel's build-id (perf's `BUILD_ID` header,
    /// `[kernel.kallsyms]`): kernel frames are named from this machine's
    /// kallsyms only if it is the running kernel's.
    pub kernel_build_id: Option<Vec<u8>>,
    /// A fault event samples user registers and stack (perf's
    /// `--call-graph dwarf`): chains are unwound while replaying.
    pub user_stacks: bool,
}

/// How a recording sampled faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// One in N (`perf record -c N`).
    Period(u64),
    /// N samples a second, each with its period (`perf record -F N`).
    Frequency(u64),
}

/// Faults a sample of an event stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Weight {
    /// Each sample is one fault (or pfprof's own sampled recording).
    One,
    /// Each sample stands for this many (a fixed period).
    Fixed(u64),
    /// The sample's own period (frequency sampling).
    FromSample,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::perf_data::{EventDesc, PerfDataWriter};
    use perf_event_open_sys::bindings as b;

    /// Every decoded fault is moved into a batch and out of it on its way
    /// to the analysis (a tenth of a replay's CPU was those copies at 224
    /// bytes): keep an event small.
    #[test]
    fn an_event_is_small() {
        assert!(
            std::mem::size_of::<Event<'_>>() <= 192,
            "{}",
            std::mem::size_of::<Event<'_>>()
        );
    }

    pub(crate) fn minor_faults_attr() -> Vec<u8> {
        let mut attr = crate::sys::new_attr();
        attr.type_ = b::PERF_TYPE_SOFTWARE;
        attr.config = b::PERF_COUNT_SW_PAGE_FAULTS_MIN as u64;
        attr.sample_type = (b::PERF_SAMPLE_IDENTIFIER
            | b::PERF_SAMPLE_IP
            | b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_TIME
            | b::PERF_SAMPLE_ADDR
            | b::PERF_SAMPLE_CPU
            | b::PERF_SAMPLE_CALLCHAIN) as u64;
        attr.set_sample_id_all(1);
        crate::sys::attr_bytes(&attr).to_vec()
    }

    /// A PERF_RECORD_SAMPLE of `minor_faults_attr` whose address is its time.
    fn sample(id: u64, cpu: u32, time: u64) -> Vec<u8> {
        sample_with_chain(id, cpu, time, time, &[])
    }

    /// A PERF_RECORD_SAMPLE of `minor_faults_attr` with a call chain.
    pub(crate) fn sample_with_chain(
        id: u64,
        cpu: u32,
        time: u64,
        addr: u64,
        chain: &[u64],
    ) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&9u32.to_le_bytes());
        r.extend_from_slice(&2u16.to_le_bytes()); // PERF_RECORD_MISC_USER
        r.extend_from_slice(&((64 + 8 * chain.len()) as u16).to_le_bytes());
        for v in [id, 0x401000, (7u64 << 32) | 7, time, addr] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r.extend_from_slice(&(cpu as u64).to_le_bytes());
        r.extend_from_slice(&(chain.len() as u64).to_le_bytes());
        for v in chain {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r
    }

    /// Rounds hand out, at each FINISHED_ROUND, what is older than the
    /// round before's newest record, sorted; the rest at the end.
    #[test]
    fn rounds_hand_out_what_no_later_record_precedes() {
        let mut rounds = Rounds::default();
        let mut out = Vec::new();
        let mut take =
            |ready: &[TimeOrdered]| out.push(ready.iter().map(|r| r.time).collect::<Vec<_>>());
        for (offset, time) in [(0, 30), (8, 10)] {
            rounds.push(TimeOrdered::new(time, offset, 0));
        }
        rounds.end_round(&mut take);
        for (offset, time) in [(16, 20), (24, 40)] {
            rounds.push(TimeOrdered::new(time, offset, 0));
        }
        rounds.end_round(&mut take);
        rounds.push(TimeOrdered::new(35, 32, 0));
        rounds.finish(&mut take);
        assert_eq!(out, [vec![10, 20, 30], vec![35, 40]]);
    }

    /// The live decoder hands out, at each cutoff, the records stamped
    /// before it in time order (one at the cutoff waits), keeps the others
    /// across pushes, and counts bytes that are not whole records once,
    /// dropping them.
    #[test]
    fn live_decoder_hands_out_in_time_order() {
        let event = |ids: Vec<u64>| EventDesc {
            attr: minor_faults_attr(),
            name: "minor-faults".into(),
            ids,
        };
        let mut decoder = LiveDecoder::new(&[event(vec![100]), event(vec![200])]).unwrap();
        let mut seen = Vec::new();
        let mut flush = |decoder: &mut LiveDecoder, cutoff: u64| {
            decoder.flush_before(cutoff, |_, e| {
                if let Event::Fault(f) = e {
                    seen.push(f.time);
                }
            })
        };
        decoder.push(&[sample(100, 0, 30), sample(200, 1, 10)].concat());
        decoder.push(&[sample(100, 0, 20), sample(999, 0, 5)].concat());
        flush(&mut decoder, 20);
        let not_whole = [1, 0, 0, 0, 0, 0, 4, 0];
        decoder.push(&[&sample(200, 1, 40)[..], &not_whole, &sample(100, 0, 15)].concat());
        flush(&mut decoder, u64::MAX);
        assert_eq!(seen, [10, 20, 30, 40]);
        assert_eq!(
            decoder.bad_records, 2,
            "the unknown id, the bytes not whole"
        );
    }

    /// An empty or faultless replay is an error naming why; pfprof's own
    /// recording without faults is a result.
    #[test]
    fn nothing_decoded_says_why() {
        let stats = |bad_records, records| DecodeStats {
            bad_records,
            records,
            ..DecodeStats::default()
        };
        let counts = |decoded, faults, bad_faults, lost| Counts {
            decoded,
            faults,
            bad_faults,
            lost,
        };
        let why = |c: Counts, s: DecodeStats, own| nothing_decoded(&c, &s, own);
        assert!(why(counts(0, 0, 0, [0; 2]), stats(3, 3), true)
            .unwrap()
            .starts_with("no record could be decoded (all 3"));
        assert!(why(counts(0, 0, 0, [0; 2]), stats(0, 0), true)
            .unwrap()
            .contains("holds none"));
        assert!(why(counts(5, 0, 2, [0; 2]), stats(2, 7), true)
            .unwrap()
            .starts_with("none of its 2 fault samples"));
        assert!(why(counts(5, 0, 0, [4, 9]), stats(0, 5), false)
            .unwrap()
            .contains("perf lost all 9"));
        assert!(why(counts(5, 0, 0, [0; 2]), stats(0, 5), false)
            .unwrap()
            .contains("(5 records of other kinds)"));
        assert_eq!(why(counts(5, 0, 0, [0; 2]), stats(0, 5), true), None);
        assert_eq!(why(counts(5, 1, 0, [0; 2]), stats(0, 5), false), None);
    }

    /// perf's recordings of events that share one sample type have
    /// PERF_SAMPLE_ID, not IDENTIFIER: each sample's id (after IP, TID,
    /// TIME, ADDR) picks its event; id 0 (perf's synthesized records) is
    /// the first event; an unknown id is a bad record.
    #[test]
    fn finds_events_by_sample_id() {
        let dir = crate::test_dir("sample-id");
        let path = dir.join("id.data");
        let attr = |config: u32| {
            let mut attr = crate::sys::new_attr();
            attr.type_ = b::PERF_TYPE_SOFTWARE;
            attr.config = u64::from(config);
            attr.sample_type = (b::PERF_SAMPLE_IP
                | b::PERF_SAMPLE_TID
                | b::PERF_SAMPLE_TIME
                | b::PERF_SAMPLE_ADDR
                | b::PERF_SAMPLE_ID) as u64;
            attr.set_sample_id_all(1);
            crate::sys::attr_bytes(&attr).to_vec()
        };
        let events = vec![
            EventDesc {
                attr: attr(b::PERF_COUNT_SW_PAGE_FAULTS_MIN),
                name: "minor-faults".into(),
                ids: vec![11, 12],
            },
            EventDesc {
                attr: attr(b::PERF_COUNT_SW_PAGE_FAULTS_MAJ),
                name: "major-faults".into(),
                ids: vec![21],
            },
        ];
        let sample = |id: u64, time: u64| {
            let mut r = Vec::new();
            r.extend_from_slice(&9u32.to_le_bytes());
            r.extend_from_slice(&2u16.to_le_bytes());
            r.extend_from_slice(&48u16.to_le_bytes());
            for v in [0x401000, (7u64 << 32) | 7, time, 0x1000 * time, id] {
                r.extend_from_slice(&v.to_le_bytes());
            }
            r
        };
        let mut w = PerfDataWriter::create(&path, events).unwrap();
        for (id, time) in [(11, 1), (21, 2), (12, 3), (0, 4), (99, 5)] {
            w.write_records(&sample(id, time)).unwrap();
        }
        w.finish(&RecordingMeta::default(), "h", "r", 1).unwrap();
        let mut seen = Vec::new();
        let (_, stats) = replay(&path, false, |event| {
            if let Event::Fault(f) = event {
                seen.push((f.time, f.major));
            }
        })
        .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(seen, [(1, false), (2, true), (3, false), (4, false)]);
        assert_eq!(stats.bad_records, 1, "the sample of id 99");
    }

    /// Records of different CPUs, each in order but appended per CPU and per
    /// round, come back merged in time order (ties in file order); a record
    /// with an unknown id is counted as bad, not fatal.
    #[test]
    fn merges_cpus_by_time() {
        let dir = crate::test_dir("merge");
        let path = dir.join("m.data");
        // Two events: a record's id picks its event (one event would take
        // every record, as perf does).
        let events = vec![
            EventDesc {
                attr: minor_faults_attr(),
                name: "minor-faults".into(),
                ids: vec![100, 101],
            },
            EventDesc {
                attr: minor_faults_attr(),
                name: "other".into(),
                ids: vec![200],
            },
        ];
        let mut w = PerfDataWriter::create(&path, events).unwrap();
        // round 1: cpu 0 then cpu 1
        for t in [10, 30, 50] {
            w.write_records(&sample(100, 0, t)).unwrap();
        }
        for t in [20, 40, 60] {
            w.write_records(&sample(101, 1, t)).unwrap();
        }
        w.finish_round().unwrap();
        // round 2: a cpu-1 record older than round 1's newest, and a tie
        for t in [55, 70] {
            w.write_records(&sample(101, 1, t)).unwrap();
        }
        w.write_records(&sample(100, 0, 70)).unwrap();
        w.write_records(&sample(999, 0, 80)).unwrap();
        w.finish(&RecordingMeta::default(), "h", "r", 2).unwrap();

        let mut times = Vec::new();
        let (header, stats) = replay(&path, false, |event| {
            if let Event::Fault(f) = event {
                times.push(f.addr_avma);
            }
        })
        .unwrap();
        assert_eq!(times, [10, 20, 30, 40, 50, 55, 60, 70, 70]);
        assert_eq!(header.kinds, [EventKind::Minor, EventKind::Minor]);
        assert_eq!(stats.bad_records, 1, "the record with an unknown id");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What pfprof writes for perf reads back: the kernel's text mapping
    /// (pid -1) is no process's mapping, and samples with DATA_SRC decode
    /// as those without.
    #[test]
    fn reads_what_is_written_for_perf() {
        let dir = crate::test_dir("perfcompat");
        let path = dir.join("p.data");
        let mut attr = minor_faults_attr();
        let sample_type = u64::from_le_bytes(attr[24..32].try_into().unwrap());
        attr[24..32].copy_from_slice(&(sample_type | b::PERF_SAMPLE_DATA_SRC as u64).to_le_bytes());
        let events = vec![EventDesc {
            attr,
            name: "minor-faults".into(),
            ids: vec![100],
        }];
        let mut w = PerfDataWriter::create(&path, events).unwrap();
        w.write_records(&crate::record::synth::kernel_mmap(
            0xffffffff81000000,
            0xffffffff82000000,
            100,
        ))
        .unwrap();
        let lib = crate::sys::maps::MapsLine {
            start_avma: 0x1000,
            end_avma: 0x3000,
            prot: 5,
            flags: 2,
            file_offset: 0,
            dev: (0, 0),
            inode: 0,
            path: "/lib/libx.so".into(),
        };
        w.write_records(&crate::record::synth::mmap2(7, &lib, 5, 100))
            .unwrap();
        for (time, addr) in [(10, 0x1234), (20, 0x2345)] {
            let mut s = sample_with_chain(100, 0, time, addr, &[0x1100, 0x1200]);
            s.extend_from_slice(&0x2910_0142u64.to_le_bytes());
            let size = s.len() as u16;
            s[6..8].copy_from_slice(&size.to_le_bytes());
            w.write_records(&s).unwrap();
        }
        w.finish(&RecordingMeta::default(), "h", "r", 2).unwrap();

        let (mut mmaps, mut faults) = (Vec::new(), Vec::new());
        let (_, stats) = replay(&path, false, |event| match event {
            Event::Mmap {
                mapping: MmapRecord { pid, .. },
                path,
                ..
            } => mmaps.push((*pid, String::from_utf8_lossy(&path.as_slice()).into_owned())),
            Event::Fault(f) => faults.push((f.addr_avma, f.callchain.map_or(0, |c| c.len()))),
            _ => {}
        })
        .unwrap();
        assert_eq!(mmaps, [(7, "/lib/libx.so".to_string())]);
        assert_eq!(faults, [(0x1234, 2), (0x2345, 2)]);
        assert_eq!(stats.bad_records, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
