//! One perf-record layer, what every reader and writer of records needs
//! once: records as bytes ([`stream`]: the header, whole records out of a
//! buffer or a ring's two slices), the table of a recording's events (each
//! one's attr and layout, the event of each record, its time), records in
//! time order ([`order`]), the mapping records ([`mapping`]) and the layout
//! of pfprof's own records ([`own`]). Replay, the live stream, the DWARF
//! rewriter and the recorder's drain all read records this way.

pub mod mapping;
pub mod order;
pub mod own;
pub mod sample;
pub mod stream;

use byteorder::LittleEndian;
use linux_perf_data::linux_perf_event_reader::{
    get_record_id, get_record_identifier, get_record_timestamp, AttrFlags, Endianness, EventRecord,
    PerfEventAttr, RawData, RawEventRecord, RecordIdParseInfo, RecordParseInfo, RecordType,
    SampleFormat,
};
use rustc_hash::FxHashMap;

pub use mapping::{put_build_id, FileId, Mapping};
pub use order::{TimeOrdered, TimeQueue};
pub use sample::Sample;
pub use stream::{le_u16, le_u32, le_u64, le_u64s, records, Record, RecordHead};

use crate::format::records as rec;

/// A recording's events, parsed once: index `i` is the `i`th event.
pub struct EventTable {
    /// Each event's attr.
    pub attrs: Vec<PerfEventAttr>,
    /// Each event's record layout.
    pub parse_infos: Vec<RecordParseInfo>,
    /// The event of each sample id.
    attr_of_id: FxHashMap<u64, usize>,
    /// Where a record's id is.
    id_lookup: IdLookup,
}

/// Where a record's event id is.
#[derive(Debug, Clone, Copy)]
enum IdLookup {
    /// `PERF_SAMPLE_IDENTIFIER`: first in a sample, last in the other
    /// records (when `sample_id_all`, the flag). pfprof's recordings, and
    /// perf's when its events differ in sample type.
    Identifier(bool),
    /// `PERF_SAMPLE_ID` only, at a place that depends on the sample type:
    /// perf's recordings whose events share one sample type.
    Id(RecordIdParseInfo),
}

/// Where a record goes in time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Indexed {
    /// perf's own records (FINISHED_ROUND, HEADER_*): not the kernel's.
    NotKernel,
    /// Its id names no event of the recording (a bad record).
    NoEvent,
    /// Its place.
    At(TimeOrdered),
}

