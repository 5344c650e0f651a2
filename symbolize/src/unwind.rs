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
    /// Signal return trampolines (svma): code that does nothing but call
    /// `rt_sigreturn`, such as glibc's `__restore_rt`. A signal handler
    /// returns there, and its caller is the interrupted code, whose
    /// registers the kernel saved on the stack (no CFI describes that).
    pub sigreturn_svmas: Vec<u64>,
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
    let eh_frame = section_bytes(&file, ".eh_frame").filter(|s| !s.data.is_empty());
    let debug_frame = if eh_frame.is_none() {
        section_bytes(&file, ".debug_frame").map(|s| s.data)
    } else {
        None
    };
    // Only the signal frames' FDEs: walking every FDE of a large library
    // (libLLVM's 100,000) takes milliseconds the unwinder does not need.
    let signal = eh_frame.as_ref().and_then(|e| signal_fde_ranges(&file, e));
    Ok(UnwindSections {
        build_id: elf::build_id(&file),
        segments: elf::program_headers(&file).loads,
        entry_svma: file.entry(),
        text_svma: section_svma(&file, ".text"),
        got_svma: section_svma(&file, ".got"),
        eh_frame_hdr: section_bytes(&file, ".eh_frame_hdr").filter(|_| eh_frame.is_some()),
        debug_frame,
        sigreturn_svmas: sigreturn_trampolines(&file, signal.as_deref()),
        eh_frame,
    })
}

/// The svma range of the section `name`; None when `file` has none (or
/// its end overflows).
fn section_svma(file: &object::File<'_>, name: &str) -> Option<Range<u64>> {
    let s = file.section_by_name(name)?;
    Some(s.address()..s.address().checked_add(s.size())?)
}

/// The section `name`, its bytes decompressed.
fn section_bytes(file: &object::File<'_>, name: &str) -> Option<SectionBytes> {
    let s = file.section_by_name(name)?;
    Some(SectionBytes {
        svma: section_svma(file, name)?,
        data: s.uncompressed_data().ok()?.into_owned(),
    })
}

/// The svma ranges `.eh_frame`'s FDEs cover in `file`, sorted by start;
/// None when it has none or they do not parse.
pub(crate) fn fde_svmas(file: &object::File<'_>) -> Option<Vec<Range<u64>>> {
    let eh_frame = section_bytes(file, ".eh_frame")?;
    let mut ranges = Vec::new();
    each_fde(file, &eh_frame, |_| true, |range| ranges.push(range))?;
    ranges.sort_unstable_by_key(|r| (r.start, r.end));
    Some(ranges)
}

