//! What a module's headers say: its sections and segments (and the
//! file offset ↔ svma rule between them), its start-up relocations, the
//! debug files found for it and those rejected.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::lookup::SHF_TLS;
use crate::{hex, RelocType};

/// One SHF_ALLOC section header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SectionInfo {
    /// Section name, e.g. `.bss`.
    pub name: String,
    /// `sh_addr`.
    pub svma: u64,
    /// `sh_size`.
    pub size: u64,
    /// `sh_offset` for sections with file contents; for NOBITS sections the
    /// virtual file offset their start maps to through PT_LOAD (or 0).
    pub file_offset: u64,
    /// `SHT_NOBITS` (e.g. `.bss`, `.tbss`).
    pub nobits: bool,
    /// `sh_flags`.
    pub flags: u64,
}

/// One PT_LOAD program header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// `p_vaddr`.
    pub svma: u64,
    /// `p_offset`.
    pub file_offset: u64,
    /// `p_filesz`.
    pub file_size: u64,
    /// `p_memsz`.
    pub mem_size: u64,
    /// `p_flags` (PF_X = 1, PF_W = 2, PF_R = 4).
    pub flags: u32,
}

/// The dynamic relocations ld.so applies to one module at start-up, from
/// its `PT_DYNAMIC` entries (so stripped section headers do not matter).
///
/// Counted the way ld.so sees them: `DT_RELA` (`.rela.dyn`), `DT_REL`,
/// `DT_JMPREL` (`.rela.plt`; not counted twice when `DT_RELASZ` includes
/// it) and `DT_RELR` (`.relr.dyn`). A file without `PT_DYNAMIC` (static
/// executable) has none. Pages are `svma >> 12`: add the load bias's page
/// number to get process pages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RelocationInfo {
    /// `DT_RELA`/`DT_REL`/`DT_JMPREL` entries by x86_64 type
    /// (`R_X86_64_RELATIVE`, `R_X86_64_GLOB_DAT`, `R_X86_64_JUMP_SLOT`,
    /// `R_X86_64_64`, `R_X86_64_COPY`, `R_X86_64_IRELATIVE`,
    /// `R_X86_64_DTPMOD64`, …), in the order of their names. RELR entries
    /// are not included (see [`RelocationInfo::relr`]).
    pub by_type: BTreeMap<RelocType, u64>,
    /// Number of relocations (addresses) encoded in `DT_RELR`, each a
    /// RELATIVE relocation; 0 when absent.
    pub relr: u64,
    /// The object has `DT_RELR` (linked with `-z pack-relative-relocs`).
    pub uses_relr: bool,
    /// `DT_BIND_NOW`, `DF_BIND_NOW` in `DT_FLAGS` or `DF_1_NOW` in
    /// `DT_FLAGS_1`: ld.so resolves every JUMP_SLOT at start-up.
    pub bind_now: bool,
    /// The `PT_GNU_RELRO` svma range (`p_vaddr..p_vaddr + p_memsz`), made
    /// read-only after relocation.
    pub relro: Option<std::ops::Range<u64>>,
    /// Sorted, de-duplicated svma pages (`svma >> 12`) that start-up
    /// relocations write: every RELA/REL target and every RELR address,
    /// except R_X86_64_NONE and, unless [`RelocationInfo::bind_now`],
    /// JUMP_SLOT (see [`RelocationInfo::lazy_jump_slot_pages`]). Each target
    /// is taken as 8 bytes wide, so one straddling a page boundary counts
    /// both pages.
    pub pages: Vec<u64>,
    /// For each page of [`RelocationInfo::pages`], the SHF_ALLOC section
    /// (see [`ModuleInfo::section_at`]) holding the page's lowest
    /// relocation target, e.g. `.data.rel.ro`, `.got`, `.got.plt`, `.data`,
    /// `.init_array`. Pages whose targets lie in no known section (no
    /// section headers) are absent.
    pub page_sections: BTreeMap<u64, String>,
    /// Pages of the JUMP_SLOT targets left out of
    /// [`RelocationInfo::pages`] because binding is lazy (empty with
    /// [`RelocationInfo::bind_now`]), sorted and de-duplicated. Note that
    /// glibc's ld.so still adds the load bias to each lazy JUMP_SLOT at
    /// start-up when the bias is not 0 (every PIE and shared library), and
    /// fills `GOT[1]`/`GOT[2]` of `.got.plt`, so these pages are usually
    /// written at start-up too.
    pub lazy_jump_slot_pages: Vec<u64>,
    /// What the relocations write on each page of [`RelocationInfo::pages`]
    /// and [`RelocationInfo::lazy_jump_slot_pages`]: so that a page the
    /// loader copied is credited to the relocations that are really on it.
    pub page_writes: BTreeMap<u64, PageRelocations>,
}

