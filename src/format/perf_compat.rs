//! What `perf` needs besides the records to open a pfprof recording without
//! complaint: the tracepoints' formats (`HEADER_TRACING_DATA`: perf refuses
//! a file with tracepoint events and no formats), the machine's
//! architecture (`HEADER_ARCH`). The kernel's text mapping perf also wants
//! (else it warns that the kernel maps were restricted) is record's
//! (`record/kernel_text.rs`). The build-id table perf
//! reads too is perf_data's, which reads it back from perf's recordings.
//!
//! The tracing data is laid out as perf's `trace-event-info.c` writes it and
//! `trace-event-read.c` reads it (version 0.6): magic, version, endianness,
//! long and page size, `header_page`, `header_event`, ftrace formats (none),
//! the event formats by system, kallsyms (none), printk formats (none),
//! saved command lines (none). pfprof itself never reads it back;
//! [`TracingData::parse`] checks the layout in tests.

use super::perf_data::{put_string, Fields, LayoutError};
use std::io;
use std::path::Path;

/// `HEADER_ARCH`: a `perf_header_string` (u32 length, the name NUL-padded
/// to 64 bytes). perf and its readers (hotspot's perfparser) pick register
/// names and the unwinder by it.
pub fn arch_section() -> Vec<u8> {
    let mut out = Vec::new();
    put_string(&mut out, std::env::consts::ARCH);
    out
}

/// `\x17\x08\x44` then `tracing`.
const TRACING_MAGIC: &[u8; 10] = b"\x17\x08\x44tracing";
/// 0.6 adds the saved command lines at the end.
const TRACING_VERSION: &str = "0.6";

/// The tracepoint formats of a recording, as tracefs gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracingData {
    /// `sizeof(long)` of the kernel (the formats' `unsigned long` fields).
    pub long_size: u8,
    /// Page size of the machine.
    pub page_size: u32,
    /// `events/header_page`: the ring buffer page header's format.
    pub header_page: Vec<u8>,
    /// `events/header_event`: the ring buffer event header's format.
    pub header_event: Vec<u8>,
    /// Per system (`exceptions`), the `format` file of each event.
    pub systems: Vec<(String, Vec<Vec<u8>>)>,
}

impl TracingData {
    /// Reads the formats of `events` (`system/name`) from tracefs.
    pub fn read(tracefs: &Path, events: &[&str]) -> io::Result<TracingData> {
        let events_dir = tracefs.join("events");
        let read = |name: &str| {
            read_whole(&events_dir.join(name))
                .map_err(|e| io::Error::new(e.kind(), format!("{name}: {e}")))
        };
        let mut systems: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
        for event in events {
            let (system, _) = event
                .split_once('/')
                .ok_or_else(|| io::Error::other(format!("{event}: not system/name")))?;
            let format = read(&format!("{event}/format"))?;
            match systems.iter_mut().find(|(s, _)| s == system) {
                Some((_, formats)) => formats.push(format),
                None => systems.push((system.to_string(), vec![format])),
            }
        }
        Ok(TracingData {
            long_size: std::mem::size_of::<libc::c_long>() as u8,
            page_size: crate::sys::page_size(),
            header_page: read("header_page")?,
            header_event: read("header_event")?,
            systems,
        })
    }

    /// The section's bytes (little-endian numbers, as the rest of the file).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(TRACING_MAGIC);
        out.extend_from_slice(TRACING_VERSION.as_bytes());
        out.push(0);
        out.push(0); // little-endian
        out.push(self.long_size);
        out.extend_from_slice(&self.page_size.to_le_bytes());
        for (tag, body) in [
            (&b"header_page\0"[..], &self.header_page),
            (&b"header_event\0"[..], &self.header_event),
        ] {
            out.extend_from_slice(tag);
            out.extend_from_slice(&(body.len() as u64).to_le_bytes());
            out.extend_from_slice(body);
        }
        out.extend_from_slice(&0u32.to_le_bytes()); // ftrace formats
        out.extend_from_slice(&(self.systems.len() as u32).to_le_bytes());
        for (system, formats) in &self.systems {
            out.extend_from_slice(system.as_bytes());
            out.push(0);
            out.extend_from_slice(&(formats.len() as u32).to_le_bytes());
            for format in formats {
                out.extend_from_slice(&(format.len() as u64).to_le_bytes());
                out.extend_from_slice(format);
            }
        }
        out.extend_from_slice(&0u32.to_le_bytes()); // kallsyms
        out.extend_from_slice(&0u32.to_le_bytes()); // printk formats
        out.extend_from_slice(&0u64.to_le_bytes()); // saved command lines
        out
    }

    /// Reads a section back the way perf does, every size checked; the
    /// error names what is wrong and where.
    pub fn parse(bytes: &[u8]) -> Result<TracingData, LayoutError> {
        let mut r = Fields::new(bytes, 0, bytes.len(), "tracing data");
        if r.take(10)? != TRACING_MAGIC {
            return Err(r.error("no tracing magic"));
        }
        let version = r.cstring()?;
        if version != TRACING_VERSION {
            return Err(r.error(format_args!("version {version:?}")));
        }
        if r.take(1)? != [0] {
            return Err(r.error("not little-endian"));
        }
        let long_size = r.take(1)?[0];
        let page_size = r.u32()?;
        let mut headers = Vec::new();
        for tag in ["header_page", "header_event"] {
            let got = r.cstring()?;
            if got != tag {
                return Err(r.error(format_args!("{got:?} where {tag:?} belongs")));
            }
            let len = r.u64()?;
            headers.push(r.take_u64(len)?.to_vec());
        }
        for _ in 0..r.u32()? {
            let len = r.u64()?;
            r.take_u64(len)?;
        }
        let mut systems = Vec::new();
        for _ in 0..r.u32()? {
            let system = r.cstring()?;
            let mut formats = Vec::new();
            for _ in 0..r.u32()? {
                let len = r.u64()?;
                formats.push(r.take_u64(len)?.to_vec());
            }
            systems.push((system, formats));
        }
        for _ in 0..2 {
            let len = r.u32()?;
            r.take(len as usize)?;
        }
        let len = r.u64()?;
        r.take_u64(len)?;
        if r.left() != 0 {
            return Err(r.error(format_args!("{} bytes left over", r.left())));
        }
        let header_event = headers.pop().unwrap_or_default();
        let header_page = headers.pop().unwrap_or_default();
        Ok(TracingData {
            long_size,
            page_size,
            header_page,
            header_event,
            systems,
        })
    }
}

