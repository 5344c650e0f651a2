//! `--call-graph dwarf` while recording: reads every drained record, keeps
//! the unwinder's address spaces current from the side-band records
//! (mmap2, comm/exec, fork, exit), and replaces each fault sample's user
//! registers and stack copy (kilobytes) with the call chain unwound from
//! them (a few hundred bytes). The recording then holds the same compact
//! samples as a frame-pointer one, and `report` reads both the same way.
//!
//! Records are handled in time order across the CPUs' buffers
//! ([`StackRewriter::merge_pass`]): each pass takes the records stamped
//! before its cutoff (2 ms ago), oldest first, so side-band records change
//! the address spaces in the order they happened. A sample whose process or
//! code is still not known (a record that reached its buffer late) is held
//! back and retried at the end of the pass, and settled for good once its
//! time is older than the pass's cutoff.

use std::io;

use linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, RawData, RecordParseInfo, SampleFormat, SampleRecord,
};

use super::bpf::Fault;
use super::ring::Ring;
use crate::format::events::own::{FaultRecord, SampleId};
use crate::format::events::stream::{record_at, BadSize, HEAD_BYTES};
use crate::format::events::{
    le_u64, le_u64s, parse_record, records, EventTable, Mapping, RecordHead,
};
use crate::format::records as rec;
use crate::unwind::{copied_stack, Outcome, StackUnwinder, UnwindStats, UserRegs, UserSample};

/// Records read ahead at a time by [`touch_ahead`].
const TOUCH_AHEAD: usize = 32;

/// Loads the first cache lines of the next `count` records (header,
/// registers, the top of the stack copy) in one independent sweep, so that
/// their cache misses overlap instead of stalling one record at a time: the
/// kernel wrote them from another CPU, kilobytes apart.
fn touch_ahead(bytes: &[u8], count: usize) {
    let mut sum = 0u8;
    for record in records(bytes).take(count).map_while(Result::ok) {
        for offset in (64..record.bytes.len().min(512)).step_by(64) {
            sum = sum.wrapping_add(record.bytes[offset]);
        }
    }
    std::hint::black_box(sum);
}

/// Records handled between two releases of ring space.
const MERGE_CHUNK: usize = 256;

/// The `data_src` the kernel writes in a fault sample (`PERF_MEM_NA`: op,
/// level, snoop, lock, TLB and level number "not available").
const DATA_SRC_NA: u64 = 0x1 | (0x1 << 5) | (0x1 << 19) | (0x1 << 24) | (0x1 << 26) | (0xf << 33);

/// What the rewriter does with an event's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Passes them on as they are (tracepoints, the uprobe).
    Pass,
    /// Unwinds their registers and stack copy into a call chain.
    Unwind,
    /// They are the BPF collector's records (see [`super::bpf`]): each
    /// becomes the sample of `minor` or `major` (those events' ids in the
    /// recording) with its unwound chain.
    Collector {
        /// An id of `minor-faults`.
        minor: u64,
        /// An id of `major-faults`.
        major: u64,
    },
}

/// Rewrites drained records, unwinding fault samples.
pub struct StackRewriter {
    unwinder: StackUnwinder,
    /// The events' layouts and the event of each id.
    table: EventTable,
    /// Per attr: what to do with its samples.
    handling: Vec<Handling>,
    /// The recording's first event's id: the collector's records that are
    /// not samples (`PERF_RECORD_LOST` written for it) are given it, since
    /// the recording does not describe the collector's own event.
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
}

impl StackRewriter {
    /// From the attrs the events were opened with (raw bytes, ids) and
    /// what to do with each one's samples; the first is the recording's
    /// leader.
    pub fn new(attrs: &[(&[u8], &[u64], Handling)]) -> Option<StackRewriter> {
        let table = EventTable::new(attrs.iter().map(|&(bytes, ids, _)| (bytes, ids))).ok()?;
        let handling = attrs.iter().map(|&(_, _, how)| how).collect();
        let leader_id = *attrs.first()?.1.first()?;
        Some(StackRewriter {
            unwinder: StackUnwinder::new(),
            table,
            handling,
            leader_id,
            out: Vec::with_capacity(1 << 20),
            chain: Vec::with_capacity(256),
            deferred: Vec::new(),
            wrapped: Vec::new(),
            own_pid: None,
        })
    }

    /// The uprobe on `main` (the executable's path and the probe's file
    /// offset): see [`StackUnwinder::set_main_probe`].
    pub fn set_main_probe(&mut self, path: &[u8], file_offset: u64) {
        self.unwinder.set_main_probe(path, file_offset);
    }

