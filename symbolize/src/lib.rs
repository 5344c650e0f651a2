//! Turns addresses in ELF files into names for pfprof.
//!
//! # Pipeline
//!
//! pfprof records process addresses (avma) and undoes ASLR itself, down to a
//! **file offset** in the mapped file:
//! `file_offset = avma - mapping_start + mapping_pgoff`. This crate never sees
//! an avma (except [`KernelSymbols`], whose avmas need no translation).
//!
//! 1. **Module**: the file is mapped (`memmap2`) and parsed with `object`
//!    once per [`Symbolizer`]; the cache is keyed by build-id when the file
//!    has one (so the same library reached by two paths is parsed once),
//!    else by path + device + inode + mtime. When the caller passes an
//!    expected build-id that differs from the file's, every address gets
//!    [`Reason::BuildIdMismatch`]: the binary was replaced after recording,
//!    or the process saw another file under that path (a container).
//! 2. **file offset → svma** with the PT_LOAD program headers:
//!    `svma = p_vaddr - p_offset + file_offset` for the PT_LOAD with
//!    `p_offset <= file_offset < p_offset + p_memsz`, preferring one where
//!    `file_offset < p_offset + p_filesz`. Offsets past `p_filesz` but inside
//!    `p_memsz` are the "virtual file offsets" pfprof gives to the anonymous
//!    mapping holding the rest of `.bss`; they land in `.bss` as they should.
//!    No PT_LOAD → [`Reason::NotInSegment`].
//! 3. **Separate debug info** (when the file has no `.debug_info`):
//!    `DEBUG_DIR/.build-id/xx/yyyy.debug`, then the `.gnu_debuglink` name in
//!    the file's directory, its `.debug/` subdirectory and
//!    `DEBUG_DIR/<file's dir>/` (for the path as given and for its canonical
//!    path). A candidate is accepted only if its build-id matches the main
//!    file's (when that has one) and, when it was found by its debuglink
//!    name, its CRC-32 matches the one in `.gnu_debuglink` too. Rejected
//!    candidates are listed in [`ModuleInfo::rejected_debug_files`].
//! 4. **Code** ([`Symbolizer::code`]): DWARF via `addr2line::Context` (over
//!    `gimli`, borrowing the mapped file) gives file:line and inlined frames;
//!    the ELF `.symtab`/`.dynsym` (of the debug file too when the main file
//!    is stripped) name the function when DWARF has none, e.g. assembly.
//!    Names are demangled (Rust legacy and v0, C++) unless
//!    [`Options::demangle`] is off. An address no symbol covers in an
//!    x86_64 PLT section (`.plt`, `.plt.sec`, `.plt.got`) is named
//!    `name@plt` after the GOT slot its entry jumps through, as `objdump -d`
//!    and perf name it (see `plt.rs`).
//! 5. **Data** ([`Symbolizer::data`]): the SHF_ALLOC section holding the svma
//!    (main file's section headers; the debug file's only if the main file
//!    has none) and the innermost STT_OBJECT / STT_TLS / STT_NOTYPE symbol
//!    whose `[value, value + size)` covers it, with the offset into it.
//! 6. **Start-up analysis**: [`Symbolizer::function_ranges`] gives the file
//!    offset ranges of named functions (e.g. `main`,
//!    `__libc_start_call_main`) from the cached symbol tables, to find them
//!    in call stacks; [`Symbolizer::relocations`] reads the dynamic
//!    relocations ld.so applies at start-up (`DT_RELA`, `DT_REL`,
//!    `DT_JMPREL`, `DT_RELR`) and the pages they write
//!    ([`RelocationInfo`], x86_64 only).
//!
//! 7. **JIT code** ([`PerfMap`]): perf's `/tmp/perf-PID.map` files name
//!    code generated in anonymous memory; the last line covering an
//!    address names it.
//!
//! Return addresses: the *caller* subtracts 1 before lookup; this crate
//! looks up exactly the offset it is given.
//!
//! # Why addr2line and not blazesym
//!
//! Measured with `examples/compare_backends.rs` (10,000 random addresses
//! inside function symbols, one process per backend; figures and method in
//! `symbolize/README.md`): blazesym 0.2 and addr2line 0.27 are equally fast
//! and give the same answers as binutils `addr2line -f -i -C`; blazesym used
//! somewhat less memory on a 35 MB Rust binary. addr2line was chosen because
//! this crate needs `object` anyway for what blazesym does not give (section
//! headers, data symbols, program headers, build-id checks, which debug file
//! was used), so one ELF parser and one debug-file search serve both code and
//! data; DWARF is parsed by gimli only, never by hand.
//!
//! # Constraints and limits
//!
//! * No panics on bad input: a truncated or corrupt file is
//!   [`Reason::NotElf`]; corrupt DWARF degrades to symbol-table names.
//! * Files are memory-mapped: if a file is truncated by someone else while a
//!   [`Symbolizer`] holds it, reading it raises SIGBUS. pfprof symbolizes
//!   after recording, from files it does not write.
//! * Split DWARF (`.dwo`/`.dwp`) and `.gnu_debugaltlink` (dwz) are not
//!   followed; their frames fall back to symbol names.
//! * ELF only; other object formats are [`Reason::NotElf`].
#![deny(missing_docs)]

mod demangle;
mod dwarf;
mod elf;
mod kernel;
mod notes;
mod perfmap;
mod plt;
mod reloc;
mod sys;
mod unwind;

use memmap2::Mmap;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use kernel::{kallsyms_lines, kernel_text, KallsymsLine, KernelSymbols};
pub use notes::gnu_build_id_in_notes;
pub use perfmap::{read_perf_map_file, PerfMap, PerfMapError, PerfMapLimits};
pub use reloc::RelocType;

use crate::elf::{SymKind, SymbolTable};
pub use crate::unwind::{read_unwind_sections, unwind_sections, SectionBytes, UnwindSections};

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

fn build_id_cache_in(home: Option<std::ffi::OsString>) -> Option<PathBuf> {
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

/// The separate debug files of `build_id` in `debug_dirs`,
/// `DIR/.build-id/xx/yyyy….debug`, in order.
fn build_id_debug_files<'a>(
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

/// Why an address got no answer. A missing *symbol* is a normal outcome
/// (e.g. stripped code, padding), reported as [`Reason::NoSymbol`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// The file does not exist or cannot be read.
    MissingFile,
    /// The file is not an ELF file, or is truncated or corrupt.
    NotElf,
    /// The file's build-id is not the one recorded: it was replaced.
    BuildIdMismatch {
        /// The build-id recorded by pfprof.
        expected: Vec<u8>,
        /// The build-id of the file now on disk, if it has one.
        found: Option<Vec<u8>>,
    },
    /// The file offset lies in no PT_LOAD segment.
    NotInSegment,
    /// No symbol or debug information names the address.
    NoSymbol,
    /// The file is valid ELF but of a kind this request does not support
    /// (relocations: anything but 64-bit little-endian x86_64).
    Unsupported,
}

