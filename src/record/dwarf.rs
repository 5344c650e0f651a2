//! The records the recorder rewrites: the BPF collector's (one per fault,
//! see [`super::bpf`]), and in dwarf mode without it perf's samples with a
//! user stack copy. Reads every drained record in time order, keeps the
//! unwinder's address spaces current from the side-band records (mmap2,
//! comm/exec, fork, exit), and turns each fault into the recording's sample
//! with its call chain (a few hundred bytes where the copy had kilobytes),
//! and its entry record when the collector paired it: the recording then
//! holds the samples a frame-pointer recording holds, and `report` reads
//! both the same way. A live consumer ([`Output::event`]) gets every record
//! as a typed event, the faults with their chains as unwound, without the
//! recording's bytes in between.
//!
//! Records are handled in time order across the CPUs' buffers
//! ([`StackRewriter::merge_pass`]): each pass takes the records stamped
//! before its cutoff (2 ms ago), oldest first, so side-band records change
//! the address spaces in the order they happened. A sample whose process or
//! code is still not known (a record that reached its buffer late) is held
//! back and retried at the end of the pass, and settled for good once its
//! time is older than the pass's cutoff.
//!
//! A stack unwound whole is remembered in the collector's `unwound` map
//! (from its second time: most stacks seen once are never seen again), so
//! that the kernel sends its chain instead of the stack when the same
//! registers meet the same stack words ([`Remembered`]).

use std::io;

use linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, RecordParseInfo, SampleFormat, SampleRecord,
};

use super::bpf::{Fault, FaultCollector, Unwound, UnwoundKey};
use super::build_ids::BuildIds;
use super::memory_events;
use super::remembered::Remembered;
use super::ring::{bpf_record_at, BpfRing, Ring};
use super::stack_tops::StackTops;
use crate::format::decode::{self, Chain, Event, EventKind, FaultSample, PairedEntry};
use crate::format::events::own::{self, EntryRecord, FaultRecord, SampleId};
use crate::format::events::stream::{record_at, BadSize, HEAD_BYTES};
use crate::format::events::{
    le_u64, le_u64s, parse_record, records, EventTable, Mapping, RecordHead,
};
use crate::format::records as rec;
use crate::sys::maps::MapsLine;
use crate::unwind::{
    copied_stack, touch_lines, Outcome, Reads, StackUnwinder, Stop, UnwindStats, UserRegs,
    UserSample,
};

/// Records read ahead at a time by [`touch_ahead`].
const TOUCH_AHEAD: usize = 32;

/// Loads the first cache lines of the next `count` records (header,
/// registers, the top of the stack copy) in one independent sweep, so that
/// their cache misses overlap instead of stalling one record at a time: the
/// kernel wrote them from another CPU, kilobytes apart.
fn touch_ahead(bytes: &[u8], count: usize) {
    for record in records(bytes).take(count).map_while(Result::ok) {
        if let Some(head) = record.bytes.get(64..record.bytes.len().min(512)) {
            touch_lines(head);
        }
    }
}

/// Records handled between two releases of ring space.
const MERGE_CHUNK: usize = 256;

/// The `data_src` the kernel writes in a fault sample (`PERF_MEM_NA`: op,
/// level, snoop, lock, TLB and level number "not available").
const DATA_SRC_NA: u64 = 0x1 | (0x1 << 5) | (0x1 << 19) | (0x1 << 24) | (0x1 << 26) | (0xf << 33);

/// What the rewriter does with an event's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handling {
    /// Passes them on as they are (tracepoints, the uprobe).
    Pass,
    /// Unwinds their registers and stack copy into a call chain.
    Unwind,
    /// They are the BPF collector's records (see [`super::bpf`]): each
    /// becomes the sample of `minor` or `major` (those events' ids in the
    /// recording) with its chain.
    Collector {
        /// An id of `minor-faults`.
        minor: u64,
        /// An id of `major-faults`.
        major: u64,
    },
}

/// The entry tracepoints' events, when the collector pairs entries in the
/// kernel: the recording gets an entry record for each paired fault, with
/// the event's id and the tracepoint's id (its records' `common_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EntryEvents {
    /// `page_fault_user`: (event id, tracepoint id).
    pub user: (u64, u16),
    /// `page_fault_kernel`: (event id, tracepoint id).
    pub kernel: (u64, u16),
}

