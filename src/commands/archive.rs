//! What a recording needs to name its code later and elsewhere: the ELF
//! files with faults or frames, copied by build-id into a build-id cache
//! (`format::buildid_cache`). `record` copies them into `~/.debug` (or
//! `--buildid-dir`) from the files it held open while the processes ran
//! (so a deleted or replaced binary, or one seen only in another mount
//! namespace, is the file the process ran), else from their paths when the
//! build-id there is the recorded one. `pfprof archive DIR` copies them
//! from the cache (or the paths) into `DIR/.build-id`, which `report`
//! reads first.

use std::path::{Path, PathBuf};

use super::paths::{build_id_caches, cache_root, data_path, recording_dir};
use crate::analysis::Profile;
use crate::analysis::{self, AnalyzeOptions};
use crate::format::buildid_cache::{Cache, Stored};
use crate::record::HeldFile;
use crate::{error, text};

/// A file the recording names: its recorded path and build-id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Needed {
    /// The path in the recording (the process's view).
    pub path: String,
    /// The recorded build-id.
    pub build_id: Vec<u8>,
}

/// The files with faults or frames that have a build-id, each once (pseudo
/// files such as `[vdso]` are read from memory, not kept).
pub fn needed(profile: &Profile) -> Vec<Needed> {
    let mut out: Vec<Needed> = profile
        .modules_in_use()
        .into_iter()
        .map(|id| profile.processes.modules.get(id))
        .filter(|m| m.is_file())
        .filter_map(|m| {
            Some(Needed {
                path: m.path.clone(),
                build_id: m.build_id.clone().filter(|id| id.len() >= 2)?,
            })
        })
        .collect();
    // One per build-id (a file reached by two paths, e.g. /lib and
    // /usr/lib, is one file), then in path order.
    out.sort_by(|a, b| {
        a.build_id
            .cmp(&b.build_id)
            .then_with(|| a.path.cmp(&b.path))
    });
    out.dedup_by(|a, b| a.build_id == b.build_id);
    out.sort();
    out
}

/// What [`keep`] did.
#[derive(Debug, Default)]
pub struct Kept {
    /// Files copied in.
    pub added: usize,
    /// Their bytes.
    pub added_bytes: u64,
    /// Files the cache had already.
    pub present: usize,
    /// One line per file that could not be kept (why), for the report's
    /// reader.
    pub warnings: Vec<String>,
}

/// Where the bytes of one needed file come from.
enum Source<'a> {
    Held(&'a std::fs::File),
    Path(PathBuf),
}

/// The build-id of an open file.
fn build_id_of(file: &std::fs::File) -> Option<Vec<u8>> {
    use std::os::fd::AsRawFd;
    pfprof_symbolize::read_build_id(&crate::sys::procfs::fd_path(file.as_raw_fd()))
}

/// Where files are read from besides the held ones.
#[derive(Debug, Default, Clone)]
pub struct Sources {
    /// perf's `--symfs`: the recorded path under it first.
    pub symfs: Option<PathBuf>,
    /// Build-id caches to copy entries from (`archive`).
    pub caches: Vec<PathBuf>,
}

/// Copies each of `needed` into `cache`: from `held` (the file the process
/// mapped) when one has its build-id, else from the first file of
/// `sources` (under `--symfs`, the recorded path, other caches) whose
/// build-id matches.
pub fn keep(cache: &mut Cache, needed: &[Needed], held: &[HeldFile], sources: &Sources) -> Kept {
    let mut kept = Kept::default();
    let missing: Vec<&Needed> = needed
        .iter()
        .filter(|n| !cache.contains(&n.build_id))
        .collect();
    kept.present = needed.len() - missing.len();
    if missing.is_empty() {
        return kept;
    }
    // Read from the held file itself, not taken from its mmap record: a
    // file rewritten in place since (same inode) is not the recorded build.
    // The record's id says which files can be needed: only those are read.
    let wanted: std::collections::HashSet<&[u8]> =
        missing.iter().map(|n| &n.build_id[..]).collect();
    let held_ids: Vec<Option<Vec<u8>>> = held
        .iter()
        .map(|h| match &h.build_id {
            Some(id) if !wanted.contains(&id[..]) => None,
            _ => build_id_of(&h.file),
        })
        .collect();
    let mut over_limit = 0;
    for n in missing {
        let from_held = held
            .iter()
            .zip(&held_ids)
            .find(|(_, id)| id.as_deref() == Some(&n.build_id[..]))
            .map(|(h, _)| Source::Held(&h.file));
        let source = from_held.or_else(|| {
            candidates(&n.path, &n.build_id, sources)
                .into_iter()
                .find(|p| pfprof_symbolize::read_build_id(p).as_deref() == Some(&n.build_id[..]))
                .map(Source::Path)
        });
        let result = match source {
            Some(Source::Held(file)) => cache.store(&n.build_id, file),
            Some(Source::Path(path)) => {
                std::fs::File::open(&path).and_then(|file| cache.store(&n.build_id, &file))
            }
            None => {
                kept.warnings.push(format!(
                    "{}: not kept in the build-id cache: no file with the recorded build-id \
                     (none held while recording: its process had exited; none at its path or \
                     in the caches)",
                    n.path
                ));
                continue;
            }
        };
        match result {
            Ok(Stored::Added(bytes)) => {
                kept.added += 1;
                kept.added_bytes += bytes;
            }
            Ok(Stored::Present | Stored::LinkedEntry) => kept.present += 1,
            Ok(Stored::OverLimit) => over_limit += 1,
            Err(e) => kept
                .warnings
                .push(format!("{}: not kept in the build-id cache: {e}", n.path)),
        }
    }
    if over_limit > 0 {
        kept.warnings.push(format!(
            "{over_limit} files not kept in the build-id cache {}: it is at its size limit \
             (--buildid-cache-limit; remove old entries under {})",
            cache.root().display(),
            cache.root().join(".build-id").display()
        ));
    }
    kept
}