/// Bytes in lower-case hex (build-ids, as readelf and perf print them).
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::MissingFile => f.write_str("The file is missing or cannot be read."),
            Reason::NotElf => f.write_str("The file is not a valid ELF file."),
            Reason::BuildIdMismatch { expected, found } => match found {
                Some(found) => write!(
                    f,
                    "The file's build-id is {} but {} was recorded: the process mapped another file under this path (replaced since, or seen through another root or mount namespace).",
                    hex(found),
                    hex(expected)
                ),
                None => write!(
                    f,
                    "The file has no build-id but {} was recorded: the process mapped another file under this path (replaced since, or seen through another root or mount namespace).",
                    hex(expected)
                ),
            },
            Reason::NotInSegment => {
                f.write_str("The file offset is not inside any loadable segment of the file.")
            }
            Reason::NoSymbol => f.write_str("No symbol or debug information covers the address."),
            Reason::Unsupported => {
                f.write_str("The file's architecture or ELF class is not supported for this request.")
            }
        }
    }
}

impl std::error::Error for Reason {}

/// A symbolized code address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeSite {
    /// The ELF virtual address the file offset maps to.
    pub svma: u64,
    /// Innermost first: inlined frames first, the real (outer) function
    /// last. Never empty.
    pub frames: Vec<Frame>,
}

/// One (possibly inlined) function frame of a [`CodeSite`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Function name, demangled unless [`Options::demangle`] is off. Never
    /// empty.
    pub function: String,
    /// Full source path, when DWARF has a line table for the address.
    pub file: Option<String>,
    /// Source line, when known.
    pub line: Option<u32>,
    /// True for inlined frames (every frame but the last).
    pub inlined: bool,
}

/// A resolved data address (the target of a page fault).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataTarget {
    /// The ELF virtual address the file offset maps to.
    pub svma: u64,
    /// The SHF_ALLOC section holding it (`.bss`, `.data`, `.rodata`, …).
    /// A mapped address in no section is named for what it is:
    /// `[elf-header]`, `[program-headers]`, `[padding]` (between or after
    /// sections), or `.bss` for the tail of the last file page in front of
    /// `.bss`, which the kernel or ld.so zeroes for it. `None` when the file
    /// has no section headers.
    pub section: Option<String>,
    /// The data symbol covering it, demangled unless asked not to.
    pub symbol: Option<String>,
    /// Offset of `svma` from the symbol's start (0 without a symbol).
    pub symbol_offset: u64,
}

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
fn svma_to_file_offset(segments: &[SegmentInfo], svma: u64) -> Option<u64> {
    segments.iter().find_map(|seg| {
        let delta = svma.checked_sub(seg.svma)?;
        (delta < seg.mem_size).then(|| seg.file_offset.checked_add(delta))?
    })
}

/// Demangles a Rust (legacy or v0) or C++ symbol, code and data alike, as
/// `c++filt` does (`_ZTV3Foo` is `vtable for Foo`); other names are
/// returned unchanged. Rust hashes are dropped.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Some(d) = demangle::cxx(name) {
            return d;
        }
    }
    name.to_string()
}

/// The NT_GNU_BUILD_ID of an ELF image in memory, `None` if it has none or
/// is not ELF.
pub fn image_build_id(data: &[u8]) -> Option<Vec<u8>> {
    elf::build_id(&elf::parse_elf(data)?)
}

/// Reads the NT_GNU_BUILD_ID of an ELF file, `None` if it has none or is
/// not a readable ELF file.
pub fn read_build_id(path: &Path) -> Option<Vec<u8>> {
    let map = elf::map_file(path).ok()?;
    let file = elf::parse_elf(&map)?;
    elf::build_id(&file)
}

/// Where a module's bytes come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// A file: separate debug files are searched.
    File,
    /// An image in memory, the vDSO ([`Symbolizer::add_image`]): read
    /// alone, and a weak alias yields to the non-weak function at its
    /// address, as perf names them (the vDSO exports `time` weak and
    /// `__vdso_time` global at one address).
    Image,
}

/// One parsed module.
struct Module {
    info: ModuleInfo,
    symbols: SymbolTable,
    /// Synthetic `name@plt` symbols of the PLT entries (raw names, without
    /// the suffix), used where no real symbol covers an address.
    plt: SymbolTable,
    /// File offsets of the ELF header and of the program header table.
    header_ranges: [std::ops::Range<u64>; 2],
    /// Lazily built DWARF context (None inside: no usable DWARF).
    dwarf: Option<Option<dwarf::Dwarf>>,
    /// The file holding DWARF, to load lazily.
    dwarf_path: Option<PathBuf>,
    code_cache: HashMap<u64, Result<CodeSite, Reason>>,
    /// Lazily read start-up relocations.
    relocations: Option<Result<RelocationInfo, Reason>>,
}

/// What a module reads from its file, and what it lacks that a separate
/// debug file may give.
struct Contents {
    /// Code and data symbols (`.symtab` and `.dynsym`; the debug file's
    /// `.symtab` when the file has none).
    symbols: Vec<elf::Sym>,
    /// The files their names are in.
    names: elf::Names,
    /// SHF_ALLOC sections (the debug file's when the file has none).
    sections: Vec<SectionInfo>,
    /// The file holding DWARF, this one or the debug file.
    dwarf_path: Option<PathBuf>,
    /// The file has a `.symtab`.
    has_symtab: bool,
}

impl Contents {
    /// What the file at `path` (`file`, parsed from `map` when a mapped
    /// file: its names are left there) has itself.
    fn of(
        path: &Path,
        file: &object::File<'_>,
        map: Option<&Arc<Mmap>>,
        origin: Origin,
    ) -> Contents {
        use object::Object;
        let mut names = elf::Names::default();
        let source = map.and_then(|map| {
            Some(elf::NameSource {
                file: names.add(map.clone())?,
                data: &map[..],
            })
        });
        let mut symbols = elf::symbols(file, true, true, source);
        if origin == Origin::Image {
            symbols = elf::without_weak_aliases(symbols);
        }
        Contents {
            symbols,
            names,
            sections: elf::alloc_sections(file),
            dwarf_path: dwarf::has_debug_info(file).then(|| path.to_path_buf()),
            has_symtab: file.symbol_table().is_some(),
        }
    }

    /// Whether DWARF, `.symtab` or the section headers are missing.
    fn lacks_some(&self) -> bool {
        self.dwarf_path.is_none() || !self.has_symtab || self.sections.is_empty()
    }

    /// Takes what is missing from `debug`, the debug file at `debug_path`
    /// (parsed from `map`).
    fn complete_from(&mut self, debug: &object::File<'_>, map: &Arc<Mmap>, debug_path: &Path) {
        if self.dwarf_path.is_none() && dwarf::has_debug_info(debug) {
            self.dwarf_path = Some(debug_path.to_path_buf());
        }
        if !self.has_symtab {
            let source = self.names.add(map.clone()).map(|file| elf::NameSource {
                file,
                data: &map[..],
            });
            self.symbols
                .extend(elf::symbols(debug, true, false, source));
        }
        if self.sections.is_empty() {
            self.sections = elf::alloc_sections(debug);
        }
    }
}

