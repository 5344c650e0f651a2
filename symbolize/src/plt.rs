//! Synthetic `name@plt` symbols for x86_64 PLT entries, found the way
//! binutils (`objdump -d`) and perf find them: each entry's indirect jump
//! names a GOT slot, and the dynamic relocation of that slot names the
//! function.
//!
//! * `.plt` (lazy binding, 16-byte entries): `jmp *GOT(%rip); push N;
//!   jmp PLT0`. PLT0 (`push GOT+8; jmp *GOT+16`) jumps to a slot without a
//!   relocation and gets no name. Under IBT (`-z ibtplt`, `-fcf-protection`)
//!   the `.plt` entries only push and jump to PLT0; their names are on
//!   `.plt.sec`.
//! * `.plt.sec` (IBT): `endbr64; [bnd] jmp *GOT(%rip); nop`.
//! * `.plt.got` (functions also reached through the GOT, `-fno-plt` calls,
//!   or `-z now`): `[endbr64;] jmp *GOT(%rip); nop`, 8 or 16 bytes, whose
//!   slot carries a `GLOB_DAT` relocation.
//!
//! A slot's name comes from its `JUMP_SLOT` or `GLOB_DAT` relocation's
//! symbol; an `IRELATIVE` slot (a local IFUNC) has no symbol but an addend,
//! the IFUNC resolver's address: it takes the name of the file's function
//! symbol there (chosen as perf chooses between aliases,
//! `elf::perf_alias_rank`), else objdump's `*ABS*+0x<addend>`. The `@plt` suffix is added by the caller, after
//! demangling the name.

use std::collections::HashMap;

use object::elf;
use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget,
};

use crate::elf::{perf_alias_rank, Names, Sym, SymKind};

/// The PLT sections, with the entry size used when `sh_entsize` is not 8
/// or 16.
const PLT_SECTIONS: [(&str, u64); 3] = [(".plt", 16), (".plt.sec", 16), (".plt.got", 8)];

/// `endbr64`, which IBT entries start with.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// The synthetic symbols of every PLT entry that jumps through a GOT slot
/// with a dynamic relocation, raw names without `@plt`, sized by entry;
/// `symbols` are the file's own (`elf::symbols`), to name IFUNC resolvers.
/// Anything but x86_64 ELF, or a file without PLT sections, has none.
pub(crate) fn symbols(file: &object::File<'_>, symbols: &[Sym], names: &Names) -> Vec<Sym> {
    if file.architecture() != object::Architecture::X86_64 {
        return Vec::new();
    }
    let slots = got_slot_names(file, symbols, names);
    if slots.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for (name, default_size) in PLT_SECTIONS {
        let Some(section) = file.section_by_name(name) else {
            continue;
        };
        let Ok(bytes) = section.data() else { continue };
        let entry_size = entry_size(file, &section, default_size);
        let section_end = section.address().saturating_add(section.size());
        for (index, entry) in bytes.chunks_exact(entry_size as usize).enumerate() {
            let svma = section.address().saturating_add(index as u64 * entry_size);
            let Some(slot) = jump_slot(entry, svma) else {
                continue;
            };
            let Some(function) = slots.get(&slot) else {
                continue;
            };
            out.push(Sym {
                svma,
                size: entry_size,
                kind: SymKind::Function,
                global: false,
                weak: false,
                name: function.as_str().into(),
                section_end,
            });
        }
    }
    out
}

/// The entry size of a PLT section: its `sh_entsize` when that is a size
/// PLTs have (8 or 16), else `default_size`.
fn entry_size(
    file: &object::File<'_>,
    section: &object::Section<'_, '_>,
    default_size: u64,
) -> u64 {
    use object::read::elf::SectionHeader;
    let object::File::Elf64(elf_file) = file else {
        return default_size;
    };
    let entsize = elf_file
        .elf_section_table()
        .section(section.index())
        .map(|header| header.sh_entsize(elf_file.endian()));
    match entsize {
        Ok(size @ (8 | 16)) => size,
        _ => default_size,
    }
}

/// The GOT slot svma an entry starting at `svma` jumps through:
/// `[endbr64] [bnd] jmp *disp32(%rip)` at the entry's start; `None` for
/// anything else (PLT0, IBT's lazy `.plt` entries, padding).
pub(crate) fn jump_slot(entry: &[u8], svma: u64) -> Option<u64> {
    let mut at = 0usize;
    if entry.starts_with(&ENDBR64) {
        at += ENDBR64.len();
    }
    if entry.get(at) == Some(&0xf2) {
        at += 1;
    }
    if entry.get(at..at + 2)? != [0xff, 0x25] {
        return None;
    }
    let disp: [u8; 4] = entry.get(at + 2..at + 6)?.try_into().ok()?;
    let next = svma.checked_add(at as u64 + 6)?;
    Some(next.wrapping_add_signed(i64::from(i32::from_le_bytes(disp))))
}

