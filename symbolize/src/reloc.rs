//! Dynamic relocations that ld.so applies at start-up, read from the
//! `PT_DYNAMIC` entries (not the section headers, which may be stripped),
//! the way ld.so finds them: `DT_RELA`/`DT_RELASZ`, `DT_REL`/`DT_RELSZ`,
//! `DT_JMPREL`/`DT_PLTRELSZ` (of kind `DT_PLTREL`) and `DT_RELR`/`DT_RELRSZ`.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

use object::elf::{self, FileHeader64};
use object::read::elf::{Dyn, ElfFile64, FileHeader, ProgramHeader, RelrIterator};
use object::Endianness;

use crate::{ModuleInfo, Reason, RelocationInfo};

/// Page size used for [`RelocationInfo::pages`].
const PAGE_SHIFT: u32 = 12;

/// Bytes written by one relocation (x86_64 dynamic relocations write a
/// 64-bit word); a target straddling a page boundary dirties both pages.
const TARGET_WIDTH: u64 = 8;

/// An x86_64 relocation type (`r_type`), known by its name as readelf
/// prints it (`R_X86_64_RELATIVE`); `R_X86_64_<n>` for a type object does
/// not know. Ordered by name (then number), as the reports list them, and
/// serialized (feature `serde`) as its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RelocType(pub u32);

impl RelocType {
    /// `R_X86_64_NONE`: nothing to do.
    pub const NONE: RelocType = RelocType(elf::R_X86_64_NONE.0);
    /// `R_X86_64_RELATIVE`: the load bias added to a pointer in data.
    pub const RELATIVE: RelocType = RelocType(elf::R_X86_64_RELATIVE.0);
    /// `R_X86_64_JUMP_SLOT`: a `.got.plt` slot of a function.
    pub const JUMP_SLOT: RelocType = RelocType(elf::R_X86_64_JUMP_SLOT.0);

    /// `R_X86_64_RELATIVE`, `R_X86_64_<n>` for a type object does not know.
    pub fn name(self) -> Cow<'static, str> {
        elf::machine_names(elf::EM_X86_64)
            .r
            .name(elf::RelocationType(self.0))
            .filter(|name| name.starts_with(PREFIX))
            .map_or_else(|| Cow::Owned(format!("{PREFIX}{}", self.0)), Cow::Borrowed)
    }

    /// The name without `R_X86_64_` (`RELATIVE`), unless a number is left
    /// (`R_X86_64_64`, `R_X86_64_200` stay whole).
    pub fn short_name(self) -> Cow<'static, str> {
        match self.name() {
            Cow::Borrowed(name) => match name.strip_prefix(PREFIX) {
                Some(rest) if !rest.starts_with(|c: char| c.is_ascii_digit()) => {
                    Cow::Borrowed(rest)
                }
                _ => Cow::Borrowed(name),
            },
            owned => owned,
        }
    }
}

/// What every x86_64 relocation type's name starts with.
const PREFIX: &str = "R_X86_64_";

impl fmt::Display for RelocType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl Ord for RelocType {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.name(), self.0).cmp(&(other.name(), other.0))
    }
}

impl PartialOrd for RelocType {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for RelocType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

/// Decodes `DT_RELR` words into the addresses they relocate.
pub(crate) fn decode_relr(words: &[elf::Relr64<Endianness>]) -> impl Iterator<Item = u64> + '_ {
    RelrIterator::<FileHeader64<Endianness>>::new(Endianness::Little, words)
}

/// The file bytes of `[svma, svma + size)`, which must lie inside the file
/// part of one PT_LOAD.
fn bytes_at<'d>(
    data: &'d [u8],
    endian: Endianness,
    headers: &[elf::ProgramHeader64<Endianness>],
    svma: u64,
    size: u64,
) -> Option<&'d [u8]> {
    if size == 0 {
        return Some(&[]);
    }
    headers
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .find_map(|ph| ph.data_range(endian, data, svma, size).ok().flatten())
}

/// The dynamic tags this module reads; absent ones are `None`.
#[derive(Debug, Default)]
struct Tags {
    rela: Option<u64>,
    rela_size: u64,
    rel: Option<u64>,
    rel_size: u64,
    jmprel: Option<u64>,
    pltrel_size: u64,
    pltrel: Option<u64>,
    relr: Option<u64>,
    relr_size: u64,
    flags: u64,
    flags_1: u64,
    bind_now: bool,
}

