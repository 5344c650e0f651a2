//! Recording: runs the command under per-CPU perf events and streams every
//! kernel record into `pfprof.data`: unparsed with `--call-graph fp`; in
//! dwarf mode (the default) through [`dwarf::StackRewriter`], which replaces
//! each fault sample's user stack copy by the call chain unwound from it.
//!
//! Per online CPU, four events follow the command and all its threads and
//! children (`inherit`), enabled at `exec` (`enable_on_exec`):
//! - `minor-faults` and `major-faults` (software events, counted by the kernel
//!   when a fault completes) with the faulting data address and the user call
//!   chain (dwarf mode: user registers and stack); the first also carries the
//!   side-band records (mmap2, comm/exec, fork/exit) that rebuild the
//!   address spaces later, the drain giving each mapping its file's
//!   build-id ([`build_ids`]);
//! - `exceptions:page_fault_user` / `page_fault_kernel` (tracepoints at fault
//!   entry) for the x86 error code: present / write / instruction fetch.
//!
//! All four share the CPU's ring buffer (`SET_OUTPUT`). With the BPF
//! collector (the default, [`bpf`]) a program on the fault events writes
//! each fault into the CPU's BPF ring buffer instead, and suppresses the
//! events' own samples and the tracepoints': the perf rings carry the
//! side-band records. One thread drains the rings, merged by time, and
//! appends whole chunks to the file, then a `FINISHED_ROUND`, so the reader
//! can merge the CPUs by time.

pub mod bpf;
mod btf;
pub(crate) mod build_ids;
pub(crate) mod dwarf;
mod events;
mod feed;
pub(crate) mod files;
mod kernel_text;
mod limits;
mod lost;
mod memory_events;
mod remembered;
pub mod ring;
mod session;
mod stack_tops;
pub(crate) mod synth;

use std::ffi::CString;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::error::{exit, CodedError};
use crate::format::call_graph::CallGraph;
use crate::format::decode::Event;
use crate::format::perf_data::RecordClass;
use crate::format::perf_data::{EventDesc, Exit, PerfDataWriter, RecordMode, RecordingMeta};
use crate::sys::procfs;
use crate::sys::{self, ExitStatus};
use bpf::FaultCollector;
use dwarf::{Handling, StackRewriter};
use events::{
    chains_recorded, event_specs, find_tracepoints, main_probe, EventSpec, MainProbe, SpecOptions,
    Tracepoints,
};
pub use files::HeldFile;
pub use limits::{default_mmap_pages, parse_mmap_pages, MAX_MMAP_PAGES};
use limits::{
    ensure_open_files, memlock_figures, memlock_fix, min_ring_pages, open_files_error, ring_error,
    side_band_pages, SPARE_FDS,
};
use ring::{BpfRing, Ring};
use session::{raise_recorder_priority, Session};

/// What to record and how.
#[derive(Debug, Clone)]
pub struct RecordConfig {
    /// What to follow.
    pub target: Target,
    /// Stop after this long (attach and system-wide modes; a command is
    /// signalled with SIGTERM when it runs longer).
    pub duration: Option<Duration>,
    /// Where `pfprof.data` goes; None: nowhere (`record --interval`, whose
    /// [`Tap`] analyses the records as they come).
    pub data_path: Option<PathBuf>,
    /// Record one fault in N (1 = every fault).
    pub period: u64,
    /// Data pages of each CPU's ring buffer (power of two), as asked with
    /// `--mmap-pages`: mapped as asked or refused. None: the default
    /// ([`default_mmap_pages`]), shrunk with a warning when the locked-memory
    /// limits do not allow it.
    pub mmap_pages: Option<usize>,
    /// Keep kernel frames in call chains.
    pub kernel_callchains: bool,
    /// How user call chains are collected.
    pub call_graph: CallGraph,
    /// Record the fault-entry tracepoints (error codes: COW and access types).
    pub tracepoints: bool,
    /// Record what the resident-page ledger needs besides the faults: the
    /// syscalls that give memory back and the kernel's RSS counters.
    pub resident: bool,
    /// Which faults to sample (the others are only counted).
    pub class: RecordClass,
    /// Under `sudo`, run the command as root instead of the invoking user.
    pub run_as_root: bool,
    /// In dwarf mode, record through the BPF collector when the kernel
    /// allows it ([`bpf`]); false: perf's stack copies.
    pub bpf: bool,
    /// Hold the file of each executable mapping open until the recording
    /// ends, for the build-id cache ([`Recorded::held_files`]).
    pub hold_files: bool,
}

/// What a recording follows.
#[derive(Debug, Clone)]
pub enum Target {
    /// A command pfprof starts (and its threads and children).
    Command(Vec<String>),
    /// Running processes (their present and future threads and children).
    Pids(Vec<i32>),
    /// Every process on every CPU.
    System,
}

