//! Which relocations wrote each page the loader copied at start-up. A page
//! is credited to the kind of relocation whose targets lie on it (from the
//! ELF's tables), told apart, where kinds share a page, by the loader
//! function that took the fault: crediting every copied page to RELATIVE
//! relocations called six lazily bound `.got.plt` pages of libisl "316
//! RELATIVE relocations on 7 pages of .data".

use std::collections::{BTreeMap, BTreeSet};

use pfprof_symbolize::{PageRelocations, RelocType};
use serde::Serialize;

/// What the loader did to a page, as far as the advice differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RelocationKind {
    /// RELATIVE (and RELR): the load bias added to pointers in data.
    Relative,
    /// JUMP_SLOT of a lazily bound object: `.got.plt` rebased at start-up
    /// and rewritten at each function's first call.
    LazyBinding,
    /// Relocations that look a symbol up (GLOB_DAT, 64, COPY, TPOFF64,
    /// DTPMOD64, IRELATIVE, JUMP_SLOT under BIND_NOW, ...).
    Symbol,
}

/// The loader code that took a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LoaderWrite {
    /// A function that does one kind of relocation.
    Kind(RelocationKind),
    /// One that does them all (`_dl_relocate_object` when ld.so has no
    /// debug information to name its inlined callees).
    Any,
}

/// ld.so's relocation functions (glibc), inlined ones included, matched as
/// prefixes in this order: the specific ones come before the names they
/// start with.
const LOADER_FUNCTIONS: &[(&str, Option<RelocationKind>)] = &[
    ("elf_machine_rela_relative", Some(RelocationKind::Relative)),
    ("elf_machine_rel_relative", Some(RelocationKind::Relative)),
    ("elf_dynamic_do_Relr", Some(RelocationKind::Relative)),
    ("elf_machine_lazy_rel", Some(RelocationKind::LazyBinding)),
    ("_dl_fixup", Some(RelocationKind::LazyBinding)),
    ("_dl_profile_fixup", Some(RelocationKind::LazyBinding)),
    ("_dl_runtime_resolve", Some(RelocationKind::LazyBinding)),
    ("_dl_runtime_profile", Some(RelocationKind::LazyBinding)),
    ("elf_machine_rel", Some(RelocationKind::Symbol)),
    ("_dl_relocate_object", None),
    ("elf_dynamic_do_Rel", None),
    ("_dl_relocate_static_pie", None),
];

fn loader_function(function: &str) -> Option<Option<RelocationKind>> {
    LOADER_FUNCTIONS
        .iter()
        .find(|(name, _)| function.starts_with(name))
        .map(|&(_, kind)| kind)
}

/// The innermost loader function among a fault's frames (given innermost
/// first); None when the loader's relocation code did not take it.
pub fn loader_write<'a>(innermost_first: impl IntoIterator<Item = &'a str>) -> Option<LoaderWrite> {
    innermost_first
        .into_iter()
        .find_map(loader_function)
        .map(|kind| kind.map_or(LoaderWrite::Any, LoaderWrite::Kind))
}

/// The kind of a relocation type.
pub fn kind_of(r_type: RelocType, bind_now: bool) -> RelocationKind {
    match r_type {
        RelocType::RELATIVE => RelocationKind::Relative,
        RelocType::JUMP_SLOT if !bind_now => RelocationKind::LazyBinding,
        _ => RelocationKind::Symbol,
    }
}

/// What wrote `page`: the kind of the loader function that took its fault
/// when the page holds relocations of that kind, else the kind with the
/// most relocations on the page; None when it holds none.
pub fn credit(
    write: LoaderWrite,
    page: &PageRelocations,
    bind_now: bool,
) -> Option<RelocationKind> {
    let mut counts: BTreeMap<RelocationKind, u64> = BTreeMap::new();
    for (r_type, n) in &page.by_type {
        *counts.entry(kind_of(*r_type, bind_now)).or_default() += n;
    }
    if let LoaderWrite::Kind(kind) = write {
        if counts.contains_key(&kind) {
            return Some(kind);
        }
    }
    // The most relocations; on a tie the first kind (the map's order).
    let most = counts.values().copied().max()?;
    counts
        .into_iter()
        .find(|&(_, n)| n == most)
        .map(|(kind, _)| kind)
}

/// The pages of one object credited to one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credited {
    /// svma pages (`svma >> 12`).
    pub pages: BTreeSet<u64>,
    /// Sections among them.
    pub sections: BTreeSet<String>,
    /// Relocations on them, by type.
    pub by_type: BTreeMap<RelocType, u64>,
}

