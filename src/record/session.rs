//! A recording under way: enabling the events, draining the rings into
//! the recording, the unwinder and the tap, and finishing the file.

use std::borrow::Cow;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::bpf::FaultCollector;
use super::build_ids::BuildIds;
use super::dwarf::{EntryEvents, Output, StackRewriter};
use super::feed::{kernel_counts, Feed};
use super::files::{self, MappedFiles};
use super::memory_events::MemoryWatch;
use super::ring::{BpfRing, Ring};
use super::synth;
use super::{
    chains_recorded, rescan, stop_on_write_error, target_meta, Followed, Launched, MainProbe,
    OpenEvents, OpenPlan, RecordConfig, Recorded, Tap, Target, Tracepoints,
};
use crate::format::call_graph::CallGraph;
use crate::format::decode::{Event, LiveDecoder};
use crate::format::events::records;
use crate::format::perf_data::{EventDesc, Exit, PerfDataWriter, RecordingMeta};
use crate::format::recorder::{Collector, RecorderPriority};
use crate::format::records as rec;
use crate::sys::procfs;
use crate::sys::vdso;
use crate::sys::{self, ExitStatus};

/// Where drained records go: the stamps of mapped files, the recording,
/// and the tap.
pub(super) struct Sink<'s, 'a> {
    writer: &'s mut PerfDataWriter,
    files: &'s mut MappedFiles,
    feed: Option<&'s mut Feed<'a>>,
}

impl Output for Sink<'_, '_> {
    fn records(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.files.scan(bytes);
        if let Some(feed) = self.feed.as_deref_mut() {
            feed.bytes(bytes);
        }
        self.writer.write_records(bytes)
    }

    fn wants_events(&self) -> bool {
        self.feed.as_ref().is_some_and(|f| f.decoder.is_none())
    }

    fn event(&mut self, time: u64, event: Event<'_>) {
        if let Some(feed) = self.feed.as_deref_mut() {
            feed.tap.event(time, event);
        }
    }
}

/// `run` (whole records) with the build-ids of its mappings' files filled
/// in ([`BuildIds::fill`]); borrowed when none changes.
fn with_build_ids<'r>(
    run: &'r [u8],
    build_ids: &mut BuildIds,
    filled: &mut Vec<u8>,
) -> Cow<'r, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    for record in records(run).map_while(Result::ok) {
        if record.head.record_type == rec::MMAP2 && build_ids.fill(record.bytes, filled) {
            let out = out.get_or_insert_with(|| Vec::with_capacity(run.len()));
            out.extend_from_slice(&run[copied..record.offset]);
            out.extend_from_slice(filled);
            copied = record.offset + record.bytes.len();
        }
    }
    match out {
        None => Cow::Borrowed(run),
        Some(mut out) => {
            out.extend_from_slice(&run[copied..]);
            Cow::Owned(out)
        }
    }
}

/// One pass over every ring buffer; `last` settles every held-back sample.
pub(super) fn drain_all(
    (rings, bpf_rings, fds): (&mut [Ring], &mut [BpfRing], &[Vec<OwnedFd>]),
    writer: &mut PerfDataWriter,
    (files, build_ids): (&mut MappedFiles, &mut BuildIds),
    rewriter: Option<&mut StackRewriter>,
    mut feed: Option<&mut Feed<'_>>,
    last: bool,
) -> io::Result<usize> {
    // The counts first: a record stamped after them comes in a later pass.
    // (The last pass's are read by `finish`, once everything is drained.)
    if let Some(feed) = feed.as_deref_mut() {
        feed.count(fds, false);
    }
    // Every record stamped before this moment is in a ring buffer by now
    // (give a record 2 ms between its timestamp and its write).
    let cutoff = sys::monotonic_ns().saturating_sub(2_000_000);
    let mut total = 0;
    match rewriter {
        // The collector's records and dwarf stacks: handled in time order
        // across the CPUs (address spaces are kept while recording).
        Some(rewriter) => {
            let mut sink = Sink {
                writer,
                files,
                feed: feed.as_deref_mut(),
            };
            total += rewriter.merge_pass((rings, bpf_rings), cutoff, last, &mut sink)?;
            rewriter.end_pass(cutoff, last, &mut sink)?;
        }
        // Runs of records as the drain walks them; a run that holds a
        // mapping (rare) is walked again, its mappings given their
        // build-ids and their files stamped.
        None => {
            let mut bad = 0;
            let mut filled = Vec::new();
            let has_mapping = std::cell::Cell::new(false);
            for ring in rings.iter_mut() {
                let drained = ring.drain(
                    |record| {
                        if record.head.record_type == rec::MMAP2 {
                            has_mapping.set(true);
                        }
                    },
                    |run| {
                        let run = if has_mapping.replace(false) {
                            let run = with_build_ids(run, build_ids, &mut filled);
                            for record in records(&run).map_while(Result::ok) {
                                files.look(&record);
                            }
                            run
                        } else {
                            Cow::Borrowed(run)
                        };
                        if let Some(feed) = feed.as_deref_mut() {
                            feed.bytes(&run);
                        }
                        writer.write_records(&run)
                    },
                )?;
                total += drained.bytes;
                bad += drained.bad_records;
            }
            if bad > 0 {
                eprintln!("pfprof: warning: {bad} ring buffers held a record smaller than its header; what followed it there was dropped");
            }
        }
    }
    if let Some(feed) = feed {
        feed.settled(cutoff);
    }
    if total > 0 || last {
        writer.end_pass(last)?;
    }
    Ok(total)
}

