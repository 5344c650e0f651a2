//! `record --interval`: a profile per interval, aggregated as the records
//! arrive. The recorder's [`Tap`] hands each drain pass to a worker thread
//! (so that symbolizing never delays the drain), which decodes the records
//! in time order into an [`Aggregator`]; at the end of each interval it
//! resolves the interval's counts and writes them into a directory of `-o
//! DIR` named by the interval's start (UTC), keeps the newest `--keep N`
//! and forgets the counts. Memory is bounded by what is distinct (stacks,
//! targets, processes), and nothing is written per fault unless the raw
//! recording is asked for.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use crate::analysis::{Aggregator, AnalyzeOptions};
use crate::format::decode::LiveDecoder;
use crate::format::outdir::{OutDir, OUTPUT_NAMES};
use crate::format::perf_data::{EventDesc, RecordingMeta};
use crate::model::resolve;
use crate::record::Tap;
use crate::text;

/// Where each interval's profile goes.
#[derive(Debug, Clone)]
pub enum Destination {
    /// `record --interval -o DIR`: a directory per interval.
    Dir(PathBuf),
    /// `pfprof top`: the resolved interval, to the screen's thread (which
    /// may have gone: then it is dropped).
    Channel(std::sync::mpsc::SyncSender<Interval>),
}

/// One interval's profile, for [`Destination::Channel`].
pub struct Interval {
    /// The profile.
    pub model: crate::model::Model,
    /// Its length.
    pub wall_ns: u64,
}

/// What `record --interval` was asked for.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the intervals go.
    pub destination: Destination,
    /// Length of an interval.
    pub interval: Duration,
    /// Keep the newest N interval directories (None: all).
    pub keep: Option<usize>,
    /// How to analyse.
    pub options: AnalyzeOptions,
    /// Rows of report.txt's tables.
    pub top: usize,
    /// Print a line per interval written.
    pub verbose: bool,
}

/// The [`Tap`] of `record --interval`.
pub struct Continuous {
    settings: Settings,
    chunk: Vec<u8>,
    backlog: Arc<Backlog>,
    /// Chunks the worker is done with, to fill again.
    spare: Option<Receiver<Vec<u8>>>,
    worker: Option<(Sender<Message>, JoinHandle<Result<Summary>>)>,
    /// Set when the worker failed: its error, reported at the end.
    summary: Option<Result<Summary>>,
}

enum Message {
    /// Drained records; every record older than the time has come.
    Records(Vec<u8>, u64),
    /// The recording is over.
    Finish,
}

/// What the intervals came to.
#[derive(Debug, Default, Clone)]
pub struct Summary {
    /// Interval directories written.
    pub written: u64,
    /// Interval directories deleted (older than the newest N).
    pub deleted: u64,
    /// Faults counted in all intervals.
    pub faults: u64,
    /// Records lost in all intervals.
    pub lost: u64,
    /// Records that did not decode.
    pub bad_records: u64,
    /// Intervals whose outputs could not be written (disk full, I/O error);
    /// the recording goes on and the next interval tries again.
    pub failed: u64,
}

impl Continuous {
    /// A tap writing intervals as `settings` says.
    pub fn new(settings: Settings) -> Continuous {
        Continuous {
            settings,
            chunk: Vec::new(),
            backlog: Arc::new(Backlog::default()),
            spare: None,
            worker: None,
            summary: None,
        }
    }

    /// What was written, once the recording is over; the worker's error if
    /// it failed.
    pub fn summary(&mut self) -> Result<Summary> {
        self.summary
            .take()
            .unwrap_or_else(|| Err(anyhow::anyhow!("the recording did not start")))
    }
}