/// The outcome of a recording.
#[derive(Debug)]
pub struct Recorded {
    /// How the command ended.
    pub exit: Option<Exit>,
    /// Why the recording stopped early, when writing it failed (it holds
    /// what was written before, readable as a recording pfprof could not
    /// finish).
    pub write_error: Option<String>,
    /// The files of the executable mappings, opened while their processes
    /// ran (with [`RecordConfig::hold_files`]).
    pub held_files: Vec<files::HeldFile>,
    /// Executable mappings whose file was not held (too many open files).
    pub not_held: usize,
}

/// Stops a recording whose file cannot be written (ENOSPC, EIO, EROFS):
/// disables the events, keeps what was written readable, and says what
/// happened, where it stopped, and what becomes of the command.
fn stop_on_write_error(
    writer: &mut PerfDataWriter,
    fds: &[Vec<OwnedFd>],
    error: &io::Error,
    path: &Path,
    start: Instant,
    afterwards: &str,
) -> String {
    for fd in fds.iter().flatten() {
        let _ = sys::disable(fd);
    }
    let seconds = start.elapsed().as_secs_f64();
    let kept = match writer.salvage() {
        Ok(bytes) => format!(
            "the recording stops after {seconds:.1} s at {bytes} bytes of records and stays readable"
        ),
        Err(e) => format!(
            "the recording stops after {seconds:.1} s and could not be marked readable ({e})"
        ),
    };
    let message = format!("cannot write {}: {error}; {kept}", path.display());
    eprintln!("pfprof: error: {message}; {afterwards}");
    message
}

/// Finds the program like `execvp` would, so that "not found" (127) and
/// "not executable" (126) are reported before anything is set up.
pub fn resolve_program(program: &str) -> Result<PathBuf> {
    let check = |p: &Path| -> Option<Result<PathBuf>> {
        let meta = std::fs::metadata(p).ok()?;
        if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
            return Some(Err(CodedError::new(
                exit::CANNOT_EXECUTE,
                format!("cannot execute {}: permission denied", p.display()),
            )
            .into()));
        }
        Some(Ok(p.to_path_buf()))
    };
    if program.contains('/') {
        return check(Path::new(program)).unwrap_or_else(|| {
            Err(CodedError::new(
                exit::NOT_FOUND,
                format!("command not found: {program} (no such file)"),
            )
            .into())
        });
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    let mut denied = None;
    for dir in std::env::split_paths(&path) {
        match check(&dir.join(program)) {
            Some(Ok(p)) => return Ok(p),
            Some(Err(e)) => denied = denied.or(Some(e)),
            None => {}
        }
    }
    Err(denied.unwrap_or_else(|| {
        CodedError::new(exit::NOT_FOUND, format!("command not found: {program}")).into()
    }))
}

/// The command could not be started: which step failed, and the exit code
/// (127 not found, 126 otherwise).
fn spawn_error(
    failed: sys::SpawnError,
    path: &Path,
    credentials: Option<&sys::Credentials>,
) -> anyhow::Error {
    let e = io::Error::from_raw_os_error(failed.errno);
    let user = || {
        credentials.map_or_else(String::new, |c| {
            format!("uid {} gid {} groups {:?}", c.uid, c.gid, c.groups)
        })
    };
    let (code, message) = match failed.step {
        sys::SpawnStep::Exec if failed.errno == libc::ENOENT => (
            exit::NOT_FOUND,
            format!("cannot execute {}: {e}", path.display()),
        ),
        sys::SpawnStep::Exec => (
            exit::CANNOT_EXECUTE,
            format!("cannot execute {}: {e}", path.display()),
        ),
        sys::SpawnStep::SetGroups | sys::SpawnStep::SetGid | sys::SpawnStep::SetUid => (
            exit::CANNOT_EXECUTE,
            format!(
                "cannot run the command as the invoking user ({}): {} failed: {e}; \
                 --run-as-root keeps root",
                user(),
                match failed.step {
                    sys::SpawnStep::SetGroups => "setgroups",
                    sys::SpawnStep::SetGid => "setgid",
                    _ => "setuid",
                }
            ),
        ),
        sys::SpawnStep::ParentDeathSignal => (
            exit::CANNOT_EXECUTE,
            format!("cannot start the command: prctl(PR_SET_PDEATHSIG) failed: {e}"),
        ),
    };
    CodedError::new(code, message).into()
}

fn permission_error(e: &io::Error) -> anyhow::Error {
    let paranoid =
        procfs::kernel_setting("perf_event_paranoid").unwrap_or_else(|| "unknown".into());
    CodedError::new(
        exit::CONFIG,
        format!(
            "perf_event_open: {e}; kernel.perf_event_paranoid is {paranoid}. Run pfprof as root, or allow \
             unprivileged profiling with `sudo sysctl kernel.perf_event_paranoid=1` (tracepoints need root \
             or -1)"
        ),
    )
    .into()
}

struct OpenEvents {
    /// fds[event][cpu]
    fds: Vec<Vec<OwnedFd>>,
    rings: Vec<Ring>,
    /// The events as the recording describes them.
    descs: Vec<EventDesc>,
    /// Unwinds stack copies into call chains (dwarf mode).
    rewriter: Option<StackRewriter>,
    /// The BPF collector's ring buffers, when it records.
    bpf_rings: Vec<BpfRing>,
}