impl EventTable {
    /// From each event's raw attr bytes and ids; on an attr that does not
    /// parse, its index and why.
    pub fn new<'a>(
        events: impl IntoIterator<Item = (&'a [u8], &'a [u64])>,
    ) -> Result<EventTable, (usize, std::io::Error)> {
        let mut attrs = Vec::new();
        let mut parse_infos = Vec::new();
        let mut attr_of_id = FxHashMap::default();
        for (index, (bytes, ids)) in events.into_iter().enumerate() {
            let (attr, _) =
                PerfEventAttr::parse::<_, LittleEndian>(bytes).map_err(|e| (index, e))?;
            parse_infos.push(RecordParseInfo::new(&attr, Endianness::LittleEndian));
            attrs.push(attr);
            for &id in ids {
                attr_of_id.insert(id, index);
            }
        }
        let id_lookup = id_lookup(&attrs, &parse_infos);
        Ok(EventTable {
            attrs,
            parse_infos,
            attr_of_id,
            id_lookup,
        })
    }

    /// The event a sample id belongs to.
    pub fn attr_of(&self, id: u64) -> Option<usize> {
        self.attr_of_id.get(&id).copied()
    }

    /// The id a record (its type, its body) carries, where its events put
    /// it.
    pub fn record_id(&self, record_type: u32, body: &[u8]) -> Option<u64> {
        let (record_type, body) = (RecordType(record_type), RawData::Single(body));
        match self.id_lookup {
            IdLookup::Identifier(sample_id_all) => {
                get_record_identifier::<LittleEndian>(record_type, body, sample_id_all)
            }
            IdLookup::Id(info) => get_record_id::<LittleEndian>(record_type, body, &info),
        }
    }

    /// The event of a record; None for an id of no event. A file without
    /// ids, or of one event, maps everything to its first attr, as perf
    /// does: with one event, records need not carry an identifier (perf's
    /// own files have none).
    pub fn attr_of_record(&self, record_type: u32, body: &[u8]) -> Option<usize> {
        if self.attr_of_id.is_empty() || self.attrs.len() == 1 {
            return Some(0);
        }
        match self.record_id(record_type, body)? {
            // perf synthesizes some records (the kernel's map, the
            // command's comm before exec) with a zeroed id, and reads them
            // with its first event, as here.
            0 => Some(0),
            id => self.attr_of(id),
        }
    }

    /// A record's time stamp, read with its event's layout.
    pub fn time(&self, record_type: u32, body: &[u8], attr: usize) -> Option<u64> {
        get_record_timestamp::<LittleEndian>(
            RecordType(record_type),
            RawData::Single(body),
            &self.parse_infos[attr],
        )
    }

    /// Where `record`, at `offset` of its buffer, goes in time order (time
    /// 0 without a time stamp: first).
    pub fn index(&self, record: &Record<'_>, offset: usize) -> Indexed {
        let (record_type, body) = (record.head.record_type, record.body());
        if record_type >= rec::USER_TYPE_START {
            return Indexed::NotKernel;
        }
        let Some(attr) = self.attr_of_record(record_type, body) else {
            return Indexed::NoEvent;
        };
        let time = self.time(record_type, body, attr).unwrap_or(0);
        Indexed::At(TimeOrdered::new(time, offset, attr))
    }

    /// A whole record (header first) of event `attr`, to parse with its
    /// event's layout.
    pub fn raw<'a>(&self, record: &'a [u8], attr: usize) -> RawEventRecord<'a> {
        let head = RecordHead::parse(record).expect("a whole record");
        RawEventRecord::new(
            RecordType(head.record_type),
            head.misc,
            RawData::Single(&record[stream::HEAD_BYTES..head.size]),
            self.parse_infos[attr],
        )
    }

    /// The record `key` places in `data` (a buffer it was indexed in), to
    /// parse with its event's layout.
    pub fn raw_record<'a>(&self, data: &'a [u8], key: TimeOrdered) -> RawEventRecord<'a> {
        self.raw(&data[key.offset()..], key.attr())
    }
}

/// How to find the event of a record: by the identifier when every event
/// has one, else by `PERF_SAMPLE_ID` when every event puts it at the same
/// place (perf leaves IDENTIFIER out exactly then).
fn id_lookup(attrs: &[PerfEventAttr], parse_infos: &[RecordParseInfo]) -> IdLookup {
    let sample_id_all = attrs
        .first()
        .is_some_and(|a| a.flags.contains(AttrFlags::SAMPLE_ID_ALL));
    let all_identifier = attrs
        .iter()
        .all(|a| a.sample_format.contains(SampleFormat::IDENTIFIER));
    match parse_infos.first() {
        Some(first)
            if !all_identifier
                && parse_infos
                    .iter()
                    .all(|p| p.id_parse_info == first.id_parse_info) =>
        {
            IdLookup::Id(first.id_parse_info)
        }
        _ => IdLookup::Identifier(sample_id_all),
    }
}

