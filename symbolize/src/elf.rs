//! ELF facts read with `object`: program headers, section headers, symbols,
//! build-id and `.gnu_debuglink`, and the search for separate debug files.
//!
//! # Which alias names an address
//!
//! Symbols often share an address. Three choices between them are made
//! here, on purpose not one:
//!
//! * A lookup ([`SymbolTable::lookup`]) takes the smallest symbol covering
//!   the address and, among equally sized ones at one address, a global
//!   one, then the first name in byte order: the names pfprof's reports
//!   have always given (perf's rule would name some differently, e.g.
//!   `strnlen` for `__strnlen`).
//! * perf's rule ([`perf_alias_rank`]: non-weak, global, fewer leading
//!   underscores, the longer name) where pfprof gives the name perf gives:
//!   the IFUNC resolver behind a PLT slot (`plt.rs`).
//! * An image in memory (the vDSO) first loses the weak aliases of a
//!   non-weak function ([`without_weak_aliases`], perf's first criterion),
//!   as perf shows vDSO frames (`__vdso_time`, not `time`); then the
//!   lookup's rule applies.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;
use object::elf;
use object::read::elf::{ElfFile, FileHeader, ProgramHeader};
use object::{Object, ObjectSection, ObjectSymbol, SectionFlags, SymbolKind, SymbolSection};

use crate::{SectionInfo, SegmentInfo};

/// Maps a whole file read-only.
pub(crate) fn map_file(path: &Path) -> std::io::Result<Mmap> {
    use std::os::unix::fs::OpenOptionsExt;
    // Non-blocking: opening a FIFO (a path from a recording, a debuglink
    // candidate) must not wait for a writer. Only regular files are mapped.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    crate::sys::map(&file)
}

/// Parses `data` as an ELF file; anything else (including other object
/// formats) is `None`.
pub(crate) fn parse_elf(data: &[u8]) -> Option<object::File<'_>> {
    match object::File::parse(data) {
        Ok(file @ (object::File::Elf32(_) | object::File::Elf64(_))) => Some(file),
        _ => None,
    }
}

/// The NT_GNU_BUILD_ID of a parsed file.
pub(crate) fn build_id(file: &object::File<'_>) -> Option<Vec<u8>> {
    match file.build_id() {
        Ok(Some(id)) if !id.is_empty() => Some(id.to_vec()),
        _ => None,
    }
}

/// Program headers that matter (PT_LOAD), and where the ELF and program
/// headers lie in the file.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProgramHeaders {
    pub(crate) loads: Vec<SegmentInfo>,
    /// File offsets of the ELF header (`0..e_ehsize`).
    pub(crate) elf_header: std::ops::Range<u64>,
    /// File offsets of the program header table
    /// (`e_phoff..e_phoff + e_phnum * e_phentsize`).
    pub(crate) program_headers: std::ops::Range<u64>,
    /// `e_entry`, 0 when none.
    pub(crate) entry: u64,
}

pub(crate) fn program_headers(file: &object::File<'_>) -> ProgramHeaders {
    match file {
        object::File::Elf32(f) => program_headers_of(f),
        object::File::Elf64(f) => program_headers_of(f),
        _ => ProgramHeaders::default(),
    }
}

fn program_headers_of<Elf: FileHeader<Endian = object::Endianness>>(
    file: &ElfFile<'_, Elf>,
) -> ProgramHeaders {
    let endian = file.endian();
    let header = file.elf_header();
    let phoff: u64 = header.e_phoff(endian).into();
    let phsize = u64::from(header.e_phnum(endian)) * u64::from(header.e_phentsize(endian));
    let mut out = ProgramHeaders {
        elf_header: 0..u64::from(header.e_ehsize(endian)),
        program_headers: phoff..phoff.saturating_add(phsize),
        entry: header.e_entry(endian).into(),
        ..ProgramHeaders::default()
    };
    for ph in file.elf_program_headers() {
        let p_type = ph.p_type(endian);
        if p_type == elf::PT_LOAD {
            out.loads.push(SegmentInfo {
                svma: ph.p_vaddr(endian).into(),
                file_offset: ph.p_offset(endian).into(),
                file_size: ph.p_filesz(endian).into(),
                mem_size: ph.p_memsz(endian).into(),
                flags: ph.p_flags(endian).0,
            });
        }
    }
    out
}

