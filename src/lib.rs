//! pfprof: a Linux page-fault profiler (the library behind the `pfprof`
//! binary; fuzz targets and tests reach the stages through it).
//!
//! Data flows one way: `record` (syscalls, ring buffers → pfprof.data) →
//! `decode` (perf.data records) → `process` (address spaces over time) →
//! `classify` → `stacks` (interned raw stacks) → `resolve` (symbolize each
//! unique address once) → `render` (folded, SVG, text, JSON), `pprof`
//! (`profile.pb.gz`), `html` (`index.html`, over the report and the SVGs). `report` and
//! `flamegraph` replay a recording through the same path that `record` uses.

pub mod analyze;
pub mod classify;
pub mod cli;
pub mod decode;
pub mod diff;
pub mod error;
pub mod foreign;
pub mod fuzzing;
pub mod html;
pub mod latency;
pub mod outdir;
pub mod perf_compressed;
pub mod perf_data;
pub mod pprof;
pub mod process;
pub mod record;
pub mod render;
pub mod report;
pub mod resolve;
pub mod stacks;
pub mod startup;
pub mod stream;
pub mod timeline;
pub mod unwind;
pub mod user;
