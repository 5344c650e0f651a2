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

use byteorder::LittleEndian;
use linux_perf_data::linux_perf_event_reader::{
    get_record_identifier, get_record_timestamp, CpuMode, EventRecord, RawData, RawEventRecord,
    RecordType, SampleFormat,
};

use super::bpf::Fault;
use super::ring::Ring;
use crate::format::events::{EventTable, RecordHead};
use crate::format::records as rec;
use crate::unwind::{copied_stack, Outcome, StackUnwinder, UnwindStats, UserRegs};

/// Records read ahead at a time by [`touch_ahead`].
const TOUCH_AHEAD: usize = 32;

/// Loads the first cache lines of the next `count` records (header,
/// registers, the top of the stack copy) in one independent sweep, so that
/// their cache misses overlap instead of stalling one record at a time: the
/// kernel wrote them from another CPU, kilobytes apart.
fn touch_ahead(mut bytes: &[u8], count: usize) {
    let mut sum = 0u8;
    for _ in 0..count {
        let Some(RecordHead { size, .. }) = RecordHead::parse(bytes) else {
            break;
        };
        if size < 8 || size > bytes.len() {
            break;
        }
        for offset in (64..size.min(512)).step_by(64) {
            sum = sum.wrapping_add(bytes[offset]);
        }
        bytes = &bytes[size..];
    }
    std::hint::black_box(sum);
}

