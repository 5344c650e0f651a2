//! Size and modification time of every mapped file that has no build-id,
//! taken while recording, so that `report` can tell a file changed since
//! (it then shows addresses, not another build's names).
//!
//! The records pfprof writes pass through [`MappedFiles::scan`]: each MMAP2
//! record without a build-id is looked at once per (path, device, inode),
//! and the file is stat'ed through `/proc/PID/map_files/` (the mapped inode
//! itself, even in another mount namespace or after the path was replaced),
//! else under the process's root, else by its path. Records reach the scan
//! within a poll interval of the mapping (50 ms), so the process and its
//! mapping normally still exist; a file whose mapping and process are both
//! gone by then is stat'ed by its path.
//!
//! With [`MappedFiles::holding`], the scan also opens the file of each
//! executable mapping, once per build-id (or per inode without one),
//! through `/proc/PID/map_files/`, and holds it until the recording ends:
//! the file the process ran, even when it was deleted or replaced since, or
//! lived in another mount namespace, for the build-id cache. At most
//! [`HoldLimit`] files are held; the others are looked up by path later.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustc_hash::FxHashSet;

use crate::format::events::{records, FileId, Mapping, Record};
use crate::format::perf_data::FileStamp;
use crate::format::records as rec;
use crate::sys::maps::MappingPath;
use crate::sys::procfs;

/// Files seen in MMAP2 records, and their stamps.
#[derive(Default)]
pub(crate) struct MappedFiles {
    /// (path, device, inode) already stamped.
    seen: FxHashSet<(Vec<u8>, u32, u32, u64)>,
    /// Path → the distinct stamps seen under it.
    stamps: BTreeMap<String, Vec<FileStamp>>,
    /// (path, build-id) of the records that carry one, for perf's
    /// build-id table.
    /// Path → its build-ids (several when different files were mapped
    /// under one path).
    build_ids: BTreeMap<Vec<u8>, Vec<Vec<u8>>>,
    /// The files held for the build-id cache (None: none are).
    held: Option<Held>,
}

/// A mapped file opened while its process ran.
#[derive(Debug)]
pub struct HeldFile {
    /// The path in the record (the process's own view).
    pub path: String,
    /// The build-id in the record, if it has one (the file may have been
    /// rewritten in place since: the cache reads the id from the file).
    pub build_id: Option<Vec<u8>>,
    /// The file itself.
    pub file: std::fs::File,
}

/// How many files [`MappedFiles`] may hold open.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HoldLimit(pub usize);

#[derive(Debug, Default)]
struct Held {
    limit: usize,
    /// Build-ids and (device, inode) already held or tried.
    build_ids: FxHashSet<Vec<u8>>,
    inodes: FxHashSet<(u32, u32, u64)>,
    files: Vec<HeldFile>,
    /// Executable mappings not held: the limit was reached.
    over_limit: usize,
}

impl Held {
    /// Opens the file mapped at `start..end` of `pid` (a regular file only:
    /// opening a device may have side effects): by its path when that is
    /// the file the record names (`is`), else through map_files.
    fn open(&mut self, pid: u32, (start, len): (u64, u64), path: &[u8], is: Identity<'_>) {
        if self.files.len() >= self.limit {
            self.over_limit += 1;
            return;
        }
        // Looked at before it is opened (a device's open may have side
        // effects), and opened without blocking (a FIFO put in its place
        // meanwhile), then looked at again. A path is not followed if it
        // became a symlink; map_files' entries are links to the inode.
        let open_regular = |p: &Path, follow: bool| {
            use std::os::unix::fs::OpenOptionsExt;
            if !std::fs::metadata(p).ok()?.is_file() {
                return None;
            }
            let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
            let file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | nofollow)
                .open(p)
                .ok()?;
            file.metadata().ok()?.is_file().then_some(file)
        };
        let by_path = by_own_path(pid as i32, path)
            .and_then(|p| open_regular(p, false))
            .filter(|file| is.matches(file));
        let proc_path = || procfs::map_file(pid, start, start.wrapping_add(len));
        let build_id = match is {
            Identity::BuildId(id) => Some(id),
            Identity::Inode { .. } => None,
        };
        if let Some(file) = by_path.or_else(|| open_regular(&proc_path(), true)) {
            self.files.push(HeldFile {
                path: String::from_utf8_lossy(path).into_owned(),
                build_id: build_id.map(<[u8]>::to_vec),
                file,
            });
        }
    }
}

