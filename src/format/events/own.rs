//! The layout of pfprof's own records, defined once: what its events' attrs
//! ask the kernel to write ([`identified`], [`FAULT_FIELDS`],
//! [`side_band`]) and the writers of records in that layout, for the
//! records pfprof writes itself ([`SampleId::write_trailer`]: processes that
//! already run; [`FaultRecord::write`]: the samples of faults whose chains
//! pfprof unwound or its collector wrote; [`EntryRecord::write`]: the entries
//! its collector paired with them in the kernel).
//! A test reads written records back with the attrs' layout, so the two
//! cannot drift apart.

use perf_event_open_sys::bindings as b;

use crate::format::events::stream::{le_u32, le_u64, RecordHead, HEAD_BYTES};
use crate::format::records as rec;
use crate::sys::PerfEventAttr;

/// What every record of pfprof's events identifies itself by, in a sample
/// and (`sample_id_all`) in the trailer of any other record, in the
/// kernel's order: TID (pid, tid), TIME, CPU (cpu, reserved), IDENTIFIER.
pub const SAMPLE_ID: u64 =
    (b::PERF_SAMPLE_IDENTIFIER | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME | b::PERF_SAMPLE_CPU)
        as u64;

/// What a fault sample has besides [`SAMPLE_ID`] (then its call chain, when
/// recorded): the faulting IP, the data address, and DATA_SRC (the kernel
/// says "not available" for faults; it makes the recording one
/// `perf report --mem-mode` accepts).
pub const FAULT_FIELDS: u64 =
    (b::PERF_SAMPLE_IP | b::PERF_SAMPLE_ADDR | b::PERF_SAMPLE_DATA_SRC) as u64;

/// A fault sample as [`FaultRecord::write`] writes it, call chain
/// included: what the recording says of its fault events when pfprof
/// writes their samples (dwarf mode).
pub const FAULT_SAMPLE: u64 = SAMPLE_ID | FAULT_FIELDS | b::PERF_SAMPLE_CALLCHAIN as u64;

/// Bytes of the `sample_id` trailer [`SAMPLE_ID`] makes.
pub const TRAILER_BYTES: usize = 32;

/// Makes `attr` write [`SAMPLE_ID`] in its samples and, as a trailer, in
/// every other record (its other sample fields are the caller's).
pub fn identified(attr: &mut PerfEventAttr) {
    attr.sample_type = SAMPLE_ID;
    attr.set_sample_id_all(1);
}

/// Whether `attr`'s event carries the side-band records: mmap2 (of data
/// mappings too, with the build-ids when `build_id`), comm (exec's too),
/// fork and exit. pfprof's first event does, no other.
pub fn side_band(attr: &mut PerfEventAttr, on: bool, build_id: bool) {
    let on = u64::from(on);
    attr.set_mmap(on);
    attr.set_mmap2(on);
    attr.set_mmap_data(on);
    attr.set_comm(on);
    attr.set_comm_exec(on);
    attr.set_task(on);
    attr.set_build_id(on & u64::from(build_id));
}

/// The [`SAMPLE_ID`] fields of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleId {
    /// Process.
    pub pid: i32,
    /// Thread.
    pub tid: i32,
    /// Time (ns, the events' clock).
    pub time: u64,
    /// CPU.
    pub cpu: u32,
    /// The event's id.
    pub id: u64,
}

impl SampleId {
    /// Appends the `sample_id` trailer of a record other than a sample.
    pub fn write_trailer(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.tid.to_le_bytes());
        out.extend_from_slice(&self.time.to_le_bytes());
        out.extend_from_slice(&u64::from(self.cpu).to_le_bytes());
        out.extend_from_slice(&self.id.to_le_bytes());
    }

    /// Sets the IDENTIFIER of a whole record other than a sample: last in
    /// its trailer. False (unchanged) when it is too short to have one.
    pub fn set_trailer_id(record: &mut [u8], id: u64) -> bool {
        let Some(at) = record.len().checked_sub(8).filter(|&at| at >= HEAD_BYTES) else {
            return false;
        };
        record[at..].copy_from_slice(&id.to_le_bytes());
        true
    }
}

/// A sample of an event whose sample type is [`SAMPLE_ID`] and RAW (the
/// collector's records), read from its body in place: its
/// [`SampleId`] fields and raw data. The records of a fault storm come this
/// way, so it reads them at their fixed offsets rather than through a
/// general parser (which copies the whole parsed sample out, twice).
pub fn raw_sample(body: &[u8]) -> Option<(SampleId, &[u8])> {
    let size = le_u32(body, 32)? as usize;
    let raw = body.get(36..36usize.checked_add(size)?)?;
    let sample_id = SampleId {
        id: le_u64(body, 0)?,
        pid: le_u32(body, 8)? as i32,
        tid: le_u32(body, 12)? as i32,
        time: le_u64(body, 16)?,
        cpu: le_u32(body, 24)?,
    };
    Some((sample_id, raw))
}

