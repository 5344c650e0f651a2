//! DWARF line and inline information through `addr2line::Context`, which
//! borrows the mapped debug file (compressed sections are inflated once).
//!
//! Read lazily, by compilation unit: addr2line parses every unit's header
//! and abbreviations when a context is built (libc's debug file: 4,126
//! units, two thirds of its load time), so where `.debug_aranges` says which unit covers an
//! address, a context is built over that unit alone, on its first lookup.
//! Addresses no arange covers (clang and rustc write none), and units that
//! refer into other units, go to a context over the whole file.

use std::borrow::Cow;
use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;

use memmap2::Mmap;
use object::{Object, ObjectSection};

type Reader<'a> = gimli::EndianSlice<'a, gimli::RunTimeEndian>;
type Ctx<'a> = addr2line::Context<Reader<'a>>;

/// The bytes of a file: mapped, or read into memory (fuzzing, tests).
pub(crate) enum Bytes {
    /// A mapped file.
    Map(Mmap),
    /// Bytes in memory.
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Map(map) => map,
            Bytes::Owned(bytes) => bytes,
        }
    }
}

/// The mapped file plus the inflated copies of its compressed DWARF
/// sections, which the context borrows from.
pub(crate) struct DwarfOwner {
    map: Bytes,
    /// (section name, inflated bytes) for SHF_COMPRESSED sections only.
    inflated: Vec<(&'static str, Vec<u8>)>,
    little_endian: bool,
}

self_cell::self_cell!(
    /// A DWARF context that owns the bytes it reads from.
    pub(crate) struct Dwarf {
        owner: DwarfOwner,
        #[not_covariant]
        dependent: Units,
    }
);

/// The DWARF sections, with a context per compilation unit built on its
/// first lookup, and one over the whole file for the rest.
struct Units<'a> {
    sections: Sections<'a>,
    endian: gimli::RunTimeEndian,
    /// Address ranges of `.debug_aranges` (start, end, unit offset in
    /// `.debug_info`), sorted by start.
    aranges: Vec<(u64, u64, usize)>,
    /// By unit offset; None: the unit cannot stand alone (whole file).
    units: RefCell<HashMap<usize, Option<Ctx<'a>>>>,
    /// How many units the aranges name.
    unit_count: usize,
    /// Every compilation unit has aranges: an address none covers has no
    /// DWARF (addr2line would look in every unit's own ranges).
    aranges_complete: bool,
    whole: OnceCell<Option<Ctx<'a>>>,
}

/// The sections a context reads, by id.
type Sections<'a> = HashMap<gimli::SectionId, Reader<'a>>;

/// One frame as found in DWARF, innermost first.
#[cfg_attr(test, derive(Debug, PartialEq))]
pub(crate) struct RawFrame {
    /// Demangled (if asked) function name; `None` when DWARF has none.
    pub(crate) function: Option<String>,
    pub(crate) file: Option<String>,
    pub(crate) line: Option<u32>,
}

/// Whether the file has a non-empty `.debug_info`.
pub(crate) fn has_debug_info(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0 && s.file_range().is_some())
}

impl Dwarf {
    /// Builds a context over `map`, which must hold an ELF file with DWARF.
    /// `None` when it cannot be parsed.
    /// Lets the kernel take back the file pages lookups brought in (see
    /// [`crate::sys::release_pages`]); what was parsed stays.
    pub(crate) fn release_pages(&self) {
        if let Bytes::Map(map) = &self.borrow_owner().map {
            crate::sys::release_pages(map);
        }
    }

