//! Replays a recording through the pipeline: decode → address spaces → pair
//! fault entries with completions → classify → count samples by raw stack and
//! raw target. `record` and `report` both come through here.
//!
//! The hot path (one completed fault) does a few hash lookups and no
//! allocation: frames are looked up in the process's mappings, interned into
//! the [`StackTable`], and the sample is counted under a [`SampleKey`].

mod chain_memo;
pub mod classify;
pub mod foreign;
pub mod latency;
mod page_table;
pub mod process;
mod profile;
pub mod relocation_pages;
pub mod resident;
pub mod stacks;
pub mod startup;
pub mod timeline;

use std::path::Path;

use rustc_hash::FxHashMap;

use crate::analysis::chain_memo::{ChainMemo, MemoKey};
use crate::analysis::classify::{classify, Access, FaultClass, TargetMapping};
use crate::analysis::process::{MapKind, ModuleId, Modules, Place, Process, Processes, USER_TOP};
use crate::analysis::stacks::{FrameKey, StackId, StackTable};
use crate::analysis::startup::StartupTracker;
use crate::format::call_graph::CallGraph;
use crate::format::decode::{
    self, Chain, DecodeError, DecodeStats, Event, FaultEntry, FaultSample, MmapRecord, PairedEntry,
    UnwoundChain,
};
use crate::format::perf_data::{RecordMode, RecordingMeta};
use crate::format::records as rec;
use crate::unwind::{Outcome, StackUnwinder, UserSample, MAX_FRAMES, TRUNCATED_FRAME};
use pfprof_symbolize::{Options as SymbolizerOptions, Symbolizer};

pub use profile::{LostByClass, Owner, ProcessTally, Profile, SampleKey, Tally, TargetKey, Totals};

/// Options of the analysis.
#[derive(Debug, Clone, Default)]
pub struct AnalyzeOptions {
    /// Read the recorded files under this directory first (perf's `--symfs`).
    pub symfs: Option<std::path::PathBuf>,
    /// Build-id caches to read files from, in order (a recording's own
    /// `.build-id`, `--buildid-dir`); empty: `~/.debug`.
    pub build_id_caches: Vec<std::path::PathBuf>,
    /// Keep kernel frames.
    pub kernel: bool,
    /// Analyse the intact part of a damaged recording.
    pub partial: bool,
    /// End start-up this many ms after exec instead of at `main`.
    pub until_ms: Option<f64>,
    /// Show the start-up window of this program (path, file name or pid).
    pub startup_of: Option<String>,
}

struct Analyzer {
    profile: Profile,
    options: AnalyzeOptions,
    pending: FxHashMap<i32, FaultEntry>,
    /// Per thread, the `mremap` it is in, until it returns.
    mremaps: FxHashMap<i32, process::Mremap>,
    scratch: Vec<FrameKey>,
    /// The stacks of recent call chains.
    memo: ChainMemo,
    /// pfprof's own process, in a system-wide recording.
    ignore_pid: Option<i32>,
    /// Frame-pointer chains are cut by the kernel at this many frames.
    fp_max_stack: Option<usize>,
    /// Keep the last classified fault for the live stream.
    live: bool,
    /// The last fault classified (live stream only).
    last: Option<Classified>,
    /// Unwinds perf's `--call-graph dwarf` samples.
    unwinder: Option<StackUnwinder>,
    /// The user frames of the sample being unwound (kept for its buffer).
    unwound: Vec<u64>,
    /// Forget exited processes between intervals (`record --interval`,
    /// where a busy host starts thousands of processes an hour).
    prune_exited: bool,
    /// Count faults per time bucket for the timeline (not for intervals,
    /// which draw none).
    timeline: bool,
    /// Count faults per program, not per process (system-wide).
    by_program: bool,
    /// Processes that exited since the last [`Aggregator::reset`].
    exited: Vec<i32>,
    /// One replay whose profile is then symbolized (not the intervals',
    /// whose profiles go to a symbolizer of the run's): the modules met in
    /// the stacks so far, whose DWARF the profile's symbolizer reads
    /// beside the replay ([`Symbolizer::prepare`]).
    prepared: Option<Vec<bool>>,
}

/// One classified fault, as the live stream shows it.
#[derive(Debug, Clone)]
pub struct Classified {
    /// Time (ns, CLOCK_MONOTONIC).
    pub time: u64,
    /// Class.
    pub class: FaultClass,
    /// Faulting address.
    pub addr_avma: u64,
    /// Where it landed.
    pub target: TargetKey,
    /// Time in the kernel.
    pub latency_ns: Option<u64>,
    /// Innermost user frame.
    pub leaf: Option<FrameKey>,
}

/// The replay analysis fed live, one event at a time (`--stream`).
pub struct LiveAnalyzer(Analyzer);

impl LiveAnalyzer {
    /// A fresh analyzer.
    pub fn new(kernel: bool) -> LiveAnalyzer {
        let mut analyzer = Analyzer::new(AnalyzeOptions {
            kernel,
            ..AnalyzeOptions::default()
        });
        analyzer.live = true;
        LiveAnalyzer(analyzer)
    }

    /// Feeds one event; a completed fault comes back classified.
    pub fn feed(&mut self, event: Event<'_>) -> Option<Classified> {
        self.0.on_event(&event);
        self.0.last.take()
    }

    /// The module with this id.
    pub fn module(&self, id: ModuleId) -> &crate::analysis::process::Module {
        self.0.profile.processes.modules.get(id)
    }
}

/// The analysis fed as records arrive, one interval at a time (`record
/// --interval`, `top`), on the recorder's draining thread: each interval's
/// counts, on raw keys, are taken whole with [`Aggregator::take`] and named
/// elsewhere, while what outlives an interval (address spaces, the module
/// table) stays. Memory is bounded by what is distinct in an interval
/// (stacks, targets, processes) and by the processes alive: nothing is kept
/// per fault, no timeline is counted, and each interval interns its stacks
/// anew.
pub struct Aggregator(Analyzer);

impl Aggregator {
    /// An analyzer for a recording described by `meta` (its mode, call
    /// graph and pfprof's pid); `has_entries` when the fault-entry
    /// tracepoints are recorded, `ledger` when the memory syscalls are
    /// (`record --interval --resident`: the resident pages are kept across
    /// intervals, each seeing its own peak and end).
    pub fn new(
        options: AnalyzeOptions,
        meta: RecordingMeta,
        has_entries: bool,
        ledger: bool,
    ) -> Aggregator {
        let mut analyzer = Analyzer::new(options);
        analyzer.prune_exited = true;
        analyzer.timeline = false;
        analyzer.begin(&meta);
        if ledger && ledger_fits(&meta) {
            analyzer.profile.resident = Some(resident::Ledger::default());
        }
        analyzer.profile.meta = Some(meta);
        analyzer.profile.has_entries = has_entries;
        Aggregator(analyzer)
    }

