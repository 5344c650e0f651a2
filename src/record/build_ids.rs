//! The GNU build-ids of the files processes map, read by pfprof: for the
//! mappings of processes that already run ([`super::synth`]), and for the
//! kernel's MMAP2 records, which arrive without one ([`BuildIds::fill`]).
//!
//! The kernel can write the build-id into MMAP2 records itself
//! (`attr.build_id`, 5.12), but its mmap output sets the build-id flag in
//! the record header it shares with every event the mapping goes to next,
//! and leaves it set: a `perf record` running beside pfprof then read
//! maj/min/ino as a build-id of 254 bytes and died. So pfprof asks for
//! device and inode, and the drain reads the build-id of each new file
//! once, through `/proc/PID/map_files/` while the mapping exists (within a
//! poll interval of the mmap), else by its path when that still names the
//! same inode. A file it cannot read keeps its device and inode (the
//! report then knows it by its stamp, see [`super::files`]), and so does a
//! file whose first page is not in the page cache: reading it would make
//! the traced program's own major faults on it minor.

use std::collections::hash_map::Entry;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use rustc_hash::FxHashMap;

use crate::format::events::stream::HEAD_BYTES;
use crate::format::events::{put_build_id, FileId, Mapping, RecordHead};
use crate::format::records as rec;
use crate::sys::maps::{MappingPath, MapsLine};

/// A file's device (major, minor) and inode.
type Inode = ((u32, u32), u64);

/// GNU build-ids by (device, inode), each read once: system-wide, every
/// process maps the same libc.
#[derive(Default)]
pub(crate) struct BuildIds {
    by_inode: FxHashMap<Inode, Option<Vec<u8>>>,
}

impl BuildIds {
    /// The build-id of the file mapped at `m` in `pid` (see [`Self::read`]).
    pub(crate) fn of(&mut self, pid: i32, m: &MapsLine) -> Option<Vec<u8>> {
        let at = (pid, m.start_avma, m.end_avma);
        self.read(at, m.path.as_bytes(), (m.dev, m.inode))
            .map(<[u8]>::to_vec)
    }

    /// The build-id of the file `pid` maps at `start..end` from `path`,
    /// once per file (see [`reach`]); None when the file has none or could
    /// not be reached (asked again for the next record of that file).
    fn read(
        &mut self,
        (pid, start, end): (i32, u64, u64),
        path: &[u8],
        file: Inode,
    ) -> Option<&[u8]> {
        if MappingPath::of(path) != MappingPath::File || file.1 == 0 {
            return None;
        }
        match self.by_inode.entry(file) {
            Entry::Occupied(known) => known.into_mut().as_deref(),
            Entry::Vacant(new) => new
                .insert(reach((pid, start, end), path, file.1)?)
                .as_deref(),
        }
    }

    /// `record` with the build-id of its file in place of its device and
    /// inode, written into `out` (cleared first); false, `out` untouched,
    /// when it is not an MMAP2 record of a file, already has a build-id,
    /// or its file's cannot be read.
    pub(crate) fn fill(&mut self, record: &[u8], out: &mut Vec<u8>) -> bool {
        let Some(head) = RecordHead::parse(record) else {
            return false;
        };
        if head.record_type != rec::MMAP2 {
            return false;
        }
        let Some(m) = Mapping::parse(rec::MMAP2, head.misc, &record[HEAD_BYTES..]) else {
            return false;
        };
        let FileId::Inode {
            major,
            minor,
            inode,
            ..
        } = m.file
        else {
            return false;
        };
        let at = (m.pid, m.avma, m.avma.saturating_add(m.len));
        let Some(id) = self.read(at, m.path, ((major, minor), inode)) else {
            return false;
        };
        if id.is_empty() || id.len() > rec::BUILD_ID_SIZE_MAX {
            return false;
        }
        out.clear();
        out.extend_from_slice(record);
        put_build_id(out, id)
    }
}

/// The build-id of the file `pid` maps at `start..end` (`Some(None)`: it
/// has none), read through `/proc/PID/map_files/`: that reaches the mapped
/// inode itself even when the path was since replaced or deleted, or names
/// a file in another mount namespace. The kernel's first record of an
/// executable covers the whole image, which the loader then splits: the
/// mapping that now holds `start` is read when it is the same inode. When
/// the process is gone (a compiler of a build exits in milliseconds), the
/// path's, if it still names that inode. None: the file cannot be reached.
fn reach((pid, start, end): (i32, u64, u64), path: &[u8], inode: u64) -> Option<Option<Vec<u8>>> {
    // Only regular files: mapping a device to look for a note could have
    // side effects. (The exact mapping's inode is not compared with the
    // record's: on overlayfs they may differ.)
    let exact = crate::sys::procfs::map_file(pid, start, end);
    if let Ok(meta) = std::fs::metadata(&exact) {
        return Some(meta.is_file().then(|| build_id_if_cached(&exact)).flatten());
    }
    let same = |candidate: &Path| {
        std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.ino() == inode)
    };
    if let Some(covering) = covering_map_file(pid, start).filter(|c| same(c)) {
        return Some(build_id_if_cached(&covering));
    }
    use std::os::unix::ffi::OsStrExt;
    let path = Path::new(std::ffi::OsStr::from_bytes(path));
    same(path).then(|| build_id_if_cached(path))
}