/// `data` parsed as the separate debug file of the module at `module`,
/// unless it is not ELF, does not have the CRC-32 of the module's
/// `.gnu_debuglink` (`debuglink_crc`, when the debuglink named it) or is
/// not of the module's build (`build_id`, when it has one). A debuglink
/// names a file, not a build: its CRC must match even when the build-id
/// does (a build-id is often the same for a rebuilt debug file that no
/// longer fits, and files may lack one).
fn check_debug_file<'d>(
    data: &'d [u8],
    module: &Path,
    build_id: Option<&[u8]>,
    debuglink_crc: Option<u32>,
) -> Result<object::File<'d>, Rejection> {
    let debug = elf::parse_elf(data).ok_or(Rejection::NotElf)?;
    if let Some(expected) = debuglink_crc {
        let found = elf::crc32(data);
        if found != expected {
            return Err(Rejection::CrcMismatch {
                module: module.to_path_buf(),
                found,
                expected,
            });
        }
    }
    if let Some(expected) = build_id {
        let found = elf::build_id(&debug);
        if found.as_deref() != Some(expected) {
            return Err(Rejection::BuildIdMismatch {
                module: module.to_path_buf(),
                found,
                expected: expected.to_vec(),
            });
        }
    }
    Ok(debug)
}

impl Module {
    /// Lets the kernel take back the file pages of its names and DWARF.
    fn release_pages(&self) {
        self.symbols.release_pages();
        if let Some(Some(dwarf)) = &self.dwarf {
            dwarf.release_pages();
        }
    }

    /// [`Symbolizer::function_ranges`] of this module.
    fn function_ranges(&self, names: &[&str]) -> Vec<(String, std::ops::Range<u64>)> {
        let found = self.symbols.functions_named(names);
        let mut seen = std::collections::HashSet::new();
        names
            .iter()
            .filter(|name| seen.insert(**name))
            .filter_map(|&name| {
                let sym = found.get(name)?;
                let start = self.info.svma_to_file_offset(sym.svma)?;
                let end = start.checked_add(sym.size)?;
                Some((name.to_string(), start..end))
            })
            .collect()
    }
}

/// Path-based cache key: a replaced file gets a new entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PathKey {
    path: PathBuf,
    dev: u64,
    ino: u64,
    mtime_ns: i128,
    size: u64,
}

/// Code addresses a module keeps the names of, at most.
const CODE_CACHE_MAX: usize = 1 << 16;

/// A parsed module, shared by the paths and build-id that name it; behind a
/// lock so that a symbolizer can move to another thread.
type Shared = Arc<Mutex<Module>>;

/// One module's code addresses, for [`Symbolizer::code_batches`].
#[derive(Debug, Clone, Copy)]
pub struct CodeBatch<'a> {
    /// The module's file.
    pub path: &'a Path,
    /// The build-id it was recorded with, if known.
    pub expected_build_id: Option<&'a [u8]>,
    /// The file offsets to look up (return addresses already decremented).
    pub file_offsets: &'a [u64],
}

/// Symbolizes code and data addresses of ELF files, caching every module.
pub struct Symbolizer {
    options: Options,
    /// Path key → module, or the reason it cannot be used.
    by_path: HashMap<PathKey, Result<Shared, Reason>>,
    /// Build-id → module, to share one parse between paths.
    by_build_id: HashMap<Vec<u8>, Shared>,
    /// Stable storage for [`Symbolizer::module_info`] references.
    infos: HashMap<PathKey, Box<ModuleInfo>>,
    /// Images in memory ([`Symbolizer::add_image`]) by the name they stand
    /// for, looked up before any file.
    images: HashMap<PathBuf, Shared>,
    /// A build-id cache entry → the recorded path it stands for: its
    /// `.gnu_debuglink` is looked for beside that path, as the original's.
    stands_for: HashMap<PathBuf, PathBuf>,
    /// The [`Symbolizer::forget_unused`] round each file's module was last
    /// looked up in.
    last_used: HashMap<PathKey, u64>,
    /// Rounds of [`Symbolizer::forget_unused`] so far.
    round: u64,
}

impl fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Symbolizer")
            .field("options", &self.options)
            .field("modules", &self.by_path.len())
            .finish()
    }
}

impl Symbolizer {
    /// A symbolizer with an empty cache.
    pub fn new(options: Options) -> Self {
        Symbolizer {
            options,
            by_path: HashMap::new(),
            by_build_id: HashMap::new(),
            infos: HashMap::new(),
            images: HashMap::new(),
            stands_for: HashMap::new(),
            last_used: HashMap::new(),
            round: 0,
        }
    }

    /// Makes the ELF image `data` answer for `name` (e.g. `[vdso]`, read
    /// from memory) in every lookup by that name, checked against the
    /// expected build-id like a file. Its DWARF and relocations are not
    /// read (symbol tables only); no separate debug file is searched. A
    /// weak alias yields to the non-weak function at the same address
    /// (`__vdso_time` over `time`), as perf shows vDSO frames.
    /// Errors: [`Reason::NotElf`].
    pub fn add_image(&mut self, name: &Path, data: &[u8]) -> Result<(), Reason> {
        let file = elf::parse_elf(data).ok_or(Reason::NotElf)?;
        let build_id = elf::build_id(&file);
        let mut module = self.parse_with(name, &file, None, build_id, Origin::Image)?;
        module.dwarf = Some(None);
        module.relocations = Some(Err(Reason::Unsupported));
        self.images
            .insert(name.to_path_buf(), Arc::new(Mutex::new(module)));
        Ok(())
    }

    fn path_key(path: &Path) -> Result<PathKey, Reason> {
        let meta = std::fs::metadata(path).map_err(|_| Reason::MissingFile)?;
        if !meta.is_file() {
            return Err(Reason::MissingFile);
        }
        Ok(PathKey {
            path: path.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            size: meta.size(),
        })
    }

    /// The module for `path`, parsed on first use, checked against
    /// `expected_build_id`.
    fn module(
        &mut self,
        path: &Path,
        expected_build_id: Option<&[u8]>,
    ) -> Result<(PathKey, Shared), Reason> {
        if self.options.symfs.is_none() && self.options.build_id_caches.is_empty() {
            return self.module_at(path, expected_build_id);
        }
        // The first candidate of the recorded build with DWARF (a cached
        // copy may be stripped where the path holds the same build whole),
        // else the first of the recorded build; else the reason the
        // recorded path itself gave (another build, or missing).
        let mut own = None;
        let mut without_dwarf = None;
        for candidate in self.options.file_candidates(path, expected_build_id) {
            if candidate != path {
                self.stands_for
                    .entry(candidate.clone())
                    .or_insert_with(|| path.to_path_buf());
            }
            match self.module_at(&candidate, expected_build_id) {
                Ok(found)
                    if found
                        .1
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .info
                        .has_dwarf =>
                {
                    return Ok(found)
                }
                Ok(found) => {
                    without_dwarf.get_or_insert(found);
                }
                Err(reason) if candidate == path => own = Some(reason),
                Err(_) => {}
            }
        }
        without_dwarf.ok_or(own.unwrap_or(Reason::MissingFile))
    }

    /// [`Self::module`] read from exactly `path`.
    fn module_at(
        &mut self,
        path: &Path,
        expected_build_id: Option<&[u8]>,
    ) -> Result<(PathKey, Shared), Reason> {
        let (key, module) = match self.images.get(path) {
            Some(image) => (
                PathKey {
                    path: path.to_path_buf(),
                    dev: 0,
                    ino: 0,
                    mtime_ns: 0,
                    size: 0,
                },
                image.clone(),
            ),
            None => self.file_module(path)?,
        };
        if let Some(expected) = expected_build_id {
            let found = module
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .info
                .build_id
                .clone();
            if found.as_deref() != Some(expected) {
                return Err(Reason::BuildIdMismatch {
                    expected: expected.to_vec(),
                    found,
                });
            }
        }
        Ok((key, module))
    }

