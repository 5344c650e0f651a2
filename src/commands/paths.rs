//! Where a recording lives: the file `-i` names (a directory or the data
//! file in it), and the build-id caches its names are read from.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::format::outdir::{OutDir, DATA_FILE};

/// `-i` takes a directory or the data file itself. A directory without a
/// recording is named as such (not as a missing `DIR/pfprof.data`).
pub fn data_path(input: &Path) -> Result<PathBuf> {
    if !input.is_dir() {
        return Ok(input.to_path_buf());
    }
    let path = input.join(DATA_FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        anyhow::bail!(
            "{} is a directory without a recording (no {DATA_FILE} in it)",
            input.display()
        );
    }
    Ok(path)
}

/// The build-id cache: `--buildid-dir`, else `~/.debug`.
pub fn cache_root(buildid_dir: Option<&Path>) -> Option<PathBuf> {
    buildid_dir
        .map(Path::to_path_buf)
        .or_else(crate::format::buildid_cache::default_root)
}

/// The build-id caches names are read from: the recording directory's own
/// (`archive`), then [`cache_root`].
pub fn build_id_caches(recording: &Path, buildid_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut caches = vec![recording_dir(recording)];
    caches.extend(cache_root(buildid_dir));
    caches
}

/// The directory a recording lives in (`-i` takes the directory or the file).
pub fn recording_dir(input: &Path) -> PathBuf {
    if input.is_dir() {
        return input.to_path_buf();
    }
    // `pfprof.data` alone is in the current directory: its parent is "".
    match input.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Where `flamegraph` and `diff` write: `-o DIR`, else the directory of
/// the recording `input` names.
pub fn output_dir(output: Option<&Path>, input: &Path) -> Result<OutDir> {
    let dir = output.map_or_else(|| recording_dir(input), Path::to_path_buf);
    OutDir::open_or_create(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-i` names a directory or its data file; a directory without a
    /// recording says so, and the recording's directory is found either way.
    #[test]
    fn where_a_recording_is() {
        let dir = crate::test_dir("recording");
        let err = data_path(&dir).unwrap_err().to_string();
        assert!(err.contains("a directory without a recording"), "{err}");
        let data = dir.join(DATA_FILE);
        std::fs::write(&data, b"").unwrap();
        assert_eq!(data_path(&dir).unwrap(), data);
        assert_eq!(data_path(&data).unwrap(), data);
        assert_eq!(recording_dir(&dir), dir);
        assert_eq!(recording_dir(&data), dir);
        assert_eq!(recording_dir(Path::new("pfprof.data")), Path::new("."));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
