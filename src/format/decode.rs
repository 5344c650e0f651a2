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
use crate::unwind::UserRegs;

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
    /// Anything else (ignored).
    Other,
}

/// A call chain, leaf first, with perf's context marks: as a record holds
/// it, or as pfprof unwound it (or its collector wrote it) while recording.
#[derive(Clone, Copy)]
pub enum Chain<'a> {
    /// In a record.
    Raw(RawDataU64<'a>),
    /// Words in memory.
    Words(&'a [u64]),
}

impl Chain<'_> {
    /// Entries, marks included.
    pub fn len(&self) -> usize {
        match self {
            Chain::Raw(raw) => raw.len(),
            Chain::Words(words) => words.len(),
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
        }
    }

    /// Every entry, leaf first.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.len()).map_while(|i| self.get(i))
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

fn kind_from(type_: &PerfEventType, name: Option<&str>) -> EventKind {
    match (type_, name) {
        (PerfEventType::Software(SoftwareCounterType::PageFaultsMin), _) => EventKind::Minor,
        (PerfEventType::Software(SoftwareCounterType::PageFaultsMaj), _) => EventKind::Major,
        // perf's `page-faults` does not tell minor from major.
        (PerfEventType::Software(SoftwareCounterType::PageFaults), _) => EventKind::Minor,
        (PerfEventType::Tracepoint(_), Some(name)) if rec::FAULT_ENTRY_USER.is_named(name) => {
            EventKind::EntryUser
        }
        (PerfEventType::Tracepoint(_), Some(name)) if rec::FAULT_ENTRY_KERNEL.is_named(name) => {
            EventKind::EntryKernel
        }
        (_, Some(name)) if rec::MAIN_ENTRY.is_named(name) => EventKind::MainEntry,
        _ => EventKind::Other,
    }
}

/// Reads a u64 at `offset` of a tracepoint's raw data (little endian).
fn raw_u64(raw: &RawData<'_>, offset: usize) -> Option<u64> {
    let mut bytes = [0u8; 8];
    raw.get(offset..offset + 8)?.read_exact(&mut bytes).ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Replays `path`, calling `on_event` for each record in time order.
///
/// The file is read once; records are indexed by (time, offset), sorted
/// (each CPU's stream is already in order, so the sort is cheap), and parsed
/// in place: no per-record copy or allocation.
///
/// A recording that pfprof could not finish (killed) is repaired in memory
/// and read up to its last complete record; a file cut short elsewhere is an
/// error unless `partial` asks for the same repair. Anything but a regular
/// file (a FIFO, a device, a directory) is refused before it is opened for
/// reading, so nothing blocks.
pub fn replay(
    path: &Path,
    partial: bool,
    on_event: impl FnMut(Event<'_>),
) -> Result<(Header, DecodeStats), DecodeError> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let display = path.display().to_string();
    let open_error = |source| DecodeError::Open {
        path: display.clone(),
        source,
    };
    let not_recording = |what: &str| DecodeError::NotRecording {
        path: display.clone(),
        what: what.to_string(),
    };
    let kind = std::fs::metadata(path).map_err(open_error)?.file_type();
    if kind.is_dir() {
        return Err(not_recording("a directory without a pfprof.data"));
    } else if kind.is_fifo() {
        return Err(not_recording(
            "a FIFO (pfprof reads recordings from regular files)",
        ));
    } else if kind.is_socket() {
        return Err(not_recording("a socket"));
    } else if kind.is_char_device() || kind.is_block_device() {
        return Err(not_recording("a device"));
    }
    // O_NONBLOCK: the path may have been swapped for a FIFO since the check.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(open_error)?;
    if !file.metadata().map_err(open_error)?.is_file() {
        return Err(not_recording("not a regular file"));
    }
    if file.metadata().map_err(open_error)?.len() == 0 {
        return Err(not_recording("the file is empty"));
    }
    let bytes = MappedFile::new(&file).map_err(open_error)?;
    replay_image(&bytes, &display, partial, on_event)
}

/// Replays a recording held in memory (`display` names it in errors): the
/// whole of [`replay`] after the file is mapped, so fuzzing reaches the real
/// path.
pub fn replay_image(
    bytes: &[u8],
    display: &str,
    partial: bool,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<(Header, DecodeStats), DecodeError> {
    let path = display.to_string();
    if bytes.is_empty() {
        return Err(DecodeError::NotRecording {
            path,
            what: "the file is empty".into(),
        });
    }
    let repaired = |facts: Option<HeaderFacts>,
                    damage: Option<LayoutError>|
     -> Result<(Vec<u8>, String), DecodeError> {
        let header_error = |e: LayoutError| DecodeError::Header {
            path: path.clone(),
            offset: e.offset,
            what: e.what,
        };
        let Some((image, kept)) = repair(bytes) else {
            return Err(match damage {
                Some(damage) => header_error(damage),
                None => DecodeError::Header {
                    path: path.clone(),
                    offset: 16,
                    what: "its attributes are damaged".into(),
                },
            });
        };
        let why = if facts.is_some_and(|f| f.finished()) {
            format!("the recording is cut short; read its first {kept} bytes of complete records")
        } else {
            format!("the recording was not finished (pfprof was killed?); read its {kept} bytes of complete records")
        };
        Ok((image, why))
    };
    let (image, why) = match read_layout(bytes) {
        Ok(layout) if layout.facts.finished() => {
            return replay_layout(bytes, layout, &path, partial, None, &mut on_event);
        }
        Ok(layout) => repaired(Some(layout.facts), None)?,
        // Not a perf.data file at all.
        Err(e) if e.offset == 0 => {
            return Err(DecodeError::NotRecording { path, what: e.what });
        }
        Err(e) if partial => repaired(HeaderFacts::parse(bytes), Some(e))?,
        Err(e) => {
            let facts = HeaderFacts::parse(bytes);
            let data_end = facts.map_or(0, |f| f.data.0.saturating_add(f.data.1));
            if facts.is_some_and(|f| f.finished()) && data_end > bytes.len() as u64 {
                return Err(DecodeError::Truncated {
                    path,
                    offset: bytes.len() as u64,
                    record: String::new(),
                    records: 0,
                    what: format!(
                        "the data section ends at byte {data_end} but the file has {} bytes",
                        bytes.len()
                    ),
                });
            }
            return Err(DecodeError::Header {
                path,
                offset: e.offset,
                what: e.what,
            });
        }
    };
    let layout = read_layout(&image).map_err(|e| DecodeError::Header {
        path: path.clone(),
        offset: e.offset,
        what: format!("even repaired: {}", e.what),
    })?;
    replay_layout(&image, layout, &path, partial, Some(why), &mut on_event)
}

/// Replays a recording whose layout was read: its events and header, then
/// its records in time order; an error when nothing (or no fault) decoded.
fn replay_layout(
    bytes: &[u8],
    layout: Layout,
    display: &str,
    partial: bool,
    repaired: Option<String>,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<(Header, DecodeStats), DecodeError> {
    let (table, kinds) = read_events(&layout, display)?;
    let weights = weights(&table.attrs, layout.meta.is_some());
    let build_ids: FxHashMap<Vec<u8>, Vec<u8>> = layout.build_ids.iter().cloned().collect();
    let facts = layout.facts;
    let header = header(bytes, layout, &table.attrs, &kinds, &build_ids);
    let mut stats = DecodeStats {
        truncated: repaired,
        ..DecodeStats::default()
    };
    let data = data_section(bytes, facts, display)?;
    on_event(Event::Begin(&header));
    let mut out = Emitter {
        data: &data,
        table: &table,
        kinds: &kinds,
        weights: &weights,
        build_ids: &build_ids,
        stats: &mut stats,
        counts: Counts::default(),
    };
    index_records(
        &mut out,
        facts.data.0 as usize,
        partial,
        display,
        &mut on_event,
    )?;
    if let Some(what) = nothing_decoded(&out.counts, out.stats, header.meta.is_some()) {
        return Err(DecodeError::NoRecords {
            path: display.to_string(),
            what,
        });
    }
    Ok((header, stats))
}

/// Parses the events' attrs and tells their kinds; a recording without a
/// fault event is not one pfprof reads.
fn read_events(
    layout: &Layout,
    display: &str,
) -> Result<(EventTable, Vec<EventKind>), DecodeError> {
    let table = EventTable::new(layout.events.iter().map(|e| (&e.attr[..], &e.ids[..]))).map_err(
        |(index, e)| DecodeError::Header {
            path: display.to_string(),
            offset: layout.event_offsets[index],
            what: format!("event {index} has a malformed perf_event_attr ({e})"),
        },
    )?;
    let kinds: Vec<EventKind> = table
        .attrs
        .iter()
        .zip(&layout.events)
        .map(|(attr, event)| {
            kind_from(
                &attr.type_,
                Some(event.name.as_str()).filter(|n| !n.is_empty()),
            )
        })
        .collect();
    if !kinds
        .iter()
        .any(|k| matches!(k, EventKind::Minor | EventKind::Major))
    {
        let names: Vec<&str> = layout
            .events
            .iter()
            .map(|e| {
                if e.name.is_empty() {
                    "unnamed"
                } else {
                    e.name.as_str()
                }
            })
            .collect();
        return Err(DecodeError::NotRecording {
            path: display.to_string(),
            what: format!(
                "it has no minor-faults or major-faults event (events: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        });
    }
    Ok((table, kinds))
}

/// Faults a sample of each event stands for. pfprof counts its own sampled
/// recordings (`own`) as they are (its report says "1 in N"); perf's
/// samples stand for their period.
fn weights(attrs: &[PerfEventAttr], own: bool) -> Vec<Weight> {
    attrs
        .iter()
        .map(|a| match a.sampling_policy {
            _ if own => Weight::One,
            SamplingPolicy::Period(n) => Weight::Fixed(n.get()),
            SamplingPolicy::Frequency(_) => Weight::FromSample,
            SamplingPolicy::NoSampling => Weight::One,
        })
        .collect()
}

/// The header facts replay hands out before any record.
fn header(
    bytes: &[u8],
    layout: Layout,
    attrs: &[PerfEventAttr],
    kinds: &[EventKind],
    build_ids: &FxHashMap<Vec<u8>, Vec<u8>>,
) -> Header {
    let own = layout.meta.is_some();
    let sampling = attrs
        .iter()
        .zip(kinds)
        .filter(|(_, k)| matches!(k, EventKind::Minor | EventKind::Major))
        .find_map(|(a, _)| match a.sampling_policy {
            _ if own => None,
            SamplingPolicy::Period(n) if n.get() > 1 => Some(Sampling::Period(n.get())),
            SamplingPolicy::Frequency(hz) => Some(Sampling::Frequency(hz)),
            _ => None,
        });
    let any_fault_event = attrs.iter().any(|a| {
        matches!(
            a.type_,
            PerfEventType::Software(SoftwareCounterType::PageFaults)
        )
    });
    let meta = layout
        .meta
        .and_then(|range| serde_json::from_slice::<RecordingMeta>(&bytes[range]).ok());
    Header {
        meta,
        kinds: kinds.to_vec(),
        cmdline: layout.cmdline,
        sampling,
        any_fault_event,
        kernel_build_id: build_ids.get(&b"[kernel.kallsyms]"[..]).cloned(),
        user_stacks: !own
            && attrs.iter().zip(kinds).any(|(a, k)| {
                matches!(k, EventKind::Minor | EventKind::Major)
                    && a.sample_format
                        .contains(SampleFormat::REGS_USER | SampleFormat::STACK_USER)
            }),
    }
}

/// The data section's records: in place, or for perf record -z
/// decompressed (up to 64 times the compressed size, at least 256 MiB;
/// zstd rarely does better on records).
fn data_section<'a>(
    bytes: &'a [u8],
    facts: HeaderFacts,
    display: &str,
) -> Result<Cow<'a, [u8]>, DecodeError> {
    let data_start = facts.data.0 as usize;
    let data = bytes
        .get(
            data_start
                ..data_start
                    .saturating_add(facts.data.1 as usize)
                    .min(bytes.len()),
        )
        .unwrap_or_default();
    if !crate::format::compressed::has_compressed(data) {
        return Ok(Cow::Borrowed(data));
    }
    let limit = data.len().saturating_mul(64).max(1 << 28);
    crate::format::compressed::decompress(data, limit)
        .map(Cow::Owned)
        .map_err(|why| DecodeError::NoRecords {
            path: display.to_string(),
            what: format!("its compressed records (perf record -z) cannot be read: {why}"),
        })
}

/// Indexes every kernel record of `out.data` by time and hands them to
/// `out` round by round. Damage is an error, or with `partial` the end of
/// replay (noted in the stats). `data_start` places offsets in the file.
fn index_records(
    out: &mut Emitter<'_>,
    data_start: usize,
    partial: bool,
    display: &str,
    on_event: &mut impl FnMut(Event<'_>),
) -> Result<(), DecodeError> {
    let data = out.data;
    let mut rounds = Rounds::default();
    let mut indexed = 0u64;
    for record in records(data) {
        let record = match record {
            Ok(record) => record,
            Err(broken) => {
                let (why, record, at) = damage(broken, data.len(), data_start);
                if partial {
                    out.stats.truncated = Some(match record.is_empty() {
                        true => format!("after {indexed} records: {why}"),
                        false => format!("after {indexed} records: at byte {at}{record}: {why}"),
                    });
                    break;
                }
                return Err(DecodeError::Truncated {
                    path: display.to_string(),
                    offset: at as u64,
                    record,
                    records: indexed,
                    what: why,
                });
            }
        };
        if record.head.record_type == PERF_RECORD_FINISHED_ROUND {
            rounds.end_round(|ready| out.emit(ready, on_event));
            continue;
        }
        match out.table.index(&record, record.offset) {
            Indexed::NotKernel => {}
            Indexed::NoEvent => out.stats.bad_records += 1,
            Indexed::At(key) => {
                indexed += 1;
                rounds.push(key);
            }
        }
    }
    rounds.finish(|all| out.emit(all, on_event));
    Ok(())
}

/// What is wrong where the data section (`len` bytes, at `data_start` of
/// the file) stops holding whole records: why, ` (record type N, NAME)`
/// when a header was read there (else empty), and the byte in the file.
fn damage(broken: Broken, len: usize, data_start: usize) -> (String, String, usize) {
    let at = data_start + broken.offset;
    match broken.head {
        None => (
            format!(
                "{} bytes left, too few for a record header",
                len - broken.offset
            ),
            String::new(),
            at,
        ),
        Some(head) => (
            format!("the record's size ({} bytes) is impossible", head.size),
            format!(
                " (record type {}, {})",
                head.record_type,
                record_type_name(head.record_type)
            ),
            at,
        ),
    }
}

/// Records handed out in time order round by round, as perf reads them: at
/// each FINISHED_ROUND, everything up to the newest time of the round
/// before is in the file, so it is sorted and handed out. The queue then
/// holds about two drain passes, not the whole recording. (A file without
/// rounds is sorted whole at the end.)
#[derive(Default)]
struct Rounds {
    queue: TimeQueue,
    /// The newest time indexed.
    newest: u64,
    /// The newest time when the last round ended.
    flush_limit: Option<u64>,
}

impl Rounds {
    /// Indexes a record.
    fn push(&mut self, record: TimeOrdered) {
        self.newest = self.newest.max(record.time);
        self.queue.push(record);
    }

    /// At a FINISHED_ROUND: hands `emit` the records no later one can
    /// precede, in order.
    fn end_round(&mut self, emit: impl FnOnce(&[TimeOrdered])) {
        if let Some(limit) = self.flush_limit {
            self.queue.pop_through(Some(limit), emit);
        }
        self.flush_limit = Some(self.newest);
    }

    /// At the end: hands `emit` the rest, in order.
    fn finish(mut self, emit: impl FnOnce(&[TimeOrdered])) {
        self.queue.pop_through(Some(u64::MAX), emit);
    }
}

/// Why a replay is no result, or None when it is: never an empty profile
/// passed off as a result. A recording whose records, or whose fault
/// samples, all failed to decode is an error; so is perf's file without a
/// fault (`own`: pfprof's own recording, whose program may take none).
fn nothing_decoded(counts: &Counts, stats: &DecodeStats, own: bool) -> Option<String> {
    let Counts {
        decoded,
        faults,
        bad_faults,
        lost,
    } = *counts;
    if decoded == 0 && stats.bad_records > 0 {
        Some(format!(
            "no record could be decoded (all {} are damaged or belong to no event of the recording)",
            stats.bad_records
        ))
    } else if decoded == 0 {
        Some("no record could be decoded (the recording holds none)".to_string())
    } else if faults == 0 && bad_faults > 0 {
        Some(format!(
            "none of its {bad_faults} fault samples could be decoded (each needs a pid, tid and data address: perf record without -d?)"
        ))
    } else if faults == 0 && !own {
        // pfprof's own recording of a program that took no fault (of the
        // sampled class) is a result; perf's file without one is not.
        let lost = lost[0].max(lost[1]);
        Some(if lost > 0 {
            format!(
                "it holds no fault sample: perf lost all {lost} (its buffers were too small: perf record -m PAGES)"
            )
        } else {
            format!(
                "it holds no fault sample ({} records of other kinds): nothing to analyse",
                stats.records
            )
        })
    } else {
        None
    }
}

/// What the emitter handed out, for [`nothing_decoded`].
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    decoded: u64,
    faults: u64,
    bad_faults: u64,
    /// Records lost by the ring (PERF_RECORD_LOST), samples lost by event
    /// (PERF_RECORD_LOST_SAMPLES): perf writes both for the same loss.
    lost: [u64; 2],
}

/// Hands out indexed records in the order given, and counts them.
struct Emitter<'a> {
    data: &'a [u8],
    table: &'a EventTable,
    kinds: &'a [EventKind],
    weights: &'a [Weight],
    build_ids: &'a FxHashMap<Vec<u8>, Vec<u8>>,
    stats: &'a mut DecodeStats,
    counts: Counts,
}

impl Emitter<'_> {
    fn emit(&mut self, sorted: &[TimeOrdered], on_event: &mut impl FnMut(Event<'_>)) {
        let data = self.data;
        for &key in sorted {
            let (time, attr_index) = (key.time, key.attr());
            let record = self.table.raw_record(data, key);
            let stats = &mut *self.stats;
            stats.records += 1;
            stats.first_time = Some(stats.first_time.map_or(time, |t| t.min(time)));
            stats.last_time = Some(stats.last_time.map_or(time, |t| t.max(time)));
            let kind = self.kinds[attr_index];
            let fault_kind = matches!(kind, EventKind::Minor | EventKind::Major);
            let counts = &mut self.counts;
            match to_event(&record, kind, self.weights[attr_index], time) {
                Ok(Some(mut event)) => {
                    // perf's mmaps carry inodes; its header has the build-ids.
                    if let Event::Mmap {
                        build_id: build_id @ None,
                        path,
                        ..
                    } = &mut event
                    {
                        *build_id = self.build_ids.get(&path.as_slice()[..]).cloned();
                    }
                    counts.decoded += 1;
                    counts.faults += u64::from(matches!(event, Event::Fault(_)));
                    if let Event::Lost { count, kind } = event {
                        let slot = &mut counts.lost[usize::from(kind.is_some())];
                        *slot = slot.saturating_add(count);
                    }
                    on_event(event)
                }
                Ok(None) => counts.decoded += 1,
                Err(BadRecord) => {
                    stats.bad_records += 1;
                    counts.bad_faults +=
                        u64::from(fault_kind && record.record_type.0 == rec::SAMPLE);
                }
            }
        }
    }
}

/// A record that does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadRecord;

/// The kind of each event of `table`, by its type and name (`names[i]` is
/// the `i`th event's; a missing name makes it unnamed).
pub fn kinds_of(table: &EventTable, names: &[&str]) -> Vec<EventKind> {
    table
        .attrs
        .iter()
        .enumerate()
        .map(|(i, attr)| kind_from(&attr.type_, names.get(i).copied().filter(|n| !n.is_empty())))
        .collect()
}

/// One whole record of `table`'s events as an [`Event`] with its time:
/// `Ok(None)` for a record pfprof does not use, or of no event the table
/// knows. What the recorder hands its live consumers for the records it
/// does not rewrite.
pub fn event_of<'a>(
    table: &EventTable,
    kinds: &[EventKind],
    record: &'a [u8],
) -> Result<Option<(u64, Event<'a>)>, BadRecord> {
    let head = RecordHead::parse(record).ok_or(BadRecord)?;
    let body = record.get(HEAD_BYTES..head.size).ok_or(BadRecord)?;
    if head.record_type >= rec::USER_TYPE_START {
        return Ok(None);
    }
    let Some(attr) = table.attr_of_record(head.record_type, body) else {
        return Ok(None);
    };
    let time = table.time(head.record_type, body, attr).unwrap_or(0);
    let kind = kinds.get(attr).copied().unwrap_or(EventKind::Other);
    let event = to_event(&table.raw(record, attr), kind, Weight::One, time)?;
    Ok(event.map(|event| (time, event)))
}

/// One kernel record as an [`Event`]: `Ok(None)` for records pfprof does not
/// use. Shared by replay and the live stream.
fn to_event<'a>(
    record: &RawEventRecord<'a>,
    kind: EventKind,
    weight: Weight,
    time: u64,
) -> Result<Option<Event<'a>>, BadRecord> {
    let record_type = record.record_type.0;
    if matches!(record_type, rec::MMAP | rec::MMAP2) {
        let RawData::Single(body) = record.data else {
            return Err(BadRecord);
        };
        return mapping_event(record_type, record.misc, body);
    }
    if record_type == rec::SAMPLE {
        if let RawData::Single(body) = record.data {
            let sample = sample::read(&record.parse_info, record.misc, body).ok_or(BadRecord)?;
            return sample_event(sample, kind, weight, time);
        }
    }
    let Some(parsed) = parse_record(record) else {
        return Err(BadRecord);
    };
    let event = match parsed {
        EventRecord::Sample(s) => return sample_event(Sample::of(s), kind, weight, time),
        EventRecord::Comm(c) => Event::Comm {
            pid: c.pid,
            tid: c.tid,
            name: c.name,
            exec: c.is_execve,
            time,
        },
        EventRecord::Fork(f) => Event::Fork {
            pid: f.pid,
            ppid: f.ppid,
            tid: f.tid,
        },
        EventRecord::Exit(e) => Event::Exit {
            pid: e.pid,
            tid: e.tid,
        },
        EventRecord::Lost(l) => Event::Lost {
            count: l.count,
            kind: None,
        },
        EventRecord::Raw(r) if r.record_type.0 == 13 => {
            // PERF_RECORD_LOST_SAMPLES: u64 lost, then sample_id.
            match raw_u64(&r.data, 0) {
                Some(count) => Event::Lost {
                    count,
                    kind: Some(kind),
                },
                None => {
                    return Err(BadRecord);
                }
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(event))
}

/// A mapping record (MMAP or MMAP2) as an [`Event`]; `Ok(None)` for the
/// kernel's text (pid -1, written for perf): no process's address space,
/// kernel frames are named from /proc/kallsyms.
fn mapping_event(record_type: u32, misc: u16, body: &[u8]) -> Result<Option<Event<'_>>, BadRecord> {
    let m = Mapping::parse(record_type, misc, body).ok_or(BadRecord)?;
    if m.pid == -1 {
        return Ok(None);
    }
    Ok(Some(Event::Mmap {
        mapping: MmapRecord {
            pid: m.pid,
            avma: m.avma,
            len: m.len,
            file_offset: m.file_offset,
            prot: m.prot,
            flags: m.flags,
        },
        path: RawData::Single(m.path),
        // None for an empty one too (the vDSO, a file without the note):
        // the header's may say.
        build_id: m.build_id().map(<[u8]>::to_vec),
    }))
}

/// A sample as an [`Event`] by its event's kind: `Ok(None)` for events
/// pfprof does not use.
fn sample_event<'a>(
    s: Sample<'a>,
    kind: EventKind,
    weight: Weight,
    time: u64,
) -> Result<Option<Event<'a>>, BadRecord> {
    let event = match kind {
        EventKind::Minor | EventKind::Major => {
            let (Some(pid), Some(tid), Some(addr)) = (s.pid, s.tid, s.addr) else {
                return Err(BadRecord);
            };
            let weight = match weight {
                Weight::One => 1,
                Weight::Fixed(n) => n,
                Weight::FromSample => s.period.unwrap_or(1).max(1),
            };
            let user_stack = (s.user_regs.as_ref())
                .and_then(UserRegs::from_sample)
                .map(|regs| (regs, s.user_stack));
            Event::Fault(FaultSample {
                major: kind == EventKind::Major,
                pid,
                tid,
                time,
                addr_avma: addr,
                kernel_mode: s.cpu_mode == CpuMode::Kernel,
                callchain: s.callchain.map(Chain::Raw),
                weight,
                user_stack,
                entry: None,
            })
        }
        EventKind::EntryUser | EventKind::EntryKernel => {
            let fields = s
                .raw
                .as_ref()
                .and_then(|raw| Some((raw_u64(raw, 8)?, raw_u64(raw, 24)?)));
            let (Some(tid), Some((addr, error_code))) = (s.tid, fields) else {
                return Err(BadRecord);
            };
            Event::Entry(FaultEntry {
                tid,
                time,
                addr_avma: addr,
                error_code,
                kernel_mode: kind == EventKind::EntryKernel,
            })
        }
        EventKind::MainEntry => match s.pid {
            Some(pid) => Event::MainEntry { pid, time },
            None => {
                return Err(BadRecord);
            }
        },
        EventKind::Other => return Ok(None),
    };
    Ok(Some(event))
}