/// SHF_ALLOC section headers.
pub(crate) fn alloc_sections(file: &object::File<'_>) -> Vec<SectionInfo> {
    let mut out = Vec::new();
    for section in file.sections() {
        let SectionFlags::Elf { sh_type, sh_flags } = section.flags() else {
            continue;
        };
        let sh_flags: u64 = sh_flags.0;
        if sh_flags & elf::SHF_ALLOC.0 == 0 {
            continue;
        }
        let Ok(name) = section.name() else { continue };
        out.push(SectionInfo {
            name: name.to_string(),
            svma: section.address(),
            size: section.size(),
            file_offset: section_file_offset(&section),
            nobits: sh_type == elf::SHT_NOBITS,
            flags: sh_flags,
        });
    }
    out
}

fn section_file_offset(section: &object::Section<'_, '_>) -> u64 {
    match section.file_range() {
        Some((offset, _)) => offset,
        // NOBITS: no bytes in the file; the caller fills in the virtual
        // file offset derived from PT_LOAD.
        None => 0,
    }
}

/// Kind of an owned symbol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SymKind {
    /// STT_FUNC / STT_GNU_IFUNC, and STT_NOTYPE in an executable section
    /// (assembly labels such as ld.so's `_start`).
    Function,
    /// STT_OBJECT / STT_COMMON with a size. Never STT_TLS (its value is an
    /// offset in the TLS block, not an address) nor unsized markers
    /// (`_edata`, `_end`, `__bss_start`), which cover nothing.
    Data,
}

/// An owned symbol table entry, addresses already in svma space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sym {
    pub(crate) svma: u64,
    pub(crate) size: u64,
    pub(crate) kind: SymKind,
    /// Global symbols win over local ones at the same address.
    pub(crate) global: bool,
    /// `STB_WEAK` (which is global too).
    pub(crate) weak: bool,
    /// Read through the table's [`Names`].
    pub(crate) name: Name,
    /// End svma of the symbol's section: an unsized code symbol covers up
    /// to the next code symbol, never past its section.
    pub(crate) section_end: u64,
}

/// Where a symbol's name is. Most names stay in their file's string
/// table, read when asked for: a large library's names (librustc_driver's
/// 20 MB, libLLVM's) copied into the heap would cost their size in memory
/// and a read of the whole table from disk, for the few a profile needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Name {
    /// Bytes `[offset, offset + len)` of the [`Names`] file `file`.
    InFile { file: u8, offset: u32, len: u32 },
    /// Made up (`_start`, a PLT entry's), or of an image in memory.
    Owned(Box<str>),
}

impl From<&str> for Name {
    fn from(name: &str) -> Name {
        Name::Owned(name.into())
    }
}

/// The files a module's symbol names are read from, mapped for as long as
/// the module lives (the file itself, and its separate debug file).
#[derive(Debug, Default, Clone)]
pub(crate) struct Names {
    files: Vec<Arc<Mmap>>,
}

impl Names {
    /// Keeps `map` for names to be read from; None when no more fit.
    pub(crate) fn add(&mut self, map: Arc<Mmap>) -> Option<u8> {
        let index = u8::try_from(self.files.len()).ok()?;
        self.files.push(map);
        Some(index)
    }

    /// Lets the kernel take back the pages reading the names brought in
    /// ([`crate::sys::release_pages`]).
    pub(crate) fn release_pages(&self) {
        self.files
            .iter()
            .for_each(|map| crate::sys::release_pages(map));
    }

    /// Whether the name `[offset, offset + len)` of file `file` ends at a
    /// NUL there, so that [`Names::up_to_nul`] reads it back.
    fn ends_at(&self, file: u8, offset: u32, len: u32) -> bool {
        let end = offset as usize + len as usize;
        (self.files.get(usize::from(file))).is_some_and(|map| map.get(end) == Some(&0))
    }

    /// The NUL-terminated name at `offset` of file `file` ("" as for
    /// [`Names::get`]).
    fn up_to_nul(&self, file: u8, offset: u32) -> &str {
        let Some(bytes) =
            (self.files.get(usize::from(file))).and_then(|map| map.get(offset as usize..))
        else {
            return "";
        };
        let len = memchr::memchr(0, bytes).unwrap_or(bytes.len());
        std::str::from_utf8(&bytes[..len]).unwrap_or("")
    }

    /// The text of `name` ("" when its bytes are not UTF-8 any more: the
    /// names were checked when read, so only a file rewritten in place
    /// changes them).
    pub(crate) fn get<'a>(&'a self, name: &'a Name) -> &'a str {
        match name {
            Name::Owned(name) => name,
            Name::InFile { file, offset, len } => {
                let (start, len) = (*offset as usize, *len as usize);
                (self.files.get(usize::from(*file)))
                    .and_then(|map| map.get(start..start + len))
                    .and_then(|bytes| std::str::from_utf8(bytes).ok())
                    .unwrap_or("")
            }
        }
    }
}

