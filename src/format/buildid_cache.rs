//! The build-id cache: copies of the ELF files a recording names, keyed by
//! build-id in perf's layout (`ROOT/.build-id/xx/yyyy…/elf`, `ROOT` being
//! `~/.debug` or `--buildid-dir`), so that `report` names code right after
//! the file was rebuilt, deleted, or lived in another mount namespace, and
//! `perf report` finds the same files. `archive` fills a recording
//! directory's own `.build-id` the same way, so that the directory names
//! its code on a machine without the files. Beside `elf`, `record` stores
//! a compressed separate debug file's plain copy as `debug` (perf's name
//! for a debug file), which the symbolizer then maps instead of inflating
//! the DWARF again on each run.
//!
//! How it writes, as everything pfprof writes: directories are created or
//! must be real directories (not links) owned by root or the cache's owner;
//! a file goes in under a temporary name (`O_CREAT|O_EXCL|O_NOFOLLOW`) and
//! is hard-linked to `elf` (or `debug`), which fails on anything already there: an entry
//! (perf's link included) is never replaced. Entries pfprof creates belong
//! to the owner of `ROOT`. New entries stop once the regular files under
//! `ROOT/.build-id` reach the size limit; nothing is ever deleted.

use std::fs::File;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use pfprof_symbolize::build_id_dir;

/// The default size limit of the cache's `.build-id` tree.
pub const DEFAULT_LIMIT_BYTES: u64 = 4 << 30;

/// `~/.debug`, perf's default cache (`$HOME` of the user pfprof runs as;
/// none without a `HOME`): the symbolizer's default too.
pub use pfprof_symbolize::default_build_id_cache as default_root;

/// What [`Cache::store`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// The file was copied in (its size in bytes).
    Added(u64),
    /// The cache had an entry for the build-id already.
    Present,
    /// The copy would take the cache past its size limit.
    OverLimit,
    /// The build-id's entry is a link (perf's), which pfprof does not
    /// write through: a `debug` entry is not added to it.
    LinkedEntry,
}

/// A build-id cache pfprof may add to.
#[derive(Debug)]
pub struct Cache {
    root: PathBuf,
    limit_bytes: u64,
    /// Bytes of regular files under `.build-id`, counted on first need.
    used_bytes: Option<u64>,
    /// Who owns what pfprof creates here: the owner of `root`.
    owner: (u32, u32),
}

