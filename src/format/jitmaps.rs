//! JIT perf maps kept with a recording. A JIT (node `--perf-basic-prof`,
//! the JVM's perf-map-agent, .NET, Python `-X perf`) names its generated
//! code in `/tmp/perf-PID.map`, which grows while the process runs and may
//! be overwritten by a later process with the same pid. `record` copies the
//! map of each process with JIT frames, once the recording has stopped,
//! into the output directory under the same name (`DIR/perf-PID.map`), so
//! that `report` later reads the recording's copy and needs nothing in
//! `/tmp`. Only perf's own recordings (`report -i perf.data`) are named
//! from `/tmp`, as `perf report` does.
//!
//! A map is read only when it is a regular file reached without a link,
//! at most [`MAX_BYTES`], owned by root, pfprof's user or the user who ran
//! `sudo pfprof` (perf reads only maps owned by the user or root: anyone
//! may write `/tmp`); a launched command's map must also have been written
//! since the recording started (an older one belongs to an earlier process
//! with the same pid).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use pfprof_symbolize::{read_perf_map_file, PerfMap, PerfMapError, PerfMapLimits};
use rustc_hash::FxHashMap;

use crate::format::outdir::{perf_map_name, OutDir};

/// The largest perf map read or kept, in bytes (a large JVM's map is tens
/// of megabytes).
pub const MAX_BYTES: u64 = 256 << 20;

/// Where a process writes its perf map.
const TMP_DIR: &str = "/tmp";

/// The limits of [`read_perf_map_file`]: [`MAX_BYTES`], and the owners
/// pfprof trusts.
fn limits() -> PerfMapLimits {
    PerfMapLimits {
        max_bytes: MAX_BYTES,
        owners: crate::user::trusted_owners(),
    }
}

/// Why a perf map was not used or not kept (the report warns of it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JitMapProblem {
    /// It could not be copied into the recording directory.
    NotKept {
        /// The map.
        path: PathBuf,
        /// The error's text.
        error: String,
    },
    /// It was not read: not a regular file, too large, not trusted, ...
    Refused {
        /// The map.
        path: PathBuf,
        /// Why (the reader's sentence).
        error: String,
    },
    /// Some of its lines did not parse and were skipped.
    Malformed {
        /// The map.
        path: PathBuf,
        /// How many.
        lines: u64,
    },
}

/// Why the map at `path` was not used.
fn refused(path: &Path, error: &PerfMapError) -> JitMapProblem {
    JitMapProblem::Refused {
        path: path.to_path_buf(),
        error: error.to_string(),
    }
}

/// Copies the `/tmp` perf map of each of `pids` into `out_dir`; with
/// `since` (a launched command), only maps modified since then. Returns
/// why maps that exist were not kept.
pub fn keep(out_dir: &OutDir, pids: &[i32], since: Option<SystemTime>) -> Vec<JitMapProblem> {
    let limits = limits();
    let mut warnings = Vec::new();
    for &pid in pids {
        let source = Path::new(TMP_DIR).join(perf_map_name(pid));
        match read_fresh(&source, &limits, since) {
            Ok(Some(bytes)) => {
                if let Err(e) = out_dir.write(&perf_map_name(pid), &bytes) {
                    warnings.push(JitMapProblem::NotKept {
                        path: source,
                        error: e.to_string(),
                    });
                }
            }
            Ok(None) | Err(PerfMapError::Missing) => {}
            Err(e) => warnings.push(refused(&source, &e)),
        }
    }
    warnings
}

/// The bytes of the map at `path`, `None` when it was last written before
/// `since`.
fn read_fresh(
    path: &Path,
    limits: &PerfMapLimits,
    since: Option<SystemTime>,
) -> Result<Option<Vec<u8>>, PerfMapError> {
    let bytes = read_perf_map_file(path, limits)?;
    if let Some(since) = since {
        let meta = std::fs::symlink_metadata(path)?;
        let written = SystemTime::UNIX_EPOCH
            + std::time::Duration::new(meta.mtime().max(0) as u64, meta.mtime_nsec() as u32);
        if written < since {
            return Ok(None);
        }
    }
    Ok(Some(bytes))
}

/// The `/tmp` perf map of a process still running (for `record --stream`,
/// which names JIT frames as they fault), when it was written since
/// `since`; `None` when there is none or it is not to be trusted.
pub fn read_live(pid: i32, since: Option<SystemTime>) -> Option<PerfMap> {
    let path = Path::new(TMP_DIR).join(perf_map_name(pid));
    let bytes = read_fresh(&path, &limits(), since).ok()??;
    Some(PerfMap::parse(&bytes))
}

/// The size of the `/tmp` perf map of `pid` (it grows as the JIT names
/// more code: a changed size is worth a new read).
pub fn live_size(pid: i32) -> Option<u64> {
    let path = Path::new(TMP_DIR).join(perf_map_name(pid));
    std::fs::symlink_metadata(path).ok().map(|m| m.len())
}

/// The perf maps of `pids`: the recording directory's copies, or with
/// `from_tmp` (a recording perf made) the maps in `/tmp`. Returns the maps
/// and why maps that exist were not used.
pub fn load(
    recording_dir: &Path,
    pids: &[i32],
    from_tmp: bool,
) -> (FxHashMap<i32, PerfMap>, Vec<JitMapProblem>) {
    let limits = limits();
    let dir: PathBuf = if from_tmp {
        PathBuf::from(TMP_DIR)
    } else {
        recording_dir.to_path_buf()
    };
    let mut maps = FxHashMap::default();
    let mut warnings = Vec::new();
    for &pid in pids {
        let path = dir.join(perf_map_name(pid));
        match read_perf_map_file(&path, &limits) {
            Ok(bytes) => {
                let map = PerfMap::parse(&bytes);
                if map.malformed_lines() > 0 {
                    warnings.push(JitMapProblem::Malformed {
                        path: path.clone(),
                        lines: map.malformed_lines(),
                    });
                }
                maps.insert(pid, map);
            }
            Err(PerfMapError::Missing) => {}
            Err(e) => warnings.push(refused(&path, &e)),
        }
    }
    (maps, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A map written before `since` belongs to an earlier process.
    #[test]
    fn stale_maps_are_not_kept() {
        let dir = crate::test_dir("jitmaps");
        let path = dir.join("perf-1.map");
        std::fs::write(&path, b"1000 10 f\n").unwrap();
        let limits = limits();
        let past = SystemTime::now() - std::time::Duration::from_secs(60);
        let future = SystemTime::now() + std::time::Duration::from_secs(60);
        assert!(read_fresh(&path, &limits, Some(past)).unwrap().is_some());
        assert!(read_fresh(&path, &limits, None).unwrap().is_some());
        assert!(read_fresh(&path, &limits, Some(future)).unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
