//! The entry points of the fuzz targets (`fuzz/`), kept in the library so the
//! corpus replay test (`tests/fuzz_replay.rs`) runs exactly what the fuzzers
//! run, on stable and without libFuzzer.

use crate::analysis::{analyze_image, AnalyzeOptions};

/// A recording on arbitrary bytes: decode and analyse it, as it is and as
/// `--partial` repairs it. Errors are fine; panics, aborts and huge
/// allocations are not. Symbolizing the files a recording names is left to
/// the `elf` target: here it would only re-read the same system libraries
/// (150 ms an input).
pub fn recording(data: &[u8]) {
    for partial in [false, true] {
        let options = AnalyzeOptions {
            kernel: true,
            partial,
            ..AnalyzeOptions::default()
        };
        let _ = analyze_image(data, "fuzz.data", options);
    }
}

/// An ELF file on arbitrary bytes: everything pfprof-symbolize reads from a
/// module, at a few file offsets spread over the image, and the plain copy
/// of its compressed sections.
pub fn elf(data: &[u8]) {
    let len = data.len() as u64;
    let mut offsets: Vec<u64> = (0..8).map(|k| len / 8 * k).collect();
    offsets.extend([0x1000, 0x1040, 0x1130, 0x2000, 0x4000, u64::MAX]);
    let _ = pfprof_symbolize::inspect_image(data, &offsets);
    // What `record` does to a compressed debug file for the build-id cache.
    let _ = pfprof_symbolize::with_plain_sections(data);
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`.
    fn inputs(target: &str) -> Vec<std::path::PathBuf> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
        let mut files = Vec::new();
        for dir in ["corpus", "regressions"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
                continue;
            };
            files.extend(entries.map(|e| e.unwrap().path()).filter(|p| p.is_file()));
        }
        files.sort();
        files
    }

    /// CI replays what the fuzzers found and kept, deterministically and
    /// without fuzzing: no input may panic (a panic fails the test, naming
    /// nothing but the input printed first).
    #[test]
    fn replays_recording_corpus() {
        let files = inputs("decode");
        assert!(files.len() >= 5, "the decode corpus is missing: {files:?}");
        for file in files {
            eprintln!("decode: {}", file.display());
            super::recording(&std::fs::read(&file).unwrap());
        }
    }

    /// The same for the ELF reader.
    #[test]
    fn replays_elf_corpus() {
        let files = inputs("elf");
        assert!(files.len() >= 5, "the elf corpus is missing: {files:?}");
        for file in files {
            eprintln!("elf: {}", file.display());
            super::elf(&std::fs::read(&file).unwrap());
        }
    }
}
