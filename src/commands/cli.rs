//! Command line: clap derive types, checked and converted into plain
//! configs for `main`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::analysis::AnalyzeOptions;
use crate::error::{exit, CodedError};
use crate::format::call_graph::CallGraph;
use crate::format::perf_data::RecordClass;
use crate::output::flamegraph::ClassSelection;
use crate::output::stream::StreamKind;
use crate::record::{RecordConfig, Target};

/// pfprof: a page-fault profiler. Records every page fault of a command (its
/// threads and children) with call chains and data addresses, classifies them
/// as minor, major or copy-on-write, and attributes them to code and target.
#[derive(Debug, Parser)]
#[command(name = "pfprof", version, about, long_about = None)]
#[command(
    after_help = "Exit codes: record returns the command's status (128+N if it died from signal N); \
3 if the command succeeded but more faults were lost than --max-lost allows (every output is written); \
4 if the command succeeded but the profile could not be written, or only in part; \
2 permission or configuration error; 126 command cannot be executed; 127 command not found; 1 other errors."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Action {
    /// Run a command under the profiler and write pfprof.data, reports and flame graphs.
    Record(RecordArgs),
    /// Print the report of a recording.
    Report(ReportArgs),
    /// Write folded stacks and SVG flame graphs of a recording.
    Flamegraph(FlamegraphArgs),
    /// Compare two recordings per object, section and class, and write a
    /// differential flame graph.
    Diff(DiffArgs),
    /// Live view: which processes, files and code take page faults now
    /// (system-wide, or -p PID), refreshed every second.
    Top(TopArgs),
    /// Copy the binaries a recording names into its directory
    /// (DIR/.build-id), so that the directory, copied elsewhere, reports the
    /// same names without them.
    Archive(ArchiveArgs),
}

/// `pfprof archive`.
#[derive(Debug, Args)]
pub struct ArchiveArgs {
    /// Recording directory.
    #[arg(value_name = "DIR", default_value = "pfprof-out")]
    pub input: PathBuf,
    /// Read the recorded binaries under DIR first (see `report --symfs`).
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<PathBuf>,
    /// The build-id cache to copy from (default ~/.debug).
    #[arg(long, value_name = "DIR")]
    pub buildid_dir: Option<PathBuf>,
}

/// `pfprof top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Follow these processes (comma-separated pids) instead of every
    /// process; ends when they have all exited.
    #[arg(short = 'p', long = "pid", value_delimiter = ',', value_name = "PID")]
    pub pids: Vec<i32>,
    /// Seconds between refreshes.
    #[arg(short, long, value_name = "SECS", default_value_t = 1.0)]
    pub delay: f64,
    /// Print a plain-text snapshot per refresh instead of the full-screen
    /// view (like `top -b`); the default when stdout is not a terminal.
    #[arg(short, long)]
    pub batch: bool,
    /// Stop after N refreshes.
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
    /// Rows of each table in --batch snapshots.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// How user call chains are collected (see `record --call-graph`): the
    /// code sites need the innermost frame only, so frame pointers (`fp`),
    /// the cheapest, are the default.
    #[arg(long, value_name = "MODE", default_value = "fp", value_parser = CallGraph::parse)]
    pub call_graph: CallGraph,
    /// Data pages (4 KiB) per CPU ring buffer (see `record --mmap-pages`).
    #[arg(long, value_name = "N", value_parser = crate::record::parse_mmap_pages)]
    pub mmap_pages: Option<usize>,
}

/// Analysis options shared by every subcommand.
#[derive(Debug, Args, Clone)]
pub struct AnalysisArgs {
    /// Keep kernel frames in stacks (symbolized from /proc/kallsyms): `record
    /// --kernel` records them; reading a recording made without it is refused.
    #[arg(long)]
    pub kernel: bool,
    /// End the start-up window N ms after exec instead of when `main` is
    /// entered (`diff`: with --startup; `flamegraph`: for startup.svg, so not
    /// with --class).
    #[arg(long, value_name = "N")]
    pub until_ms: Option<f64>,
    /// Show the start-up window of this program in full (its path, file name
    /// or pid; by default the window with the most start-up faults), and
    /// only its faults in startup.svg (every window's otherwise).
    #[arg(long, value_name = "NAME|PID")]
    pub startup_of: Option<String>,
    /// Read the recorded binaries under DIR first (DIR/usr/lib/libc.so.6 for
    /// /usr/lib/libc.so.6), as perf's --symfs: another machine's files. A
    /// binary is used only if its build-id is the recorded one; perf's
    /// build-id cache (~/.debug) and /usr/lib/debug/.build-id are searched too.
    #[arg(long, value_name = "DIR")]
    pub symfs: Option<PathBuf>,
    /// The build-id cache (perf's layout, DIR/.build-id/xx/yyyy/elf) that
    /// `record` fills with the binaries it saw run and every command reads
    /// names from. Default: ~/.debug, as perf.
    #[arg(long, value_name = "DIR")]
    pub buildid_dir: Option<PathBuf>,
}

