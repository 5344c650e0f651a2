//! `pfprof top`: which processes, files and code take page faults right
//! now. The recorder feeds `record --interval`'s worker
//! ([`crate::commands::continuous`]), which resolves each refresh interval into a
//! model and hands it here. This module owns the two windows of counts (the
//! last interval, and since the start or the last reset), bounded by what
//! is distinct, and their tables; [`screen`] shows them full-screen, and
//! [`batch_text`] as plain text (`--batch`).

pub mod screen;

use std::collections::HashMap;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::analysis::classify::{ClassCounts, FaultClass};
use crate::analysis::AnalyzeOptions;
use crate::commands::continuous::{Continuous, Destination, Interval, Settings};
use crate::model::report::Region;
use crate::model::Model;
use crate::record::{self, RecordConfig};
use crate::text::thousands;

/// Faults by class, and which of the major ones were swap-ins (the rest
/// were read from files).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Every fault by class.
    pub faults: ClassCounts,
    /// Of `faults.major`, those on anonymous memory (swap-ins).
    pub major_swap: u64,
}

impl Counts {
    fn add(&mut self, class: FaultClass, on_file: bool, n: u64) {
        self.faults.add(class, n);
        if class == FaultClass::Major && !on_file {
            self.major_swap += n;
        }
    }

    fn merge(&mut self, other: &Counts) {
        self.faults += other.faults;
        self.major_swap += other.major_swap;
    }

    /// Every class.
    pub fn total(&self) -> u64 {
        self.faults.total()
    }

    /// Major faults on files.
    pub fn major_file(&self) -> u64 {
        self.faults.major - self.major_swap
    }
}

/// A process row's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProcessKey {
    /// Pid.
    pub pid: i32,
    /// Command name.
    pub comm: String,
}

/// A mapping (file or region) and section.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MappingKey {
    /// File path, or `[heap]`, `[anon]`, ...
    pub object: String,
    /// ELF section, or the region (`[anon]`) where there is none.
    pub section: String,
}

/// A code site: the innermost function and where it is, with its target.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SiteKey {
    /// Innermost (possibly inlined) function.
    pub function: String,
    /// `file:line`, else the object holding the code.
    pub location: String,
    /// What the faults touched: object and section.
    pub target: String,
}

/// Faults counted over a stretch of time.
#[derive(Debug, Default, Clone)]
pub struct Window {
    /// Its length.
    pub seconds: f64,
    /// By process: threads seen and faults.
    pub processes: HashMap<ProcessKey, (u32, Counts)>,
    /// By mapping and section.
    pub mappings: HashMap<MappingKey, Counts>,
    /// By code site.
    pub sites: HashMap<SiteKey, Counts>,
    /// All of them.
    pub totals: Counts,
    /// Records lost.
    pub lost: u64,
    /// Stacks cut short.
    pub truncated: u64,
    /// What the kernel counted of the same faults, pfprof's own left out
    /// (None when it could not say).
    pub kernel: Option<u64>,
}

/// Rows a window keeps per table; past it, the smaller half goes (the
/// since-start window of a host that starts a process a second would
/// otherwise grow for ever).
const MAX_ROWS: usize = 20_000;

