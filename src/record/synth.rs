//! Records pfprof writes itself, in the kernel's format, for what existed
//! before the events were enabled (attach and system-wide modes): FORK (the
//! parent), COMM (the name) and MMAP2 (each mapping). Their `sample_id`
//! trailer matches the first event's attr: pid/tid, time, cpu, identifier.

use crate::format::events::mapping::put_string;
use crate::format::events::own::SampleId;
use crate::format::events::{FileId, Mapping, RecordHead};
use crate::format::records as rec;
use crate::sys::maps::MapsLine;

/// A record of `record_type` and `misc` with `body`, then the `sample_id`
/// trailer of pfprof's events (of `pid`/`tid` at `time`, event `id`).
fn record(
    record_type: u32,
    misc: u16,
    body: &[u8],
    pid: i32,
    tid: i32,
    time: u64,
    id: u64,
) -> Vec<u8> {
    let mut r = Vec::with_capacity(8 + body.len() + 32);
    let start = RecordHead::begin(record_type, misc, &mut r);
    r.extend_from_slice(body);
    SampleId {
        pid,
        tid,
        time,
        cpu: 0,
        id,
    }
    .write_trailer(&mut r);
    RecordHead::end(&mut r, start);
    r
}

/// `pid` is a process whose parent is `ppid`.
pub(crate) fn fork(pid: i32, ppid: i32, time: u64, id: u64) -> Vec<u8> {
    let mut body = Vec::new();
    for v in [pid, ppid, pid, ppid] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    body.extend_from_slice(&time.to_le_bytes());
    record(rec::FORK, 0, &body, pid, pid, time, id)
}

/// Thread `tid` of `pid` is called `comm`.
pub(crate) fn comm(pid: i32, tid: i32, comm: &str, time: u64, id: u64) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&pid.to_le_bytes());
    body.extend_from_slice(&tid.to_le_bytes());
    put_string(&mut body, comm.as_bytes());
    record(rec::COMM, 0, &body, pid, tid, time, id)
}

/// Name perf gives the kernel's text mapping.
pub(crate) const KERNEL_MMAP_NAME: &str = "[kernel.kallsyms]_text";

/// The kernel's text (`start..end`) as perf writes it first in its own
/// recordings: an MMAP of pid -1 at time 0, its page offset the address of
/// `_text`. perf takes the kernel map from it, and warns that the kernel
/// maps were restricted when it is missing.
pub(crate) fn kernel_mmap(start: u64, end: u64, id: u64) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&(-1i32).to_le_bytes());
    body.extend_from_slice(&0i32.to_le_bytes());
    for v in [start, end - start, start] {
        body.extend_from_slice(&v.to_le_bytes());
    }
    put_string(&mut body, KERNEL_MMAP_NAME.as_bytes());
    record(rec::MMAP, rec::MISC_KERNEL, &body, -1, 0, 0, id)
}

/// A mapping of `pid`, from its maps file, identified by device and inode.
#[cfg(test)]
pub(crate) fn mmap2(pid: i32, m: &MapsLine, time: u64, id: u64) -> Vec<u8> {
    mmap2_with(pid, m, None, time, id)
}