/// Decodes records while they are being recorded (`--stream`): the drained
/// whole records are kept and indexed, and handed out in time order once
/// no CPU can still deliver an older one.
pub struct LiveDecoder {
    table: EventTable,
    kinds: Vec<EventKind>,
    /// The records not handed out yet.
    buf: Vec<u8>,
    /// Their places in time order.
    queue: TimeQueue,
    /// Records that did not parse.
    pub bad_records: u64,
}

impl LiveDecoder {
    /// From the recording's events (raw attrs, names, ids).
    pub fn new(events: &[crate::format::perf_data::EventDesc]) -> Option<LiveDecoder> {
        let table = EventTable::new(events.iter().map(|e| (&e.attr[..], &e.ids[..]))).ok()?;
        let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
        let kinds = kinds_of(&table, &names);
        Some(LiveDecoder {
            table,
            kinds,
            buf: Vec::new(),
            queue: TimeQueue::default(),
            bad_records: 0,
        })
    }

    /// Whether the fault-entry tracepoints are among the events.
    pub fn has_entries(&self) -> bool {
        (self.kinds.iter()).any(|k| matches!(k, EventKind::EntryUser | EventKind::EntryKernel))
    }

    /// Keeps and indexes a run of whole records, as the recorder's drain
    /// hands them out. Bytes that are not whole records (which the drain
    /// never hands out) count as one bad record and are dropped.
    pub fn push(&mut self, bytes: &[u8]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(bytes);
        for record in records(&self.buf[start..]) {
            let record = match record {
                Ok(record) => record,
                Err(broken) => {
                    self.bad_records += 1;
                    self.buf.truncate(start + broken.offset);
                    break;
                }
            };
            match self.table.index(&record, start + record.offset) {
                Indexed::NotKernel => {}
                Indexed::NoEvent => self.bad_records += 1,
                Indexed::At(key) => self.queue.push(key),
            }
        }
    }