/// Where [`symbols`] reads names from: the bytes of the [`Names`] file
/// `file`, which the parsed file borrows.
#[derive(Clone, Copy)]
pub(crate) struct NameSource<'d> {
    pub(crate) file: u8,
    pub(crate) data: &'d [u8],
}

impl NameSource<'_> {
    /// `name`, a slice of this source's bytes, as where it lies in them.
    fn locate(&self, name: &str) -> Option<Name> {
        let offset = (name.as_ptr() as usize).checked_sub(self.data.as_ptr() as usize)?;
        (offset + name.len() <= self.data.len()).then_some(())?;
        Some(Name::InFile {
            file: self.file,
            offset: u32::try_from(offset).ok()?,
            len: u32::try_from(name.len()).ok()?,
        })
    }
}

/// What a symbol of object's `kind` and `size` names, in an `executable`
/// section or not (see [`SymKind`]); `None`: nothing.
fn sym_kind(kind: SymbolKind, size: u64, executable: bool) -> Option<SymKind> {
    match kind {
        SymbolKind::Text => Some(SymKind::Function),
        // STT_NOTYPE.
        SymbolKind::Unknown if executable => Some(SymKind::Function),
        SymbolKind::Data if size > 0 => Some(SymKind::Data),
        _ => None,
    }
}

/// Symbols of `.symtab` (when `symtab`) and `.dynsym` (when `dynsym`) that
/// name code or data (see [`SymKind`]), their names left in `source` (the
/// bytes `file` was parsed from) when it is given, else copied.
pub(crate) fn symbols(
    file: &object::File<'_>,
    symtab: bool,
    dynsym: bool,
    source: Option<NameSource<'_>>,
) -> Vec<Sym> {
    let mut out = Vec::new();
    let mut add = |sym: object::Symbol<'_, '_>| {
        let SymbolSection::Section(index) = sym.section() else {
            return;
        };
        let Ok(section) = file.section_by_index(index) else {
            return;
        };
        let executable = matches!(
            section.flags(),
            SectionFlags::Elf { sh_flags, .. } if sh_flags.0 & elf::SHF_EXECINSTR.0 != 0
        );
        let Some(kind) = sym_kind(sym.kind(), sym.size(), executable) else {
            return;
        };
        let Ok(name) = sym.name() else { return };
        if name.is_empty() || name.starts_with("$") {
            return;
        }
        out.push(Sym {
            svma: sym.address(),
            size: sym.size(),
            kind,
            global: sym.is_global(),
            weak: sym.is_weak(),
            name: source
                .and_then(|source| source.locate(name))
                .unwrap_or_else(|| name.into()),
            section_end: section.address().saturating_add(section.size()),
        });
    };
    if symtab {
        file.symbols().for_each(&mut add);
    }
    if dynsym {
        file.dynamic_symbols().for_each(&mut add);
    }
    out
}

/// `syms` without the function symbols that are weak aliases of a
/// non-weak global function symbol at the same address (the vDSO's `time`
/// beside `__vdso_time`).
pub(crate) fn without_weak_aliases(mut syms: Vec<Sym>) -> Vec<Sym> {
    let function = |s: &&Sym| s.kind == SymKind::Function;
    let strong: std::collections::HashSet<u64> = syms
        .iter()
        .filter(function)
        .filter(|s| s.global && !s.weak)
        .map(|s| s.svma)
        .collect();
    syms.retain(|s| !(function(&s) && s.weak && strong.contains(&s.svma)));
    syms
}

/// How perf ranks aliases at one address (`choose_best_symbol`), best
/// first: non-weak over weak, global over local, fewer leading
/// underscores, the longer name; then the name itself, for a stable
/// answer.
pub(crate) fn perf_alias_rank<'a>(sym: &'a Sym, names: &'a Names) -> impl Ord + 'a {
    let name = names.get(&sym.name);
    let underscores = name.bytes().take_while(|&b| b == b'_').count();
    (
        sym.weak,
        !sym.global,
        underscores,
        std::cmp::Reverse(name.len()),
        name,
    )
}

/// Sorted symbol lookup table.
#[derive(Debug, Default)]
pub(crate) struct SymbolTable {
    /// Sorted by svma, then larger size first, then global first.
    entries: Vec<Entry>,
    /// Where the names are.
    names: Names,
    /// The names of entries not in a file (made up, or of an image), by
    /// [`Entry::name_at`] when [`Entry::file`] is [`OWNED`].
    owned: Vec<Box<str>>,
    /// The end svma of the section of each run of symbols, by
    /// [`Entry::section`].
    section_ends: Vec<u64>,
}