    /// Feeds one event (in time order).
    pub fn feed(&mut self, event: Event<'_>) {
        self.0.on_event(&event);
    }

    /// Faults counted in the interval so far.
    pub fn faults(&self) -> u64 {
        self.0.profile.totals.by_class.total()
    }

    /// Takes the interval's profile, to resolve on another thread (its
    /// processes by name only, a symbolizer that has opened nothing), and
    /// starts the next one: its counts and stacks start empty, the
    /// processes that exited in it are forgotten.
    pub fn take(&mut self) -> Profile {
        let analyzer = &mut self.0;
        let p = &mut analyzer.profile;
        p.settle();
        let stacks = std::mem::take(&mut p.stacks);
        let resident =
            (p.resident.as_mut()).map(|ledger| ledger.take_interval(&stacks, &mut p.stacks));
        let resident_pids = resident.iter().flat_map(|view| view.owners());
        let pids: std::collections::BTreeSet<i32> = (p.process_counts.keys().copied())
            .chain(p.counts.keys().filter_map(|k| k.owner.pid()))
            .chain(resident_pids)
            .collect();
        let mut totals = std::mem::take(&mut p.totals);
        if !p.has_entries {
            totals.unpaired = 0;
        }
        let mut startup = StartupTracker::new(None, None);
        startup.disable();
        let taken = Profile {
            meta: p.meta.clone(),
            cmdline: p.cmdline.clone(),
            processes: p.processes.names_of(pids),
            process_counts: std::mem::take(&mut p.process_counts),
            stacks,
            counts: std::mem::take(&mut p.counts),
            latencies: std::mem::take(&mut p.latencies),
            timeline: timeline::Timeline::default(),
            totals,
            has_entries: p.has_entries,
            decode: std::mem::take(&mut p.decode),
            startup,
            first_touch: std::mem::take(&mut p.first_touch),
            symbolizer: Symbolizer::new(symbolizer_options(&analyzer.options)),
            sampling: p.sampling,
            any_fault_event: p.any_fault_event,
            unwind: None,
            kernel_build_id: p.kernel_build_id.clone(),
            jit_maps: FxHashMap::default(),
            jit_warnings: Vec::new(),
            run: None,
            resident,
        };
        // The stacks remembered belong to the table given away.
        if std::env::var_os("PFPROF_TIMING").is_some() {
            let memo = &analyzer.memo;
            eprintln!(
                "pfprof: timing: call chains so far: {} found in the memo, {} placed",
                memo.hits, memo.misses
            );
        }
        analyzer.memo.clear();
        for pid in analyzer.exited.drain(..) {
            analyzer.profile.processes.by_pid.remove(&pid);
            analyzer.pending.remove(&pid);
            if let Some(unwinder) = &mut analyzer.unwinder {
                unwinder.forget(pid);
            }
        }
        taken
    }
}

/// Whether a recording described by `meta` can keep the resident-page
/// ledger: every fault sampled.
fn ledger_fits(meta: &RecordingMeta) -> bool {
    meta.period == 1
}

/// What the resident-page ledger needs of a fault: what it did to its
/// page, and the range of the mapping it hit (avma).
type PageFacts = (resident::Effect, Option<(u64, u64)>);

fn target_key(place: Place) -> TargetKey {
    match place {
        Place::Module {
            module,
            kind: MapKind::Pseudo(_),
            ..
        } => TargetKey::Pseudo(module),
        Place::Module {
            module,
            file_offset,
            kind,
        } => TargetKey::Module {
            module,
            file_offset,
            bss_tail: matches!(kind, MapKind::BssTail(_)),
        },
        Place::Region(MapKind::Heap) => TargetKey::Heap,
        Place::Region(MapKind::Stack) | Place::InferredStack => TargetKey::Stack,
        Place::Region(_) => TargetKey::Anon,
        Place::Unknown => TargetKey::Unknown,
    }
}

impl Analyzer {
    fn new(options: AnalyzeOptions) -> Analyzer {
        Analyzer {
            profile: Profile {
                meta: None,
                cmdline: None,
                processes: Processes::default(),
                process_counts: FxHashMap::default(),
                stacks: StackTable::default(),
                counts: FxHashMap::default(),
                latencies: Default::default(),
                timeline: timeline::Timeline::default(),
                totals: Totals::default(),
                has_entries: false,
                decode: DecodeStats::default(),
                startup: StartupTracker::new(options.until_ms, options.startup_of.clone()),
                first_touch: FxHashMap::default(),
                symbolizer: Symbolizer::new(symbolizer_options(&options)),
                sampling: None,
                any_fault_event: false,
                unwind: None,
                kernel_build_id: None,
                jit_maps: FxHashMap::default(),
                jit_warnings: Vec::new(),
                run: None,
                resident: None,
            },
            options,
            pending: FxHashMap::default(),
            mremaps: FxHashMap::default(),
            scratch: Vec::with_capacity(128),
            memo: ChainMemo::default(),
            ignore_pid: None,
            fp_max_stack: None,
            live: false,
            last: None,
            unwinder: None,
            unwound: Vec::new(),
            prune_exited: false,
            timeline: true,
            by_program: false,
            exited: Vec::new(),
            prepared: None,
        }
    }

    /// Unwinds a sample's user stack (perf's `--call-graph dwarf`), and
    /// counts the fault with its kernel part and the frames found.
    fn on_unwound_fault(&mut self, sample: &FaultSample<'_>) {
        let (Some(unwinder), Some((regs, stack))) = (&mut self.unwinder, sample.user_stack) else {
            return self.on_fault(sample);
        };
        let user = UserSample {
            pid: sample.pid,
            time: sample.time,
            kernel_mode: sample.kernel_mode,
            regs,
            stack,
            holes: 0,
            bounded: false,
            pressed: false,
        };
        let mut frames = std::mem::take(&mut self.unwound);
        let outcome = unwinder.unwind_frames(user, &mut frames);
        let truncated = matches!(outcome, Outcome::Truncated(_));
        let chain = UnwoundChain::new(sample.callchain, &frames, truncated);
        self.on_fault(&FaultSample {
            callchain: Some(Chain::Unwound(&chain)),
            user_stack: None,
            ..*sample
        });
        self.unwound = frames;
    }

