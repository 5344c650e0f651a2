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
//! * Files are memory-mapped, and a module's symbol names and DWARF are
//!   read from the mapping when asked for: if a file is truncated by
//!   someone else while a [`Symbolizer`] reads it, the read raises SIGBUS.
//!   Each lookup checks the file's identity first (device, inode, size,
//!   mtime), so a file rewritten between lookups is parsed again; only one
//!   rewritten during a lookup is read through the old mapping.
//! * Split DWARF (`.dwo`/`.dwp`) and `.gnu_debugaltlink` (dwz) are not
//!   followed; their frames fall back to symbol names.
//! * ELF only; other object formats are [`Reason::NotElf`].
#![deny(missing_docs)]

mod answers;
mod demangle;
mod dwarf;
mod elf;
mod inspect;
mod kernel;
mod lookup;
mod module_info;
mod notes;
mod options;
mod perfmap;
mod plain;
mod plt;
mod reloc;
mod sys;
mod unwind;

use memmap2::Mmap;
use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use kernel::{kallsyms_lines, kernel_text, KallsymsLine, KernelSymbols};
pub use notes::gnu_build_id_in_notes;
pub use perfmap::{read_perf_map_file, PerfMap, PerfMapError, PerfMapLimits};
pub use plain::{plain_copy, with_plain_sections, MAX_PLAIN_BYTES};
pub use reloc::RelocType;

pub use answers::{hex, CodeSite, DataTarget, Frame, Reason};
pub use inspect::{inspect_image, Inspection};
use lookup::{code_in, data_target, entry_symbol, load_dwarf};
use module_info::svma_to_file_offset;
pub use module_info::{
    file_offset_to_svma, ModuleInfo, PageRelocations, RejectedDebugFile, Rejection, RelocationInfo,
    SectionInfo, SegmentInfo,
};
use options::build_id_debug_files;
pub use options::{build_id_dir, cached_debug_file, default_build_id_cache, Options};

use crate::elf::SymbolTable;
pub use crate::unwind::{read_unwind_sections, unwind_sections, SectionBytes, UnwindSections};

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
    /// Lazily built DWARF context, under a lock of its own.
    dwarf: DwarfSlot,
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
        if let Some(Some(dwarf)) = &*lock_dwarf(&self.dwarf) {
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

/// A module's DWARF, read on first need (None inside: no usable DWARF).
/// It has a lock of its own, taken after the module's when both are: a
/// thread reading it (see [`Symbolizer::prepare`]) holds up the lookups
/// that need it, not those of the module's symbols (the start-up
/// tracker's, during the replay).
type DwarfSlot = Arc<Mutex<Option<Option<dwarf::Dwarf>>>>;

/// The DWARF behind `slot` (see [`lock`]).
fn lock_dwarf(slot: &DwarfSlot) -> std::sync::MutexGuard<'_, Option<Option<dwarf::Dwarf>>> {
    slot.lock().unwrap_or_else(|e| e.into_inner())
}

