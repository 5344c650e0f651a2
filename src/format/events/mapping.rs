//! A mapping record as one view, read and written here only: MMAP2 (the
//! kernel's, and pfprof's own for processes that already run) and the old
//! MMAP (perf's record of the kernel's text). Replay, the DWARF rewriter
//! and the stamps of mapped files all read it through [`Mapping::parse`].

use crate::format::events::stream::{le_u32, le_u64, HEAD_BYTES};
use crate::format::records as rec;

/// How a mapping names its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileId<'a> {
    /// The GNU build-id (`PERF_RECORD_MISC_MMAP_BUILD_ID`), as the kernel or
    /// pfprof's drain read it; empty where the kernel found none (the vDSO,
    /// a file without the note).
    BuildId(&'a [u8]),
    /// Device and inode (MMAP2 without a build-id).
    Inode {
        /// Device major.
        major: u32,
        /// Device minor.
        minor: u32,
        /// Inode number.
        inode: u64,
        /// Inode generation (0: unknown).
        generation: u64,
    },
    /// An MMAP record says neither.
    Unknown,
}

/// A mapping record's fields (its `sample_id` trailer aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping<'a> {
    /// Process.
    pub pid: i32,
    /// Thread.
    pub tid: i32,
    /// Start address.
    pub avma: u64,
    /// Length in bytes.
    pub len: u64,
    /// Offset of the mapping in its file.
    pub file_offset: u64,
    /// Which file.
    pub file: FileId<'a>,
    /// `PROT_*` bits (of an MMAP record: read, and exec unless it is data).
    pub prot: u32,
    /// `MAP_*` bits (of an MMAP record: private).
    pub flags: u32,
    /// The path, or `//anon`, `[heap]`, `[vdso]`... (up to its NUL; all
    /// that follows when it has none, as perf reads it).
    pub path: &'a [u8],
}

/// Bytes of the file id of an MMAP2 record: maj, min, ino, ino_generation,
/// or build-id size, 3 reserved, the build-id.
const FILE_ID_BYTES: usize = 24;

/// Writes `id` into the MMAP2 `record` (header first) in place of its
/// device and inode, and sets the header's build-id flag: the record the
/// kernel writes with `attr.build_id`. False, nothing written, when the
/// record is too short or the id longer than a record holds.
pub fn put_build_id(record: &mut [u8], id: &[u8]) -> bool {
    let at = HEAD_BYTES + 32;
    if id.len() > rec::BUILD_ID_SIZE_MAX || record.len() < at + FILE_ID_BYTES {
        return false;
    }
    let field = &mut record[at..at + FILE_ID_BYTES];
    field.fill(0);
    field[0] = id.len() as u8;
    field[4..4 + id.len()].copy_from_slice(id);
    // The header: type (u32), misc (u16), size (u16).
    let misc = u16::from_le_bytes([record[4], record[5]]) | rec::MISC_MMAP_BUILD_ID;
    record[4..6].copy_from_slice(&misc.to_le_bytes());
    true
}

impl<'a> Mapping<'a> {
    /// The mapping of an MMAP or MMAP2 record (its header's `misc`, its
    /// body); None for another type, a body cut short, or a build-id
    /// longer than a record holds.
    pub fn parse(record_type: u32, misc: u16, body: &'a [u8]) -> Option<Mapping<'a>> {
        let (pid, tid) = (le_u32(body, 0)? as i32, le_u32(body, 4)? as i32);
        let (avma, len, file_offset) = (le_u64(body, 8)?, le_u64(body, 16)?, le_u64(body, 24)?);
        let (file, prot, flags, path_at) = match record_type {
            rec::MMAP2 => {
                let file = FileId::parse(misc, body.get(32..32 + FILE_ID_BYTES)?)?;
                let at = 32 + FILE_ID_BYTES;
                (file, le_u32(body, at)?, le_u32(body, at + 4)?, at + 8)
            }
            rec::MMAP => {
                let exec = if misc & rec::MISC_MMAP_DATA == 0 {
                    libc::PROT_EXEC as u32
                } else {
                    0
                };
                let prot = libc::PROT_READ as u32 | exec;
                (FileId::Unknown, prot, libc::MAP_PRIVATE as u32, 32)
            }
            _ => return None,
        };
        let rest = body.get(path_at..)?;
        let path = &rest[..rest.iter().position(|&b| b == 0).unwrap_or(rest.len())];
        Some(Mapping {
            pid,
            tid,
            avma,
            len,
            file_offset,
            file,
            prot,
            flags,
            path,
        })
    }

    /// The build-id, when the record has one (an empty one is none: the
    /// kernel found no note, and the file is then known by its path).
    pub fn build_id(&self) -> Option<&'a [u8]> {
        match self.file {
            FileId::BuildId(id) if !id.is_empty() => Some(id),
            _ => None,
        }
    }

    /// The header's `misc` of this mapping as an MMAP2 record of a user
    /// process: data unless executable, and whether it holds a build-id.
    pub fn mmap2_misc(&self) -> u16 {
        let mut misc = rec::MISC_USER;
        if self.prot & libc::PROT_EXEC as u32 == 0 {
            misc |= rec::MISC_MMAP_DATA;
        }
        if matches!(self.file, FileId::BuildId(_)) {
            misc |= rec::MISC_MMAP_BUILD_ID;
        }
        misc
    }

