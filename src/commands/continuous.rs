//! `record --interval`: a profile per interval, aggregated as the records
//! arrive. The recorder's [`Tap`] is fed each record as a typed event on
//! the draining thread, which counts it on raw keys in an [`Aggregator`]
//! (a few hash lookups: the drain never waits for anything slower); at the
//! end of each interval the counts are taken whole and handed to a thread
//! of their own, which names them (its symbolizer and the modules it opened
//! live as long as the run, so each address is symbolized once) and writes
//! them into a directory of `-o DIR` named by the interval's start (UTC),
//! keeping the newest `--keep N`. While that thread is still busy with an
//! interval, the next one runs on (it is written longer) rather than make
//! the drain wait or queue a second interval's counts. Memory is bounded by
//! what is distinct in an interval (stacks, targets, processes), and
//! nothing is written per fault unless the raw recording is asked for.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use pfprof_symbolize::Symbolizer;

use crate::analysis::{Aggregator, AnalyzeOptions, Profile};
use crate::format::decode::Event;
use crate::format::outdir::{is_output_file, OutDir};
use crate::format::perf_data::{EventDesc, RecordingMeta};
use crate::format::records as rec;
use crate::model::resolve;
use crate::record::{KernelCounts, Tap};
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

/// The [`Tap`] of `record --interval` and `top`.
pub struct Continuous {
    settings: Settings,
    running: Option<Running>,
    /// The writer's outcome, once the recording is over.
    summary: Option<Result<Summary>>,
}

/// The aggregation under way on the draining thread, and the writer.
struct Running {
    aggregator: Aggregator,
    /// The current interval: [start_ns, end_ns), monotonic.
    start_ns: u64,
    end_ns: u64,
    /// Intervals handed to the writer and not written yet (0 or 1).
    pending: Arc<AtomicUsize>,
    /// The current interval ran past its end: the writer was busy.
    late: bool,
    /// Intervals that ran past their end.
    stretched: u64,
    /// What the kernel had counted when the interval began, and at the
    /// last read.
    kernel_at_start: Option<KernelCounts>,
    kernel_now: Option<KernelCounts>,
    /// The first read at or after the interval's end: where it ends, so
    /// that its records and the kernel's count cover the same faults (a
    /// count read at any other pass, up to 250 ms after the edge, made
    /// busy intervals read "110% captured", their neighbours "90%").
    edge: Option<(u64, KernelCounts, u64)>,
    /// The spread of the read the interval began at (see [`Tap::counted`]).
    spread_at_start: u64,
    tx: Sender<Message>,
    writer: JoinHandle<Result<Summary>>,
}

enum Message {
    /// An interval's counts, to name and write.
    Interval(Box<Closed>),
    /// The recording is over.
    Finish,
}

/// An interval taken from the aggregation.
struct Closed {
    profile: Profile,
    /// [start_ns, end_ns), monotonic.
    start_ns: u64,
    end_ns: u64,
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
    /// What the kernel counted of the same faults, pfprof's own left out
    /// (None when it could not say).
    pub kernel: Option<u64>,
    /// Intervals whose outputs could not be written (disk full, I/O error);
    /// the recording goes on and the next interval tries again.
    pub failed: u64,
    /// Intervals that ran longer than asked because the writer was still
    /// busy with the one before (a starved CPU, a slow disk).
    pub stretched: u64,
}

impl Continuous {
    /// A tap writing intervals as `settings` says.
    pub fn new(settings: Settings) -> Continuous {
        Continuous {
            settings,
            running: None,
            summary: None,
        }
    }

    /// What was written, once the recording is over; the writer's error if
    /// it failed.
    pub fn summary(&mut self) -> Result<Summary> {
        self.summary
            .take()
            .unwrap_or_else(|| Err(anyhow::anyhow!("the recording did not start")))
    }
}

impl Tap for Continuous {
    fn start(&mut self, events: &[EventDesc], meta: &RecordingMeta) -> Result<()> {
        let has_entries = events.iter().any(|e| {
            rec::FAULT_ENTRY_USER.is_named(&e.name) || rec::FAULT_ENTRY_KERNEL.is_named(&e.name)
        });
        let clock = Clock::now();
        let (tx, rx) = channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let writer = Writer {
            settings: self.settings.clone(),
            clock,
            symbolizer: None,
            written: Vec::new(),
            summary: Summary::default(),
        };
        let done = Arc::clone(&pending);
        let writer = std::thread::Builder::new()
            .name("pfprof-intervals".into())
            .spawn(move || writer.run(rx, &done))
            .context("cannot start the interval thread")?;
        let ledger = events.iter().any(|e| rec::MUNMAP.is_named(&e.name));
        let aggregator = Aggregator::new(
            self.settings.options.clone(),
            meta.clone(),
            has_entries,
            ledger,
        );
        let interval_ns = self.settings.interval.as_nanos() as u64;
        self.running = Some(Running {
            aggregator,
            start_ns: clock.monotonic_ns,
            end_ns: clock.monotonic_ns + interval_ns,
            pending,
            late: false,
            stretched: 0,
            kernel_at_start: None,
            kernel_now: None,
            edge: None,
            spread_at_start: 0,
            tx,
            writer,
        });
        Ok(())
    }

