//! A recording on disk → the model, the path `record` takes after
//! recording and `report`, `flamegraph` and `diff` take from the start:
//! where the recording is (`-i` names its directory or its file), its
//! replay, its JIT frames named from perf maps, its binaries kept in the
//! build-id cache (`record`), and the symbolized model.

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::analysis;
use crate::commands::cli::AnalysisArgs;
use crate::format::outdir::OutDir;
use crate::model::resolve;
use crate::{error, record};

use super::paths::{build_id_caches, recording_dir};

/// Names the JIT frames of `profile` from the perf maps of the recording
/// at `path` (or `/tmp`'s, for perf's recordings); with `keep_in`
/// (`record`), the maps in `/tmp` are first copied there. `started` is
/// when the analysis began, to tell a launched command's maps from older
/// ones.
pub fn name_jit_frames(
    profile: &mut analysis::Profile,
    path: &Path,
    keep_in: Option<&OutDir>,
    started: std::time::Instant,
) {
    use crate::format::jitmaps;
    let pids = profile.jit_pids();
    if pids.is_empty() {
        return;
    }
    let mut warnings = Vec::new();
    if let Some(out_dir) = keep_in {
        // A launched command's processes started with the recording; a map
        // older than that (less a second for the command's start) is an
        // earlier process's.
        let since = profile
            .meta
            .as_ref()
            .filter(|m| m.mode == crate::format::perf_data::RecordMode::Command)
            .and_then(|m| {
                let ago = std::time::Duration::from_nanos(m.wall_ns)
                    + started.elapsed()
                    + std::time::Duration::from_secs(1);
                std::time::SystemTime::now().checked_sub(ago)
            });
        warnings = jitmaps::keep(out_dir, &pids, since);
    }
    let (maps, more) = jitmaps::load(&recording_dir(path), &pids, profile.meta.is_none());
    warnings.extend(more);
    profile.jit_maps = maps;
    profile.jit_warnings = warnings;
}

/// What `record` keeps with its recording: the JIT perf maps (in its
/// directory) and the binaries with faults or frames (in the build-id
/// cache, unless `--no-buildid-cache`).
pub struct Keep<'a> {
    /// The recording's directory (the perf maps go there).
    pub out_dir: &'a OutDir,
    /// The files held open while recording.
    pub held: Vec<record::HeldFile>,
    /// Executable mappings whose file was not held (the open-file limit).
    pub not_held: usize,
    /// The cache and its size limit in bytes.
    pub cache: Option<(PathBuf, u64)>,
}

/// Copies the binaries `profile` names (and plain copies of their
/// compressed debug files) into the build-id cache; says on
/// stderr what could not be kept.
pub fn keep_binaries(
    profile: &mut analysis::Profile,
    held: &[record::HeldFile],
    root: &Path,
    limit: u64,
    symfs: Option<&Path>,
) {
    use crate::format::buildid_cache::Cache;
    let needed = crate::commands::archive::needed(profile);
    let symbolizer = &mut profile.symbolizer;
    if needed.is_empty() {
        return;
    }
    let mut cache = match Cache::open(root, limit) {
        Ok(cache) => cache,
        Err(e) => {
            eprintln!(
                "pfprof: warning: cannot use the build-id cache {}: {e} (--buildid-dir chooses another, --no-buildid-cache none)",
                root.display()
            );
            return;
        }
    };
    let sources = crate::commands::archive::Sources {
        symfs: symfs.map(Path::to_path_buf),
        caches: Vec::new(),
    };
    let kept = crate::commands::archive::keep(&mut cache, &needed, held, &sources);
    for warning in kept.warnings {
        eprintln!("pfprof: warning: {warning}");
    }
    if let Err(e) = keep_plain_debug_files(&mut cache, &needed, symbolizer) {
        eprintln!(
            "pfprof: warning: cannot keep a debug file in the build-id cache {}: {e}",
            root.display()
        );
    }
}

/// Stores, for each of `needed` whose DWARF is in a separate debug file
/// with compressed sections (Debian's `-dbg` packages), that file with its
/// sections plain as the cache's `debug` entry: once per build, a copy
/// that every later profile maps instead of inflating the DWARF again
/// (libc's: 10 MB, about 20 ms of inflate a run).
fn keep_plain_debug_files(
    cache: &mut crate::format::buildid_cache::Cache,
    needed: &[crate::commands::archive::Needed],
    symbolizer: &mut pfprof_symbolize::Symbolizer,
) -> std::io::Result<()> {
    use crate::format::buildid_cache::Stored;
    for n in needed {
        // Before the copy is made: a debug file is inflated for it.
        if !cache.wants_debug(&n.build_id) {
            continue;
        }
        let info = symbolizer.module_info(Path::new(&n.path), Some(&n.build_id));
        let Some(debug) = info.ok().and_then(|info| info.debug_file.clone()) else {
            continue;
        };
        let Some(plain) = pfprof_symbolize::plain_copy(&debug) else {
            continue; // not compressed (or not readable: lookups say so)
        };
        if cache.store_debug(&n.build_id, &plain)? == Stored::OverLimit {
            break;
        }
    }
    Ok(())
}

/// The model of the recording at `path`: replayed (the whole of a
/// `partial` one's intact part), its JIT frames named, with `keep`
/// (`record`) its perf maps and binaries kept, then symbolized.
pub fn analyze_and_resolve(
    path: &Path,
    analysis: &AnalysisArgs,
    partial: bool,
    keep: Option<Keep<'_>>,
) -> Result<crate::model::Model> {
    // PFPROF_TIMING=1 prints how long each phase took (for benchmarks).
    let timing = std::env::var_os("PFPROF_TIMING").is_some();
    let start = std::time::Instant::now();
    let caches = build_id_caches(path, analysis.buildid_dir.as_deref());
    let options = analysis.analyze_options(partial, caches);
    let mut profile = analysis::analyze(path, options)?;
    // --kernel keeps what the recording holds; without kernel chains it
    // would print the same output as without it. (perf's recordings, which
    // carry no pfprof facts, hold kernel chains unless perf was told not to.)
    if analysis.kernel && profile.meta.as_ref().is_some_and(|m| !m.kernel_callchains) {
        return Err(error::CodedError::new(
            error::exit::CONFIG,
            format!(
                "--kernel: {} holds no kernel frames (it was recorded without --kernel; \
                 `pfprof record --kernel` records them)",
                path.display()
            ),
        )
        .into());
    }
    name_jit_frames(&mut profile, path, keep.as_ref().map(|k| k.out_dir), start);
    if let Some(Keep {
        held,
        not_held,
        cache: Some((root, limit)),
        ..
    }) = &keep
    {
        if *not_held > 0 {
            eprintln!(
                "pfprof: warning: {not_held} executable mappings were not held open (the open-file limit): their files are looked for by path"
            );
        }
        keep_binaries(&mut profile, held, root, *limit, analysis.symfs.as_deref());
    }
    let analyzed = start.elapsed();
    let (resolved, _) = resolve::resolve(profile);
    if timing {
        eprintln!(
            "pfprof: timing: replay+count {analyzed:.2?}, symbolize+model {:.2?}",
            start.elapsed() - analyzed
        );
    }
    Ok(resolved)
}
