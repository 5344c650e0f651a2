//! Kernel symbols from `/proc/kallsyms`.

use std::path::Path;

/// Kernel symbols read from `/proc/kallsyms`, sorted by address.
///
/// Kernel addresses are process-independent (avma == svma of the running
/// kernel), so lookups take the avma as recorded.
#[derive(Debug, Clone)]
pub struct KernelSymbols {
    /// (avma, name) sorted by avma; module symbols are named `name [module]`.
    symbols: Vec<(u64, String)>,
}

impl KernelSymbols {
    /// Reads `/proc/kallsyms`. `None` when it cannot be read or when every
    /// address is zero (`kernel.kptr_restrict` hides them from this user).
    pub fn load() -> Option<Self> {
        Self::from_path(Path::new("/proc/kallsyms"))
    }

    /// Reads a file in `/proc/kallsyms` format.
    pub fn from_path(path: &Path) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(path).ok()?)
    }

    /// Parses `/proc/kallsyms` text: `ADDR TYPE NAME [MODULE]` per line.
    /// Only text symbols (types `t`, `T`, `w`, `W`) are kept, since only code
    /// addresses are looked up. `None` when no symbol has a non-zero address.
    pub fn parse(text: &str) -> Option<Self> {
        let mut symbols = Vec::new();
        for line in kallsyms_lines(text) {
            if !matches!(line.kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let name = match line.module {
                Some(module) => format!("{} {module}", line.name),
                None => line.name.to_string(),
            };
            symbols.push((line.avma, name));
        }
        if symbols.iter().all(|(avma, _)| *avma == 0) {
            return None;
        }
        symbols.sort_by_key(|(avma, _)| *avma);
        Some(KernelSymbols { symbols })
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Whether there are no symbols (never true for a loaded table).
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The symbol at or before `avma` and the offset of `avma` from it.
    /// `None` below the first symbol. kallsyms has no sizes, so an address
    /// past the last symbol's end still resolves to it.
    pub fn lookup(&self, avma: u64) -> Option<(&str, u64)> {
        let index = self.symbols.partition_point(|(a, _)| *a <= avma);
        let (start, name) = self.symbols.get(index.checked_sub(1)?)?;
        Some((name.as_str(), avma - start))
    }
}

/// One line of `/proc/kallsyms`: `ADDR TYPE NAME [MODULE]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KallsymsLine<'a> {
    /// Where the symbol is; kernel addresses are the same in every process.
    pub avma: u64,
    /// The `nm`-style type letter (`T` global text, `t` local text, ...).
    pub kind: &'a str,
    /// The symbol's name.
    pub name: &'a str,
    /// `[module]` for a symbol of a loaded module, brackets kept.
    pub module: Option<&'a str>,
}

/// The well-formed lines of `/proc/kallsyms` text; a line without an
/// address, type and name, or with an address that is not hex, is skipped.
pub fn kallsyms_lines(text: &str) -> impl Iterator<Item = KallsymsLine<'_>> {
    text.lines().filter_map(|line| {
        let mut fields = line.split_ascii_whitespace();
        let (addr, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
        Some(KallsymsLine {
            avma: u64::from_str_radix(addr, 16).ok()?,
            kind,
            name,
            module: fields.next(),
        })
    })
}

/// Start and end of the kernel's text (`_text`, `_etext`); None when the
/// addresses are hidden (shown as zeros). Reads only as far as both names,
/// so record's start does not build the whole symbol table.
pub fn kernel_text(kallsyms: &str) -> Option<(u64, u64)> {
    let (mut start, mut end) = (None, None);
    for line in kallsyms_lines(kallsyms) {
        let slot = match line.name {
            "_text" => &mut start,
            "_etext" => &mut end,
            _ => continue,
        };
        *slot = Some(line.avma);
        if start.is_some() && end.is_some() {
            break;
        }
    }
    let start = start.filter(|&s| s != 0)?;
    // Without `_etext`, the map reaches the end of the address space, as
    // perf's own does before it knows the modules.
    let end = end.filter(|&e| e > start).unwrap_or(u64::MAX);
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff81000000 T startup_64
ffffffff81001000 t do_one_initcall
ffffffff82000000 D some_data
ffffffffc0000000 t ext4_fill_super\t[ext4]
garbage line
";

    #[test]
    fn lookup_table() {
        let syms = KernelSymbols::parse(TEXT).expect("symbols");
        assert_eq!(syms.len(), 4);
        let cases: &[(u64, Option<(&str, u64)>)] = &[
            (0xffff_ffff_80ff_ffff, None),
            (0xffff_ffff_8100_0000, Some(("startup_64", 0))),
            (0xffff_ffff_8100_1010, Some(("do_one_initcall", 0x10))),
            // Data symbols are dropped: resolves to the preceding text symbol.
            (0xffff_ffff_8200_0000, Some(("do_one_initcall", 0xfff000))),
            (0xffff_ffff_c000_0004, Some(("ext4_fill_super [ext4]", 4))),
        ];
        for &(avma, want) in cases {
            assert_eq!(syms.lookup(avma), want, "{avma:#x}");
        }
    }

    #[test]
    fn all_zero_is_none() {
        let hidden = "0000000000000000 T _stext\n0000000000000000 t foo\n";
        assert!(KernelSymbols::parse(hidden).is_none());
        assert!(KernelSymbols::parse("").is_none());
    }

    #[test]
    fn kernel_text_from_kallsyms() {
        let cases = [
            (
                "ffffffff81000000 T _stext\nffffffff81000000 T _text\nffffffff8220bb08 T _etext\n",
                Some((0xffffffff81000000, 0xffffffff8220bb08)),
            ),
            (
                "ffffffff81000000 T _text\n",
                Some((0xffffffff81000000, u64::MAX)),
            ),
            (
                "0000000000000000 T _text\n0000000000000000 T _etext\n",
                None,
            ),
            ("", None),
            ("garbage\nzz T _text\n", None),
        ];
        for (text, want) in cases {
            assert_eq!(kernel_text(text), want, "{text:?}");
        }
    }
}