/// A recording under way: the open events and their rings, the file being
/// written, and the tap that watches the records.
pub(super) struct Session<'a> {
    cfg: &'a RecordConfig,
    /// Where the recording goes (`/dev/null` for none), for messages.
    data_path: &'a Path,
    /// fds[event][cpu]
    fds: Vec<Vec<OwnedFd>>,
    rings: Vec<Ring>,
    /// Rewrites the collector's records and perf's stack copies; holds the
    /// collector.
    rewriter: Option<StackRewriter>,
    /// The BPF collector's ring buffers.
    bpf_rings: Vec<BpfRing>,
    /// The collector's raw tracepoint programs: closed just before the
    /// fault events stop.
    entry_links: Vec<OwnedFd>,
    /// The collector's memory programs, attached: turned off with the
    /// entries' (see [`Session::detach`]).
    memory_watch: Option<MemoryWatch>,
    live: Option<Feed<'a>>,
    files: MappedFiles,
    /// The build-ids the kernel's mmap records lack, without a rewriter
    /// (which fills its own).
    build_ids: BuildIds,
    writer: PerfDataWriter,
    /// What is known before the start; `finish` adds the outcome.
    known: RecordingMeta,
    /// The tracepoints' formats, for perf, when they are recorded.
    tracing_data: Option<crate::format::perf_compat::TracingData>,
    /// The id of the first event's first fd, for the records pfprof writes.
    leader_id: u64,
    /// The kernel's text mapping was written (then its build-id is too).
    kernel_text: bool,
    cpus: usize,
    /// When the command was released or the events enabled.
    start: Instant,
    /// Why writing stopped (the recording holds what came before).
    write_error: Option<String>,
}