/// A percentage, 0 to 100.
fn parse_percent(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(pct) if (0.0..=100.0).contains(&pct) => Ok(pct),
        _ => Err(format!("{s:?} is not a percentage from 0 to 100")),
    }
}

/// `pfprof record`.
#[derive(Debug, Args)]
#[command(
    override_usage = "pfprof record [OPTIONS] -- COMMAND [ARGS]...\n       \
pfprof record [OPTIONS] -p PID[,PID...]\n       \
pfprof record [OPTIONS] -a"
)]
pub struct RecordArgs {
    /// Output directory (an existing one is moved to <DIR>.old).
    #[arg(short, long, value_name = "DIR", default_value = "pfprof-out")]
    pub output: PathBuf,
    /// Record one fault in N (1 = every fault).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub period: u64,
    /// Data pages (4 KiB) per CPU ring buffer (the BPF collector's rings
    /// are shared by up to four CPUs and hold their shares), 1..=262144,
    /// rounded up to a power of two; mapped as asked or refused. Default:
    /// 4096 (16 MiB); with
    /// `--call-graph dwarf`, 32 MiB through the BPF collector, else 256 MiB
    /// per CPU within 2 GiB in all and 1/16 of the available memory, at least
    /// 16 MiB (every perf sample reserves its stack copy until pfprof unwinds
    /// it); shrunk with a warning when the locked-memory limits do not allow it.
    #[arg(long, value_name = "N", value_parser = crate::record::parse_mmap_pages)]
    pub mmap_pages: Option<usize>,
    /// How user call chains are collected: `dwarf[,STACK_BYTES]` copies
    /// STACK_BYTES (default 32768) of user stack per fault and unwinds it with
    /// the CFI while recording (complete stacks through code built without
    /// frame pointers); `fp` lets the kernel walk frame pointers (cheaper,
    /// loses callers of code without them); `none` records no user stacks.
    #[arg(long, value_name = "MODE", default_value = "dwarf", value_parser = CallGraph::parse)]
    pub call_graph: CallGraph,
    /// Record with perf's own samples (a fault's software event and its
    /// tracepoint, and in dwarf mode perf's stack copies) instead of
    /// pfprof's BPF collector, which writes one record per fault with only
    /// the stack bytes there are and, in dwarf mode, remembers unwinds.
    #[arg(long)]
    pub no_bpf: bool,
    /// Record minor/major faults only, without the fault-entry tracepoints
    /// (no COW or access types; about half the recording size; refused with
    /// `--class cow`).
    #[arg(long)]
    pub no_tracepoints: bool,
    /// Also record who holds resident memory (resident.svg at the peak,
    /// resident-exit.svg at exit; with --interval, each interval's
    /// resident.folded at its peak and resident-exit.folded at its end):
    /// the syscalls that give memory back (munmap, madvise, mremap, brk)
    /// and the kernel's counts of file pages; with -a, every process's
    /// pages first touched while it records. Not by default: it costs a
    /// fixed 25-40 ms (its programs, one more flame graph: 20-27% of
    /// python's 0.15 s imports), within 2% on programs that run for
    /// seconds (python, gcc), and 20-30% more of pfprof's CPU a fault on a
    /// busy host (each fault's ledger entry); more where the kernel refuses
    /// the BPF programs that record these events and the tracepoints'
    /// events are opened.
    #[arg(long)]
    pub resident: bool,
    /// Print one line per fault while recording (`--stream=site` adds the code site).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "fault", require_equals = true)]
    pub stream: Option<StreamArg>,
    /// With --stream: a sequence number instead of the time, and no latency,
    /// so that two runs of a deterministic program print the same lines.
    #[arg(long, requires = "stream")]
    pub fixed_ts: bool,
    /// Do not print the report at the end (warnings about lost faults still are).
    #[arg(short, long)]
    pub quiet: bool,
    /// Rows of each table in the report printed and in report.txt
    /// (report.json holds every row).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Exit with status 3 (after writing every output) if more than PCT percent
    /// of the faults were lost: those the kernel counted for the sampled
    /// classes (divided by --period) but the recording does not hold.
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub max_lost: Option<f64>,
    #[command(flatten)]
    /// Analysis options.
    pub analysis: AnalysisArgs,
    /// Attach to running processes (comma-separated pids) instead of starting a command.
    #[arg(short = 'p', long = "pid", value_delimiter = ',', value_name = "PID", conflicts_with_all = ["command", "all_cpus"])]
    pub pids: Vec<i32>,
    /// Record every process on every CPU (system-wide) instead of starting a command.
    #[arg(short = 'a', long = "all-cpus", conflicts_with = "command")]
    pub all_cpus: bool,
    /// Sample only these faults (the others are still counted): `major` keeps the
    /// overhead low on a busy host.
    #[arg(long, value_enum, default_value_t = ClassArg::All)]
    pub class: ClassArg,
    /// Under sudo, run the command as root (by default it runs as the user
    /// who invoked sudo, with their groups; pfprof keeps root for the events).
    #[arg(long, conflicts_with_all = ["pids", "all_cpus"])]
    pub run_as_root: bool,
    /// Stop after this many seconds (attach and system-wide; a command gets SIGTERM).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// With -a or -p: run until stopped, writing one profile per interval of
    /// SECS (at least 1) into a subdirectory of -o DIR named by its start
    /// (UTC): profile.pb.gz, the folded stacks per class, report.json and
    /// report.txt. Records are aggregated as they arrive; no recording is
    /// kept unless --keep-recording.
    #[arg(long, value_name = "SECS")]
    pub interval: Option<f64>,
    /// With --interval: keep the newest N interval directories, deleting
    /// older ones this run wrote.
    #[arg(long, value_name = "N", requires = "interval", value_parser = clap::value_parser!(u64).range(1..))]
    pub keep: Option<u64>,
    /// With --interval: also keep the whole recording, DIR/pfprof.data (it
    /// grows with every fault).
    #[arg(long, requires = "interval")]
    pub keep_recording: bool,
    /// Do not copy the binaries that ran into the build-id cache (perf's
    /// --no-buildid-cache): a report after they are rebuilt or deleted, or
    /// of a process in another mount namespace, then shows addresses.
    #[arg(long)]
    pub no_buildid_cache: bool,
    /// Add no file to the build-id cache once its .build-id holds this many
    /// MiB (nothing is deleted from it).
    #[arg(long, value_name = "MIB", default_value_t = 4096)]
    pub buildid_cache_limit: u64,
    /// The command to profile, after `--`.
    #[arg(trailing_var_arg = true, value_name = "COMMAND", required_unless_present_any = ["pids", "all_cpus"])]
    pub command: Vec<String>,
}

