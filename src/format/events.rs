//! What every reader of records needs once: the table of a recording's
//! events (each one's parsed attr and parse info, and the event of each
//! id), the 8-byte record header, and the key that orders records by time.
//! Replay, the live stream and the DWARF rewriter all read records this way.

use byteorder::LittleEndian;
use linux_perf_data::linux_perf_event_reader::{
    get_record_timestamp, Endianness, PerfEventAttr, RawData, RecordParseInfo, RecordType,
};
use rustc_hash::FxHashMap;

/// A recording's events, parsed once: index `i` is the `i`th event.
pub struct EventTable {
    /// Each event's attr.
    pub attrs: Vec<PerfEventAttr>,
    /// Each event's record layout.
    pub parse_infos: Vec<RecordParseInfo>,
    /// The event of each sample id.
    attr_of_id: FxHashMap<u64, usize>,
}

impl EventTable {
    /// From each event's raw attr bytes and ids; on an attr that does not
    /// parse, its index and why.
    pub fn new<'a>(
        events: impl IntoIterator<Item = (&'a [u8], &'a [u64])>,
    ) -> Result<EventTable, (usize, std::io::Error)> {
        let mut table = EventTable {
            attrs: Vec::new(),
            parse_infos: Vec::new(),
            attr_of_id: FxHashMap::default(),
        };
        for (index, (bytes, ids)) in events.into_iter().enumerate() {
            let (attr, _) =
                PerfEventAttr::parse::<_, LittleEndian>(bytes).map_err(|e| (index, e))?;
            table
                .parse_infos
                .push(RecordParseInfo::new(&attr, Endianness::LittleEndian));
            table.attrs.push(attr);
            for &id in ids {
                table.attr_of_id.insert(id, index);
            }
        }
        Ok(table)
    }

    /// The event a sample id belongs to.
    pub fn attr_of(&self, id: u64) -> Option<usize> {
        self.attr_of_id.get(&id).copied()
    }

    /// Whether no event has ids (then every record is the first event's).
    pub fn has_no_ids(&self) -> bool {
        self.attr_of_id.is_empty()
    }

    /// A record's time stamp, read with its event's layout.
    pub fn time(&self, record_type: u32, body: RawData<'_>, attr: usize) -> Option<u64> {
        get_record_timestamp::<LittleEndian>(RecordType(record_type), body, &self.parse_infos[attr])
    }
}

/// The 8-byte header of a perf record: type, misc bits, size (header
/// included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHead {
    /// `PERF_RECORD_*`.
    pub record_type: u32,
    /// `PERF_RECORD_MISC_*` bits.
    pub misc: u16,
    /// Bytes of the whole record.
    pub size: usize,
}

impl RecordHead {
    /// The header at the start of `bytes`; None if fewer than 8 bytes.
    pub fn parse(bytes: &[u8]) -> Option<RecordHead> {
        let head = bytes.get(..8)?;
        Some(RecordHead {
            record_type: u32::from_le_bytes([head[0], head[1], head[2], head[3]]),
            misc: u16::from_le_bytes([head[4], head[5]]),
            size: usize::from(u16::from_le_bytes([head[6], head[7]])),
        })
    }
}

/// Bits of [`TimeOrdered`]'s key that hold the record's offset; the
/// event's index rides above them (readers allow at most
/// [`crate::format::perf_data::MAX_EVENTS`] events).
const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// A record's place in time order: its time, then (offset | event index
/// << 48), so one sort orders records by time; ties by event index, and of
/// one event in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeOrdered {
    /// The record's time stamp (0 without one).
    pub time: u64,
    key: u64,
}

impl TimeOrdered {
    /// The record at byte `offset` of its buffer, of event `attr`.
    pub fn new(time: u64, offset: usize, attr: usize) -> TimeOrdered {
        TimeOrdered {
            time,
            key: offset as u64 | (attr as u64) << OFFSET_BITS,
        }
    }

    /// Byte offset of the record in its buffer.
    pub fn offset(self) -> usize {
        (self.key & OFFSET_MASK) as usize
    }

    /// Index of the record's event.
    pub fn attr(self) -> usize {
        (self.key >> OFFSET_BITS) as usize
    }

    /// The same record, moved to `offset`.
    pub fn moved_to(self, offset: usize) -> TimeOrdered {
        TimeOrdered::new(self.time, offset, self.attr())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys sort by time, then by event, then by offset (file order); the
    /// event rides along unchanged, also when the record moves.
    #[test]
    fn time_order_then_file_order() {
        let mut keys = [
            TimeOrdered::new(5, 300, 1),
            TimeOrdered::new(5, 200, 1),
            TimeOrdered::new(5, 100, 2),
            TimeOrdered::new(3, 900, 0),
        ];
        keys.sort_unstable();
        let seen: Vec<_> = keys
            .iter()
            .map(|k| (k.time, k.offset(), k.attr()))
            .collect();
        assert_eq!(seen, [(3, 900, 0), (5, 200, 1), (5, 300, 1), (5, 100, 2)]);
        let moved = keys[2].moved_to(8);
        assert_eq!((moved.time, moved.offset(), moved.attr()), (5, 8, 1));
        let big = TimeOrdered::new(0, (1 << 48) - 1, 0xffff);
        assert_eq!((big.offset(), big.attr()), ((1 << 48) - 1, 0xffff));
    }

    /// The header's fields are little endian; fewer than 8 bytes is none.
    #[test]
    fn reads_record_heads() {
        let bytes = [9, 0, 0, 0, 2, 0x40, 48, 1, 0xaa];
        assert_eq!(
            RecordHead::parse(&bytes),
            Some(RecordHead {
                record_type: 9,
                misc: 0x4002,
                size: 304
            })
        );
        assert_eq!(RecordHead::parse(&bytes[..7]), None);
    }

    /// Ids map to their event; an attr that does not parse names its index.
    #[test]
    fn maps_ids_to_events() {
        let attr = crate::format::decode::tests::minor_faults_attr();
        let table = EventTable::new([(&attr[..], &[7u64, 8][..]), (&attr[..], &[9][..])]).unwrap();
        assert_eq!(
            (table.attr_of(7), table.attr_of(9), table.attr_of(1)),
            (Some(0), Some(1), None)
        );
        assert_eq!(table.attrs.len(), 2);
        assert!(!table.has_no_ids());
        let Err((index, _)) = EventTable::new([(&attr[..], &[][..]), (&attr[..4], &[][..])]) else {
            panic!("a 4-byte attr parsed");
        };
        assert_eq!(index, 1);
    }
}
