//! Where pfprof writes, and how: never through a symbolic link, never over a
//! file it did not create, never a half-written set, never someone else's
//! directory.
//!
//! - `record -o DIR` writes into `DIR.partial`, a directory it creates
//!   (`mkdir` fails on anything already there, links included), and renames
//!   it to `DIR` once every output is written: an existing `DIR` moves to
//!   `DIR.old`, an existing `DIR.old` is deleted. Both only when they are
//!   pfprof outputs ([`inspect`]); anything else is refused (exit 2) before
//!   the command starts. A run killed midway leaves its recording in
//!   `DIR.partial`, which `pfprof report -i DIR.partial` reads.
//! - Every file is created with `O_CREAT|O_EXCL|O_NOFOLLOW`. Files that may
//!   exist already (`flamegraph` and `diff` write beside a recording) are
//!   written under a temporary name and renamed over the old one: a planted
//!   link is replaced, never written through.
//! - Under `sudo`, the directories and files pfprof creates belong to the
//!   invoking user.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::error::{exit, CodedError};
use crate::format::perf_data::{HeaderFacts, HEADER_SIZE, PFPROF_META_FEATURE};
use crate::format::records::{OwnEvent, MAJOR_FAULTS, MINOR_FAULTS};
use crate::user;

/// The recording in an output directory.
pub const DATA_FILE: &str = "pfprof.data";
/// The text report.
pub const REPORT_TXT: &str = "report.txt";
/// The JSON report.
pub const REPORT_JSON: &str = "report.json";
/// The timeline.
pub const TIMELINE_SVG: &str = "timeline.svg";
/// The pprof profile.
pub const PROFILE_PB_GZ: &str = "profile.pb.gz";
/// The page.
pub const INDEX_HTML: &str = "index.html";

/// The flame graphs, by their files' name without the extension: each is
/// written as `STEM.folded` and `STEM.svg`.
pub mod graph {
    /// Every class.
    pub const ALL: &str = "all";
    /// Minor faults.
    pub const MINOR: &str = "minor";
    /// Major faults.
    pub const MAJOR: &str = "major";
    /// Copy-on-write faults.
    pub const COW: &str = "cow";
    /// The start-up windows.
    pub const STARTUP: &str = "startup";
    /// Minor faults by their time in the kernel.
    pub const MINOR_LATENCY: &str = "minor-latency";
    /// Major faults by their time in the kernel.
    pub const MAJOR_LATENCY: &str = "major-latency";
    /// Copy-on-write faults by their time in the kernel.
    pub const COW_LATENCY: &str = "cow-latency";
    /// Resident memory at the peak.
    pub const RESIDENT: &str = "resident";
    /// Resident memory at each process's exit.
    pub const RESIDENT_EXIT: &str = "resident-exit";
    /// Two runs compared (`pfprof diff`).
    pub const DIFF: &str = "diff";
    /// All of them.
    pub const STEMS: &[&str] = &[
        ALL,
        MINOR,
        MAJOR,
        COW,
        STARTUP,
        MINOR_LATENCY,
        MAJOR_LATENCY,
        COW_LATENCY,
        RESIDENT,
        RESIDENT_EXIT,
        DIFF,
    ];
}

/// The names pfprof writes in an output directory besides the graphs'
/// ([`graph::STEMS`]) and the JIT perf maps it keeps (`perf-PID.map`, see
/// `jitmaps`).
const OUTPUT_FILES: &[&str] = &[
    DATA_FILE,
    REPORT_TXT,
    REPORT_JSON,
    TIMELINE_SVG,
    PROFILE_PB_GZ,
    INDEX_HTML,
];

/// Whether pfprof writes `name` in an output directory (besides the JIT
/// perf maps it keeps). A directory holding anything else is not (only)
/// pfprof's, and pfprof neither moves nor deletes it.
pub fn is_output_file(name: &str) -> bool {
    let graph_file = name.rsplit_once('.').is_some_and(|(stem, extension)| {
        matches!(extension, "folded" | "svg") && graph::STEMS.contains(&stem)
    });
    graph_file || OUTPUT_FILES.contains(&name)
}