    pub(crate) fn load(map: Bytes) -> Option<Self> {
        let (inflated, little_endian) = {
            let file = crate::elf::parse_elf(&map)?;
            if !has_debug_info(&file) {
                return None;
            }
            (inflate(&file), file.is_little_endian())
        };
        let owner = DwarfOwner {
            map,
            inflated,
            little_endian,
        };
        Dwarf::try_new(owner, |owner| -> Result<Units<'_>, ()> {
            let file = crate::elf::parse_elf(&owner.map).ok_or(())?;
            let endian = if owner.little_endian {
                gimli::RunTimeEndian::Little
            } else {
                gimli::RunTimeEndian::Big
            };
            let mut sections = HashMap::new();
            for id in SECTION_IDS {
                let name = id.name();
                let bytes: &[u8] =
                    if let Some((_, bytes)) = owner.inflated.iter().find(|(n, _)| *n == name) {
                        bytes
                    } else {
                        match file.section_by_name(name) {
                            Some(section) => match section.data() {
                                Ok(data) if !is_compressed(&section) => data,
                                _ => &[],
                            },
                            None => &[],
                        }
                    };
                sections.insert(id, gimli::EndianSlice::new(bytes, endian));
            }
            // Units with an empty set of aranges have no code.
            let (aranges, offsets) =
                unit_aranges(section(&sections, gimli::SectionId::DebugAranges, endian));
            let info = section(&sections, gimli::SectionId::DebugInfo, endian);
            let aranges_complete = all_units_among(info, &offsets);
            Ok(Units {
                sections,
                endian,
                unit_count: offsets.len(),
                aranges_complete,
                aranges,
                units: RefCell::default(),
                whole: OnceCell::new(),
            })
        })
        .ok()
    }

    /// Frames at `svma`, innermost first; empty when DWARF does not cover it.
    pub(crate) fn frames(&self, svma: u64, demangle: bool) -> Vec<RawFrame> {
        self.with_dependent(|_, units| units.with_context(svma, |ctx| frames(ctx, svma, demangle)))
            .unwrap_or_default()
    }

    /// The line-table location of `svma` alone (no functions).
    pub(crate) fn location(&self, svma: u64) -> (Option<String>, Option<u32>) {
        self.with_dependent(|_, units| {
            units.with_context(svma, |ctx| match ctx.find_location(svma) {
                Ok(Some(loc)) => (loc.file.map(str::to_string), loc.line),
                _ => (None, None),
            })
        })
        .unwrap_or_default()
    }
}

impl<'a> Units<'a> {
    /// Runs `f` on the context that answers for `svma`: its unit's own,
    /// or the whole file's. None when no context could be built.
    fn with_context<T>(&self, svma: u64, f: impl FnOnce(&Ctx<'a>) -> T) -> Option<T> {
        let unit = self.unit_at(svma).filter(|_| self.whole.get().is_none());
        if let Some(offset) = unit {
            let mut units = self.units.borrow_mut();
            // Lookups spread over many units are answered faster by the
            // whole file's context (a unit's own costs ~30 µs more).
            if units.len() < self.unit_limit() || units.contains_key(&offset) {
                let unit = units
                    .entry(offset)
                    .or_insert_with(|| self.unit_context(offset));
                if let Some(ctx) = unit {
                    return Some(f(ctx));
                }
            } else {
                units.clear();
            }
        }
        if unit.is_none() && self.aranges_complete && self.whole.get().is_none() {
            // Code DWARF does not describe (PLT entries, stripped objects).
            return None;
        }
        let whole = self
            .whole
            .get_or_init(|| addr2line::Context::from_dwarf(self.dwarf(|_, section| section)).ok());
        whole.as_ref().map(f)
    }

    /// How many units get a context of their own before the whole file's
    /// serves every lookup: an eighth of the units, at least 64.
    fn unit_limit(&self) -> usize {
        (self.unit_count / 8).max(64)
    }

    /// The offset of the unit whose arange covers `svma`.
    fn unit_at(&self, svma: u64) -> Option<usize> {
        let i = self.aranges.partition_point(|&(start, _, _)| start <= svma);
        let &(_, end, offset) = self.aranges.get(i.checked_sub(1)?)?;
        (svma < end).then_some(offset)
    }

    /// A context over the unit at `offset` of `.debug_info` alone, or None
    /// when the unit refers into other units (its references would be read
    /// in the wrong place) or does not parse.
    fn unit_context(&self, offset: usize) -> Option<Ctx<'a>> {
        let info = section(&self.sections, gimli::SectionId::DebugInfo, self.endian);
        let header = gimli::DebugInfo::from(info)
            .header_from_offset(gimli::DebugInfoOffset(offset))
            .ok()?;
        let end = offset.checked_add(header.length_including_self())?;
        let abbrev = section(&self.sections, gimli::SectionId::DebugAbbrev, self.endian);
        // (A corrupt offset must not slice out of bounds.)
        let at = header.debug_abbrev_offset().0;
        let table = abbrev.range_from(at.min(abbrev.len())..);
        if !stands_alone(table) {
            return None;
        }
        let unit = info.range(offset..end.min(info.len()));
        let dwarf = self.dwarf(|id, section| match id {
            gimli::SectionId::DebugInfo => unit,
            // Its offsets are of the whole section.
            gimli::SectionId::DebugAranges => section.range_to(..0),
            _ => section,
        });
        addr2line::Context::from_dwarf(dwarf).ok()
    }

