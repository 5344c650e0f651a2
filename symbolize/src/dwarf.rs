//! DWARF line and inline information through `addr2line::Context`, which
//! borrows the mapped debug file (compressed sections are inflated once).

use std::borrow::Cow;

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
        dependent: Ctx,
    }
);

/// One frame as found in DWARF, innermost first.
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
    pub(crate) fn load(map: Bytes) -> Option<Self> {
        let (inflated, little_endian) = {
            let file = crate::elf::parse_elf(&map)?;
            if !has_debug_info(&file) {
                return None;
            }
            let mut inflated = Vec::new();
            for id in SECTION_IDS {
                let Some(section) = file.section_by_name(id.name()) else {
                    continue;
                };
                if let Ok(Cow::Owned(bytes)) = section.uncompressed_data() {
                    inflated.push((id.name(), bytes));
                }
            }
            (inflated, file.is_little_endian())
        };
        let owner = DwarfOwner {
            map,
            inflated,
            little_endian,
        };
        Dwarf::try_new(owner, |owner| -> Result<Ctx<'_>, ()> {
            let file = crate::elf::parse_elf(&owner.map).ok_or(())?;
            let endian = if owner.little_endian {
                gimli::RunTimeEndian::Little
            } else {
                gimli::RunTimeEndian::Big
            };
            let dwarf = gimli::Dwarf::load(|id| -> Result<Reader<'_>, ()> {
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
                Ok(gimli::EndianSlice::new(bytes, endian))
            })?;
            addr2line::Context::from_dwarf(dwarf).map_err(|_| ())
        })
        .ok()
    }

    /// Frames at `svma`, innermost first; empty when DWARF does not cover it.
    pub(crate) fn frames(&self, svma: u64, demangle: bool) -> Vec<RawFrame> {
        self.with_dependent(|_, ctx| {
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
        })
    }

    /// The line-table location of `svma` alone (no functions).
    pub(crate) fn location(&self, svma: u64) -> (Option<String>, Option<u32>) {
        self.with_dependent(|_, ctx| match ctx.find_location(svma) {
            Ok(Some(loc)) => (loc.file.map(str::to_string), loc.line),
            _ => (None, None),
        })
    }
}

fn is_compressed(section: &object::Section<'_, '_>) -> bool {
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