    /// The module parsed from the file at `path`, cached.
    fn file_module(&mut self, path: &Path) -> Result<(PathKey, Shared), Reason> {
        let key = Self::path_key(path)?;
        self.last_used.insert(key.clone(), self.round);
        if !self.by_path.contains_key(&key) {
            let loaded = self.load(path);
            self.by_path.insert(key.clone(), loaded);
        }
        let module = self.by_path[&key].clone()?;
        Ok((key, module))
    }

    fn load(&mut self, path: &Path) -> Result<Shared, Reason> {
        let map = Arc::new(elf::map_file(path).map_err(|_| Reason::MissingFile)?);
        let file = elf::parse_elf(&map).ok_or(Reason::NotElf)?;
        let build_id = elf::build_id(&file);
        if let Some(module) = build_id.as_ref().and_then(|id| self.by_build_id.get(id)) {
            // Same build-id, same code: share the parse, unless this file
            // brings DWARF that the cached one (a stripped copy without its
            // debug file) lacks.
            if module
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .info
                .has_dwarf
                || !dwarf::has_debug_info(&file)
            {
                return Ok(module.clone());
            }
        }
        let module = Arc::new(Mutex::new(self.parse_with(
            path,
            &file,
            Some(&map),
            build_id,
            Origin::File,
        )?));
        if let Some(id) = module
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .info
            .build_id
            .clone()
        {
            self.by_build_id.insert(id, module.clone());
        }
        Ok(module)
    }

    /// The module of a file (`file`, parsed from `map`) or of an image in
    /// memory (see [`Origin`]).
    fn parse_with(
        &self,
        path: &Path,
        file: &object::File<'_>,
        map: Option<&Arc<Mmap>>,
        build_id: Option<Vec<u8>>,
        origin: Origin,
    ) -> Result<Module, Reason> {
        let headers = elf::program_headers(file);
        let mut contents = Contents::of(path, file, map, origin);
        let plt = plt::symbols(file, &contents.symbols, &contents.names);
        let plt = SymbolTable::new(plt, elf::Names::default());
        // Separate debug file: only needed when something is missing.
        let (debug_file, rejected_debug_files) = if origin == Origin::File && contents.lacks_some()
        {
            self.find_debug_file(path, file, build_id.as_deref(), &mut contents)
        } else {
            (None, Vec::new())
        };
        let Contents {
            mut symbols,
            names,
            mut sections,
            dwarf_path,
            ..
        } = contents;
        // NOBITS sections: report the virtual file offset of their start.
        for section in sections.iter_mut().filter(|s| s.nobits) {
            section.file_offset = svma_to_file_offset(&headers.loads, section.svma).unwrap_or(0);
        }
        symbols.extend(entry_symbol(file, &symbols, &sections, headers.entry));
        // The whole string tables were read: only the names looked up are
        // read again.
        names.release_pages();
        let symbols = SymbolTable::new(symbols, names);
        let info = ModuleInfo {
            path: path.to_path_buf(),
            build_id,
            debug_file,
            rejected_debug_files,
            sections,
            segments: headers.loads,
            has_symbols: !symbols.is_empty(),
            has_dwarf: dwarf_path.is_some(),
        };
        Ok(Module {
            info,
            symbols,
            plt,
            header_ranges: [headers.elf_header, headers.program_headers],
            dwarf: None,
            dwarf_path,
            code_cache: HashMap::new(),
            relocations: None,
        })
    }

    /// The separate debug file of the module at `path` (`file`): the first
    /// candidate that [`check_debug_file`] accepts, from which `contents`
    /// takes what it lacks; and the candidates rejected before it.
    fn find_debug_file(
        &self,
        path: &Path,
        file: &object::File<'_>,
        build_id: Option<&[u8]>,
        contents: &mut Contents,
    ) -> (Option<PathBuf>, Vec<RejectedDebugFile>) {
        use object::Object;
        let debuglink = file.gnu_debuglink().ok().flatten();
        let candidates = elf::debug_file_candidates(
            self.stands_for.get(path).map_or(path, PathBuf::as_path),
            build_id,
            debuglink.map(|(name, _)| name),
            &self.options.debug_dirs,
        );
        let mut rejected = Vec::new();
        for elf::DebugCandidate {
            path: candidate,
            via_debuglink,
        } in candidates
        {
            let Ok(map) = elf::map_file(&candidate) else {
                continue;
            };
            let map = Arc::new(map);
            let crc = debuglink.filter(|_| via_debuglink).map(|(_, crc)| crc);
            match check_debug_file(&map, path, build_id, crc) {
                Ok(debug) => {
                    contents.complete_from(&debug, &map, &candidate);
                    return (Some(candidate), rejected);
                }
                Err(reason) => rejected.push(RejectedDebugFile {
                    path: candidate,
                    reason,
                }),
            }
        }
        (None, rejected)
    }

    /// Ends a round of lookups: forgets the files whose modules no lookup
    /// of the last `rounds` rounds (this one included) asked for, with their
    /// symbols and DWARF (an in-memory image stays). A long-lived
    /// symbolizer (`record --interval`, `top`) then holds what the host
    /// runs now, not every program it ever ran; a file asked for again is
    /// parsed again.
    pub fn forget_unused(&mut self, rounds: u64) {
        let oldest = self.round.saturating_sub(rounds.saturating_sub(1));
        self.last_used.retain(|_, &mut round| round >= oldest);
        let used = &self.last_used;
        self.by_path.retain(|key, _| used.contains_key(key));
        self.infos.retain(|key, _| used.contains_key(key));
        // A build-id's module lives while a path still has it.
        self.by_build_id
            .retain(|_, module| Arc::strong_count(module) > 1);
        // What stays is kept parsed; the file pages read for it go back to
        // the page cache until read again.
        for module in self.by_path.values().flatten() {
            module
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .release_pages();
        }
        self.round += 1;
    }

    /// Facts about the module at `path`, parsed once and cached. Errors:
    /// [`Reason::MissingFile`], [`Reason::NotElf`],
    /// [`Reason::BuildIdMismatch`].
    pub fn module_info(
        &mut self,
        path: &Path,
        expected_build_id: Option<&[u8]>,
    ) -> Result<&ModuleInfo, Reason> {
        let (key, module) = self.module(path, expected_build_id)?;
        let info = self.infos.entry(key).or_insert_with(|| {
            Box::new(
                module
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .info
                    .clone(),
            )
        });
        Ok(info)
    }

    /// Symbolizes code addresses (file offsets) of one module in one batch.
    /// Offsets may be unsorted and may repeat; the answer has one entry per
    /// offset, in order. Return addresses must already be decremented.
    pub fn code(
        &mut self,
        path: &Path,
        expected_build_id: Option<&[u8]>,
        file_offsets: &[u64],
    ) -> Vec<Result<CodeSite, Reason>> {
        match self.module(path, expected_build_id) {
            Ok((_, module)) => code_in(&module, self.options.demangle, file_offsets),
            Err(reason) => vec![Err(reason); file_offsets.len()],
        }
    }