/// The build-id cache `pfprof archive` writes into a recording directory.
pub const ARCHIVE_DIR: &str = ".build-id";

/// Whether `dir` (a recording's [`ARCHIVE_DIR`], at `depth` 0) holds only
/// the build-id cache's layout: `xx/yyyy…/elf`, directories and regular
/// files, no links.
fn is_archive_tree(dir: &Path, depth: usize) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.into_iter().all(|entry| {
        let Ok(entry) = entry else { return false };
        match entry.file_type() {
            Ok(t) if t.is_dir() && depth < 2 => is_archive_tree(&entry.path(), depth + 1),
            Ok(t) if t.is_file() && depth == 2 => true,
            _ => false,
        }
    })
}

/// Suffix of the directory a recording is written into.
pub const PARTIAL_SUFFIX: &str = ".partial";
/// Suffix of the previous output.
pub const OLD_SUFFIX: &str = ".old";
/// Temporary files are `.NAME.PID.pfprof-tmp`.
const TMP_SUFFIX: &str = ".pfprof-tmp";

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The output a temporary name stands for (a write pfprof did not finish).
fn temp_target(name: &str) -> Option<&str> {
    let (target, pid) = name
        .strip_prefix('.')?
        .strip_suffix(TMP_SUFFIX)?
        .rsplit_once('.')?;
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some(target)
}

/// The name of a process's JIT perf map, in `/tmp` and in a recording
/// (see `jitmaps`).
pub fn perf_map_name(pid: i32) -> String {
    format!("perf-{pid}.map")
}

/// Whether `name` is a perf map's name (`perf-PID.map`).
pub fn is_map_name(name: &str) -> bool {
    name.strip_prefix("perf-")
        .and_then(|rest| rest.strip_suffix(".map"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

fn is_output_name(name: &str) -> bool {
    let known = |name: &str| is_output_file(name) || is_map_name(name);
    known(name) || temp_target(name).is_some_and(known)
}

/// Creates the missing ancestors of `path`, owned like the outputs.
fn create_parents(path: &Path) -> io::Result<()> {
    let missing: Vec<&Path> = path
        .ancestors()
        .skip(1)
        .filter(|p| !p.as_os_str().is_empty())
        .take_while(|p| std::fs::symlink_metadata(p).is_err())
        .collect();
    for dir in missing.into_iter().rev() {
        match user::create_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            other => other?,
        }
    }
    Ok(())
}

fn refuse(message: String) -> anyhow::Error {
    CodedError::new(exit::CONFIG, message).into()
}

/// A directory pfprof writes files into: one it created, or one checked to
/// be a real directory (not a link).
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
}

impl OutDir {
    /// The directory at `path`, created (with its parents) if missing; a
    /// link or a file there is refused (exit 2).
    pub fn open_or_create(path: &Path) -> anyhow::Result<OutDir> {
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(refuse(format!(
                    "{} is a symbolic link; pfprof writes only into real directories (pass the directory it points to)",
                    path.display()
                )))
            }
            Ok(meta) if !meta.is_dir() => {
                return Err(refuse(format!("{} is not a directory", path.display())))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                create_parents(path)
                    .and_then(|()| user::create_dir(path))
                    .map_err(|e| refuse(format!("cannot create {}: {e}", path.display())))?;
            }
            Err(e) => return Err(refuse(format!("cannot use {}: {e}", path.display()))),
        }
        Ok(OutDir {
            path: path.to_path_buf(),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the output `name` (one [`is_output_file`] knows, or a kept perf
    /// map) through `write`
    /// into a new temporary file, then renames it over `name`: a reader sees
    /// the old file or the whole new one, and a link planted at `name` is
    /// replaced, not followed.
    pub fn write_with(
        &self,
        name: &str,
        write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
    ) -> io::Result<()> {
        if !(is_output_file(name) || is_map_name(name)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name} is not one of pfprof's output names"),
            ));
        }
        let temp = self
            .path
            .join(format!(".{name}.{}{TMP_SUFFIX}", std::process::id()));
        let result = user::create_new_file(&temp, 0o644).and_then(|file| {
            let mut out = BufWriter::new(file);
            write(&mut out)?;
            out.into_inner().map_err(io::IntoInnerError::into_error)?;
            std::fs::rename(&temp, self.path.join(name))
        });
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result
    }

    /// Writes `bytes` as the output `name` (see [`write_with`](Self::write_with)).
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_with(name, |out| out.write_all(bytes))
    }
}