/// Why [`open_events`] failed.
enum OpenFailure {
    /// `perf_event_open` or an ioctl on an event.
    Event(io::Error),
    /// The BPF collector's events could not be opened or attached.
    Collector(io::Error),
    /// Mapping a ring buffer (EPERM: the locked-memory limits).
    Ring(io::Error),
}

impl From<io::Error> for OpenFailure {
    fn from(e: io::Error) -> Self {
        OpenFailure::Event(e)
    }
}

/// Opens every event for every task (a pid/tid, or -1 for all) on every
/// CPU, and maps one ring of `mmap_pages` per CPU. `fds[event]` is ordered
/// CPU-major: all tasks of CPU 0 first.
fn open_events(
    specs: &[EventSpec],
    tasks: &[i32],
    cpus: &[i32],
    mmap_pages: usize,
    collector: Option<&mut FaultCollector>,
) -> std::result::Result<OpenEvents, OpenFailure> {
    let mut fds: Vec<Vec<OwnedFd>> = Vec::new();
    let mut descs = Vec::new();
    let mut kernel_attrs = Vec::new();
    for spec in specs {
        let mut per_cpu = Vec::new();
        let mut ids = Vec::from_iter(spec.written_as);
        for &cpu in cpus {
            for &task in tasks.iter().filter(|_| spec.written_as.is_none()) {
                let fd = sys::perf_event_open(&spec.attr, task, cpu)?;
                if let Some(filter) = spec.filter {
                    sys::set_filter(&fd, filter)?;
                }
                ids.push(sys::event_id(&fd)?);
                per_cpu.push(fd);
            }
        }
        kernel_attrs.push(sys::attr_bytes(&spec.attr).to_vec());
        descs.push(EventDesc {
            attr: sys::attr_bytes(spec.file_attr.as_ref().unwrap_or(&spec.attr)).to_vec(),
            name: spec.name.to_string(),
            ids,
        });
        fds.push(per_cpu);
    }
    let mut rings = Vec::new();
    let per_cpu = tasks.len();
    for cpu_index in 0..cpus.len() {
        let leader = &fds[0][cpu_index * per_cpu];
        let ring = Ring::new(leader, mmap_pages).map_err(OpenFailure::Ring)?;
        for (event, event_fds) in fds.iter().enumerate() {
            // (None of an event pfprof writes.)
            let cpu_fds = event_fds.get(cpu_index * per_cpu..(cpu_index + 1) * per_cpu);
            for (task, fd) in cpu_fds.unwrap_or_default().iter().enumerate() {
                if event > 0 || task > 0 {
                    sys::set_output(fd, leader)?;
                }
            }
        }
        rings.push(ring);
    }
    let (with_collector, bpf_rings) = match collector {
        Some(collector) => (
            true,
            attach_collector(collector, &fds).map_err(OpenFailure::Collector)?,
        ),
        None => (false, Vec::new()),
    };
    // The collector's records, and samples that carry a stack copy, are
    // rewritten while recording.
    let rewriter = if specs.iter().any(|s| s.file_attr.is_some()) {
        let mut attrs: Vec<(&[u8], &[u64], Handling)> = kernel_attrs
            .iter()
            .zip(&descs)
            .zip(specs)
            .map(|((attr, desc), spec)| {
                let how = match spec.file_attr {
                    Some(_) => Handling::Unwind,
                    None => Handling::Pass,
                };
                (&attr[..], &desc.ids[..], how)
            })
            .collect();
        let collector_attr;
        let collector_ids = [bpf::COLLECTOR_ID];
        if with_collector {
            collector_attr = sys::attr_bytes(&FaultCollector::output_attr(&specs[0].attr)).to_vec();
            let how = Handling::Collector {
                minor: descs[0].ids[0],
                major: descs[1].ids[0],
            };
            attrs.push((&collector_attr[..], &collector_ids[..], how));
        }
        // The collector's own event (last) is no event of the recording.
        let names: Vec<&str> = descs.iter().map(|d| d.name.as_str()).collect();
        Some(StackRewriter::new(&attrs, &names).ok_or_else(|| {
            OpenFailure::Event(io::Error::other("cannot parse the events' attributes"))
        })?)
    } else {
        None
    };
    Ok(OpenEvents {
        fds,
        rings,
        descs,
        rewriter,
        bpf_rings,
    })
}

/// Runs the BPF collector on every `minor-faults` and `major-faults` event
/// (`fds[0]`, `fds[1]`), whose own samples it suppresses, and maps its
/// ring buffers.
fn attach_collector(
    collector: &mut FaultCollector,
    fds: &[Vec<OwnedFd>],
) -> io::Result<Vec<BpfRing>> {
    collector.detach_all();
    for (major, event_fds) in [(false, &fds[0]), (true, &fds[1])] {
        for fd in event_fds {
            collector.attach(fd, major)?;
        }
    }
    collector.map_rings()
}