impl MappedFiles {
    /// A scan that also holds the files of executable mappings (at most
    /// `limit` of them).
    pub(crate) fn holding(limit: HoldLimit) -> Self {
        MappedFiles {
            held: Some(Held {
                limit: limit.0,
                ..Held::default()
            }),
            ..MappedFiles::default()
        }
    }

    /// The files held, and how many executable mappings were not held for
    /// the limit.
    pub(crate) fn take_held(&mut self) -> (Vec<HeldFile>, usize) {
        self.held
            .take()
            .map_or((Vec::new(), 0), |h| (h.files, h.over_limit))
    }

    /// Looks at a run of whole records (the drain counts what is not
    /// whole; it never reaches here).
    pub(crate) fn scan(&mut self, bytes: &[u8]) {
        for record in records(bytes).map_while(Result::ok) {
            self.look(&record);
        }
    }

    /// Looks at one record, as the drain hands them out.
    pub(crate) fn look(&mut self, record: &Record<'_>) {
        if record.head.record_type == rec::MMAP2 {
            if let Some(mapping) = Mapping::parse(rec::MMAP2, record.head.misc, record.body()) {
                self.mapping(&mapping);
            }
        }
    }

    /// An MMAP2 record: its build-id noted, or its file stamped; the file
    /// of an executable mapping held.
    fn mapping(&mut self, m: &Mapping<'_>) {
        let executable = m.prot & libc::PROT_EXEC as u32 != 0;
        let (pid, path) = (m.pid as u32, m.path);
        let (major, minor, inode) = match m.file {
            // The build-id says which file it was: no stamp needed.
            FileId::BuildId(id) => {
                if MappingPath::of(path) == MappingPath::File && !id.is_empty() {
                    self.build_id(m, id, executable);
                }
                return;
            }
            FileId::Inode {
                major,
                minor,
                inode,
                ..
            } => (major, minor, inode),
            FileId::Unknown => return,
        };
        if MappingPath::of(path) != MappingPath::File || inode == 0 {
            return;
        }
        if let (true, Some(held)) = (executable, self.held.as_mut()) {
            if held.inodes.insert((major, minor, inode)) {
                let is = Identity::Inode {
                    major,
                    minor,
                    inode,
                };
                held.open(pid, (m.avma, m.len), path, is);
            }
        }
        if !self.seen.insert((path.to_vec(), major, minor, inode)) {
            return;
        }
        let end = m.avma.wrapping_add(m.len);
        let Some(stamp) = stamp(pid as i32, (m.avma, end), path, (major, minor, inode)) else {
            return;
        };
        let stamps = self
            .stamps
            .entry(String::from_utf8_lossy(path).into_owned())
            .or_default();
        if !stamps.contains(&stamp) {
            stamps.push(stamp);
        }
    }

    /// A mapping of a file with build-id `id`: in the build-id table (once
    /// per path and id), and held once per id when executable.
    fn build_id(&mut self, m: &Mapping<'_>, id: &[u8], executable: bool) {
        if let (true, Some(held)) = (executable, self.held.as_mut()) {
            if held.build_ids.insert(id.to_vec()) {
                let is = Identity::BuildId(id);
                held.open(m.pid as u32, (m.avma, m.len), m.path, is);
            }
        }
        match self.build_ids.get_mut(m.path) {
            Some(ids) if ids.iter().any(|i| i == id) => {}
            Some(ids) => ids.push(id.to_vec()),
            None => {
                self.build_ids.insert(m.path.to_vec(), vec![id.to_vec()]);
            }
        }
    }