impl Window {
    /// The counts of one resolved interval.
    pub fn from_model(model: &Model, wall_ns: u64) -> Window {
        let report = &model.report;
        let t = &report.totals;
        let mut window = Window {
            seconds: wall_ns as f64 / 1e9,
            lost: t.lost,
            truncated: t.truncated_stacks,
            kernel: (t.kernel_minor.zip(t.kernel_major))
                .map(|(minor, major)| (minor + major).saturating_sub(t.pfprof_faults)),
            ..Window::default()
        };
        // A process is one row under its own name, whatever its threads
        // are called.
        for p in report
            .processes
            .iter()
            .filter(|p| p.minor + p.major + p.cow > 0)
        {
            let counts = Counts {
                faults: ClassCounts {
                    minor: p.minor,
                    major: p.major,
                    cow: p.cow,
                },
                major_swap: p.major_swap,
            };
            let key = ProcessKey {
                pid: p.pid,
                comm: p.comm.clone(),
            };
            window.processes.insert(key, (p.threads, counts));
        }
        for s in &model.samples {
            let on_file = s.target.region == Region::File;
            let mapping = MappingKey {
                object: s.target.object.clone(),
                section: s
                    .target
                    .section
                    .clone()
                    .unwrap_or_else(|| format!("[{}]", s.target.region)),
            };
            let counts = window.mappings.entry(mapping).or_default();
            counts.add(s.class, on_file, s.faults);
            window.totals.add(s.class, on_file, s.faults);
        }
        for site in &report.sites {
            let location = match (&site.file, site.line) {
                (Some(file), Some(line)) => format!("{}:{line}", crate::text::short(file)),
                (Some(file), None) => crate::text::short(file).to_string(),
                _ => site
                    .object
                    .as_deref()
                    .map_or("?", crate::text::short)
                    .to_string(),
            };
            let target = match &site.target.section {
                Some(section) => format!("{} {section}", crate::text::short(&site.target.object)),
                None => crate::text::short(&site.target.object).to_string(),
            };
            let key = SiteKey {
                function: site.function.clone(),
                location,
                target,
            };
            let on_file = site.target.region == Region::File;
            let counts = window.sites.entry(key).or_default();
            counts.add(site.class, on_file, site.count);
        }
        window
    }

    /// Adds `other` (a later stretch of time) to this window.
    pub fn merge(&mut self, other: &Window) {
        // An empty window takes the other's count; two add up.
        let empty = self.seconds == 0.0;
        self.seconds += other.seconds;
        for (key, (threads, counts)) in &other.processes {
            let row = self
                .processes
                .entry(key.clone())
                .or_insert((*threads, Counts::default()));
            row.0 = row.0.max(*threads);
            row.1.merge(counts);
        }
        for (key, counts) in &other.mappings {
            self.mappings.entry(key.clone()).or_default().merge(counts);
        }
        for (key, counts) in &other.sites {
            self.sites.entry(key.clone()).or_default().merge(counts);
        }
        self.totals.merge(&other.totals);
        self.lost += other.lost;
        self.truncated += other.truncated;
        self.kernel = match (self.kernel, other.kernel) {
            (Some(a), Some(b)) => Some(a + b),
            _ if empty => other.kernel,
            // A window that began without a count cannot say.
            _ => None,
        };
        cap(&mut self.processes, |row| row.1.total());
        cap(&mut self.mappings, Counts::total);
        cap(&mut self.sites, Counts::total);
    }
}

/// Keeps the larger half of a table grown past [`MAX_ROWS`].
fn cap<K: Clone + Eq + std::hash::Hash, V>(table: &mut HashMap<K, V>, total: impl Fn(&V) -> u64) {
    if table.len() <= MAX_ROWS {
        return;
    }
    let mut totals: Vec<u64> = table.values().map(&total).collect();
    let keep = MAX_ROWS / 2;
    let (_, &mut threshold, _) = totals.select_nth_unstable_by(keep, |a, b| b.cmp(a));
    table.retain(|_, v| total(v) > threshold);
}

/// What the screen shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The processes (the default).
    Processes,
    /// Mappings and sections: the files behind major faults first.
    Mappings,
    /// Code sites with their targets.
    Sites,
}

impl View {
    /// Every view, in key order (1, 2, 3).
    pub const ALL: [View; 3] = [View::Processes, View::Mappings, View::Sites];

    /// Its tab title.
    pub fn title(self) -> &'static str {
        match self {
            View::Processes => "Processes",
            View::Mappings => "Files and sections",
            View::Sites => "Code sites",
        }
    }

    /// The next one (Tab).
    pub fn next(self) -> View {
        match self {
            View::Processes => View::Mappings,
            View::Mappings => View::Sites,
            View::Sites => View::Processes,
        }
    }
}