/// What is at an output path.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing.
    Absent,
    /// A pfprof output: a real directory holding a pfprof recording and
    /// only the regular files pfprof writes.
    Output,
    /// Something else, and why it is not an output.
    Other(NotOutput),
}

/// Why what is at an output path is not a pfprof output. Shown after "it"
/// ("refusing to delete DIR: it holds notes.txt, which pfprof does not
/// write").
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotOutput {
    /// A symbolic link (never followed).
    #[error("is a symbolic link")]
    SymbolicLink,
    /// A file or anything else but a directory.
    #[error("is not a directory")]
    NotADirectory,
    /// Its build-id cache holds more than `pfprof archive` copies there.
    #[error("holds {ARCHIVE_DIR} with more than the files `pfprof archive` copies")]
    ForeignArchive,
    /// It holds a name pfprof does not write.
    #[error("holds {0}, which pfprof does not write")]
    ForeignName(String),
    /// One of pfprof's names is not a regular file there (a link, a FIFO).
    #[error("holds {0}, which is not a regular file")]
    NotRegularFile(String),
    /// Only pfprof's names, but no recording (a run that failed early).
    #[error("holds no {DATA_FILE}")]
    NoRecording,
    /// Only pfprof's names, but the recording is not pfprof's.
    #[error("holds a {DATA_FILE} that pfprof did not write")]
    ForeignRecording,
}

/// What is at `path`, without following a link there.
pub fn inspect(path: &Path) -> io::Result<Found> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Found::Absent),
        other => other?,
    };
    let why = if meta.file_type().is_symlink() {
        Some(NotOutput::SymbolicLink)
    } else if !meta.is_dir() {
        Some(NotOutput::NotADirectory)
    } else {
        not_an_output_dir(path)?
    };
    Ok(why.map_or(Found::Output, Found::Other))
}

/// Why the directory at `path` is not a pfprof output (None when it is):
/// the first name pfprof does not write, or does not write so, else a
/// missing or foreign recording.
fn not_an_output_dir(path: &Path) -> io::Result<Option<NotOutput>> {
    let mut has_data = false;
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == ARCHIVE_DIR && entry.file_type()?.is_dir() {
            if !is_archive_tree(&entry.path(), 0) {
                return Ok(Some(NotOutput::ForeignArchive));
            }
            continue;
        }
        let Some(name) = name.to_str().filter(|n| is_output_name(n)) else {
            return Ok(Some(NotOutput::ForeignName(
                name.to_string_lossy().into_owned(),
            )));
        };
        if !entry.file_type()?.is_file() {
            return Ok(Some(NotOutput::NotRegularFile(name.to_string())));
        }
        has_data |= name == DATA_FILE;
    }
    if !has_data {
        return Ok(Some(NotOutput::NoRecording));
    }
    if !is_pfprof_recording(&path.join(DATA_FILE)) {
        return Ok(Some(NotOutput::ForeignRecording));
    }
    Ok(None)
}

