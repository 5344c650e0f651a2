//! The recording container: a perf.data (`PERFILE2`) file, written here and
//! read back by [`read_layout`] (header, attrs, feature sections; every size
//! checked against the file) and `decode.rs` (the records).
//!
//! Layout: header | event ids | attrs | data (raw kernel records, as drained
//! from the ring buffers, with a `FINISHED_ROUND` after each drain pass) |
//! feature section table | feature sections. The header is rewritten with the
//! current data size at every checkpoint, so a recording cut short by a kill
//! still opens (without its feature sections).
//!
//! pfprof's own facts about the run (command, exit status, the kernel's fault
//! counters, whether the tracepoints were available) live in a private feature
//! section, [`PFPROF_META_FEATURE`], as JSON.
//!
//! Each section pfprof both writes and reads (`EVENT_DESC`, the build-id
//! table) is encoded beside its decoder, every section is read through one
//! bounds-checked cursor, and [`repair`] rebuilds a recording whose end is
//! missing with the same checks as the reader.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::Path;

use super::events::{le_u64, le_u64s, records, RecordHead};
use super::records::{OwnEvent, BUILD_ID_SIZE_MAX, MISC_BUILD_ID_SIZE, MISC_KERNEL, MISC_USER};
use serde::{Deserialize, Serialize};

mod build_id_table;
mod layout;
mod repair;
mod writer;

pub use build_id_table::*;
pub use layout::*;
pub use repair::*;
pub use writer::*;

/// Which faults `record` samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecordClass {
    /// Major faults only: cheap enough for a busy host; no tracepoints, so
    /// no latency or access type.
    Major,
    /// Minor faults (COW included) only.
    Minor,
    /// What COW needs: minor faults and the fault-entry tracepoints.
    Cow,
    /// Everything.
    #[default]
    All,
}

/// Feature bit of pfprof's metadata section. perf only interprets bits below
/// its `HEADER_LAST_FEATURE` (32 today) and skips the rest.
pub const PFPROF_META_FEATURE: u32 = 200;
/// Feature bit of the tracepoints' formats (perf_compat's `TracingData`).
pub const HEADER_TRACING_DATA: u32 = 1;
/// Feature bit of the build-id table ([`build_id_section`]).
pub const HEADER_BUILD_ID: u32 = 2;
const HEADER_HOSTNAME: u32 = 3;
const HEADER_OSRELEASE: u32 = 4;
/// Feature bit of the machine's architecture (`uname -m`).
pub const HEADER_ARCH: u32 = 6;
const HEADER_NRCPUS: u32 = 7;
const HEADER_CMDLINE: u32 = 11;
/// Feature bit of perf record -z's compression settings: set when the
/// data section holds compressed records.
pub const HEADER_COMPRESSED: u32 = 27;
const HEADER_EVENT_DESC: u32 = 12;
/// `PERF_RECORD_FINISHED_ROUND`: all records before it may be sorted with
/// those of the next round only.
pub(crate) const PERF_RECORD_FINISHED_ROUND: u32 = 68;
/// Bytes of the fixed header (`struct perf_file_header`).
pub const HEADER_SIZE: u64 = 104;
/// The magic of a little-endian perf.data file.
const MAGIC: &[u8; 8] = b"PERFILE2";

/// The header's feature bitmap: bit `b` set says feature section `b`
/// follows the data (the sections in bit order, bits below 256).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features([u64; 4]);

impl Features {
    /// Whether feature `bit`'s section is there.
    pub fn has(&self, bit: u32) -> bool {
        let (word, mask) = Self::place(bit);
        self.0.get(word).is_some_and(|w| w & mask != 0)
    }

    /// Marks feature `bit`'s section as there (bits past 255 have no place).
    pub fn set(&mut self, bit: u32) {
        let (word, mask) = Self::place(bit);
        if let Some(w) = self.0.get_mut(word) {
            *w |= mask;
        }
    }

    /// Whether no section is there (a recording not finished).
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The bits set, ascending: the order of the sections.
    pub fn bits(self) -> impl Iterator<Item = u32> {
        (0..256).filter(move |&bit| self.has(bit))
    }

    fn place(bit: u32) -> (usize, u64) {
        ((bit / 64) as usize, 1 << (bit % 64))
    }
}

