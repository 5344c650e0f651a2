//! What a lookup answers: a code site and its frames, a data target,
//! or the reason there is none.

use std::fmt;

/// Why an address got no answer. A missing *symbol* is a normal outcome
/// (e.g. stripped code, padding), reported as [`Reason::NoSymbol`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// The file does not exist or cannot be read.
    MissingFile,
    /// The file is not an ELF file, or is truncated or corrupt.
    NotElf,
    /// The file's build-id is not the one recorded: it was replaced.
    BuildIdMismatch {
        /// The build-id recorded by pfprof.
        expected: Vec<u8>,
        /// The build-id of the file now on disk, if it has one.
        found: Option<Vec<u8>>,
    },
    /// The file offset lies in no PT_LOAD segment.
    NotInSegment,
    /// No symbol or debug information names the address.
    NoSymbol,
    /// The file is valid ELF but of a kind this request does not support
    /// (relocations: anything but 64-bit little-endian x86_64).
    Unsupported,
}

/// Bytes in lower-case hex (build-ids, as readelf and perf print them).
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::MissingFile => f.write_str("The file is missing or cannot be read."),
            Reason::NotElf => f.write_str("The file is not a valid ELF file."),
            Reason::BuildIdMismatch { expected, found } => match found {
                Some(found) => write!(
                    f,
                    "The file's build-id is {} but {} was recorded: the process mapped another file under this path (replaced since, or seen through another root or mount namespace).",
                    hex(found),
                    hex(expected)
                ),
                None => write!(
                    f,
                    "The file has no build-id but {} was recorded: the process mapped another file under this path (replaced since, or seen through another root or mount namespace).",
                    hex(expected)
                ),
            },
            Reason::NotInSegment => {
                f.write_str("The file offset is not inside any loadable segment of the file.")
            }
            Reason::NoSymbol => f.write_str("No symbol or debug information covers the address."),
            Reason::Unsupported => {
                f.write_str("The file's architecture or ELF class is not supported for this request.")
            }
        }
    }
}

impl std::error::Error for Reason {}

/// A symbolized code address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeSite {
    /// The ELF virtual address the file offset maps to.
    pub svma: u64,
    /// Innermost first: inlined frames first, the real (outer) function
    /// last. Never empty.
    pub frames: Vec<Frame>,
}

/// One (possibly inlined) function frame of a [`CodeSite`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Function name, demangled unless [`Options::demangle`] is off. Never
    /// empty.
    pub function: String,
    /// Full source path, when DWARF has a line table for the address.
    pub file: Option<String>,
    /// Source line, when known.
    pub line: Option<u32>,
    /// True for inlined frames (every frame but the last).
    pub inlined: bool,
}

/// A resolved data address (the target of a page fault).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataTarget {
    /// The ELF virtual address the file offset maps to.
    pub svma: u64,
    /// The SHF_ALLOC section holding it (`.bss`, `.data`, `.rodata`, …).
    /// A mapped address in no section is named for what it is:
    /// `[elf-header]`, `[program-headers]`, `[padding]` (between or after
    /// sections), or `.bss` for the tail of the last file page in front of
    /// `.bss`, which the kernel or ld.so zeroes for it. `None` when the file
    /// has no section headers.
    pub section: Option<String>,
    /// The data symbol covering it, demangled unless asked not to.
    pub symbol: Option<String>,
    /// Offset of `svma` from the symbol's start (0 without a symbol).
    pub symbol_offset: u64,
}