    /// What the recording's metadata says about how to read it.
    fn begin(&mut self, meta: &RecordingMeta) {
        self.ignore_pid = meta.pfprof_pid.filter(|_| meta.mode == RecordMode::System);
        self.by_program = meta.mode == RecordMode::System;
        self.fp_max_stack = (meta.call_graph == CallGraph::Fp)
            .then(|| meta.max_stack.map_or(MAX_FRAMES, |n| n as usize));
        if meta.mode != RecordMode::Command {
            self.profile.startup.disable();
        }
    }

    /// One event of the recording, in time order: side-band records
    /// change the address spaces (both the analysis's and the unwinder's),
    /// faults are counted.
    fn on_event(&mut self, event: &Event<'_>) {
        match *event {
            Event::Begin(header) => self.on_begin(header),
            Event::Fault(ref sample) if Some(sample.pid) == self.ignore_pid => {
                self.profile.totals.pfprof_faults += 1;
            }
            Event::Fault(ref sample) => self.on_unwound_fault(sample),
            Event::Entry(entry) => self.on_entry(entry),
            Event::Mmap {
                mapping,
                ref path,
                ref build_id,
            } => self.on_mmap(mapping, &path.as_slice(), build_id.clone()),
            Event::Comm {
                pid,
                tid,
                ref name,
                exec,
                time,
            } => self.on_comm(pid, tid, &name.as_slice(), exec, time),
            Event::Fork { pid, ppid, tid } => self.on_fork(pid, ppid, tid),
            Event::MemoryCall {
                pid,
                tid,
                call,
                time,
            } => self.on_memory_call((pid, tid), time, call),
            Event::Exit { pid, tid } => {
                if pid == tid {
                    if let Some(ledger) = &mut self.profile.resident {
                        ledger.exit(pid);
                    }
                    self.profile.processes.on_exit(pid);
                    if self.prune_exited {
                        self.exited.push(pid);
                    }
                }
            }
            Event::Lost { count, kind } => {
                let totals = &mut self.profile.totals;
                totals.lost = totals.lost.saturating_add(count);
                totals.lost_by_class.add(kind, count);
            }
            Event::MainEntry { pid, time } => self.profile.startup.on_main(pid, time),
        }
    }

    /// The recording's header: how faults were sampled, whether user
    /// stacks are to be unwound, and what its metadata says.
    fn on_begin(&mut self, header: &decode::Header) {
        self.profile.sampling = header.sampling;
        self.profile.any_fault_event = header.any_fault_event;
        if header.user_stacks {
            let options = symbolizer_options(&self.options);
            self.unwinder = Some(StackUnwinder::offline(options));
        }
        if let Some(meta) = &header.meta {
            self.begin(meta);
        }
        // The ledger of resident pages: where every fault of the recorded
        // processes is a sample and the syscalls that give memory back
        // were recorded (intervals keep theirs: `Aggregator::new`).
        let calls = header.kinds.contains(&decode::EventKind::Munmap);
        let every_fault =
            header.sampling.is_none() && header.meta.as_ref().map_or(true, ledger_fits);
        if calls && every_fault && !self.prune_exited && !self.live {
            self.profile.resident = Some(resident::Ledger::default());
        }
    }

    /// A fault's entry, waiting for its completion; an entry its thread
    /// left without completion is counted.
    fn on_entry(&mut self, entry: FaultEntry) {
        if entry.addr_avma < USER_TOP && self.pending.insert(entry.tid, entry).is_some() {
            self.profile.totals.entries_without_completion += 1;
        }
    }

    /// A mapping: both address spaces take it (the unwinder's, for perf's
    /// dwarf stacks, and the analysis's: they classify its path alike,
    /// [`crate::sys::maps::MappingPath`]); a file joins the load order of
    /// the process's start-up window.
    fn on_mmap(&mut self, m: MmapRecord, path: &[u8], build_id: Option<Vec<u8>>) {
        if let Some(unwinder) = &mut self.unwinder {
            let avma_range = m.avma..m.avma.saturating_add(m.len);
            let id = build_id.as_deref();
            unwinder.on_mmap(m.pid, avma_range, m.file_offset, m.prot, path, id);
        }
        let kind = self.profile.processes.on_mmap(m, path, build_id);
        if let MapKind::File(module) = kind {
            self.profile.startup.on_module(m.pid, module);
        }
    }

    /// A thread's new name; an exec opens a start-up window and a new
    /// address space.
    fn on_comm(&mut self, pid: i32, tid: i32, name: &[u8], exec: bool, time: u64) {
        if exec {
            if let Some(ledger) = &mut self.profile.resident {
                ledger.exec(pid);
            }
            let comm = String::from_utf8_lossy(name).into_owned();
            self.profile.startup.on_exec(pid, &comm, time);
            if let Some(unwinder) = &mut self.unwinder {
                unwinder.on_exec(pid, time);
            }
        }
        self.profile.processes.on_comm(pid, tid, name, exec);
    }

    /// Whom process `pid`'s faults count for: system-wide (`by_program`)
    /// the program that process `runs_program_of` runs (a child runs its
    /// parent's until it execs), else the process itself.
    fn owner(&mut self, pid: i32, runs_program_of: i32) -> Owner {
        if self.by_program {
            Owner::Program(self.profile.processes.program_of(runs_program_of))
        } else {
            Owner::Process(pid)
        }
    }

    /// A memory syscall of thread `tid` of process `pid`, for the ledger;
    /// an `munmap` removes its range from the process's address space and
    /// an `mremap` that returned moves or resizes its mapping, of which
    /// the kernel writes no mmap record (a realloc of a large block is
    /// one: the faults in it had no target).
    fn on_memory_call(&mut self, (pid, tid): (i32, i32), time: u64, call: decode::MemoryCall) {
        if let Some(ledger) = &mut self.profile.resident {
            ledger.on_call((pid, tid), time, call);
        }
        let done = match call {
            decode::MemoryCall::Munmap { addr, len } => {
                if let Some(space) = self.profile.processes.space_to_change(pid) {
                    space.unmapped(addr..addr.saturating_add(len));
                }
                None
            }
            decode::MemoryCall::Mremap {
                addr,
                old_len,
                new_len,
                flags,
                ..
            } => {
                let asked = process::Mremap {
                    addr,
                    old_len,
                    new_len,
                    flags,
                };
                self.mremaps.insert(tid, asked);
                None
            }
            decode::MemoryCall::MremapDone { ret } => self.mremaps.remove(&tid).zip(
                // -4095..-1: an errno, nothing moved.
                (!(-4095..0).contains(&ret)).then_some(ret as u64),
            ),
            _ => None,
        };
        let Some((asked, new_start)) = done else {
            return;
        };
        if let Some(space) = self.profile.processes.space_to_change(pid) {
            space.remapped(&asked, new_start);
        }
        if let Some(ledger) = &mut self.profile.resident {
            ledger.remapped(pid, asked, new_start);
        }
    }

