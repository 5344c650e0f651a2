//! One address in one parsed module: a code site from DWARF and the
//! symbol tables, a data target from the sections and data symbols.

use crate::elf::{SymKind, SymbolTable};
use crate::{
    dwarf, elf, unwind, CodeSite, DataTarget, Frame, Module, Reason, SectionInfo, SegmentInfo,
    Shared, CODE_CACHE_MAX,
};

/// The code sites of `file_offsets` in `module`, its DWARF loaded on the
/// first lookup, each svma answered once per module (bounded cache).
pub(crate) fn code_in(
    module: &Shared,
    demangle: bool,
    file_offsets: &[u64],
) -> Vec<Result<CodeSite, Reason>> {
    let mut module = crate::lock(module);
    let module = &mut *module;
    let slot = module.dwarf.clone();
    let mut dwarf = crate::lock_dwarf(&slot);
    load_dwarf(&mut dwarf, module.dwarf_path.as_deref());
    file_offsets
        .iter()
        .map(|&file_offset| {
            let Some(svma) = module.info.file_offset_to_svma(file_offset) else {
                return Err(Reason::NotInSegment);
            };
            if let Some(hit) = module.code_cache.get(&svma) {
                return hit.clone();
            }
            let dwarf = dwarf.as_ref().and_then(Option::as_ref);
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

/// Reads a module's DWARF sections (inflated) from the file at `path`
/// into `slot`, once.
pub(crate) fn load_dwarf(slot: &mut Option<Option<dwarf::Dwarf>>, path: Option<&std::path::Path>) {
    if slot.is_none() {
        let loaded = path
            .and_then(|p| elf::map_file(p).ok())
            .and_then(|map| dwarf::Dwarf::load(dwarf::Bytes::Map(map)));
        *slot = Some(loaded);
    }
}

pub(crate) fn data_target(
    module: &Module,
    file_offset: u64,
    demangle: bool,
) -> Result<DataTarget, Reason> {
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
pub(crate) fn entry_symbol(
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
pub(crate) fn outside_sections(module: &Module, file_offset: u64, svma: u64) -> Option<&str> {
    outside_sections_of(
        &module.info.sections,
        &module.info.segments,
        &module.header_ranges,
        file_offset,
        svma,
    )
}

/// `SHF_TLS`: `.tbss` takes no room in the segment.
pub(crate) const SHF_TLS: u64 = object::elf::SHF_TLS.0;

/// `SHF_EXECINSTR`: code.
pub(crate) const SHF_EXECINSTR: u64 = object::elf::SHF_EXECINSTR.0;

pub(crate) fn outside_sections_of<'s>(
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

pub(crate) fn maybe_demangle(name: &str, demangle: bool) -> String {
    if demangle {
        crate::demangle(name)
    } else {
        name.to_string()
    }
}

/// The function symbol naming `svma`: a real one of `symbols`, else the
/// PLT entry of `plt` as `name@plt`.
pub(crate) fn function_symbol(
    [symbols, plt]: [&SymbolTable; 2],
    svma: u64,
    demangle: bool,
) -> Option<String> {
    if let Some(sym) = symbols.lookup(svma, SymKind::Function) {
        return Some(maybe_demangle(symbols.name(sym), demangle));
    }
    let entry = plt.lookup(svma, SymKind::Function)?;
    Some(format!("{}@plt", maybe_demangle(plt.name(entry), demangle)))
}

/// Builds the frames of one code address from DWARF and the symbol tables
/// (real symbols, then PLT entries).
pub(crate) fn code_site(
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