/// The column rows are sorted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    /// All faults.
    Total,
    /// Major faults (file and swap).
    Major,
    /// COW faults.
    Cow,
    /// Minor faults.
    Minor,
}

impl SortBy {
    /// The next one (`s`).
    pub fn next(self) -> SortBy {
        match self {
            SortBy::Total => SortBy::Major,
            SortBy::Major => SortBy::Cow,
            SortBy::Cow => SortBy::Minor,
            SortBy::Minor => SortBy::Total,
        }
    }

    /// Its name, as the status line shows it.
    pub fn name(self) -> &'static str {
        match self {
            SortBy::Total => "total",
            SortBy::Major => "major",
            SortBy::Cow => "cow",
            SortBy::Minor => "minor",
        }
    }

    fn key(self, c: &Counts) -> u64 {
        match self {
            SortBy::Total => c.total(),
            SortBy::Major => c.faults.major,
            SortBy::Cow => c.faults.cow,
            SortBy::Minor => c.faults.minor,
        }
    }
}

/// A table ready to print or draw: a header and rows of cells, the first
/// `text_columns` cells of each row being text (left-aligned), the others
/// figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Column names.
    pub header: Vec<&'static str>,
    /// Leading text columns.
    pub text_columns: usize,
    /// Rows.
    pub rows: Vec<Vec<String>>,
}

const RATE_HEADER: [&str; 6] = [
    "MINOR/s",
    "MAJ-FILE/s",
    "MAJ-SWAP/s",
    "COW/s",
    "TOTAL/s",
    "FAULTS",
];

/// Faults per second over `seconds`, then the count.
fn rate_cells(c: &Counts, seconds: f64) -> [String; 6] {
    let rate = |n: u64| rate(n, seconds);
    [
        rate(c.faults.minor),
        rate(c.major_file()),
        rate(c.major_swap),
        rate(c.faults.cow),
        rate(c.total()),
        thousands(c.total()),
    ]
}

/// `n` faults over `seconds` as a short rate: `950`, `12.3k`, `1.2M`.
pub fn rate(n: u64, seconds: f64) -> String {
    let r = if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    };
    if r >= 999_500.0 {
        format!("{:.1}M", r / 1e6)
    } else if r >= 9_999.5 {
        format!("{:.1}k", r / 1e3)
    } else {
        format!("{r:.0}")
    }
}

/// Sorted by `sort` (largest first), ties by key; at most `limit` rows.
fn sorted<K, V>(
    table: &HashMap<K, V>,
    counts: impl Fn(&V) -> &Counts,
    sort: SortBy,
    tie: impl Fn(&K) -> String,
    limit: usize,
) -> Vec<(&K, &V)> {
    let mut rows: Vec<(&K, &V)> = table.iter().collect();
    rows.sort_by(|a, b| {
        let (ca, cb) = (counts(a.1), counts(b.1));
        (sort.key(cb), cb.total())
            .cmp(&(sort.key(ca), ca.total()))
            .then_with(|| tie(a.0).cmp(&tie(b.0)))
    });
    rows.truncate(limit);
    rows
}