    /// pfprof's own process, whose samples are written without unwinding
    /// (a system-wide recording leaves them out but counts them): unwinding
    /// them took pfprof's own faults, which made more of them, and held
    /// back those whose mappings pfprof made after it started, copying each.
    pub fn set_own_pid(&mut self, pid: i32) {
        self.own_pid = Some(pid);
    }

    /// The bytes of user stack each sample asks for.
    pub fn set_stack_requested(&mut self, bytes: usize) {
        self.unwinder.set_stack_requested(bytes);
    }

    /// Unwinding counters so far.
    pub fn stats(&self) -> &UnwindStats {
        &self.unwinder.stats
    }

    /// Takes a run of whole records (pfprof's own, for processes that
    /// already run) and hands them on, rewritten, to `sink`. Bytes that
    /// are not whole records count as one bad record and are dropped.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        sink: &mut impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
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
            self.first_look(record.bytes);
        }
        self.flush(sink)
    }

    /// The time stamp of a complete record; 0 for records without one
    /// (or of an event pfprof did not open), which then go first.
    fn time_of(&self, record: &[u8]) -> u64 {
        let Some(head) = RecordHead::parse(record) else {
            return 0;
        };
        let body = &record[HEAD_BYTES..];
        (self.table.attr_of_record(head.record_type, body))
            .and_then(|attr| self.table.time(head.record_type, body, attr))
            .unwrap_or(0)
    }

    /// One pass over every CPU's ring buffer in time order: the records
    /// stamped before `cutoff` (all of them when `last`) are handled oldest
    /// first across the rings; newer ones stay in their ring for the next
    /// pass. So a fork is applied after every mapping its parent made
    /// before it, whichever CPU's buffer holds them (handled ring by ring, a
    /// child could copy an address space that still lacked mappings sitting
    /// in another CPU's buffer, and all its chains would stop at the first
    /// frame). The space of handled records goes back to the kernel every
    /// [`MERGE_CHUNK`] records, not at the end of the pass: a sample
    /// reserves its whole requested stack copy in the ring. Returns the
    /// bytes released.
    ///
    /// Measured against taking every record out of the rings at once into
    /// queues of pfprof's own (stack copies cut to what the kernel copied):
    /// the copying cost more than it saved, and the fork storm lost records
    /// in 4 of 6 runs that way, none in 3 of 3 this way.
    pub fn merge_pass(
        &mut self,
        rings: &mut [Ring],
        cutoff: u64,
        last: bool,
        sink: &mut impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<usize> {
        let mut released = 0;
        loop {
            let (handled, bytes) = self.merge_chunk(rings, cutoff, last);
            released += bytes;
            if handled == 0 {
                break;
            }
            if self.out.len() >= 1 << 20 {
                self.flush(sink)?;
            }
        }
        self.flush(sink)?;
        Ok(released)
    }

    /// Handles up to [`MERGE_CHUNK`] records stamped before `cutoff` (all
    /// when `last`) where the kernel wrote them, oldest first across the
    /// rings, then gives their space back; returns (records, bytes).
    fn merge_chunk(&mut self, rings: &mut [Ring], cutoff: u64, last: bool) -> (usize, usize) {
        let mut wrapped = std::mem::take(&mut self.wrapped);
        let mut consumed = vec![0usize; rings.len()];
        let mut handled = 0;
        {
            let pending: Vec<(&[u8], &[u8])> = rings.iter().map(Ring::pending).collect();
            let mut heads: Vec<Option<Option<u64>>> = vec![None; rings.len()];
            let mut until_touch = vec![0usize; rings.len()];
            while handled < MERGE_CHUNK {
                let mut best: Option<(u64, usize)> = None;
                for (ring, head) in heads.iter_mut().enumerate() {
                    if head.is_none() {
                        let (first, second) = pending[ring];
                        *head = Some(
                            match record_at(first, second, consumed[ring], &mut wrapped) {
                                Ok(Some(record)) => {
                                    let time = self.time_of(record);
                                    (last || time < cutoff).then_some(time)
                                }
                                Ok(None) => None,
                                Err(BadSize) => {
                                    // Not a kernel record (cannot happen): drop
                                    // the rest of this ring rather than loop.
                                    self.unwinder.stats.bad_records += 1;
                                    consumed[ring] = first.len() + second.len();
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
                let (first, second) = pending[ring];
                if until_touch[ring] == 0 {
                    if let Some(ahead) = first.get(consumed[ring]..) {
                        touch_ahead(ahead, TOUCH_AHEAD);
                    }
                    until_touch[ring] = TOUCH_AHEAD;
                }
                until_touch[ring] -= 1;
                if let Ok(Some(record)) = record_at(first, second, consumed[ring], &mut wrapped) {
                    consumed[ring] += record.len();
                    self.first_look(record);
                    handled += 1;
                }
                heads[ring] = None;
            }
        }
        for (ring, &len) in rings.iter_mut().zip(&consumed) {
            ring.release(len);
        }
        self.wrapped = wrapped;
        (handled, consumed.iter().sum())
    }

    /// Ends a pass over all buffers: retries held-back samples, settles
    /// those older than `cutoff` (all of them when `last`), and forgets
    /// processes that exited before it.
    pub fn end_pass(
        &mut self,
        cutoff: u64,
        last: bool,
        sink: &mut impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        // A sample still unknown goes back into `deferred` by itself.
        for (time, record) in std::mem::take(&mut self.deferred) {
            self.record(&record, last || time < cutoff);
        }
        self.unwinder.forget_exited(cutoff);
        self.flush(sink)
    }

    fn flush(&mut self, sink: &mut impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<()> {
        if !self.out.is_empty() {
            sink(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }

    /// A record as drained: held back (and counted) when its process or
    /// code is not known yet.
    fn first_look(&mut self, record: &[u8]) {
        if !self.record(record, false) {
            self.unwinder.stats.deferred += 1;
        }
    }

    /// Handles one whole record: a sample to unwind is rewritten, a record
    /// that changes address spaces updates the unwinder, every other one
    /// passes as it is. False when a sample was held back (`settle` unset
    /// and its process or code not known yet).
    fn record(&mut self, record: &[u8], settle: bool) -> bool {
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
                return self.sample(record, (head.misc, attr), how, settle);
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
    ) -> bool {
        let body = &record[HEAD_BYTES..];
        let time = self.table.time(rec::SAMPLE, body, attr).unwrap_or(0);
        let Some(EventRecord::Sample(s)) = parse_record(&self.table.raw(record, attr)) else {
            self.unwinder.stats.bad_records += 1;
            self.out.extend_from_slice(record);
            return true;
        };
        match how {
            Handling::Collector { minor, major } => {
                self.collector_sample(&s, [minor, major], time, record, settle)
            }
            _ => {
                let info = self.table.parse_infos[attr];
                self.kernel_sample(&s, (misc, info), time, record, settle)
            }
        }
    }

    /// A sample with the user registers and stack copy (its header's misc,
    /// its event's layout), written with the chain unwound from them after
    /// the kernel's part of the chain, in the layout of a frame-pointer
    /// recording's sample. False when held back.
    fn kernel_sample(
        &mut self,
        s: &SampleRecord<'_>,
        (misc, info): (u16, RecordParseInfo),
        time: u64,
        record: &[u8],
        settle: bool,
    ) -> bool {
        let (Some(id), Some(ip), Some(pid), Some(tid), Some(addr), Some(cpu)) =
            (s.id, s.ip, s.pid, s.tid, s.addr, s.cpu)
        else {
            // Cannot happen with the attrs pfprof opens; counted.
            self.unwinder.stats.bad_records += 1;
            return true;
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
                };
                if !self.unwind_or_defer(sample, settle, record) {
                    return false;
                }
            }
            None => self.unwinder.stats.no_user_regs += 1,
        }
        // The kernel's record ends with DATA_SRC, when asked for (it
        // follows the stack copy).
        let data_src = (info.sample_format.contains(SampleFormat::DATA_SRC))
            .then(|| le_u64(record, record.len().saturating_sub(8)))
            .flatten();
        let sample = FaultRecord {
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
        };
        sample.write(&self.chain, &mut self.out);
        true
    }

    /// A record that changes address spaces (a mapping, an exec, a fork,
    /// a process's exit) of event `attr`, at `time`, told to the unwinder;
    /// false when it does not parse (counted).
    fn side_band(&mut self, record: &[u8], attr: usize, time: u64) -> bool {
        let head = RecordHead::parse(record).expect("a whole record");
        if head.record_type == rec::MMAP2 {
            let Some(m) = Mapping::parse(rec::MMAP2, head.misc, &record[HEAD_BYTES..]) else {
                self.unwinder.stats.bad_records += 1;
                return false;
            };
            let avma = m.avma..m.avma.saturating_add(m.len);
            (self.unwinder).on_mmap(m.pid, avma, m.file_offset, m.prot, m.path, m.build_id());
            return true;
        }
        match parse_record(&self.table.raw(record, attr)) {
            Some(EventRecord::Comm(c)) if c.is_execve => self.unwinder.on_exec(c.pid, time),
            Some(EventRecord::Fork(f)) => self.unwinder.on_fork(f.pid, f.ppid),
            Some(EventRecord::Exit(e)) if e.pid == e.tid => self.unwinder.on_exit(e.pid, time),
            Some(_) => {}
            None => {
                self.unwinder.stats.bad_records += 1;
                return false;
            }
        }
        true
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
    /// known yet and this is not the last attempt.
    fn unwind_or_defer(&mut self, sample: UserSample<'_>, settle: bool, record: &[u8]) -> bool {
        let outcome = (self.unwinder).unwind_user_part(sample, settle, &mut self.chain);
        if outcome == Outcome::Unknown {
            self.deferred.push((sample.time, record.to_vec()));
            return false;
        }
        true
    }

    /// A record of the BPF collector: unwound, and written as the sample of
    /// the fault event it stands for (`ids`: minor's, major's), in the
    /// recording's layout for fault samples. False when held back (see
    /// [`StackRewriter::record`]).
    fn collector_sample(
        &mut self,
        s: &SampleRecord<'_>,
        [minor, major]: [u64; 2],
        time: u64,
        record: &[u8],
        settle: bool,
    ) -> bool {
        let fault = match (&s.raw, s.pid, s.tid, s.cpu) {
            (Some(RawData::Single(raw)), Some(pid), Some(tid), Some(cpu)) => {
                Fault::parse(raw).map(|f| (f, pid, tid, cpu))
            }
            _ => None,
        };
        let Some((fault, pid, tid, cpu)) = fault else {
            self.unwinder.stats.bad_records += 1;
            return true;
        };
        self.chain.clear();
        if !fault.kernel_ips.is_empty() {
            self.chain.push(rec::CONTEXT_KERNEL);
            self.chain.extend(le_u64s(fault.kernel_ips));
        }
        if self.own_pid != Some(pid) {
            let sample = UserSample {
                pid,
                time,
                kernel_mode: fault.kernel_mode,
                regs: fault.regs,
                stack: fault.stack,
            };
            if !self.unwind_or_defer(sample, settle, record) {
                return false;
            }
        }
        let sample = FaultRecord {
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
        };
        sample.write(&self.chain, &mut self.out);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::decode::tests::sample_with_chain;
    use crate::format::events::{own, FileId};
    use crate::record::{synth, sys};
    use crate::sys::maps::MapsLine;
    use crate::unwind::tests::{snapshot, unwinder_with_nofp, DIR, PID};
    use crate::unwind::{SAMPLE_REGS_USER, TRUNCATED_FRAME};
    use perf_event_open_sys::bindings as b;

    const ID: u64 = 42;

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
        let [bx, r12, r13, r14, r15] = regs.callee.map(|v| v.unwrap_or(0));
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
            let mut rewriter = StackRewriter::new(&[(&attr, &[ID], Handling::Unwind)]).unwrap();
            let runs = match order {
                "mmap first" => vec![mmap.clone(), sample.clone()],
                "sample first" => vec![sample.clone(), mmap.clone()],
                _ => vec![sample.clone()],
            };
            let runs = if together { vec![runs.concat()] } else { runs };
            let mut out = Vec::new();
            let mut sink = |b: &[u8]| {
                out.extend_from_slice(b);
                Ok(())
            };
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
        let mut rewriter = StackRewriter::new(&[(&attr, &[ID], Handling::Unwind)]).unwrap();
        let mut out = Vec::new();
        let mut sink = |b: &[u8]| {
            out.extend_from_slice(b);
            Ok(())
        };
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
        let mut rewriter = StackRewriter::new(&[(&attr, &[ID], Handling::Unwind)]).unwrap();
        let exit = synth::comm(PID, PID, "x", 1, 99);
        let mut bytes = [&exit[..], &[0; 8], &exit[..]].concat();
        bytes[exit.len()..exit.len() + 8].copy_from_slice(&[1, 0, 0, 0, 0, 0, 4, 0]);
        let mut out = Vec::new();
        let mut sink = |b: &[u8]| {
            out.extend_from_slice(b);
            Ok(())
        };
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
        let mut rewriter = StackRewriter::new(&[(&attr, &[ID], Handling::Unwind)]).unwrap();
        let mut out = Vec::new();
        let mut sink = |b: &[u8]| {
            out.extend_from_slice(b);
            Ok(())
        };
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