/// The BPF collector for this recording, or why not: dwarf mode only, and
/// only when the kernel lets pfprof load it.
fn load_collector(
    cfg: &RecordConfig,
    ring_pages: usize,
) -> (Option<FaultCollector>, Option<String>) {
    if !cfg.bpf {
        return (None, None);
    }
    let chain = match cfg.call_graph {
        CallGraph::Dwarf { stack_bytes } if stack_bytes > bpf::MAX_STACK_BYTES => {
            let why = format!("it copies at most {} bytes of stack", bpf::MAX_STACK_BYTES);
            return (None, Some(why));
        }
        CallGraph::Dwarf { stack_bytes } => bpf::ChainMode::Dwarf { stack_bytes },
        CallGraph::Fp => bpf::ChainMode::Fp,
        CallGraph::None => bpf::ChainMode::None,
    };
    let settings = bpf::Settings {
        chain,
        kernel_frames: cfg.kernel_callchains,
        own_pid: matches!(cfg.target, Target::System).then(|| std::process::id() as i32),
        every_fault: cfg.period == 1,
        ring_bytes: u32::try_from(ring_pages * 4096).unwrap_or(1 << 31),
        memory: events::ledger_wanted(cfg),
    };
    match FaultCollector::load(settings) {
        Ok(collector) => (Some(collector), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// What watches the records as they are drained, besides the recording:
/// the live stream (classify, print) or the intervals' aggregation, so that
/// recording knows nothing of the later stages. `start` comes once, with the
/// events, before any record; then each record as an [`Event`], in time
/// order (but for samples held back until their process's mappings came);
/// `settled(t)` says every record older than `t` has been handed over
/// (`u64::MAX`: all of them); `finish` ends it.
pub trait Tap {
    /// The events opened, before the first record, and what is known of
    /// the recording then (its metadata but for the outcome).
    fn start(&mut self, events: &[EventDesc], meta: &RecordingMeta) -> Result<()>;
    /// One record, at `time`: faults with their chains (dwarf mode: as
    /// unwound) and their entries when the collector paired them.
    fn event(&mut self, time: u64, event: Event<'_>);
    /// Every record older than `cutoff` has been given to [`Tap::event`].
    fn settled(&mut self, cutoff: u64);
    /// Whether the kernel's counts should be read at the pass starting at
    /// `now` (monotonic); they are read at the last pass in any case.
    fn wants_counts(&self, _now: u64) -> bool {
        false
    }
    /// What the kernel had counted of the followed faults at `at`
    /// (monotonic, the middle of the read): every fault a record stamped
    /// before `at` reports, and none stamped after, but for those of the
    /// read's microseconds, about `spread` either way (twice what a second
    /// read just after counted more).
    fn counted(&mut self, _at: u64, _kernel: KernelCounts, _spread: u64) {}
    /// The recording is over.
    fn finish(&mut self);
}

/// The kernel's own counts of the followed faults since the events were
/// opened: the counting side of the `minor-faults` and `major-faults`
/// events, which counts every fault whether or not its record reached a
/// ring.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KernelCounts {
    /// Minor faults (COW included).
    pub minor: u64,
    /// Major faults.
    pub major: u64,
}

/// The metadata of what is followed: the mode, the command (or the
/// attached processes, or `system-wide`) and the pids asked for.
fn target_meta(target: &Target, existing: &[procfs::Process]) -> RecordingMeta {
    let (mode, command, pids) = match target {
        Target::Command(command) => (RecordMode::Command, command.clone(), Vec::new()),
        Target::Pids(pids) => (
            RecordMode::Attach,
            existing
                .iter()
                .map(|p| format!("{} ({})", p.comm, p.pid))
                .collect(),
            pids.clone(),
        ),
        Target::System => (
            RecordMode::System,
            vec!["system-wide".to_string()],
            Vec::new(),
        ),
    };
    RecordingMeta {
        command,
        mode,
        pids,
        ..RecordingMeta::default()
    }
}

/// The processes to describe once the events run: every one for a
/// system-wide recording, else those attached to that still run, read anew.
fn rescan(target: &Target, attached: &[procfs::Process]) -> Vec<procfs::Process> {
    match target {
        Target::System => procfs::pids()
            .into_iter()
            .filter_map(procfs::process)
            .collect(),
        _ => attached
            .iter()
            .filter_map(|p| procfs::process(p.pid))
            .collect(),
    }
}

/// Runs or attaches, records until the command exits (or the attached
/// processes exit, or `--duration`, or a signal), and writes the recording;
/// `tap` sees every record as it is drained (the live stream).
pub fn record(cfg: &RecordConfig, tap: Option<&mut (dyn Tap + 'static)>) -> Result<Recorded> {
    // From here on, a launched command is reaped on every way out (its
    // guard, `Launched`), whatever fails.
    let mut followed = follow(cfg)?;
    let tracepoints = find_tracepoints(cfg);
    let cpus = procfs::online_cpus();
    let probe = followed.command.as_ref().and_then(|c| main_probe(&c.path));
    let mut plan = open_plan(cfg, &followed, &cpus, tracepoints, probe)?;
    let opened = plan.open(cfg, &followed.tasks, &cpus)?;
    plan.warn(cfg, cpus.len());
    let kernel_text = kernel_text::read();
    let mut session = Session::new(cfg, &followed, plan, opened, cpus.len(), tap, kernel_text)?;
    // Before the events start: on a busy host, describing the running
    // processes at ordinary priority took 67 ms, while the collector, which
    // knows no stack yet, filled the 64 MiB ring with stack copies.
    let priority = raise_recorder_priority();
    session.begin(&mut followed)?;
    let ended = session.drain_until_done(&mut followed)?;
    session.finish(ended, &followed, priority)
}

/// What a recording follows: the tasks its events are opened for, the
/// processes that ran before it, and the command it launched.
struct Followed {
    /// Pids/tids for `perf_event_open` (-1: every task).
    tasks: Vec<i32>,
    /// The processes that already ran (attach and system-wide).
    existing: Vec<procfs::Process>,
    /// The command, paused before its `exec` until the events are open.
    command: Option<Launched>,
}

impl Followed {
    /// A pid fd of the command, which polls readable once it has exited
    /// (none when attached or system-wide, or where pid fds are missing:
    /// a pid fd of one of several attached processes would poll readable
    /// at once after its exit, while the others run on).
    fn exit_fd(&self) -> Option<std::os::fd::OwnedFd> {
        let pid = self.command.as_ref()?.pid();
        sys::pidfd_open(pid).ok()
    }
}

/// The command pfprof runs, owned so that no way out of [`record`] leaves
/// it behind: before its release, [`sys::PausedChild`]'s Drop makes it exit
/// without running and reaps it; after, an early return (poll or waitpid
/// failing) kills and reaps it here rather than leave it running untraced.
struct Launched {
    child: sys::PausedChild,
    /// The program, as `execvp` would find it.
    path: PathBuf,
    /// Whom it runs as (under sudo: the invoking user).
    credentials: Option<sys::Credentials>,
    released: bool,
    /// Reaped, or nothing left to reap (waitpid failed): the pid is not ours.
    reaped: bool,
}

impl Launched {
    /// Forks the command, paused before its `exec`. Under sudo it runs as
    /// the invoking user, with their groups; pfprof keeps root for the events.
    fn spawn(command: &[String], run_as_root: bool) -> Result<Launched> {
        let program = command.first().context("no command given")?;
        let path = resolve_program(program)?;
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .context("command contains a NUL byte")?;
        let argv: Vec<CString> = command
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<std::result::Result<_, _>>()
            .context("argument contains a NUL byte")?;
        let credentials = crate::user::invoking_user()
            .filter(|_| !run_as_root)
            .map(|u| sys::Credentials::of_user(u.uid, u.gid, u.name.as_deref()));
        let signals = sys::catch_termination_signals();
        let options = sys::SpawnOptions {
            credentials: credentials.as_ref(),
            signals: &signals,
        };
        let child = sys::spawn_paused(&c_path, &argv, &options).context("fork failed")?;
        Ok(Launched {
            child,
            path,
            credentials,
            released: false,
            reaped: false,
        })
    }

    fn pid(&self) -> i32 {
        self.child.pid
    }

    /// Lets the command `exec`; when it could not, reaps it and says which
    /// step failed.
    fn release(&mut self) -> Result<()> {
        self.released = true;
        if let Err(failed) = self.child.release() {
            let _ = self.wait(false);
            return Err(spawn_error(failed, &self.path, self.credentials.as_ref()));
        }
        Ok(())
    }

    /// `waitpid`; once it tells the end (or fails), Drop leaves the pid alone.
    fn wait(&mut self, nohang: bool) -> io::Result<Option<ExitStatus>> {
        let waited = sys::wait(self.pid(), nohang);
        if !matches!(waited, Ok(None)) {
            self.reaped = true;
        }
        waited
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        if self.released && !self.reaped {
            sys::kill(self.pid(), libc::SIGKILL);
            let _ = sys::wait(self.pid(), false);
        }
    }
}

/// Launches the command (paused), or finds the processes to attach to (exit
/// 2 for one that does not exist), or every process; termination signals are
/// caught from then on.
fn follow(cfg: &RecordConfig) -> Result<Followed> {
    match &cfg.target {
        Target::Command(command) => {
            let launched = Launched::spawn(command, cfg.run_as_root)?;
            Ok(Followed {
                tasks: vec![launched.pid()],
                existing: Vec::new(),
                command: Some(launched),
            })
        }
        Target::Pids(pids) => {
            let mut existing = Vec::new();
            for &pid in pids {
                let found = procfs::process(pid).ok_or_else(|| {
                    CodedError::new(exit::CONFIG, format!("no such process: {pid}"))
                })?;
                existing.push(found);
            }
            // Each present thread gets its events; future ones inherit them.
            let tasks = existing
                .iter()
                .flat_map(|p| p.tids.iter().copied())
                .collect();
            let _ = sys::catch_termination_signals();
            Ok(Followed {
                tasks,
                existing,
                command: None,
            })
        }
        Target::System => {
            let _ = sys::catch_termination_signals();
            Ok(Followed {
                tasks: vec![-1],
                existing: procfs::pids()
                    .into_iter()
                    .filter_map(procfs::process)
                    .collect(),
                command: None,
            })
        }
    }
}

/// What the events are opened with, lowered one step at a time when the
/// kernel refuses ([`OpenPlan::lower`]).
struct OpenPlan {
    /// Dropped when not permitted.
    tracepoints: Tracepoints,
    probe: Option<MainProbe>,
    collector: Option<FaultCollector>,
    collector_note: Option<String>,
    /// The collector's raw tracepoint programs pairing the fault entries,
    /// when the kernel takes them (see [`SpecOptions::entries_paired`]).
    entry_links: Option<Vec<OwnedFd>>,
    /// The collector's memory programs attached, when the ledger is kept
    /// and the kernel takes them (see [`SpecOptions::memory_watched`]).
    memory_watch: Option<memory_events::MemoryWatch>,
    /// Why the collector does not write the memory events, when it does
    /// not (the tracepoints' events record them then).
    memory_note: Option<String>,
    /// Data pages per ring: as asked, or the default, halved down to
    /// `min_pages` while the locked-memory limits refuse it.
    pages: usize,
    asked_pages: usize,
    min_pages: usize,
    /// The events' file descriptors, and what they are for (messages).
    fds_needed: u64,
    fds_for: String,
}

/// Makes room for the events' file descriptors, loads the BPF collector,
/// and chooses the ring size.
fn open_plan(
    cfg: &RecordConfig,
    followed: &Followed,
    cpus: &[i32],
    tracepoints: Tracepoints,
    probe: Option<MainProbe>,
) -> Result<OpenPlan> {
    // Every event is one fd per CPU and task.
    let options = SpecOptions {
        collector: false,
        entries_paired: false,
        memory_watched: false,
    };
    let events = event_specs(cfg, 1, &tracepoints, probe.as_ref(), options).len();
    let tasks = followed.tasks.len();
    let fds_for = format!("{events} events × {} CPUs × {tasks} task(s)", cpus.len());
    let fds_needed = (events * cpus.len() * tasks) as u64;
    ensure_open_files(fds_needed, &fds_for)?;
    // With the collector, `--mmap-pages` sizes its rings, and the perf
    // rings carry the side-band records only.
    // Under the busy host's mix, one 64 MiB ring for both CPUs lost
    // records in 2 of 6 rounds of 45 s while the drain stalled reading
    // libraries' CFI (all of libLLVM's FDEs: 47 ms) and reading cc1's
    // twice; now those reads are short and once (0 lost in 7 rounds).
    let collector_pages = cfg
        .mmap_pages
        .unwrap_or_else(|| default_mmap_pages(cfg.call_graph, true));
    let (collector, collector_note) = load_collector(cfg, collector_pages);
    let asked_pages = match (&collector, cfg.mmap_pages) {
        (Some(_), _) => side_band_pages(collector_pages),
        (None, Some(pages)) => pages,
        (None, None) => default_mmap_pages(cfg.call_graph, false),
    };
    // The default shrinks (halving) to what the locked-memory limits allow,
    // down to a useful minimum; an explicit size is mapped as asked or refused.
    let min_pages = match cfg.mmap_pages {
        Some(pages) => pages,
        None => min_ring_pages(cfg.call_graph).min(asked_pages),
    };
    Ok(OpenPlan {
        tracepoints,
        probe,
        collector,
        collector_note,
        entry_links: None,
        memory_watch: None,
        memory_note: None,
        pages: asked_pages,
        asked_pages,
        min_pages,
        fds_needed,
        fds_for,
    })
}

impl OpenPlan {
    /// Opens the events and maps the rings, lowering the plan until the
    /// kernel accepts it or refuses for good.
    fn open(&mut self, cfg: &RecordConfig, tasks: &[i32], cpus: &[i32]) -> Result<OpenEvents> {
        loop {
            self.pair_entries_early();
            self.watch_memory_early(cfg);
            let options = SpecOptions {
                collector: self.collector.is_some(),
                entries_paired: self.entry_links.is_some(),
                memory_watched: self.memory_watch.is_some(),
            };
            let specs = event_specs(
                cfg,
                self.pages,
                &self.tracepoints,
                self.probe.as_ref(),
                options,
            );
            match open_events(&specs, tasks, cpus, self.pages, self.collector.as_mut()) {
                Ok(opened) => return Ok(opened),
                Err(failure) => self.lower(failure, cfg, cpus.len())?,
            }
        }
    }

    /// Attaches the collector's raw tracepoint programs that pair each
    /// fault with its entry, before the events open (their records come
    /// from the collector then, not from the tracepoints' events); detaches
    /// them when the plan has lost the collector or the tracepoints.
    fn pair_entries_early(&mut self) {
        let collector = self
            .collector
            .as_ref()
            .filter(|_| self.tracepoints.ids.is_some());
        match collector {
            None => self.entry_links = None,
            Some(collector) if self.entry_links.is_none() => {
                // Refused: the tracepoints' events are opened, and the
                // collector is attached to them (the fallback).
                self.entry_links = collector.pair_entries_raw().ok().map(Vec::from);
            }
            Some(_) => {}
        }
    }

    /// Attaches the collector's memory programs before the events open,
    /// when the ledger is kept: the memory events are then not opened
    /// (`kmem:rss_stat`'s records cost a program that faults in a loop 19%
    /// more CPU; closing the syscalls' events, 0.1 s of wall time). Refused
    /// (no BTF, an older kernel), the events are opened.
    fn watch_memory_early(&mut self, cfg: &RecordConfig) {
        let collector = self.collector.as_ref().filter(|_| {
            self.tracepoints.ids.is_some()
                && self.tracepoints.memory.is_some()
                && events::ledger_wanted(cfg)
        });
        match collector {
            None => self.memory_watch = None,
            Some(collector) if self.memory_watch.is_none() => {
                let anon = sys::procfs::anon_folios_unasked();
                let ids = self.tracepoints.memory.iter().flatten();
                let syscall_ids: Vec<u64> = ids.take(5).copied().collect();
                let watched = collector.watch_memory(anon, &syscall_ids);
                self.memory_note = watched.as_ref().err().map(|e| e.to_string());
                self.memory_watch = watched.ok();
            }
            Some(_) => {}
        }
    }

    /// One step down after `failure` (Ok: try again), or the error that
    /// ends the recording.
    fn lower(&mut self, failure: OpenFailure, cfg: &RecordConfig, cpus: usize) -> Result<()> {
        let e = match failure {
            OpenFailure::Collector(e) => {
                self.collector_note = Some(format!("its events could not be attached: {e}"));
                self.collector = None;
                // The perf rings take every record now (and perf's stack
                // copies need the larger rings).
                self.pages =
                    (cfg.mmap_pages).unwrap_or_else(|| default_mmap_pages(cfg.call_graph, false));
                self.asked_pages = self.pages;
                return Ok(());
            }
            OpenFailure::Ring(e) => {
                if e.raw_os_error() == Some(libc::EPERM) && self.pages / 2 >= self.min_pages {
                    self.pages /= 2;
                    return Ok(());
                }
                return Err(ring_error(&e, self.pages, cpus, cfg.mmap_pages.is_some()));
            }
            OpenFailure::Event(e) => e,
        };
        match e {
            e if e.raw_os_error() == Some(libc::EMFILE) => {
                let (soft, hard) = sys::get_limit(sys::Limit::OpenFiles).unwrap_or((0, 0));
                let needed = self.fds_needed + SPARE_FDS;
                Err(open_files_error(needed, &self.fds_for, soft, hard))
            }
            e if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
                if self.tracepoints.ids.is_none() && self.probe.is_none() {
                    return Err(permission_error(&e));
                }
                // Tracepoints and uprobes need more privilege than software events.
                if self.tracepoints.ids.is_some() {
                    self.tracepoints.note = Some(format!("tracepoints not permitted: {e}"));
                }
                (self.tracepoints.ids, self.probe) = (None, None);
                self.tracepoints.memory = None;
                Ok(())
            }
            // The main-entry probe is a refinement: never fail for it.
            _ if self.probe.is_some() => {
                self.probe = None;
                Ok(())
            }
            e if e.raw_os_error() == Some(libc::ESRCH) => Err(CodedError::new(
                exit::CONFIG,
                format!("a process to attach to has exited: {e}"),
            )
            .into()),
            e => Err(anyhow::Error::new(e).context("perf_event_open failed")),
        }
    }

    /// Says what the recording does without: smaller rings, the
    /// tracepoints, the BPF collector.
    fn warn(&self, cfg: &RecordConfig, cpus: usize) {
        if self.pages < self.asked_pages {
            // A dwarf sample carries 32 KiB of stack, a frame-pointer one ~100 bytes.
            // The collector's rings are BPF maps, which the limits do
            // not cover: only the side-band rings shrink.
            let (rings, bursts, lighter) = if self.collector.is_some() {
                ("side-band ring buffers", "bursts of process starts", "")
            } else if matches!(cfg.call_graph, CallGraph::Dwarf { .. }) {
                (
                    "ring buffers",
                    "fault bursts",
                    ", or record with `--call-graph fp` (samples 100 times smaller)",
                )
            } else {
                ("ring buffers", "fault bursts", "")
            };
            eprintln!(
                "pfprof: warning: {rings} shrunk to {} per CPU (asked for {}) by the locked-memory \
                 limits: {}; {bursts} may lose records (the report counts them). To record with the \
                 full size, {}{lighter}",
                crate::text::human_bytes(self.pages as u64 * 4096),
                crate::text::human_bytes(self.asked_pages as u64 * 4096),
                memlock_figures(cpus),
                memlock_fix(self.asked_pages)
            );
        }
        if let Some(note) = (self.tracepoints.note.as_ref())
            .filter(|_| cfg.tracepoints && cfg.class != RecordClass::Major)
        {
            eprintln!("pfprof: warning: page-fault tracepoints unavailable ({note}); recording minor/major only, COW and access types will be marked unavailable");
        }
        if let Some(note) = (self.memory_note.as_ref())
            .filter(|_| self.collector.is_some() && self.memory_watch.is_none())
        {
            eprintln!(
                "pfprof: note: the BPF collector's memory programs could not be attached \
                 ({note}); the memory events are recorded through their tracepoints, which \
                 do not show pages another task takes back (reclaim)"
            );
        }
        if let Some(note) = &self.collector_note {
            let how = match cfg.call_graph {
                CallGraph::Dwarf { .. } => "perf's stack copies (larger records",
                _ => "perf's own samples (two records a fault",
            };
            eprintln!(
                "pfprof: note: BPF collector unavailable ({note}); recording with {how}: bursts of \
                 faults may lose some, and the report counts them)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn test_config() -> RecordConfig {
        RecordConfig {
            target: Target::Pids(vec![1]),
            duration: None,
            data_path: None,
            period: 1,
            mmap_pages: None,
            kernel_callchains: false,
            call_graph: CallGraph::Fp,
            tracepoints: true,
            resident: true,
            class: RecordClass::All,
            run_as_root: false,
            bpf: true,
            hold_files: false,
        }
    }

    fn test_plan(tracepoints: bool, pages: usize) -> OpenPlan {
        OpenPlan {
            tracepoints: Tracepoints {
                ids: tracepoints.then_some((1, 2)),
                memory: tracepoints.then_some([3, 4, 5, 6, 7, 8]),
                note: None,
                formats: None,
            },
            probe: None,
            collector: None,
            collector_note: None,
            entry_links: None,
            memory_watch: None,
            memory_note: None,
            pages,
            asked_pages: pages,
            min_pages: 8,
            fds_needed: 16,
            fds_for: "4 events × 2 CPUs × 2 task(s)".into(),
        }
    }

    fn event(errno: i32) -> OpenFailure {
        OpenFailure::Event(io::Error::from_raw_os_error(errno))
    }

    /// A refused event lowers the plan a step at a time: the tracepoints
    /// (noted); then the refusal is the error, with its exit code.
    #[test]
    fn refusals_lower_the_plan() {
        let cfg = test_config();
        let mut plan = test_plan(true, 64);
        plan.lower(event(libc::EACCES), &cfg, 2).unwrap();
        assert_eq!(plan.tracepoints.ids, None);
        let note = plan.tracepoints.note.as_deref().unwrap();
        assert!(note.starts_with("tracepoints not permitted"), "{note}");
        let denied = plan.lower(event(libc::EACCES), &cfg, 2).unwrap_err();
        assert_eq!(crate::error::exit_code(&denied), 2);
        let invalid = plan.lower(event(libc::EINVAL), &cfg, 2).unwrap_err();
        assert_eq!(crate::error::exit_code(&invalid), 1);
        assert!(format!("{invalid:#}").starts_with("perf_event_open failed"));
        let gone = plan.lower(event(libc::ESRCH), &cfg, 2).unwrap_err();
        assert_eq!(crate::error::exit_code(&gone), 2);
    }

    /// A ring the locked-memory limits refuse is halved down to the
    /// minimum, then refused with exit 2.
    #[test]
    fn rings_halve_to_the_minimum() {
        let cfg = test_config();
        let mut plan = test_plan(false, 32);
        let ring = || OpenFailure::Ring(io::Error::from_raw_os_error(libc::EPERM));
        plan.lower(ring(), &cfg, 2).unwrap();
        plan.lower(ring(), &cfg, 2).unwrap();
        assert_eq!(plan.pages, 8);
        let refused = plan.lower(ring(), &cfg, 2).unwrap_err();
        assert_eq!(crate::error::exit_code(&refused), 2);
        assert_eq!((plan.pages, plan.asked_pages), (8, 32));
    }

    /// A released command that is still running when `record` leaves early
    /// is killed and reaped by its guard; one never released exits unrun.
    #[test]
    fn launched_command_is_reaped_on_early_return() {
        let mut launched = Launched::spawn(&["sleep".into(), "30".into()], true).unwrap();
        let pid = launched.pid();
        launched.release().unwrap();
        assert!(procfs::alive(pid));
        drop(launched);
        assert!(!procfs::alive(pid), "the command outlived its guard");
        let never = Launched::spawn(&["sleep".into(), "30".into()], true).unwrap();
        let pid = never.pid();
        drop(never);
        assert!(!procfs::alive(pid), "the paused command was left");
    }
}