/// One event of the recording: its attr, name and the ids the kernel gave
/// each of its per-CPU instances.
#[derive(Debug, Clone)]
pub struct EventDesc {
    /// The raw `perf_event_attr` bytes.
    pub attr: Vec<u8>,
    /// perf-style event name (`minor-faults`, `exceptions:page_fault_user`).
    pub name: String,
    /// `PERF_EVENT_IOC_ID` of each instance.
    pub ids: Vec<u64>,
}

/// How the profiled command ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// Exited with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// What a recording followed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RecordMode {
    /// A command pfprof started (`record -- CMD`).
    #[default]
    Command,
    /// Running processes (`record -p PID`).
    Attach,
    /// Every process (`record -a`).
    System,
}

/// pfprof's metadata about a recording.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RecordingMeta {
    /// pfprof version that wrote the file.
    pub pfprof_version: String,
    /// The profiled command line.
    pub command: Vec<String>,
    /// How the command ended (None if pfprof stopped first).
    pub exit: Option<Exit>,
    /// The kernel's count of minor faults of the process tree (counting events).
    pub kernel_minor: Option<u64>,
    /// The kernel's count of major faults of the process tree.
    pub kernel_major: Option<u64>,
    /// Faults the kernel's counts may hold that fall on the other side of
    /// the recording's edges, or miss that fall inside: those it counted
    /// while the counts were read (an interval of `record --interval` ends
    /// at a read, which takes tens of microseconds). None: exact.
    pub kernel_spread: Option<u64>,
    /// Whether the `exceptions:page_fault_*` tracepoints were recorded (error codes, COW).
    pub tracepoints: bool,
    /// Why the tracepoints are missing, when they are.
    pub tracepoints_note: Option<String>,
    /// Sample period (1 = every fault).
    pub period: u64,
    /// Call-graph mode.
    pub call_graph: crate::format::call_graph::CallGraph,
    /// Unwinding counters (dwarf mode).
    #[serde(default)]
    pub unwind: Option<crate::unwind::UnwindStats>,
    /// Whether kernel frames were kept.
    pub kernel_callchains: bool,
    /// Signal that made pfprof stop early, if any.
    pub interrupted_by: Option<i32>,
    /// Bytes of kernel records written.
    pub data_bytes: u64,
    /// Wall time of the recording, in nanoseconds.
    pub wall_ns: u64,
    /// Pid of the profiled command.
    pub root_pid: Option<i32>,
    /// Pid of pfprof itself (the command's parent).
    pub pfprof_pid: Option<i32>,
    /// What was followed.
    pub mode: RecordMode,
    /// The processes attached to (`-p`).
    pub pids: Vec<i32>,
    /// Which faults were sampled (`--class`).
    pub class: RecordClass,
    /// Bytes of each CPU's ring buffer (its share of the collector's ring
    /// when shared) as mapped: less than asked when the
    /// locked-memory limits shrank it (None in recordings before it was kept).
    #[serde(default)]
    pub ring_bytes_per_cpu: Option<u64>,
    /// How the draining thread was scheduled: `fifo` (real-time),
    /// `nice -10` or `ordinary` (None in older recordings).
    #[serde(default)]
    pub recorder_priority: Option<crate::format::recorder::RecorderPriority>,
    /// Who wrote the faults: `bpf` (pfprof's collector, one record per
    /// fault) or `perf` (the kernel's samples and, in dwarf mode, stack
    /// copies); None in older recordings.
    #[serde(default)]
    pub collector: Option<crate::format::recorder::Collector>,
    /// Fault entries that no completion followed (a SIGSEGV, a spurious
    /// fault), as the collector counted them where it paired entries in
    /// the kernel (the recording then holds only the paired entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished_entries: Option<u64>,
    /// Faults in the kernel's counts that it never ran pfprof's collector
    /// for (it runs no perf event's BPF program while that CPU is in BPF
    /// code already): the counts less the collector's runs, read once the
    /// events were disabled. None without the collector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collector_skipped: Option<u64>,
    /// The recording ends with each event's whole count of the records it
    /// lost (`PERF_RECORD_LOST_SAMPLES` from `PERF_FORMAT_LOST`, as perf
    /// writes them), which the ring's `PERF_RECORD_LOST`s are part of.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lost_samples_whole: bool,
    /// `kernel.perf_event_max_stack`: where the kernel cuts frame-pointer chains.
    #[serde(default)]
    pub max_stack: Option<u32>,
    /// Mapped files without a build-id, by path: their size and mtime when
    /// recorded (several when different files were mapped under one path),
    /// so that `report` can tell a file changed since. Empty in older
    /// recordings.
    #[serde(default)]
    pub files: BTreeMap<String, Vec<FileStamp>>,
}