impl<'a> Session<'a> {
    /// Prepares the unwinder, starts the tap, creates the recording and
    /// writes the kernel's text mapping first.
    pub(super) fn new(
        cfg: &'a RecordConfig,
        followed: &Followed,
        plan: OpenPlan,
        opened: OpenEvents,
        cpus: usize,
        live: Option<&'a mut (dyn Tap + 'static)>,
        kernel_text: Option<(u64, u64)>,
    ) -> Result<Self> {
        let OpenEvents {
            fds,
            rings,
            descs,
            mut rewriter,
            bpf_rings,
        } = opened;
        let known = known_meta(cfg, &plan, &followed.existing);
        let OpenPlan {
            collector,
            probe,
            tracepoints,
            entry_links: raw_links,
            memory_watch,
            ..
        } = plan;
        let mut entry_links = Vec::new();
        let mut watched = None;
        if let Some(rewriter) = rewriter.as_mut() {
            prepare_rewriter(rewriter, cfg, probe.as_ref());
            if let Some(collector) = collector {
                let entries = pair_entries(&collector, &fds, &descs, tracepoints.ids, raw_links)
                    .map(|(events, links)| {
                        entry_links = links;
                        events
                    });
                let dwarf = matches!(cfg.call_graph, CallGraph::Dwarf { .. });
                rewriter.set_collector(collector, dwarf, entries);
                if let Some((watch, tracepoints)) = memory_watch.zip(tracepoints.memory) {
                    watched = Some(watch);
                    let events =
                        std::array::from_fn(|i| (super::bpf::MEMORY_IDS[i], tracepoints[i] as u16));
                    rewriter.set_memory_events(events);
                }
            }
        }
        let live = match live {
            Some(tap) => {
                tap.start(&descs, &known)
                    .context("cannot decode the events live")?;
                // Without a rewriter the records reach the tap as bytes.
                let decoder = match rewriter {
                    Some(_) => None,
                    None => {
                        Some(LiveDecoder::new(&descs).context("an event attribute did not parse")?)
                    }
                };
                Some(Feed { tap, decoder })
            }
            None => None,
        };
        let files = if cfg.hold_files {
            MappedFiles::holding(hold_limit())
        } else {
            MappedFiles::default()
        };
        let data_path = cfg.data_path.as_deref().unwrap_or(Path::new("/dev/null"));
        let leader_id = descs[0].ids[0];
        let (writer, kernel_text) = create_writer(cfg, data_path, descs, leader_id, kernel_text)?;
        let Tracepoints { ids, formats, .. } = tracepoints;
        Ok(Session {
            cfg,
            data_path,
            fds,
            rings,
            rewriter,
            bpf_rings,
            entry_links,
            memory_watch: watched,
            live,
            files,
            build_ids: BuildIds::default(),
            writer,
            known,
            tracing_data: formats.filter(|_| ids.is_some()),
            leader_id,
            kernel_text,
            cpus,
            start: Instant::now(),
            write_error: None,
        })
    }

    /// Starts what is followed: releases the command (its events start at
    /// its exec), or enables the events and writes down the processes that
    /// run already.
    pub(super) fn begin(&mut self, followed: &mut Followed) -> Result<()> {
        self.start = Instant::now();
        if let Some(command) = followed.command.as_mut() {
            return command.release();
        }
        // Enable first, then read the address spaces, stamped as of before
        // the enabling: a process that starts in between is then described
        // twice (the kernel's records follow and replace the stamped ones),
        // never not at all. Read before (and before the rings are mapped,
        // which takes a second), every process started in between had
        // mappings nobody recorded, and all its samples were held back.
        // The files' build-ids and CFI are read before, though: on a busy
        // host the rings filled while the large libraries' `.eh_frame` was
        // read and the first interval lost thousands of records.
        let mut build_ids = BuildIds::default();
        if let Some(rewriter) = self.rewriter.as_mut() {
            for p in &followed.existing {
                for m in p
                    .maps
                    .iter()
                    .filter(|m| m.prot & libc::PROT_EXEC as u32 != 0)
                {
                    rewriter.preload(p.pid, m, build_ids.of(p.pid, m).as_deref());
                }
            }
        }
        let time = sys::monotonic_ns();
        for fd in self.fds.iter().flatten() {
            sys::enable(fd).context("cannot enable the events")?;
        }
        let enabled = Instant::now();
        let now_running = rescan(&self.cfg.target, &followed.existing);
        synthesize(
            (&now_running, &mut build_ids),
            &mut self.writer,
            &mut self.files,
            self.leader_id,
            time,
            self.rewriter.as_mut(),
            self.live.as_mut(),
        )
        .context("cannot write the recording")?;
        if std::env::var_os("PFPROF_TIMING").is_some() {
            eprintln!(
                "pfprof: timing: the processes running were written {} ms after the events started",
                enabled.elapsed().as_millis()
            );
        }
        let existing = &followed.existing;
        let threads: usize = existing.iter().map(|p| p.tids.len()).sum();
        let what = match self.cfg.target {
            Target::System => format!("all CPUs ({} processes running)", existing.len()),
            _ => format!("{} process(es), {threads} thread(s)", existing.len()),
        };
        let until = self
            .cfg
            .duration
            .map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()));
        eprintln!("pfprof: recording {what}{until}; Ctrl-C to stop");
        Ok(())
    }
}

/// How long a recording runs before the syscalls' records move to their own
/// tracepoints (see [`MemoryWatch`]): shorter runs keep the raw
/// tracepoints, which cost every syscall more but close at once.
const SYSCALLS_BY_EVENTS_AFTER: Duration = Duration::from_secs(2);

/// Why the drain loop ended.
pub(super) struct Ended {
    /// How the command ended (None: attached or system-wide).
    exit: Option<ExitStatus>,
    /// The signal that stopped an attached or system-wide recording.
    stopped_by: Option<i32>,
}

/// Waits up to `poll_ms` for the command's exit (its pid fd, `exit_fd`),
/// or 1 ms without one. Once the events' task has exited, their fds poll
/// readable at once: a real-time drain polling them would spin, and keep
/// the exiting command, forked onto its CPU, from finishing its exit
/// (15-60 ms here, until the scheduler moved it).
fn wait_for_exit(exit_fd: Option<&OwnedFd>, poll_ms: i32) -> Result<()> {
    let Some(fd) = exit_fd else {
        std::thread::sleep(Duration::from_millis(1));
        return Ok(());
    };
    sys::poll_readable(&[fd.as_raw_fd()], poll_ms).context("poll failed")?;
    Ok(())
}