/// The complete record at `offset` of a ring's pending bytes (`first`,
/// then `second` after the wrap), borrowed, or copied into `wrapped` when
/// it straddles the wrap; `Ok(None)` at the end, `Err` for a bad size.
fn record_at<'a>(
    first: &'a [u8],
    second: &'a [u8],
    offset: usize,
    wrapped: &'a mut Vec<u8>,
) -> Result<Option<&'a [u8]>, ()> {
    let total = first.len() + second.len();
    let byte = |i: usize| {
        if i < first.len() {
            first[i]
        } else {
            second[i - first.len()]
        }
    };
    if offset + 8 > total {
        return Ok(None);
    }
    let size = usize::from(u16::from_le_bytes([byte(offset + 6), byte(offset + 7)]));
    if size < 8 {
        return Err(());
    }
    if offset + size > total {
        return Ok(None);
    }
    if offset + size <= first.len() {
        return Ok(Some(&first[offset..offset + size]));
    }
    if offset >= first.len() {
        let start = offset - first.len();
        return Ok(Some(&second[start..start + size]));
    }
    wrapped.clear();
    wrapped.extend_from_slice(&first[offset..]);
    wrapped.extend_from_slice(&second[..size - (first.len() - offset)]);
    Ok(Some(&wrapped[..]))
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
    /// The start of a record cut by the end of a drained slice.
    carry: Vec<u8>,
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
            carry: Vec::new(),
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

    /// Takes drained bytes (records may be cut at either end) and hands the
    /// rewritten complete records to `sink`.
    pub fn feed(
        &mut self,
        mut bytes: &[u8],
        sink: &mut impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        if !self.carry.is_empty() {
            let mut carry = std::mem::take(&mut self.carry);
            let want = |carry: &[u8]| RecordHead::parse(carry).map_or(8, |h| h.size.max(8));
            while carry.len() < want(&carry) && !bytes.is_empty() {
                let n = (want(&carry) - carry.len()).min(bytes.len());
                carry.extend_from_slice(&bytes[..n]);
                bytes = &bytes[n..];
            }
            if carry.len() == want(&carry) && carry.len() >= 8 {
                self.first_look(&carry);
                carry.clear();
            }
            self.carry = carry;
        }
        let mut until_touch = 0;
        while bytes.len() >= 8 {
            if until_touch == 0 {
                touch_ahead(bytes, TOUCH_AHEAD);
                until_touch = TOUCH_AHEAD;
            }
            until_touch -= 1;
            let size = RecordHead::parse(bytes).map_or(0, |h| h.size);
            if size < 8 {
                // Not a kernel record: pass the rest on as it is.
                self.unwinder.stats.bad_records += 1;
                self.out.extend_from_slice(bytes);
                bytes = &[];
                break;
            }
            if bytes.len() < size {
                break;
            }
            self.first_look(&bytes[..size]);
            bytes = &bytes[size..];
        }
        self.carry.extend_from_slice(bytes);
        self.flush(sink)
    }

    /// The time stamp of a complete record; 0 for records without one
    /// (or of an event pfprof did not open), which then go first.
    fn time_of(&self, record: &[u8]) -> u64 {
        let Some(head) = RecordHead::parse(record) else {
            return 0;
        };
        let record_type = RecordType(head.record_type);
        let body = RawData::Single(&record[8..]);
        get_record_identifier::<LittleEndian>(record_type, body, true)
            .and_then(|id| self.table.attr_of(id))
            .and_then(|attr| self.table.time(record_type.0, body, attr))
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
                                Err(()) => {
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

    /// Handles one complete record; false when a sample was held back
    /// (`settle` unset and its process or code not known yet).
    fn record(&mut self, record: &[u8], settle: bool) -> bool {
        let Some(RecordHead {
            record_type, misc, ..
        }) = RecordHead::parse(record)
        else {
            return true;
        };
        let body = RawData::Single(&record[8..]);
        let id = get_record_identifier::<LittleEndian>(RecordType(record_type), body, true);
        let attr = id.and_then(|id| self.table.attr_of(id));
        let (Some(id), Some(attr)) = (id, attr) else {
            // pfprof's own records, or an id we did not open: unchanged.
            self.out.extend_from_slice(record);
            return true;
        };
        // Only the samples to unwind and the records that change address
        // spaces are parsed; the rest (tracepoints, ...) pass as they are.
        let how = self.handling[attr];
        let wanted = match record_type {
            rec::SAMPLE => how != Handling::Pass,
            rec::MMAP2 | rec::COMM | rec::FORK | rec::EXIT => true,
            _ => false,
        };
        if !wanted {
            self.pass_on(record, how);
            return true;
        }
        let info = self.table.parse_infos[attr];
        let time =
            get_record_timestamp::<LittleEndian>(RecordType(record_type), body, &info).unwrap_or(0);
        let parsed = if crate::format::decode::would_panic(record_type, misc, &body) {
            Err(())
        } else {
            RawEventRecord::new(RecordType(record_type), misc, body, info)
                .parse()
                .map_err(|_| ())
        };
        let Ok(parsed) = parsed else {
            self.unwinder.stats.bad_records += 1;
            self.out.extend_from_slice(record);
            return true;
        };
        match parsed {
            EventRecord::Sample(s) if matches!(how, Handling::Collector { .. }) => {
                return self.collector_sample(&s, how, time, record, settle);
            }
            EventRecord::Sample(s) => {
                let (Some(ip), Some(pid), Some(tid), Some(addr), Some(cpu)) =
                    (s.ip, s.pid, s.tid, s.addr, s.cpu)
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
                let own = self.own_pid == Some(pid);
                match s.user_regs.as_ref().and_then(UserRegs::from_sample) {
                    Some(_) if own => {}
                    Some(regs) => {
                        let stack = copied_stack(&s.user_stack);
                        let kernel_mode = s.cpu_mode == CpuMode::Kernel;
                        let at = (pid, time, kernel_mode);
                        if !self.unwind_or_defer(at, regs, stack, settle, record) {
                            return false;
                        }
                    }
                    None => self.unwinder.stats.no_user_regs += 1,
                }
                // IDENTIFIER, IP, TID, TIME, ADDR, CPU, CALLCHAIN, and
                // DATA_SRC when asked for: the kernel's record ends with it
                // (it follows the stack copy).
                let data_src = info
                    .sample_format
                    .contains(SampleFormat::DATA_SRC)
                    .then(|| record.get(record.len().saturating_sub(8)..))
                    .flatten();
                let sample = Written {
                    id,
                    misc,
                    ip,
                    pid,
                    tid,
                    time,
                    addr,
                    cpu,
                };
                self.write_sample(sample, data_src);
                return true;
            }
            EventRecord::Mmap2(m) if record_type == rec::MMAP2 => {
                let (file_offset, build_id) = match &m.file_id {
                    linux_perf_data::linux_perf_event_reader::Mmap2FileId::BuildId(id) => {
                        (m.page_offset, Some(&id[..]))
                    }
                    _ => (m.page_offset, None),
                };
                let path = m.path.as_slice();
                self.unwinder.on_mmap(
                    m.pid,
                    m.address..m.address.saturating_add(m.length),
                    file_offset,
                    m.protection,
                    &path,
                    build_id,
                );
            }
            EventRecord::Comm(c) if record_type == rec::COMM && c.is_execve => {
                self.unwinder.on_exec(c.pid, time);
            }
            EventRecord::Fork(f) if record_type == rec::FORK => {
                self.unwinder.on_fork(f.pid, f.ppid);
            }
            EventRecord::Exit(e) if record_type == rec::EXIT && e.pid == e.tid => {
                self.unwinder.on_exit(e.pid, time);
            }
            _ => {}
        }
        self.pass_on(record, how);
        true
    }

    /// A record handed on unchanged, except that the collector's event,
    /// which the recording does not describe, is named by the leader's id
    /// (its records other than samples: `PERF_RECORD_LOST`, written with the
    /// id of the event whose output found the ring full).
    fn pass_on(&mut self, record: &[u8], how: Handling) {
        self.out.extend_from_slice(record);
        if matches!(how, Handling::Collector { .. }) && record.len() >= 16 {
            // sample_id_all puts PERF_SAMPLE_IDENTIFIER last.
            let end = self.out.len();
            self.out[end - 8..end].copy_from_slice(&self.leader_id.to_le_bytes());
        }
    }

    /// Appends the user frames of `regs` and `stack` to the chain; false
    /// (the record held back, the chain as it was) while the process's
    /// mappings are not known yet and this is not the last attempt.
    fn unwind_or_defer(
        &mut self,
        (pid, time, kernel_mode): (i32, u64, bool),
        regs: UserRegs,
        stack: &[u8],
        settle: bool,
        record: &[u8],
    ) -> bool {
        let kernel_len = self.chain.len();
        self.chain.push(rec::CONTEXT_USER);
        let outcome =
            (self.unwinder).unwind(pid, time, kernel_mode, regs, stack, settle, &mut self.chain);
        if outcome == Outcome::Unknown {
            self.chain.truncate(kernel_len);
            self.deferred.push((time, record.to_vec()));
            return false;
        }
        true
    }

    /// A record of the BPF collector: unwound, and written as the sample of
    /// the fault event it stands for, in the recording's layout for fault
    /// samples. False when held back (see [`StackRewriter::record`]).
    fn collector_sample(
        &mut self,
        s: &linux_perf_data::linux_perf_event_reader::SampleRecord<'_>,
        how: Handling,
        time: u64,
        record: &[u8],
        settle: bool,
    ) -> bool {
        let Handling::Collector { minor, major } = how else {
            return true;
        };
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
            self.chain.extend(
                fault
                    .kernel_ips
                    .chunks_exact(8)
                    .map(|ip| u64::from_le_bytes(ip.try_into().unwrap())),
            );
        }
        if self.own_pid != Some(pid) {
            let at = (pid, time, fault.kernel_mode);
            if !self.unwind_or_defer(at, fault.regs, fault.stack, settle, record) {
                return false;
            }
        }
        let sample = Written {
            id: if fault.major { major } else { minor },
            misc: if fault.kernel_mode {
                rec::MISC_KERNEL
            } else {
                rec::MISC_USER
            },
            ip: fault.ip,
            pid,
            tid,
            time,
            addr: fault.addr,
            cpu,
        };
        self.write_sample(sample, Some(&DATA_SRC_NA.to_le_bytes()));
        true
    }

    /// Appends a fault sample with `self.chain` as its call chain: the
    /// layout of the recording's fault events (IDENTIFIER, IP, TID, TIME,
    /// ADDR, CPU, CALLCHAIN, then DATA_SRC when they have it).
    fn write_sample(&mut self, w: Written, data_src: Option<&[u8]>) {
        let size = 8 + 7 * 8 + 8 * self.chain.len() + data_src.map_or(0, <[u8]>::len);
        let out = &mut self.out;
        out.extend_from_slice(&rec::SAMPLE.to_le_bytes());
        out.extend_from_slice(&w.misc.to_le_bytes());
        out.extend_from_slice(&(size as u16).to_le_bytes());
        for value in [w.id, w.ip] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&w.pid.to_le_bytes());
        out.extend_from_slice(&w.tid.to_le_bytes());
        for value in [w.time, w.addr] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        out.extend_from_slice(&w.cpu.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(self.chain.len() as u64).to_le_bytes());
        for &frame in &self.chain {
            out.extend_from_slice(&frame.to_le_bytes());
        }
        out.extend_from_slice(data_src.unwrap_or_default());
    }
}