/// Where the rewriter's output goes.
pub(crate) trait Output {
    /// Whole records, rewritten: the recording's, in runs.
    fn records(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Whether [`Output::event`] is wanted (else records are not decoded).
    fn wants_events(&self) -> bool;
    /// One record as an event at `time`, in the order records are handled
    /// (time order, but for samples held back a pass).
    fn event(&mut self, time: u64, event: Event<'_>);
}

/// Rewrites drained records, unwinding fault samples.
pub(crate) struct StackRewriter {
    unwinder: StackUnwinder,
    /// The events' layouts and the event of each id.
    table: EventTable,
    /// Per attr: what to do with its samples, and what kind of event it is.
    handling: Vec<Handling>,
    kinds: Vec<EventKind>,
    /// The recording's first event's id: the collector's records that are
    /// not samples are given it, since the recording does not describe the
    /// collector's own event.
    leader_id: u64,
    /// Records to hand on.
    out: Vec<u8>,
    chain: Vec<u64>,
    /// Samples waiting for their process's records: (time, record).
    deferred: Vec<(u64, Vec<u8>)>,
    /// A record that straddles a ring's wrap, copied whole.
    wrapped: Vec<u8>,
    /// pfprof's own process in a system-wide recording: its samples are
    /// only counted, so they are written without unwinding.
    own_pid: Option<i32>,
    /// Write the faults' samples (false: no recording, the faults go to
    /// the live consumer only).
    write_samples: bool,
    /// The recording's samples carry a chain (a `--call-graph none`
    /// recording without kernel frames has none).
    chains: bool,
    /// The collector's records carry a stack to unwind (dwarf mode).
    unwind_collected: bool,
    /// The collector, whose `unwound` map learns the stacks unwound.
    collector: Option<FaultCollector>,
    remembered: Remembered,
    /// Where each thread's stack copies end, given to the collector.
    stack_tops: StackTops,
    /// What the last unwinding read of the stack.
    reads: Reads,
    /// Set when the collector pairs entries: their events.
    entry_events: Option<EntryEvents>,
    /// The memory events' ids and tracepoint ids (in the order of
    /// `MEMORY_CALLS`), when the collector writes their records (see
    /// [`FaultCollector::watch_memory`]).
    memory_events: Option<[(u64, u16); 6]>,
    /// The collector's counts of records its rings turned away (minor,
    /// major, memory events), as last written down.
    lost_seen: [u64; 3],
    /// The build-ids the kernel's mmap records lack, and a record filled.
    build_ids: BuildIds,
    filled: Vec<u8>,
}

impl StackRewriter {
    /// From the attrs the events were opened with (raw bytes, ids) and
    /// what to do with each one's samples, and the events' names (`names[i]`
    /// the `i`th's; the collector's own has none); the first is the
    /// recording's leader.
    pub(crate) fn new(
        attrs: &[(&[u8], &[u64], Handling)],
        names: &[&str],
    ) -> Option<StackRewriter> {
        let table = EventTable::new(attrs.iter().map(|&(bytes, ids, _)| (bytes, ids))).ok()?;
        let kinds = decode::kinds_of(&table, names);
        let handling = attrs.iter().map(|&(_, _, how)| how).collect();
        let leader_id = *attrs.first()?.1.first()?;
        Some(StackRewriter {
            unwinder: StackUnwinder::new(),
            table,
            handling,
            kinds,
            leader_id,
            out: Vec::with_capacity(1 << 20),
            chain: Vec::with_capacity(256),
            deferred: Vec::new(),
            wrapped: Vec::new(),
            own_pid: None,
            write_samples: true,
            chains: true,
            unwind_collected: true,
            collector: None,
            remembered: Remembered::default(),
            stack_tops: StackTops::default(),
            reads: Reads::default(),
            entry_events: None,
            memory_events: None,
            lost_seen: [0; 3],
            build_ids: BuildIds::default(),
            filled: Vec::new(),
        })
    }

    /// The uprobe on `main` (the executable's path and the probe's file
    /// offset): see [`StackUnwinder::set_main_probe`].
    pub(crate) fn set_main_probe(&mut self, path: &[u8], file_offset: u64) {
        self.unwinder.set_main_probe(path, file_offset);
    }

    /// pfprof's own process, whose samples are written without unwinding
    /// (a system-wide recording leaves them out but counts them): unwinding
    /// them took pfprof's own faults, which made more of them, and held
    /// back those whose mappings pfprof made after it started, copying each.
    pub(crate) fn set_own_pid(&mut self, pid: i32) {
        self.own_pid = Some(pid);
    }

    /// Loads the CFI of the files `pid` maps (see
    /// [`StackUnwinder::preload`]).
    pub(crate) fn preload(&mut self, pid: i32, m: &MapsLine, build_id: Option<&[u8]>) {
        let avma = m.start_avma..m.end_avma;
        let path = m.path.as_bytes();
        self.unwinder.preload(pid, &avma, m.prot, path, build_id);
    }

    /// The bytes of user stack each sample asks for.
    pub(crate) fn set_stack_requested(&mut self, bytes: usize) {
        self.unwinder.set_stack_requested(bytes);
    }

    /// Whether the faults' samples are written (a recording), and whether
    /// they carry a chain (`--call-graph none` without kernel frames: not).
    pub(crate) fn set_samples(&mut self, write: bool, chains: bool) {
        self.write_samples = write;
        self.chains = chains;
    }

    /// The collector whose records this rewrites: it learns the stacks
    /// unwound when its records carry stacks (`unwind`, dwarf mode); with
    /// `entries` it pairs faults with their entries, whose records the
    /// recording then gets from here.
    pub(crate) fn set_collector(
        &mut self,
        collector: FaultCollector,
        unwind: bool,
        entries: Option<EntryEvents>,
    ) {
        self.collector = Some(collector);
        self.unwind_collected = unwind;
        self.entry_events = entries;
    }

    /// The collector writes the memory events' records: written as
    /// `events`' (each its id, its tracepoint's id).
    pub(crate) fn set_memory_events(&mut self, events: [(u64, u16); 6]) {
        self.memory_events = Some(events);
    }

    /// The collector whose records this rewrites.
    pub(crate) fn collector(&self) -> Option<&FaultCollector> {
        self.collector.as_ref()
    }

    /// The collector, when it pairs faults with their entries in the
    /// kernel (its counters count the entries left unpaired).
    pub(crate) fn collector_pairs(&self) -> Option<&FaultCollector> {
        self.collector
            .as_ref()
            .filter(|_| self.entry_events.is_some())
    }

    /// Unwinding counters so far.
    pub(crate) fn stats(&self) -> &UnwindStats {
        &self.unwinder.stats
    }

    /// Takes a run of whole records (pfprof's own, for processes that
    /// already run) and hands them on, rewritten, to `output`. Bytes that
    /// are not whole records count as one bad record and are dropped.
    pub(crate) fn feed(&mut self, bytes: &[u8], output: &mut dyn Output) -> io::Result<()> {
        let mut until_touch = 0;
        for record in records(bytes) {
            let Ok(record) = record else {
                self.unwinder.stats.bad_records += 1;
                break;
            };
            if until_touch == 0 {
                touch_ahead(&bytes[record.offset..], TOUCH_AHEAD);
                until_touch = TOUCH_AHEAD;
            }
            until_touch -= 1;
            self.first_look(record.bytes, output);
        }
        self.flush(output)
    }

    /// The time stamp of a complete record; 0 for records without one
    /// (or of an event pfprof did not open), which then go first. A
    /// collector's sample (nearly every record) is read in place.
    fn time_of(&self, record: &[u8]) -> u64 {
        let Some(head) = RecordHead::parse(record) else {
            return 0;
        };
        let body = &record[HEAD_BYTES..];
        let Some(attr) = self.table.attr_of_record(head.record_type, body) else {
            return 0;
        };
        if head.record_type == rec::SAMPLE
            && matches!(self.handling[attr], Handling::Collector { .. })
        {
            return own::sample_time(body).unwrap_or(0);
        }
        self.table.time(head.record_type, body, attr).unwrap_or(0)
    }

    /// One pass over every CPU's ring buffer in time order: the records
    /// stamped before `cutoff` (all of them when `last`) are handled oldest
    /// first across the rings; newer ones stay in their ring for the next
    /// pass. So a fork is applied after every mapping its parent made
    /// before it, whichever CPU's buffer holds them (handled ring by ring, a
    /// child could copy an address space that still lacked mappings sitting
    /// in another CPU's buffer, and all its chains would stop at the first
    /// frame). The space of handled records goes back to the kernel every
    /// [`MERGE_CHUNK`] records, not at the end of the pass: a sample of
    /// perf's reserves its whole requested stack copy. Returns the bytes
    /// released.
    ///
    /// Measured against taking every record out of the rings at once into
    /// queues of pfprof's own (stack copies cut to what the kernel copied):
    /// the copying cost more than it saved, and the fork storm lost records
    /// in 4 of 6 runs that way, none in 3 of 3 this way.
    pub(crate) fn merge_pass(
        &mut self,
        (rings, bpf_rings): (&mut [Ring], &mut [BpfRing]),
        cutoff: u64,
        last: bool,
        output: &mut dyn Output,
    ) -> io::Result<usize> {
        let mut released = 0;
        loop {
            for ring in bpf_rings.iter_mut() {
                ring.scan();
            }
            let (handled, bytes) = self.merge_chunk((rings, bpf_rings), cutoff, last, output);
            released += bytes;
            if handled == 0 {
                break;
            }
            if self.out.len() >= 1 << 20 {
                self.flush(output)?;
            }
        }
        self.flush(output)?;
        Ok(released)
    }

    /// Handles up to [`MERGE_CHUNK`] records stamped before `cutoff` (all
    /// when `last`) where the kernel wrote them, oldest first across the
    /// rings, then gives their space back; returns (records, bytes).
    fn merge_chunk(
        &mut self,
        (rings, bpf_rings): (&mut [Ring], &mut [BpfRing]),
        cutoff: u64,
        last: bool,
        output: &mut dyn Output,
    ) -> (usize, usize) {
        let mut wrapped = std::mem::take(&mut self.wrapped);
        let sources = rings.len() + bpf_rings.len();
        let mut consumed = vec![0usize; sources];
        let mut handled = 0;
        {
            let pending: Vec<Pending<'_>> = (rings.iter())
                .map(|ring| Pending::Perf(ring.pending()))
                .chain(bpf_rings.iter().map(|ring| Pending::Bpf(ring.pending())))
                .collect();
            let mut heads: Vec<Option<Option<u64>>> = vec![None; sources];
            let mut until_touch = vec![0usize; sources];
            while handled < MERGE_CHUNK {
                let mut best: Option<(u64, usize)> = None;
                for (ring, head) in heads.iter_mut().enumerate() {
                    if head.is_none() {
                        *head = Some(
                            match pending[ring].record_at(consumed[ring], &mut wrapped) {
                                Ok(Some((record, _))) => {
                                    let time = self.time_of(record);
                                    (last || time < cutoff).then_some(time)
                                }
                                Ok(None) => None,
                                Err(BadSize) => {
                                    // Not a kernel record (cannot happen): drop
                                    // the rest of this ring rather than loop.
                                    self.unwinder.stats.bad_records += 1;
                                    consumed[ring] = pending[ring].len();
                                    None
                                }
                            },
                        );
                    }
                    if let Some(Some(time)) = *head {
                        if best.map_or(true, |(best_time, _)| time < best_time) {
                            best = Some((time, ring));
                        }
                    }
                }
                let Some((_, ring)) = best else { break };
                if until_touch[ring] == 0 {
                    if let Some(ahead) = pending[ring].contiguous_from(consumed[ring]) {
                        touch_ahead(ahead, TOUCH_AHEAD);
                    }
                    until_touch[ring] = TOUCH_AHEAD;
                }
                until_touch[ring] -= 1;
                if let Ok(Some((record, step))) =
                    pending[ring].record_at(consumed[ring], &mut wrapped)
                {
                    consumed[ring] += step;
                    self.first_look(record, output);
                    handled += 1;
                }
                heads[ring] = None;
            }
        }
        let (perf_consumed, bpf_consumed) = consumed.split_at(rings.len());
        for (ring, &len) in rings.iter_mut().zip(perf_consumed) {
            ring.release(len);
        }
        for (ring, &len) in bpf_rings.iter_mut().zip(bpf_consumed) {
            ring.release(len);
        }
        self.wrapped = wrapped;
        (handled, consumed.iter().sum())
    }

    /// Ends a pass over all buffers: retries held-back samples, settles
    /// those older than `cutoff` (all of them when `last`), and forgets
    /// processes that exited before it.
    pub(crate) fn end_pass(
        &mut self,
        cutoff: u64,
        last: bool,
        output: &mut dyn Output,
    ) -> io::Result<()> {
        // A sample still unknown goes back into `deferred` by itself.
        for (time, record) in std::mem::take(&mut self.deferred) {
            self.record(&record, last || time < cutoff, output);
        }
        self.unwinder.forget_exited(cutoff);
        self.count_lost(cutoff, output);
        self.flush(output)
    }

    /// Writes a `PERF_RECORD_LOST_SAMPLES` of `minor-faults`, one of
    /// `major-faults` and one of `kmem:rss_stat` for every memory event's
    /// (when the collector writes them) for the records the collector's
    /// rings turned away
    /// since the last pass (the kernel writes a `PERF_RECORD_LOST` for a
    /// perf ring, whose event it cannot say; for a BPF ring the program
    /// counts them by class).
    fn count_lost(&mut self, time: u64, output: &mut dyn Output) {
        let Some(lost) = self.collector.as_ref().and_then(|c| c.lost().ok()) else {
            return;
        };
        let Some((minor, major)) = self.handling.iter().find_map(|how| match how {
            Handling::Collector { minor, major } => Some((*minor, *major)),
            _ => None,
        }) else {
            return;
        };
        let rss = self.memory_events.map(|events| events[5].0);
        for (class, id) in [Some(minor), Some(major), rss].into_iter().enumerate() {
            let Some(id) = id else {
                continue;
            };
            let new = lost[class].saturating_sub(self.lost_seen[class]);
            if new == 0 {
                continue;
            }
            self.lost_seen[class] = lost[class];
            let mut record = Vec::new();
            own::write_lost_samples(id, new, time, &mut record);
            self.record(&record, true, output);
        }
    }

    fn flush(&mut self, output: &mut dyn Output) -> io::Result<()> {
        if !self.out.is_empty() {
            output.records(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }

    /// A record as drained: held back (and counted) when its process or
    /// code is not known yet.
    fn first_look(&mut self, record: &[u8], output: &mut dyn Output) {
        if !self.record(record, false, output) {
            self.unwinder.stats.deferred += 1;
        }
    }

    /// Handles one whole record: a sample to unwind is rewritten, a record
    /// that changes address spaces updates the unwinder, every other one
    /// passes as it is. False when a sample was held back (`settle` unset
    /// and its process or code not known yet).
    fn record(&mut self, record: &[u8], settle: bool, output: &mut dyn Output) -> bool {
        let Some(head) = RecordHead::parse(record) else {
            return true;
        };
        let body = &record[HEAD_BYTES..];
        let Some(attr) = self.table.attr_of_record(head.record_type, body) else {
            // pfprof's own records, or an id we did not open: unchanged.
            self.out.extend_from_slice(record);
            return true;
        };
        let how = self.handling[attr];
        match head.record_type {
            rec::SAMPLE if how != Handling::Pass => {
                return self.sample(record, (head.misc, attr), how, settle, output);
            }
            rec::MMAP2 if self.build_ids.fill(record, &mut self.filled) => {
                // The same record with its file's build-id: handled as the
                // kernel would have written it.
                let filled = std::mem::take(&mut self.filled);
                let done = self.record(&filled, settle, output);
                self.filled = filled;
                return done;
            }
            rec::MMAP2 | rec::COMM | rec::FORK | rec::EXIT => {
                let time = self.table.time(head.record_type, body, attr).unwrap_or(0);
                if !self.side_band(record, attr, time) {
                    // Counted; passed on as it is.
                    self.out.extend_from_slice(record);
                    return true;
                }
            }
            // Tracepoints and the rest pass unparsed.
            _ => {}
        }
        self.pass_on(record, how);
        if output.wants_events() {
            match decode::event_of(&self.table, &self.kinds, record) {
                Ok(Some((time, event))) => output.event(time, event),
                Ok(None) => {}
                Err(decode::BadRecord) => self.unwinder.stats.bad_records += 1,
            }
        }
        true
    }

    /// A sample to unwind, or the collector's (its header's misc, its
    /// event): written with its call chain; false when held back.
    fn sample(
        &mut self,
        record: &[u8],
        (misc, attr): (u16, usize),
        how: Handling,
        settle: bool,
        output: &mut dyn Output,
    ) -> bool {
        let body = &record[HEAD_BYTES..];
        let fault = match how {
            Handling::Collector { minor, major } => match own::raw_sample(body) {
                Some((sample_id, raw)) if memory_events::is_memory_record(raw) => {
                    self.memory_record(sample_id, raw, output);
                    return true;
                }
                Some((sample_id, raw)) => {
                    self.collector_sample(sample_id, raw, [minor, major], record, settle)
                }
                None => {
                    self.unwinder.stats.bad_records += 1;
                    Some(None)
                }
            },
            _ => {
                let time = self.table.time(rec::SAMPLE, body, attr).unwrap_or(0);
                let Some(EventRecord::Sample(s)) = parse_record(&self.table.raw(record, attr))
                else {
                    self.unwinder.stats.bad_records += 1;
                    self.out.extend_from_slice(record);
                    return true;
                };
                let info = self.table.parse_infos[attr];
                let major = self.kinds[attr] == EventKind::Major;
                self.kernel_sample(&s, (misc, info, major), time, record, settle)
            }
        };
        let Some(fault) = fault else {
            return false;
        };
        if let Some(written) = fault {
            self.written(written, output);
        }
        true
    }

    /// A memory event's record of the collector's (`rss_stat`, a syscall),
    /// written as the tracepoint's and handed on like one.
    fn memory_record(&mut self, sample_id: SampleId, raw: &[u8], output: &mut dyn Output) {
        let Some(events) = self.memory_events else {
            self.unwinder.stats.bad_records += 1;
            return;
        };
        let mut record = std::mem::take(&mut self.filled);
        record.clear();
        if memory_events::write_tracepoint_record(raw, &events, sample_id, &mut record) {
            self.record(&record, true, output);
        } else {
            self.unwinder.stats.bad_records += 1;
        }
        self.filled = record;
    }

    /// Writes a rewritten fault: its entry record when the collector
    /// paired it, then its sample with `self.chain`; and hands it on.
    fn written(&mut self, fault: Rewritten, output: &mut dyn Output) {
        let chain = self.chains.then_some(&self.chain[..]);
        if self.write_samples {
            if let (Some(entry), Some(events)) = (fault.entry, self.entry_events) {
                let (id, tracepoint) = if entry.kernel_mode {
                    events.kernel
                } else {
                    events.user
                };
                EntryRecord {
                    sample_id: SampleId {
                        time: fault.sample.sample_id.time.saturating_sub(entry.latency_ns),
                        id,
                        ..fault.sample.sample_id
                    },
                    tracepoint,
                    address: fault.sample.addr,
                    ip: fault.sample.ip,
                    error_code: entry.error_code,
                }
                .write(&mut self.out);
            }
            fault.sample.write(chain, &mut self.out);
        }
        if output.wants_events() {
            let s = fault.sample.sample_id;
            let event = Event::Fault(FaultSample {
                major: fault.major,
                pid: s.pid,
                tid: s.tid,
                time: s.time,
                addr_avma: fault.sample.addr,
                kernel_mode: fault.sample.misc == rec::MISC_KERNEL,
                callchain: chain.map(Chain::Words),
                weight: 1,
                user_stack: None,
                entry: fault.entry,
            });
            output.event(s.time, event);
        }
    }

    /// A sample with the user registers and stack copy (its header's misc,
    /// its event's layout, whether it is a major fault), its chain unwound
    /// from them after the kernel's part of the chain into `self.chain`.
    /// None when held back; Some(None) when it did not parse (counted).
    fn kernel_sample(
        &mut self,
        s: &SampleRecord<'_>,
        (misc, info, major): (u16, RecordParseInfo, bool),
        time: u64,
        record: &[u8],
        settle: bool,
    ) -> Option<Option<Rewritten>> {
        let (Some(id), Some(ip), Some(pid), Some(tid), Some(addr), Some(cpu)) =
            (s.id, s.ip, s.pid, s.tid, s.addr, s.cpu)
        else {
            // Cannot happen with the attrs pfprof opens; counted.
            self.unwinder.stats.bad_records += 1;
            return Some(None);
        };
        self.chain.clear();
        if let Some(kernel) = &s.callchain {
            self.chain
                .extend((0..kernel.len()).map_while(|i| kernel.get(i)));
        }
        match s.user_regs.as_ref().and_then(UserRegs::from_sample) {
            Some(_) if self.own_pid == Some(pid) => {}
            Some(regs) => {
                let sample = UserSample {
                    pid,
                    time,
                    kernel_mode: s.cpu_mode == CpuMode::Kernel,
                    regs,
                    stack: copied_stack(&s.user_stack),
                    holes: 0,
                    bounded: false,
                    pressed: false,
                };
                if !self.unwind_or_defer(sample, tid, settle, record) {
                    return None;
                }
            }
            None => self.unwinder.stats.no_user_regs += 1,
        }
        // The kernel's record ends with DATA_SRC, when asked for (it
        // follows the stack copy).
        let data_src = (info.sample_format.contains(SampleFormat::DATA_SRC))
            .then(|| le_u64(record, record.len().saturating_sub(8)))
            .flatten();
        Some(Some(Rewritten {
            sample: FaultRecord {
                misc,
                sample_id: SampleId {
                    pid,
                    tid,
                    time,
                    cpu,
                    id,
                },
                ip,
                addr,
                data_src,
            },
            major,
            entry: None,
        }))
    }

    /// A record that changes address spaces (a mapping, an exec, a fork,
    /// a process's exit) of event `attr`, at `time`, told to the unwinder;
    /// false when it does not parse (counted).
    fn side_band(&mut self, record: &[u8], attr: usize, time: u64) -> bool {
        let head = RecordHead::parse(record).expect("a whole record");
        let changed = if head.record_type == rec::MMAP2 {
            let Some(m) = Mapping::parse(rec::MMAP2, head.misc, &record[HEAD_BYTES..]) else {
                self.unwinder.stats.bad_records += 1;
                return false;
            };
            let avma = m.avma..m.avma.saturating_add(m.len);
            let unwinder = &mut self.unwinder;
            let replaced =
                unwinder.on_mmap(m.pid, avma, m.file_offset, m.prot, m.path, m.build_id());
            replaced.then_some(m.pid)
        } else {
            match parse_record(&self.table.raw(record, attr)) {
                Some(EventRecord::Comm(c)) if c.is_execve => {
                    self.unwinder.on_exec(c.pid, time);
                    self.forget_stack_top(c.tid);
                    Some(c.pid)
                }
                Some(EventRecord::Fork(f)) => {
                    self.unwinder.on_fork(f.pid, f.ppid);
                    None
                }
                Some(EventRecord::Exit(e)) => {
                    self.forget_stack_top(e.tid);
                    (e.pid == e.tid).then(|| {
                        self.unwinder.on_exit(e.pid, time);
                        e.pid
                    })
                }
                Some(_) => None,
                None => {
                    self.unwinder.stats.bad_records += 1;
                    return false;
                }
            }
        };
        // The process's code changed: what its stacks unwound to may not hold.
        if let (Some(pid), Some(collector)) = (changed, &self.collector) {
            self.remembered.forget_pid(collector, pid);
        }
        true
    }

    /// Thread `tid` exited or exec'd: its stack is another or none.
    fn forget_stack_top(&mut self, tid: i32) {
        if let Some(collector) = &self.collector {
            self.stack_tops.forget(collector, tid);
        }
    }

    /// A record handed on unchanged, except that the collector's event,
    /// which the recording does not describe, is named by the leader's id
    /// (its records other than samples: `PERF_RECORD_LOST`, written with the
    /// id of the event whose output found the ring full).
    fn pass_on(&mut self, record: &[u8], how: Handling) {
        let start = self.out.len();
        self.out.extend_from_slice(record);
        if matches!(how, Handling::Collector { .. }) {
            SampleId::set_trailer_id(&mut self.out[start..], self.leader_id);
        }
    }

    /// Appends the sample's user frames to the chain; false (the record
    /// held back, the chain as it was) while the process's mappings are not
    /// known yet and this is not the last attempt. A whole chain found from
    /// the stack words alone is remembered by the collector.
    fn unwind_or_defer(
        &mut self,
        sample: UserSample<'_>,
        tid: i32,
        settle: bool,
        record: &[u8],
    ) -> bool {
        let key = UnwoundKey {
            pid: sample.pid,
            ip: sample.regs.ip,
            sp: sample.regs.sp,
            bp: sample.regs.bp,
        };
        if let Some((frames, span)) = self.remembered.chain_of(&key, sample.stack) {
            // What the collector would have sent, had it known the stack
            // when the fault came.
            if let Some(user) = self.chain.iter().position(|&a| a == rec::CONTEXT_USER) {
                self.chain.truncate(user);
            }
            self.chain.push(rec::CONTEXT_USER);
            self.chain.extend_from_slice(frames);
            self.unwinder.stats.count_remembered(span);
            return true;
        }
        let reads = self.collector.is_some().then_some(&mut self.reads);
        let outcome =
            (self.unwinder).unwind_user_part_reading(sample, settle, &mut self.chain, reads);
        if outcome == Outcome::Unknown {
            self.deferred.push((sample.time, record.to_vec()));
            return false;
        }
        if let Some(collector) = &self.collector {
            match outcome {
                Outcome::Complete => {
                    let needed = self.reads.needed;
                    self.stack_tops
                        .learn(collector, tid, sample.regs.sp, needed);
                }
                Outcome::Truncated(Stop::StackCopy) if sample.bounded => {
                    self.stack_tops.too_short(collector, tid);
                }
                _ => {}
            }
            if outcome == Outcome::Complete && self.reads.only_words {
                let user = self.chain.iter().position(|&a| a == rec::CONTEXT_USER);
                let unwound = Unwound {
                    words: &self.reads.words,
                    frames: user.map_or(&[][..], |at| &self.chain[at + 1..]),
                };
                self.remembered.learn(collector, key, unwound);
            }
        }
        true
    }

    /// A record of the BPF collector, its chain in `self.chain`: the
    /// kernel's part, then the user part it carries (fp, or remembered), or
    /// unwound from its stack (dwarf). None when held back (see
    /// [`StackRewriter::record`]); Some(None) when it did not parse.
    fn collector_sample(
        &mut self,
        sample_id: SampleId,
        raw: &[u8],
        [minor, major]: [u64; 2],
        record: &[u8],
        settle: bool,
    ) -> Option<Option<Rewritten>> {
        let SampleId {
            pid,
            tid,
            time,
            cpu,
            ..
        } = sample_id;
        let Some(fault) = Fault::parse(raw) else {
            self.unwinder.stats.bad_records += 1;
            return Some(None);
        };
        self.chain.clear();
        if !fault.kernel_ips.is_empty() {
            self.chain.push(rec::CONTEXT_KERNEL);
            self.chain.extend(le_u64s(fault.kernel_ips));
        }
        if self.own_pid != Some(pid) {
            if let Some(user_ips) = fault.user_ips {
                self.chain.push(rec::CONTEXT_USER);
                self.chain.extend(le_u64s(user_ips));
                if let Some(span) = fault.cached_span {
                    self.unwinder.stats.count_remembered(span as usize);
                }
            } else if self.unwind_collected {
                let sample = UserSample {
                    pid,
                    time,
                    kernel_mode: fault.kernel_mode,
                    regs: fault.regs,
                    stack: fault.stack,
                    holes: fault.holes,
                    bounded: fault.bounded,
                    pressed: fault.pressed,
                };
                if !self.unwind_or_defer(sample, tid, settle, record) {
                    return None;
                }
                if fault.bounded {
                    self.unwinder.stats.copies_to_top += 1;
                }
                if fault.pressed {
                    self.unwinder.stats.pressed_copies += 1;
                }
            }
        }
        Some(Some(Rewritten {
            sample: FaultRecord {
                misc: if fault.kernel_mode {
                    rec::MISC_KERNEL
                } else {
                    rec::MISC_USER
                },
                sample_id: SampleId {
                    pid,
                    tid,
                    time,
                    cpu,
                    id: if fault.major { major } else { minor },
                },
                ip: fault.ip,
                addr: fault.addr,
                data_src: Some(DATA_SRC_NA),
            },
            major: fault.major,
            entry: fault.entry.map(|e| PairedEntry {
                error_code: e.error_code,
                latency_ns: e.latency_ns,
                kernel_mode: e.kernel,
            }),
        }))
    }
}

/// The records of one ring not yet handed back, as the merge reads them.
enum Pending<'a> {
    /// A perf ring's: (at most) two slices, the second after the wrap.
    Perf((&'a [u8], &'a [u8])),
    /// A BPF ring's: the same, each record after its 8-byte header.
    Bpf((&'a [u8], &'a [u8])),
}

impl<'a> Pending<'a> {
    /// The whole record at `offset` (a perf record: the BPF ring's hold
    /// perf records too) and the bytes it takes in its ring; `Ok(None)` at
    /// the end of what is there. `scratch` holds a perf record cut by the
    /// wrap.
    fn record_at<'s>(
        &self,
        offset: usize,
        scratch: &'s mut Vec<u8>,
    ) -> Result<Option<(&'s [u8], usize)>, BadSize>
    where
        'a: 's,
    {
        match *self {
            Pending::Perf((first, second)) => {
                Ok(record_at(first, second, offset, scratch)?.map(|record| (record, record.len())))
            }
            Pending::Bpf(slices) => Ok(bpf_record_at(slices, offset, scratch)),
        }
    }

    /// Bytes in all.
    fn len(&self) -> usize {
        match self {
            Pending::Perf((first, second)) | Pending::Bpf((first, second)) => {
                first.len() + second.len()
            }
        }
    }

    /// The bytes from `offset` on that are in one piece (to prefetch).
    fn contiguous_from(&self, offset: usize) -> Option<&'a [u8]> {
        match *self {
            Pending::Perf((first, _)) | Pending::Bpf((first, _)) => first.get(offset..),
        }
    }
}

/// A fault as the rewriter writes it (its chain is the rewriter's).
struct Rewritten {
    sample: FaultRecord,
    major: bool,
    entry: Option<PairedEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::decode::tests::sample_with_chain;
    use crate::format::events::{own, FileId};
    use crate::record::{synth, sys};
    use crate::unwind::tests::{snapshot, unwinder_with_nofp, DIR, PID};
    use crate::unwind::{SAMPLE_REGS_USER, TRUNCATED_FRAME};
    use perf_event_open_sys::bindings as b;

    const ID: u64 = 42;

    /// An output that keeps the records written.
    struct Collect<'a>(&'a mut Vec<u8>);

    impl Output for Collect<'_> {
        fn records(&mut self, bytes: &[u8]) -> io::Result<()> {
            self.0.extend_from_slice(bytes);
            Ok(())
        }

        fn wants_events(&self) -> bool {
            false
        }

        fn event(&mut self, _time: u64, _event: Event<'_>) {}
    }

    /// The kernel's sample of a dwarf-mode fault: registers and stack copy.
    fn kernel_sample(time: u64, addr: u64, regs: UserRegs, stack: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        let size = 8 + 6 * 8 + 9 * 8 + 8 + stack.len() + 8;
        r.extend_from_slice(&rec::SAMPLE.to_le_bytes());
        r.extend_from_slice(&2u16.to_le_bytes());
        r.extend_from_slice(&(size as u16).to_le_bytes());
        for v in [ID, 0x401000, (7u64 << 32) | 7, time, addr, 1] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        // REGS_USER: abi 64, then BX, BP, SP, IP, R12-R15; STACK_USER:
        // size, bytes, dyn size.
        let [bx, r12, r13, r14, r15] = regs.callee;
        for v in [2, bx, regs.bp, regs.sp, regs.ip, r12, r13, r14, r15] {
            r.extend_from_slice(&v.to_le_bytes());
        }
        r.extend_from_slice(&(stack.len() as u64).to_le_bytes());
        r.extend_from_slice(stack);
        r.extend_from_slice(&(stack.len() as u64).to_le_bytes());
        r
    }

    fn kernel_attr() -> Vec<u8> {
        let mut attr = sys::new_attr();
        attr.sample_type = (b::PERF_SAMPLE_IDENTIFIER
            | b::PERF_SAMPLE_IP
            | b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_TIME
            | b::PERF_SAMPLE_ADDR
            | b::PERF_SAMPLE_CPU
            | b::PERF_SAMPLE_REGS_USER
            | b::PERF_SAMPLE_STACK_USER) as u64;
        attr.sample_regs_user = SAMPLE_REGS_USER;
        attr.sample_stack_user = 4096;
        attr.set_sample_id_all(1);
        sys::attr_bytes(&attr).to_vec()
    }

    /// The mapping of the snapshot's executable, as an MMAP2 record
    /// (`build_id`: in the kernel's build-id form, else by inode).
    fn nofp_mmap(snap: &crate::unwind::tests::Snapshot, build_id: Option<&[u8]>) -> Vec<u8> {
        let line = MapsLine {
            start_avma: snap.text.start,
            end_avma: snap.text.end,
            prot: 5,
            flags: 2,
            file_offset: snap.text_file_offset,
            dev: (0, 0),
            inode: 0,
            path: format!("{DIR}/nofp"),
        };
        let record = synth::mmap2(PID, &line, 1, ID);
        let Some(build_id) = build_id else {
            return record;
        };
        // synth writes none that is empty: the kernel does, for a file
        // without the note.
        let mapping = Mapping {
            file: FileId::BuildId(build_id),
            ..Mapping::parse(rec::MMAP2, 0, &record[8..]).unwrap()
        };
        let mut rewritten = Vec::new();
        let start = RecordHead::begin(rec::MMAP2, mapping.mmap2_misc(), &mut rewritten);
        mapping.write_mmap2(&mut rewritten);
        rewritten.extend_from_slice(&record[record.len() - own::TRAILER_BYTES..]);
        RecordHead::end(&mut rewritten, start);
        rewritten
    }

    /// The snapshot's fault as the kernel samples it, and as the rewriter
    /// should write it (the chain the unwinder finds, in the layout of a
    /// frame-pointer recording).
    fn nofp_sample(snap: &crate::unwind::tests::Snapshot) -> (Vec<u8>, Vec<u8>) {
        let mut chain = vec![rec::CONTEXT_USER];
        unwinder_with_nofp(snap).unwind(
            UserSample {
                time: 5,
                ..snap.sample()
            },
            true,
            &mut chain,
        );
        assert_eq!(chain.last(), Some(&TRUNCATED_FRAME));
        let mut want = sample_with_chain(ID, 1, 5, 0x1234, &chain);
        // sample_with_chain's pid/tid is 7; the sample belongs to PID.
        want[24..32].copy_from_slice(&((PID as u64) << 32 | PID as u64).to_le_bytes());
        let mut sample = kernel_sample(5, 0x1234, snap.regs, &snap.stack);
        sample[24..32].copy_from_slice(&((PID as u64) << 32 | PID as u64).to_le_bytes());
        (sample, want)
    }

    /// Fed in runs of whole records, the side-band record comes out
    /// unchanged and the sample rewritten with the chain the unwinder
    /// finds; the process's sample waits for its mapping when the mapping
    /// arrives later in the same pass (another CPU's buffer).
    #[test]
    fn rewrites_samples_in_the_recordings_layout() {
        let snap = snapshot();
        let (sample, want) = nofp_sample(&snap);
        let mmap = nofp_mmap(&snap, None);
        let attr = kernel_attr();
        for (order, together) in [
            ("mmap first", true),
            ("mmap first", false),
            ("sample first", true),
            ("no mmap", true),
        ] {
            let mut rewriter =
                StackRewriter::new(&[(&attr, &[ID], Handling::Unwind)], &["minor-faults"]).unwrap();
            let runs = match order {
                "mmap first" => vec![mmap.clone(), sample.clone()],
                "sample first" => vec![sample.clone(), mmap.clone()],
                _ => vec![sample.clone()],
            };
            let runs = if together { vec![runs.concat()] } else { runs };
            let mut out = Vec::new();
            let mut sink = Collect(&mut out);
            for run in &runs {
                rewriter.feed(run, &mut sink).unwrap();
            }
            // Passes that cannot settle it yet, then the last one.
            rewriter.end_pass(0, false, &mut sink).unwrap();
            rewriter.end_pass(0, false, &mut sink).unwrap();
            rewriter.end_pass(0, true, &mut sink).unwrap();
            if order == "no mmap" {
                // Written once, with its IP only (a process never seen).
                let alone = sample_with_chain(ID, 1, 5, 0x1234, &[rec::CONTEXT_USER, snap.regs.ip]);
                assert_eq!(out[32..], alone[32..]);
                assert_eq!(out.len(), alone.len());
                assert_eq!(rewriter.stats().no_process, 1);
                continue;
            }
            let deferred = u64::from(order != "mmap first");
            assert_eq!(rewriter.stats().deferred, deferred, "{order} {together}");
            assert_eq!(rewriter.stats().bad_records, 0);
            assert_eq!(out, [&mmap[..], &want[..]].concat(), "{order} {together}");
        }
    }

    /// A mapping whose build-id the kernel left empty (a file without the
    /// note) is known by its path, as replay reads it: the sample unwinds
    /// as with an inode (with the empty id taken for one, no file matched
    /// it and the chain stopped at the IP).
    #[test]
    fn empty_build_id_is_none() {
        let snap = snapshot();
        let (sample, want) = nofp_sample(&snap);
        let mmap = nofp_mmap(&snap, Some(&[]));
        let attr = kernel_attr();
        let mut rewriter =
            StackRewriter::new(&[(&attr, &[ID], Handling::Unwind)], &["minor-faults"]).unwrap();
        let mut out = Vec::new();
        let mut sink = Collect(&mut out);
        rewriter
            .feed(&[&mmap[..], &sample[..]].concat(), &mut sink)
            .unwrap();
        rewriter.end_pass(0, true, &mut sink).unwrap();
        assert_eq!(rewriter.stats().bad_records, 0);
        assert_eq!(out, [&mmap[..], &want[..]].concat());
    }

    /// Bytes that are not whole records (a size below a header after a
    /// whole one) count as one bad record, once, and are not passed on.
    #[test]
    fn counts_what_is_not_a_record_once() {
        let attr = kernel_attr();
        let mut rewriter =
            StackRewriter::new(&[(&attr, &[ID], Handling::Unwind)], &["minor-faults"]).unwrap();
        let exit = synth::comm(PID, PID, "x", 1, 99);
        let mut bytes = [&exit[..], &[0; 8], &exit[..]].concat();
        bytes[exit.len()..exit.len() + 8].copy_from_slice(&[1, 0, 0, 0, 0, 0, 4, 0]);
        let mut out = Vec::new();
        let mut sink = Collect(&mut out);
        rewriter.feed(&bytes, &mut sink).unwrap();
        assert_eq!(rewriter.stats().bad_records, 1);
        assert_eq!(out, exit);
    }

    /// With DATA_SRC asked for, the kernel's value (the last field of its
    /// record) ends the rewritten sample too, and the size counts it.
    #[test]
    fn keeps_data_src() {
        let snap = snapshot();
        let data_src = 0x2910_0142u64.to_le_bytes();
        let mut sample = kernel_sample(5, 0x1234, snap.regs, &snap.stack);
        sample.extend_from_slice(&data_src);
        let size = sample.len() as u16;
        sample[6..8].copy_from_slice(&size.to_le_bytes());
        let mut attr = kernel_attr();
        let sample_type = u64::from_le_bytes(attr[24..32].try_into().unwrap());
        attr[24..32].copy_from_slice(&(sample_type | b::PERF_SAMPLE_DATA_SRC as u64).to_le_bytes());
        let mut rewriter =
            StackRewriter::new(&[(&attr, &[ID], Handling::Unwind)], &["minor-faults"]).unwrap();
        let mut out = Vec::new();
        let mut sink = Collect(&mut out);
        rewriter.feed(&sample, &mut sink).unwrap();
        rewriter.end_pass(0, true, &mut sink).unwrap();
        let alone = sample_with_chain(ID, 1, 5, 0x1234, &[rec::CONTEXT_USER, snap.regs.ip]);
        assert_eq!(out.len(), alone.len() + 8);
        assert_eq!(
            u16::from_le_bytes([out[6], out[7]]) as usize,
            out.len(),
            "size"
        );
        assert_eq!(out[32..alone.len()], alone[32..]);
        assert_eq!(out[alone.len()..], data_src);
        assert_eq!(rewriter.stats().bad_records, 0);
    }
}