/// A tracefs file, read in large pieces: `header_page` answers a small
/// first read (`std::fs::read` probes with 32 bytes, the size being 0)
/// and then ends, cut.
fn read_whole(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TracingData {
        TracingData {
            long_size: 8,
            page_size: 4096,
            header_page: b"\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n".to_vec(),
            header_event: b"# compressed entry header\n".to_vec(),
            systems: vec![(
                "exceptions".into(),
                vec![
                    b"name: page_fault_user\nID: 190\n".to_vec(),
                    b"name: page_fault_kernel\nID: 189\n".to_vec(),
                ],
            )],
        }
    }

    /// The fixed part lies where perf's reader expects it, and what is
    /// written reads back whole.
    #[test]
    fn tracing_data_layout() {
        let data = sample();
        let bytes = data.encode();
        assert_eq!(&bytes[..3], [23, 8, 68]);
        assert_eq!(&bytes[3..10], b"tracing");
        assert_eq!(&bytes[10..14], b"0.6\0");
        assert_eq!(bytes[14], 0, "little-endian");
        assert_eq!(bytes[15], 8, "long size");
        assert_eq!(&bytes[16..20], 4096u32.to_le_bytes());
        assert_eq!(&bytes[20..32], b"header_page\0");
        assert_eq!(
            &bytes[32..40],
            (data.header_page.len() as u64).to_le_bytes()
        );
        // Ends with: no kallsyms, no printk formats, no saved cmdlines.
        assert_eq!(&bytes[bytes.len() - 16..], [0u8; 16]);
        assert_eq!(TracingData::parse(&bytes), Ok(data.clone()));
        // No systems at all still reads.
        let empty = TracingData {
            systems: vec![],
            ..data
        };
        assert_eq!(TracingData::parse(&empty.encode()), Ok(empty));
    }

    /// Every truncation and a lying size are refused, not read past.
    #[test]
    fn tracing_data_refuses_damage() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            assert!(TracingData::parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut lying = bytes.clone();
        lying[32..40].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(TracingData::parse(&lying).is_err());
        let mut version = bytes;
        version[12] = b'5';
        assert!(TracingData::parse(&version)
            .unwrap_err()
            .what
            .contains("version"));
    }

    /// The formats come from tracefs, grouped by system.
    #[test]
    fn tracing_data_reads_tracefs() {
        let dir = std::env::temp_dir().join(format!("pfprof-tracefs-{}", std::process::id()));
        let events = dir.join("events");
        for (name, body) in [
            ("header_page", "page"),
            ("header_event", "event"),
            ("exceptions/page_fault_user/format", "user"),
            ("exceptions/page_fault_kernel/format", "kernel"),
            ("sched/sched_switch/format", "switch"),
        ] {
            let path = events.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        let data = TracingData::read(
            &dir,
            &[
                "exceptions/page_fault_user",
                "sched/sched_switch",
                "exceptions/page_fault_kernel",
            ],
        )
        .unwrap();
        assert_eq!(data.header_page, b"page");
        assert_eq!(data.header_event, b"event");
        assert_eq!(
            data.systems,
            [
                (
                    "exceptions".to_string(),
                    vec![b"user".to_vec(), b"kernel".to_vec()]
                ),
                ("sched".to_string(), vec![b"switch".to_vec()]),
            ]
        );
        let missing = TracingData::read(&dir, &["exceptions/nope"]).unwrap_err();
        assert!(missing.to_string().contains("exceptions/nope"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `perf_header_string`: length (a multiple of 64), name, NUL padding.
    #[test]
    fn arch_is_a_header_string() {
        let bytes = arch_section();
        let arch = std::env::consts::ARCH.as_bytes();
        assert_eq!(bytes.len(), 4 + 64);
        assert_eq!(&bytes[..4], 64u32.to_le_bytes());
        assert_eq!(&bytes[4..4 + arch.len()], arch);
        assert!(bytes[4 + arch.len()..].iter().all(|&b| b == 0));
    }
}
