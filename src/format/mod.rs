//! The recording format: pfprof writes and reads perf's `perf.data`
//! container (PERFILE2), so perf reads pfprof's recordings and pfprof reads
//! perf's; and the output directory a recording lives in.

pub mod buildid_cache;
pub mod call_graph;
pub mod compressed;
pub mod decode;
pub mod events;
pub mod jitmaps;
pub mod outdir;
pub mod perf_compat;
pub mod perf_data;
pub mod recorder;
pub mod records;