    /// Path → stamps, for the recording's metadata.
    pub(crate) fn into_stamps(self) -> BTreeMap<String, Vec<FileStamp>> {
        self.stamps
    }

    /// (path, build-id) of every file mapped with one, in path order.
    pub(crate) fn build_ids(&self) -> impl Iterator<Item = (String, &[u8])> {
        self.build_ids.iter().flat_map(|(path, ids)| {
            ids.iter()
                .map(|id| (String::from_utf8_lossy(path).into_owned(), &id[..]))
        })
    }
}

/// Which file a mapping record names.
#[derive(Clone, Copy)]
enum Identity<'a> {
    BuildId(&'a [u8]),
    Inode { major: u32, minor: u32, inode: u64 },
}

impl Identity<'_> {
    /// Whether `file` is that file.
    fn matches(self, file: &std::fs::File) -> bool {
        match self {
            // The file opened, not whatever the path names by now.
            Identity::BuildId(id) => crate::sys::MappedFile::new(file)
                .ok()
                .and_then(|map| pfprof_symbolize::image_build_id(&map))
                .is_some_and(|found| found == id),
            Identity::Inode {
                major,
                minor,
                inode,
            } => file
                .metadata()
                .is_ok_and(|m| same_inode(&m, (major, minor, inode))),
        }
    }
}

/// Whether `meta` is of inode `inode` on device `major:minor`.
fn same_inode(meta: &std::fs::Metadata, (major, minor, inode): (u32, u32, u64)) -> bool {
    meta.ino() == inode && libc::major(meta.dev()) == major && libc::minor(meta.dev()) == minor
}

/// `path` as pfprof reaches it, when `pid` sees the same files (its root
/// and mount namespace are pfprof's). Tried before `/proc/PID/map_files`:
/// a lookup there takes the process's mmap lock, and a drain once waited
/// 40-50 ms on it in a fork storm, while the process holding it (forking)
/// waited for a CPU.
fn by_own_path(pid: i32, path: &[u8]) -> Option<&Path> {
    use std::os::unix::ffi::OsStrExt;
    (!procfs::other_root(pid)).then(|| Path::new(std::ffi::OsStr::from_bytes(path)))
}