/// Credits an object's loader-written COW pages (page → the loader code
/// that took the fault there) to kinds of relocation, from what is on each
/// page (`page_writes`). Pages without relocations are nobody's.
pub fn credit_pages(
    written: &BTreeMap<u64, LoaderWrite>,
    page_writes: &BTreeMap<u64, PageRelocations>,
    bind_now: bool,
) -> BTreeMap<RelocationKind, Credited> {
    let mut out: BTreeMap<RelocationKind, Credited> = BTreeMap::new();
    for (&page, &write) in written {
        let Some(on_page) = page_writes.get(&page) else {
            continue;
        };
        let Some(kind) = credit(write, on_page, bind_now) else {
            continue;
        };
        let credited = out.entry(kind).or_default();
        credited.pages.insert(page);
        credited.sections.extend(on_page.sections.iter().cloned());
        for (r_type, n) in &on_page.by_type {
            *credited.by_type.entry(*r_type).or_default() += n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GLOB_DAT: RelocType = RelocType(6);
    const R_64: RelocType = RelocType(1);

    fn page(types: &[(RelocType, u64)], sections: &[&str]) -> PageRelocations {
        PageRelocations {
            by_type: types.iter().copied().collect(),
            sections: sections.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn innermost_loader_function_decides() {
        use RelocationKind::*;
        let cases: &[(&[&str], Option<LoaderWrite>)] = &[
            (&["main"], None),
            (
                &[
                    "elf_machine_rela_relative",
                    "elf_dynamic_do_Rela",
                    "_dl_relocate_object",
                ],
                Some(LoaderWrite::Kind(Relative)),
            ),
            (
                &["elf_machine_lazy_rel", "_dl_relocate_object"],
                Some(LoaderWrite::Kind(LazyBinding)),
            ),
            // COPY: memcpy is not the loader's; its caller is.
            (
                &[
                    "__memcpy_avx_unaligned_erms",
                    "elf_machine_rela",
                    "_dl_relocate_object",
                ],
                Some(LoaderWrite::Kind(Symbol)),
            ),
            (
                &["_dl_fixup", "_dl_runtime_resolve_xsavec"],
                Some(LoaderWrite::Kind(LazyBinding)),
            ),
            (
                &["elf_dynamic_do_Relr", "_dl_relocate_object"],
                Some(LoaderWrite::Kind(Relative)),
            ),
            // No debug information for ld.so: only the outer function.
            (
                &["_dl_relocate_object", "_dl_start"],
                Some(LoaderWrite::Any),
            ),
        ];
        for (frames, want) in cases {
            assert_eq!(loader_write(frames.iter().copied()), *want, "{frames:?}");
        }
    }

    #[test]
    fn pages_go_to_what_is_on_them() {
        use RelocationKind::*;
        let got_plt = page(&[(RelocType::JUMP_SLOT, 512)], &[".got.plt"]);
        let mixed = page(
            &[(RelocType::RELATIVE, 3), (GLOB_DAT, 40)],
            &[".got", ".data"],
        );
        // Whatever the loader function, a page of JUMP_SLOTs is lazy binding.
        assert_eq!(
            credit(LoaderWrite::Kind(Relative), &got_plt, false),
            Some(LazyBinding)
        );
        assert_eq!(credit(LoaderWrite::Any, &got_plt, false), Some(LazyBinding));
        // Under BIND_NOW, JUMP_SLOTs are bound at start-up like GLOB_DAT.
        assert_eq!(credit(LoaderWrite::Any, &got_plt, true), Some(Symbol));
        // Kinds sharing a page: the function that took the fault tells.
        assert_eq!(
            credit(LoaderWrite::Kind(Relative), &mixed, false),
            Some(Relative)
        );
        assert_eq!(
            credit(LoaderWrite::Kind(Symbol), &mixed, false),
            Some(Symbol)
        );
        // An unnamed loader function: the most relocations.
        assert_eq!(credit(LoaderWrite::Any, &mixed, false), Some(Symbol));
        assert_eq!(credit(LoaderWrite::Any, &page(&[], &[]), false), None);
    }

    #[test]
    fn credited_pages_sum_what_is_on_them() {
        let page_writes: BTreeMap<u64, PageRelocations> = [
            (1, page(&[(RelocType::RELATIVE, 512)], &[".data.rel.ro"])),
            (
                2,
                page(
                    &[(RelocType::RELATIVE, 500), (R_64, 1)],
                    &[".data.rel.ro", ".init_array"],
                ),
            ),
            (3, page(&[(RelocType::JUMP_SLOT, 300)], &[".got.plt"])),
        ]
        .into_iter()
        .collect();
        let written: BTreeMap<u64, LoaderWrite> = [
            (1, LoaderWrite::Any),
            (2, LoaderWrite::Any),
            (3, LoaderWrite::Any),
            // A copied page without relocations (the loader wrote no
            // relocation there): nobody's.
            (9, LoaderWrite::Any),
        ]
        .into_iter()
        .collect();
        let got = credit_pages(&written, &page_writes, false);
        let relative = &got[&RelocationKind::Relative];
        assert_eq!(relative.pages, [1, 2].into_iter().collect());
        assert_eq!(
            relative
                .sections
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            [".data.rel.ro", ".init_array"]
        );
        assert_eq!(relative.by_type[&RelocType::RELATIVE], 1012);
        assert_eq!(relative.by_type[&R_64], 1);
        let lazy = &got[&RelocationKind::LazyBinding];
        assert_eq!(lazy.pages, [3].into_iter().collect());
        assert_eq!(got.len(), 2);
    }
}