    /// A new process (a copy of its parent's address space) or thread.
    fn on_fork(&mut self, pid: i32, ppid: i32, tid: i32) {
        if process::is_new_process(pid, ppid, tid) {
            self.profile.startup.on_new_process(pid);
            // The pid is reused: the new process must stay.
            self.exited.retain(|&p| p != pid);
        }
        if let Some(unwinder) = &mut self.unwinder {
            unwinder.on_fork(pid, ppid);
        }
        if self.profile.resident.is_some() && process::is_new_process(pid, ppid, tid) {
            let copied = (self.profile.processes.by_pid.get(&ppid))
                .map(|p| p.space.private_file_ranges())
                .unwrap_or_default();
            // The child runs its parent's program until it execs.
            let owner = self.owner(pid, ppid);
            if let Some(ledger) = &mut self.profile.resident {
                ledger.fork(pid, ppid, owner, &copied);
            }
        }
        self.profile.processes.on_fork(pid, ppid, tid)
    }

    /// Counts one completed fault: pairs it with its entry, classifies it,
    /// finds its stack and start-up window, and adds it to every tally.
    /// The per-fault hot path: nothing here allocates (the frames go to
    /// `self.scratch`).
    fn on_fault(&mut self, sample: &FaultSample<'_>) {
        let entry = match sample.entry {
            Some(paired) => Some(paired),
            None => self.pair_entry(sample),
        };
        let kernel_mode = sample.kernel_mode || entry.is_some_and(|e| e.kernel_mode);
        let latency_ns = entry.map(|e| e.latency_ns);
        let in_exec = match self.profile.processes.by_pid.get_mut(&sample.pid) {
            Some(p) if p.exec_pending => {
                p.exec_pending = kernel_mode;
                kernel_mode
            }
            _ => false,
        };
        let (class, access, target, (effect, mapping)) =
            self.classify_fault(sample, entry, kernel_mode);
        let (stack, cached) = self.stack_of(sample, kernel_mode, in_exec);
        // The ledger's owner is the profile's: a build's thousand compiler
        // runs share sites.
        let owner = self.owner(sample.pid, sample.pid);
        if let Some(ledger) = &mut self.profile.resident {
            let site = resident::SiteOf {
                owner,
                stack,
                target,
            };
            let ids = (sample.pid, sample.tid);
            ledger.fault(ids, sample.addr_avma, mapping, site, effect, sample.time);
        }

        let profile = &mut self.profile;
        let frames: &[FrameKey] = if cached { &[] } else { &self.scratch };
        let startup = profile.startup.is_startup(
            sample.pid,
            sample.time,
            frames,
            class,
            sample.weight,
            &profile.processes.modules,
            &mut profile.symbolizer,
        );
        if let Some(window) = startup {
            let first = profile
                .first_touch
                .entry((window, target))
                .or_insert((sample.time, stack));
            if sample.time < first.0 {
                *first = (sample.time, stack);
            }
        }
        if self.timeline {
            profile.timeline.add(
                sample.time,
                class,
                owner,
                profile.stacks.frames(stack).next(),
                latency_ns.map(|ns| u32::try_from(ns).unwrap_or(u32::MAX)),
            );
        }
        if self.live {
            self.last = Some(Classified {
                time: sample.time,
                class,
                addr_avma: sample.addr_avma,
                target,
                latency_ns,
                leaf: profile.stacks.frames(stack).next(),
            });
        }
        let key = SampleKey {
            owner,
            class,
            access,
            stack,
            target,
            startup,
        };
        let swap_in = class == FaultClass::Major
            && !matches!(
                target,
                TargetKey::Module {
                    bss_tail: false,
                    ..
                }
            );
        profile.count(key, sample.pid, (sample.weight, swap_in), latency_ns);
    }

    /// The entry of the thread's pending fault, if it was on the same page;
    /// counts entries left without completion and faults without entry.
    fn pair_entry(&mut self, sample: &FaultSample<'_>) -> Option<PairedEntry> {
        let totals = &mut self.profile.totals;
        let entry = match self.pending.remove(&sample.tid) {
            Some(e) if e.addr_avma >> 12 == sample.addr_avma >> 12 => Some(PairedEntry {
                error_code: e.error_code,
                latency_ns: sample.time.saturating_sub(e.time),
                kernel_mode: e.kernel_mode,
            }),
            Some(_) => {
                totals.entries_without_completion += 1;
                None
            }
            None => None,
        };
        if entry.is_none() {
            totals.unpaired += 1; // zeroed at the end if the recording has no entries
        }
        entry
    }

    /// The fault's class, access and target, from its entry's error code
    /// and the mapping it hit; counts majors by backing and kernel-mode
    /// faults.
    fn classify_fault(
        &mut self,
        sample: &FaultSample<'_>,
        entry: Option<PairedEntry>,
        kernel_mode: bool,
    ) -> (FaultClass, Access, TargetKey, PageFacts) {
        let profile = &mut self.profile;
        let weight = sample.weight;
        let process = profile.processes.by_pid.get(&sample.pid);
        // One search of the address space serves both.
        let found = process.and_then(|p| p.space.find(sample.addr_avma));
        let mapping = found.map(|m| TargetMapping {
            file_backed: m.is_file_backed(),
            private: m.is_private(),
            writable: m.is_writable(),
        });
        let (class, access) = classify(sample.major, entry.map(|e| e.error_code), mapping);
        let place = process.map_or(Place::Unknown, |p| p.place_in(found, sample.addr_avma));
        let target = target_key(place);
        if class == FaultClass::Major {
            match target {
                TargetKey::Module {
                    bss_tail: false, ..
                } => profile.totals.major_file += weight,
                _ => profile.totals.major_swap += weight,
            }
        }
        if kernel_mode {
            profile.totals.kernel_mode += weight;
        }
        let effect = match &profile.resident {
            Some(_) => {
                let shmem_file = match target {
                    TargetKey::Module { module, .. } => {
                        profile.processes.modules.get(module).is_shared_memory()
                    }
                    _ => false,
                };
                let range = found.map(|m| (m.start_avma, m.end_avma));
                (resident::effect(mapping, shmem_file, access, class), range)
            }
            None => (resident::Effect::None, None),
        };
        (class, access, target, effect)
    }