/// The time of a sample of a [`SAMPLE_ID`]-first event without IP (the
/// collector's records, the tracepoints'), read in place.
pub fn sample_time(body: &[u8]) -> Option<u64> {
    le_u64(body, 16)
}

/// A fault sample in the layout of pfprof's fault events (in the
/// recording: with a call chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultRecord {
    /// The header's misc (the CPU mode of the fault).
    pub misc: u16,
    /// Whose fault, when, where.
    pub sample_id: SampleId,
    /// The faulting instruction.
    pub ip: u64,
    /// The faulting data address.
    pub addr: u64,
    /// DATA_SRC, when the event asks for it.
    pub data_src: Option<u64>,
}

impl FaultRecord {
    /// Appends the sample with `chain` as its call chain (None: a recording
    /// without chains, `--call-graph none`): IDENTIFIER, IP, TID, TIME,
    /// ADDR, CPU, CALLCHAIN, then DATA_SRC when it has one.
    pub fn write(&self, chain: Option<&[u64]>, out: &mut Vec<u8>) {
        let s = &self.sample_id;
        let chain_words = chain.map_or(0, |c| 1 + c.len());
        let size = HEAD_BYTES + 6 * 8 + 8 * chain_words + 8 * usize::from(self.data_src.is_some());
        RecordHead {
            record_type: rec::SAMPLE,
            misc: self.misc,
            size,
        }
        .write(out);
        for value in [s.id, self.ip] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&s.pid.to_le_bytes());
        out.extend_from_slice(&s.tid.to_le_bytes());
        for value in [s.time, self.addr, u64::from(s.cpu)] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        if let Some(chain) = chain {
            out.extend_from_slice(&(chain.len() as u64).to_le_bytes());
            for &frame in chain {
                out.extend_from_slice(&frame.to_le_bytes());
            }
        }
        if let Some(data_src) = self.data_src {
            out.extend_from_slice(&data_src.to_le_bytes());
        }
    }
}

/// A fault's entry as the `exceptions:page_fault_user`/`_kernel` tracepoint
/// writes it, in the layout of pfprof's tracepoint events ([`SAMPLE_ID`] and
/// RAW): what the recording holds of an entry the collector paired in the
/// kernel, so that `report` and perf read it as the kernel's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRecord {
    /// Whose fault, when (its entry), where, of which tracepoint event.
    pub sample_id: SampleId,
    /// The tracepoint's id in tracefs (the record's `common_type`).
    pub tracepoint: u16,
    /// The faulting address.
    pub address: u64,
    /// The faulting instruction.
    pub ip: u64,
    /// The x86 error code.
    pub error_code: u64,
}

/// Appends a sample of a tracepoint's event: IDENTIFIER, TID, TIME, CPU,
/// RAW (its size, then the common fields and `fields`, 8-byte words as
/// tracefs's `format` lays them out, padded to 8 bytes as the kernel pads
/// them).
fn write_tracepoint_sample(
    s: &SampleId,
    misc: u16,
    tracepoint: u16,
    fields: &[u64],
    out: &mut Vec<u8>,
) {
    let raw_bytes = 8 + 8 * fields.len();
    let raw_size = (4 + raw_bytes).next_multiple_of(8) - 4;
    RecordHead {
        record_type: rec::SAMPLE,
        misc,
        size: HEAD_BYTES + 4 * 8 + 4 + raw_size,
    }
    .write(out);
    out.extend_from_slice(&s.id.to_le_bytes());
    out.extend_from_slice(&s.pid.to_le_bytes());
    out.extend_from_slice(&s.tid.to_le_bytes());
    for value in [s.time, u64::from(s.cpu)] {
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.extend_from_slice(&(raw_size as u32).to_le_bytes());
    out.extend_from_slice(&tracepoint.to_le_bytes());
    // common_flags, common_preempt_count, common_pid.
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&s.tid.to_le_bytes());
    for value in fields {
        out.extend_from_slice(&value.to_le_bytes());
    }
    out.resize(out.len() + raw_size - raw_bytes, 0);
}