/// Report formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable text.
    Text,
    /// report.json.
    Json,
}

/// `pfprof report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Recording directory or pfprof.data file.
    #[arg(short, long, value_name = "PATH", default_value = "pfprof-out")]
    pub input: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Analyse the intact part of a truncated or damaged recording.
    #[arg(long)]
    pub partial: bool,
    /// Only the start-up analysis (faults from exec until `main`).
    #[arg(long)]
    pub startup: bool,
    /// Rows of each table in the text report (the JSON holds every row).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    #[command(flatten)]
    /// Analysis options.
    pub analysis: AnalysisArgs,
}

/// `pfprof diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The first recording (before), directory or pfprof.data.
    pub before: PathBuf,
    /// The second recording (after).
    pub after: PathBuf,
    /// Compare the start-up windows only.
    #[arg(long)]
    pub startup: bool,
    /// Compare the resident memory at the peak (KiB per object, section and
    /// kind; diff.svg by the stack of the fault that made each page
    /// present): both recordings made with `record --resident`.
    #[arg(long, conflicts_with = "startup")]
    pub resident: bool,
    /// Output format of the comparison.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Where diff.folded and diff.svg go (default: the second recording's directory).
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Rows of the text comparison: the N largest changes (the JSON holds every row).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Colour diff.svg by the change of each frame's share of its run's
    /// faults (the first run scaled to the second's total), instead of by
    /// the change of raw fault counts.
    #[arg(long)]
    pub normalize: bool,
    #[command(flatten)]
    /// Analysis options.
    pub analysis: AnalysisArgs,
}