    /// The fault's stack, and whether it was remembered (then
    /// `self.scratch` does not hold its frames: they were seen before).
    /// Faults often repeat a raw call chain of their process (a loop
    /// touching pages): [`ChainMemo`] has its stack then. Otherwise the
    /// frames, leaf first, go to `self.scratch` and are interned.
    fn stack_of(
        &mut self,
        sample: &FaultSample<'_>,
        kernel_mode: bool,
        in_exec: bool,
    ) -> (StackId, bool) {
        let chain = sample.callchain.as_ref().filter(|_| !in_exec);
        let fp_cut = chain.is_some_and(|chain| {
            count_truncated(chain, self.fp_max_stack, &mut self.profile.totals)
        });
        self.scratch.clear();
        let Some(chain) = chain else {
            if in_exec {
                self.scratch.push(FrameKey::Exec);
            } else {
                self.profile.totals.no_callchain += 1;
            }
            return (self.profile.stacks.intern_leaf_first(&self.scratch), false);
        };
        let processes = &self.profile.processes;
        let process = processes.by_pid.get(&sample.pid);
        let key = MemoKey {
            pid: sample.pid,
            stamp: process.map_or(u64::MAX, |p| p.stamp),
            kernel_mode,
        };
        let vacancy = match self.memo.get(key, chain) {
            Ok(stack) => return (stack, true),
            Err(vacancy) => vacancy,
        };
        let user = UserFrames {
            process,
            modules: &processes.modules,
            pid: sample.pid,
            kernel_mode,
            kernel: self.options.kernel,
        };
        user.push_frames(chain, &mut self.scratch);
        self.prepare_modules();
        if fp_cut {
            self.scratch.push(FrameKey::Unknown);
        }
        let stack = (self.profile.stacks).intern_for_thread(sample.tid, &self.scratch);
        self.memo.put(vacancy, key, chain, stack);
        (stack, false)
    }
}

impl Analyzer {
    /// An analyzer for one replay whose profile is then symbolized: the
    /// modules its stacks meet are read beside it.
    fn for_one_replay(options: AnalyzeOptions) -> Analyzer {
        Analyzer {
            prepared: Some(Vec::new()),
            ..Analyzer::new(options)
        }
    }

    /// Has the symbolizer read the DWARF of the modules of the frames in
    /// `self.scratch` it has not met yet, beside the replay.
    fn prepare_modules(&mut self) {
        let Some(prepared) = self.prepared.as_mut() else {
            return;
        };
        for frame in &self.scratch {
            let FrameKey::Code { module, .. } = *frame else {
                continue;
            };
            let index = module as usize;
            if prepared.len() <= index {
                prepared.resize(index + 1, false);
            }
            if std::mem::replace(&mut prepared[index], true) {
                continue;
            }
            let m = self.profile.processes.modules.get(module);
            if m.is_file() {
                let path = std::path::Path::new(&m.path);
                (self.profile.symbolizer).prepare(path, m.build_id.as_deref());
            }
        }
    }
}

/// Whether a call chain was cut short, counting it in `totals` if so: it
/// ends in a marked frame (dwarf chains that stopped early), or it is a
/// frame-pointer chain the kernel cut at its frame limit `fp_max_stack`
/// (it counts addresses, not context markers). True only for the latter,
/// whose stack then ends in an unknown frame.
fn count_truncated(chain: &Chain<'_>, fp_max_stack: Option<usize>, totals: &mut Totals) -> bool {
    if !chain.is_empty() && chain.get(chain.len() - 1) == Some(TRUNCATED_FRAME) {
        totals.truncated_stacks += 1;
    } else if let Some(max) = fp_max_stack.filter(|&max| chain.len() >= max) {
        let addresses = chain.iter().filter(|&a| a < rec::CONTEXT_MAX).count();
        if addresses >= max {
            totals.truncated_stacks += 1;
            return true;
        }
    }
    false
}

/// How to turn one fault's call chain into frames.
struct UserFrames<'p> {
    /// The faulting process (its address space places the frames).
    process: Option<&'p Process>,
    /// The modules the address space names.
    modules: &'p Modules,
    pid: i32,
    /// The fault was taken in kernel mode.
    kernel_mode: bool,
    /// Keep kernel frames.
    kernel: bool,
}

impl UserFrames<'_> {
    /// Pushes the frames of `chain` (leaf first, with perf's context
    /// markers) to `frames`: kernel frames if kept, then code in modules,
    /// JIT code, or unknown.
    fn push_frames(&self, chain: &Chain<'_>, frames: &mut Vec<FrameKey>) {
        let mut context = rec::CONTEXT_USER;
        let mut first_user = true;
        for avma in chain.iter() {
            if avma >= rec::CONTEXT_MAX {
                context = avma;
                continue;
            }
            if context == rec::CONTEXT_KERNEL {
                if self.kernel {
                    frames.push(FrameKey::Kernel { avma });
                }
                continue;
            }
            // The first user frame of a user-mode fault is the
            // faulting instruction. Return addresses, and the user IP
            // of a kernel-mode fault (just after its `syscall`), are
            // looked up at the instruction before them.
            let lookup_avma = if first_user && !self.kernel_mode {
                avma
            } else {
                avma.saturating_sub(1)
            };
            first_user = false;
            frames.push(self.frame(avma, lookup_avma));
        }
    }

    /// The frame of a user address, looked up at `lookup_avma`.
    fn frame(&self, avma: u64, lookup_avma: u64) -> FrameKey {
        match self
            .process
            .map_or(Place::Unknown, |p| p.place(lookup_avma))
        {
            Place::Module {
                module,
                file_offset,
                kind: MapKind::File(_) | MapKind::Pseudo(_),
            } if !self.modules.get(module).is_anonymous() => FrameKey::Code {
                module,
                lookup_file_offset: file_offset,
            },
            // Executed anonymous memory (a memfd and `[anon:NAME]` too, as
            // the unwinder takes them): JIT code.
            Place::Module {
                kind: MapKind::File(_) | MapKind::Pseudo(_),
                ..
            }
            | Place::Region(MapKind::Anon | MapKind::Heap | MapKind::Stack)
                if avma != TRUNCATED_FRAME =>
            {
                FrameKey::Jit {
                    pid: self.pid,
                    avma: lookup_avma,
                }
            }
            _ => FrameKey::Unknown,
        }
    }
}