impl EntryRecord {
    /// Appends the sample (see [`write_tracepoint_sample`]).
    pub fn write(&self, out: &mut Vec<u8>) {
        let misc = if self.error_code & 4 != 0 {
            rec::MISC_USER
        } else {
            rec::MISC_KERNEL
        };
        let fields = [self.address, self.ip, self.error_code];
        write_tracepoint_sample(&self.sample_id, misc, self.tracepoint, &fields, out);
    }
}

/// Appends a `PERF_RECORD_LOST_SAMPLES` of event `id`: `lost` samples
/// turned away by a ring that does not say so itself (the collector's),
/// written down at `time`.
pub fn write_lost_samples(id: u64, lost: u64, time: u64, out: &mut Vec<u8>) {
    let start = RecordHead::begin(rec::LOST_SAMPLES, 0, out);
    out.extend_from_slice(&lost.to_le_bytes());
    let sample_id = SampleId {
        pid: 0,
        tid: 0,
        time,
        cpu: 0,
        id,
    };
    sample_id.write_trailer(out);
    RecordHead::end(out, start);
}

/// A `kmem:rss_stat` record that pfprof writes for one the BPF collector
/// made: the address space of the sample's process has `bytes` of kind
/// `member` now, changed by its own task (`curr`) or by another (reclaim).
/// Its `mm_id` (a hash of a kernel address the collector does not have)
/// is 0, which tells it from the tracepoint's own records: theirs name
/// another task's change by that hash only, with the changing task's pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RssStatRecord {
    /// Whose count, when, of which event.
    pub sample_id: SampleId,
    /// The tracepoint's id in tracefs (the record's `common_type`).
    pub tracepoint: u16,
    /// `MM_FILEPAGES` and so on.
    pub member: u32,
    /// The count, in bytes.
    pub bytes: u64,
    /// The process's own task made the change.
    pub curr: bool,
}

impl RssStatRecord {
    /// Appends the sample: `mm_id` (0) and `curr`, `member`, `size`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let fields = [
            u64::from(self.curr) << 32,
            u64::from(self.member),
            self.bytes,
        ];
        write_tracepoint_sample(
            &self.sample_id,
            rec::MISC_KERNEL,
            self.tracepoint,
            &fields,
            out,
        );
    }
}

/// A `syscalls:sys_enter_*` or `sys_exit_*` record that pfprof writes for
/// one the BPF collector made: `__syscall_nr`, then the arguments (an
/// entry's, as many as the tracepoint has) or the result (an exit's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SyscallTracepointRecord<'a> {
    /// Whose call, when, of which event.
    pub sample_id: SampleId,
    /// The tracepoint's id in tracefs (the record's `common_type`).
    pub tracepoint: u16,
    /// The syscall's number.
    pub nr: u32,
    /// Its arguments, or its result.
    pub args: &'a [u64],
}