/// What identifies a file without a build-id: its size and modification
/// time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileStamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
}

impl FileStamp {
    /// The stamp of a file's metadata.
    pub fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            size: meta.size(),
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(type_: u32, config: u64) -> Vec<u8> {
        let mut a = vec![0u8; 128];
        a[..4].copy_from_slice(&type_.to_le_bytes());
        a[4..8].copy_from_slice(&128u32.to_le_bytes());
        a[8..16].copy_from_slice(&config.to_le_bytes());
        a
    }

    fn record(len: u16) -> Vec<u8> {
        let mut r = vec![0u8; len as usize];
        r[..4].copy_from_slice(&9u32.to_le_bytes()); // PERF_RECORD_SAMPLE
        r[6..8].copy_from_slice(&len.to_le_bytes());
        r
    }

    fn repair_events() -> Vec<EventDesc> {
        vec![
            EventDesc {
                attr: attr(1, 5),
                name: "minor-faults".into(),
                ids: vec![1, 2],
            },
            EventDesc {
                attr: attr(1, 6),
                name: "major-faults".into(),
                ids: vec![3, 4],
            },
            EventDesc {
                attr: attr(2, 190),
                name: "exceptions:page_fault_user".into(),
                ids: vec![5, 6],
            },
        ]
    }

    /// Attrs are cut to the smallest published size that keeps their
    /// non-zero bytes, and say so in their size field.
    #[test]
    fn attrs_are_cut_to_a_published_size() {
        for (len, last_nonzero, want) in [
            (144usize, 100usize, 104usize),
            (144, 130, 136),
            (144, 10, 64),
            (144, 143, 144),
            (136, 135, 136),
        ] {
            let mut attr = vec![0u8; len];
            attr[last_nonzero] = 1;
            let out = file_attr(&attr);
            assert_eq!(out.len(), want, "{len} {last_nonzero}");
            assert_eq!(
                u32::from_le_bytes(out[4..8].try_into().unwrap()) as usize,
                want
            );
        }
    }

    /// The magic says which file it is: only little-endian PERFILE2 is read.
    #[test]
    fn magic_names_the_format() {
        assert_eq!(check_magic(b"PERFILE2 and more"), Ok(()));
        let what = |bytes: &[u8]| check_magic(bytes).unwrap_err().what;
        assert!(what(b"2ELIFREP").contains("big-endian"));
        assert!(what(b"PERFFILE").contains("old format"));
        assert!(what(b"PERF").contains("no PERFILE2 magic"));
    }

    /// The CMDLINE feature is a count, then that many strings; a count
    /// beyond the section is an error at the string's place.
    #[test]
    fn reads_cmdline() {
        let mut bytes = 2u32.to_le_bytes().to_vec();
        for arg in ["ls", "-l"] {
            bytes.extend_from_slice(&4u32.to_le_bytes());
            bytes.extend_from_slice(arg.as_bytes());
            bytes.resize(bytes.len() + 4 - arg.len(), 0);
        }
        assert_eq!(cmdline(&bytes, 0..bytes.len()).unwrap(), ["ls", "-l"]);
        bytes[0] = 3;
        let error = cmdline(&bytes, 0..bytes.len()).unwrap_err();
        assert_eq!(error.offset, bytes.len() as u64);
    }

    /// A finished recording reads back whole; each size, count and offset
    /// field set to a lie is refused with the field's byte offset, before
    /// anything is allocated from it.
    #[test]
    fn read_layout_checks_every_field() {
        let dir = crate::test_dir("layout");
        let path = dir.join("l.data");
        let events = vec![
            EventDesc {
                attr: attr(1, 5),
                name: "minor-faults".into(),
                ids: vec![1, 2],
            },
            EventDesc {
                attr: attr(2, 190),
                name: "exceptions:page_fault_user".into(),
                ids: vec![5],
            },
        ];
        let mut w = PerfDataWriter::create(&path, events).unwrap();
        w.write_records(&record(16)).unwrap();
        let meta = RecordingMeta {
            command: vec!["app".into(), "arg".into()],
            ..RecordingMeta::default()
        };
        w.finish(&meta, "h", "r", 2).unwrap();
        let full = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();

        let layout = read_layout(&full).unwrap();
        let names: Vec<&str> = layout.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["minor-faults", "exceptions:page_fault_user"]);
        assert_eq!(layout.events[0].ids, [1, 2]);
        assert_eq!(
            layout.cmdline.as_deref(),
            Some(&["pfprof".to_string(), "app".into(), "arg".into()][..])
        );
        let json: RecordingMeta = serde_json::from_slice(&full[layout.meta.unwrap()]).unwrap();
        assert_eq!(json.command, ["app", "arg"]);