/// Whether the file is a recording pfprof wrote: a `PERFILE2` whose feature
/// bitmap has pfprof's metadata section, or, for a recording pfprof could
/// not finish (killed, or stopped by a write error: its header carries no
/// feature bits yet), one whose first two events are `minor-faults` and
/// `major-faults`, as pfprof writes them.
pub fn is_pfprof_recording(path: &Path) -> bool {
    let read = || -> io::Result<bool> {
        let Some((mut file, facts)) = open_recording(path)? else {
            return Ok(false);
        };
        if facts.features.has(PFPROF_META_FEATURE) {
            return Ok(true);
        }
        if !facts.features.is_empty() || facts.attr_len().is_none() {
            return Ok(false);
        }
        let mut attrs = vec![0u8; 2 * facts.attr_size as usize];
        file.seek(SeekFrom::Start(facts.attrs.0))?;
        file.read_exact(&mut attrs)?;
        // attr: u32 type, u32 size, u64 config.
        let event = |i: usize| {
            let at = i * facts.attr_size as usize;
            let type_ = u32::from_le_bytes(attrs[at..at + 4].try_into().unwrap_or_default());
            let config = u64::from_le_bytes(attrs[at + 8..at + 16].try_into().unwrap_or_default());
            OwnEvent::of_attr(type_, config, 0)
        };
        Ok(event(0) == Some(MINOR_FAULTS) && event(1) == Some(MAJOR_FAULTS))
    };
    read().unwrap_or(false)
}

/// A regular file at `path` (not through a link, and without blocking on
/// a FIFO) and its perf.data header; None when it is something else or
/// its header is not one.
fn open_recording(path: &Path) -> io::Result<Option<(File, HeaderFacts)>> {
    let mut file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    let mut header = [0u8; HEADER_SIZE as usize];
    file.read_exact(&mut header)?;
    Ok(HeaderFacts::parse(&header).map(|facts| (file, facts)))
}

/// Deletes a directory holding only what pfprof writes: each known file,
/// then the directory; refuses (exit 2) if anything else is there.
fn remove_output(path: &Path, require_recording: bool) -> anyhow::Result<()> {
    match inspect(path)? {
        Found::Absent => return Ok(()),
        Found::Output => {}
        // A run that failed early: pfprof's names only, without a
        // recording of pfprof's.
        Found::Other(NotOutput::NoRecording | NotOutput::ForeignRecording)
            if !require_recording => {}
        Found::Other(why) => {
            return Err(refuse(format!(
                "refusing to delete {}: it {why}",
                path.display()
            )))
        }
    }
    for entry in std::fs::read_dir(path)? {
        let name = entry?.file_name();
        // inspect() checked each name; one that appeared since stays.
        if name == ARCHIVE_DIR {
            // Checked to hold only directories and regular files; the
            // removal does not follow links either.
            std::fs::remove_dir_all(path.join(&name))?;
        } else if name.to_str().is_some_and(is_output_name) {
            std::fs::remove_file(path.join(&name))?;
        }
    }
    std::fs::remove_dir(path).map_err(|e| anyhow::anyhow!("cannot remove {}: {e}", path.display()))
}

/// `record -o DIR`: the checks before the command starts, the directory the
/// run writes into, and the rotation once everything is written.
#[derive(Debug)]
pub struct Staging {
    dir: PathBuf,
    old: PathBuf,
    partial: OutDir,
}