impl Cache {
    /// The cache at `root`, created when missing (its parent must exist).
    /// A link, a file, or a directory owned by someone other than root,
    /// pfprof's user or the user who ran `sudo` is refused.
    pub fn open(root: &Path, limit_bytes: u64) -> io::Result<Cache> {
        if let Err(e) = std::fs::symlink_metadata(root) {
            if e.kind() != io::ErrorKind::NotFound {
                return Err(e);
            }
            match std::fs::DirBuilder::new().mode(0o755).create(root) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                other => other?,
            }
            // Owned like the directory it is in, when that is the user
            // who ran sudo (`sudo -E`, HOME kept).
            if let Some(u) = crate::user::invoking_user() {
                let parent = root.parent().and_then(|p| std::fs::metadata(p).ok());
                if parent.is_some_and(|p| p.uid() == u.uid) {
                    std::os::unix::fs::lchown(root, Some(u.uid), Some(u.gid))?;
                }
            }
        }
        let meta = real_dir(root)?;
        if !crate::user::is_trusted_owner(meta.uid()) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} belongs to user {}, not to pfprof's user",
                    root.display(),
                    meta.uid()
                ),
            ));
        }
        Ok(Cache {
            root: root.to_path_buf(),
            limit_bytes,
            used_bytes: None,
            owner: (meta.uid(), meta.gid()),
        })
    }

    /// The cache's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the cache holds an entry for `build_id` (perf's or pfprof's).
    pub fn contains(&self, build_id: &[u8]) -> bool {
        build_id_dir(&self.root, build_id).is_some_and(|dir| dir.join("elf").exists())
    }

    /// Copies `source` (an open ELF file whose build-id the caller checked
    /// to be `build_id`) into the cache, unless an entry is there already or
    /// the copy would pass the size limit.
    pub fn store(&mut self, build_id: &[u8], source: &File) -> io::Result<Stored> {
        if self.contains(build_id) {
            return Ok(Stored::Present);
        }
        let size = source.metadata()?.len();
        self.store_entry(build_id, "elf", size, |out| {
            // Through a second description, so that the caller's offset stays.
            let mut from = File::open(crate::sys::procfs::fd_path(fd_of(source)))?;
            io::copy(&mut from, out)
        })
    }

    /// Stores `bytes` as the entry `debug` of `build_id` (perf's name for a
    /// separate debug file: the caller's is the debug file of that build
    /// with its DWARF stored plain), unless there is one already or it
    /// would pass the size limit.
    pub fn store_debug(&mut self, build_id: &[u8], bytes: &[u8]) -> io::Result<Stored> {
        if self.is_linked_entry(build_id) {
            return Ok(Stored::LinkedEntry);
        }
        self.store_entry(build_id, "debug", bytes.len() as u64, |out| {
            io::Write::write_all(out, bytes).map(|()| bytes.len() as u64)
        })
    }

    /// Whether [`Cache::store_debug`] would add an entry for `build_id`
    /// (the size limit aside): none is there, and the build-id's entry is
    /// not perf's link. Asked before the caller builds the entry's bytes.
    pub fn wants_debug(&self, build_id: &[u8]) -> bool {
        let present = pfprof_symbolize::cached_debug_file(&self.root, build_id)
            .is_some_and(|path| std::fs::symlink_metadata(path).is_ok());
        !present && !self.is_linked_entry(build_id)
    }

    /// Whether the build-id's entry is a link (perf's).
    fn is_linked_entry(&self, build_id: &[u8]) -> bool {
        build_id_dir(&self.root, build_id)
            .is_some_and(|dir| std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_symlink()))
    }

    /// Writes the entry `name` of `build_id` (`size` bytes, by `write`)
    /// under a temporary name, then links it in: an entry already there
    /// is left as it was.
    fn store_entry(
        &mut self,
        build_id: &[u8],
        name: &str,
        size: u64,
        write: impl FnOnce(&mut File) -> io::Result<u64>,
    ) -> io::Result<Stored> {
        let Some(dir) = build_id_dir(&self.root, build_id) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a build-id of fewer than 2 bytes",
            ));
        };
        let used = match self.used_bytes {
            Some(used) => used,
            None => *self
                .used_bytes
                .insert(tree_bytes(&self.root.join(".build-id"))),
        };
        if used.saturating_add(size) > self.limit_bytes {
            return Ok(Stored::OverLimit);
        }
        let tree = self.root.join(".build-id");
        let fan_out = dir.parent().unwrap_or(&tree).to_path_buf();
        for d in [&tree, &fan_out, &dir] {
            self.ensure_dir(d)?;
        }
        let temp = dir.join(format!(".{name}.{}.pfprof-tmp", std::process::id()));
        let written = self.write_new(&temp, size, write);
        let linked = written.and_then(|()| match std::fs::hard_link(&temp, dir.join(name)) {
            Ok(()) => Ok(Stored::Added(size)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Stored::Present),
            Err(e) => Err(e),
        });
        // The temporary name is pfprof's own, created with O_EXCL above.
        let _ = std::fs::remove_file(&temp);
        if let Ok(Stored::Added(bytes)) = linked {
            self.used_bytes = Some(used + bytes);
        }
        linked
    }

    /// Creates `dir`, or checks that it is a real directory pfprof may
    /// write into.
    fn ensure_dir(&self, dir: &Path) -> io::Result<()> {
        match std::fs::DirBuilder::new().mode(0o755).create(dir) {
            Ok(()) => {
                return std::os::unix::fs::lchown(dir, Some(self.owner.0), Some(self.owner.1))
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let meta = real_dir(dir)?;
        if meta.uid() != 0 && meta.uid() != self.owner.0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} belongs to user {}", dir.display(), meta.uid()),
            ));
        }
        Ok(())
    }

    /// Creates the new file `temp` and has `write` fill it with `size`
    /// bytes.
    fn write_new(
        &self,
        temp: &Path,
        size: u64,
        write: impl FnOnce(&mut File) -> io::Result<u64>,
    ) -> io::Result<()> {
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(temp)?;
        std::os::unix::fs::fchown(&out, Some(self.owner.0), Some(self.owner.1))?;
        let written = write(&mut out)?;
        if written != size {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("copied {written} of {size} bytes (the file changed)"),
            ));
        }
        Ok(())
    }
}

fn fd_of(file: &File) -> i32 {
    use std::os::fd::AsRawFd;
    file.as_raw_fd()
}

/// The metadata of `path`, which must be a directory reached without a
/// link.
fn real_dir(path: &Path) -> io::Result<std::fs::Metadata> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a directory (a link is not followed)",
                path.display()
            ),
        ));
    }
    Ok(meta)
}

