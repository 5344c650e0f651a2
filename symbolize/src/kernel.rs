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
        for line in text.lines() {
            let mut fields = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(avma) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            let name = match fields.next() {
                Some(module) => format!("{name} {module}"),
                None => name.to_string(),
            };
            symbols.push((avma, name));
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
}