        let u64_at = |at: usize| u64::from_le_bytes(full[at..at + 8].try_into().unwrap());
        let (attr_size, attrs) = (u64_at(16) as usize, u64_at(24) as usize);
        let table = (u64_at(40) + u64_at(48)) as usize;
        // Table entries in bit order: HOSTNAME, OSRELEASE, NRCPUS, CMDLINE,
        // EVENT_DESC, pfprof's metadata.
        let section = |index: usize| u64_at(table + 16 * index) as usize;
        let (cmdline, event_desc) = (section(3), section(4));
        let cases: &[(&str, usize, &[u8], u64, &str)] = &[
            ("magic", 0, b"PERFILE3", 0, "not a perf.data file"),
            ("big-endian", 0, b"2ELIFREP", 0, "big-endian"),
            ("attr size small", 16, &8u64.to_le_bytes(), 16, "attr size"),
            (
                "attr size huge",
                16,
                &(1u64 << 40).to_le_bytes(),
                16,
                "attr size",
            ),
            (
                "attrs past the end",
                32,
                &u64::MAX.to_le_bytes(),
                24,
                "attr section",
            ),
            (
                "attrs not whole",
                32,
                &(attr_size as u64 + 1).to_le_bytes(),
                32,
                "multiple",
            ),
            (
                "data before the header end",
                40,
                &0u64.to_le_bytes(),
                40,
                "data section",
            ),
            (
                "data past the end",
                48,
                &u64::MAX.to_le_bytes(),
                48,
                "data section",
            ),
            (
                "ids huge",
                attrs + attr_size - 8,
                &(1u64 << 50).to_le_bytes(),
                (attrs + attr_size - 16) as u64,
                "event ids",
            ),
            (
                "feature section past the end",
                table + 8,
                &u64::MAX.to_le_bytes(),
                table as u64,
                "feature 3",
            ),
            (
                "EVENT_DESC count",
                event_desc,
                &u32::MAX.to_le_bytes(),
                event_desc as u64 + 4,
                "EVENT_DESC feature: 4294967295 events",
            ),
            (
                "EVENT_DESC attr size",
                event_desc + 4,
                &u32::MAX.to_le_bytes(),
                event_desc as u64 + 8,
                "EVENT_DESC feature: attr size",
            ),
            (
                "CMDLINE count",
                cmdline,
                &u32::MAX.to_le_bytes(),
                0,
                "CMDLINE feature",
            ),
        ];
        for &(name, at, value, offset, what) in cases {
            let mut bytes = full.clone();
            bytes[at..at + value.len()].copy_from_slice(value);
            let error = read_layout(&bytes).unwrap_err();
            assert!(error.what.contains(what), "{name}: {error}");
            if offset != 0 || at == 0 {
                assert_eq!(error.offset, offset, "{name}: {error}");
            }
        }
        // The table itself cut short.
        let error = read_layout(&full[..table + 20]).unwrap_err();
        assert!(error.what.contains("feature"), "{error}");
        assert!(read_layout(b"").is_err());
        assert!(read_layout(&full[..50]).is_err());
    }

    /// Sections added for perf take their place in bit order among
    /// pfprof's own; the file still reads back.
    #[test]
    fn added_features_in_bit_order() {
        let dir = crate::test_dir("features");
        let path = dir.join("f.data");
        let mut w = PerfDataWriter::create(&path, repair_events()).unwrap();
        w.write_records(&record(16)).unwrap();
        // Bit 5 (HEADER_VERSION): a body the reader does not parse.
        w.add_feature(5, b"version".to_vec());
        w.add_feature(1, b"old".to_vec());
        w.add_feature(1, b"tracing".to_vec());
        w.finish(&RecordingMeta::default(), "h", "r", 2).unwrap();
        let full = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let layout = read_layout(&full).unwrap();
        assert_eq!(layout.events.len(), 3);
        let u64_at = |at: usize| u64::from_le_bytes(full[at..at + 8].try_into().unwrap());
        let bits = u64_at(72);
        let want = [1, 3, 4, 5, 7, 11, 12];
        assert_eq!(bits, want.iter().map(|b| 1u64 << b).sum::<u64>());
        let table = (u64_at(40) + u64_at(48)) as usize;
        let section = |i: usize| {
            let (offset, size) = (u64_at(table + 16 * i) as usize, u64_at(table + 16 * i + 8));
            &full[offset..offset + size as usize]
        };
        assert_eq!(section(0), b"tracing");
        assert_eq!(section(3), b"version");
    }

    /// A recording cut anywhere inside its data keeps exactly its complete
    /// records, gets an EVENT_DESC naming pfprof's events, and is readable.
    #[test]
    fn repair_keeps_complete_records() {
        let dir = crate::test_dir("repair");
        let path = dir.join("r.data");
        let mut w = PerfDataWriter::create(&path, repair_events()).unwrap();
        for len in [16, 24, 32] {
            w.write_records(&record(len)).unwrap();
        }
        w.finish(&RecordingMeta::default(), "h", "r", 2).unwrap();
        let full = std::fs::read(&path).unwrap();
        let facts = HeaderFacts::parse(&full).unwrap();
        assert!(facts.finished());
        let data_start = facts.data.0 as usize;
        for (cut, kept) in [
            (data_start + 72, 72),
            (data_start + 71, 40),
            (data_start + 16, 16),
            (data_start + 3, 0),
        ] {
            let (image, data_bytes) = repair(&full[..cut]).unwrap();
            assert_eq!(data_bytes, kept, "cut at +{}", cut - data_start);
            let reader =
                linux_perf_data::PerfFileReader::parse_file(std::io::Cursor::new(image)).unwrap();
            let names: Vec<_> = reader
                .perf_file
                .event_attributes()
                .iter()
                .map(|a| a.name().unwrap().to_string())
                .collect();
            assert_eq!(
                names,
                ["minor-faults", "major-faults", "exceptions:page_fault_user"]
            );
            assert_eq!(reader.perf_file.event_attributes()[2].ids(), [5, 6]);
        }
        // A write error: salvage keeps what reached the file (the checkpoint
        // flushed it), drops the buffer, and the result reads like a
        // recording whose writer was killed.
        let path = dir.join("stopped.data");
        let mut w = PerfDataWriter::create(&path, repair_events()).unwrap();
        w.write_records(&record(16)).unwrap();
        w.checkpoint().unwrap();
        w.write_records(&record(24)).unwrap();
        assert_eq!(w.salvage().unwrap(), 16);
        assert!(w.write_records(&record(8)).is_err(), "stopped");
        let stopped = std::fs::read(&path).unwrap();
        let facts = HeaderFacts::parse(&stopped).unwrap();
        assert!(!facts.finished());
        assert_eq!(facts.data.1, 16);
        assert_eq!(stopped.len() as u64, facts.data.0 + 16);
        assert_eq!(repair(&stopped).unwrap().1, 16);
        assert!(
            repair(&full[..50]).is_none(),
            "a cut header cannot be repaired"
        );
        assert!(repair(b"not a perf file").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Feature bits land in their word and bit, are listed ascending, and
    /// a bit past 255 has no place (ignored, never a panic).
    #[test]
    fn feature_bitmap() {
        let mut f = Features::default();
        assert!(f.is_empty());
        for bit in [
            PFPROF_META_FEATURE,
            HEADER_EVENT_DESC,
            0,
            255,
            256,
            u32::MAX,
        ] {
            f.set(bit);
        }
        assert_eq!(f.0, [1 | 1 << 12, 0, 0, 1 << 8 | 1 << 63]);
        assert_eq!(f.bits().collect::<Vec<_>>(), [0, 12, 200, 255]);
        assert!(f.has(200) && !f.has(201) && !f.has(256) && !f.has(u32::MAX));
        assert!(!f.is_empty());
    }

    /// The header's fields are written where they are read, and nothing
    /// else of the header is touched.
    #[test]
    fn header_fields_round_trip() {
        let mut features = Features::default();
        features.set(HEADER_EVENT_DESC);
        let facts = HeaderFacts {
            attr_size: 136,
            attrs: (104, 408),
            data: (600, 1 << 40),
            features,
        };
        let mut header = vec![0xeeu8; HEADER_SIZE as usize];
        header[..8].copy_from_slice(MAGIC);
        facts.write_into(&mut header);
        let back = HeaderFacts::parse(&header).unwrap();
        assert_eq!(
            (back.attr_size, back.attrs, back.data, back.features),
            (facts.attr_size, facts.attrs, facts.data, facts.features)
        );
        assert!(back.finished());
        assert!(header[8..16]
            .iter()
            .chain(&header[56..72])
            .all(|&b| b == 0xee));
        assert!(HeaderFacts::parse(&header[..HEADER_SIZE as usize - 1]).is_none());
    }

    /// EVENT_DESC as written reads back: attrs zero-padded to the common
    /// length, names and ids kept.
    #[test]
    fn event_desc_round_trip() {
        let mut events = repair_events();
        events[1].attr.truncate(64);
        events[2].ids.clear();
        let bytes = event_desc_section(&events, 128);
        let (back, offsets) = event_desc(&bytes, 0..bytes.len()).unwrap();
        assert_eq!(offsets[0], 8);
        for (want, got) in events.iter().zip(&back) {
            let mut attr = want.attr.clone();
            attr.resize(128, 0);
            assert_eq!(
                (&got.attr, &got.name, &got.ids),
                (&attr, &want.name, &want.ids)
            );
        }
        assert_eq!(back.len(), 3);
    }

    /// A repaired recording names pfprof's events from their attrs: the
    /// fault events by config, the tracepoints by order (a ninth one by its
    /// id), anything else as the main-entry uprobe.
    #[test]
    fn repair_names_events_from_attrs() {
        let dir = crate::test_dir("repair-names");
        let path = dir.join("n.data");
        let unnamed = |attr: Vec<u8>| EventDesc {
            attr,
            name: String::new(),
            ids: vec![],
        };
        let events = vec![
            unnamed(attr(1, 6)),
            unnamed(attr(2, 190)),
            unnamed(attr(1, 5)),
            unnamed(attr(2, 189)),
            unnamed(attr(2, 188)),
            unnamed(attr(9, 0)),
            unnamed(attr(2, 187)),
            unnamed(attr(2, 186)),
            unnamed(attr(2, 185)),
            unnamed(attr(2, 184)),
            unnamed(attr(2, 183)),
            unnamed(attr(2, 182)),
        ];
        let mut w = PerfDataWriter::create(&path, events).unwrap();
        w.write_records(&record(16)).unwrap();
        w.checkpoint().unwrap();
        w.salvage().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let (image, kept) = repair(&bytes).unwrap();
        assert_eq!(kept, 16);
        let names: Vec<String> = read_layout(&image)
            .unwrap()
            .events
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(
            names,
            [
                "major-faults",
                "exceptions:page_fault_user",
                "minor-faults",
                "exceptions:page_fault_kernel",
                "syscalls:sys_enter_munmap",
                "pfprof:main_entry",
                "syscalls:sys_enter_madvise",
                "syscalls:sys_enter_mremap",
                "syscalls:sys_exit_mremap",
                "syscalls:sys_exit_brk",
                "kmem:rss_stat",
                "tracepoint:182"
            ]
        );
    }

    /// Repair checks the attrs as the reader does: an attr section that is
    /// not whole attrs, or an id array that is not whole ids, is refused
    /// (the image would not read either).
    #[test]
    fn repair_checks_attrs_as_the_reader() {
        let dir = crate::test_dir("repair-attrs");
        let path = dir.join("a.data");
        let mut w = PerfDataWriter::create(&path, repair_events()).unwrap();
        w.write_records(&record(16)).unwrap();
        w.checkpoint().unwrap();
        w.salvage().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(repair(&bytes).is_some());
        let facts = HeaderFacts::parse(&bytes).unwrap();
        let mut ragged = bytes.clone();
        ragged[AT_ATTRS + 8..AT_ATTRS + 16].copy_from_slice(&(facts.attrs.1 - 1).to_le_bytes());
        assert!(read_layout(&ragged).is_err());
        assert!(repair(&ragged).is_none(), "attrs not whole");
        let mut odd_ids = bytes;
        let ids_size_at = (facts.attrs.0 + facts.attr_size - 8) as usize;
        odd_ids[ids_size_at..ids_size_at + 8].copy_from_slice(&15u64.to_le_bytes());
        assert!(read_layout(&odd_ids).is_err());
        assert!(repair(&odd_ids).is_none(), "ids not whole");
    }
}

#[cfg(test)]
mod build_id_tests {
    use super::*;

    /// One `BUILD_ID` entry as perf writes it: `misc` with or without the
    /// size flag, the id padded to 20 bytes, the path NUL-padded to 8.
    fn entry(misc: u16, id: &[u8], path: &str) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&(-1i32).to_le_bytes());
        let mut padded = id.to_vec();
        padded.resize(20, 0);
        body.extend_from_slice(&padded);
        body.extend_from_slice(&[id.len() as u8, 0, 0, 0]);
        body.extend_from_slice(path.as_bytes());
        body.resize((body.len() + 1).next_multiple_of(8), 0);
        let mut out = Vec::new();
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&misc.to_le_bytes());
        out.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Entries with and without perf's size flag, several in a row, and
    /// sizes that lie.
    #[test]
    fn build_id_feature() {
        let id20: Vec<u8> = (1..=20).collect();
        let id16: Vec<u8> = (1..=16).collect();
        let two = [
            entry(0, &id20, "/usr/bin/a"),
            entry(MISC_BUILD_ID_SIZE, &id16, "/b"),
        ]
        .concat();
        let mut short = entry(0, &id20, "/a");
        short[6..8].copy_from_slice(&20u16.to_le_bytes());
        let mut long = entry(0, &id20, "/a");
        long[6..8].copy_from_slice(&4000u16.to_le_bytes());
        type Case = (&'static str, Vec<u8>, Result<Vec<PathBuildId>, ()>);
        let cases: Vec<Case> = vec![
            ("empty", Vec::new(), Ok(vec![])),
            (
                "no size flag: 20 bytes",
                entry(0, &id20, "/usr/bin/a"),
                Ok(vec![(b"/usr/bin/a".to_vec(), id20.clone())]),
            ),
            (
                "size flag: 16 bytes",
                entry(MISC_BUILD_ID_SIZE, &id16, "/b"),
                Ok(vec![(b"/b".to_vec(), id16.clone())]),
            ),
            (
                "two entries",
                two,
                Ok(vec![
                    (b"/usr/bin/a".to_vec(), id20.clone()),
                    (b"/b".to_vec(), id16),
                ]),
            ),
            ("entry smaller than its fields", short, Err(())),
            ("entry past the section", long, Err(())),
        ];
        for (what, bytes, want) in cases {
            let got = build_ids(&bytes, 0..bytes.len()).map_err(|_| ());
            assert_eq!(got, want, "{what}");
        }
    }

    /// Build-id entries: 36-byte header, name padded to 64, the id's size
    /// given; ids perf cannot hold are left out.
    #[test]
    fn build_id_table() {
        let entries = vec![
            BuildIdEntry {
                kernel: true,
                build_id: vec![0xab; 20],
                path: "[kernel.kallsyms]".into(),
            },
            BuildIdEntry {
                kernel: false,
                build_id: vec![1, 2, 3, 4, 5, 6, 7, 8],
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            },
            BuildIdEntry {
                kernel: false,
                build_id: vec![7; 64],
                path: "/too/long/an/id".into(),
            },
            BuildIdEntry {
                kernel: false,
                build_id: vec![],
                path: "/no/id".into(),
            },
        ];
        let bytes = build_id_section(&entries);
        assert_eq!(bytes.len(), 2 * (36 + 64));
        assert_eq!(
            &bytes[4..6],
            (MISC_BUILD_ID_SIZE | MISC_KERNEL).to_le_bytes()
        );
        assert_eq!(&bytes[6..8], 100u16.to_le_bytes());
        assert_eq!(&bytes[8..12], (-1i32).to_le_bytes());
        assert_eq!(bytes[32], 20);
        // Read back (the kernel flag is perf's to use; the reader keeps
        // path and id).
        let read = build_ids(&bytes, 0..bytes.len()).unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = entries[..2]
            .iter()
            .map(|e| (e.path.clone().into_bytes(), e.build_id.clone()))
            .collect();
        assert_eq!(read, want);
        for cut in [1, 35, 99, 101, 199] {
            let got = build_ids(&bytes[..cut], 0..cut);
            assert!(got.is_err(), "cut at {cut}");
        }
    }
}