impl Staging {
    /// Checks `dir`, `dir.old` and `dir.partial` and creates `dir.partial`;
    /// refuses (exit 2) when `dir` or `dir.old` is not a pfprof output or
    /// `dir.partial` exists.
    pub fn begin(dir: &Path) -> anyhow::Result<Staging> {
        // `out/` names `out`: its siblings are `out.old`, not `out/.old`.
        let dir: PathBuf = dir.components().collect();
        let dir = dir.as_path();
        let old = with_suffix(dir, OLD_SUFFIX);
        let partial = with_suffix(dir, PARTIAL_SUFFIX);
        let advice = "pfprof moves aside and deletes only its own outputs; choose another -o DIR or move it away";
        match inspect(dir)? {
            Found::Absent => {}
            Found::Output => match inspect(&old)? {
                Found::Absent | Found::Output => {}
                Found::Other(why) => {
                    return Err(refuse(format!(
                        "refusing to replace {}: it {why} ({advice})",
                        old.display()
                    )))
                }
            },
            Found::Other(why) => {
                return Err(refuse(format!(
                    "refusing to replace {}: it {why} ({advice})",
                    dir.display()
                )))
            }
        }
        match inspect(&partial)? {
            Found::Absent => {}
            Found::Output => {
                return Err(refuse(format!(
                    "{} exists: a pfprof run is writing there, or was killed or failed before it finished \
                     (`pfprof report -i {}` reads what it recorded); remove it to record into {}",
                    partial.display(),
                    partial.display(),
                    dir.display()
                )))
            }
            Found::Other(why) => {
                return Err(refuse(format!(
                    "{} exists and {why}; pfprof writes a new recording there: move it away",
                    partial.display()
                )))
            }
        }
        create_parents(&partial)
            .and_then(|()| user::create_dir(&partial))
            .map_err(|e| refuse(format!("cannot create {}: {e}", partial.display())))?;
        Ok(Staging {
            dir: dir.to_path_buf(),
            old,
            partial: OutDir { path: partial },
        })
    }

    /// Where the run writes (`DIR.partial`).
    pub fn out_dir(&self) -> &OutDir {
        &self.partial
    }

    /// Whether `DIR.partial` holds records worth keeping.
    pub fn holds_records(&self) -> bool {
        let recording = open_recording(&self.partial.path.join(DATA_FILE));
        let Ok(Some((file, facts))) = recording else {
            return false;
        };
        file.metadata().is_ok_and(|m| m.len() > facts.data.0)
    }

    /// Deletes `DIR.partial` (a run that failed before recording anything).
    pub fn discard(self) -> anyhow::Result<()> {
        remove_output(&self.partial.path, false)
    }

