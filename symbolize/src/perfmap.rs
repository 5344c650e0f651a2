//! perf's JIT symbol maps, `/tmp/perf-PID.map`: one line per piece of
//! generated code, `START SIZE name` (hex, without `0x`; the name is the
//! rest of the line and may hold spaces), as V8 (`node --perf-basic-prof`),
//! the JVM's perf-map-agent, .NET, Python 3.12 (`-X perf`), LuaJIT and
//! wasmtime write them.
//!
//! A JIT reuses freed code memory, so a later line for a range overrides
//! the earlier ones where they overlap: an address takes the name of the
//! last line covering it, as perf does. The file has no times, so a fault
//! in code that was replaced later takes the later name.
//!
//! Reading never panics: malformed lines are counted and skipped, and a
//! file is refused before it is read when it is not a regular file, is
//! reached through a symbolic link, is larger than the caller allows, or
//! belongs to a user the caller does not trust (perf reads only maps owned
//! by the user or root: anyone can write to `/tmp`).

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Why a perf map file was not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfMapError {
    /// The file does not exist.
    #[error("There is no perf map file.")]
    Missing,
    /// A symbolic link, a directory, a FIFO...
    #[error("The perf map is not a regular file (a symbolic link is never followed).")]
    NotRegular,
    /// Larger than the limit given.
    #[error("The perf map is {size} bytes, more than the {limit} bytes allowed.")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Owned by a user not trusted.
    #[error("The perf map belongs to uid {uid}, neither root nor the user pfprof runs for.")]
    NotOwned {
        /// Its owner.
        uid: u32,
    },
    /// Reading failed.
    #[error("The perf map cannot be read: {0}")]
    Io(#[from] std::io::Error),
}

/// Limits on the perf map files read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerfMapLimits {
    /// The largest file read, in bytes.
    pub max_bytes: u64,
    /// The owners trusted (root is always trusted).
    pub owners: Vec<u32>,
}

/// Reads the bytes of the perf map at `path` within `limits`, without
/// following a symbolic link (see the module docs).
pub fn read_perf_map_file(path: &Path, limits: &PerfMapLimits) -> Result<Vec<u8>, PerfMapError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => PerfMapError::Missing,
            // O_NOFOLLOW on a link fails with ELOOP.
            _ if e.raw_os_error() == Some(libc::ELOOP) => PerfMapError::NotRegular,
            _ => PerfMapError::Io(e),
        })?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(PerfMapError::NotRegular);
    }
    if meta.uid() != 0 && !limits.owners.contains(&meta.uid()) {
        return Err(PerfMapError::NotOwned { uid: meta.uid() });
    }
    if meta.size() > limits.max_bytes {
        return Err(PerfMapError::TooLarge {
            size: meta.size(),
            limit: limits.max_bytes,
        });
    }
    // The file may grow while it is read (the process still runs): read
    // no more than the limit.
    let mut bytes = Vec::with_capacity(meta.size() as usize);
    file.take(limits.max_bytes).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The names of one perf map, by address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerfMap {
    /// Disjoint ranges: start → (end, index in `names`).
    ranges: BTreeMap<u64, (u64, u32)>,
    names: Vec<String>,
    malformed: u64,
}

impl PerfMap {
    /// Parses the text of a perf map; malformed lines are skipped and
    /// counted ([`PerfMap::malformed_lines`]).
    pub fn parse(text: &[u8]) -> PerfMap {
        let mut map = PerfMap::default();
        for line in text.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse_line(line) {
                Some((start, end, name)) => map.add(start, end, name),
                None => map.malformed += 1,
            }
        }
        map
    }

    /// The name of the last line covering `avma`.
    pub fn lookup(&self, avma: u64) -> Option<&str> {
        let (_, &(end, name)) = self.ranges.range(..=avma).next_back()?;
        (avma < end).then(|| self.names[name as usize].as_str())
    }

    /// Lines that were not `START SIZE name` with hex numbers, a size
    /// above 0 and a range inside the address space.
    pub fn malformed_lines(&self) -> u64 {
        self.malformed
    }

    /// Whether no line named anything.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Adds `[start, end)`, overriding what earlier lines said there.
    fn add(&mut self, start: u64, end: u64, name: String) {
        let Ok(index) = u32::try_from(self.names.len()) else {
            self.malformed += 1;
            return;
        };
        self.names.push(name);
        // A range that begins before `start` and reaches into it keeps
        // its part before `start`, and its part after `end` if any.
        if let Some((&s, &(e, n))) = self.ranges.range(..start).next_back() {
            if e > start {
                self.ranges.insert(s, (start, n));
                if e > end {
                    self.ranges.insert(end, (e, n));
                }
            }
        }
        // Ranges that begin inside keep only their part after `end`.
        let inside: Vec<u64> = self.ranges.range(start..end).map(|(&s, _)| s).collect();
        for s in inside {
            if let Some((e, n)) = self.ranges.remove(&s) {
                if e > end {
                    self.ranges.insert(end, (e, n));
                }
            }
        }
        self.ranges.insert(start, (end, index));
    }
}

/// `START SIZE name` → (start, end, name), or `None` when malformed.
fn parse_line(line: &[u8]) -> Option<(u64, u64, String)> {
    let mut fields = line.splitn(3, |&b| b == b' ');
    let start = hex(fields.next()?)?;
    let size = hex(fields.next()?)?;
    let name = String::from_utf8_lossy(fields.next()?).trim().to_string();
    let end = start.checked_add(size)?;
    (size > 0 && !name.is_empty()).then_some((start, end, name))
}