impl Session<'_> {
    /// Drains the rings until the command exits (attached and system-wide:
    /// until a signal, `--duration`, the processes' exit or a write error).
    pub(super) fn drain_until_done(&mut self, followed: &mut Followed) -> Result<Ended> {
        let poll_fds: Vec<_> = self.rings.iter().map(Ring::raw_fd).collect();
        // The collector's rings wake nobody (a wake-up costs the faulting
        // thread an interrupt): they are drained every 10 ms, when 1 GB/s
        // of stack copies fills 10 MB of a 64 MiB ring. (Polling again at
        // once after a heavy pass was tried: it keeps the real-time drain
        // on its CPU, which the kernel's real-time throttling may then
        // stop, and the fork storm lost records in one test run of four.)
        let poll_ms = if self.bpf_rings.is_empty() { 50 } else { 10 };
        let mut largest_pass = 0;
        let mut last_checkpoint = Instant::now();
        let mut forwarded = 0;
        let afterwards = afterwards(followed);
        // PFPROF_TIMING=1 says which passes were long (a stalled drain
        // loses records once the rings fill).
        let timing = std::env::var_os("PFPROF_TIMING").is_some();
        let mut checkpoints = 0u64;
        let mut last_pass_end = Instant::now();
        // Set once the events' fds hung up: the command's pid fd, if any.
        let mut hung_up: Option<Option<OwnedFd>> = None;
        loop {
            if self.write_error.is_some() {
                std::thread::sleep(Duration::from_millis(50));
            } else {
                match &hung_up {
                    Some(exit_fd) => wait_for_exit(exit_fd.as_ref(), poll_ms)?,
                    None => {
                        let polled =
                            sys::poll_readable(&poll_fds, poll_ms).context("poll failed")?;
                        if polled == sys::Polled::HungUp {
                            hung_up = Some(followed.exit_fd());
                        }
                    }
                }
                let pass = Instant::now();
                if timing && pass.duration_since(last_pass_end) > Duration::from_millis(50) {
                    eprintln!(
                        "pfprof: timing: {} ms between two drain passes (at {:.3} s)",
                        pass.duration_since(last_pass_end).as_millis(),
                        sys::monotonic_ns() as f64 / 1e9
                    );
                }
                let before = timing.then(sys::thread_usage);
                let drained = self.drain(false);
                largest_pass = largest_pass.max(*drained.as_ref().unwrap_or(&0));
                if let Some(before) = before.filter(|_| pass.elapsed() > Duration::from_millis(50))
                {
                    let after = sys::thread_usage();
                    eprintln!(
                        "pfprof: timing: a drain pass took {} ms (at {:.3} s; {} MB; user {} ms, sys {} ms, faults {} minor {} major, {} waits, {} preempted)",
                        pass.elapsed().as_millis(),
                        sys::monotonic_ns() as f64 / 1e9,
                        drained.as_ref().unwrap_or(&0) >> 20,
                        (after.user_us - before.user_us) / 1000,
                        (after.sys_us - before.sys_us) / 1000,
                        after.minor_faults - before.minor_faults,
                        after.major_faults - before.major_faults,
                        after.waits - before.waits,
                        after.preempted - before.preempted,
                    );
                }
                let drained = drained.and_then(|_| {
                    if last_checkpoint.elapsed() > Duration::from_secs(1) {
                        last_checkpoint = Instant::now();
                        self.settle_memory_watch();
                        self.writer.checkpoint()?;
                        checkpoints += 1;
                        if timing && checkpoints % 10 == 0 {
                            self.print_collector_counters();
                            eprintln!(
                                "pfprof: timing: the largest pass of the last 10 s drained {} MB",
                                std::mem::take(&mut largest_pass) >> 20
                            );
                        }
                    }
                    Ok(())
                });
                last_pass_end = Instant::now();
                if let Err(e) = drained {
                    self.stop(&e, afterwards);
                    if followed.command.is_none() {
                        return Ok(Ended {
                            exit: None,
                            stopped_by: None,
                        });
                    }
                }
            }
            let ended = match followed.command.as_mut() {
                Some(command) => self.watch_command(command, &mut forwarded)?,
                None => self.attached_ended(&followed.existing),
            };
            if let Some(ended) = ended {
                return Ok(ended);
            }
        }
    }

    /// PFPROF_TIMING's line on the collector's remembered stacks: how
    /// often the kernel sent a chain, and how often the words it compared
    /// had changed; and the copies it cut while its ring was filling.
    fn print_collector_counters(&self) {
        let collector = self.rewriter.as_ref().and_then(StackRewriter::collector);
        if let Some(Ok(counters)) = collector.map(|c| c.counters()) {
            let stats = self.rewriter.as_ref().map(|r| r.stats());
            let (samples, remembered, pressed) =
                stats.map_or((0, 0, 0), |s| (s.samples, s.remembered, s.pressed_copies));
            eprintln!(
                "pfprof: timing: the collector sent {} remembered chains and found {} changed; \
                 {samples} user stacks, {} unwound, {pressed} copies cut to 1 KiB",
                counters.cache_hits,
                counters.cache_stale,
                samples.saturating_sub(remembered),
            );
        }
    }

    /// One pass over every ring; `last` settles every held-back sample.
    fn drain(&mut self, last: bool) -> io::Result<usize> {
        drain_all(
            (&mut self.rings, &mut self.bpf_rings, &self.fds),
            &mut self.writer,
            (&mut self.files, &mut self.build_ids),
            self.rewriter.as_mut(),
            self.live.as_mut(),
            last,
        )
    }

    /// Detaches the collector's programs from the events of the faults'
    /// entries (before those events stop, or the entries of faults no
    /// longer completed would count as unfinished), and turns its memory
    /// programs off (what they would write now comes after the last drain).
    fn detach(&mut self) {
        self.entry_links.clear();
        if let Some(watch) = self.memory_watch.take() {
            watch.stop();
        }
    }

    /// Once the recording has run [`SYSCALLS_BY_EVENTS_AFTER`], moves the
    /// syscalls' records to their own tracepoints (see [`MemoryWatch`]).
    fn settle_memory_watch(&mut self) {
        let Some(watch) = self.memory_watch.as_mut() else {
            return;
        };
        if watch.tried_events() || self.start.elapsed() < SYSCALLS_BY_EVENTS_AFTER {
            return;
        }
        let moved = watch.move_to_events();
        if std::env::var_os("PFPROF_TIMING").is_some() {
            match moved {
                Ok(()) => eprintln!(
                    "pfprof: timing: the syscalls' records come from their own tracepoints from {:.1} s",
                    self.start.elapsed().as_secs_f64()
                ),
                Err(e) => eprintln!("pfprof: timing: the syscalls' tracepoints refused: {e}"),
            }
        }
    }

    /// Stops writing after `error` (the events are disabled); `afterwards`
    /// says what becomes of the processes.
    fn stop(&mut self, error: &io::Error, afterwards: &str) {
        self.detach();
        let message = stop_on_write_error(
            &mut self.writer,
            &self.fds,
            error,
            self.data_path,
            self.start,
            afterwards,
        );
        self.write_error = Some(message);
    }

    /// The command's end once it has exited; until then, passes on the
    /// termination signals pfprof gets, and SIGTERM at `--duration`.
    fn watch_command(&self, command: &mut Launched, forwarded: &mut u32) -> Result<Option<Ended>> {
        let (sig, count) = sys::pending_signal();
        if let Some(status) = command.wait(true).context("waitpid failed")? {
            return Ok(Some(Ended {
                exit: Some(status),
                stopped_by: None,
            }));
        }
        if count > *forwarded {
            // Ctrl-C reaches the command through the terminal too; SIGTERM
            // or SIGHUP sent to pfprof alone are passed on.
            sys::kill(command.pid(), sig);
            *forwarded = count;
        }
        if self.cfg.duration.is_some_and(|d| self.start.elapsed() >= d) && *forwarded == 0 {
            sys::kill(command.pid(), libc::SIGTERM);
            *forwarded = count.max(1);
        }
        Ok(None)
    }

    /// The end of an attached or system-wide recording: a signal,
    /// `--duration`, or every attached process gone.
    fn attached_ended(&self, existing: &[procfs::Process]) -> Option<Ended> {
        let (sig, count) = sys::pending_signal();
        let ended = |stopped_by| {
            Some(Ended {
                exit: None,
                stopped_by,
            })
        };
        if count > 0 {
            return ended(Some(sig));
        }
        if self.cfg.duration.is_some_and(|d| self.start.elapsed() >= d) {
            return ended(None);
        }
        if matches!(self.cfg.target, Target::Pids(_))
            && !existing.iter().any(|p| procfs::alive(p.pid))
        {
            return ended(None);
        }
        None
    }

    /// Stops following, drains what is left, and completes the recording
    /// with what perf needs and pfprof's facts.
    pub(super) fn finish(
        mut self,
        ended: Ended,
        followed: &Followed,
        priority: RecorderPriority,
    ) -> Result<Recorded> {
        let wall_ns = self.start.elapsed().as_nanos() as u64;
        // Descendants that outlive the command, and attached processes, are no
        // longer followed (they keep running untouched).
        self.detach();
        for fd in self.fds.iter().flatten() {
            let _ = sys::disable(fd);
        }
        let now = if followed.command.is_some() {
            "the command has ended"
        } else {
            afterwards(followed)
        };
        if self.write_error.is_none() {
            if let Err(e) = self.drain(true) {
                self.stop(&e, now);
            }
        }
        let lost_samples_whole = self.write_error.is_none()
            && self.bpf_rings.is_empty()
            && super::lost::lost_samples(&self.fds, sys::monotonic_ns())
                .is_some_and(|records| self.writer.write_records(&records).is_ok());
        // Everything drained: the analysis that follows is ordinary work.
        if priority == RecorderPriority::Fifo {
            let _ = sys::ordinary_priority();
        }
        let exit = ended.exit.map(|status| match status {
            ExitStatus::Exited(code) => Exit::Code(code),
            ExitStatus::Signaled(sig) => Exit::Signal(sig),
        });
        let (sig, count) = sys::pending_signal();
        self.add_perf_features();
        let (held_files, not_held) = self.files.take_held();
        // Paired in the kernel, the entries left without completion are
        // the collector's count.
        let unfinished_entries = (self.rewriter.as_ref())
            .and_then(StackRewriter::collector_pairs)
            .and_then(|collector| collector.counters().ok())
            .map(|c| c.unfinished_entries);
        let kernel = kernel_counts(&self.fds);
        let collector = self.rewriter.as_ref().and_then(StackRewriter::collector);
        let meta = RecordingMeta {
            exit: exit.clone(),
            unfinished_entries,
            collector_skipped: collector.zip(kernel).and_then(|(c, k)| c.skipped(k)),
            lost_samples_whole,
            kernel_minor: kernel.map(|k| k.minor),
            kernel_major: kernel.map(|k| k.major),
            unwind: self.rewriter.as_ref().map(|r| r.stats().clone()),
            interrupted_by: (count > 0).then_some(sig).or(ended.stopped_by),
            data_bytes: self.writer.data_size(),
            wall_ns,
            root_pid: followed.command.as_ref().map(Launched::pid),
            recorder_priority: Some(priority),
            files: std::mem::take(&mut self.files).into_stamps(),
            ..std::mem::take(&mut self.known)
        };
        drop(std::mem::take(&mut self.rings));
        if let Some(live) = self.live.as_mut() {
            live.count(&self.fds, true);
            live.settled(u64::MAX);
            live.tap.finish();
        }
        if self.write_error.is_none() {
            let written = self.writer.finish(
                &meta,
                &procfs::hostname(),
                &procfs::os_release(),
                self.cpus as u32,
            );
            if let Err(e) = written {
                self.stop(&e, now);
            }
        }
        // Closing a tracepoint's perf event waits for an RCU grace period
        // (about 30 ms each, one after the other: `--resident` has six):
        // on a thread of their own while the analysis runs. Everything was
        // disabled and drained; the process's exit waits for the thread.
        let events = std::mem::take(&mut self.fds);
        let closer = std::thread::Builder::new().name("pfprof-close".into());
        let _ = closer.spawn(move || drop(events));
        Ok(Recorded {
            exit,
            write_error: self.write_error,
            held_files,
            not_held,
        })
    }

    /// What perf needs to read the file: the tracepoints' formats, the
    /// build-ids of the files (and kernel, and vDSO) the samples may fall
    /// in, and the architecture.
    fn add_perf_features(&mut self) {
        use crate::format::perf_compat as compat;
        use crate::format::perf_data::{build_id_section, BuildIdEntry};
        use crate::format::perf_data::{HEADER_ARCH, HEADER_BUILD_ID, HEADER_TRACING_DATA};
        if let Some(formats) = &self.tracing_data {
            self.writer
                .add_feature(HEADER_TRACING_DATA, formats.encode());
        }
        let mut build_ids: Vec<BuildIdEntry> = self
            .files
            .build_ids()
            .map(|(path, id)| BuildIdEntry {
                kernel: false,
                build_id: id.to_vec(),
                path,
            })
            .collect();
        if self.kernel_text {
            if let Some(id) = procfs::kernel_build_id() {
                build_ids.push(BuildIdEntry {
                    kernel: true,
                    build_id: id,
                    path: "[kernel.kallsyms]".to_string(),
                });
            }
        }
        // The vDSO's, as perf writes it: a report names `[vdso]` frames only
        // on a kernel with this vDSO (sys::vdso).
        if let Some(id) = vdso::own_build_id() {
            build_ids.push(BuildIdEntry {
                kernel: false,
                build_id: id,
                path: vdso::PATH.to_string(),
            });
        }
        self.writer
            .add_feature(HEADER_BUILD_ID, build_id_section(&build_ids));
        self.writer.add_feature(HEADER_ARCH, compat::arch_section());
    }
}