/// A symbol as a [`SymbolTable`] keeps it: 32 bytes where a [`Sym`] with
/// its reach took 64 (a Rust build's interval end held 700,000 of them,
/// librustc_driver's and libLLVM's above all).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub(crate) svma: u64,
    pub(crate) size: u64,
    /// Where the name starts in the [`Names`] file [`Entry::file`] (it
    /// ends at the next NUL, as in any ELF string table), or its index in
    /// the table's owned names.
    name_at: u32,
    /// The symbol's section: its end in the table's `section_ends`.
    section: u32,
    /// From `svma` to the farthest end of this and every earlier entry
    /// (`svma + size`), for the backwards scan to stop early; `u32::MAX`:
    /// at least that far.
    reach: u32,
    /// [`Names`] file of the name, or [`OWNED`].
    file: u8,
    /// [`FUNCTION`], [`GLOBAL`] (lookups need no more: weak aliases were
    /// ranked before the table was built).
    flags: u8,
}

/// [`Entry::file`] of a name the table owns.
const OWNED: u8 = u8::MAX;
const FUNCTION: u8 = 1;
const GLOBAL: u8 = 2;

impl Entry {
    pub(crate) fn kind(&self) -> SymKind {
        if self.flags & FUNCTION != 0 {
            SymKind::Function
        } else {
            SymKind::Data
        }
    }

    pub(crate) fn global(&self) -> bool {
        self.flags & GLOBAL != 0
    }

    /// The farthest end of this and every earlier entry, at least.
    fn reach(&self) -> u64 {
        match self.reach {
            u32::MAX => u64::MAX,
            reach => self.svma + u64::from(reach),
        }
    }
}

impl SymbolTable {
    pub(crate) fn new(mut syms: Vec<Sym>, names: Names) -> Self {
        // Names are compared only between symbols at one address and of
        // one size: few of a string table's pages are read.
        syms.sort_by(|a, b| {
            (a.svma, std::cmp::Reverse(a.size), !a.global)
                .cmp(&(b.svma, std::cmp::Reverse(b.size), !b.global))
                .then_with(|| names.get(&a.name).cmp(names.get(&b.name)))
        });
        syms.dedup_by(|b, a| {
            a.svma == b.svma && a.size == b.size && names.get(&a.name) == names.get(&b.name)
        });
        let mut owned = Vec::new();
        let mut section_ends: Vec<u64> = Vec::new();
        let mut entries = Vec::with_capacity(syms.len());
        let mut end = 0u64;
        for sym in syms {
            end = end.max(sym.svma.saturating_add(sym.size));
            let (file, name_at) = match sym.name {
                Name::InFile { file, offset, len } if names.ends_at(file, offset, len) => {
                    (file, offset)
                }
                name => {
                    owned.push(Box::from(names.get(&name)));
                    (OWNED, owned.len() as u32 - 1)
                }
            };
            // Symbols in address order come a section at a time: an end
            // is kept once per run of them.
            if section_ends.last() != Some(&sym.section_end) {
                section_ends.push(sym.section_end);
            }
            let section = section_ends.len() as u32 - 1;
            let flag = |on: bool, flag: u8| if on { flag } else { 0 };
            entries.push(Entry {
                svma: sym.svma,
                size: sym.size,
                name_at,
                section,
                reach: u32::try_from(end - sym.svma).unwrap_or(u32::MAX),
                file,
                flags: flag(sym.kind == SymKind::Function, FUNCTION) | flag(sym.global, GLOBAL),
            });
        }
        SymbolTable {
            entries,
            names,
            owned,
            section_ends,
        }
    }

    /// Lets the kernel take back the file pages of the names read.
    pub(crate) fn release_pages(&self) {
        self.names.release_pages();
    }

