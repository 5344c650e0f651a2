//! pfprof: a Linux page-fault profiler (the library behind the `pfprof`
//! binary; fuzz targets and tests reach the stages through it).
//!
//! The modules below are declared in the order data flows through them,
//! and a module imports only from its own stage or an earlier one
//! (`tests/integration/layout.rs` checks every `use crate::…`):
//!
//! 1. [`sys`], [`text`], [`error`], [`user`]: the base (syscalls and
//!    `/proc`, text formatting, errors, the invoking user).
//! 2. [`space`]: a process's mappings, the one model of an address space
//!    that the unwinder and the analysis read.
//! 3. [`unwind`]: registers + a stack copy + CFI → return addresses; a
//!    library that recording (live) and analysis (perf's dwarf files) call.
//! 4. [`mod@format`]: the perf.data container: write, read, validate, repair,
//!    and the output directory that holds it.
//! 5. [`record`]: perf events, ring buffers → `pfprof.data`.
//! 6. [`analysis`]: replay of a recording: address spaces over time,
//!    classes, interned raw stacks, start-up windows, latency, the
//!    resident-page ledger.
//! 7. [`model`]: symbolization of each unique address once, and the one
//!    symbolized profile every output reads.
//! 8. [`output`]: one small module per output (folded stacks, flame graphs,
//!    timeline, report.txt, report.json, pprof, stream, diff).
//! 9. [`commands`]: the face, a module per subcommand, which wires stages
//!    together (a recording on disk → the model, the live stream, the
//!    intervals of `record --interval`, the live view, the build-id cache
//!    and `archive`); `report` and `flamegraph` replay a recording through
//!    the same path `record` takes after recording.

pub mod error;
pub mod sys;
pub mod text;
pub mod user;

pub mod space;

pub mod unwind;

pub mod format;

pub mod record;

pub mod analysis;

pub mod model;

pub mod output;

pub mod commands;
pub mod fuzzing;

/// A fresh, empty directory for a unit test: `$TMPDIR/pfprof-NAME-PID`
/// (each test its own NAME: the tests of one binary run in parallel), what
/// an earlier run with the same pid left there removed first.
#[cfg(test)]
pub(crate) fn test_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pfprof-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// For model tests: a reproducible stream of numbers from `seed` (xorshift,
/// nonzero seed), the same on every run.
#[cfg(test)]
pub(crate) fn test_numbers(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