/// What becomes of the processes when the recording stops early: after a
/// write error the command runs on untraced, and pfprof still waits for it,
/// so that its exit status passes through.
pub(super) fn afterwards(followed: &Followed) -> &'static str {
    if followed.command.is_some() {
        "the command keeps running, untraced, until it exits; pfprof waits for it"
    } else {
        "the processes keep running, untouched"
    }
}

/// Tells the unwinder what it cannot learn from the records: pfprof's own
/// pid (system-wide), the stack size asked for, the main-entry probe, and
/// whether samples are written (a recording) and with chains.
pub(super) fn prepare_rewriter(
    rewriter: &mut StackRewriter,
    cfg: &RecordConfig,
    probe: Option<&MainProbe>,
) {
    rewriter.set_samples(cfg.data_path.is_some(), chains_recorded(cfg));
    if let Target::System = cfg.target {
        rewriter.set_own_pid(std::process::id() as i32);
    }
    if let CallGraph::Dwarf { stack_bytes } = cfg.call_graph {
        rewriter.set_stack_requested(stack_bytes as usize);
    }
    if let Some(probe) = probe {
        // The uprobe runs main's first instruction out of line, in the
        // `[uprobes]` page: a fault there is unwound from main's entry.
        let path = std::fs::canonicalize(Path::new(std::ffi::OsStr::from_bytes(
            probe.path.as_bytes(),
        )))
        .unwrap_or_default();
        rewriter.set_main_probe(path.as_os_str().as_bytes(), probe.file_offset);
    }
}