impl SyscallTracepointRecord<'_> {
    /// Appends the sample (see [`write_tracepoint_sample`]).
    pub fn write(&self, out: &mut Vec<u8>) {
        let mut fields = [0u64; 6];
        fields[0] = u64::from(self.nr);
        let n = self.args.len().min(5);
        fields[1..=n].copy_from_slice(&self.args[..n]);
        let fields = &fields[..=n];
        write_tracepoint_sample(
            &self.sample_id,
            rec::MISC_USER,
            self.tracepoint,
            fields,
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use byteorder::LittleEndian;
    use linux_perf_data::linux_perf_event_reader::{
        get_record_identifier, CommonData, Endianness, EventRecord, RawData, RawEventRecord,
        RecordParseInfo, RecordType,
    };

    /// The parse info of an attr as `identified` makes it, with `more`
    /// sample fields.
    fn layout(more: u64) -> RecordParseInfo {
        let mut attr = crate::sys::new_attr();
        identified(&mut attr);
        attr.sample_type |= more;
        let bytes = crate::sys::attr_bytes(&attr);
        let (attr, _) = linux_perf_data::linux_perf_event_reader::PerfEventAttr::parse::<
            _,
            LittleEndian,
        >(bytes)
        .unwrap();
        RecordParseInfo::new(&attr, Endianness::LittleEndian)
    }

    const ID: SampleId = SampleId {
        pid: 7,
        tid: 8,
        time: 5_000,
        cpu: 3,
        id: 42,
    };

    /// A fault sample written reads back, field by field, with the layout
    /// of the fault events' attr (chain included; DATA_SRC ends it).
    #[test]
    fn fault_samples_read_back_with_the_attrs_layout() {
        let info = layout(FAULT_SAMPLE);
        let sample = FaultRecord {
            misc: rec::MISC_USER,
            sample_id: ID,
            ip: 0x401000,
            addr: 0xdead000,
            data_src: Some(0x2910_0142),
        };
        let mut out = Vec::new();
        sample.write(Some(&[rec::CONTEXT_USER, 0x401000, 0x402000]), &mut out);
        let head = RecordHead::parse(&out).unwrap();
        assert_eq!((head.record_type, head.size), (rec::SAMPLE, out.len()));
        let raw = RawEventRecord::new(
            RecordType(rec::SAMPLE),
            head.misc,
            RawData::Single(&out[8..]),
            info,
        );
        let Ok(EventRecord::Sample(s)) = raw.parse() else {
            panic!("not a sample");
        };
        assert_eq!(
            (s.pid, s.tid, s.timestamp, s.cpu),
            (Some(7), Some(8), Some(5_000), Some(3))
        );
        assert_eq!(
            (s.ip, s.addr, s.id),
            (Some(0x401000), Some(0xdead000), Some(42))
        );
        let chain = s.callchain.unwrap();
        assert_eq!((chain.len(), chain.get(2)), (3, Some(0x402000)));
        assert_eq!(out[out.len() - 8..], 0x2910_0142u64.to_le_bytes());
    }

    /// A sample of the collector's (SAMPLE_ID and RAW) is read
    /// in place as the general parser reads it.
    #[test]
    fn raw_samples_read_in_place() {
        let mut body = Vec::new();
        body.extend_from_slice(&ID.id.to_le_bytes());
        body.extend_from_slice(&ID.pid.to_le_bytes());
        body.extend_from_slice(&ID.tid.to_le_bytes());
        body.extend_from_slice(&ID.time.to_le_bytes());
        body.extend_from_slice(&u64::from(ID.cpu).to_le_bytes());
        body.extend_from_slice(&12u32.to_le_bytes());
        body.extend_from_slice(b"twelve bytes");
        let (sample_id, raw) = raw_sample(&body).unwrap();
        assert_eq!((sample_id, raw), (ID, &b"twelve bytes"[..]));
        assert_eq!(sample_time(&body), Some(ID.time));
        let info = layout(b::PERF_SAMPLE_RAW as u64);
        let parsed = RawEventRecord::new(RecordType(rec::SAMPLE), 0, RawData::Single(&body), info);
        let Ok(EventRecord::Sample(s)) = parsed.parse() else {
            panic!("not a sample");
        };
        assert_eq!(s.raw.unwrap().as_slice().as_ref(), b"twelve bytes");
        assert!(raw_sample(&body[..body.len() - 1]).is_none());
    }

    /// A sample written without a chain reads back with the layout of an
    /// attr without CALLCHAIN.
    #[test]
    fn fault_samples_without_chains() {
        let info = layout(SAMPLE_ID | FAULT_FIELDS);
        let sample = FaultRecord {
            misc: rec::MISC_USER,
            sample_id: ID,
            ip: 0x401000,
            addr: 0xdead000,
            data_src: Some(1),
        };
        let mut out = Vec::new();
        sample.write(None, &mut out);
        let raw = RawEventRecord::new(RecordType(rec::SAMPLE), 0, RawData::Single(&out[8..]), info);
        let Ok(EventRecord::Sample(s)) = raw.parse() else {
            panic!("not a sample");
        };
        assert_eq!((s.addr, s.callchain.is_none()), (Some(0xdead000), true));
        assert_eq!(out.len(), 8 + 7 * 8);
    }

    /// The raw data of a tracepoint's sample in `out` (whole, 8-byte
    /// aligned), as perf's reader parses it with the events' layout.
    fn raw_data_of(out: &[u8]) -> Vec<u8> {
        let head = RecordHead::parse(out).unwrap();
        assert_eq!((head.size, out.len() % 8), (out.len(), 0));
        let info = layout(b::PERF_SAMPLE_RAW as u64);
        let raw = RawEventRecord::new(RecordType(rec::SAMPLE), 0, RawData::Single(&out[8..]), info);
        let Ok(EventRecord::Sample(s)) = raw.parse() else {
            panic!("not a sample");
        };
        assert_eq!((s.pid, s.tid, s.timestamp), (Some(7), Some(8), Some(5_000)));
        s.raw.unwrap().as_slice().into_owned()
    }

    /// The 8-byte word at `at` of raw data.
    fn word(data: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(data[at..at + 8].try_into().unwrap())
    }

    /// An entry written reads back as the tracepoint's sample: its raw data
    /// holds address, ip and error code where tracefs's format says.
    #[test]
    fn entries_read_back_as_the_tracepoints() {
        let entry = EntryRecord {
            sample_id: ID,
            tracepoint: 190,
            address: 0x7f00_1000,
            ip: 0x401000,
            error_code: 6,
        };
        let mut out = Vec::new();
        entry.write(&mut out);
        let data = raw_data_of(&out);
        let fields = (word(&data, 8), word(&data, 16), word(&data, 24));
        assert_eq!(fields, (0x7f00_1000, 0x401000, 6));
        assert_eq!(u16::from_le_bytes([data[0], data[1]]), 190);
    }

    /// An `rss_stat` record written reads back as the tracepoint's, where
    /// the decoder reads it: `mm_id` 0, `curr`, the member, the bytes.
    #[test]
    fn rss_stat_records_read_back_as_the_tracepoints() {
        let record = RssStatRecord {
            sample_id: ID,
            tracepoint: 646,
            member: 3,
            bytes: 40_960,
            curr: true,
        };
        let mut out = Vec::new();
        record.write(&mut out);
        let data = raw_data_of(&out);
        let fields = (word(&data, 8), word(&data, 16), word(&data, 24));
        assert_eq!(fields, (1 << 32, 3, 40_960));
        assert_eq!(u16::from_le_bytes([data[0], data[1]]), 646);
        let mut out = Vec::new();
        RssStatRecord {
            curr: false,
            ..record
        }
        .write(&mut out);
        assert_eq!(word(&raw_data_of(&out), 8), 0);
    }

    /// A syscall's record written reads back where the decoder reads it:
    /// the number at 8, the arguments from 16.
    #[test]
    fn syscall_records_read_back_as_the_tracepoints() {
        let record = SyscallTracepointRecord {
            sample_id: ID,
            tracepoint: 700,
            nr: 11,
            args: &[0x7f00_0000, 8192],
        };
        let mut out = Vec::new();
        record.write(&mut out);
        let data = raw_data_of(&out);
        let fields = (word(&data, 8), word(&data, 16), word(&data, 24));
        assert_eq!(fields, (11, 0x7f00_0000, 8192));
        assert_eq!(data.len(), 36);
    }

    /// A lost-samples record: the count, then the trailer with the event's
    /// id and the time it was written down at.
    #[test]
    fn lost_samples_read_back() {
        let mut out = Vec::new();
        write_lost_samples(42, 17, 5_000, &mut out);
        let head = RecordHead::parse(&out).unwrap();
        assert_eq!(
            (head.size, head.record_type),
            (8 + 8 + TRAILER_BYTES, rec::LOST_SAMPLES)
        );
        assert_eq!(word(&out, 8), 17);
        let common = CommonData::parse_nonsample(RawData::Single(&out[8..]), &layout(0)).unwrap();
        assert_eq!((common.id, common.timestamp), (Some(42), Some(5_000)));
    }

    /// The trailer written after a record's body reads back as the
    /// `sample_id` of the events' layout, and its IDENTIFIER is the one
    /// `set_trailer_id` changes.
    #[test]
    fn trailers_read_back_with_the_attrs_layout() {
        let info = layout(0);
        let mut record = Vec::new();
        let start = RecordHead::begin(rec::EXIT, 0, &mut record);
        record.extend_from_slice(&[0u8; 24]);
        ID.write_trailer(&mut record);
        RecordHead::end(&mut record, start);
        assert_eq!(record.len(), 8 + 24 + TRAILER_BYTES);
        let body = RawData::Single(&record[8..]);
        let common = CommonData::parse_nonsample(body, &info).unwrap();
        assert_eq!(
            (
                common.pid,
                common.tid,
                common.timestamp,
                common.cpu,
                common.id
            ),
            (Some(7), Some(8), Some(5_000), Some(3), Some(42))
        );
        assert!(SampleId::set_trailer_id(&mut record, 9));
        let body = RawData::Single(&record[8..]);
        assert_eq!(
            get_record_identifier::<LittleEndian>(RecordType(rec::EXIT), body, true),
            Some(9)
        );
        assert!(!SampleId::set_trailer_id(&mut [0; 8], 9));
    }

    /// The side-band bits go on and off together; build-ids only with them.
    #[test]
    fn side_band_on_and_off() {
        let mut attr = crate::sys::new_attr();
        side_band(&mut attr, true, true);
        let bits = |a: &PerfEventAttr| {
            [
                a.mmap(),
                a.mmap2(),
                a.mmap_data(),
                a.comm(),
                a.comm_exec(),
                a.task(),
                a.build_id(),
            ]
        };
        assert_eq!(bits(&attr), [1; 7]);
        side_band(&mut attr, false, true);
        assert_eq!(bits(&attr), [0; 7]);
        side_band(&mut attr, true, false);
        assert_eq!(bits(&attr), [1, 1, 1, 1, 1, 1, 0]);
    }
}
