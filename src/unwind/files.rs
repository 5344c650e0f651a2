//! The files whose CFI the unwinder reads: where a mapping's file can be
//! read, and its unwind sections, loaded once and shared by every process.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use framehop::{ExplicitModuleSectionInfo, Module};
use pfprof_symbolize::UnwindSections;

use super::rows;
use super::{Data, UnwindStats, PF_X};
use crate::sys::maps::MappingPath;
use crate::sys::procfs;

/// One file's unwind sections, shared between processes.
pub(super) struct UnwindFile {
    pub(super) sections: UnwindSections,
    eh_frame: Option<Data>,
    eh_frame_hdr: Option<Data>,
    debug_frame: Option<Data>,
}

impl UnwindFile {
    fn new(mut sections: UnwindSections) -> Option<Arc<UnwindFile>> {
        if !sections.has_cfi() {
            return None;
        }
        let eh_frame = sections.eh_frame.as_mut().map(|s| take(&mut s.data));
        let eh_frame_hdr = sections.eh_frame_hdr.as_mut().map(|s| take(&mut s.data));
        let debug_frame = sections.debug_frame.take().map(Data::from);
        Some(Arc::new(UnwindFile {
            sections,
            eh_frame,
            eh_frame_hdr,
            debug_frame,
        }))
    }

    /// A framehop module for the mapping `avma` of this file at
    /// `file_offset`, and its load bias (avma - svma).
    pub(super) fn module(
        &self,
        name: &str,
        avma: Range<u64>,
        file_offset: u64,
    ) -> Option<(Module<Data>, u64)> {
        // The load bias (avma - svma) comes from the PT_LOAD the mapping
        // holds. The kernel maps from the page below p_offset, and linkers
        // such as lld do not keep p_vaddr - p_offset page-aligned, so place
        // the segment's own first byte, preferring the executable segment
        // when a page holds the end of one and the start of the next.
        let page_start = |offset: u64| offset & !0xfff;
        let seg = self
            .sections
            .segments
            .iter()
            .filter(|s| {
                page_start(s.file_offset) <= file_offset
                    && file_offset < s.file_offset + s.file_size.max(1)
            })
            .max_by_key(|s| s.flags & PF_X)?;
        let seg_avma = (avma.start + seg.file_offset).checked_sub(file_offset)?;
        let bias = seg_avma.wrapping_sub(seg.svma);
        let s = &self.sections;
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: s.text_svma.clone(),
            got_svma: s.got_svma.clone(),
            eh_frame_svma: s.eh_frame.as_ref().map(|e| e.svma.clone()),
            eh_frame: self.eh_frame.clone(),
            eh_frame_hdr_svma: s.eh_frame_hdr.as_ref().map(|e| e.svma.clone()),
            eh_frame_hdr: self.eh_frame_hdr.clone(),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        };
        Some((Module::new(name.to_string(), avma, bias, info), bias))
    }
}

impl UnwindFile {
    /// The sections [`rows`] reads, with their svmas.
    pub(super) fn row_sections(&self) -> rows::Sections<'_> {
        let s = &self.sections;
        rows::Sections {
            eh_frame: self
                .eh_frame
                .as_deref()
                .zip(s.eh_frame.as_ref().map(|e| e.svma.start)),
            eh_frame_hdr: self
                .eh_frame_hdr
                .as_deref()
                .zip(s.eh_frame_hdr.as_ref().map(|e| e.svma.start)),
            debug_frame: self.debug_frame.as_deref(),
            text_svma: s.text_svma.as_ref().map(|r| r.start),
            got_svma: s.got_svma.as_ref().map(|r| r.start),
        }
    }
}

pub(super) fn take(data: &mut Vec<u8>) -> Data {
    Data::from(std::mem::take(data))
}

/// The file of a mapping as pfprof can read it: its path in pfprof's mount
/// namespace names another file when the process runs in a container
/// (another root) or the file was replaced since it was mapped.
pub(super) struct FileRef {
    /// Where to read it.
    path: PathBuf,
    /// Device and inode, to tell files without a build-id apart.
    pub(super) identity: Option<(u64, u64)>,
}

/// Where the file `path` mapped at `avma` in `pid` can be read, best first
/// (see [`procfs::mapped_file_candidates`]).
pub(super) fn file_candidates(pid: i32, path: &Path, avma: &Range<u64>) -> Vec<PathBuf> {
    let candidates = procfs::mapped_file_candidates(pid, path, avma);
    candidates.into_iter().map(|(path, _)| path).collect()
}

/// The file to read for a mapping without a build-id: the first candidate
/// that exists, with its identity for the cache.
pub(super) fn locate(pid: i32, path: &[u8], avma: &Range<u64>) -> Option<FileRef> {
    use std::os::unix::ffi::OsStrExt;
    let path = Path::new(std::ffi::OsStr::from_bytes(path));
    first_file(file_candidates(pid, path, avma))
}

/// The first candidate that is a regular file, with its identity.
pub(super) fn first_file(candidates: Vec<PathBuf>) -> Option<FileRef> {
    use std::os::unix::fs::MetadataExt;
    candidates.into_iter().find_map(|candidate| {
        let meta = std::fs::metadata(&candidate).ok()?;
        meta.is_file().then(|| FileRef {
            path: candidate,
            identity: Some((meta.dev(), meta.ino())),
        })
    })
}

pub(super) fn load_file(
    (pid, avma): (i32, &Range<u64>),
    path: &[u8],
    build_id: Option<&[u8]>,
    located: Option<&FileRef>,
    offline: Option<&pfprof_symbolize::Options>,
    stats: &mut UnwindStats,
) -> Option<Arc<UnwindFile>> {
    use std::os::unix::ffi::OsStrExt;
    let name = String::from_utf8_lossy(path);
    let sections = if path == crate::sys::vdso::PATH.as_bytes() {
        own_vdso().and_then(|image| pfprof_symbolize::unwind_sections(&image).ok())
    } else if let Some(located) = located {
        pfprof_symbolize::read_unwind_sections(&located.path).ok()
    } else if let (Some(want), true) = (build_id, is_file_path(path)) {
        // The build-id says which file: the first candidate that has it
        // (the path itself first: the common case costs one read).
        let own = Path::new(std::ffi::OsStr::from_bytes(path));
        let candidates = match offline {
            Some(options) => options.file_candidates(own, Some(want)),
            None => std::iter::once(own.to_path_buf())
                .chain(file_candidates(pid, own, avma))
                .collect(),
        };
        candidates.into_iter().find_map(|candidate| {
            pfprof_symbolize::read_unwind_sections(&candidate)
                .ok()
                .filter(|s| s.build_id.as_deref() == Some(want))
        })
    } else {
        // `//anon`, `[heap]`, `[stack]`, `[vsyscall]`…: not files.
        return None;
    };
    let file = sections.and_then(UnwindFile::new);
    if file.is_none() {
        stats.unreadable_files.push(name.into_owned());
    }
    file
}

/// A mapping of no file, where JIT compilers put their code.
pub(super) fn is_anonymous(path: &[u8]) -> bool {
    MappingPath::of(path).is_anonymous()
}

/// A mapping's path that names a file (not `//anon`, `[heap]`, a memfd...).
pub(super) fn is_file_path(path: &[u8]) -> bool {
    MappingPath::of(path) == MappingPath::File
}

/// The vDSO image of this process: the same kernel maps the same image
/// into every process.
pub(super) fn own_vdso() -> Option<Vec<u8>> {
    crate::sys::vdso::own_image()
}