/// Lets the collector pair each fault with its entry in the kernel, when
/// the entry tracepoints are recorded (`fds[2]`, `fds[3]`, of tracepoint
/// ids `ids`): the recording then gets the entries from the rewriter. When
/// the kernel refuses, the tracepoints' own records stay (noted).
///
/// Raw tracepoint programs do it where the kernel allows them: then they
/// were attached before the events opened (`raw_links`), and the
/// tracepoints' perf events were never opened (their ids in the recording
/// are pfprof's, for the entries the rewriter writes). Returns the raw
/// programs' attachments too, which must be closed before the fault events
/// stop ([`FaultCollector::pair_entries_raw`]).
pub(super) fn pair_entries(
    collector: &FaultCollector,
    fds: &[Vec<OwnedFd>],
    descs: &[EventDesc],
    ids: Option<(u64, u64)>,
    raw_links: Option<Vec<OwnedFd>>,
) -> Option<(EntryEvents, Vec<OwnedFd>)> {
    let (user_tp, kernel_tp) = ids?;
    let events = EntryEvents {
        user: (*descs.get(2)?.ids.first()?, user_tp as u16),
        kernel: (*descs.get(3)?.ids.first()?, kernel_tp as u16),
    };
    if let Some(links) = raw_links {
        return Some((events, links));
    }
    let (user, kernel) = (fds.get(2)?.first()?, fds.get(3)?.first()?);
    if let Err(e) = collector.pair_entries(user, kernel) {
        eprintln!(
            "pfprof: note: the BPF collector cannot pair faults with their entries ({e}); the \
             tracepoints' records are kept (larger recording)"
        );
        return None;
    }
    Some((events, Vec::new()))
}