/// Where a file recorded at `path` may be read besides a held file: the
/// copies of it `report` looks for, in its order
/// ([`pfprof_symbolize::Options::file_copies`]: under `--symfs`, the
/// caches, the path). Any of them with the recorded build-id will do, but a
/// cache entry `record` made is the very file the process mapped, where
/// the path may since hold the build stripped (`strip` keeps the
/// build-id). Not the debug directories' files: they have the build-id but
/// not the code.
fn candidates(path: &str, build_id: &[u8], sources: &Sources) -> Vec<PathBuf> {
    // The kernel names a deleted file `PATH (deleted)`.
    let live = path.strip_suffix(" (deleted)").unwrap_or(path);
    let options = pfprof_symbolize::Options {
        symfs: sources.symfs.clone(),
        build_id_caches: sources.caches.clone(),
        ..pfprof_symbolize::Options::default()
    };
    options.file_copies(Path::new(live), Some(build_id))
}

/// `pfprof archive DIR`: copies the files `profile` (DIR's recording) needs
/// into `DIR/.build-id`. Returns what was done and the recorded paths of
/// the files with frames or faults that have no build-id (they cannot be
/// archived by one).
pub fn archive(
    dir: &Path,
    profile: &Profile,
    sources: &Sources,
) -> std::io::Result<(Kept, Vec<String>)> {
    let mut cache = Cache::open(dir, u64::MAX)?;
    let kept = keep(&mut cache, &needed(profile), &[], sources);
    // Only code needs its file's names; a data file's faults are named by
    // its path alone.
    let mut without_id: Vec<String> = profile
        .stacks
        .unique_frames()
        .filter_map(|frame| match frame {
            crate::analysis::stacks::FrameKey::Code { module, .. } => Some(module),
            _ => None,
        })
        .map(|id| profile.processes.modules.get(id))
        .filter(|m| m.is_file() && !m.build_id.as_ref().is_some_and(|id| id.len() >= 2))
        .map(|m| m.path.clone())
        .collect();
    without_id.sort();
    without_id.dedup();
    Ok((kept, without_id))
}

/// `pfprof archive DIR`: the binaries the recording names, copied into
/// `DIR/.build-id`. Exit 1 when one with a build-id could not be.
pub fn command(args: &crate::commands::cli::ArchiveArgs) -> anyhow::Result<u8> {
    use anyhow::Context as _;
    let data = data_path(&args.input)?;
    let dir = recording_dir(&args.input);
    if !crate::format::outdir::is_pfprof_recording(&data) {
        return Err(error::CodedError::new(
            error::exit::CONFIG,
            format!(
                "{} is not a pfprof recording directory (archive writes into the directory `record -o` made)",
                args.input.display()
            ),
        )
        .into());
    }
    let options = AnalyzeOptions {
        symfs: args.symfs.clone(),
        build_id_caches: build_id_caches(&data, args.buildid_dir.as_deref()),
        ..AnalyzeOptions::default()
    };
    let profile = analysis::analyze(&data, options)?;
    let sources = Sources {
        symfs: args.symfs.clone(),
        caches: cache_root(args.buildid_dir.as_deref())
            .into_iter()
            .collect(),
    };
    let archive_dir = dir.join(crate::format::outdir::ARCHIVE_DIR);
    let (kept, without_id) = archive(&dir, &profile, &sources)
        .with_context(|| format!("cannot write {}", archive_dir.display()))?;
    for warning in &kept.warnings {
        eprintln!("pfprof: warning: {warning}");
    }
    if !without_id.is_empty() {
        eprintln!(
            "pfprof: warning: {} files have no build-id and are not archived (a report elsewhere reads them by path): {}",
            without_id.len(),
            without_id.join(", ")
        );
    }
    eprintln!(
        "pfprof: archived {} files ({}) into {} ({} there already); {} now reports its names without them",
        kept.added,
        text::human_bytes(kept.added_bytes),
        archive_dir.display(),
        kept.present,
        dir.display()
    );
    Ok(if kept.warnings.is_empty() { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file is looked for where `report` looks, in its order (under
    /// --symfs, perf's two cache layouts, the path), a deleted one at its
    /// live path, never in a debug directory.
    #[test]
    fn candidates_in_report_order() {
        let sources = Sources {
            symfs: Some(PathBuf::from("/sym")),
            caches: vec![PathBuf::from("/c")],
        };
        let got = candidates("/usr/lib/x.so (deleted)", &[0xab, 0xcd], &sources);
        let want: Vec<PathBuf> = [
            "/sym/usr/lib/x.so",
            "/c/.build-id/ab/cd/elf",
            "/c/usr/lib/x.so/abcd/elf",
            "/usr/lib/x.so",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(got, want);
    }
}