/// `pfprof flamegraph`.
#[derive(Debug, Args)]
pub struct FlamegraphArgs {
    /// Recording directory or pfprof.data file.
    #[arg(short, long, value_name = "PATH", default_value = "pfprof-out")]
    pub input: PathBuf,
    /// Output directory (default: the recording's directory).
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Which class to draw (default: every class and `all`).
    #[arg(long, value_enum)]
    pub class: Option<GraphArg>,
    /// Analyse the intact part of a truncated or damaged recording.
    #[arg(long)]
    pub partial: bool,
    #[command(flatten)]
    /// Analysis options.
    pub analysis: AnalysisArgs,
}

impl RecordArgs {
    /// What to follow: the pids of `-p`, every process with `-a`, else the
    /// command.
    pub fn target(&self) -> Target {
        if !self.pids.is_empty() {
            Target::Pids(self.pids.clone())
        } else if self.all_cpus {
            Target::System
        } else {
            Target::Command(self.command.clone())
        }
    }

    /// Why `--resident` cannot be given with the other options, if it
    /// cannot (the ledger needs every fault).
    fn resident_refused(&self) -> Option<&'static str> {
        if !self.resident {
            return None;
        }
        if self.period != 1 {
            Some("not with --period above 1")
        } else if !matches!(self.class, ClassArg::All | ClassArg::Cow) {
            Some("not with --class major or minor")
        } else if self.no_tracepoints {
            Some("not with --no-tracepoints")
        } else {
            None
        }
    }

    /// Refuses options that do not go together (exit 2), before anything
    /// starts.
    pub fn check(&self) -> Result<(), CodedError> {
        if self.no_tracepoints && self.class == ClassArg::Cow {
            return Err(CodedError::new(
                exit::CONFIG,
                "--class cow needs the fault-entry tracepoints (COW faults are told by them); drop --no-tracepoints",
            ));
        }
        if self.duration.is_some_and(|d| !(d > 0.0 && d.is_finite())) {
            return Err(CodedError::new(
                exit::CONFIG,
                "--duration must be a positive number of seconds",
            ));
        }
        if let Some(why) = self.resident_refused() {
            return Err(CodedError::new(
                exit::CONFIG,
                format!("--resident needs every fault: {why}"),
            ));
        }
        let Some(secs) = self.interval else {
            return Ok(());
        };
        if matches!(self.target(), Target::Command(_)) {
            return Err(CodedError::new(
                exit::CONFIG,
                "--interval profiles running processes: use it with -a or -p PID (a command's one profile is `pfprof record -- COMMAND`)",
            ));
        }
        if !(secs >= 1.0 && secs.is_finite()) {
            return Err(CodedError::new(
                exit::CONFIG,
                "--interval must be at least 1 second",
            ));
        }
        if self.stream.is_some() {
            return Err(CodedError::new(
                exit::CONFIG,
                "--interval and --stream cannot be combined",
            ));
        }
        Ok(())
    }

    /// What `record` is asked to do; `data_path`: where the recording goes
    /// (None: nowhere).
    pub fn record_config(&self, target: Target, data_path: Option<PathBuf>) -> RecordConfig {
        RecordConfig {
            target,
            duration: self.duration.map(Duration::from_secs_f64),
            data_path,
            period: self.period,
            mmap_pages: self.mmap_pages,
            kernel_callchains: self.analysis.kernel,
            call_graph: self.call_graph,
            tracepoints: !self.no_tracepoints,
            resident: self.resident,
            class: self.class.into(),
            run_as_root: self.run_as_root,
            bpf: !self.no_bpf,
            // --interval names by path as it goes, and fills no cache.
            hold_files: self.interval.is_none() && !self.no_buildid_cache,
        }
    }
}

impl TopArgs {
    /// `--delay` is at least 0.1 seconds (exit 2).
    pub fn check(&self) -> Result<(), CodedError> {
        if !(self.delay >= 0.1 && self.delay.is_finite()) {
            return Err(CodedError::new(
                exit::CONFIG,
                "--delay must be at least 0.1 seconds",
            ));
        }
        Ok(())
    }