    /// The sections as gimli reads them, each passed through `pick`.
    fn dwarf(
        &self,
        pick: impl Fn(gimli::SectionId, Reader<'a>) -> Reader<'a>,
    ) -> gimli::Dwarf<Reader<'a>> {
        let load = |id| -> Result<Reader<'a>, ()> {
            Ok(pick(id, section(&self.sections, id, self.endian)))
        };
        match gimli::Dwarf::load(load) {
            Ok(dwarf) => dwarf,
            Err(()) => unreachable!("the section loader never fails"),
        }
    }
}

/// Section `id` of `sections`, empty when the file has none (or it is not
/// one of [`SECTION_IDS`]).
fn section<'a>(
    sections: &Sections<'a>,
    id: gimli::SectionId,
    endian: gimli::RunTimeEndian,
) -> Reader<'a> {
    let empty = gimli::EndianSlice::new(&[][..], endian);
    sections.get(&id).copied().unwrap_or(empty)
}

/// The address ranges of `.debug_aranges` by unit, and the offsets of the
/// units it lists (sorted): both empty when the section is missing or does
/// not parse (every lookup then goes to the whole file's context).
fn unit_aranges(section: Reader<'_>) -> (Vec<(u64, u64, usize)>, Vec<usize>) {
    let (mut ranges, mut offsets) = (Vec::new(), Vec::new());
    let mut headers = gimli::DebugAranges::from(section).headers();
    loop {
        let header = match headers.next() {
            Ok(Some(header)) => header,
            Ok(None) => break,
            Err(_) => return (Vec::new(), Vec::new()),
        };
        let offset = header.debug_info_offset().0;
        offsets.push(offset);
        let mut entries = header.entries();
        loop {
            let range = match entries.next() {
                Ok(Some(entry)) => entry.range(),
                Ok(None) => break,
                Err(_) => return (Vec::new(), Vec::new()),
            };
            // Discarded functions' ranges start at 0.
            if range.begin != 0 && range.begin < range.end {
                ranges.push((range.begin, range.end, offset));
            }
        }
    }
    ranges.sort_unstable();
    offsets.sort_unstable();
    offsets.dedup();
    (ranges, offsets)
}