/// Bytes of the regular files two levels under `build_id_dir`
/// (`xx/yyyy…/elf`; links, perf's entries, are not followed).
fn tree_bytes(build_id_dir: &Path) -> u64 {
    let entries = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let mut total = 0;
    for fan_out in entries(build_id_dir) {
        for entry in entries(&fan_out) {
            for file in entries(&entry) {
                if let Ok(meta) = std::fs::symlink_metadata(&file) {
                    if meta.is_file() {
                        total += meta.len();
                    }
                }
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        crate::test_dir(&format!("cache-{name}"))
    }

    /// perf's layout; a second store is `Present`; the limit stops new
    /// entries; the temporary file is gone.
    #[test]
    fn stores_in_perf_layout_within_the_limit() {
        let dir = temp("store");
        let source_path = dir.join("lib.so");
        std::fs::write(&source_path, vec![7u8; 1000]).unwrap();
        let source = File::open(&source_path).unwrap();
        let root = dir.join("cache");
        let mut cache = Cache::open(&root, 2500).unwrap();
        let id = [0xab, 0xcd, 0xef];
        assert_eq!(cache.store(&id, &source).unwrap(), Stored::Added(1000));
        let elf = root.join(".build-id/ab/cdef/elf");
        assert_eq!(std::fs::read(&elf).unwrap(), vec![7u8; 1000]);
        assert_eq!(std::fs::read_dir(elf.parent().unwrap()).unwrap().count(), 1);
        assert_eq!(cache.store(&id, &source).unwrap(), Stored::Present);
        assert_eq!(cache.store(&[1, 2], &source).unwrap(), Stored::Added(1000));
        // A new cache counts what is there: 2000 + 1000 > 2500.
        let mut again = Cache::open(&root, 2500).unwrap();
        assert_eq!(again.store(&[3, 4], &source).unwrap(), Stored::OverLimit);
        assert!(!root.join(".build-id/03").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A `debug` entry goes in beside `elf` once, within the limit; perf's
    /// entries (links) get none, and a planted `debug` link is not
    /// written through.
    #[test]
    fn debug_entries_beside_elf() {
        let dir = temp("debug");
        let root = dir.join("cache");
        let mut cache = Cache::open(&root, 3000).unwrap();
        let id = [0xab, 0xcd];
        assert!(cache.wants_debug(&id));
        assert_eq!(
            cache.store_debug(&id, &[1; 1000]).unwrap(),
            Stored::Added(1000)
        );
        assert!(!cache.wants_debug(&id));
        assert_eq!(
            std::fs::read(root.join(".build-id/ab/cd/debug")).unwrap(),
            [1; 1000]
        );
        assert_eq!(cache.store_debug(&id, &[2; 10]).unwrap(), Stored::Present);
        assert_eq!(
            cache.store_debug(&[5, 6], &[3; 2001]).unwrap(),
            Stored::OverLimit
        );

        let elsewhere = dir.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join(".build-id/ab/ef")).unwrap();
        assert!(!cache.wants_debug(&[0xab, 0xef]));
        let linked = cache.store_debug(&[0xab, 0xef], &[4; 10]).unwrap();
        assert_eq!(linked, Stored::LinkedEntry);
        std::fs::create_dir(root.join(".build-id/ab/01")).unwrap();
        let planted = elsewhere.join("planted");
        std::os::unix::fs::symlink(&planted, root.join(".build-id/ab/01/debug")).unwrap();
        assert_eq!(
            cache.store_debug(&[0xab, 1], &[4; 10]).unwrap(),
            Stored::Present
        );
        assert!(!planted.exists());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A link anywhere on the way is not followed: the root, a fan-out
    /// directory, or the entry's `elf`.
    #[test]
    fn links_are_not_followed() {
        let dir = temp("links");
        let elsewhere = dir.join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let source_path = dir.join("lib.so");
        std::fs::write(&source_path, b"x").unwrap();
        let source = File::open(&source_path).unwrap();

        std::os::unix::fs::symlink(&elsewhere, dir.join("linked-root")).unwrap();
        assert!(Cache::open(&dir.join("linked-root"), 1 << 20).is_err());

        let root = dir.join("cache");
        let mut cache = Cache::open(&root, 1 << 20).unwrap();
        std::fs::create_dir(root.join(".build-id")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, root.join(".build-id/ab")).unwrap();
        assert!(cache.store(&[0xab, 1], &source).is_err());
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

        // A dangling link at `elf` (someone else's entry) is not replaced.
        std::fs::create_dir_all(root.join(".build-id/cd/02")).unwrap();
        let target = elsewhere.join("planted");
        std::os::unix::fs::symlink(&target, root.join(".build-id/cd/02/elf")).unwrap();
        assert_eq!(cache.store(&[0xcd, 2], &source).unwrap(), Stored::Present);
        assert!(!target.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