    /// The recording `top` shows: every fault of every process (or of
    /// `-p`), kept nowhere.
    pub fn record_config(&self) -> RecordConfig {
        let target = if self.pids.is_empty() {
            Target::System
        } else {
            Target::Pids(self.pids.clone())
        };
        RecordConfig {
            target,
            duration: None,
            data_path: None,
            period: 1,
            mmap_pages: self.mmap_pages,
            kernel_callchains: false,
            call_graph: self.call_graph,
            tracepoints: true,
            resident: false,
            class: RecordClass::All,
            run_as_root: false,
            bpf: true,
            hold_files: false,
        }
    }
}

impl AnalysisArgs {
    /// The analysis these options ask for; `partial` reads a damaged
    /// recording's intact part, `build_id_caches` are searched in order.
    pub fn analyze_options(&self, partial: bool, build_id_caches: Vec<PathBuf>) -> AnalyzeOptions {
        AnalyzeOptions {
            kernel: self.kernel,
            partial,
            until_ms: self.until_ms,
            startup_of: self.startup_of.clone(),
            symfs: self.symfs.clone(),
            build_id_caches,
        }
    }
}

impl FlamegraphArgs {
    /// `--until-ms` shapes startup.svg, which `--class` leaves out (exit 2).
    pub fn check(&self) -> Result<(), CodedError> {
        if self.analysis.until_ms.is_some() && self.class.is_some() {
            return Err(CodedError::new(
                exit::CONFIG,
                "--until-ms shapes startup.svg, which flamegraph writes only without --class",
            ));
        }
        Ok(())
    }
}

impl DiffArgs {
    /// `--until-ms` needs `--startup` (exit 2).
    pub fn check(&self) -> Result<(), CodedError> {
        if self.analysis.until_ms.is_some() && !self.startup {
            return Err(CodedError::new(
                exit::CONFIG,
                "--until-ms ends the start-up window: diff uses it with --startup",
            ));
        }
        Ok(())
    }
}

/// `record --class`: clap's side of [`RecordClass`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClassArg {
    /// Major faults only: cheap enough for a busy host; no tracepoints, so
    /// no latency or access type.
    Major,
    /// Minor faults (COW included) only.
    Minor,
    /// What COW needs: minor faults and the fault-entry tracepoints.
    Cow,
    /// Everything.
    All,
}

impl From<ClassArg> for RecordClass {
    fn from(class: ClassArg) -> RecordClass {
        match class {
            ClassArg::Major => RecordClass::Major,
            ClassArg::Minor => RecordClass::Minor,
            ClassArg::Cow => RecordClass::Cow,
            ClassArg::All => RecordClass::All,
        }
    }
}

/// `flamegraph --class`: clap's side of [`ClassSelection`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphArg {
    /// Minor faults.
    Minor,
    /// Major faults.
    Major,
    /// Copy-on-write faults.
    Cow,
    /// All classes, class as the root frame.
    All,
}

impl From<GraphArg> for ClassSelection {
    fn from(class: GraphArg) -> ClassSelection {
        match class {
            GraphArg::Minor => ClassSelection::Minor,
            GraphArg::Major => ClassSelection::Major,
            GraphArg::Cow => ClassSelection::Cow,
            GraphArg::All => ClassSelection::All,
        }
    }
}

/// `record --stream`: clap's side of [`StreamKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamArg {
    /// Class, address, target, latency.
    Fault,
    /// The same, plus the code site.
    Site,
}