/// A mapping of `pid`, from its maps file, with the GNU build-id of the
/// mapped file when it has one (as the kernel writes it with `attr.build_id`:
/// `rec::MISC_MMAP_BUILD_ID` set, and `u8 size, u8[3] reserved,
/// u8[20] build-id` in place of maj/min/ino/ino_generation). A build-id longer
/// than 20 bytes does not fit: the mapping is then identified by inode.
pub(crate) fn mmap2_with(
    pid: i32,
    m: &MapsLine,
    build_id: Option<&[u8]>,
    time: u64,
    id: u64,
) -> Vec<u8> {
    let file = match build_id.filter(|b| !b.is_empty() && b.len() <= rec::BUILD_ID_SIZE_MAX) {
        Some(build_id) => FileId::BuildId(build_id),
        None => FileId::Inode {
            major: m.dev.0,
            minor: m.dev.1,
            inode: m.inode,
            // Unknown.
            generation: 0,
        },
    };
    let mapping = Mapping {
        pid,
        tid: pid,
        avma: m.start_avma,
        len: m.end_avma - m.start_avma,
        file_offset: m.file_offset,
        file,
        prot: m.prot,
        flags: m.flags,
        path: m.path.as_bytes(),
    };
    let mut body = Vec::new();
    mapping.write_mmap2(&mut body);
    record(rec::MMAP2, mapping.mmap2_misc(), &body, pid, pid, time, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys;
    use byteorder::LittleEndian;
    use linux_perf_data::linux_perf_event_reader::{
        Endianness, EventRecord, Mmap2FileId, PerfEventAttr, RawData, RawEventRecord,
        RecordParseInfo, RecordType,
    };

    /// The records read back as the kernel's: build-id or inode, prot, path.
    #[test]
    fn mmap2_reads_back() {
        let m = MapsLine {
            start_avma: 0x1000,
            end_avma: 0x3000,
            prot: 5,
            flags: 2,
            file_offset: 0x2000,
            dev: (0xfe, 1),
            inode: 1049,
            path: "/usr/bin/cat".into(),
        };
        let mut attr = sys::new_attr();
        attr.sample_type = (perf_event_open_sys::bindings::PERF_SAMPLE_TID
            | perf_event_open_sys::bindings::PERF_SAMPLE_TIME
            | perf_event_open_sys::bindings::PERF_SAMPLE_CPU
            | perf_event_open_sys::bindings::PERF_SAMPLE_IDENTIFIER)
            as u64;
        attr.set_sample_id_all(1);
        let (attr, _) = PerfEventAttr::parse::<_, LittleEndian>(sys::attr_bytes(&attr)).unwrap();
        let info = RecordParseInfo::new(&attr, Endianness::LittleEndian);
        let id20: Vec<u8> = (1..=20).collect();
        // None: identified by inode.
        let cases: [(Option<&[u8]>, Option<_>); 5] = [
            (Some(&[0xab; 8]), Some(vec![0xab; 8])),
            (Some(&id20), Some(id20.clone())),
            // Too long for the record, or empty: the inode instead.
            (Some(&[1; 21]), None),
            (Some(&[]), None),
            (None, None),
        ];
        for (build_id, want) in cases {
            let bytes = mmap2_with(7, &m, build_id, 5, 1);
            let head = RecordHead::parse(&bytes).unwrap();
            assert_eq!(head.size, bytes.len());
            let raw = RawEventRecord::new(
                RecordType(rec::MMAP2),
                head.misc,
                RawData::Single(&bytes[8..]),
                info,
            );
            let Ok(EventRecord::Mmap2(got)) = raw.parse() else {
                panic!("not an mmap2 record");
            };
            assert_eq!((got.pid, got.address, got.length), (7, 0x1000, 0x2000));
            assert_eq!(got.page_offset, 0x2000);
            assert_eq!(&got.path.as_slice()[..], b"/usr/bin/cat");
            match (got.file_id, want) {
                (Mmap2FileId::BuildId(a), Some(b)) => assert_eq!(a, b),
                (Mmap2FileId::InodeAndVersion(a), None) => {
                    assert_eq!((a.major, a.minor, a.inode), (0xfe, 1, 1049))
                }
                (got, want) => panic!("{got:?} != {want:?}"),
            }
        }
        // The kernel's text: pid -1, executable, page offset = start.
        let bytes = kernel_mmap(0xffffffff81000000, 0xffffffff8220bb08, 9);
        let head = RecordHead::parse(&bytes).unwrap();
        assert_eq!(head.size, bytes.len());
        let raw = RawEventRecord::new(
            RecordType(rec::MMAP),
            head.misc,
            RawData::Single(&bytes[8..]),
            info,
        );
        let Ok(EventRecord::Mmap(got)) = raw.parse() else {
            panic!("not an mmap record");
        };
        assert_eq!(
            (got.pid, got.tid, got.address, got.length, got.page_offset),
            (-1, 0, 0xffffffff81000000, 0x120bb08, 0xffffffff81000000)
        );
        assert!(got.is_executable);
        assert_eq!(&got.path.as_slice()[..], KERNEL_MMAP_NAME.as_bytes());
        let id = linux_perf_data::linux_perf_event_reader::get_record_identifier::<LittleEndian>(
            RecordType(rec::MMAP),
            RawData::Single(&bytes[8..]),
            true,
        );
        assert_eq!(id, Some(9));
    }
}