    /// [`Symbolizer::code`] of several modules at once, the modules shared
    /// out among up to `threads` threads, the biggest batches first (a
    /// module's DWARF is loaded and read by one thread at a time). The
    /// answers are in the order of `batches`.
    pub fn code_batches(
        &mut self,
        batches: &[CodeBatch<'_>],
        threads: usize,
    ) -> Vec<Vec<Result<CodeSite, Reason>>> {
        // Opening a module touches the caches: done here, in order.
        let modules: Vec<Result<Shared, Reason>> = batches
            .iter()
            .map(|b| self.module(b.path, b.expected_build_id).map(|(_, m)| m))
            .collect();
        let demangle = self.options.demangle;
        let mut order: Vec<usize> = (0..batches.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(batches[i].file_offsets.len()));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let answers: Vec<Mutex<Vec<Result<CodeSite, Reason>>>> =
            batches.iter().map(|_| Mutex::new(Vec::new())).collect();
        let work = || loop {
            let taken = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&i) = order.get(taken) else { break };
            let offsets = batches[i].file_offsets;
            let answer = match &modules[i] {
                Ok(module) => code_in(module, demangle, offsets),
                Err(reason) => vec![Err(reason.clone()); offsets.len()],
            };
            *answers[i].lock().unwrap_or_else(|e| e.into_inner()) = answer;
        };
        std::thread::scope(|scope| {
            for _ in 1..threads.clamp(1, batches.len().max(1)) {
                scope.spawn(work);
            }
            work();
        });
        answers
            .into_iter()
            .map(|a| a.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect()
    }

    /// Resolves data addresses (file offsets, including virtual ones in
    /// `.bss`) to section and data symbol.
    pub fn data(
        &mut self,
        path: &Path,
        expected_build_id: Option<&[u8]>,
        file_offsets: &[u64],
    ) -> Vec<Result<DataTarget, Reason>> {
        let module = match self.module(path, expected_build_id) {
            Ok((_, module)) => module,
            Err(reason) => return vec![Err(reason); file_offsets.len()],
        };
        let demangle = self.options.demangle;
        let module = module.lock().unwrap_or_else(|e| e.into_inner());
        file_offsets
            .iter()
            .map(|&file_offset| data_target(&module, file_offset, demangle))
            .collect()
    }
}

/// The code sites of `file_offsets` in `module`, its DWARF loaded on the
/// first lookup, each svma answered once per module (bounded cache).
fn code_in(module: &Shared, demangle: bool, file_offsets: &[u64]) -> Vec<Result<CodeSite, Reason>> {
    let mut module = module.lock().unwrap_or_else(|e| e.into_inner());
    let module = &mut *module;
    if module.dwarf.is_none() {
        let loaded = module
            .dwarf_path
            .as_deref()
            .and_then(|p| elf::map_file(p).ok())
            .and_then(|map| dwarf::Dwarf::load(dwarf::Bytes::Map(map)));
        module.dwarf = Some(loaded);
    }
    file_offsets
        .iter()
        .map(|&file_offset| {
            let Some(svma) = module.info.file_offset_to_svma(file_offset) else {
                return Err(Reason::NotInSegment);
            };
            if let Some(hit) = module.code_cache.get(&svma) {
                return hit.clone();
            }
            let dwarf = module.dwarf.as_ref().and_then(Option::as_ref);
            let tables = [&module.symbols, &module.plt];
            let result = code_site(dwarf, tables, svma, demangle);
            // A run of hours meets ever more addresses: what a module
            // keeps is bounded (the oldest go all at once).
            if module.code_cache.len() >= CODE_CACHE_MAX {
                module.code_cache.clear();
            }
            module.code_cache.insert(svma, result.clone());
            result
        })
        .collect()
}

fn data_target(module: &Module, file_offset: u64, demangle: bool) -> Result<DataTarget, Reason> {
    let svma = module
        .info
        .file_offset_to_svma(file_offset)
        .ok_or(Reason::NotInSegment)?;
    let section = module
        .info
        .section_at(svma)
        .map(|s| s.name.clone())
        .or_else(|| outside_sections(module, file_offset, svma).map(str::to_string));
    let symbol = module.symbols.lookup(svma, SymKind::Data);
    Ok(DataTarget {
        svma,
        section,
        symbol: symbol.map(|s| maybe_demangle(module.symbols.name(s), demangle)),
        symbol_offset: symbol.map_or(0, |s| svma - s.svma),
    })
}

/// `_start` at the entry point `e_entry` when no code symbol starts there
/// (ld.so without its debug file: its `_start` roots every start-up
/// stack; a stripped executable's), sized by its FDE, else up to the next
/// FDE's start, never past its section, so that it never takes the name of
/// the functions after it. None when the file has no FDEs to bound it.
fn entry_symbol(
    file: &object::File<'_>,
    syms: &[elf::Sym],
    sections: &[SectionInfo],
    entry: u64,
) -> Option<elf::Sym> {
    if entry == 0
        || syms
            .iter()
            .any(|s| s.kind == SymKind::Function && s.svma == entry)
    {
        return None;
    }
    let section = sections
        .iter()
        .find(|s| s.flags & SHF_EXECINSTR != 0 && entry >= s.svma && entry - s.svma < s.size)?;
    let section_end = section.svma.saturating_add(section.size);
    let fdes = unwind::fde_svmas(file)?;
    // The entry's own FDE (crt1's `_start` has one, ld.so's has none), else
    // up to the next function's.
    let end = match fdes.iter().find(|f| f.contains(&entry)) {
        Some(own) => own.end,
        None => fdes
            .iter()
            .map(|f| f.start)
            .filter(|&start| start > entry)
            .min()
            .unwrap_or(section_end),
    }
    .min(section_end);
    Some(elf::Sym {
        svma: entry,
        size: end - entry,
        kind: SymKind::Function,
        global: false,
        weak: false,
        name: "_start".into(),
        section_end,
    })
}

/// Names a mapped address that lies in no section, for what it is (see
/// [`DataTarget::section`]); `None` when the file has no section headers.
fn outside_sections(module: &Module, file_offset: u64, svma: u64) -> Option<&str> {
    outside_sections_of(
        &module.info.sections,
        &module.info.segments,
        &module.header_ranges,
        file_offset,
        svma,
    )
}

/// `SHF_TLS`: `.tbss` takes no room in the segment.
const SHF_TLS: u64 = object::elf::SHF_TLS.0;

/// `SHF_EXECINSTR`: code.
const SHF_EXECINSTR: u64 = object::elf::SHF_EXECINSTR.0;

fn outside_sections_of<'s>(
    sections: &'s [SectionInfo],
    segments: &[SegmentInfo],
    [elf_header, program_headers]: &[std::ops::Range<u64>; 2],
    file_offset: u64,
    svma: u64,
) -> Option<&'s str> {
    if sections.is_empty() {
        return None;
    }
    let segment = segments
        .iter()
        .find(|seg| svma >= seg.svma && svma - seg.svma < seg.mem_size)?;
    // Past the file bytes: the tail of the last file page that the kernel
    // (at exec) or ld.so zeroes in front of `.bss`, so it is `.bss`'s.
    if svma - segment.svma >= segment.file_size {
        let bss = sections
            .iter()
            .filter(|s| s.nobits && s.flags & SHF_TLS == 0)
            .filter(|s| s.svma >= svma && s.svma - segment.svma < segment.mem_size)
            .min_by_key(|s| s.svma);
        if let Some(bss) = bss {
            return Some(&bss.name);
        }
    } else if elf_header.contains(&file_offset) {
        return Some("[elf-header]");
    } else if program_headers.contains(&file_offset) {
        return Some("[program-headers]");
    }
    Some("[padding]")
}