    fn event(&mut self, time: u64, event: Event<'_>) {
        let interval_ns = self.settings.interval.as_nanos() as u64;
        if let Some(r) = &mut self.running {
            if r.edge.is_some_and(|(at, ..)| time >= at) {
                r.close_at_edge(interval_ns);
            }
            r.aggregator.feed(event);
        }
    }

    fn settled(&mut self, cutoff: u64) {
        let interval_ns = self.settings.interval.as_nanos() as u64;
        if let Some(r) = &mut self.running {
            // u64::MAX: everything was drained; `finish` follows.
            if cutoff != u64::MAX && r.edge.is_some_and(|(at, ..)| cutoff >= at) {
                r.close_at_edge(interval_ns);
            }
        }
    }

    fn wants_counts(&self, now: u64) -> bool {
        (self.running.as_ref()).is_some_and(|r| now >= r.end_ns && r.edge.is_none())
    }

    fn counted(&mut self, at: u64, kernel: KernelCounts, spread: u64) {
        if let Some(r) = &mut self.running {
            r.kernel_now = Some(kernel);
            // Counted from the events' start: the first interval's too.
            r.kernel_at_start.get_or_insert_with(KernelCounts::default);
            if at >= r.end_ns && r.edge.is_none() {
                r.edge = Some((at, kernel, spread));
            }
        }
    }

    fn finish(&mut self) {
        let Some(mut r) = self.running.take() else {
            return;
        };
        // The partial interval, up to now, with the count read after the
        // events stopped and every record was drained.
        let now = crate::sys::monotonic_ns().clamp(r.start_ns + 1, r.end_ns);
        r.hand_over(now, r.kernel_now, 0);
        let _ = r.tx.send(Message::Finish);
        let stretched = r.stretched;
        self.summary = Some(
            r.writer
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("the interval thread panicked")))
                .map(|summary| Summary {
                    stretched,
                    ..summary
                }),
        );
    }
}

impl Running {
    /// The records have reached the edge (the first count read after the
    /// interval's end, a pass later than the end at most): hands the
    /// interval to the writer, ending there. While the writer is busy the
    /// interval runs on, to the edge of a later read.
    fn close_at_edge(&mut self, interval_ns: u64) {
        let Some((at, counts, spread)) = self.edge.take() else {
            return;
        };
        if self.pending.load(Ordering::Acquire) > 0 {
            self.late = true;
            return;
        }
        self.hand_over(at, Some(counts), spread);
        self.end_ns = if std::mem::take(&mut self.late) {
            self.stretched += 1;
            at + interval_ns
        } else {
            // On the grid, not drifting by a pass each interval.
            (self.end_ns + interval_ns).max(at + 1)
        };
    }