/// A record parsed with its event's layout; None when it does not parse.
/// Mapping records are read by [`Mapping::parse`] instead: the library
/// (linux-perf-event-reader 0.10) asserts on an MMAP2 build-id longer than
/// 20 bytes, so one is refused here rather than panic.
pub fn parse_record<'a>(record: &RawEventRecord<'a>) -> Option<EventRecord<'a>> {
    let long_build_id = record.record_type.0 == rec::MMAP2
        && record.misc & rec::MISC_MMAP_BUILD_ID != 0
        && record
            .data
            .get(32..33)
            .is_some_and(|len| usize::from(len.as_slice()[0]) > rec::BUILD_ID_SIZE_MAX);
    if long_build_id {
        return None;
    }
    record.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::decode::tests::{minor_faults_attr, sample_with_chain};

    /// Ids map to their event; an attr that does not parse names its index.
    #[test]
    fn maps_ids_to_events() {
        let attr = minor_faults_attr();
        let table = EventTable::new([(&attr[..], &[7u64, 8][..]), (&attr[..], &[9][..])]).unwrap();
        assert_eq!(
            (table.attr_of(7), table.attr_of(9), table.attr_of(1)),
            (Some(0), Some(1), None)
        );
        assert_eq!(table.attrs.len(), 2);
        let Err((index, _)) = EventTable::new([(&attr[..], &[][..]), (&attr[..4], &[][..])]) else {
            panic!("a 4-byte attr parsed");
        };
        assert_eq!(index, 1);
    }

    /// A record's event is its identifier's (id 0: the first event's);
    /// with one event, or no ids, every record is the first event's; perf's
    /// own record types have no place in time order.
    #[test]
    fn finds_a_records_event_and_time() {
        let attr = minor_faults_attr();
        let table = EventTable::new([(&attr[..], &[7u64][..]), (&attr[..], &[9][..])]).unwrap();
        let at = |id: u64, time: u64| {
            let bytes = sample_with_chain(id, 0, time, 0x1000, &[]);
            let record = records(&bytes).next().unwrap().unwrap();
            table.index(&record, 64)
        };
        assert_eq!(at(9, 30), Indexed::At(TimeOrdered::new(30, 64, 1)));
        assert_eq!(at(0, 31), Indexed::At(TimeOrdered::new(31, 64, 0)));
        assert_eq!(at(5, 32), Indexed::NoEvent);
        let round = RecordHead {
            record_type: 68,
            misc: 0,
            size: 8,
        }
        .encode();
        let record = records(&round).next().unwrap().unwrap();
        assert_eq!(table.index(&record, 0), Indexed::NotKernel);
        let one = EventTable::new([(&attr[..], &[7u64][..])]).unwrap();
        let bytes = sample_with_chain(5, 0, 33, 0x1000, &[]);
        assert_eq!(one.attr_of_record(rec::SAMPLE, &bytes[8..]), Some(0));
        assert_eq!(one.time(rec::SAMPLE, &bytes[8..], 0), Some(33));
    }

    /// An MMAP2 record whose build-id is longer than a record holds does
    /// not parse (the library would panic on it).
    #[test]
    fn refuses_long_build_ids() {
        let table = EventTable::new([(&minor_faults_attr()[..], &[7u64][..])]).unwrap();
        let mut body = Vec::new();
        let mapping = Mapping {
            pid: 1,
            tid: 1,
            avma: 0x1000,
            len: 0x1000,
            file_offset: 0,
            file: FileId::BuildId(&[1; 20]),
            prot: 5,
            flags: 2,
            path: b"/bin/x",
        };
        mapping.write_mmap2(&mut body);
        own::SampleId {
            pid: 1,
            tid: 1,
            time: 0,
            cpu: 0,
            id: 7,
        }
        .write_trailer(&mut body);
        let raw = |body: &[u8]| {
            let mut record = RecordHead {
                record_type: rec::MMAP2,
                misc: mapping.mmap2_misc(),
                size: 0,
            }
            .encode()
            .to_vec();
            record.extend_from_slice(body);
            RecordHead::patch_size(&mut record);
            record
        };
        let good = raw(&body);
        let key = TimeOrdered::new(0, 0, 0);
        assert!(parse_record(&table.raw_record(&good, key)).is_some());
        body[32] = 21;
        let long = raw(&body);
        assert!(parse_record(&table.raw_record(&long, key)).is_none());
    }
}