impl Tap for Continuous {
    fn start(&mut self, events: &[EventDesc], meta: &RecordingMeta) -> Result<()> {
        let decoder = LiveDecoder::new(events).context("an event attribute did not parse")?;
        let has_entries = decoder.has_entries();
        let meta = meta.clone();
        let clock = Clock::now();
        let (tx, rx) = channel();
        let (spare_tx, spare_rx) = channel();
        self.spare = Some(spare_rx);
        let backlog = Arc::clone(&self.backlog);
        let settings = self.settings.clone();
        let handle = std::thread::Builder::new()
            .name("pfprof-intervals".into())
            .spawn(move || {
                // The symbolizer is not Send: the analysis is made here.
                let aggregator = Aggregator::new(settings.options.clone(), meta, has_entries);
                let interval_ns = settings.interval.as_nanos() as u64;
                let worker = Worker {
                    settings,
                    decoder,
                    aggregator,
                    clock,
                    start_ns: clock.monotonic_ns,
                    end_ns: clock.monotonic_ns + interval_ns,
                    bytes: 0,
                    written: Vec::new(),
                    summary: Summary::default(),
                };
                worker.run(rx, &backlog, spare_tx)
            })
            .context("cannot start the interval thread")?;
        self.worker = Some((tx, handle));
        Ok(())
    }

    fn record(&mut self, bytes: &[u8]) {
        self.chunk.extend_from_slice(bytes);
    }

    fn settled(&mut self, cutoff: u64) {
        if let Some((tx, _)) = &self.worker {
            let spare = self.spare.as_ref().and_then(|r| r.try_recv().ok());
            let chunk = std::mem::replace(&mut self.chunk, spare.unwrap_or_default());
            self.backlog.add(chunk.len());
            // A worker that stopped has its error waiting in `finish`.
            if tx.send(Message::Records(chunk, cutoff)).is_ok() {
                self.backlog.wait_below(MAX_BACKLOG);
            }
        }
    }

    fn finish(&mut self) {
        let Some((tx, handle)) = self.worker.take() else {
            return;
        };
        let chunk = std::mem::take(&mut self.chunk);
        let _ = tx.send(Message::Records(chunk, 0));
        let _ = tx.send(Message::Finish);
        self.summary = Some(
            handle
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the interval thread panicked"))),
        );
    }
}

/// Bytes of records handed to the worker and not yet decoded. When the
/// worker falls behind (a starved CPU), the drain waits for it rather than
/// let the backlog grow without bound: the kernel's rings hold what comes
/// meanwhile, and what does not fit is lost and counted as such.
#[derive(Default)]
struct Backlog {
    bytes: Mutex<usize>,
    drained: Condvar,
}

/// What the worker may have to catch up on.
const MAX_BACKLOG: usize = 64 << 20;

/// The capacity a recycled chunk keeps (a drain pass of a busy host).
const MAX_SPARE: usize = 4 << 20;

impl Backlog {
    fn add(&self, n: usize) {
        *self.bytes.lock().unwrap_or_else(|e| e.into_inner()) += n;
    }

    fn done(&self, n: usize) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        *bytes = bytes.saturating_sub(n);
        self.drained.notify_all();
    }

    /// Waits until the backlog is under `limit` bytes; a worker that
    /// stopped (its error reported at the end) does not hold the drain up
    /// for longer than a second at a time.
    fn wait_below(&self, limit: usize) {
        let mut bytes = self.bytes.lock().unwrap_or_else(|e| e.into_inner());
        while *bytes >= limit {
            let (b, timeout) = self
                .drained
                .wait_timeout(bytes, Duration::from_secs(1))
                .unwrap_or_else(|e| e.into_inner());
            bytes = b;
            if timeout.timed_out() {
                break;
            }
        }
    }
}

/// The monotonic clock of the records, tied to the wall clock.
#[derive(Debug, Clone, Copy)]
struct Clock {
    monotonic_ns: u64,
    epoch_ns: i64,
}

impl Clock {
    fn now() -> Clock {
        let epoch_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        Clock {
            monotonic_ns: crate::sys::monotonic_ns(),
            epoch_ns,
        }
    }

    /// A record's time (CLOCK_MONOTONIC) as ns since the epoch.
    fn epoch_of(&self, monotonic_ns: u64) -> i64 {
        self.epoch_ns + (monotonic_ns as i64 - self.monotonic_ns as i64)
    }
}

struct Worker {
    settings: Settings,
    decoder: LiveDecoder,
    aggregator: Aggregator,
    clock: Clock,
    /// The current interval: [start_ns, end_ns), monotonic.
    start_ns: u64,
    end_ns: u64,
    /// Bytes of records in the current interval.
    bytes: u64,
    /// The interval directories written, oldest first.
    written: Vec<PathBuf>,
    summary: Summary,
}

