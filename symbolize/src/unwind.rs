//! The sections a CFI unwinder needs from an ELF file (`.eh_frame`,
//! `.eh_frame_hdr`, `.debug_frame`, and the addresses of `.text` and `.got`
//! for pointer encodings), copied out once so the caller can share them
//! between every process that maps the file.

use std::ops::Range;
use std::path::Path;

use object::{Object, ObjectSection};

use crate::{elf, Reason, SegmentInfo};

/// A section's svma range and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionBytes {
    /// `sh_addr .. sh_addr + sh_size`.
    pub svma: Range<u64>,
    /// Contents (decompressed if the section was compressed).
    pub data: Vec<u8>,
}

/// Unwind information of one ELF file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindSections {
    /// NT_GNU_BUILD_ID, to check that the mapped file is the one read.
    pub build_id: Option<Vec<u8>>,
    /// PT_LOAD headers: a mapping's file offset gives its load bias.
    pub segments: Vec<SegmentInfo>,
    /// `e_entry` (0: none). Unwinding ends in the entry code, which has no
    /// caller (ld.so's `_start` has no CFI to say so).
    pub entry_svma: u64,
    /// `.text` range (base for `DW_EH_PE_textrel`).
    pub text_svma: Option<Range<u64>>,
    /// `.got` range (base for `DW_EH_PE_datarel`).
    pub got_svma: Option<Range<u64>>,
    /// `.eh_frame`.
    pub eh_frame: Option<SectionBytes>,
    /// `.eh_frame_hdr` (binary-search table over `.eh_frame`).
    pub eh_frame_hdr: Option<SectionBytes>,
    /// `.debug_frame`, used only when there is no `.eh_frame`.
    pub debug_frame: Option<Vec<u8>>,
}

impl UnwindSections {
    /// Whether any CFI was found.
    pub fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }
}

/// Reads the unwind sections of the ELF file at `path`.
pub fn read_unwind_sections(path: &Path) -> Result<UnwindSections, Reason> {
    let map = elf::map_file(path).map_err(|_| Reason::MissingFile)?;
    unwind_sections(&map)
}

/// Reads the unwind sections of an ELF image in memory (e.g. the vDSO).
pub fn unwind_sections(data: &[u8]) -> Result<UnwindSections, Reason> {
    let file = elf::parse_elf(data).ok_or(Reason::NotElf)?;
    let range = |name: &str| {
        let s = file.section_by_name(name)?;
        Some(s.address()..s.address().checked_add(s.size())?)
    };
    let bytes = |name: &str| {
        let s = file.section_by_name(name)?;
        let data = s.uncompressed_data().ok()?.into_owned();
        Some(SectionBytes {
            svma: s.address()..s.address().checked_add(s.size())?,
            data,
        })
    };
    let eh_frame = bytes(".eh_frame").filter(|s| !s.data.is_empty());
    let debug_frame = if eh_frame.is_none() {
        bytes(".debug_frame").map(|s| s.data)
    } else {
        None
    };
    Ok(UnwindSections {
        build_id: elf::build_id(&file),
        segments: elf::program_headers(&file).loads,
        entry_svma: file.entry(),
        text_svma: range(".text"),
        got_svma: range(".got"),
        eh_frame_hdr: bytes(".eh_frame_hdr").filter(|_| eh_frame.is_some()),
        eh_frame,
        debug_frame,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary itself has CFI; a non-ELF file is an error.
    #[test]
    fn reads_own_eh_frame() {
        let exe = std::env::current_exe().unwrap();
        let info = read_unwind_sections(&exe).unwrap();
        assert!(info.has_cfi());
        let hdr = info.eh_frame_hdr.as_ref().expect(".eh_frame_hdr");
        assert_eq!(hdr.data.len() as u64, hdr.svma.end - hdr.svma.start);
        assert!(
            info.segments.iter().any(|s| s.flags & 1 != 0),
            "an executable PT_LOAD"
        );
        assert_eq!(unwind_sections(b"not an elf file"), Err(Reason::NotElf));
        assert_eq!(
            read_unwind_sections(Path::new("/nonexistent/pfprof")),
            Err(Reason::MissingFile)
        );
    }
}