    /// The name of `entry`, one of this table's.
    pub(crate) fn name<'a>(&'a self, entry: &Entry) -> &'a str {
        match entry.file {
            OWNED => self
                .owned
                .get(entry.name_at as usize)
                .map_or("", |name| name),
            file => self.names.up_to_nul(file, entry.name_at),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The best symbol of `kind` covering `svma`: the smallest sized symbol
    /// whose `[svma, svma + size)` contains it; failing that, a zero-sized
    /// symbol exactly at `svma`. Nothing is guessed for addresses after a
    /// zero-sized symbol.
    pub(crate) fn lookup(&self, svma: u64, kind: SymKind) -> Option<&Entry> {
        let end = self.entries.partition_point(|s| s.svma <= svma);
        let mut best: Option<&Entry> = None;
        let mut exact_zero: Option<&Entry> = None;
        for sym in self.entries[..end].iter().rev() {
            if sym.reach() <= svma {
                // Nothing at or before it reaches svma, except zero-sized
                // symbols exactly at svma (the reach is then == svma).
                if sym.reach() < svma || sym.svma != svma {
                    break;
                }
            }
            if sym.kind() != kind {
                continue;
            }
            // The scan goes backwards, so among equals the one seen last
            // comes first in the table's order: global before local.
            if sym.size == 0 {
                if sym.svma == svma {
                    exact_zero = Some(sym);
                }
                continue;
            }
            if svma - sym.svma < sym.size {
                let better = match best {
                    None => true,
                    Some(b) => sym.size <= b.size,
                };
                if better {
                    best = Some(sym);
                }
            }
        }
        best.or(exact_zero)
            .or_else(|| self.preceding_unsized_function(kind, svma, end))
    }

    /// The function symbol named exactly `name` (raw, not demangled), for
    /// each of `names` that has one. When several symbols share a name
    /// (local statics of different objects), a global one wins, then a
    /// sized one, then the lowest address.
    pub(crate) fn functions_named<'a>(
        &self,
        names: &[&'a str],
    ) -> std::collections::HashMap<&'a str, &Entry> {
        let mut best: std::collections::HashMap<&'a str, &Entry> =
            std::collections::HashMap::with_capacity(names.len());
        let wanted: std::collections::HashMap<&str, &'a str> =
            names.iter().map(|&n| (n, n)).collect();
        // Sorted by svma, so the first of equals is the lowest address.
        let functions = self
            .entries
            .iter()
            .filter(|s| s.kind() == SymKind::Function);
        for sym in functions {
            let Some(&name) = wanted.get(self.name(sym)) else {
                continue;
            };
            let rank = |s: &Entry| (s.global(), s.size != 0);
            match best.get(name) {
                Some(old) if rank(old) >= rank(sym) => {}
                _ => {
                    best.insert(name, sym);
                }
            }
        }
        best
    }

    /// Hand-written assembly (`_start`, crt's `__do_global_dtors_aux`) has
    /// function symbols without a size. Like binutils and perf, attribute an
    /// address to the nearest preceding code symbol when that symbol is
    /// unsized and the address is in its section; a preceding *sized*
    /// symbol that ends before the address means the address is in a gap,
    /// and nothing is guessed.
    fn preceding_unsized_function(&self, kind: SymKind, svma: u64, end: usize) -> Option<&Entry> {
        if kind != SymKind::Function {
            return None;
        }
        let functions = || {
            self.entries[..end]
                .iter()
                .rev()
                .filter(|s| s.kind() == SymKind::Function)
        };
        let last = functions().next()?;
        // Of several labels at that address, the first in the table's
        // order (global before local).
        let first_there = functions()
            .take_while(|s| s.svma == last.svma && s.size == 0)
            .last()?;
        let section_end = self.section_ends.get(last.section as usize);
        (last.size == 0 && section_end.is_some_and(|&end| svma < end)).then_some(first_there)
    }
}

/// CRC-32 (IEEE, as used by `.gnu_debuglink`).
pub(crate) fn crc32(data: &[u8]) -> u32 {
    // Table-driven: debug files run to hundreds of megabytes.
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = i as u32;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xedb8_8320
                } else {
                    crc >> 1
                };
                bit += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &byte in data {
        crc = (crc >> 8) ^ TABLE[((crc ^ u32::from(byte)) & 0xff) as usize];
    }
    !crc
}

/// A place the separate debug file of a file may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DebugCandidate {
    pub path: PathBuf,
    /// Named by `.gnu_debuglink` (its CRC must match), not by build-id.
    pub via_debuglink: bool,
}