    /// Puts the finished set in place: `DIR.old` is deleted, `DIR` becomes
    /// `DIR.old`, `DIR.partial` becomes `DIR`. Each is checked again, as
    /// minutes may have passed since [`begin`](Self::begin).
    pub fn commit(self) -> anyhow::Result<()> {
        let kept = || {
            format!(
                "the outputs stay in {} (`pfprof report -i {}` reads them)",
                self.partial.path.display(),
                self.partial.path.display()
            )
        };
        match inspect(&self.dir)? {
            Found::Absent => {}
            Found::Output => {
                remove_output(&self.old, true).map_err(|e| e.context(kept()))?;
                std::fs::rename(&self.dir, &self.old).map_err(|e| {
                    anyhow::anyhow!(
                        "cannot move {} to {}: {e}; {}",
                        self.dir.display(),
                        self.old.display(),
                        kept()
                    )
                })?;
            }
            Found::Other(why) => {
                return Err(refuse(format!(
                    "{} changed during the recording and {why}; {}",
                    self.dir.display(),
                    kept()
                )))
            }
        }
        std::fs::rename(&self.partial.path, &self.dir).map_err(|e| {
            anyhow::anyhow!(
                "cannot move {} to {}: {e}; {}",
                self.partial.path.display(),
                self.dir.display(),
                kept()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only `perf-<digits>.map` is a map's name.
    #[test]
    fn map_names() {
        for (name, want) in [
            ("perf-1234.map", true),
            ("perf-1.map", true),
            ("perf-.map", false),
            ("perf-12a.map", false),
            ("perf-12.map.tmp", false),
            ("jit-12.dump", false),
            ("perf--1.map", false),
        ] {
            assert_eq!(is_map_name(name), want, "{name}");
        }
        assert_eq!(perf_map_name(42), "perf-42.map");
    }

    fn scratch(name: &str) -> PathBuf {
        crate::test_dir(&format!("outdir-{name}"))
    }

    /// A finished recording: PERFILE2 with pfprof's metadata bit.
    fn finished_header() -> Vec<u8> {
        let mut h = vec![0u8; 104];
        h[..8].copy_from_slice(b"PERFILE2");
        let bit = PFPROF_META_FEATURE as usize;
        let at = 72 + 8 * (bit / 64);
        h[at..at + 8].copy_from_slice(&(1u64 << (bit % 64)).to_le_bytes());
        h
    }

    /// An unfinished recording with these (type, config) events.
    fn unfinished(events: &[(u32, u64)]) -> Vec<u8> {
        let attr_size = 128u64 + 16;
        let mut f = vec![0u8; 104];
        f[..8].copy_from_slice(b"PERFILE2");
        f[16..24].copy_from_slice(&attr_size.to_le_bytes());
        f[24..32].copy_from_slice(&104u64.to_le_bytes());
        f[32..40].copy_from_slice(&(attr_size * events.len() as u64).to_le_bytes());
        for (type_, config) in events {
            let mut attr = vec![0u8; attr_size as usize];
            attr[..4].copy_from_slice(&type_.to_le_bytes());
            attr[8..16].copy_from_slice(&config.to_le_bytes());
            f.extend_from_slice(&attr);
        }
        f
    }

    /// Output names, and temporary names pfprof leaves when killed midway.
    #[test]
    fn names() {
        for (name, ours) in [
            ("report.txt", true),
            ("pfprof.data", true),
            ("resident-exit.folded", true),
            ("diff.svg", true),
            ("perf-12.map", true),
            ("timeline.folded", false),
            ("all.png", false),
            ("minor", false),
            (".svg", false),
            (".minor.svg.1234.pfprof-tmp", true),
            (".minor.svg..pfprof-tmp", false),
            (".notes.txt.1.pfprof-tmp", false),
            ("notes.txt", false),
            ("report.txt~", false),
            ("", false),
        ] {
            assert_eq!(is_output_name(name), ours, "{name:?}");
        }
    }

    /// Which recordings count as pfprof's, finished or not.
    #[test]
    fn recordings() {
        let dir = scratch("recordings");
        let cases: [(&str, Vec<u8>, bool); 6] = [
            ("finished", finished_header(), true),
            ("killed", unfinished(&[(1, 5), (1, 6), (2, 100)]), true),
            ("perf", unfinished(&[(0, 0), (1, 6)]), false),
            ("one event", unfinished(&[(1, 5)]), false),
            ("text", b"hello, world".to_vec(), false),
            ("empty", Vec::new(), false),
        ];
        for (what, bytes, ours) in cases {
            let path = dir.join(what);
            std::fs::write(&path, bytes).unwrap();
            assert_eq!(is_pfprof_recording(&path), ours, "{what}");
        }
        std::os::unix::fs::symlink(dir.join("finished"), dir.join("link")).unwrap();
        assert!(
            !is_pfprof_recording(&dir.join("link")),
            "links are not followed"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// What counts as a pfprof output directory.
    #[test]
    fn inspect_outputs() {
        let root = scratch("inspect");
        let output = |name: &str, extra: &[&str]| {
            let dir = root.join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join(DATA_FILE), finished_header()).unwrap();
            std::fs::write(dir.join("report.txt"), "r").unwrap();
            for e in extra {
                std::fs::write(dir.join(e), "x").unwrap();
            }
            dir
        };
        assert_eq!(inspect(&root.join("none")).unwrap(), Found::Absent);
        assert_eq!(inspect(&output("plain", &[])).unwrap(), Found::Output);
        let user = output("user", &["notes.txt"]);
        assert_eq!(
            inspect(&user).unwrap(),
            Found::Other(NotOutput::ForeignName("notes.txt".into()))
        );
        let empty = root.join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert_eq!(
            inspect(&empty).unwrap(),
            Found::Other(NotOutput::NoRecording)
        );
        let link = root.join("link");
        std::os::unix::fs::symlink(root.join("plain"), &link).unwrap();
        assert_eq!(
            inspect(&link).unwrap(),
            Found::Other(NotOutput::SymbolicLink)
        );
        let planted = output("planted", &[]);
        std::fs::remove_file(planted.join("report.txt")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", planted.join("report.txt")).unwrap();
        assert_eq!(
            inspect(&planted).unwrap(),
            Found::Other(NotOutput::NotRegularFile("report.txt".into()))
        );
        // remove_output deletes an output and refuses anything else.
        remove_output(&root.join("plain"), true).unwrap();
        assert!(!root.join("plain").exists());
        assert!(remove_output(&user, true).is_err());
        assert!(user.join("notes.txt").exists());
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// `begin` then `commit` rotates: DIR.partial → DIR → DIR.old, with a
    /// trailing slash too; a discarded run leaves nothing.
    #[test]
    fn staging_rotates() {
        let root = scratch("staging");
        let dir = root.join("out");
        let mut slashed = dir.clone().into_os_string();
        slashed.push("/");
        for run in 0..3u8 {
            let staging = Staging::begin(Path::new(&slashed)).unwrap();
            assert_eq!(staging.out_dir().path(), root.join("out.partial"));
            let mut data = finished_header();
            data.push(run);
            std::fs::write(staging.out_dir().path().join(DATA_FILE), data).unwrap();
            staging.commit().unwrap();
            assert_eq!(std::fs::read(dir.join(DATA_FILE)).unwrap()[104], run);
            if run > 0 {
                assert_eq!(
                    std::fs::read(root.join("out.old").join(DATA_FILE)).unwrap()[104],
                    run - 1
                );
            }
        }
        Staging::begin(&dir).unwrap().discard().unwrap();
        let mut left: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["out", "out.old"]);
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Each reason reads as the refusals say it, after "it".
    #[test]
    fn reasons_as_text() {
        for (why, text) in [
            (NotOutput::SymbolicLink, "is a symbolic link"),
            (NotOutput::NotADirectory, "is not a directory"),
            (
                NotOutput::ForeignArchive,
                "holds .build-id with more than the files `pfprof archive` copies",
            ),
            (
                NotOutput::ForeignName("notes".into()),
                "holds notes, which pfprof does not write",
            ),
            (
                NotOutput::NotRegularFile("report.txt".into()),
                "holds report.txt, which is not a regular file",
            ),
            (NotOutput::NoRecording, "holds no pfprof.data"),
            (
                NotOutput::ForeignRecording,
                "holds a pfprof.data that pfprof did not write",
            ),
        ] {
            assert_eq!(why.to_string(), text);
        }
    }

    /// A foreign file in `DIR.partial` is refused whatever its name: one
    /// named like a reason (`no notes`, `... did not write`) passed for
    /// pfprof's own state, and `discard` deleted pfprof's files, then failed
    /// to remove the directory, instead of refusing.
    #[test]
    fn discard_refuses_foreign_files_whatever_their_names() {
        for (i, name) in ["no notes", "what I did not write"].into_iter().enumerate() {
            let root = scratch(&format!("foreign-{i}"));
            let staging = Staging::begin(&root.join("out")).unwrap();
            let partial = staging.out_dir().path().to_path_buf();
            std::fs::write(partial.join("report.txt"), "r").unwrap();
            std::fs::write(partial.join(name), "mine").unwrap();
            let error = staging.discard().unwrap_err();
            assert!(
                error.to_string().starts_with("refusing to delete"),
                "{name}: {error}"
            );
            assert!(partial.join("report.txt").exists(), "{name}: ours deleted");
            assert!(partial.join(name).exists(), "{name}");
            std::fs::remove_dir_all(&root).unwrap();
        }
    }

    /// Files are created exclusively, without following links; outputs are
    /// renamed over what was there (a link is replaced, not written through).
    #[test]
    fn writes_never_follow_links() {
        let dir = scratch("links");
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = dir.join("new");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(user::create_new_file(&link, 0o600).is_err());
        let out = OutDir::open_or_create(&dir).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("minor.svg")).unwrap();
        out.write("minor.svg", b"<svg/>").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read(dir.join("minor.svg")).unwrap(), b"<svg/>");
        assert!(out.write("victim", b"x").is_err(), "only output names");
        assert!(OutDir::open_or_create(&link).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