/// What is known of the recording before it starts, for the tap.
pub(super) fn known_meta(
    cfg: &RecordConfig,
    plan: &OpenPlan,
    existing: &[procfs::Process],
) -> RecordingMeta {
    RecordingMeta {
        pfprof_version: env!("CARGO_PKG_VERSION").to_string(),
        tracepoints: plan.tracepoints.ids.is_some(),
        tracepoints_note: plan.tracepoints.note.clone(),
        period: cfg.period,
        call_graph: cfg.call_graph,
        kernel_callchains: cfg.kernel_callchains,
        pfprof_pid: Some(std::process::id() as i32),
        class: cfg.class,
        // Where the faults go: the collector's rings, when it records.
        ring_bytes_per_cpu: Some(match &plan.collector {
            Some(collector) => u64::from(collector.settings().ring_bytes),
            None => plan.pages as u64 * 4096,
        }),
        collector: Some(if plan.collector.is_some() {
            Collector::Bpf
        } else {
            Collector::Perf
        }),
        max_stack: procfs::kernel_setting("perf_event_max_stack").and_then(|s| s.parse().ok()),
        ..target_meta(&cfg.target, existing)
    }
}

/// Creates the recording (or a writer that discards, without a data path)
/// and writes the kernel's text mapping (`kernel_text`, with the leader's
/// id) first, as perf does (pfprof's reader skips it); says whether it was
/// written.
pub(super) fn create_writer(
    cfg: &RecordConfig,
    data_path: &Path,
    descs: Vec<EventDesc>,
    leader_id: u64,
    kernel_text: Option<(u64, u64)>,
) -> Result<(PerfDataWriter, bool)> {
    let mut writer = match &cfg.data_path {
        Some(path) => PerfDataWriter::create(path, descs),
        None => PerfDataWriter::discarding(descs),
    }
    .with_context(|| format!("cannot create {}", data_path.display()))?;
    if let Some((start, end)) = kernel_text {
        writer
            .write_records(&synth::kernel_mmap(start, end, leader_id))
            .with_context(|| format!("cannot write {}", data_path.display()))?;
    }
    Ok((writer, kernel_text.is_some()))
}