/// The module behind `shared`; a lookup that panicked left nothing half
/// written that the next one would trust.
pub(crate) fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Module> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

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
    /// The thread that reads the DWARF of the modules
    /// [`Symbolizer::prepare`] was given, started by its first call.
    preparing: Option<std::sync::mpsc::Sender<Shared>>,
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
            preparing: None,
        }
    }

    /// Opens the module at `path` (as a lookup would) and has a thread of
    /// its own read its DWARF, while the caller goes on: for a caller that
    /// knows which modules it will ask about before it knows every address
    /// (a replay, as it meets a module in its stacks). A lookup in the
    /// module waits for that reading if it has not ended. What cannot be
    /// opened is left for the lookup to report.
    pub fn prepare(&mut self, path: &Path, expected_build_id: Option<&[u8]>) {
        let Ok((_, module)) = self.module(path, expected_build_id) else {
            return;
        };
        let sender = self.preparing.get_or_insert_with(|| {
            let (sender, modules) = std::sync::mpsc::channel::<Shared>();
            // The thread ends when the symbolizer (its sender) goes.
            let _ = std::thread::Builder::new()
                .name("pfprof-dwarf".into())
                .spawn(move || {
                    for module in modules {
                        // Not under the module's lock: see `DwarfSlot`.
                        let (slot, path) = {
                            let module = lock(&module);
                            (module.dwarf.clone(), module.dwarf_path.clone())
                        };
                        load_dwarf(&mut lock_dwarf(&slot), path.as_deref());
                    }
                });
            sender
        });
        // No thread (it could not start): the lookup reads the DWARF.
        let _ = sender.send(module);
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
        module.dwarf = Arc::new(Mutex::new(Some(None)));
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
                Ok(found) if lock(&found.1).info.has_dwarf => return Ok(found),
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
            let found = lock(&module).info.build_id.clone();
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
            if lock(module).info.has_dwarf || !dwarf::has_debug_info(&file) {
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
        if let Some(id) = lock(&module).info.build_id.clone() {
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
            dwarf: DwarfSlot::default(),
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
        // A build-id cache's copy first: the same file, its DWARF plain
        // where `record` stored it so (see `with_plain_sections`).
        let cached = (self.options.build_id_caches.iter())
            .filter_map(|cache| cached_debug_file(cache, build_id?))
            .map(|path| elf::DebugCandidate {
                path,
                via_debuglink: false,
            });
        let candidates = cached.chain(elf::debug_file_candidates(
            self.stands_for.get(path).map_or(path, PathBuf::as_path),
            build_id,
            debuglink.map(|(name, _)| name),
            &self.options.debug_dirs,
        ));
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
        self.release_pages();
        self.round += 1;
    }

    /// Lets the kernel take back the file pages that lookups read: they
    /// stay in the page cache, but leave this process's RSS until read
    /// again. What was parsed stays.
    pub fn release_pages(&self) {
        for module in self.by_path.values().flatten() {
            lock(module).release_pages();
        }
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
        let info = self
            .infos
            .entry(key)
            .or_insert_with(|| Box::new(lock(&module).info.clone()));
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
                Ok(module) => {
                    let answer = code_in(module, demangle, offsets);
                    // A batch reads names and DWARF all over a big file
                    // (20 MB of rustc's string table): given back now, the
                    // files of a round are not resident all at once.
                    lock(module).release_pages();
                    answer
                }
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
        let module = lock(&module);
        file_offsets
            .iter()
            .map(|&file_offset| data_target(&module, file_offset, demangle))
            .collect()
    }
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
        let ranges = lock(&module).function_ranges(names);
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
        let mut module = lock(&module);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lookup::outside_sections_of;
    use crate::options::build_id_cache_in;

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

    /// KiB of this process's RSS in mappings of `paths` (`/proc/self/smaps`).
    fn resident_kib(paths: &[PathBuf]) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        let mut kib = 0;
        for line in smaps.lines() {
            let first = line.split_whitespace().next().unwrap_or("");
            if first.contains('-') && !first.ends_with(':') {
                inside = paths.iter().any(|p| line.ends_with(p.to_str().unwrap()));
            } else if inside && first == "Rss:" {
                kib += line
                    .split_whitespace()
                    .nth(1)
                    .unwrap()
                    .parse::<u64>()
                    .unwrap();
            }
        }
        kib
    }

    /// A batch of lookups gives back the file pages it read (a busy host's
    /// round reads tens of MB of string tables), and the names read again
    /// afterwards are the same.
    #[test]
    fn batches_give_back_the_file_pages_they_read() {
        let dir = std::env::temp_dir().join(format!("pfprof-release-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A file of its own (DWARF inside, read from the mapping), which
        // no other test maps.
        let copy = dir.join("exe-copy");
        std::fs::copy(std::env::current_exe().unwrap(), &copy).unwrap();
        let mut s = Symbolizer::new(Options::default());
        let info = s.module_info(&copy, None).unwrap();
        let text = info
            .sections
            .iter()
            .find(|s| s.name == ".text")
            .cloned()
            .unwrap();
        // Names and DWARF may come from a debug file.
        let files: Vec<PathBuf> = std::iter::once(copy.clone())
            .chain(info.debug_file.clone())
            .collect();
        let offsets: Vec<u64> = (0..64).map(|i| text.file_offset + i * 4096 + 64).collect();
        let one_by_one: Vec<_> = offsets
            .iter()
            .map(|&o| s.code(&copy, None, &[o]).remove(0))
            .collect();
        assert!(one_by_one.iter().filter(|site| site.is_ok()).count() > 32);
        let read = resident_kib(&files);
        s.release_pages();
        let released = resident_kib(&files);
        let moved: Vec<u64> = offsets.iter().map(|o| o + 1).collect();
        let batch = CodeBatch {
            path: &copy,
            expected_build_id: None,
            file_offsets: &moved,
        };
        let batched = s.code_batches(&[batch], 2).remove(0);
        let after_batch = resident_kib(&files);
        let mut fresh = Symbolizer::new(Options::default());
        let expected = fresh.code(&copy, None, &moved);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            read > 0 && released == 0,
            "read {read} KiB, {released} KiB after release"
        );
        assert_eq!(after_batch, 0, "a batch keeps the pages it read");
        let names = |sites: &[Result<CodeSite, Reason>]| -> Vec<Option<String>> {
            sites
                .iter()
                .map(|s| {
                    s.as_ref()
                        .ok()
                        .and_then(|s| s.frames.last().map(|f| f.function.clone()))
                })
                .collect()
        };
        assert_eq!(names(&batched), names(&expected));
    }

    /// A module given to `prepare` has its DWARF read by the preparing
    /// thread, with no lookup asking; lookups then answer as a fresh
    /// symbolizer's.
    #[test]
    fn prepared_modules_read_their_dwarf_beside() {
        let exe = std::env::current_exe().unwrap();
        let mut s = Symbolizer::new(Options::default());
        s.prepare(&exe, None);
        let (_, module) = s.module(&exe, None).unwrap();
        let started = std::time::Instant::now();
        let slot = module.lock().unwrap().dwarf.clone();
        while slot.lock().unwrap().is_none() {
            assert!(started.elapsed().as_secs() < 60, "DWARF not read");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(matches!(*slot.lock().unwrap(), Some(Some(_))));
        let ranges = s.function_ranges(&exe, None, &["main"]);
        let offsets: Vec<u64> = ranges.iter().map(|(_, r)| r.start).collect();
        assert_eq!(offsets.len(), 1);
        let fresh = Symbolizer::new(Options::default()).code(&exe, None, &offsets);
        assert_eq!(s.code(&exe, None, &offsets), fresh);
    }

    /// While a module's DWARF is being read (its lock held, as the
    /// preparing thread holds it), lookups of its symbols answer at once:
    /// the replay's start-up tracker asks for them and must not wait for
    /// the inflate of a large debug file.
    #[test]
    fn symbols_answer_while_the_dwarf_is_read() {
        let exe = std::env::current_exe().unwrap();
        let mut s = Symbolizer::new(Options::default());
        let (_, module) = s.module(&exe, None).unwrap();
        let slot = module.lock().unwrap().dwarf.clone();
        let reading = slot.lock().unwrap();
        let (done, answered) = std::sync::mpsc::channel();
        let asking = std::thread::spawn(move || {
            let ranges = s.function_ranges(&exe, None, &["main"]);
            done.send(ranges.len()).unwrap();
        });
        let got = answered.recv_timeout(std::time::Duration::from_secs(60));
        drop(reading);
        asking.join().unwrap();
        assert_eq!(got, Ok(1), "function_ranges waited for the DWARF");
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