/// The table of `view` over `window`, sorted by `sort`, `limit` rows.
pub fn table(window: &Window, view: View, sort: SortBy, limit: usize) -> Table {
    let secs = window.seconds;
    match view {
        View::Processes => {
            let rows = sorted(
                &window.processes,
                |r| &r.1,
                sort,
                |k| format!("{:010}", k.pid),
                limit,
            );
            Table {
                header: [&["PID", "COMMAND", "THR"][..], &RATE_HEADER].concat(),
                text_columns: 2,
                rows: rows
                    .into_iter()
                    .map(|(k, (threads, c))| {
                        let mut row = vec![k.pid.to_string(), k.comm.clone(), threads.to_string()];
                        row.extend(rate_cells(c, secs));
                        row
                    })
                    .collect(),
            }
        }
        View::Mappings => {
            let rows = sorted(&window.mappings, |c| c, sort, |k| k.object.clone(), limit);
            Table {
                header: [&["FILE OR REGION", "SECTION"][..], &RATE_HEADER].concat(),
                text_columns: 2,
                rows: rows
                    .into_iter()
                    .map(|(k, c)| {
                        let mut row = vec![k.object.clone(), k.section.clone()];
                        row.extend(rate_cells(c, secs));
                        row
                    })
                    .collect(),
            }
        }
        View::Sites => {
            let rows = sorted(&window.sites, |c| c, sort, |k| k.function.clone(), limit);
            Table {
                header: [&["FUNCTION", "FILE:LINE", "TARGET"][..], &RATE_HEADER].concat(),
                text_columns: 3,
                rows: rows
                    .into_iter()
                    .map(|(k, c)| {
                        let mut row =
                            vec![k.function.clone(), k.location.clone(), k.target.clone()];
                        row.extend(rate_cells(c, secs));
                        row
                    })
                    .collect(),
            }
        }
    }
}

/// The summary line of a window: faults per second by class, lost records
/// and cut stacks (shown wherever a number is), pfprof's CPU share.
pub fn summary_line(window: &Window, cpu_percent: Option<f64>) -> String {
    let t = &window.totals;
    let secs = window.seconds;
    let cpu = cpu_percent.map_or(String::new(), |p| format!("; pfprof CPU {p:.0}%"));
    format!(
        "{} faults/s: minor {}, major {} (file {}, swap {}), cow {}; lost records {}; truncated stacks {}{cpu}",
        rate(t.total(), secs),
        rate(t.faults.minor, secs),
        rate(t.faults.major, secs),
        rate(t.major_file(), secs),
        rate(t.major_swap, secs),
        rate(t.faults.cow, secs),
        thousands(window.lost),
        thousands(window.truncated),
    )
}