impl Worker {
    fn run(
        mut self,
        rx: Receiver<Message>,
        backlog: &Backlog,
        spare: Sender<Vec<u8>>,
    ) -> Result<Summary> {
        let interval_ns = self.settings.interval.as_nanos() as u64;
        for message in rx {
            match message {
                Message::Records(mut bytes, cutoff) => {
                    self.bytes += bytes.len() as u64;
                    self.decoder.push(&bytes);
                    // u64::MAX: everything was drained; `Finish` follows.
                    while cutoff >= self.end_ns && cutoff != u64::MAX {
                        let end = self.end_ns;
                        self.feed_before(end);
                        self.close(end);
                        self.start_ns = end;
                        self.end_ns = end + interval_ns;
                    }
                    self.feed_before(cutoff);
                    backlog.done(bytes.len());
                    bytes.clear();
                    // A burst's chunk keeps its size when reused: a few of
                    // them held hundreds of MB that one pass had needed.
                    bytes.shrink_to(MAX_SPARE);
                    let _ = spare.send(bytes);
                }
                Message::Finish => {
                    self.feed_before(u64::MAX);
                    // The partial interval, up to now.
                    let now = crate::sys::monotonic_ns().clamp(self.start_ns + 1, self.end_ns);
                    self.close(now);
                    break;
                }
            }
        }
        self.summary.bad_records += self.decoder.bad_records;
        Ok(self.summary)
    }

    fn feed_before(&mut self, cutoff: u64) {
        let aggregator = &mut self.aggregator;
        self.decoder
            .flush_before(cutoff, |event| aggregator.feed(event));
    }

    /// Writes the interval ending at `end_ns` and forgets its counts. An
    /// interval that cannot be written is counted and said, and what it
    /// wrote removed: a long run outlives a full disk.
    fn close(&mut self, end_ns: u64) {
        if let Err(e) = self.write(end_ns) {
            self.summary.failed += 1;
            eprintln!("pfprof: error: {}", crate::error::one_line(&e));
        }
        self.aggregator.reset();
        self.bytes = 0;
        if let Some(keep) = self.settings.keep {
            while self.written.len() > keep {
                let oldest = self.written.remove(0);
                match remove_interval(&oldest) {
                    Ok(()) => self.summary.deleted += 1,
                    Err(e) => eprintln!(
                        "pfprof: warning: cannot delete the old interval {}: {e}",
                        oldest.display()
                    ),
                }
            }
        }
    }