/// GOT slot svma → the raw name of the function its dynamic relocation
/// binds (`JUMP_SLOT`, `GLOB_DAT`, `IRELATIVE`, named from `symbols`).
fn got_slot_names(file: &object::File<'_>, symbols: &[Sym], names: &Names) -> HashMap<u64, String> {
    let Some(relocations) = file.dynamic_relocations() else {
        return HashMap::new();
    };
    let dynsym = file.dynamic_symbol_table();
    let mut resolvers: Option<HashMap<u64, &str>> = None;
    let mut out = HashMap::new();
    for (slot, relocation) in relocations {
        let RelocationFlags::Elf { r_type } = relocation.flags() else {
            continue;
        };
        let name = match (r_type, relocation.target()) {
            (elf::R_X86_64_JUMP_SLOT | elf::R_X86_64_GLOB_DAT, RelocationTarget::Symbol(index)) => {
                let Some(symbol) = dynsym.as_ref().and_then(|t| t.symbol_by_index(index).ok())
                else {
                    continue;
                };
                match symbol.name() {
                    Ok(name) if !name.is_empty() => name.to_string(),
                    _ => continue,
                }
            }
            (elf::R_X86_64_IRELATIVE, _) => {
                let resolver = relocation.addend() as u64;
                let names = resolvers.get_or_insert_with(|| function_aliases(symbols, names));
                match names.get(&resolver) {
                    Some(name) => name.to_string(),
                    None => format!("*ABS*+{resolver:#x}"),
                }
            }
            _ => continue,
        };
        out.insert(slot, name);
    }
    out
}

/// svma → the name of the best-ranked function symbol (perf's rank)
/// starting there. (IFUNCs included.)
fn function_aliases<'a>(symbols: &'a [Sym], names: &'a Names) -> HashMap<u64, &'a str> {
    let mut best: HashMap<u64, &Sym> = HashMap::new();
    for symbol in symbols.iter().filter(|s| s.kind == SymKind::Function) {
        match best.get(&symbol.svma) {
            Some(old) if perf_alias_rank(old, names) <= perf_alias_rank(symbol, names) => {}
            _ => {
                best.insert(symbol.svma, symbol);
            }
        }
    }
    best.into_iter()
        .map(|(svma, symbol)| (svma, names.get(&symbol.name)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each PLT layout's jump is decoded to its slot; PLT0, IBT's lazy
    /// entries and truncated entries name none.
    #[test]
    fn jump_slot_table() {
        let cases: &[(&str, &[u8], u64, Option<u64>)] = &[
            // .plt entry: jmp *0x2fe2(%rip) at 0x1030 -> 0x1036 + 0x2fe2.
            (
                "lazy",
                &[0xff, 0x25, 0xe2, 0x2f, 0, 0, 0x68, 0, 0, 0, 0],
                0x1030,
                Some(0x4018),
            ),
            // .plt.sec: endbr64; jmp *0x2f86(%rip) at 0x1070.
            (
                "ibt",
                &[0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x25, 0x86, 0x2f, 0, 0],
                0x1070,
                Some(0x4000),
            ),
            // -z bndplt / MPX: endbr64; bnd jmp.
            (
                "bnd",
                &[0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0x10, 0, 0, 0],
                0x1000,
                Some(0x101b),
            ),
            // A negative displacement.
            (
                "backwards",
                &[0xff, 0x25, 0xf0, 0xff, 0xff, 0xff],
                0x1000,
                Some(0x0ff6),
            ),
            // PLT0: push GOT+8.
            ("plt0", &[0xff, 0x35, 0xca, 0x2f, 0, 0], 0x1020, None),
            // IBT .plt: endbr64; push $0.
            (
                "ibt lazy",
                &[0xf3, 0x0f, 0x1e, 0xfa, 0x68, 0, 0, 0, 0],
                0x1030,
                None,
            ),
            ("truncated", &[0xff, 0x25, 0x10, 0], 0x1000, None),
            ("empty", &[], 0x1000, None),
            ("wraps", &[0xff, 0x25, 0, 0, 0, 0], u64::MAX, None),
        ];
        for &(what, entry, svma, want) in cases {
            assert_eq!(jump_slot(entry, svma), want, "{what}");
        }
    }
}