    /// Hands the interval ending at `end_ns` to the writer, with the
    /// kernel's count then and that read's spread; the next starts there.
    fn hand_over(&mut self, end_ns: u64, kernel: Option<KernelCounts>, spread: u64) {
        let mut profile = self.aggregator.take();
        if let (Some(meta), Some(start), Some(now)) =
            (profile.meta.as_mut(), self.kernel_at_start, kernel)
        {
            meta.kernel_minor = Some(now.minor.saturating_sub(start.minor));
            meta.kernel_major = Some(now.major.saturating_sub(start.major));
            let edges = self.spread_at_start + spread;
            meta.kernel_spread = (edges > 0).then_some(edges);
            self.kernel_at_start = Some(now);
            self.spread_at_start = spread;
        }
        self.pending.fetch_add(1, Ordering::AcqRel);
        let closed = Closed {
            profile,
            start_ns: self.start_ns,
            end_ns,
        };
        if self.tx.send(Message::Interval(Box::new(closed))).is_err() {
            // The writer stopped: its error waits in `finish`.
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
        self.start_ns = end_ns;
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

/// The thread that names and writes each interval.
struct Writer {
    settings: Settings,
    clock: Clock,
    /// Kept from one interval to the next: each module is opened once and
    /// each address symbolized once per run.
    symbolizer: Option<Symbolizer>,
    /// The interval directories written, oldest first.
    written: Vec<PathBuf>,
    summary: Summary,
}

impl Writer {
    fn run(mut self, rx: Receiver<Message>, pending: &AtomicUsize) -> Result<Summary> {
        for message in rx {
            match message {
                Message::Interval(closed) => {
                    self.close(*closed);
                    pending.fetch_sub(1, Ordering::AcqRel);
                }
                Message::Finish => break,
            }
        }
        Ok(self.summary)
    }

    /// Writes an interval and keeps the newest `--keep N`. An interval that
    /// cannot be written is counted and said, and what it wrote removed: a
    /// long run outlives a full disk.
    fn close(&mut self, closed: Closed) {
        if let Err(e) = self.write(closed) {
            self.summary.failed += 1;
            eprintln!("pfprof: error: {}", crate::error::one_line(&e));
        }
        // An interval's names and outputs were freed: memory a long run
        // does not keep.
        let trim = std::time::Instant::now();
        crate::sys::give_back_freed_memory();
        if std::env::var_os("PFPROF_TIMING").is_some() {
            let heap = crate::sys::heap_figures();
            eprintln!(
                "pfprof: timing: after the interval (at {:.3} s), trimmed in {} ms, heap in use {} MB, \
                 free {} MB, mapped {} MB",
                crate::sys::monotonic_ns() as f64 / 1e9,
                trim.elapsed().as_millis(),
                heap.in_use >> 20,
                heap.held_free >> 20,
                heap.mapped >> 20
            );
        }
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

    /// Names the interval with the run's symbolizer.
    fn resolve(&mut self, mut profile: Profile) -> crate::model::Model {
        name_jit_frames(&mut profile);
        let kept = self.symbolizer.take();
        if let Some(symbolizer) = kept {
            profile.symbolizer = symbolizer;
        }
        let (model, mut symbolizer) = resolve::resolve(profile);
        // The modules no interval of the last minute needed go: the run's
        // memory follows what the host runs now.
        let minute = Duration::from_secs(60).as_nanos();
        let interval = self.settings.interval.as_nanos().max(1);
        symbolizer.forget_unused(u64::try_from(minute.div_ceil(interval)).unwrap_or(1));
        self.symbolizer = Some(symbolizer);
        model
    }

    /// Writes the interval into its directory.
    fn write(&mut self, closed: Closed) -> Result<()> {
        let Closed {
            mut profile,
            start_ns,
            end_ns,
        } = closed;
        let wall_ns = end_ns.saturating_sub(start_ns);
        if let Some(meta) = profile.meta.as_mut() {
            meta.wall_ns = wall_ns;
            meta.data_bytes = 0;
        }
        let timing = std::env::var_os("PFPROF_TIMING").is_some();
        let started = std::time::Instant::now();
        let (keys, stack_nodes, pids) = (
            profile.counts.len(),
            profile.stacks.len(),
            profile.process_counts.len(),
        );
        let model = self.resolve(profile);
        let resolved = started.elapsed();
        let totals = &model.report.totals;
        let faults = totals.faults.total();
        self.summary.faults += faults;
        self.summary.lost += totals.lost;
        if let (Some(minor), Some(major)) = (totals.kernel_minor, totals.kernel_major) {
            let others = (minor + major).saturating_sub(totals.pfprof_faults);
            *self.summary.kernel.get_or_insert(0) += others;
        }
        let dir = match &self.settings.destination {
            Destination::Dir(dir) => dir.clone(),
            Destination::Channel(tx) => {
                // The screen has gone: the recording stops soon.
                let _ = tx.send(Interval { model, wall_ns });
                self.summary.written += 1;
                return Ok(());
            }
        };
        let start_epoch_ns = self.clock.epoch_of(start_ns);
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
        if timing {
            let heap = crate::sys::heap_figures();
            eprintln!(
                "pfprof: timing: interval of {keys} keys, {stack_nodes} stack nodes, {pids} processes, \
                 {} rows: resolve {:.3} s, outputs {:.3} s; heap in use {} MB, free {} MB, mapped {} MB",
                model.samples.len(),
                resolved.as_secs_f64(),
                (started.elapsed() - resolved).as_secs_f64(),
                heap.in_use >> 20,
                heap.held_free >> 20,
                heap.mapped >> 20,
            );
        }
        if self.settings.verbose {
            let totals = &model.report.totals;
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
        let ours = name.to_str().is_some_and(is_output_file);
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
                crate::error::exit::CONFIG,
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
                    crate::error::exit::CONFIG,
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