/// Size and mtime of the file mapped at `start..end` in `pid`: the file
/// by its path when it is the record's inode, else the mapped inode if it
/// can be reached, else the file by path (under the process's root when it
/// has another).
fn stamp(
    pid: i32,
    (start, end): (u64, u64),
    path: &[u8],
    id: (u32, u32, u64),
) -> Option<FileStamp> {
    use std::os::unix::ffi::OsStrExt;
    let inode = id.2;
    if let Some(meta) = by_own_path(pid, path).and_then(|p| std::fs::metadata(p).ok()) {
        if meta.is_file() && same_inode(&meta, id) {
            return Some(FileStamp::of(&meta));
        }
    }
    let own = Path::new(std::ffi::OsStr::from_bytes(path));
    let candidates = procfs::mapped_file_candidates(pid, own, &(start..end));
    candidates.iter().find_map(|(p, reach)| {
        let meta = std::fs::metadata(p).ok()?;
        // map_files is the mapped file itself (its inode may differ from the
        // record's on overlayfs). By path, only the same inode counts: else
        // the file was replaced already, and the report must not trust it.
        let same = *reach == procfs::Reach::MappedInode || meta.ino() == inode;
        (meta.is_file() && same).then(|| FileStamp::of(&meta))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::synth;
    use crate::sys::maps::MapsLine;

    /// Records in runs of any length are all seen; the file is stamped by
    /// its path when the process is gone, with its own size and mtime, and
    /// only once.
    #[test]
    fn stamps_files_across_cuts() {
        let dir = crate::test_dir("files");
        let file = dir.join("lib.so");
        std::fs::write(&file, b"0123456789").unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let m = MapsLine::of_file(&file, meta.ino());
        // A pid that cannot exist: only the path reaches the file.
        let pid = i32::MAX;
        let mut stream = synth::comm(pid, pid, "app", 1, 1);
        stream.extend(synth::mmap2(pid, &m, 2, 1));
        stream.extend(synth::mmap2_with(pid, &m, Some(&[1; 20]), 3, 1));
        stream.extend(synth::mmap2_with(pid, &m, Some(&[1; 20]), 3, 1));
        stream.extend(synth::mmap2(pid, &m, 4, 1));
        let anon = MapsLine {
            path: "//anon".into(),
            ..m.clone()
        };
        stream.extend(synth::mmap2(pid, &anon, 5, 1));
        let other_inode = MapsLine {
            inode: meta.ino() + 1,
            ..m.clone()
        };
        stream.extend(synth::mmap2(pid, &other_inode, 6, 1));
        // Runs of any number of whole records, as the drain hands them out.
        let ends: Vec<usize> = records(&stream)
            .map(|r| r.unwrap().bytes.len())
            .scan(0, |end, len| {
                *end += len;
                Some(*end)
            })
            .collect();
        for cuts in [
            vec![],
            vec![ends[0]],
            vec![ends[1], ends[2], ends[4]],
            ends.clone(),
        ] {
            let mut files = MappedFiles::default();
            let mut last = 0;
            for cut in cuts.into_iter().chain([stream.len()]) {
                files.scan(&stream[last..cut]);
                last = cut;
            }
            // The record with a build-id is in the build-id table, once.
            let ids: Vec<(String, &[u8])> = files.build_ids().collect();
            assert_eq!(ids, [(m.path.clone(), &[1u8; 20][..])]);
            let stamps = files.into_stamps();
            // The record with another inode is not this file: not stamped.
            assert_eq!(stamps.len(), 1, "{stamps:?}");
            assert_eq!(stamps[m.path.as_str()], vec![FileStamp::of(&meta)]);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The file of an executable mapping is held once per build-id, read
    /// through map_files (the process's own file); past the limit it is
    /// counted, not held; data mappings are not held.
    #[test]
    fn holds_executable_mappings_once() {
        let maps = crate::sys::maps::parse(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let text = maps
            .iter()
            .find(|m| m.prot & 4 != 0 && m.path.starts_with('/') && m.inode != 0)
            .expect("an executable file mapping")
            .clone();
        let data = MapsLine {
            prot: 1,
            ..text.clone()
        };
        let pid = std::process::id() as i32;
        let mut stream = synth::mmap2_with(pid, &text, Some(&[9; 20]), 1, 1);
        stream.extend(synth::mmap2_with(pid, &text, Some(&[9; 20]), 2, 1));
        stream.extend(synth::mmap2_with(pid, &data, Some(&[8; 20]), 3, 1));
        stream.extend(synth::mmap2(pid, &text, 4, 1));
        let mut files = MappedFiles::holding(HoldLimit(8));
        files.scan(&stream);
        let (held, not_held) = files.take_held();
        // The build-id record and the inode record: the same file twice.
        assert_eq!(held.len(), 2, "{held:?}");
        assert_eq!(not_held, 0);
        assert_eq!(held[0].build_id.as_deref(), Some(&[9u8; 20][..]));
        assert_eq!(held[1].build_id, None);
        for h in &held {
            assert_eq!(h.path, text.path);
            assert_eq!(h.file.metadata().unwrap().ino(), text.inode);
        }
        let mut files = MappedFiles::holding(HoldLimit(1));
        files.scan(&stream);
        let (held, not_held) = files.take_held();
        assert_eq!((held.len(), not_held), (1, 1));
    }
}