/// The symbolizer's settings for this analysis.
fn symbolizer_options(options: &AnalyzeOptions) -> SymbolizerOptions {
    let defaults = SymbolizerOptions::default();
    SymbolizerOptions {
        symfs: options.symfs.clone(),
        build_id_caches: if options.build_id_caches.is_empty() {
            defaults.build_id_caches.clone()
        } else {
            options.build_id_caches.clone()
        },
        ..defaults
    }
}

/// Replays a recording into a [`Profile`].
pub fn analyze(path: &Path, options: AnalyzeOptions) -> Result<Profile, DecodeError> {
    let partial = options.partial;
    let mut analyzer = Analyzer::for_one_replay(options);
    let replayed = decode::replay(path, partial, |event| analyzer.on_event(event));
    finish(analyzer, replayed)
}

/// [`analyze`] of a recording held in memory (`name` names it in errors).
pub fn analyze_image(
    bytes: &[u8],
    name: &str,
    options: AnalyzeOptions,
) -> Result<Profile, DecodeError> {
    let partial = options.partial;
    let mut analyzer = Analyzer::for_one_replay(options);
    let replayed = decode::replay_image(bytes, name, partial, |event| analyzer.on_event(event));
    finish(analyzer, replayed)
}

fn finish(
    analyzer: Analyzer,
    replayed: Result<(decode::Header, DecodeStats), DecodeError>,
) -> Result<Profile, DecodeError> {
    let (header, stats) = replayed?;
    let mut profile = analyzer.profile;
    profile.settle();
    profile.timeline.settle();
    if let Some(ledger) = &mut profile.resident {
        ledger.finish();
    }
    profile.has_entries = header.kinds.iter().any(|k| {
        matches!(
            k,
            decode::EventKind::EntryUser | decode::EventKind::EntryKernel
        )
    });
    if !profile.has_entries {
        profile.totals.unpaired = 0;
    }
    profile.totals.entries_without_completion += analyzer.pending.len() as u64
        + header
            .meta
            .as_ref()
            .and_then(|m| m.unfinished_entries)
            .unwrap_or(0);
    profile.unwind = analyzer.unwinder.map(|u| u.stats);
    profile.meta = header.meta;
    profile.cmdline = header.cmdline;
    profile.kernel_build_id = header.kernel_build_id;
    if profile.meta.as_ref().map_or(true, |m| m.lost_samples_whole) {
        // perf (and pfprof without its collector: record/lost.rs) writes
        // PERF_RECORD_LOST_SAMPLES at the end from each event's lost count
        // (read_format LOST): the samples its ring's PERF_RECORD_LOST
        // records already counted. Not twice.
        let totals = &mut profile.totals;
        let l = &mut totals.lost_by_class;
        let attributed = l.minor + l.major + l.entries + l.memory_calls;
        l.unattributed = l.unattributed.saturating_sub(attributed);
        totals.lost = attributed + l.unattributed;
    }
    profile.decode = stats;
    Ok(profile)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::decode::tests::{minor_faults_attr, sample_with_chain};
    use crate::format::perf_data::{EventDesc, PerfDataWriter};
    use crate::record::synth;
    use crate::sys::alloc_counter;
    use crate::sys::maps::MapsLine;

    /// A call chain of `words`, as a sample holds it.
    fn with_chain<R>(words: &[u64], f: impl FnOnce(&Chain<'_>) -> R) -> R {
        use linux_perf_data::linux_perf_event_reader::{RawData, RawDataU64};
        let bytes: Vec<u8> = words.iter().flat_map(|a| a.to_le_bytes()).collect();
        f(&Chain::Raw(RawDataU64::from_raw_data::<
            byteorder::LittleEndian,
        >(RawData::Single(&bytes))))
    }

    /// Truncated chains: a marked last frame counts but adds no frame; a
    /// frame-pointer chain at the kernel's limit (addresses, not marks)
    /// counts and ends in an unknown frame.
    #[test]
    fn truncated_chains() {
        let user = rec::CONTEXT_USER;
        for (words, fp_max_stack, want_cut, want_count) in [
            (vec![user, 0x10, 0x20], None, false, 0),
            (vec![user, 0x10, TRUNCATED_FRAME], None, false, 1),
            (vec![user, 0x10, 0x20], Some(2), true, 1),
            (vec![user, 0x10, 0x20], Some(3), false, 0),
            (vec![], Some(0), true, 1),
        ] {
            let mut totals = Totals::default();
            let cut = with_chain(&words, |chain| {
                count_truncated(chain, fp_max_stack, &mut totals)
            });
            assert_eq!(cut, want_cut, "{words:x?} {fp_max_stack:?}");
            assert_eq!(totals.truncated_stacks, want_count, "{words:x?}");
        }
    }

    /// Without a known process every user frame is unknown; kernel frames
    /// are kept only when asked for.
    #[test]
    fn frames_of_a_chain() {
        let words = [
            rec::CONTEXT_KERNEL,
            0xffff_1000,
            rec::CONTEXT_USER,
            0x10,
            0x20,
        ];
        for kernel in [false, true] {
            let user = UserFrames {
                process: None,
                modules: &Modules::default(),
                pid: 1,
                kernel_mode: true,
                kernel,
            };
            let mut frames = Vec::new();
            with_chain(&words, |chain| user.push_frames(chain, &mut frames));
            let mut want = vec![FrameKey::Unknown, FrameKey::Unknown];
            if kernel {
                want.insert(0, FrameKey::Kernel { avma: 0xffff_1000 });
            }
            assert_eq!(frames, want, "kernel {kernel}");
        }
    }

    /// Code in a file or `[vdso]` is a code frame; code in a memfd, in
    /// `[anon:NAME]` memory or in anonymous memory is JIT code (as the
    /// unwinder takes it), named from the perf map; a frame outside every
    /// mapping is unknown.
    #[test]
    fn frames_by_mapping_kind() {
        let mut processes = Processes::default();
        let rx = (libc::PROT_READ | libc::PROT_EXEC) as u32;
        let mut map = |avma, path: &[u8]| {
            let m = MmapRecord {
                pid: 7,
                avma,
                len: 0x1000,
                file_offset: 0,
                prot: rx,
                flags: 2,
            };
            processes.on_mmap(m, path, None)
        };
        let file = map(0x1000, b"/usr/bin/app");
        let vdso = map(0x3000, b"[vdso]");
        map(0x5000, b"/memfd:jit (deleted)");
        map(0x7000, b"[anon:v8 code]");
        map(0x9000, b"//anon");
        let code = |kind| match kind {
            MapKind::File(module) | MapKind::Pseudo(module) => FrameKey::Code {
                module,
                lookup_file_offset: 0x10,
            },
            _ => unreachable!(),
        };
        let jit = |avma| FrameKey::Jit { pid: 7, avma };
        let user = UserFrames {
            process: processes.by_pid.get(&7),
            modules: &processes.modules,
            pid: 7,
            kernel_mode: false,
            kernel: false,
        };
        for (avma, want) in [
            (0x1010, code(file)),
            (0x3010, code(vdso)),
            (0x5010, jit(0x5010)),
            (0x7010, jit(0x7010)),
            (0x9010, jit(0x9010)),
            (0xb010, FrameKey::Unknown),
        ] {
            assert_eq!(user.frame(avma, avma), want, "{avma:#x}");
        }
    }

    /// Each target without an object of its own has its label, a bss tail
    /// beyond its object's sections is `[anon]`; modules are named by path.
    #[test]
    fn target_labels() {
        let module = |bss_tail| TargetKey::Module {
            module: 3,
            file_offset: 0x2000,
            bss_tail,
        };
        for (target, in_object, want) in [
            (module(false), false, None),
            (module(false), true, None),
            (module(true), true, None),
            (module(true), false, Some("[anon]")),
            (TargetKey::Pseudo(3), false, None),
            (TargetKey::Heap, false, Some("[heap]")),
            (TargetKey::Stack, true, Some("[stack]")),
            (TargetKey::Anon, false, Some("[anon]")),
            (TargetKey::Unknown, false, Some("[unknown]")),
        ] {
            assert_eq!(target.label(in_object), want, "{target:?} {in_object}");
        }
        assert_eq!(module(true).module(), Some(3));
        assert_eq!(TargetKey::Pseudo(4).module(), Some(4));
        assert_eq!(TargetKey::Heap.module(), None);
    }

    /// A chain seen again has the stack it had, from the memo; once its
    /// process maps another file over its code, the same chain is placed
    /// again (and in another process it is placed in that one).
    #[test]
    fn a_repeated_chain_is_placed_again_after_its_mappings_change() {
        use linux_perf_data::linux_perf_event_reader::RawData;
        let mut analyzer = Analyzer::new(AnalyzeOptions::default());
        let map = |pid, path: &'static [u8]| Event::Mmap {
            mapping: MmapRecord {
                pid,
                avma: 0x1000,
                len: 0x1000,
                file_offset: 0,
                prot: (libc::PROT_READ | libc::PROT_EXEC) as u32,
                flags: 2,
            },
            path: RawData::Single(path),
            build_id: None,
        };
        let words = [rec::CONTEXT_USER, 0x1010, 0x1020];
        let fault = |analyzer: &mut Analyzer, pid| {
            with_chain(&words, |chain| {
                analyzer.on_event(&Event::Fault(FaultSample {
                    major: false,
                    pid,
                    tid: pid,
                    time: 1,
                    addr_avma: 0x9000,
                    kernel_mode: false,
                    callchain: Some(*chain),
                    weight: 1,
                    user_stack: None,
                    entry: None,
                }))
            });
            analyzer.profile.settle();
            let p = &analyzer.profile;
            let key = p.counts.keys().max_by_key(|k| k.stack).expect("a fault");
            let paths: Vec<String> = (p.stacks.frames(key.stack))
                .map(|frame| match frame {
                    FrameKey::Code { module, .. } => p.processes.modules.get(module).path.clone(),
                    other => format!("{other:?}"),
                })
                .collect();
            (key.stack, paths)
        };
        analyzer.on_event(&map(7, b"/usr/bin/old"));
        analyzer.on_event(&map(8, b"/usr/bin/other"));
        let (first, paths) = fault(&mut analyzer, 7);
        assert_eq!(paths, ["/usr/bin/old", "/usr/bin/old"]);
        assert_eq!(fault(&mut analyzer, 7).0, first);
        assert_eq!(analyzer.memo.hits, 1);
        analyzer.on_event(&map(7, b"/usr/bin/new"));
        let (_, paths) = fault(&mut analyzer, 7);
        assert_eq!(paths, ["/usr/bin/new", "/usr/bin/new"]);
        let (_, paths) = fault(&mut analyzer, 8);
        assert_eq!(paths, ["/usr/bin/other", "/usr/bin/other"]);
        assert_eq!(analyzer.memo.hits, 1);
    }

    /// An `mremap` that returned moves its mapping in the process's
    /// address space (no mmap record says so); one that failed, or whose
    /// thread never returned, moves nothing; `munmap` removes its range.
    #[test]
    fn mremap_moves_the_mapping_once_it_returns() {
        use linux_perf_data::linux_perf_event_reader::RawData;
        let mut analyzer = Analyzer::new(AnalyzeOptions::default());
        analyzer.on_event(&Event::Mmap {
            mapping: MmapRecord {
                pid: 7,
                avma: 0x10000,
                len: 0x4000,
                file_offset: 0,
                prot: (libc::PROT_READ | libc::PROT_WRITE) as u32,
                flags: (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u32,
            },
            path: RawData::Single(b"//anon"),
            build_id: None,
        });
        let call = |analyzer: &mut Analyzer, tid, call| {
            analyzer.on_event(&Event::MemoryCall {
                pid: 7,
                tid,
                call,
                time: 1,
            })
        };
        let asked = decode::MemoryCall::Mremap {
            addr: 0x10000,
            old_len: 0x4000,
            new_len: 0x8000,
            flags: 1,
            new_addr: 0,
        };
        let kind_at = |analyzer: &Analyzer, avma| {
            let process = &analyzer.profile.processes.by_pid[&7];
            process.space.find(avma).map(|m| m.value.kind)
        };
        // Failed (ENOMEM); then asked by thread 8, which never returns.
        call(&mut analyzer, 7, asked);
        call(
            &mut analyzer,
            7,
            decode::MemoryCall::MremapDone { ret: -12 },
        );
        call(&mut analyzer, 8, asked);
        assert_eq!(kind_at(&analyzer, 0x10000), Some(MapKind::Anon));
        assert_eq!(kind_at(&analyzer, 0x40000), None);
        call(&mut analyzer, 7, asked);
        call(
            &mut analyzer,
            7,
            decode::MemoryCall::MremapDone { ret: 0x40000 },
        );
        assert_eq!(kind_at(&analyzer, 0x10000), None);
        assert_eq!(kind_at(&analyzer, 0x47fff), Some(MapKind::Anon));
        // munmap takes a range away.
        let unmap = decode::MemoryCall::Munmap {
            addr: 0x44000,
            len: 0x4000,
        };
        call(&mut analyzer, 7, unmap);
        assert_eq!(kind_at(&analyzer, 0x43fff), Some(MapKind::Anon));
        assert_eq!(kind_at(&analyzer, 0x44000), None);
    }

    #[test]
    fn intervals_forget_exited_processes_but_not_a_reused_pid() {
        let mut aggregator = Aggregator::new(
            AnalyzeOptions::default(),
            RecordingMeta::default(),
            false,
            false,
        );
        let fork = |pid| Event::Fork {
            pid,
            ppid: 1,
            tid: pid,
        };
        let exit = |pid, tid| Event::Exit { pid, tid };
        aggregator.feed(fork(10));
        aggregator.feed(fork(11));
        aggregator.feed(fork(12));
        // A thread's exit is not its process's.
        aggregator.feed(Event::Fork {
            pid: 10,
            ppid: 10,
            tid: 13,
        });
        aggregator.feed(exit(10, 13));
        aggregator.feed(exit(11, 11));
        // 12 exits and its pid is reused within the interval.
        aggregator.feed(exit(12, 12));
        aggregator.feed(fork(12));
        let pids = |a: &mut Aggregator| {
            let mut pids: Vec<i32> = a.0.profile.processes.by_pid.keys().copied().collect();
            pids.sort();
            pids
        };
        // The interval that saw 11 exit still names it.
        assert_eq!(pids(&mut aggregator), [10, 11, 12]);
        aggregator.take();
        assert_eq!(pids(&mut aggregator), [10, 12]);
    }

    /// A recording of `n` faults with the same three-frame stack in one
    /// mapped file, on fresh anonymous pages.
    pub(crate) fn recording(path: &Path, n: u64) {
        let events = vec![EventDesc {
            attr: minor_faults_attr(),
            name: "minor-faults".into(),
            ids: vec![1],
        }];
        let mut w = PerfDataWriter::create(path, events).unwrap();
        let map = |start, end, path: &str| MapsLine {
            start_avma: start,
            end_avma: end,
            prot: 5,
            flags: 2,
            file_offset: 0,
            dev: (0, 0),
            inode: 0,
            path: path.into(),
        };
        w.write_records(&synth::comm(7, 7, "app", 1, 1)).unwrap();
        w.write_records(&synth::mmap2(
            7,
            &map(0x400000, 0x402000, "/nonexistent/app"),
            2,
            1,
        ))
        .unwrap();
        w.write_records(&synth::mmap2(
            7,
            &map(0x7f0000000000, 0x7f1000000000, "//anon"),
            3,
            1,
        ))
        .unwrap();
        let chain = [rec::CONTEXT_USER, 0x401010, 0x401120, 0x401230];
        for i in 0..n {
            w.write_records(&sample_with_chain(
                1,
                0,
                10 + i,
                0x7f0000000000 + i * 4096,
                &chain,
            ))
            .unwrap();
        }
        w.finish(&RecordingMeta::default(), "h", "r", 1).unwrap();
    }

    /// A PERF_RECORD_LOST (2: id, count) or PERF_RECORD_LOST_SAMPLES (13:
    /// count) of event `id`, with the sample_id trailer of
    /// `minor_faults_attr` (tid, time, cpu, identifier).
    fn lost_record(record_type: u32, id: u64, count: u64, time: u64) -> Vec<u8> {
        let body: Vec<u64> = match record_type {
            2 => vec![id, count],
            _ => vec![count],
        };
        let mut r = Vec::new();
        r.extend_from_slice(&record_type.to_le_bytes());
        r.extend_from_slice(&0u16.to_le_bytes());
        r.extend_from_slice(&((8 + 8 * (body.len() + 4)) as u16).to_le_bytes());
        for v in body.into_iter().chain([(7u64 << 32) | 7, time, 0, id]) {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r
    }

    /// Lost records are counted by the event that lost them where the
    /// kernel says (LOST_SAMPLES); PERF_RECORD_LOST's id is only the ring's
    /// next writer, so its count is unattributed.
    #[test]
    fn lost_records_by_class() {
        let dir = crate::test_dir("lost");
        let path = dir.join("lost.data");
        let mut major_attr = minor_faults_attr();
        major_attr[8..16].copy_from_slice(&6u64.to_le_bytes()); // PAGE_FAULTS_MAJ
        let events = vec![
            EventDesc {
                attr: minor_faults_attr(),
                name: "minor-faults".into(),
                ids: vec![1],
            },
            EventDesc {
                attr: major_attr,
                name: "major-faults".into(),
                ids: vec![2],
            },
        ];
        let mut w = PerfDataWriter::create(&path, events).unwrap();
        for (record_type, id, count) in [(13, 1, 5), (13, 2, 3), (13, 1, 2), (2, 1, 100), (2, 2, 7)]
        {
            w.write_records(&lost_record(record_type, id, count, 10))
                .unwrap();
        }
        w.finish(&RecordingMeta::default(), "h", "r", 1).unwrap();
        let profile = analyze(&path, AnalyzeOptions::default()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(profile.decode.bad_records, 0);
        assert_eq!(profile.totals.lost, 117);
        assert_eq!(
            profile.totals.lost_by_class,
            LostByClass {
                minor: 7,
                major: 3,
                entries: 0,
                memory_calls: 0,
                unattributed: 107
            }
        );
    }

    /// Replaying a fault allocates nothing: ten times the faults, (almost)
    /// the same number of allocations (only amortised buffer growth).
    #[test]
    fn per_sample_path_does_not_allocate() {
        let dir = crate::test_dir("allocs");
        let mut allocs = Vec::new();
        for n in [2_000u64, 20_000] {
            let path = dir.join(format!("a{n}.data"));
            recording(&path, n);
            let (profile, count) =
                alloc_counter::count(|| analyze(&path, AnalyzeOptions::default()).unwrap());
            assert_eq!(profile.totals.by_class.minor, n);
            assert_eq!(profile.counts.len(), 1, "one stack, one target");
            allocs.push(count);
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(allocs[0] > 0, "the counter sees the analysis' allocations");
        assert!(
            allocs[1] - allocs[0] < 100,
            "allocations grow with the samples: {allocs:?}"
        );
        eprintln!("allocations for 2,000 and 20,000 faults: {allocs:?}");
    }
}