    /// Hands out, in time order, every record older than `cutoff` (all of
    /// them with `u64::MAX`) with its time, keeping the others for later.
    pub fn flush_before(&mut self, cutoff: u64, mut on_event: impl FnMut(u64, Event<'_>)) {
        let (buf, table, kinds) = (&self.buf, &self.table, &self.kinds);
        let bad_records = &mut self.bad_records;
        self.queue.pop_through(cutoff.checked_sub(1), |ready| {
            for &key in ready {
                let record = table.raw_record(buf, key);
                match to_event(&record, kinds[key.attr()], Weight::One, key.time) {
                    Ok(Some(event)) => on_event(key.time, event),
                    Ok(None) => {}
                    Err(BadRecord) => *bad_records += 1,
                }
            }
        });
        // Keep the records not handed out, in a buffer of their own.
        let mut buf = Vec::with_capacity(self.buf.len() / 2);
        for key in self.queue.waiting_mut() {
            let offset = key.offset();
            let head = RecordHead::parse(&self.buf[offset..]).expect("indexed records are whole");
            *key = key.moved_to(buf.len());
            buf.extend_from_slice(&self.buf[offset..offset + head.size]);
        }
        self.buf = buf;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::perf_data::{EventDesc, PerfDataWriter};
    use perf_event_open_sys::bindings as b;

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
        let dir = std::env::temp_dir().join(format!("pfprof-sample-id-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
        let dir = std::env::temp_dir().join(format!("pfprof-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
        let dir = std::env::temp_dir().join(format!("pfprof-perfcompat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
            } => mmaps.push((pid, String::from_utf8_lossy(&path.as_slice()).into_owned())),
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