/// What [`inspect_image`] read from one ELF image.
#[derive(Debug)]
pub struct Inspection {
    /// The module facts, as [`Symbolizer::module_info`] gives them.
    pub info: ModuleInfo,
    /// The `.gnu_debuglink` name and CRC, and the CRC-32 of the image.
    pub debuglink: Option<(Vec<u8>, u32)>,
    /// CRC-32 of the whole image (what a debuglink is checked against).
    pub crc: u32,
    /// Where a separate debug file would be looked for.
    pub debug_candidates: Vec<PathBuf>,
    /// [`Symbolizer::code`] of each offset (DWARF of the image itself).
    pub code: Vec<Result<CodeSite, Reason>>,
    /// [`Symbolizer::data`] of each offset.
    pub data: Vec<Result<DataTarget, Reason>>,
    /// [`Symbolizer::function_ranges`] of start-up's functions.
    pub functions: Vec<(String, std::ops::Range<u64>)>,
    /// [`Symbolizer::relocations`].
    pub relocations: Result<RelocationInfo, Reason>,
    /// [`unwind_sections`].
    pub unwind: Result<UnwindSections, Reason>,
}

/// Everything this crate reads from an ELF file, over an image in memory
/// instead of a path: module facts, debuglink, symbols, DWARF frames and
/// data targets of `file_offsets`, relocations and unwind sections. No
/// separate debug file is opened. The same code as the path-based API, so a
/// fuzzer feeding arbitrary bytes here tests what pfprof runs on files.
pub fn inspect_image(data: &[u8], file_offsets: &[u64]) -> Result<Inspection, Reason> {
    let file = elf::parse_elf(data).ok_or(Reason::NotElf)?;
    let build_id = elf::build_id(&file);
    let path = Path::new("/nonexistent/image");
    let debuglink = {
        use object::Object;
        file.gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, crc)| (name.to_vec(), crc))
    };
    let debug_candidates: Vec<PathBuf> = elf::debug_file_candidates(
        path,
        build_id.as_deref(),
        debuglink.as_ref().map(|(name, _)| &name[..]),
        &Options::default().debug_dirs,
    )
    .into_iter()
    .map(|c| c.path)
    .collect();
    let symbolizer = Symbolizer::new(Options::default());
    let module = symbolizer.parse_with(path, &file, None, build_id, Origin::Image)?;
    let dwarf = module
        .info
        .has_dwarf
        .then(|| dwarf::Dwarf::load(dwarf::Bytes::Owned(data.to_vec())))
        .flatten();
    let code = file_offsets
        .iter()
        .map(|&file_offset| {
            let svma = module
                .info
                .file_offset_to_svma(file_offset)
                .ok_or(Reason::NotInSegment)?;
            code_site(dwarf.as_ref(), [&module.symbols, &module.plt], svma, true)
        })
        .collect();
    let data_targets = file_offsets
        .iter()
        .map(|&file_offset| data_target(&module, file_offset, true))
        .collect();
    let functions = module.function_ranges(&["main", "__libc_start_call_main", "_start"]);
    Ok(Inspection {
        relocations: reloc::relocations(&file, &module.info),
        unwind: unwind_sections(data),
        info: module.info,
        debuglink,
        crc: elf::crc32(data),
        debug_candidates,
        code,
        data: data_targets,
        functions,
    })
}

impl Symbolizer {
    /// The file offset ranges (`start = svma_to_file_offset(svma)`,
    /// `end = start + st_size`) of the function symbols (STT_FUNC,
    /// STT_GNU_IFUNC) named in `names`, from the module's cached symbol
    /// tables (`.symtab`, `.dynsym`, and the separate debug file's `.symtab`
    /// when the file is stripped). Names are matched exactly against raw
    /// (mangled) symbol names. The answer follows the order of `names`, one
    /// entry per distinct name; names without a function symbol (or whose
    /// symbol lies outside every PT_LOAD) are absent, as is everything when
    /// the module cannot be read. Unsized symbols give an empty range. When
    /// several symbols share a name, a global one wins, then a sized one,
    /// then the lowest address.
    pub fn function_ranges(
        &mut self,
        path: &Path,
        expected_build_id: Option<&[u8]>,
        names: &[&str],
    ) -> Vec<(String, std::ops::Range<u64>)> {
        let Ok((_, module)) = self.module(path, expected_build_id) else {
            return Vec::new();
        };
        let ranges = module
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .function_ranges(names);
        ranges
    }

    /// The dynamic relocations ld.so applies to the module at start-up
    /// (see [`RelocationInfo`]), read on first use and cached with the
    /// module. Errors: [`Reason::MissingFile`], [`Reason::NotElf`] (also
    /// for relocation tables outside the file), [`Reason::BuildIdMismatch`],
    /// [`Reason::Unsupported`] for anything but 64-bit little-endian
    /// x86_64.
    pub fn relocations(
        &mut self,
        path: &Path,
        expected_build_id: Option<&[u8]>,
    ) -> Result<RelocationInfo, Reason> {
        let (_, module) = self.module(path, expected_build_id)?;
        let mut module = module.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cached) = &module.relocations {
            return cached.clone();
        }
        // `path` is the file just checked against the cache (same key, or
        // same build-id as the cached module).
        let result = match elf::map_file(path) {
            Ok(map) => elf::parse_elf(&map)
                .ok_or(Reason::NotElf)
                .and_then(|file| reloc::relocations(&file, &module.info)),
            Err(_) => Err(Reason::MissingFile),
        };
        module.relocations = Some(result.clone());
        result
    }
}

fn maybe_demangle(name: &str, demangle: bool) -> String {
    if demangle {
        crate::demangle(name)
    } else {
        name.to_string()
    }
}

/// The function symbol naming `svma`: a real one of `symbols`, else the
/// PLT entry of `plt` as `name@plt`.
fn function_symbol([symbols, plt]: [&SymbolTable; 2], svma: u64, demangle: bool) -> Option<String> {
    if let Some(sym) = symbols.lookup(svma, SymKind::Function) {
        return Some(maybe_demangle(symbols.name(sym), demangle));
    }
    let entry = plt.lookup(svma, SymKind::Function)?;
    Some(format!("{}@plt", maybe_demangle(plt.name(entry), demangle)))
}