impl From<StreamArg> for StreamKind {
    fn from(kind: StreamArg) -> StreamKind {
        match kind {
            StreamArg::Fault => StreamKind::Fault,
            StreamArg::Site => StreamKind::Site,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `--help` says each exit code as `error::exit` names it.
    #[test]
    fn help_says_the_exit_codes() {
        let help = Cli::command().render_long_help().to_string();
        for (code, meaning) in [
            (exit::OTHER, "other errors"),
            (exit::CONFIG, "permission or configuration error"),
            (
                exit::TOO_MANY_LOST,
                "if the command succeeded but more faults were lost",
            ),
            (
                exit::PROFILE_NOT_WRITTEN,
                "if the command succeeded but the profile could not",
            ),
            (exit::CANNOT_EXECUTE, "command cannot be executed"),
            (exit::NOT_FOUND, "command not found"),
        ] {
            let said = format!("{code} {meaning}");
            assert!(help.contains(&said), "{said}: {help}");
        }
    }

    /// clap's own consistency checks.
    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The command after `--` keeps its own flags.
    #[test]
    fn trailing_command() {
        let cli = Cli::try_parse_from(["pfprof", "record", "-o", "d", "--", "ls", "-l", "--color"])
            .unwrap();
        let Action::Record(args) = cli.action else {
            panic!("not record")
        };
        assert_eq!(args.command, ["ls", "-l", "--color"]);
        assert_eq!(args.output, PathBuf::from("d"));
        // Without `--`, the command's own options follow its name.
        let cli = Cli::try_parse_from(["pfprof", "record", "ls", "-l"]).unwrap();
        let Action::Record(args) = cli.action else {
            panic!("not record")
        };
        assert_eq!(args.command, ["ls", "-l"]);
        // A mistyped option is one, not a command (`-a --intervl 60` was
        // "--all-cpus cannot be used with [COMMAND]").
        let mistyped = Cli::try_parse_from(["pfprof", "record", "-a", "--intervl", "60"]);
        let Err(error) = mistyped else {
            panic!("--intervl was taken")
        };
        assert_eq!(error.kind(), clap::error::ErrorKind::UnknownArgument);
    }

    fn record_args(args: &[&str]) -> RecordArgs {
        let cli = Cli::try_parse_from([&["pfprof", "record"], args].concat()).unwrap();
        let Action::Record(args) = cli.action else {
            panic!("not record")
        };
        args
    }

    /// -p, then -a, else the command.
    #[test]
    fn record_targets() {
        let pids = record_args(&["-p", "1,2"]).target();
        assert!(matches!(pids, Target::Pids(p) if p == [1, 2]));
        assert!(matches!(record_args(&["-a"]).target(), Target::System));
        let command = record_args(&["--", "ls", "-l"]).target();
        assert!(matches!(command, Target::Command(c) if c == ["ls", "-l"]));
    }

    /// Options that do not go together are refused with exit 2, the first
    /// one found named.
    #[test]
    fn record_checks() {
        let refused = |args: &[&str]| {
            record_args(args)
                .check()
                .map_err(|e| (e.code, e.to_string()))
        };
        assert!(refused(&["--", "ls"]).is_ok());
        assert!(refused(&["--no-bpf", "--call-graph", "fp", "--", "ls"]).is_ok());
        assert!(refused(&["-a", "--interval", "1"]).is_ok());
        assert!(refused(&["--resident", "-p", "1"]).is_ok());
        assert!(refused(&["--resident", "-p", "1", "--interval", "5"]).is_ok());
        assert!(refused(&["--resident", "-a"]).is_ok());
        assert!(refused(&["--resident", "-a", "--interval", "5"]).is_ok());
        for (args, says) in [
            (
                &["--class", "cow", "--no-tracepoints", "--", "ls"][..],
                "--class cow",
            ),
            (&["--duration", "0", "--", "ls"], "--duration"),
            (
                &["--interval", "5", "--", "ls"],
                "--interval profiles running",
            ),
            (&["-a", "--interval", "0.5"], "at least 1 second"),
            (&["-a", "--interval", "5", "--stream"], "--stream"),
            (&["--resident", "--period", "10", "--", "ls"], "--period"),
            (&["--resident", "--class", "major", "--", "ls"], "--class"),
            (
                &["--resident", "--no-tracepoints", "--", "ls"],
                "--no-tracepoints",
            ),
        ] {
            let (code, message) = refused(args).unwrap_err();
            assert_eq!(code, 2, "{args:?}");
            assert!(message.contains(says), "{args:?}: {message}");
        }
    }

    /// --interval fills no build-id cache; --no-buildid-cache none either.
    #[test]
    fn record_holds_files_for_the_cache() {
        let holds = |args: &[&str]| {
            let args = record_args(args);
            args.record_config(args.target(), None).hold_files
        };
        assert!(holds(&["--", "ls"]));
        assert!(!holds(&["--no-buildid-cache", "--", "ls"]));
        assert!(!holds(&["-a", "--interval", "2"]));
    }
}