/// The relocations whose targets lie on one page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRelocations {
    /// By x86_64 type; RELR addresses count as `R_X86_64_RELATIVE`.
    pub by_type: BTreeMap<RelocType, u64>,
    /// The SHF_ALLOC sections holding the targets (`.got.plt`, `.data`, …).
    pub sections: std::collections::BTreeSet<String>,
}

/// A separate debug file that was found but does not belong to the module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RejectedDebugFile {
    /// Where it was found.
    pub path: PathBuf,
    /// Why it was not used.
    pub reason: Rejection,
}

/// Why a separate debug file was not used; shown as a sentence fragment
/// ("its CRC-32 is ...").
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// It is not an ELF file, or a truncated or corrupt one.
    #[error("not a valid ELF file")]
    NotElf,
    /// Found by the `.gnu_debuglink` name of `module`, it has not the CRC-32
    /// the debuglink gives.
    #[error("its CRC-32 is {found:08x} but the .gnu_debuglink of {} says {expected:08x}", .module.display())]
    CrcMismatch {
        /// The module's path.
        module: PathBuf,
        /// The CRC-32 of the debug file.
        found: u32,
        /// The CRC-32 in the module's `.gnu_debuglink`.
        expected: u32,
    },
    /// It is of another build than `module`.
    #[error("its build-id is {} but {} has {}", .found.as_deref().map_or("missing".into(), hex), .module.display(), hex(.expected))]
    BuildIdMismatch {
        /// The module's path.
        module: PathBuf,
        /// The debug file's build-id, if it has one.
        found: Option<Vec<u8>>,
        /// The module's build-id.
        expected: Vec<u8>,
    },
}

/// Facts about one module (ELF file), cached per [`Symbolizer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The path it was opened by (first path, when shared by build-id).
    pub path: PathBuf,
    /// NT_GNU_BUILD_ID.
    pub build_id: Option<Vec<u8>>,
    /// The separate debug file used, if any.
    pub debug_file: Option<PathBuf>,
    /// Debug files found but not used: they belong to another build.
    pub rejected_debug_files: Vec<RejectedDebugFile>,
    /// SHF_ALLOC sections (from the debug file if the main file has none).
    pub sections: Vec<SectionInfo>,
    /// PT_LOAD segments.
    pub segments: Vec<SegmentInfo>,
    /// Any symbol table (main or debug file, `.symtab` or `.dynsym`) had
    /// defined symbols.
    pub has_symbols: bool,
    /// DWARF (`.debug_info`) is available, in the file or the debug file.
    pub has_dwarf: bool,
}

impl ModuleInfo {
    /// Converts a file offset to an svma through PT_LOAD, or `None` outside
    /// every segment. See the crate docs for the rule.
    pub fn file_offset_to_svma(&self, file_offset: u64) -> Option<u64> {
        file_offset_to_svma(&self.segments, file_offset)
    }

    /// Converts an svma back to a (possibly virtual) file offset.
    pub fn svma_to_file_offset(&self, svma: u64) -> Option<u64> {
        svma_to_file_offset(&self.segments, svma)
    }

    /// The SHF_ALLOC section containing `svma`. Non-TLS sections win over
    /// TLS ones (`.tbss` overlaps the sections after it in svma space).
    pub fn section_at(&self, svma: u64) -> Option<&SectionInfo> {
        let contains = |s: &&SectionInfo| svma >= s.svma && svma - s.svma < s.size;
        self.sections
            .iter()
            .filter(contains)
            .min_by_key(|s| (s.flags & SHF_TLS != 0, s.size))
    }
}

/// The PT_LOAD rule of the crate docs.
pub fn file_offset_to_svma(segments: &[SegmentInfo], file_offset: u64) -> Option<u64> {
    let within = |seg: &&SegmentInfo, size: u64| {
        file_offset >= seg.file_offset && file_offset - seg.file_offset < size
    };
    let seg = segments
        .iter()
        .find(|seg| within(seg, seg.file_size))
        .or_else(|| segments.iter().find(|seg| within(seg, seg.mem_size)))?;
    seg.svma.checked_add(file_offset - seg.file_offset)
}

/// An svma back to a (possibly virtual) file offset: the first PT_LOAD
/// whose `[p_vaddr, p_vaddr + p_memsz)` holds it.
pub(crate) fn svma_to_file_offset(segments: &[SegmentInfo], svma: u64) -> Option<u64> {
    segments.iter().find_map(|seg| {
        let delta = svma.checked_sub(seg.svma)?;
        (delta < seg.mem_size).then(|| seg.file_offset.checked_add(delta))?
    })
}