    /// Appends the body of the MMAP2 record (what follows the header, up to
    /// the `sample_id` trailer), as the kernel writes it.
    pub fn write_mmap2(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.tid.to_le_bytes());
        for value in [self.avma, self.len, self.file_offset] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        match self.file {
            FileId::BuildId(id) => {
                let id = &id[..id.len().min(rec::BUILD_ID_SIZE_MAX)];
                out.push(id.len() as u8);
                out.extend_from_slice(&[0u8; 3]);
                out.extend_from_slice(id);
                out.resize(out.len() + rec::BUILD_ID_SIZE_MAX - id.len(), 0);
            }
            FileId::Inode {
                major,
                minor,
                inode,
                generation,
            } => {
                out.extend_from_slice(&major.to_le_bytes());
                out.extend_from_slice(&minor.to_le_bytes());
                out.extend_from_slice(&inode.to_le_bytes());
                out.extend_from_slice(&generation.to_le_bytes());
            }
            FileId::Unknown => out.extend_from_slice(&[0u8; FILE_ID_BYTES]),
        }
        out.extend_from_slice(&self.prot.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
        put_string(out, self.path);
    }
}

impl<'a> FileId<'a> {
    /// The 24 bytes of an MMAP2 record's file id.
    fn parse(misc: u16, bytes: &'a [u8]) -> Option<FileId<'a>> {
        if misc & rec::MISC_MMAP_BUILD_ID == 0 {
            return Some(FileId::Inode {
                major: le_u32(bytes, 0)?,
                minor: le_u32(bytes, 4)?,
                inode: le_u64(bytes, 8)?,
                generation: le_u64(bytes, 16)?,
            });
        }
        let len = usize::from(*bytes.first()?);
        (len <= rec::BUILD_ID_SIZE_MAX).then(|| FileId::BuildId(&bytes[4..4 + len]))
    }
}

/// Appends `s` NUL-terminated, padded with NULs to 8 bytes, as the kernel
/// writes a record's strings (the record's length stays a multiple of 8
/// when `out` holds one record from its header on).
pub fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(s);
    out.push(0);
    out.resize(out.len().next_multiple_of(8), 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(file: FileId<'static>) -> Mapping<'static> {
        Mapping {
            pid: 7,
            tid: 7,
            avma: 0x1000,
            len: 0x2000,
            file_offset: 0x3000,
            file,
            prot: 5,
            flags: 2,
            path: b"/usr/lib/libc.so.6",
        }
    }

    /// An MMAP2 body written reads back the same, with a build-id (any
    /// length up to 20) or an inode; its misc says which, and data or not.
    #[test]
    fn mmap2_round_trips() {
        let inode = FileId::Inode {
            major: 0xfe,
            minor: 1,
            inode: 1049,
            generation: 3,
        };
        for file in [
            FileId::BuildId(&[0xab; 20]),
            FileId::BuildId(&[1, 2, 3]),
            inode,
        ] {
            let mapping = lib(file);
            let mut body = Vec::new();
            mapping.write_mmap2(&mut body);
            assert_eq!(body.len() % 8, 0);
            let misc = mapping.mmap2_misc();
            assert_eq!(Mapping::parse(rec::MMAP2, misc, &body), Some(mapping));
            assert_eq!(misc & rec::MISC_MMAP_DATA, 0);
        }
        let data = Mapping {
            prot: 3,
            ..lib(inode)
        };
        assert_ne!(data.mmap2_misc() & rec::MISC_MMAP_DATA, 0);
    }

    /// An empty build-id is none (the kernel found no note), the same for
    /// every reader; one longer than the record holds, or a body cut
    /// short, is no mapping; a path without its NUL runs to the end.
    #[test]
    fn reads_what_the_kernel_may_write() {
        let mut body = Vec::new();
        lib(FileId::BuildId(&[])).write_mmap2(&mut body);
        let misc = rec::MISC_USER | rec::MISC_MMAP_BUILD_ID;
        let empty = Mapping::parse(rec::MMAP2, misc, &body).unwrap();
        assert_eq!((empty.file, empty.build_id()), (FileId::BuildId(&[]), None));
        let mut long = body.clone();
        long[32] = 21;
        assert_eq!(Mapping::parse(rec::MMAP2, misc, &long), None);
        assert_eq!(Mapping::parse(rec::MMAP2, misc, &body[..60]), None);
        let unterminated = &body[..64 + 5];
        let got = Mapping::parse(rec::MMAP2, misc, unterminated).unwrap();
        assert_eq!(got.path, b"/usr/");
        assert_eq!(Mapping::parse(rec::COMM, misc, &body), None);
    }

    /// An MMAP record (perf's kernel text) has no file id: executable
    /// unless its misc says data, private, its path after the offset.
    #[test]
    fn reads_mmap_records() {
        let mut body = Vec::new();
        body.extend_from_slice(&(-1i32).to_le_bytes());
        body.extend_from_slice(&0i32.to_le_bytes());
        for v in [0x1000u64, 0x2000, 0x1000] {
            body.extend_from_slice(&v.to_le_bytes());
        }
        put_string(&mut body, b"[kernel.kallsyms]_text");
        let got = Mapping::parse(rec::MMAP, rec::MISC_KERNEL, &body).unwrap();
        assert_eq!(
            (got.pid, got.tid, got.avma, got.len),
            (-1, 0, 0x1000, 0x2000)
        );
        assert_eq!(
            (got.file, got.path),
            (FileId::Unknown, &b"[kernel.kallsyms]_text"[..])
        );
        assert_eq!(got.prot, (libc::PROT_READ | libc::PROT_EXEC) as u32);
        let data = Mapping::parse(rec::MMAP, rec::MISC_MMAP_DATA, &body).unwrap();
        assert_eq!(data.prot, libc::PROT_READ as u32);
    }
}