/// A table as aligned plain text.
pub fn table_text(table: &Table) -> String {
    let mut widths: Vec<usize> = table.header.iter().map(|h| h.len()).collect();
    for row in &table.rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            if i < table.text_columns {
                out.push_str(&format!("{cell:<w$}"));
            } else {
                out.push_str(&format!("{cell:>w$}"));
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    };
    let mut out = line(&mut table.header.iter().copied());
    for row in &table.rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

/// One `--batch` snapshot: the time, the summary and the three tables.
pub fn batch_text(window: &Window, rows: usize, cpu_percent: Option<f64>, when: &str) -> String {
    let kernel = window.kernel.map_or(String::new(), |kernel| {
        format!(" of the kernel's {}", thousands(kernel))
    });
    let mut out = format!(
        "pfprof top {when}, last {:.1} s ({} faults{kernel}): {}\n",
        window.seconds,
        thousands(window.totals.total()),
        summary_line(window, cpu_percent)
    );
    for view in View::ALL {
        let sort = if view == View::Mappings {
            SortBy::Major
        } else {
            SortBy::Total
        };
        out.push('\n');
        out.push_str(&table_text(&table(window, view, sort, rows)));
    }
    out.push('\n');
    out
}

/// What `pfprof top` was asked for.
pub struct TopSettings {
    /// How to record (system-wide or some pids).
    pub record: RecordConfig,
    /// The refresh interval.
    pub delay: Duration,
    /// Plain-text snapshots instead of the screen.
    pub batch: bool,
    /// Stop after this many refreshes.
    pub iterations: Option<u64>,
    /// Rows of each table in batch mode.
    pub rows: usize,
    /// The analysis options.
    pub options: crate::analysis::AnalyzeOptions,
}

/// Runs `pfprof top` until `q`, Ctrl-C, SIGTERM, `-n` refreshes or the
/// end of the processes followed.
pub fn run(settings: TopSettings) -> Result<u8> {
    // A refresh the screen has not taken yet waits; two are enough.
    let (tx, rx) = std::sync::mpsc::sync_channel(2);
    let mut tap = Continuous::new(Settings {
        destination: Destination::Channel(tx),
        interval: settings.delay,
        keep: None,
        options: settings.options.clone(),
        top: settings.rows,
        verbose: false,
    });
    let (batch, iterations, rows) = (settings.batch, settings.iterations, settings.rows);
    let shows = std::thread::Builder::new()
        .name("pfprof-top".into())
        .spawn(move || {
            if batch {
                print_batches(&rx, iterations, rows)
            } else {
                screen::show(&rx, iterations)
            }
        })
        .context("cannot start the screen's thread")?;
    let recorded = record::record(&settings.record, Some(&mut tap));
    // The screen's end, whatever the recording's (it may be waiting to
    // restore the terminal).
    let summary = tap.summary();
    // The screen reads until the last sender has gone, the tap's included.
    drop(tap);
    let shown = shows
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the screen's thread panicked")));
    recorded?;
    summary?;
    shown?;
    Ok(0)
}

/// `--batch`: a snapshot per refresh on stdout, until the recording ends
/// or `iterations` were printed.
fn print_batches(rx: &Receiver<Interval>, iterations: Option<u64>, rows: usize) -> Result<()> {
    use std::io::Write as _;
    let mut cpu = CpuMeter::new();
    for (printed, interval) in (1..).zip(rx) {
        let window = Window::from_model(&interval.model, interval.wall_ns);
        let text = batch_text(&window, rows, cpu.percent(), &utc_now());
        let mut stdout = std::io::stdout().lock();
        if let Err(e) = stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            crate::sys::request_stop();
            // A closed pipe (`| head`) is the reader's way to say enough.
            return if e.kind() == std::io::ErrorKind::BrokenPipe {
                Ok(())
            } else {
                Err(e).context("cannot write to stdout")
            };
        }
        if iterations.is_some_and(|n| printed >= n) {
            crate::sys::request_stop();
            break;
        }
    }
    Ok(())
}

/// pfprof's CPU use between two calls, in percent of one CPU.
pub struct CpuMeter {
    last: Option<(std::time::Instant, f64)>,
}

impl CpuMeter {
    /// A meter starting now.
    pub fn new() -> CpuMeter {
        CpuMeter {
            last: Self::sample(),
        }
    }

    fn sample() -> Option<(std::time::Instant, f64)> {
        let (user, sys) = crate::sys::procfs::own_cpu_seconds()?;
        Some((std::time::Instant::now(), user + sys))
    }

    /// The share since the last call.
    pub fn percent(&mut self) -> Option<f64> {
        let now = Self::sample()?;
        let last = self.last.replace(now)?;
        let wall = now.0.duration_since(last.0).as_secs_f64();
        (wall > 0.0).then(|| (now.1 - last.1) * 100.0 / wall)
    }
}

impl Default for CpuMeter {
    fn default() -> Self {
        CpuMeter::new()
    }
}

/// `2026-11-25 03:10:05 UTC`.
pub fn utc_now() -> String {
    let t = crate::text::Utc::now();
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        t.year, t.month, t.day, t.hour, t.minute, t.second
    )
}

