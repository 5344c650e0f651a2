//! The layout of pfprof's own records, defined once: what its events' attrs
//! ask the kernel to write ([`identified`], [`FAULT_FIELDS`],
//! [`side_band`]) and the writers of records in that layout, for the
//! records pfprof writes itself ([`SampleId::write_trailer`]: processes that
//! already run; [`FaultRecord::write`]: the unwound samples of dwarf mode).
//! A test reads written records back with the attrs' layout, so the two
//! cannot drift apart.

use perf_event_open_sys::bindings as b;

use crate::format::events::stream::{RecordHead, HEAD_BYTES};
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
    /// Appends the sample with `chain` as its call chain: IDENTIFIER, IP,
    /// TID, TIME, ADDR, CPU, CALLCHAIN, then DATA_SRC when it has one.
    pub fn write(&self, chain: &[u64], out: &mut Vec<u8>) {
        let s = &self.sample_id;
        let size = HEAD_BYTES + 7 * 8 + 8 * chain.len() + 8 * usize::from(self.data_src.is_some());
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
        for value in [s.time, self.addr, u64::from(s.cpu), chain.len() as u64] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        for &frame in chain {
            out.extend_from_slice(&frame.to_le_bytes());
        }
        if let Some(data_src) = self.data_src {
            out.extend_from_slice(&data_src.to_le_bytes());
        }
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
        sample.write(&[rec::CONTEXT_USER, 0x401000, 0x402000], &mut out);
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