    /// Writes the interval ending at `end_ns` into its directory.
    fn write(&mut self, end_ns: u64) -> Result<()> {
        let profile = self.aggregator.profile();
        if let Some(meta) = profile.meta.as_mut() {
            meta.wall_ns = end_ns.saturating_sub(self.start_ns);
            meta.data_bytes = self.bytes;
        }
        let wall_ns = end_ns.saturating_sub(self.start_ns);
        name_jit_frames(profile);
        let model = resolve::resolve(profile);
        let totals = &model.report.totals;
        let faults = totals.faults.total();
        self.summary.faults += faults;
        self.summary.lost += totals.lost;
        let dir = match &self.settings.destination {
            Destination::Dir(dir) => dir.clone(),
            Destination::Channel(tx) => {
                // The screen has gone: the recording stops soon.
                let _ = tx.send(Interval { model, wall_ns });
                self.summary.written += 1;
                return Ok(());
            }
        };
        let start_epoch_ns = self.clock.epoch_of(self.start_ns);
        let name = interval_name(start_epoch_ns);
        let path = dir.join(&name);
        crate::user::create_dir(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        // From here the directory is this run's: written, or removed.
        self.written.push(path.clone());
        let written = OutDir::open_or_create(&path).and_then(|out| {
            crate::output::write_interval(&out, &model, start_epoch_ns, self.settings.top)
                .map_err(anyhow::Error::from)
        });
        if let Err(e) = written {
            self.written.pop();
            let _ = remove_interval(&path);
            return Err(e).with_context(|| {
                format!("cannot write the interval's outputs in {}", path.display())
            });
        }
        if self.settings.verbose {
            eprintln!(
                "pfprof: interval {name}: {} faults (minor {}, major {}, cow {}), {} lost",
                text::thousands(faults),
                text::thousands(totals.faults.minor),
                text::thousands(totals.faults.major),
                text::thousands(totals.faults.cow),
                text::thousands(totals.lost),
            );
        }
        self.summary.written += 1;
        Ok(())
    }
}

/// JIT frames of the interval named from the processes' perf maps in
/// `/tmp`, read again each interval (they grow while the processes run);
/// an interval keeps no copy, its outputs are already named.
fn name_jit_frames(profile: &mut crate::analysis::Profile) {
    let pids = profile.jit_pids();
    if pids.is_empty() {
        profile.jit_maps.clear();
        profile.jit_warnings.clear();
        return;
    }
    // With `from_tmp` no recording directory is read.
    let (maps, warnings) = crate::format::jitmaps::load(Path::new("/tmp"), &pids, true);
    profile.jit_maps = maps;
    profile.jit_warnings = warnings;
}

/// `2026-11-24T10-00-00Z` for a time in ns since the epoch: UTC, so the
/// names sort by time; no colons, so the names travel (scp, tar, Windows).
pub fn interval_name(epoch_ns: i64) -> String {
    let t = text::Utc::of_epoch_ns(epoch_ns);
    format!(
        "{:04}-{:02}-{:02}T{:02}-{:02}-{:02}Z",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// Whether `name` is one of [`interval_name`]'s.
pub fn is_interval_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 | 13 | 16 => *c == b'-',
            10 => *c == b'T',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// Deletes an interval directory this run wrote: its output files (never
/// following a link), then the directory; anything else in it stays, and
/// so does the directory.
fn remove_interval(path: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let name = entry.file_name();
        let ours = name.to_str().is_some_and(|n| OUTPUT_NAMES.contains(&n));
        if ours && !entry.file_type()?.is_dir() {
            std::fs::remove_file(entry.path())?;
        }
    }
    std::fs::remove_dir(path)
}

/// Checks `-o DIR` for `record --interval`, creating it when missing: it
/// may hold only interval directories (a previous run's), never anything
/// else, and never be a link.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            OutDir::open_or_create(dir)?;
            Ok(())
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot read {}", dir.display()))),
        Ok(meta) if !meta.is_dir() || meta.file_type().is_symlink() => {
            Err(crate::error::CodedError::new(
                2,
                format!(
                    "{} exists and is not a directory; --interval writes a directory of intervals",
                    dir.display()
                ),
            )
            .into())
        }
        Ok(_) => {
            let foreign = std::fs::read_dir(dir)
                .with_context(|| format!("cannot read {}", dir.display()))?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|name| !is_interval_name(name) && name != crate::format::outdir::DATA_FILE);
            match foreign {
                Some(name) => Err(crate::error::CodedError::new(
                    2,
                    format!(
                        "{} holds {} (not an interval of pfprof record --interval); choose another -o DIR",
                        dir.display(),
                        text::safe(&name)
                    ),
                )
                .into()),
                None => Ok(()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interval names are UTC dates that sort by time and are recognised.
    #[test]
    fn interval_names() {
        assert_eq!(interval_name(0), "1970-01-01T00-00-00Z");
        // 2026-11-24 10:00:00 UTC.
        let t = 1_795_514_400_000_000_000;
        assert_eq!(interval_name(t), "2026-11-24T10-00-00Z");
        assert_eq!(interval_name(t + 59_999_999_999), "2026-11-24T10-00-59Z");
        // 2024-02-29, a leap day.
        assert_eq!(
            interval_name(1_709_164_800_000_000_000),
            "2024-02-29T00-00-00Z"
        );
        assert!(is_interval_name("2026-11-24T10-00-00Z"));
        assert!(!is_interval_name("2026-11-24T10:00:00Z"));
        assert!(!is_interval_name("report.json"));
        let mut names: Vec<String> = [t + 10_000_000_000, t, t + 86_400_000_000_000]
            .iter()
            .map(|&n| interval_name(n))
            .collect();
        let by_time = names.clone();
        names.sort();
        assert_eq!(
            names,
            [by_time[1].clone(), by_time[0].clone(), by_time[2].clone()]
        );
    }
}