/// Whether every compilation unit of `.debug_info` is among `offsets`
/// (sorted): only the units' headers are read.
fn all_units_among(info: Reader<'_>, offsets: &[usize]) -> bool {
    let mut headers = gimli::DebugInfo::from(info).units();
    loop {
        match headers.next() {
            Ok(None) => return true,
            Ok(Some(header)) => {
                let needs_ranges = matches!(
                    header.type_(),
                    gimli::UnitType::Compilation | gimli::UnitType::Skeleton(_)
                );
                let offset = header.debug_info_offset().map(|o| o.0);
                if needs_ranges && !offset.is_some_and(|o| offsets.binary_search(&o).is_ok()) {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
}

/// Whether the units of an abbreviation table `table` can be read alone:
/// no attribute refers into another unit (`DW_FORM_ref_addr`, the
/// supplementary file's forms) or has its form in the entry
/// (`DW_FORM_indirect`). False when the table does not parse.
fn stands_alone(mut table: Reader<'_>) -> bool {
    use gimli::Reader as _;
    let foreign = [
        gimli::DW_FORM_ref_addr,
        gimli::DW_FORM_indirect,
        gimli::DW_FORM_GNU_ref_alt,
        gimli::DW_FORM_GNU_strp_alt,
        gimli::DW_FORM_ref_sup4,
        gimli::DW_FORM_ref_sup8,
        gimli::DW_FORM_strp_sup,
    ];
    // Bounded by the table's bytes: each step reads at least one.
    loop {
        let Ok(code) = table.read_uleb128() else {
            return false;
        };
        if code == 0 {
            return true;
        }
        let (Ok(_tag), Ok(_children)) = (table.read_uleb128(), table.read_u8()) else {
            return false;
        };
        loop {
            let (Ok(name), Ok(form)) = (table.read_uleb128(), table.read_uleb128()) else {
                return false;
            };
            if name == 0 && form == 0 {
                break;
            }
            let form = gimli::DwForm(u16::try_from(form).unwrap_or(u16::MAX));
            if foreign.contains(&form) {
                return false;
            }
            if form == gimli::DW_FORM_implicit_const && table.read_sleb128().is_err() {
                return false;
            }
        }
    }
}

/// The frames `ctx` finds at `svma`, innermost first.
fn frames(ctx: &Ctx<'_>, svma: u64, demangle: bool) -> Vec<RawFrame> {
    {
        {
            let mut out = Vec::new();
            let Ok(mut iter) = ctx.find_frames(svma).skip_all_loads() else {
                return out;
            };
            // Bounded: corrupt DWARF must not make us loop forever.
            for _ in 0..256 {
                let Ok(Some(frame)) = iter.next() else { break };
                let function = frame.function.as_ref().and_then(|f| {
                    let raw = f.raw_name().ok()?;
                    Some(if demangle {
                        crate::demangle(&raw)
                    } else {
                        raw.into_owned()
                    })
                });
                let (file, line) = match &frame.location {
                    Some(loc) => (loc.file.map(str::to_string), loc.line),
                    None => (None, None),
                };
                out.push(RawFrame {
                    function,
                    file,
                    line,
                });
            }
            out
        }
    }
}

/// The inflated copies of `file`'s compressed DWARF sections, by name.
/// `.debug_info` (two thirds of libc's 8.5 MB) is inflated on a thread of
/// its own while the rest are.
fn inflate(file: &object::File<'_>) -> Vec<(&'static str, Vec<u8>)> {
    let one = |id: gimli::SectionId| match file.section_by_name(id.name())?.uncompressed_data() {
        Ok(Cow::Owned(bytes)) => Some((id.name(), bytes)),
        _ => None,
    };
    let compressed = |id: gimli::SectionId| {
        file.section_by_name(id.name())
            .is_some_and(|s| is_compressed(&s))
    };
    std::thread::scope(|scope| {
        let info = gimli::SectionId::DebugInfo;
        let beside = compressed(info)
            .then(|| {
                std::thread::Builder::new()
                    .spawn_scoped(scope, move || one(info))
                    .ok()
            })
            .flatten();
        let rest = SECTION_IDS
            .into_iter()
            .filter(|&id| id != info || beside.is_none());
        let mut inflated: Vec<_> = rest.filter_map(one).collect();
        if let Some(thread) = beside {
            let info = thread
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            inflated.extend(info);
        }
        inflated
    })
}

pub(crate) fn is_compressed(section: &object::Section<'_, '_>) -> bool {
    section
        .compressed_file_range()
        .is_ok_and(|r| r.format != object::CompressionFormat::None)
}

/// The DWARF sections addr2line needs for functions, lines and inlined
/// frames (DWARF 2-5, non-split). Location lists, macros and type units are
/// left out: they are large, often compressed, and never read for lookups.
const SECTION_IDS: [gimli::SectionId; 10] = [
    gimli::SectionId::DebugAbbrev,
    gimli::SectionId::DebugAddr,
    gimli::SectionId::DebugAranges,
    gimli::SectionId::DebugInfo,
    gimli::SectionId::DebugLine,
    gimli::SectionId::DebugLineStr,
    gimli::SectionId::DebugRanges,
    gimli::SectionId::DebugRngLists,
    gimli::SectionId::DebugStr,
    gimli::SectionId::DebugStrOffsets,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn table(bytes: &[u8]) -> Reader<'_> {
        gimli::EndianSlice::new(bytes, gimli::RunTimeEndian::Little)
    }

    /// A unit stands alone unless an attribute's form reaches outside it.
    #[test]
    fn units_that_stand_alone() {
        // Abbreviation 1: DW_TAG_compile_unit, children, DW_AT_name/string,
        // DW_AT_language/implicit_const 12; abbreviation 2:
        // DW_TAG_subprogram, no children, DW_AT_specification/ref4.
        let local = [
            1, 0x11, 1, 0x03, 0x08, 0x13, 0x21, 12, 0, 0, 2, 0x2e, 0, 0x47, 0x13, 0, 0, 0,
        ];
        assert!(stands_alone(table(&local)));
        // DW_AT_abstract_origin as DW_FORM_ref_addr: into another unit.
        let foreign = [1, 0x2e, 0, 0x31, 0x10, 0, 0, 0];
        assert!(!stands_alone(table(&foreign)));
        // The form in the entry: cannot be told from the table.
        let indirect = [1, 0x2e, 0, 0x31, 0x16, 0, 0, 0];
        assert!(!stands_alone(table(&indirect)));
        // Cut short: not trusted.
        assert!(!stands_alone(table(&local[..6])));
        assert!(!stands_alone(table(&[])));
    }

    /// libc's units, looked up one by one and then (past the limit) through
    /// the whole file, answer as the whole file's context does, its PLT
    /// (no DWARF) included. Skipped without Debian's libc6-dbg.
    #[test]
    fn units_answer_as_the_whole_file() {
        let libc = std::path::Path::new("/usr/lib/x86_64-linux-gnu/libc.so.6");
        let Some(id) = crate::read_build_id(libc) else {
            return;
        };
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        let debug = format!("/usr/lib/debug/.build-id/{}/{}.debug", &hex[..2], &hex[2..]);
        let Ok(bytes) = std::fs::read(&debug) else {
            eprintln!("skipped: no libc6-dbg ({debug})");
            return;
        };
        let code = std::fs::read(libc).unwrap();
        let file = crate::elf::parse_elf(&code).unwrap();
        let span = |name: &str| {
            let s = file.section_by_name(name).unwrap();
            s.address()..s.address() + s.size()
        };
        let dwarf = Dwarf::load(Bytes::Owned(bytes.clone())).expect("libc's DWARF");
        // The reference: every lookup through the whole file's context.
        let mut whole = Dwarf::load(Bytes::Owned(bytes)).unwrap();
        whole.with_dependent_mut(|_, units| {
            units.aranges.clear();
            units.aranges_complete = false;
        });
        let (mut answered, mut units_seen) = (0, 0);
        for svma in span(".plt").step_by(7).chain(span(".text").step_by(211)) {
            let want = whole.frames(svma, true);
            assert_eq!(dwarf.frames(svma, true), want, "svma {svma:#x}");
            answered += usize::from(!want.is_empty());
            units_seen = units_seen.max(dwarf.with_dependent(|_, u| u.units.borrow().len()));
        }
        assert!(answered > 1000, "{answered}");
        // Both ways were taken: units of their own, then the whole file.
        let limit = dwarf.with_dependent(|_, u| u.unit_limit());
        assert_eq!(units_seen, limit);
        assert!(dwarf.with_dependent(|_, u| u.whole.get().is_some()));
    }
}