fn read_tags(dynamic: &[elf::Dyn64<Endianness>], endian: Endianness) -> Tags {
    let mut tags = Tags::default();
    for entry in dynamic {
        let value = entry.val(endian);
        match entry.tag(endian) {
            elf::DT_NULL => break,
            elf::DT_RELA => tags.rela = Some(value),
            elf::DT_RELASZ => tags.rela_size = value,
            elf::DT_REL => tags.rel = Some(value),
            elf::DT_RELSZ => tags.rel_size = value,
            elf::DT_JMPREL => tags.jmprel = Some(value),
            elf::DT_PLTRELSZ => tags.pltrel_size = value,
            elf::DT_PLTREL => tags.pltrel = Some(value),
            elf::DT_RELR => tags.relr = Some(value),
            elf::DT_RELRSZ => tags.relr_size = value,
            elf::DT_FLAGS => tags.flags = value,
            elf::DT_FLAGS_1 => tags.flags_1 = value,
            elf::DT_BIND_NOW => tags.bind_now = true,
            _ => {}
        }
    }
    tags
}

/// One relocation target, reduced to what [`RelocationInfo`] needs.
struct Target {
    offset: u64,
    r_type: u32,
}

/// Reads `size` bytes at `svma` as RELA (`rela`) or REL entries, skipping
/// those whose entry lies in `skip` (the `DT_JMPREL` range, which
/// `DT_RELASZ` may include). Corrupt ranges are [`Reason::NotElf`].
fn read_table(
    data: &[u8],
    endian: Endianness,
    headers: &[elf::ProgramHeader64<Endianness>],
    (svma, size): (u64, u64),
    rela: bool,
    skip: Option<std::ops::Range<u64>>,
    out: &mut Vec<Target>,
) -> Result<(), Reason> {
    let bytes = bytes_at(data, endian, headers, svma, size).ok_or(Reason::NotElf)?;
    let entry_size: u64 = if rela { 24 } else { 16 };
    let in_skip = |index: usize| {
        let at = svma.saturating_add(index as u64 * entry_size);
        skip.as_ref().is_some_and(|r| r.contains(&at))
    };
    if rela {
        let entries = object::pod::slice_from_all_bytes::<elf::Rela64<Endianness>>(bytes)
            .map_err(|()| Reason::NotElf)?;
        out.extend(
            entries
                .iter()
                .enumerate()
                .filter(|(i, _)| !in_skip(*i))
                .map(|(_, r)| Target {
                    offset: r.r_offset.get(endian),
                    r_type: r.r_type(endian, false).0,
                }),
        );
    } else {
        let entries = object::pod::slice_from_all_bytes::<elf::Rel64<Endianness>>(bytes)
            .map_err(|()| Reason::NotElf)?;
        out.extend(
            entries
                .iter()
                .enumerate()
                .filter(|(i, _)| !in_skip(*i))
                .map(|(_, r)| Target {
                    offset: r.r_offset.get(endian),
                    r_type: r.r_type(endian).0,
                }),
        );
    }
    Ok(())
}

/// Reads the start-up relocations of `file`, which must be a 64-bit
/// little-endian x86_64 ELF file ([`Reason::Unsupported`] otherwise);
/// `info` (its module) names the sections of the pages.
pub(crate) fn relocations(
    file: &object::File<'_>,
    info: &ModuleInfo,
) -> Result<RelocationInfo, Reason> {
    let file = x86_64(file)?;
    let (data, endian, headers) = (file.data(), file.endian(), file.elf_program_headers());
    let mut out = RelocationInfo::default();
    let (relro, dynamic) = relro_and_dynamic(data, endian, headers)?;
    out.relro = relro;
    // No PT_DYNAMIC (static executable): ld.so relocates nothing.
    let Some(dynamic) = dynamic else {
        return Ok(out);
    };
    let tags = read_tags(dynamic, endian);
    out.bind_now = tags.bind_now
        || tags.flags & elf::DF_BIND_NOW.0 != 0
        || tags.flags_1 & elf::DF_1_NOW.0 != 0;
    out.uses_relr = tags.relr.is_some();

    let targets = read_targets(data, endian, headers, &tags)?;
    let mut tally = PageTally::default();
    for target in &targets {
        tally.add(target, out.bind_now);
    }
    out.by_type = std::mem::take(&mut tally.by_type)
        .into_iter()
        .map(|(r_type, count)| (RelocType(r_type), count))
        .collect();
    if let Some(relr) = tags.relr {
        let bytes = bytes_at(data, endian, headers, relr, tags.relr_size).ok_or(Reason::NotElf)?;
        let words = object::pod::slice_from_all_bytes::<elf::Relr64<Endianness>>(bytes)
            .map_err(|()| Reason::NotElf)?;
        for offset in decode_relr(words) {
            out.relr += 1;
            tally.touch(offset);
            tally.note(offset, elf::R_X86_64_RELATIVE.0);
        }
    }
    tally.finish(info, &mut out);
    Ok(out)
}

