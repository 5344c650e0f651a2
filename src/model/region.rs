//! What kind of memory a fault's target is: the report's tables and the
//! start-up report both name it.

use serde::Serialize;

/// What kind of memory a fault's target is. The variants are in the order
/// of their names: rows sort as they did when the region was a string.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Region {
    /// Anonymous memory, including a `.bss` tail past the file's pages.
    Anon,
    /// A file's pages.
    File,
    /// `[heap]`.
    Heap,
    /// `[vdso]`, `[vvar]` and the like.
    Special,
    /// `[stack]`.
    Stack,
    /// No mapping known.
    Unknown,
}

impl Region {
    /// As in report.json.
    pub fn name(self) -> &'static str {
        match self {
            Region::Anon => "anon",
            Region::File => "file",
            Region::Heap => "heap",
            Region::Special => "special",
            Region::Stack => "stack",
            Region::Unknown => "unknown",
        }
    }
}

impl std::fmt::Display for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // pad: tables set a width.
        f.pad(self.name())
    }
}
