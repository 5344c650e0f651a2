//! The symbolizer's settings, and where build-id caches and debug
//! directories put a build's files.

use std::path::{Path, PathBuf};

use crate::hex;

/// Symbolizer settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Global debug directories, searched for `.build-id/xx/yyyy.debug` and
    /// `<dir of file>/<debuglink>`. Default: `["/usr/lib/debug"]`.
    pub debug_dirs: Vec<PathBuf>,
    /// Demangle Rust (legacy and v0) and C++ names. Default: true.
    pub demangle: bool,
    /// A directory holding another machine's files under their paths
    /// (perf's `--symfs`): `DIR/usr/lib/libc.so.6` is read before
    /// `/usr/lib/libc.so.6`. Default: none.
    pub symfs: Option<PathBuf>,
    /// perf's build-id caches, searched for `.build-id/xx/yyyy/elf` and
    /// `<path>/<build-id>/elf` before the recorded path (see
    /// [`Options::file_candidates`]). Default: `$HOME/.debug`.
    pub build_id_caches: Vec<PathBuf>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            demangle: true,
            symfs: None,
            build_id_caches: default_build_id_cache().into_iter().collect(),
        }
    }
}

/// `$HOME/.debug`, perf's default build-id cache (`$HOME` of the user this
/// process runs as); None without a `HOME` or with an empty one.
pub fn default_build_id_cache() -> Option<PathBuf> {
    build_id_cache_in(std::env::var_os("HOME"))
}

pub(crate) fn build_id_cache_in(home: Option<std::ffi::OsString>) -> Option<PathBuf> {
    home.filter(|home| !home.is_empty())
        .map(|home| PathBuf::from(home).join(".debug"))
}

/// `ROOT/.build-id/xx/yyyy…`, where a build-id tree keeps the files of
/// `build_id` (hex, split after its first byte): perf's caches a directory
/// holding `elf`, a debug directory the file `yyyy….debug`. None for a
/// build-id shorter than 2 bytes.
pub fn build_id_dir(root: &Path, build_id: &[u8]) -> Option<PathBuf> {
    (build_id.len() >= 2).then(|| {
        let hex = hex(build_id);
        root.join(".build-id").join(&hex[..2]).join(&hex[2..])
    })
}

/// The separate debug file of `build_id` in the build-id cache at `root`,
/// as perf names it (`ROOT/.build-id/xx/yyyy…/debug`).
pub fn cached_debug_file(root: &Path, build_id: &[u8]) -> Option<PathBuf> {
    build_id_dir(root, build_id).map(|dir| dir.join("debug"))
}

/// The separate debug files of `build_id` in `debug_dirs`,
/// `DIR/.build-id/xx/yyyy….debug`, in order.
pub(crate) fn build_id_debug_files<'a>(
    debug_dirs: &'a [PathBuf],
    build_id: Option<&'a [u8]>,
) -> impl Iterator<Item = PathBuf> + 'a {
    debug_dirs.iter().filter_map(move |dir| {
        let mut path = build_id_dir(dir, build_id?)?.into_os_string();
        path.push(".debug");
        Some(PathBuf::from(path))
    })
}

impl Options {
    /// Where the file recorded at `path` may be read, in search order: the
    /// [`Options::file_copies`], then (with a `build_id`) the debug
    /// directories' `.build-id/xx/yyyy.debug`. A caller that knows the
    /// build-id takes the first candidate that has it.
    pub fn file_candidates(&self, path: &Path, build_id: Option<&[u8]>) -> Vec<PathBuf> {
        let mut out = self.file_copies(path, build_id);
        out.extend(build_id_debug_files(&self.debug_dirs, build_id));
        out
    }

    /// Where a copy of the file recorded at `path` itself (not a separate
    /// debug file) may be, in search order: under [`Options::symfs`], then
    /// (only with a `build_id` to check candidates against) perf's build-id
    /// caches, `.build-id/xx/yyyy/elf` and `<path>/<build-id>/elf`, which
    /// hold the recorded build (pfprof's from the very file the process
    /// mapped) even after the path was rebuilt or stripped, then the path.
    pub fn file_copies(&self, path: &Path, build_id: Option<&[u8]>) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let relative = path.strip_prefix("/").unwrap_or(path);
        if let Some(symfs) = &self.symfs {
            out.push(symfs.join(relative));
        }
        if let Some(id) = build_id.filter(|id| id.len() >= 2) {
            for cache in &self.build_id_caches {
                out.extend(build_id_dir(cache, id).map(|dir| dir.join("elf")));
                out.push(cache.join(relative).join(hex(id)).join("elf"));
            }
        }
        out.push(path.to_path_buf());
        out
    }
}