/// `pfprof top`: the recording of `record -a` (or `-p`), shown live.
pub fn command(args: crate::commands::cli::TopArgs) -> Result<u8> {
    use std::io::IsTerminal as _;
    args.check()?;
    run(TopSettings {
        record: args.record_config(),
        delay: std::time::Duration::from_secs_f64(args.delay),
        batch: args.batch || !std::io::stdout().is_terminal(),
        iterations: args.iterations,
        rows: args.top,
        options: AnalyzeOptions::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(minor: u64, major_file: u64, major_swap: u64, cow: u64) -> Counts {
        Counts {
            faults: ClassCounts {
                minor,
                major: major_file + major_swap,
                cow,
            },
            major_swap,
        }
    }

    fn window(rows: &[(i32, &str, Counts)], seconds: f64) -> Window {
        let mut w = Window {
            seconds,
            ..Window::default()
        };
        for (pid, comm, c) in rows {
            let key = ProcessKey {
                pid: *pid,
                comm: comm.to_string(),
            };
            w.processes.insert(key, (1, *c));
            w.totals.merge(c);
        }
        w
    }

    #[test]
    fn rates_are_short() {
        assert_eq!(rate(950, 1.0), "950");
        assert_eq!(rate(12_345, 1.0), "12.3k");
        assert_eq!(rate(1_234_567, 1.0), "1.2M");
        assert_eq!(rate(100, 2.0), "50");
        assert_eq!(rate(5, 0.0), "0");
    }

    #[test]
    fn processes_sort_by_the_chosen_column() {
        let w = window(
            &[
                (10, "build", counts(1000, 0, 0, 10)),
                (20, "db", counts(10, 500, 5, 0)),
                (30, "fork", counts(0, 0, 0, 2000)),
            ],
            1.0,
        );
        let pids = |sort| -> Vec<String> {
            table(&w, View::Processes, sort, 10)
                .rows
                .into_iter()
                .map(|r| r[0].clone())
                .collect()
        };
        assert_eq!(pids(SortBy::Total), ["30", "10", "20"]);
        assert_eq!(pids(SortBy::Major), ["20", "30", "10"]);
        assert_eq!(pids(SortBy::Cow), ["30", "10", "20"]);
        assert_eq!(pids(SortBy::Minor), ["10", "20", "30"]);
        let t = table(&w, View::Processes, SortBy::Major, 1);
        assert_eq!(
            t.rows,
            [["20", "db", "1", "10", "500", "5", "0", "515", "515"]]
        );
    }

    #[test]
    fn windows_add_up_and_stay_bounded() {
        let a = window(&[(1, "a", counts(1, 0, 0, 0))], 1.0);
        let b = window(
            &[(1, "a", counts(2, 1, 0, 0)), (2, "b", counts(0, 0, 0, 3))],
            1.0,
        );
        let mut total = a.clone();
        total.merge(&b);
        assert_eq!(total.seconds, 2.0);
        let key = ProcessKey {
            pid: 1,
            comm: "a".into(),
        };
        assert_eq!(total.processes[&key].1, counts(3, 1, 0, 0));
        assert_eq!(total.totals.total(), 7);

        // A new process every refresh for a long time: the table is capped.
        let mut long = Window::default();
        for pid in 0..(MAX_ROWS as i32 + 10) {
            long.merge(&window(&[(pid, "p", counts(pid as u64, 0, 0, 0))], 1.0));
        }
        assert!(long.processes.len() <= MAX_ROWS, "{}", long.processes.len());
        // The largest stay.
        let biggest = ProcessKey {
            pid: MAX_ROWS as i32 + 9,
            comm: "p".into(),
        };
        assert!(long.processes.contains_key(&biggest));
    }

    #[test]
    fn batch_text_shows_every_table_and_the_losses() {
        let mut w = window(&[(42, "touch", counts(6400, 0, 0, 0))], 2.0);
        w.lost = 7;
        let text = batch_text(&w, 5, Some(12.0), "2026-11-25 03:10:05 UTC");
        assert!(
            text.starts_with(
                "pfprof top 2026-11-25 03:10:05 UTC, last 2.0 s (6,400 faults): 3200 faults/s"
            ),
            "{text}"
        );
        assert!(
            text.contains("lost records 7; truncated stacks 0; pfprof CPU 12%"),
            "{text}"
        );
        assert!(text.contains("\nPID  COMMAND  THR  MINOR/s"), "{text}");
        assert!(text.contains("\n42   touch      1     3200"), "{text}");
        assert!(
            text.contains("FILE OR REGION") && text.contains("FUNCTION"),
            "{text}"
        );
    }
}