/// The build-id of the ELF file at `path`, when its first page is in the
/// page cache (the loader read it before mapping: every program and
/// library). A file whose first page is not there is a data file mapped
/// before it was read, or not read yet: reading it would bring its pages in
/// (with readahead) and make the program's own first faults on it minor. A
/// program that maps a 64-page file and reads it 100 ms later had 0 major
/// faults of 64 when the drain read the file first. Such a file has no
/// build-id here; the report knows it by its stamp. The kernel tells
/// pfprof what is cached only for files it owns or may write (root: all);
/// others are read as before.
fn build_id_if_cached(path: &Path) -> Option<Vec<u8>> {
    // Not blocking on a FIFO put in the file's place since it was looked at.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    let euid = crate::sys::euid();
    let answered = euid == 0 || file.metadata().is_ok_and(|m| m.uid() == euid);
    // One mapping answers both: whether the page is cached (untouched so
    // far), then the build-id of the file opened (not the path again).
    let map = crate::sys::MappedFile::new(&file).ok()?;
    if answered && !map.first_page_cached().unwrap_or(true) {
        return None;
    }
    pfprof_symbolize::image_build_id(&map)
}

/// `/proc/PID/map_files/START-END` of the mapping that holds `avma` now.
fn covering_map_file(pid: i32, avma: u64) -> Option<std::path::PathBuf> {
    let dir = format!("/proc/{pid}/map_files");
    std::fs::read_dir(&dir).ok()?.find_map(|entry| {
        let name = entry.ok()?.file_name();
        let (from, to) = name.to_str()?.split_once('-')?;
        let range = u64::from_str_radix(from, 16).ok()?..u64::from_str_radix(to, 16).ok()?;
        range.contains(&avma).then(|| Path::new(&dir).join(&name))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::synth;

    fn exe_line(inode: u64) -> MapsLine {
        MapsLine::of_file(&std::env::current_exe().unwrap(), inode)
    }

    /// A data file whose pages are not in the page cache (file_major's,
    /// just written and dropped) is not read: no build-id, and its pages
    /// stay out of the cache for the program's major faults. A running
    /// program's file (the test binary: its first page is cached) has its
    /// build-id.
    #[test]
    fn files_not_cached_are_not_read() {
        use std::io::Write;
        let exe = std::env::current_exe().unwrap();
        let path = exe.with_file_name(format!("pfprof-uncached-{}", std::process::id()));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&[1u8; 64 * 4096]).unwrap();
        file.sync_all().unwrap();
        crate::sys::forget_cached(&file).unwrap();
        assert_eq!(build_id_if_cached(&path), None);
        let reading = std::fs::File::open(&path).unwrap();
        let still = crate::sys::MappedFile::new(&reading).and_then(|m| m.first_page_cached());
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            still.ok(),
            Some(false),
            "the file's first page was read into the cache"
        );
        let want = pfprof_symbolize::read_build_id(&exe);
        assert!(want.is_some());
        assert_eq!(build_id_if_cached(&exe), want);
    }

    /// A process gone before its build-ids were read (a compiler of a
    /// build): the path's, while it names the mapped inode; else none.
    #[test]
    fn build_ids_of_a_gone_process_come_from_its_path() {
        let exe = std::env::current_exe().unwrap();
        let want = pfprof_symbolize::read_build_id(&exe);
        assert!(want.is_some(), "the test binary has a build-id");
        let inode = std::fs::metadata(&exe).unwrap().ino();
        let gone = i32::MAX; // no such pid
        assert_eq!(BuildIds::default().of(gone, &exe_line(inode)), want);
        // Another inode at that path now: not the file that was mapped.
        assert_eq!(BuildIds::default().of(gone, &exe_line(inode + 1)), None);
    }

    /// The kernel's record of a mapping, device and inode, comes out as
    /// the one it writes with `attr.build_id`: the same bytes but the file
    /// id and the header's flag.
    #[test]
    fn fill_writes_the_build_id_in_place() {
        let exe = std::env::current_exe().unwrap();
        let want = pfprof_symbolize::read_build_id(&exe).unwrap();
        let line = exe_line(std::fs::metadata(&exe).unwrap().ino());
        let gone = i32::MAX;
        let kernel = synth::mmap2(gone, &line, 7, 3);
        let mut out = Vec::new();
        assert!(BuildIds::default().fill(&kernel, &mut out));
        assert_eq!(out, synth::mmap2_with(gone, &line, Some(&want), 7, 3));
        // Already a build-id, another record type, a file it cannot read:
        // unchanged.
        let mut ids = BuildIds::default();
        assert!(!ids.fill(&out.clone(), &mut out));
        assert!(!ids.fill(&synth::comm(gone, gone, "x", 1, 3), &mut out));
        let elsewhere = MapsLine {
            inode: line.inode + 1,
            ..line
        };
        assert!(!ids.fill(&synth::mmap2(gone, &elsewhere, 7, 3), &mut out));
    }
}