/// The fields of a fault sample as written (its chain is the rewriter's).
#[derive(Debug, Clone, Copy)]
struct Written {
    id: u64,
    misc: u16,
    ip: u64,
    pid: i32,
    tid: i32,
    time: u64,
    addr: u64,
    cpu: u32,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::decode::tests::sample_with_chain;
    use crate::record::{synth, sys};
    use crate::sys::maps::MapsLine;
    use crate::unwind::tests::{snapshot, unwinder_with_nofp, DIR, PID};
    use crate::unwind::{SAMPLE_REGS_USER, TRUNCATED_FRAME};
    use perf_event_open_sys::bindings as b;

    const ID: u64 = 42;

    /// Records are cut out of a ring's pending bytes whole: borrowed from
    /// either slice, copied when they straddle the wrap, not at all while
    /// incomplete, and a size below a header is an error.
    #[test]
    fn records_across_the_wrap() {
        let record = |tag: u8, len: u16| {
            let mut r = vec![tag; usize::from(len)];
            r[6..8].copy_from_slice(&len.to_le_bytes());
            r
        };
        let (a, b, c) = (record(1, 16), record(2, 24), record(3, 8));
        let all = [&a[..], &b[..], &c[..]].concat();
        let mut wrapped = Vec::new();
        // (cut between first and second slice, offset) → the record wanted.
        let cases: [(usize, usize, Option<&[u8]>); 8] = [
            (48, 0, Some(&a)),
            (48, 16, Some(&b)),
            (48, 40, Some(&c)),
            (48, 48, None),
            (20, 16, Some(&b)),
            (16, 16, Some(&b)),
            (3, 0, Some(&a)),
            (44, 40, Some(&c)),
        ];
        for (cut, offset, want) in cases {
            let (first, second) = all.split_at(cut);
            let got = record_at(first, second, offset, &mut wrapped);
            assert_eq!(got, Ok(want), "cut {cut} offset {offset}");
        }
        assert_eq!(
            record_at(&all[..20], &[], 16, &mut wrapped),
            Ok(None),
            "incomplete"
        );
        assert_eq!(record_at(&[0u8; 8], &[], 0, &mut wrapped), Err(()));
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

    /// Drained bytes cut anywhere (inside a header, inside the stack copy)
    /// come out as the side-band record unchanged and the sample rewritten
    /// with the chain the unwinder finds, in the layout of a frame-pointer
    /// recording; the process's sample waits for its mapping when the
    /// mapping arrives later in the same pass (another CPU's buffer).
    #[test]
    fn rewrites_samples_cut_anywhere() {
        let snap = snapshot();
        let mut chain = vec![rec::CONTEXT_USER];
        unwinder_with_nofp(&snap).unwind(PID, 5, false, snap.regs, &snap.stack, true, &mut chain);
        assert_eq!(chain.last(), Some(&TRUNCATED_FRAME));
        let mut want = sample_with_chain(ID, 1, 5, 0x1234, &chain);
        // sample_with_chain's pid/tid is 7; the sample belongs to PID.
        want[24..32].copy_from_slice(&((PID as u64) << 32 | PID as u64).to_le_bytes());

        let mmap = synth::mmap2(
            PID,
            &MapsLine {
                start_avma: snap.text.start,
                end_avma: snap.text.end,
                prot: 5,
                flags: 2,
                file_offset: snap.text_file_offset,
                dev: (0, 0),
                inode: 0,
                path: format!("{DIR}/nofp"),
            },
            1,
            ID,
        );
        let mut sample = kernel_sample(5, 0x1234, snap.regs, &snap.stack);
        sample[24..32].copy_from_slice(&((PID as u64) << 32 | PID as u64).to_le_bytes());
        let attr = kernel_attr();

        for (order, cuts) in [
            ("mmap first", vec![3, mmap.len() + 5, mmap.len() + 100]),
            ("mmap first", vec![mmap.len()]),
            ("sample first", vec![]),
            ("no mmap", vec![]),
        ] {
            let mut rewriter = StackRewriter::new(&[(&attr, &[ID], Handling::Unwind)]).unwrap();
            let bytes = match order {
                "mmap first" => [&mmap[..], &sample[..]].concat(),
                "sample first" => [&sample[..], &mmap[..]].concat(),
                _ => sample.clone(),
            };
            let mut out = Vec::new();
            let mut sink = |b: &[u8]| {
                out.extend_from_slice(b);
                Ok(())
            };
            let mut start = 0;
            for &cut in cuts.iter().chain([bytes.len()].iter()) {
                rewriter.feed(&bytes[start..cut], &mut sink).unwrap();
                start = cut;
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
            assert_eq!(rewriter.stats().deferred, deferred, "{order} {cuts:?}");
            assert_eq!(rewriter.stats().bad_records, 0);
            assert_eq!(out, [&mmap[..], &want[..]].concat(), "{order} {cuts:?}");
        }
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