/// Candidate paths of the separate debug file of `path`, in search order.
pub(crate) fn debug_file_candidates(
    path: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<&[u8]>,
    debug_dirs: &[PathBuf],
) -> Vec<DebugCandidate> {
    let mut out: Vec<PathBuf> = crate::build_id_debug_files(debug_dirs, build_id).collect();
    let by_build_id = out.len();
    if let Some(link) = debuglink.and_then(|l| std::str::from_utf8(l).ok()) {
        if !link.is_empty() && !link.contains('/') {
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            for base in [path.to_path_buf(), real] {
                let Some(dir) = base.parent() else { continue };
                let here = dir.join(link);
                if here != base {
                    out.push(here);
                }
                out.push(dir.join(".debug").join(link));
                for debug_dir in debug_dirs {
                    let relative = dir.strip_prefix("/").unwrap_or(dir);
                    out.push(debug_dir.join(relative).join(link));
                }
            }
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.into_iter()
        .enumerate()
        .filter(|(_, p)| seen.insert(p.clone()))
        .map(|(i, path)| DebugCandidate {
            path,
            via_debuglink: i >= by_build_id,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of symbols with names of their own.
    fn table(syms: Vec<Sym>) -> SymbolTable {
        SymbolTable::new(syms, Names::default())
    }

    /// A FIFO (a path from a recording, a debuglink candidate) is refused
    /// without waiting for a writer; so are directories.
    #[test]
    fn map_file_refuses_what_is_not_a_regular_file() {
        let dir = std::env::temp_dir().join(format!("pfprof-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.unwrap().success());
        for path in [&fifo, &dir] {
            let error = map_file(path).unwrap_err();
            assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput, "{path:?}");
        }
        assert!(crate::read_build_id(&fifo).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn crc32_known_values() {
        for (input, want) in [
            (&b""[..], 0u32),
            (b"a", 0xe8b7_be43),
            (b"123456789", 0xcbf4_3926),
            (b"The quick brown fox jumps over the lazy dog", 0x414f_a339),
        ] {
            assert_eq!(crc32(input), want, "{input:?}");
        }
    }

    fn sym(svma: u64, size: u64, kind: SymKind, name: &str) -> Sym {
        Sym {
            svma,
            size,
            kind,
            global: true,
            weak: false,
            name: name.into(),
            section_end: u64::MAX,
        }
    }

    /// Code is FUNC, IFUNC and NOTYPE labels in code; data is sized
    /// OBJECT/COMMON; TLS offsets, unsized markers and NOTYPE outside code
    /// name nothing.
    #[test]
    fn sym_kind_table() {
        use SymKind::{Data, Function};
        let cases = [
            (SymbolKind::Text, 16, true, Some(Function)),
            (SymbolKind::Text, 0, true, Some(Function)),
            // ld.so's `_start`, `_dl_start_user`.
            (SymbolKind::Unknown, 0, true, Some(Function)),
            (SymbolKind::Data, 8, false, Some(Data)),
            // `__data_start`-like OBJECT markers of size 0.
            (SymbolKind::Data, 0, false, None),
            // `_edata`, `_end`, `__bss_start`.
            (SymbolKind::Unknown, 0, false, None),
            (SymbolKind::Unknown, 8, false, None),
            // A `.tbss` variable: an offset in the TLS block.
            (SymbolKind::Tls, 8, false, None),
            (SymbolKind::Section, 0, true, None),
            (SymbolKind::File, 0, false, None),
        ];
        for (kind, size, executable, want) in cases {
            assert_eq!(
                sym_kind(kind, size, executable),
                want,
                "{kind:?} {size} {executable}"
            );
        }
    }

    #[test]
    fn symbol_table_lookup() {
        use SymKind::{Data, Function};
        let text_end = |s: Sym| Sym {
            section_end: 0x2800,
            ..s
        };
        let table = table(vec![
            text_end(sym(0x1000, 0x100, Function, "outer")),
            text_end(sym(0x1010, 0x10, Function, "inner_alias")),
            text_end(sym(0x2000, 0, Function, "asm_label")),
            text_end(sym(0x2100, 0, Function, "next_label")),
            sym(0x3000, 0x4000, Data, "bss_buf"),
            sym(0x8000, 8, Data, "small"),
            // A local and a global alias of the same object, and of an
            // unsized label: the global names them, whatever the order.
            Sym {
                global: false,
                ..sym(0x9000, 8, Data, "a_local")
            },
            sym(0x9000, 8, Data, "b_global"),
            Sym {
                global: false,
                ..sym(0x9100, 8, Data, "z_local")
            },
            sym(0x9100, 8, Data, "y_global"),
            Sym {
                global: false,
                ..text_end(sym(0x2400, 0, Function, "a_local_label"))
            },
            text_end(sym(0x2400, 0, Function, "b_global_label")),
        ]);
        let cases: &[(u64, SymKind, Option<&str>)] = &[
            (0x0fff, Function, None),
            (0x1000, Function, Some("outer")),
            (0x1015, Function, Some("inner_alias")),
            (0x10ff, Function, Some("outer")),
            (0x1100, Function, None),
            (0x2000, Function, Some("asm_label")),
            // unsized (assembly) symbols extend to the next code symbol,
            (0x2001, Function, Some("asm_label")),
            (0x20ff, Function, Some("asm_label")),
            (0x2100, Function, Some("next_label")),
            (0x2400, Function, Some("b_global_label")),
            // and to the end of their section, no further.
            (0x27ff, Function, Some("b_global_label")),
            (0x9004, Data, Some("b_global")),
            (0x9100, Data, Some("y_global")),
            (0x2800, Function, None),
            (0x3000, Data, Some("bss_buf")),
            (0x6000, Data, Some("bss_buf")),
            (0x6fff, Data, Some("bss_buf")),
            (0x7000, Data, None),
            (0x8007, Data, Some("small")),
            (0x8008, Data, None),
            (0x3000, Function, None),
            (u64::MAX, Data, None),
        ];
        for &(svma, kind, want) in cases {
            let got = table.lookup(svma, kind).map(|s| table.name(s));
            assert_eq!(got, want, "svma {svma:#x} {kind:?}");
        }
    }

    /// Name lookup prefers global, then sized, then lower symbols; data is never a function.
    #[test]
    fn functions_named_table() {
        use SymKind::{Data, Function};
        let local = |svma, size, name: &str| Sym {
            global: false,
            ..sym(svma, size, Function, name)
        };
        let table = table(vec![
            sym(0x1000, 0x40, Function, "main"),
            local(0x0800, 0x10, "main"),
            local(0x2000, 0x20, "helper"),
            local(0x1800, 0x20, "helper"),
            sym(0x3000, 0, Function, "asm"),
            local(0x2800, 0x8, "asm"),
            sym(0x4000, 8, Data, "table"),
        ]);
        let cases: &[(&str, Option<(u64, u64)>)] = &[
            ("main", Some((0x1000, 0x40))),
            ("helper", Some((0x1800, 0x20))),
            ("asm", Some((0x3000, 0))),
            ("table", None),
            ("missing", None),
            ("", None),
        ];
        let names: Vec<&str> = cases.iter().map(|c| c.0).collect();
        let found = table.functions_named(&names);
        for &(name, want) in cases {
            let got = found.get(name).map(|s| (s.svma, s.size));
            assert_eq!(got, want, "{name}");
        }
    }

    /// A name that lies in its source's bytes is kept as where it lies
    /// and read back from them; one outside them is not located (and is
    /// copied by `symbols`); an owned name reads as itself.
    #[test]
    fn names_stay_in_their_file() {
        let mut map = memmap2::MmapMut::map_anon(64).unwrap();
        map[10..17].copy_from_slice(b"strtab!");
        let map = Arc::new(map.make_read_only().unwrap());
        let mut names = Names::default();
        let file = names.add(map.clone()).unwrap();
        let source = NameSource {
            file,
            data: &map[..],
        };
        let inside = std::str::from_utf8(&map[10..16]).unwrap();
        let name = source.locate(inside).unwrap();
        assert_eq!(
            name,
            Name::InFile {
                file,
                offset: 10,
                len: 6
            }
        );
        assert_eq!(names.get(&name), "strtab");
        assert_eq!(source.locate("elsewhere"), None);
        assert_eq!(names.get(&Name::from("_start")), "_start");
        // A name of a file the table does not hold reads as empty.
        let stray = Name::InFile {
            file: 7,
            offset: 0,
            len: 1,
        };
        assert_eq!(names.get(&stray), "");
    }

    /// The table keeps a name that ends at a NUL in its file as an offset
    /// and reads it back to that NUL; a name that does not (a slice of a
    /// longer string) and a made-up one are copied; both read as given.
    /// Each entry takes 32 bytes.
    #[test]
    fn table_names_by_offset_or_copied() {
        assert_eq!(std::mem::size_of::<Entry>(), 32);
        let mut map = memmap2::MmapMut::map_anon(64).unwrap();
        map[10..21].copy_from_slice(b"free\0freeze");
        let map = Arc::new(map.make_read_only().unwrap());
        let mut names = Names::default();
        let file = names.add(map).unwrap();
        let in_file = |offset, len| Name::InFile { file, offset, len };
        let named = |svma, name| Sym {
            name,
            ..sym(svma, 8, SymKind::Data, "")
        };
        let table = SymbolTable::new(
            vec![
                named(0x100, in_file(10, 4)),
                // "free" of "freeze": no NUL after it.
                named(0x200, in_file(15, 4)),
                named(0x300, in_file(15, 6)),
                named(0x400, Name::from("made_up")),
            ],
            names,
        );
        let name_at = |svma| table.lookup(svma, SymKind::Data).map(|s| table.name(s));
        assert_eq!(name_at(0x100), Some("free"));
        assert_eq!(name_at(0x200), Some("free"));
        assert_eq!(name_at(0x300), Some("freeze"));
        assert_eq!(name_at(0x400), Some("made_up"));
        let files = |svma| table.lookup(svma, SymKind::Data).map(|s| s.file);
        assert_eq!(files(0x100), Some(file));
        assert_eq!(files(0x200), Some(OWNED));
        assert_eq!(files(0x300), Some(file));
    }

    /// Spans past 4 GiB (an entry's reach is kept in 32 bits): a huge
    /// object still covers its far end behind small ones (the scan does not
    /// stop early there), and an unsized label in a huge section reaches to
    /// its end, no further.
    #[test]
    fn table_spans_past_4_gib() {
        use SymKind::{Data, Function};
        const GIB: u64 = 1 << 30;
        let table = table(vec![
            sym(0x1000, 8 * GIB, Data, "huge"),
            sym(0x2000, 8, Data, "small"),
            Sym {
                section_end: 0x9000 + 6 * GIB,
                ..sym(0x9000, 0, Function, "label")
            },
        ]);
        let name_at = |svma, kind| table.lookup(svma, kind).map(|s| table.name(s));
        assert_eq!(name_at(0x2004, Data), Some("small"));
        assert_eq!(name_at(0x1000 + 5 * GIB, Data), Some("huge"));
        assert_eq!(name_at(0x1000 + 8 * GIB, Data), None);
        assert_eq!(name_at(0x9000 + 5 * GIB, Function), Some("label"));
        assert_eq!(name_at(0x9000 + 6 * GIB, Function), None);
    }

    /// perf's order between aliases: `__vdso_time` (global) over `time`
    /// (weak); any non-weak over weak; `strnlen` over `__strnlen`; the
    /// longer name at a tie.
    #[test]
    fn perf_alias_rank_table() {
        let s = |weak, global, name| Sym {
            weak,
            global,
            ..sym(0x1000, 8, SymKind::Function, name)
        };
        let cases = [
            (s(true, true, "time"), s(false, true, "__vdso_time")),
            (s(false, true, "__strnlen"), s(false, true, "strnlen")),
            (s(true, true, "weak_global"), s(false, false, "local")),
            (s(false, true, "memcpy"), s(false, true, "memcpy_impl")),
        ];
        let names = Names::default();
        for (worse, better) in &cases {
            assert!(
                perf_alias_rank(better, &names) < perf_alias_rank(worse, &names),
                "{:?} over {:?}",
                better.name,
                worse.name
            );
        }
    }

    /// A weak function yields to a non-weak global one at its address only;
    /// data and lone weak functions stay.
    #[test]
    fn weak_aliases_of_strong_functions_go() {
        use SymKind::{Data, Function};
        let weak = |svma, kind, name| Sym {
            weak: true,
            ..sym(svma, 8, kind, name)
        };
        let local = |svma, name| Sym {
            global: false,
            ..sym(svma, 8, Function, name)
        };
        let syms = vec![
            weak(0x1000, Function, "time"),
            sym(0x1000, 8, Function, "__vdso_time"),
            weak(0x2000, Function, "lone_weak"),
            weak(0x3000, Function, "beside_a_local"),
            local(0x3000, "local"),
            weak(0x4000, Data, "weak_data"),
            sym(0x4000, 8, Function, "code_at_data"),
        ];
        let kept: Vec<String> = without_weak_aliases(syms)
            .into_iter()
            .map(|s| Names::default().get(&s.name).to_string())
            .collect();
        assert_eq!(
            kept,
            [
                "__vdso_time",
                "lone_weak",
                "beside_a_local",
                "local",
                "weak_data",
                "code_at_data"
            ]
        );
    }

    #[test]
    fn debug_candidates_order() {
        let dirs = vec![PathBuf::from("/usr/lib/debug")];
        let got = debug_file_candidates(
            Path::new("/nonexistent/dir/libx.so"),
            Some(&[0xab, 0xcd, 0xef]),
            Some(b"libx.so.debug"),
            &dirs,
        );
        let want: Vec<DebugCandidate> = [
            ("/usr/lib/debug/.build-id/ab/cdef.debug", false),
            ("/nonexistent/dir/libx.so.debug", true),
            ("/nonexistent/dir/.debug/libx.so.debug", true),
            ("/usr/lib/debug/nonexistent/dir/libx.so.debug", true),
        ]
        .iter()
        .map(|&(p, via_debuglink)| DebugCandidate {
            path: PathBuf::from(p),
            via_debuglink,
        })
        .collect();
        assert_eq!(got, want);
        // A debuglink with a slash is ignored (no escaping the search dirs).
        assert!(debug_file_candidates(Path::new("/a/b"), None, Some(b"../x"), &dirs).is_empty());
    }
}