/// `file` as the 64-bit little-endian x86_64 ELF file it must be, else
/// [`Reason::Unsupported`].
fn x86_64<'f, 'd>(file: &'f object::File<'d>) -> Result<&'f ElfFile64<'d, Endianness>, Reason> {
    match file {
        object::File::Elf64(elf)
            if elf.endian() == Endianness::Little
                && elf.elf_header().e_machine(elf.endian()) == elf::EM_X86_64 =>
        {
            Ok(elf)
        }
        _ => Err(Reason::Unsupported),
    }
}

/// The `PT_GNU_RELRO` svma range (the last one) and the entries of the
/// first `PT_DYNAMIC`, if any.
#[allow(clippy::type_complexity)]
fn relro_and_dynamic<'d>(
    data: &'d [u8],
    endian: Endianness,
    headers: &[elf::ProgramHeader64<Endianness>],
) -> Result<
    (
        Option<std::ops::Range<u64>>,
        Option<&'d [elf::Dyn64<Endianness>]>,
    ),
    Reason,
> {
    let mut relro = None;
    let mut dynamic = None;
    for ph in headers {
        let p_type = ph.p_type(endian);
        if p_type == elf::PT_GNU_RELRO {
            let start = ph.p_vaddr(endian);
            let end = start
                .checked_add(ph.p_memsz(endian))
                .ok_or(Reason::NotElf)?;
            relro = Some(start..end);
        } else if p_type == elf::PT_DYNAMIC && dynamic.is_none() {
            dynamic = ph.dynamic(endian, data).map_err(|_| Reason::NotElf)?;
        }
    }
    Ok((relro, dynamic))
}

/// The targets of the `DT_RELA`, `DT_REL` and `DT_JMPREL` tables, in that
/// order (the JMPREL range left out of the first two).
fn read_targets(
    data: &[u8],
    endian: Endianness,
    headers: &[elf::ProgramHeader64<Endianness>],
    tags: &Tags,
) -> Result<Vec<Target>, Reason> {
    let mut targets = Vec::new();
    let jmprel = tags
        .jmprel
        .map(|start| start..start.saturating_add(tags.pltrel_size));
    if let Some(rela) = tags.rela {
        let range = (rela, tags.rela_size);
        read_table(
            data,
            endian,
            headers,
            range,
            true,
            jmprel.clone(),
            &mut targets,
        )?;
    }
    if let Some(rel) = tags.rel {
        let range = (rel, tags.rel_size);
        read_table(
            data,
            endian,
            headers,
            range,
            false,
            jmprel.clone(),
            &mut targets,
        )?;
    }
    if let Some(jmprel) = tags.jmprel {
        // DT_PLTREL says which kind; x86_64 uses RELA, the default.
        let rela = tags.pltrel != Some(elf::DT_REL.0 as u64);
        let range = (jmprel, tags.pltrel_size);
        read_table(data, endian, headers, range, rela, None, &mut targets)?;
    }
    Ok(targets)
}

/// What the relocations write, gathered page by page.
#[derive(Default)]
struct PageTally {
    /// Page → lowest target on it (start-up writes only).
    pages: HashMap<u64, u64>,
    /// Pages of deferred (lazy) JUMP_SLOTs, kept apart.
    lazy: Vec<u64>,
    /// Type → count, of the RELA/REL/JMPREL entries.
    by_type: HashMap<u32, u64>,
    /// Page → (type → count, the lowest target of each section on it).
    writes: HashMap<u64, (HashMap<u32, u64>, Vec<u64>)>,
}

impl PageTally {
    /// Counts a RELA/REL/JMPREL entry; JUMP_SLOTs bound lazily (not
    /// `bind_now`) go to the lazy pages.
    fn add(&mut self, target: &Target, bind_now: bool) {
        *self.by_type.entry(target.r_type).or_insert(0) += 1;
        if target.r_type != elf::R_X86_64_NONE.0 {
            self.note(target.offset, target.r_type);
        }
        match elf::RelocationType(target.r_type) {
            elf::R_X86_64_NONE => {}
            elf::R_X86_64_JUMP_SLOT if !bind_now => self.lazy.push(target.offset >> PAGE_SHIFT),
            _ => self.touch(target.offset),
        }
    }

