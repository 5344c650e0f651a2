//! Bytes → typed events: replays a perf.data recording (pfprof's own, through
//! `linux-perf-data`, merged across CPUs by time) and hands each record to a
//! callback as a borrowed [`Event`]. Nothing here allocates per sample.
//!
//! A record that does not parse is counted in [`DecodeStats`], never fatal.

use std::io::Cursor;
use std::path::Path;

use byteorder::LittleEndian;

use linux_perf_data::linux_perf_event_reader::{
    get_record_identifier, get_record_timestamp, AttrFlags, CpuMode, Endianness, EventRecord,
    Mmap2FileId, PerfEventType, RawData, RawDataU64, RawEventRecord, RecordParseInfo, RecordType,
    SoftwareCounterType,
};
use linux_perf_data::{Feature, PerfFileReader};
use rustc_hash::FxHashMap;
use thiserror::Error;

use crate::perf_data::{repair, HeaderFacts, RecordingMeta, PFPROF_META_FEATURE};
use crate::record::sys::MappedFile;

/// Why a recording cannot be read.
#[derive(Debug, Error)]
pub enum DecodeError {
    /// The file cannot be opened.
    #[error("cannot open {path}: {source}")]
    Open {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The header or attributes do not parse.
    #[error("{path} is not a readable perf.data recording: {source}")]
    Header {
        /// The file.
        path: String,
        /// The cause.
        source: linux_perf_data::Error,
    },
    /// The data section ends early or is corrupt.
    #[error("{path} is truncated or corrupt after {records} records ({source}); rerun with --partial to analyse the intact part")]
    Truncated {
        /// The file.
        path: String,
        /// Records read before the damage.
        records: u64,
        /// The cause.
        source: linux_perf_data::Error,
    },
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
    pub callchain: Option<RawDataU64<'a>>,
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
        /// Process.
        pid: i32,
        /// Start address.
        avma: u64,
        /// Length in bytes.
        len: u64,
        /// Offset of the mapping in its file.
        file_offset: u64,
        /// PROT_* bits (mmap2 only).
        prot: u32,
        /// MAP_* bits (mmap2 only).
        flags: u32,
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
    /// Thread exit.
    Exit,
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
    /// Kernel records in the recording (to size buffers up front).
    pub records: usize,
}

fn kind_of(attr: &linux_perf_data::AttributeDescription) -> EventKind {
    kind_from(&attr.attr.type_, attr.name())
}

fn kind_from(type_: &PerfEventType, name: Option<&str>) -> EventKind {
    match (type_, name) {
        (PerfEventType::Software(SoftwareCounterType::PageFaultsMin), _) => EventKind::Minor,
        (PerfEventType::Software(SoftwareCounterType::PageFaultsMaj), _) => EventKind::Major,
        (PerfEventType::Tracepoint(_), Some(name)) if name.ends_with("page_fault_user") => {
            EventKind::EntryUser
        }
        (PerfEventType::Tracepoint(_), Some(name)) if name.ends_with("page_fault_kernel") => {
            EventKind::EntryKernel
        }
        (_, Some(crate::record::MAIN_ENTRY_EVENT)) => EventKind::MainEntry,
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
/// error unless `partial` asks for the same repair.
pub fn replay(
    path: &Path,
    partial: bool,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<(Header, DecodeStats), DecodeError> {
    let display = path.display().to_string();
    let open_error = |source| DecodeError::Open {
        path: display.clone(),
        source,
    };
    let file = std::fs::File::open(path).map_err(open_error)?;
    let bytes = MappedFile::new(&file).map_err(open_error)?;
    let invalid = |what: String| {
        linux_perf_data::Error::IoError(std::io::Error::new(std::io::ErrorKind::InvalidData, what))
    };
    let facts = HeaderFacts::parse(&bytes).ok_or_else(|| DecodeError::Header {
        path: display.clone(),
        source: invalid("not a perf.data (PERFILE2) file, or its header is cut".into()),
    })?;
    let data_end = facts.data.0.saturating_add(facts.data.1);
    let complete = facts.finished() && data_end <= bytes.len() as u64;
    if !complete && facts.finished() && !partial {
        return Err(DecodeError::Truncated {
            path: display,
            records: 0,
            source: invalid(format!(
                "the data section ends at byte {data_end} but the file has {} bytes",
                bytes.len()
            )),
        });
    }
    let repaired = |bytes: &[u8]| -> Result<(Vec<u8>, String), DecodeError> {
        let (image, kept) = repair(bytes).ok_or_else(|| DecodeError::Header {
            path: display.clone(),
            source: invalid("its attributes are damaged".into()),
        })?;
        let why = if facts.finished() {
            format!("the recording is cut short; read its first {kept} bytes of complete records")
        } else {
            format!("the recording was not finished (pfprof was killed?); read its {kept} bytes of complete records")
        };
        Ok((image, why))
    };
    if complete {
        match replay_bytes(&bytes, &display, partial, None, &mut on_event) {
            // Only the feature sections are cut: --partial repairs that too.
            Err(DecodeError::Header { .. }) if partial => {}
            result => return result,
        }
    }
    let (image, why) = repaired(&bytes)?;
    drop(bytes);
    replay_bytes(&image, &display, partial, Some(why), &mut on_event)
}

/// Record types from 64 on are perf's own (FINISHED_ROUND, HEADER_*).
const USER_RECORD_TYPE_START: u32 = 64;

fn replay_bytes(
    bytes: &[u8],
    display: &str,
    partial: bool,
    repaired: Option<String>,
    mut on_event: impl FnMut(Event<'_>),
) -> Result<(Header, DecodeStats), DecodeError> {
    let display = display.to_string();
    let reader =
        PerfFileReader::parse_file(Cursor::new(bytes)).map_err(|source| DecodeError::Header {
            path: display.clone(),
            source,
        })?;
    let perf_file = reader.perf_file;
    let attrs = perf_file.event_attributes();
    let kinds: Vec<EventKind> = attrs.iter().map(kind_of).collect();
    let parse_infos: Vec<RecordParseInfo> = attrs
        .iter()
        .map(|a| RecordParseInfo::new(&a.attr, Endianness::LittleEndian))
        .collect();
    let mut attr_of_id: FxHashMap<u64, usize> = FxHashMap::default();
    for (index, attr) in attrs.iter().enumerate() {
        for id in attr.ids() {
            attr_of_id.insert(*id, index);
        }
    }
    let sample_id_all = attrs
        .first()
        .is_some_and(|a| a.attr.flags.contains(AttrFlags::SAMPLE_ID_ALL));
    let meta = perf_file
        .feature_section_data(Feature(PFPROF_META_FEATURE))
        .and_then(|bytes| serde_json::from_slice::<RecordingMeta>(bytes).ok());
    let cmdline = perf_file
        .cmdline()
        .ok()
        .flatten()
        .map(|v| v.iter().map(|s| s.to_string()).collect());
    let header = Header {
        meta,
        kinds: kinds.clone(),
        cmdline,
        records: 0,
    };
    let mut stats = DecodeStats {
        truncated: repaired,
        ..DecodeStats::default()
    };

    // Index every kernel record by time. The attr index rides in the top
    // 16 bits of the offset, so one sort of (time, key) orders everything,
    // ties in file order.
    let facts = HeaderFacts::parse(bytes).expect("parsed above");
    let data_start = facts.data.0 as usize;
    let data = bytes
        .get(data_start..data_start.saturating_add(facts.data.1 as usize))
        .unwrap_or_default();
    let mut index: Vec<(u64, u64)> = Vec::with_capacity(data.len() / 96);
    let mut offset = 0usize;
    while offset < data.len() {
        let Some(head) = data.get(offset..offset + 8) else {
            break;
        };
        let record_type = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let size = u16::from_le_bytes([head[6], head[7]]) as usize;
        if size < 8 || offset + size > data.len() {
            let why = format!("record at data offset {offset} has a bad size ({size})");
            if partial {
                stats.truncated = Some(format!("after {} records: {why}", index.len()));
                break;
            }
            return Err(DecodeError::Truncated {
                path: display,
                records: index.len() as u64,
                source: linux_perf_data::Error::IoError(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    why,
                )),
            });
        }
        let body = RawData::Single(&data[offset + 8..offset + size]);
        let this = offset;
        offset += size;
        if record_type >= USER_RECORD_TYPE_START {
            continue;
        }
        // Files without ids (a single event, no EVENT_DESC) map everything
        // to their only attr.
        let attr_index = if attr_of_id.is_empty() {
            0
        } else {
            match get_record_identifier::<LittleEndian>(
                RecordType(record_type),
                body,
                sample_id_all,
            )
            .and_then(|id| attr_of_id.get(&id))
            {
                Some(&index) => index,
                None => {
                    stats.bad_records += 1;
                    continue;
                }
            }
        };
        let time = get_record_timestamp::<LittleEndian>(
            RecordType(record_type),
            body,
            &parse_infos[attr_index],
        )
        .unwrap_or(0);
        index.push((time, this as u64 | (attr_index as u64) << 48));
    }
    index.sort_unstable();
    let header = Header {
        records: index.len(),
        ..header
    };
    on_event(Event::Begin(&header));
    stats.first_time = index.first().map(|r| r.0);
    stats.last_time = index.last().map(|r| r.0);

    for &(time, key) in &index {
        let offset = (key & ((1 << 48) - 1)) as usize;
        let attr_index = (key >> 48) as usize;
        let head = &data[offset..offset + 8];
        let record_type = RecordType(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
        let misc = u16::from_le_bytes([head[4], head[5]]);
        let size = u16::from_le_bytes([head[6], head[7]]) as usize;
        let record = RawEventRecord::new(
            record_type,
            misc,
            RawData::Single(&data[offset + 8..offset + size]),
            parse_infos[attr_index],
        );
        stats.records += 1;
        match to_event(&record, kinds[attr_index], time) {
            Ok(Some(event)) => on_event(event),
            Ok(None) => {}
            Err(BadRecord) => stats.bad_records += 1,
        }
    }
    Ok((header, stats))
}

/// A record that does not parse.
pub struct BadRecord;

/// One kernel record as an [`Event`]: `Ok(None)` for records pfprof does not
/// use. Shared by replay and the live stream.
fn to_event<'a>(
    record: &RawEventRecord<'a>,
    kind: EventKind,
    time: u64,
) -> Result<Option<Event<'a>>, BadRecord> {
    let Ok(parsed) = record.parse() else {
        return Err(BadRecord);
    };
    let event = match parsed {
        EventRecord::Sample(s) => match kind {
            EventKind::Minor | EventKind::Major => {
                let (Some(pid), Some(tid), Some(addr)) = (s.pid, s.tid, s.addr) else {
                    return Err(BadRecord);
                };
                Event::Fault(FaultSample {
                    major: kind == EventKind::Major,
                    pid,
                    tid,
                    time,
                    addr_avma: addr,
                    kernel_mode: s.cpu_mode == CpuMode::Kernel,
                    callchain: s.callchain,
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
        },
        EventRecord::Mmap2(m) => Event::Mmap {
            pid: m.pid,
            avma: m.address,
            len: m.length,
            file_offset: m.page_offset,
            prot: m.protection,
            flags: m.flags,
            path: m.path,
            build_id: match m.file_id {
                Mmap2FileId::BuildId(id) => Some(id),
                Mmap2FileId::InodeAndVersion(_) => None,
            },
        },
        EventRecord::Mmap(m) => Event::Mmap {
            pid: m.pid,
            avma: m.address,
            len: m.length,
            file_offset: m.page_offset,
            prot: libc::PROT_READ as u32
                | if m.is_executable {
                    libc::PROT_EXEC as u32
                } else {
                    0
                },
            flags: libc::MAP_PRIVATE as u32,
            path: m.path,
            build_id: None,
        },
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
        EventRecord::Exit(_) => Event::Exit,
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

/// Decodes records while they are being recorded (`--stream`): whole records
/// are collected from the drained ring-buffer bytes (a record may span the
/// end of one drained slice and the start of the next), and handed out in
/// time order once no CPU can still deliver an older one.
pub struct LiveDecoder {
    parse_infos: Vec<RecordParseInfo>,
    kinds: Vec<EventKind>,
    attr_of_id: FxHashMap<u64, usize>,
    buf: Vec<u8>,
    /// Start of bytes not yet cut into records.
    scanned: usize,
    /// (time, offset | attr << 48) of complete records in `buf`.
    index: Vec<(u64, u64)>,
    /// Records that did not parse.
    pub bad_records: u64,
}

impl LiveDecoder {
    /// From the recording's events (raw attrs, names, ids).
    pub fn new(events: &[crate::perf_data::EventDesc]) -> Option<LiveDecoder> {
        let mut parse_infos = Vec::new();
        let mut kinds = Vec::new();
        let mut attr_of_id = FxHashMap::default();
        for (index, event) in events.iter().enumerate() {
            let (attr, _) = linux_perf_data::linux_perf_event_reader::PerfEventAttr::parse::<
                _,
                LittleEndian,
            >(&event.attr[..])
            .ok()?;
            kinds.push(kind_from(&attr.type_, Some(&event.name)));
            parse_infos.push(RecordParseInfo::new(&attr, Endianness::LittleEndian));
            for id in &event.ids {
                attr_of_id.insert(*id, index);
            }
        }
        Some(LiveDecoder {
            parse_infos,
            kinds,
            attr_of_id,
            buf: Vec::new(),
            scanned: 0,
            index: Vec::new(),
            bad_records: 0,
        })
    }

    /// Appends drained bytes and indexes the records they complete.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        while let Some(head) = self.buf.get(self.scanned..self.scanned + 8) {
            let record_type = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            let size = u16::from_le_bytes([head[6], head[7]]) as usize;
            if size < 8 {
                // Cannot happen with kernel records; drop the rest rather than loop.
                self.bad_records += 1;
                self.buf.truncate(self.scanned);
                break;
            }
            if self.scanned + size > self.buf.len() {
                break;
            }
            let offset = self.scanned;
            self.scanned += size;
            if record_type >= USER_RECORD_TYPE_START {
                continue;
            }
            let body = RawData::Single(&self.buf[offset + 8..offset + size]);
            let Some(&attr) =
                get_record_identifier::<LittleEndian>(RecordType(record_type), body, true)
                    .and_then(|id| self.attr_of_id.get(&id))
            else {
                self.bad_records += 1;
                continue;
            };
            let time = get_record_timestamp::<LittleEndian>(
                RecordType(record_type),
                body,
                &self.parse_infos[attr],
            )
            .unwrap_or(0);
            self.index.push((time, offset as u64 | (attr as u64) << 48));
        }
    }

    /// Hands out, in time order, every record older than `cutoff` (all of
    /// them with `u64::MAX`), keeping the others for later.
    pub fn flush_before(&mut self, cutoff: u64, mut on_event: impl FnMut(Event<'_>)) {
        self.index.sort_unstable();
        let ready = self.index.partition_point(|&(time, _)| time < cutoff);
        for &(time, key) in &self.index[..ready] {
            let offset = (key & ((1 << 48) - 1)) as usize;
            let attr = (key >> 48) as usize;
            let head = &self.buf[offset..offset + 8];
            let record_type = RecordType(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
            let misc = u16::from_le_bytes([head[4], head[5]]);
            let size = u16::from_le_bytes([head[6], head[7]]) as usize;
            let data = RawData::Single(&self.buf[offset + 8..offset + size]);
            let record = RawEventRecord::new(record_type, misc, data, self.parse_infos[attr]);
            match to_event(&record, self.kinds[attr], time) {
                Ok(Some(event)) => on_event(event),
                Ok(None) => {}
                Err(BadRecord) => self.bad_records += 1,
            }
        }
        // Keep the records not handed out, and the incomplete tail.
        let mut buf = Vec::with_capacity(self.buf.len() / 2);
        let mut index = Vec::with_capacity(self.index.len() - ready);
        for &(time, key) in &self.index[ready..] {
            let offset = (key & ((1 << 48) - 1)) as usize;
            let size = u16::from_le_bytes([self.buf[offset + 6], self.buf[offset + 7]]) as usize;
            index.push((time, buf.len() as u64 | (key & !((1 << 48) - 1))));
            buf.extend_from_slice(&self.buf[offset..offset + size]);
        }
        let tail_start = buf.len();
        buf.extend_from_slice(&self.buf[self.scanned..]);
        (self.buf, self.index, self.scanned) = (buf, index, tail_start);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::perf_data::{EventDesc, PerfDataWriter};
    use perf_event_open_sys::bindings as b;

    pub(crate) fn minor_faults_attr() -> Vec<u8> {
        let mut attr = crate::record::sys::new_attr();
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
        crate::record::sys::attr_bytes(&attr).to_vec()
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

    /// Records of different CPUs, each in order but appended per CPU and per
    /// round, come back merged in time order (ties in file order); a record
    /// with an unknown id is counted as bad, not fatal.
    #[test]
    fn merges_cpus_by_time() {
        let dir = std::env::temp_dir().join(format!("pfprof-merge-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.data");
        let events = vec![EventDesc {
            attr: minor_faults_attr(),
            name: "minor-faults".into(),
            ids: vec![100, 101],
        }];
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
        assert_eq!(header.kinds, [EventKind::Minor]);
        assert_eq!(stats.bad_records, 1, "the record with an unknown id");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