/// Builds the frames of one code address from DWARF and the symbol tables
/// (real symbols, then PLT entries).
fn code_site(
    dwarf: Option<&dwarf::Dwarf>,
    tables: [&SymbolTable; 2],
    svma: u64,
    demangle: bool,
) -> Result<CodeSite, Reason> {
    let symbol = || function_symbol(tables, svma, demangle);
    let raw = dwarf.map(|d| d.frames(svma, demangle)).unwrap_or_default();
    let mut frames: Vec<Frame> = Vec::with_capacity(raw.len().max(1));
    let count = raw.len();
    for (index, raw) in raw.into_iter().enumerate() {
        let outer = index + 1 == count;
        let function = match raw.function.filter(|f| !f.is_empty()) {
            Some(function) => function,
            None if outer => match symbol() {
                Some(name) => name,
                None => return Err(Reason::NoSymbol),
            },
            // An inlined frame without a name: keep the location, mark it.
            None => "<inlined>".to_string(),
        };
        frames.push(Frame {
            function,
            file: raw.file,
            line: raw.line,
            inlined: !outer,
        });
    }
    if frames.is_empty() {
        let function = symbol().ok_or(Reason::NoSymbol)?;
        let (file, line) = dwarf.map(|d| d.location(svma)).unwrap_or((None, None));
        frames.push(Frame {
            function,
            file,
            line,
            inlined: false,
        });
    }
    Ok(CodeSite { svma, frames })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module stays while one of the last `rounds` rounds looked it up,
    /// then goes with its facts; asked for again, it is parsed again.
    #[test]
    fn forget_unused_keeps_the_last_rounds() {
        let exe = std::env::current_exe().unwrap();
        let mut s = Symbolizer::new(Options::default());
        s.module_info(&exe, None).unwrap();
        s.forget_unused(2);
        assert_eq!((s.by_path.len(), s.infos.len()), (1, 1), "used this round");
        s.forget_unused(2);
        assert_eq!(s.by_path.len(), 1, "used the round before");
        s.forget_unused(2);
        assert!(s.by_path.is_empty() && s.infos.is_empty() && s.by_build_id.is_empty());
        s.module_info(&exe, None).unwrap();
        assert_eq!(s.by_path.len(), 1);
    }

    /// Where a recorded file is looked for: under --symfs, (with a build-id
    /// to check) perf's caches, at its path, then the debug dirs.
    #[test]
    fn file_candidates_in_order() {
        let options = Options {
            debug_dirs: vec![PathBuf::from("/dbg")],
            demangle: true,
            symfs: Some(PathBuf::from("/sym")),
            build_id_caches: vec![PathBuf::from("/home/u/.debug")],
        };
        let none = Options {
            symfs: None,
            ..options.clone()
        };
        let p = |s: &str| PathBuf::from(s);
        let id = [0xab, 0xcd, 0xef];
        type Case<'a> = (&'a Options, Option<&'a [u8]>, Vec<PathBuf>);
        let cases: Vec<Case<'_>> = vec![
            (
                &options,
                None,
                vec![p("/sym/usr/lib/x.so"), p("/usr/lib/x.so")],
            ),
            (&none, None, vec![p("/usr/lib/x.so")]),
            (
                &none,
                Some(&id),
                vec![
                    p("/home/u/.debug/.build-id/ab/cdef/elf"),
                    p("/home/u/.debug/usr/lib/x.so/abcdef/elf"),
                    p("/usr/lib/x.so"),
                    p("/dbg/.build-id/ab/cdef.debug"),
                ],
            ),
        ];
        for (options, build_id, want) in cases {
            let got = options.file_candidates(Path::new("/usr/lib/x.so"), build_id);
            assert_eq!(got, want, "{build_id:?}");
        }
    }

    /// A build-id's place in a build-id tree: the first byte splits off;
    /// a build-id shorter than 2 bytes has none.
    #[test]
    fn build_id_dir_table() {
        let root = Path::new("/r");
        let cases: &[(&[u8], Option<&str>)] = &[
            (&[0xab, 0xcd, 0xef], Some("/r/.build-id/ab/cdef")),
            (&[0x01, 0x02], Some("/r/.build-id/01/02")),
            (&[0xab], None),
            (&[], None),
        ];
        for &(id, want) in cases {
            assert_eq!(build_id_dir(root, id), want.map(PathBuf::from), "{id:?}");
        }
        let dirs = [PathBuf::from("/a"), PathBuf::from("/b")];
        let debug: Vec<PathBuf> = build_id_debug_files(&dirs, Some(&[0xab, 0xcd])).collect();
        assert_eq!(
            debug,
            [p("/a/.build-id/ab/cd.debug"), p("/b/.build-id/ab/cd.debug")]
        );
        assert_eq!(build_id_debug_files(&dirs, Some(&[0xab])).count(), 0);
        assert_eq!(build_id_debug_files(&dirs, None).count(), 0);
    }

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    /// `$HOME/.debug`, and no cache for an unset or empty `HOME` (an empty
    /// one made it the relative `.debug`).
    #[test]
    fn default_cache_needs_a_home() {
        let cases = [
            (Some("/home/ann"), Some("/home/ann/.debug")),
            (Some(""), None),
            (None, None),
        ];
        for (home, want) in cases {
            let got = build_id_cache_in(home.map(std::ffi::OsString::from));
            assert_eq!(got, want.map(PathBuf::from), "{home:?}");
        }
    }

    /// Lower-case hex, two digits a byte.
    #[test]
    fn hex_table() {
        assert_eq!(hex(&[]), "");
        assert_eq!(hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
    }

    fn seg(svma: u64, file_offset: u64, file_size: u64, mem_size: u64) -> SegmentInfo {
        SegmentInfo {
            svma,
            file_offset,
            file_size,
            mem_size,
            flags: 4,
        }
    }

    #[test]
    fn file_offset_to_svma_table() {
        // A typical PIE: r--, r-x, r--, rw- with .bss past p_filesz.
        let segments = [
            seg(0x0, 0x0, 0x600, 0x600),
            seg(0x1000, 0x1000, 0x200, 0x200),
            seg(0x2000, 0x2000, 0x100, 0x100),
            seg(0x3df0, 0x2df0, 0x230, 0x5240),
        ];
        let cases: &[(u64, Option<u64>)] = &[
            (0x0, Some(0x0)),
            (0x5ff, Some(0x5ff)),
            (0x600, None),
            (0x1010, Some(0x1010)),
            (0x2df0, Some(0x3df0)),
            (0x301f, Some(0x401f)),
            // Past p_filesz, inside p_memsz: the virtual file offset of .bss.
            (0x3020, Some(0x4020)),
            (0x5000, Some(0x6000)),
            (0x802f, Some(0x902f)),
            (0x8030, None),
            (u64::MAX, None),
        ];
        for &(file_offset, want) in cases {
            assert_eq!(
                file_offset_to_svma(&segments, file_offset),
                want,
                "file_offset {file_offset:#x}"
            );
        }
    }

    #[test]
    fn file_bytes_win_over_bss_of_an_earlier_segment() {
        // Segment A's memsz reaches over offsets that segment B has in file.
        let segments = [
            seg(0x1000, 0x0, 0x100, 0x3000),
            seg(0x8000, 0x200, 0x100, 0x100),
        ];
        assert_eq!(file_offset_to_svma(&segments, 0x210), Some(0x8010));
        assert_eq!(file_offset_to_svma(&segments, 0x150), Some(0x1150));
    }

    #[test]
    fn demangle_table() {
        let cases = [
            ("main", "main"),
            (
                "_ZN3std2rt10lang_start17h0123456789abcdefE",
                "std::rt::lang_start",
            ),
            ("_RNvCs1234_7mycrate3foo", "mycrate::foo"),
            ("_ZN3foo3barEi", "foo::bar(int)"),
            ("_Z4funcv", "func()"),
            ("_ZTV3Foo", "vtable for Foo"),
            ("_ZTI3Foo", "typeinfo for Foo"),
            ("_ZTS3Foo", "typeinfo name for Foo"),
            ("_ZTT3Foo", "VTT for Foo"),
            ("_ZThn8_N3Foo3barEv", "non-virtual thunk to Foo::bar()"),
            ("_ZGVZ4mainE1x", "guard variable for main::x"),
            ("_ZZ4mainE1x", "main::x"),
            ("_Zgarbage", "_Zgarbage"),
            ("", ""),
        ];
        for (raw, want) in cases {
            assert_eq!(demangle(raw), want, "{raw}");
        }
    }

    /// Mapped addresses in no section: the headers, padding, and the
    /// zeroed tail of the last file page in front of `.bss`.
    #[test]
    fn outside_sections_table() {
        let section = |name: &str, svma: u64, size: u64, nobits: bool, flags: u64| SectionInfo {
            name: name.into(),
            svma,
            size,
            file_offset: 0,
            nobits,
            flags,
        };
        // A PIE: headers and .interp in the first segment; .data ends at
        // 0x4010 (p_filesz), .bss starts aligned at 0x4040; .tbss first.
        let sections = [
            section(".interp", 0x318, 0x1c, false, 2),
            section(".text", 0x1000, 0x100, false, 6),
            section(".tbss", 0x3df0, 0x8, true, 0x403),
            section(".data", 0x4000, 0x10, false, 3),
            section(".bss", 0x4040, 0x100, true, 3),
        ];
        let segments = [
            seg(0x0, 0x0, 0x400, 0x400),
            seg(0x1000, 0x1000, 0x200, 0x200),
            seg(0x3df0, 0x2df0, 0x220, 0x350),
        ];
        let headers = [0..64, 64..(64 + 13 * 56)];
        let cases: &[(u64, Option<&str>)] = &[
            (0x0, Some("[elf-header]")),
            (0x3f, Some("[elf-header]")),
            (0x40, Some("[program-headers]")),
            (0x317, Some("[program-headers]")),
            (0x334, Some("[padding]")),
            (0x3ff, Some("[padding]")),
            (0x1100, Some("[padding]")),
            // p_vaddr + p_filesz: where exec and ld.so zero the page for .bss.
            (0x4010, Some(".bss")),
            (0x403f, Some(".bss")),
            // Past every segment.
            (0x5000, None),
        ];
        for &(svma, want) in cases {
            let file_offset = svma
                .checked_sub(0x1000)
                .filter(|_| svma >= 0x3df0)
                .unwrap_or(svma);
            let got = outside_sections_of(&sections, &segments, &headers, file_offset, svma);
            assert_eq!(got, want, "{svma:#x}");
        }
        // No section headers: nothing to tell.
        assert_eq!(outside_sections_of(&[], &segments, &headers, 0, 0), None);
    }

    /// A debug file is refused when not ELF, of another CRC-32 than the
    /// debuglink's (when found by it) or of another build; else accepted.
    #[test]
    fn check_debug_file_table() {
        let own = std::fs::read("/proc/self/exe").unwrap();
        let own_id = image_build_id(&own);
        let crc = elf::crc32(&own);
        let module = Path::new("/m");
        let other = [0x01, 0x02];
        let check = |data: &[u8], id: Option<&[u8]>, crc| {
            check_debug_file(data, module, id, crc)
                .map(|_| ())
                .map_err(|r| r.to_string())
        };
        assert_eq!(
            check(b"garbage", None, None),
            Err("not a valid ELF file".into())
        );
        assert_eq!(
            check(&own, own_id.as_deref(), Some(crc ^ 1)),
            Err(format!(
                "its CRC-32 is {crc:08x} but the .gnu_debuglink of /m says {:08x}",
                crc ^ 1
            ))
        );
        let found = own_id.as_deref().map_or("missing".into(), hex);
        assert_eq!(
            check(&own, Some(&other), None),
            Err(format!("its build-id is {found} but /m has 0102"))
        );
        assert_eq!(check(&own, own_id.as_deref(), Some(crc)), Ok(()));
        assert_eq!(check(&own, None, None), Ok(()));
    }

    /// A rejected debug file's reason reads as it did when it was text.
    #[test]
    fn rejections_read_as_before() {
        let module = PathBuf::from("/usr/lib/x.so");
        let cases = [
            (Rejection::NotElf, "not a valid ELF file"),
            (
                Rejection::CrcMismatch {
                    module: module.clone(),
                    found: 0xab,
                    expected: 0x1234_5678,
                },
                "its CRC-32 is 000000ab but the .gnu_debuglink of /usr/lib/x.so says 12345678",
            ),
            (
                Rejection::BuildIdMismatch {
                    module: module.clone(),
                    found: Some(vec![0x01, 0xff]),
                    expected: vec![0xab, 0xcd],
                },
                "its build-id is 01ff but /usr/lib/x.so has abcd",
            ),
            (
                Rejection::BuildIdMismatch {
                    module,
                    found: None,
                    expected: vec![0xab, 0xcd],
                },
                "its build-id is missing but /usr/lib/x.so has abcd",
            ),
        ];
        for (rejection, want) in cases {
            assert_eq!(rejection.to_string(), want);
        }
    }

    #[test]
    fn reasons_are_sentences() {
        let reasons = [
            Reason::MissingFile,
            Reason::NotElf,
            Reason::BuildIdMismatch {
                expected: vec![0xab],
                found: Some(vec![0xcd]),
            },
            Reason::BuildIdMismatch {
                expected: vec![0xab],
                found: None,
            },
            Reason::NotInSegment,
            Reason::NoSymbol,
            Reason::Unsupported,
        ];
        for reason in reasons {
            let text = reason.to_string();
            assert!(
                text.starts_with(char::is_uppercase) && text.ends_with('.'),
                "{text}"
            );
        }
    }

    #[test]
    fn corrupt_input_is_not_elf() {
        let dir =
            std::env::temp_dir().join(format!("pfprof-symbolize-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let own = std::fs::read("/proc/self/exe").unwrap();
        let mut symbolizer = Symbolizer::new(Options::default());
        // Every truncation of our own header area, plus some garbage.
        let mut inputs: Vec<Vec<u8>> = (0..own.len().min(4096))
            .step_by(61)
            .map(|n| own[..n].to_vec())
            .collect();
        inputs.push(b"\x7fELF\x02\x01\x01garbage".to_vec());
        let mut flipped = own[..own.len().min(1 << 16)].to_vec();
        for i in (16..flipped.len()).step_by(97) {
            flipped[i] ^= 0xff;
        }
        inputs.push(flipped);
        for (i, input) in inputs.iter().enumerate() {
            let path = dir.join(format!("in{i}"));
            std::fs::write(&path, input).unwrap();
            let code = symbolizer.code(&path, None, &[0, 0x1000, u64::MAX]);
            let data = symbolizer.data(&path, None, &[0, 0x1000]);
            assert_eq!(code.len(), 3);
            assert_eq!(data.len(), 2);
            let _ = symbolizer.module_info(&path, None);
            let _ = symbolizer.relocations(&path, None);
            let _ = symbolizer.function_ranges(&path, None, &["main", ""]);
        }
        assert_eq!(
            symbolizer.module_info(&dir.join("in0"), None).err(),
            Some(Reason::NotElf)
        );
        assert_eq!(
            symbolizer.module_info(&dir.join("missing"), None).err(),
            Some(Reason::MissingFile)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