    /// A start-up write at `offset`: each page it covers keeps its lowest.
    fn touch(&mut self, offset: u64) {
        let last = offset.saturating_add(TARGET_WIDTH - 1);
        for page in (offset >> PAGE_SHIFT)..=(last >> PAGE_SHIFT) {
            let lowest = offset.max(page << PAGE_SHIFT);
            self.pages
                .entry(page)
                .and_modify(|t| *t = (*t).min(lowest))
                .or_insert(lowest);
        }
    }

    /// A write of type `r_type` at `offset`, on each page it covers.
    fn note(&mut self, offset: u64, r_type: u32) {
        let last = offset.saturating_add(TARGET_WIDTH - 1);
        for page in (offset >> PAGE_SHIFT)..=(last >> PAGE_SHIFT) {
            let (types, at) = self.writes.entry(page).or_default();
            *types.entry(r_type).or_insert(0) += 1;
            at.push(offset.max(page << PAGE_SHIFT));
        }
    }

    /// Fills the page fields of `out`, naming sections through `info`.
    fn finish(self, info: &ModuleInfo, out: &mut RelocationInfo) {
        out.page_writes = self
            .writes
            .into_iter()
            .map(|(page, (types, mut at))| {
                // One section lookup per distinct target, not per relocation.
                at.sort_unstable();
                at.dedup();
                let sections = at
                    .iter()
                    .filter_map(|&svma| Some(info.section_at(svma)?.name.clone()))
                    .collect();
                let by_type = types
                    .into_iter()
                    .map(|(r_type, count)| (RelocType(r_type), count))
                    .collect();
                (page, crate::PageRelocations { by_type, sections })
            })
            .collect();

        let mut pages: Vec<(u64, u64)> = self.pages.into_iter().collect();
        pages.sort_unstable();
        out.page_sections = pages
            .iter()
            .filter_map(|&(page, lowest)| Some((page, info.section_at(lowest)?.name.clone())))
            .collect::<BTreeMap<u64, String>>();
        out.pages = pages.into_iter().map(|(page, _)| page).collect();
        let mut lazy = self.lazy;
        lazy.sort_unstable();
        lazy.dedup();
        out.lazy_jump_slot_pages = lazy;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RELR words decode to the addresses of the ELF gABI proposal.
    #[test]
    fn relr_decoding_table() {
        let cases: &[(&[u64], &[u64])] = &[
            (&[], &[]),
            // One address.
            (&[0x1000], &[0x1000]),
            // Address, then bitmap bits 1 and 3: next + 0 and next + 16.
            (&[0x1000, 0b1011], &[0x1000, 0x1008, 0x1018]),
            // A full bitmap covers 63 words after the address.
            (
                &[0x2000, u64::MAX],
                &std::iter::once(0x2000)
                    .chain((1..=63).map(|i| 0x2000 + i * 8))
                    .collect::<Vec<_>>(),
            ),
            // A second bitmap continues 63 words later.
            (&[0x3000, 0b1, 0b11], &[0x3000, 0x3000 + 64 * 8]),
            // Two addresses.
            (&[0x10, 0x20], &[0x10, 0x20]),
            // A bitmap first: based at 0, no panic.
            (&[0b101], &[0x10]),
            // Overflow wraps instead of panicking.
            (&[u64::MAX - 7, 0b11], &[u64::MAX - 7, 0]),
        ];
        for (words, want) in cases {
            let words: Vec<elf::Relr64<Endianness>> = words
                .iter()
                .map(|&w| elf::Relr64(object::U64::new(Endianness::Little, w)))
                .collect();
            let got: Vec<u64> = decode_relr(&words).collect();
            assert_eq!(&got, want, "{words:?}");
        }
    }

    /// Relocation types are named as readelf names them; unknown ones are numbered.
    #[test]
    fn type_name_table() {
        let cases = [
            (0, "R_X86_64_NONE"),
            (1, "R_X86_64_64"),
            (2, "R_X86_64_PC32"),
            (5, "R_X86_64_COPY"),
            (6, "R_X86_64_GLOB_DAT"),
            (7, "R_X86_64_JUMP_SLOT"),
            (8, "R_X86_64_RELATIVE"),
            (16, "R_X86_64_DTPMOD64"),
            (17, "R_X86_64_DTPOFF64"),
            (18, "R_X86_64_TPOFF64"),
            (36, "R_X86_64_TLSDESC"),
            (37, "R_X86_64_IRELATIVE"),
            (200, "R_X86_64_200"),
            (u32::MAX, "R_X86_64_4294967295"),
        ];
        for (r_type, want) in cases {
            assert_eq!(RelocType(r_type).name(), want, "{r_type}");
            assert_eq!(RelocType(r_type).to_string(), want, "{r_type}");
        }
    }

    /// Short names drop the prefix unless a number would be left; types
    /// sort by name, as the reports list them (`R_X86_64_64` before
    /// `R_X86_64_COPY` though 1 < 5 < 8 says otherwise).
    #[test]
    fn short_names_and_order() {
        let cases = [
            (8, "RELATIVE"),
            (7, "JUMP_SLOT"),
            (1, "R_X86_64_64"),
            (10, "R_X86_64_32"),
            (200, "R_X86_64_200"),
        ];
        for (r_type, want) in cases {
            assert_eq!(RelocType(r_type).short_name(), want, "{r_type}");
        }
        let mut types: Vec<RelocType> = [8, 200, 5, 1, 64, 37].map(RelocType).to_vec();
        types.sort();
        let names: Vec<String> = types.iter().map(|t| format!("{t}/{}", t.0)).collect();
        assert_eq!(
            names,
            [
                "R_X86_64_200/200",
                "R_X86_64_64/1",
                "R_X86_64_64/64",
                "R_X86_64_COPY/5",
                "R_X86_64_IRELATIVE/37",
                "R_X86_64_RELATIVE/8",
            ]
        );
    }

    /// The tally: a target straddling a page boundary dirties both pages
    /// (each keeping its lowest target), lazy JUMP_SLOTs stay apart unless
    /// bound now, and R_X86_64_NONE is only counted.
    #[test]
    fn page_tally_table() {
        let target = |offset, r_type: elf::RelocationType| Target {
            offset,
            r_type: r_type.0,
        };
        for (bind_now, want_pages, want_lazy) in
            [(false, vec![1, 2], vec![3]), (true, vec![1, 2, 3], vec![])]
        {
            let mut tally = PageTally::default();
            for t in [
                target(0x1ffc, elf::R_X86_64_RELATIVE),
                target(0x1010, elf::R_X86_64_GLOB_DAT),
                target(0x3008, elf::R_X86_64_JUMP_SLOT),
                target(0x5000, elf::R_X86_64_NONE),
            ] {
                tally.add(&t, bind_now);
            }
            assert_eq!(tally.by_type.values().sum::<u64>(), 4);
            assert_eq!(tally.pages.get(&1), Some(&0x1010));
            assert_eq!(tally.pages.get(&2), Some(&0x2000));
            assert!(!tally.writes.contains_key(&5));
            assert_eq!(tally.writes[&3].0[&elf::R_X86_64_JUMP_SLOT.0], 1);
            let mut out = RelocationInfo::default();
            tally.finish(&empty_info(), &mut out);
            assert_eq!(out.pages, want_pages, "bind_now {bind_now}");
            assert_eq!(out.lazy_jump_slot_pages, want_lazy, "bind_now {bind_now}");
            assert_eq!(out.page_writes.len(), 3);
        }
    }

    /// An unknown type named like a known one (64 is `R_X86_64_64`, as
    /// type 1 is) is counted apart: by name, one count overwrote the other.
    #[test]
    fn types_named_alike_are_counted_apart() {
        let mut tally = PageTally::default();
        for r_type in [1, 64, 64] {
            tally.add(
                &Target {
                    offset: 0x1000,
                    r_type,
                },
                true,
            );
        }
        let mut out = RelocationInfo::default();
        tally.finish(&empty_info(), &mut out);
        let on_page: Vec<(String, u64)> = out.page_writes[&1]
            .by_type
            .iter()
            .map(|(t, &n)| (format!("{t}/{}", t.0), n))
            .collect();
        assert_eq!(
            on_page,
            [
                ("R_X86_64_64/1".to_string(), 1),
                ("R_X86_64_64/64".to_string(), 2)
            ]
        );
    }

    fn empty_info() -> ModuleInfo {
        ModuleInfo {
            path: "/nonexistent".into(),
            build_id: None,
            debug_file: None,
            rejected_debug_files: Vec::new(),
            sections: Vec::new(),
            segments: Vec::new(),
            has_symbols: false,
            has_dwarf: false,
        }
    }

    /// [`relocations`] of an image: [`Reason::NotElf`] unless it parses.
    fn relocations(data: &[u8], info: &ModuleInfo) -> Result<RelocationInfo, Reason> {
        let file = crate::elf::parse_elf(data).ok_or(Reason::NotElf)?;
        super::relocations(&file, info)
    }

    /// An ELF header without program or section headers: 64-bit or not,
    /// little-endian or not, for `machine`.
    fn bare_header(class64: bool, little: bool, machine: u16) -> Vec<u8> {
        let mut out = vec![
            0x7f,
            b'E',
            b'L',
            b'F',
            1 + u8::from(class64),
            2 - u8::from(little),
            1,
        ];
        out.resize(16, 0);
        let mut put = |value: u64, width: usize| {
            let bytes = value.to_le_bytes();
            let field = &bytes[..width];
            if little {
                out.extend_from_slice(field);
            } else {
                out.extend(field.iter().rev());
            }
        };
        let word = if class64 { 8 } else { 4 };
        put(3, 2); // e_type = ET_DYN
        put(u64::from(machine), 2);
        put(1, 4); // e_version
        for _ in 0..3 {
            put(0, word); // e_entry, e_phoff, e_shoff
        }
        put(0, 4); // e_flags
        let (ehsize, phentsize, shentsize) = if class64 { (64, 56, 64) } else { (52, 32, 40) };
        for value in [ehsize, phentsize, 0, shentsize, 0, 0] {
            put(value, 2);
        }
        out
    }

    /// Non-ELF, foreign-architecture and corrupt inputs give a reason, never a panic.
    #[test]
    fn bad_inputs_give_reasons() {
        let own = std::fs::read("/proc/self/exe").unwrap();
        let info = empty_info();
        // The test binary itself is a PIE with dynamic relocations.
        let whole = relocations(&own, &info).unwrap();
        assert!(
            whole
                .by_type
                .get(&RelocType::RELATIVE)
                .copied()
                .unwrap_or(0)
                + whole.relr
                > 0
        );

        let x86_64 = elf::EM_X86_64.0;
        let mut aarch64 = own.clone();
        aarch64[18..20].copy_from_slice(&elf::EM_AARCH64.0.to_le_bytes());
        let cases: Vec<(&str, Vec<u8>, Result<(), Reason>)> = vec![
            ("empty", Vec::new(), Err(Reason::NotElf)),
            ("text", b"hello world".to_vec(), Err(Reason::NotElf)),
            ("bare", bare_header(true, true, x86_64), Ok(())),
            (
                "big-endian",
                bare_header(true, false, x86_64),
                Err(Reason::Unsupported),
            ),
            ("aarch64", aarch64, Err(Reason::Unsupported)),
            (
                "elf32",
                bare_header(false, true, x86_64),
                Err(Reason::Unsupported),
            ),
        ];
        for (name, input, want) in cases {
            assert_eq!(relocations(&input, &info).map(|_| ()), want, "{name}");
        }
        // Truncations and flipped bytes: any answer but a panic.
        for n in (0..own.len()).step_by(own.len() / 31 + 1) {
            let _ = relocations(&own[..n], &info);
        }
        // Every byte of PT_DYNAMIC, flipped in turn.
        let header = FileHeader64::<Endianness>::parse(&own[..]).unwrap();
        let endian = header.endian().unwrap();
        let dynamic = header
            .program_headers(endian, &own[..])
            .unwrap()
            .iter()
            .find(|ph| ph.p_type(endian) == elf::PT_DYNAMIC)
            .map(|ph| ph.file_range(endian))
            .unwrap();
        let mut flipped = own.clone();
        // Keep each call cheap: shorten DT_RELASZ to 32 entries first.
        let start = usize::try_from(dynamic.0).unwrap();
        let end = start + usize::try_from(dynamic.1).unwrap();
        for entry in flipped[start..end].chunks_exact_mut(16) {
            if entry[..8] == elf::DT_RELASZ.0.to_le_bytes() {
                let size = u64::from_le_bytes(entry[8..].try_into().unwrap());
                entry[8..].copy_from_slice(&size.min(32 * 24).to_le_bytes());
            }
        }
        assert!(relocations(&flipped, &info).is_ok());
        for i in start..end {
            for mask in [0x01, 0xff] {
                flipped[i] ^= mask;
                let _ = relocations(&flipped, &info);
                flipped[i] ^= mask;
            }
        }

        for i in (16..flipped.len().min(4096)).step_by(61) {
            flipped[i] ^= 0xa5;
            let _ = relocations(&flipped, &info);
        }
    }
}