/// The svma ranges of the FDEs whose CIE marks a signal frame
/// (augmentation `S`, as glibc's `__restore_rt` has); None when they do
/// not parse. A first pass reads the CIEs only: most files have no such
/// CIE, and then no FDE is parsed.
fn signal_fde_ranges(file: &object::File<'_>, eh_frame: &SectionBytes) -> Option<Vec<Range<u64>>> {
    use gimli::{CieOrFde, EhFrame, LittleEndian, UnwindSection};
    let section = EhFrame::new(&eh_frame.data, LittleEndian);
    let bases = eh_frame_bases(file, eh_frame);
    let mut signal_cies = Vec::new();
    let mut entries = section.entries(&bases);
    loop {
        match entries.next() {
            Ok(Some(CieOrFde::Cie(cie))) if cie.is_signal_trampoline() => {
                signal_cies.push(cie.offset())
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(_) => return None,
        }
    }
    let mut ranges = Vec::new();
    if !signal_cies.is_empty() {
        each_fde(
            file,
            eh_frame,
            |cie| signal_cies.contains(&cie),
            |range| ranges.push(range),
        )?;
    }
    Some(ranges)
}

/// The bases `.eh_frame`'s pointer encodings are relative to.
fn eh_frame_bases(file: &object::File<'_>, eh_frame: &SectionBytes) -> gimli::BaseAddresses {
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(eh_frame.svma.start);
    if let Some(text) = section_svma(file, ".text") {
        bases = bases.set_text(text.start);
    }
    if let Some(got) = section_svma(file, ".got") {
        bases = bases.set_got(got.start);
    }
    bases
}

/// Calls `found` with the svma range of each FDE whose CIE (by its offset
/// in `.eh_frame`) `wanted` accepts; None when an entry does not parse.
fn each_fde(
    file: &object::File<'_>,
    eh_frame: &SectionBytes,
    wanted: impl Fn(usize) -> bool,
    mut found: impl FnMut(Range<u64>),
) -> Option<()> {
    use gimli::{CieOrFde, EhFrame, LittleEndian, UnwindSection};
    let section = EhFrame::new(&eh_frame.data, LittleEndian);
    let bases = eh_frame_bases(file, eh_frame);
    let mut entries = section.entries(&bases);
    loop {
        match entries.next() {
            Ok(Some(CieOrFde::Fde(partial))) => {
                let mut skipped = false;
                let parsed = partial.parse(|section, bases, offset| {
                    skipped = !wanted(offset.0);
                    if skipped {
                        // Not parsed further: the FDE is not wanted.
                        return Err(gimli::Error::NoEntryAtGivenOffset(offset.0 as u64));
                    }
                    section.cie_from_offset(bases, offset)
                });
                match parsed {
                    Ok(fde) => {
                        let start = fde.initial_address();
                        found(start..start.saturating_add(fde.len()));
                    }
                    Err(_) if skipped => {}
                    Err(_) => return None,
                }
            }
            Ok(Some(CieOrFde::Cie(_))) => {}
            Ok(None) => break,
            Err(_) => return None,
        }
    }
    Some(())
}

/// `mov $15, %rax; syscall` (glibc's `__restore_rt`) and `mov $15, %eax;
/// syscall` (musl, Go): 15 is `rt_sigreturn` on x86_64.
const SIGRETURN_CODE: [&[u8]; 2] = [
    &[0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05],
    &[0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05],
];

/// Code scanned whole for trampolines only up to this size: reading all
/// of a large program's code (chromium's is 235 MB) stalled the recorder
/// for a third of a second, and its ring buffers overflowed meanwhile.
const SCAN_TEXT_BYTES: u64 = 16 << 20;

/// The svmas of the signal return trampolines in the file's code: looked
/// for inside the FDEs that mark a signal frame (glibc's), else in the
/// whole code of files without such FDEs up to [`SCAN_TEXT_BYTES`] (musl,
/// Go).
fn sigreturn_trampolines(file: &object::File<'_>, signal_fdes: Option<&[Range<u64>]>) -> Vec<u64> {
    let text = || {
        file.sections()
            .filter(|s| s.kind() == object::SectionKind::Text)
    };
    let scan_whole = text().map(|s| s.size()).sum::<u64>() <= SCAN_TEXT_BYTES;
    let mut found = Vec::new();
    for section in text() {
        let svma = section.address()..section.address().saturating_add(section.size());
        // The FDE starts a byte before the trampoline (unwinders look up
        // the return address minus one): a few bytes around each.
        let windows: Vec<Range<u64>> = match signal_fdes {
            Some(fdes) if !fdes.is_empty() => fdes
                .iter()
                .map(|f| f.start.saturating_sub(16).max(svma.start)..(f.end + 16).min(svma.end))
                .filter(|w| w.start < w.end)
                .collect(),
            _ if scan_whole => vec![svma.clone()],
            _ => Vec::new(),
        };
        if windows.is_empty() {
            continue;
        }
        let Ok(code) = section.data() else { continue };
        for window in windows {
            let from = (window.start - svma.start) as usize;
            let to = (window.end - svma.start) as usize;
            let Some(bytes) = code.get(from..to) else {
                continue;
            };
            for pattern in SIGRETURN_CODE {
                found.extend(
                    memchr::memmem::find_iter(bytes, pattern).map(|i| window.start + i as u64),
                );
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    found
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