/// Raises the draining thread's priority as far as allowed, and says so
/// when that is not the real-time class; returns which it got.
///
/// The draining thread must keep pace with the traced programs' fault
/// rate (dwarf mode: ~1 µs of work per fault) even when every CPU is
/// busy, or the kernel drops records: it runs in the real-time class
/// when allowed (root), else at nice -10, else as it is. A fork storm of
/// 1,600 threads on two CPUs starved a nice -10 drain (3-42% of the
/// faults lost); SCHED_FIFO lost none. The kernel's real-time throttling
/// still leaves 5% of each CPU to others, and the drain sleeps in poll
/// between passes. The command was forked before, at its own priority.
pub(super) fn raise_recorder_priority() -> RecorderPriority {
    if sys::realtime_priority(1) {
        RecorderPriority::Fifo
    } else if sys::raise_priority(-10) {
        eprintln!(
            "pfprof: note: the recorder runs at nice -10, not in the real-time class (needs root or \
             CAP_SYS_NICE); under heavy load it may fall behind and lose records (the report counts them)"
        );
        RecorderPriority::Nice
    } else {
        eprintln!(
            "pfprof: note: the recorder runs at ordinary priority (real-time class and nice -10 need \
             root or CAP_SYS_NICE); under heavy load it may fall behind and lose records (the report \
             counts them)"
        );
        RecorderPriority::Ordinary
    }
}

/// How many mapped files a recording may hold open: a quarter of the file
/// descriptors left under the soft limit, at most 4,096 (each is one per
/// build-id; a busy host maps a few hundred).
pub(super) fn hold_limit() -> files::HoldLimit {
    let soft = sys::get_limit(sys::Limit::OpenFiles).map_or(1024, |(soft, _)| soft);
    let open = procfs::open_fds().unwrap_or(0);
    files::HoldLimit((soft.saturating_sub(open) / 4).min(4096) as usize)
}

/// Writes what the kernel will not tell us about processes that already run:
/// their parent, name and mappings, stamped `time`, just before the events
/// started; `build_ids` holds those of their files read already.
pub(super) fn synthesize(
    (existing, build_ids): (&[procfs::Process], &mut BuildIds),
    writer: &mut PerfDataWriter,
    files: &mut MappedFiles,
    id: u64,
    time: u64,
    mut rewriter: Option<&mut StackRewriter>,
    feed: Option<&mut Feed<'_>>,
) -> io::Result<()> {
    {
        let mut sink = Sink {
            writer,
            files,
            feed,
        };
        for p in existing {
            let mut records = vec![
                synth::fork(p.pid, p.ppid, time, id),
                synth::comm(p.pid, p.pid, &p.comm, time, id),
            ];
            // With the build-ids the kernel gives for later mappings, so
            // that `report` can tell a file replaced since.
            records.extend(
                p.maps.iter().map(|m| {
                    synth::mmap2_with(p.pid, m, build_ids.of(p.pid, m).as_deref(), time, id)
                }),
            );
            for record in records {
                match rewriter.as_deref_mut() {
                    // The unwinder learns the mappings too.
                    Some(rewriter) => rewriter.feed(&record, &mut sink)?,
                    None => sink.records(&record)?,
                }
            }
        }
    }
    writer.finish_round()
}