/// A hex number, with or without `0x`.
fn hex(field: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(field).ok()?;
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Well-formed lines name their ranges; names keep their spaces.
    #[test]
    fn lookup_by_range() {
        let map = PerfMap::parse(
            b"7f4b8b745b80 270 JS:*touchPagesInJs /x/touch.js:2:24\n\
              7f4b8b746000 10 Builtin:ArgumentsAdaptorTrampoline\r\n\
              \n",
        );
        assert_eq!(map.malformed_lines(), 0);
        let cases: &[(u64, Option<&str>)] = &[
            (0x7f4b_8b74_5b7f, None),
            (
                0x7f4b_8b74_5b80,
                Some("JS:*touchPagesInJs /x/touch.js:2:24"),
            ),
            (
                0x7f4b_8b74_5def,
                Some("JS:*touchPagesInJs /x/touch.js:2:24"),
            ),
            (0x7f4b_8b74_5df0, None),
            (0x7f4b_8b74_600f, Some("Builtin:ArgumentsAdaptorTrampoline")),
            (0x7f4b_8b74_6010, None),
            (0, None),
            (u64::MAX, None),
        ];
        for &(avma, want) in cases {
            assert_eq!(map.lookup(avma), want, "{avma:#x}");
        }
    }

    /// A later line overrides earlier ones where they overlap, and only
    /// there: the last line covering an address names it.
    #[test]
    fn later_lines_override() {
        let map = PerfMap::parse(
            b"1000 100 old_a\n\
              1100 100 old_b\n\
              1080 100 new\n\
              1400 400 outer\n\
              1500 10 inner\n\
              1000 1 first_byte\n",
        );
        let cases: &[(u64, Option<&str>)] = &[
            (0x1000, Some("first_byte")),
            (0x1001, Some("old_a")),
            (0x107f, Some("old_a")),
            (0x1080, Some("new")),
            (0x117f, Some("new")),
            (0x1180, Some("old_b")),
            (0x11ff, Some("old_b")),
            (0x1200, None),
            (0x14ff, Some("outer")),
            (0x1500, Some("inner")),
            (0x150f, Some("inner")),
            (0x1510, Some("outer")),
            (0x17ff, Some("outer")),
            (0x1800, None),
        ];
        for &(avma, want) in cases {
            assert_eq!(map.lookup(avma), want, "{avma:#x}");
        }
    }

    /// Malformed lines are counted and skipped, never a panic.
    #[test]
    fn malformed_lines_are_skipped() {
        let lines: &[&[u8]] = &[
            b"1000",
            b"1000 10",
            b"1000 10 ",
            b"zz 10 name",
            b"1000 -10 name",
            b"1000 0 empty",
            b"ffffffffffffffff 2 wraps",
            b"10000000000000000 1 too_big",
            b" 1000 10 leading_space",
            b"0x 10 no_digits",
            b"\xff\xfe 10 bad_utf8_number",
        ];
        let mut text = Vec::new();
        for line in lines {
            text.extend_from_slice(line);
            text.push(b'\n');
        }
        text.extend_from_slice(b"0x2000 0x10 with_prefix\n3000 10 \xffname\n4000 1 no_newline");
        let map = PerfMap::parse(&text);
        assert_eq!(map.malformed_lines(), lines.len() as u64);
        assert_eq!(map.lookup(0x2000), Some("with_prefix"));
        assert_eq!(map.lookup(0x3000), Some("\u{fffd}name"));
        assert_eq!(map.lookup(0x4000), Some("no_newline"));
        assert!(PerfMap::parse(b"").is_empty());
        assert!(PerfMap::parse(b"\n\n \r\n").is_empty());
    }

    /// Every prefix of a map parses (a file still being written).
    #[test]
    fn truncated_files_parse() {
        let text = b"7f0000001000 40 JS:~a x.js:1:1\n7f0000001040 40 JS:*b x.js:2:1\n";
        for n in 0..=text.len() {
            let map = PerfMap::parse(&text[..n]);
            assert!(map.malformed_lines() <= 1, "{n}");
        }
    }

    /// Links, directories, large files and strangers' files are refused.
    #[test]
    fn read_refuses_what_it_must() {
        let dir = std::env::temp_dir().join(format!("pfprof-perfmap-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("perf-1.map");
        std::fs::write(&file, b"1000 10 f\n").unwrap();
        let link = dir.join("perf-2.map");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let me = own_uid();
        let limits = PerfMapLimits {
            max_bytes: 100,
            owners: vec![me],
        };
        assert_eq!(read_perf_map_file(&file, &limits).unwrap(), b"1000 10 f\n");
        let small = PerfMapLimits {
            max_bytes: 4,
            ..limits.clone()
        };
        assert!(matches!(
            read_perf_map_file(&file, &small),
            Err(PerfMapError::TooLarge { size: 10, limit: 4 })
        ));
        assert!(matches!(
            read_perf_map_file(&link, &limits),
            Err(PerfMapError::NotRegular)
        ));
        assert!(matches!(
            read_perf_map_file(&dir, &limits),
            Err(PerfMapError::NotRegular)
        ));
        assert!(matches!(
            read_perf_map_file(&dir.join("none"), &limits),
            Err(PerfMapError::Missing)
        ));
        // Another owner: chown needs root, which the CI runs as.
        if me == 0 {
            std::os::unix::fs::chown(&file, Some(12345), None).unwrap();
            assert!(matches!(
                read_perf_map_file(&file, &limits),
                Err(PerfMapError::NotOwned { uid: 12345 })
            ));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The effective uid, from the owner of a file we create.
    fn own_uid() -> u32 {
        let path = std::env::temp_dir().join(format!("pfprof-perfmap-uid-{}", std::process::id()));
        std::fs::write(&path, b"").unwrap();
        let uid = std::fs::metadata(&path).unwrap().uid();
        std::fs::remove_file(&path).unwrap();
        uid
    }
}
