//! One record as an [`Event`]: pfprof's own samples read in place, the
//! others through `linux-perf-event-reader`; and the live decoder, which
//! does the same for records as the recorder drains them.

use super::*;

/// A record that does not parse as its event says it should (counted by
/// the caller, never fatal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadRecord;

/// The kind of each event of `table`, by its type and name (`names[i]` is
/// the `i`th event's; a missing name makes it unnamed).
pub fn kinds_of(table: &EventTable, names: &[&str]) -> Vec<EventKind> {
    table
        .attrs
        .iter()
        .enumerate()
        .map(|(i, attr)| kind_from(&attr.type_, names.get(i).copied().filter(|n| !n.is_empty())))
        .collect()
}

/// One whole record of `table`'s events as an [`Event`] with its time:
/// `Ok(None)` for a record pfprof does not use, or of no event the table
/// knows. What the recorder hands its live consumers for the records it
/// does not rewrite.
pub fn event_of<'a>(
    table: &EventTable,
    kinds: &[EventKind],
    record: &'a [u8],
) -> Result<Option<(u64, Event<'a>)>, BadRecord> {
    let head = RecordHead::parse(record).ok_or(BadRecord)?;
    let body = record.get(HEAD_BYTES..head.size).ok_or(BadRecord)?;
    if head.record_type >= rec::USER_TYPE_START {
        return Ok(None);
    }
    let Some(attr) = table.attr_of_record(head.record_type, body) else {
        return Ok(None);
    };
    let time = table.time(head.record_type, body, attr).unwrap_or(0);
    let kind = kinds.get(attr).copied().unwrap_or(EventKind::Other);
    let event = to_event(&table.raw(record, attr), kind, Weight::One, time)?;
    Ok(event.map(|event| (time, event)))
}

/// One kernel record as an [`Event`]: `Ok(None)` for records pfprof does not
/// use. Shared by replay and the live stream.
// Inlined into the replay's loop: returned by value, the ~200-byte
// result was a memmove per fault (see `decode::tests::an_event_is_small`).
#[inline(always)]
pub(super) fn to_event<'a>(
    record: &RawEventRecord<'a>,
    kind: EventKind,
    weight: Weight,
    time: u64,
) -> Result<Option<Event<'a>>, BadRecord> {
    let record_type = record.record_type.0;
    if matches!(record_type, rec::MMAP | rec::MMAP2) {
        let RawData::Single(body) = record.data else {
            return Err(BadRecord);
        };
        return mapping_event(record_type, record.misc, body);
    }
    if record_type == rec::SAMPLE {
        if let RawData::Single(body) = record.data {
            let sample = sample::read(&record.parse_info, record.misc, body).ok_or(BadRecord)?;
            return sample_event(&sample, kind, weight, time);
        }
    }
    let Some(parsed) = parse_record(record) else {
        return Err(BadRecord);
    };
    let event = match parsed {
        EventRecord::Sample(s) => return sample_event(&Sample::of(s), kind, weight, time),
        EventRecord::Comm(c) => Event::Comm {
            pid: c.pid,
            tid: c.tid,
            name: c.name,
            exec: c.is_execve,
            time,
        },
        EventRecord::Fork(f) => Event::Fork {
            pid: f.pid,
            ppid: f.ppid,
            tid: f.tid,
        },
        EventRecord::Exit(e) => Event::Exit {
            pid: e.pid,
            tid: e.tid,
        },
        EventRecord::Lost(l) => Event::Lost {
            count: l.count,
            kind: None,
        },
        EventRecord::Raw(r) if r.record_type.0 == 13 => {
            // PERF_RECORD_LOST_SAMPLES: u64 lost, then sample_id.
            match raw_u64(&r.data, 0) {
                Some(count) => Event::Lost {
                    count,
                    kind: Some(kind),
                },
                None => {
                    return Err(BadRecord);
                }
            }
        }
        _ => return Ok(None),
    };
    Ok(Some(event))
}

/// A mapping record (MMAP or MMAP2) as an [`Event`]; `Ok(None)` for the
/// kernel's text (pid -1, written for perf): no process's address space,
/// kernel frames are named from /proc/kallsyms.
pub(super) fn mapping_event(
    record_type: u32,
    misc: u16,
    body: &[u8],
) -> Result<Option<Event<'_>>, BadRecord> {
    let m = Mapping::parse(record_type, misc, body).ok_or(BadRecord)?;
    if m.pid == -1 {
        return Ok(None);
    }
    Ok(Some(Event::Mmap {
        mapping: MmapRecord {
            pid: m.pid,
            avma: m.avma,
            len: m.len,
            file_offset: m.file_offset,
            prot: m.prot,
            flags: m.flags,
        },
        path: RawData::Single(m.path),
        // None for an empty one too (the vDSO, a file without the note):
        // the header's may say.
        build_id: m.build_id().map(<[u8]>::to_vec),
    }))
}

/// A sample as an [`Event`] by its event's kind: `Ok(None)` for events
/// pfprof does not use.
// Inlined into the replay's loop: returned by value, the ~200-byte
// result was a memmove per fault (see `decode::tests::an_event_is_small`).
#[inline(always)]
pub(super) fn sample_event<'a>(
    s: &Sample<'a>,
    kind: EventKind,
    weight: Weight,
    time: u64,
) -> Result<Option<Event<'a>>, BadRecord> {
    let event = match kind {
        EventKind::Minor | EventKind::Major => {
            let (Some(pid), Some(tid), Some(addr)) = (s.pid, s.tid, s.addr) else {
                return Err(BadRecord);
            };
            let weight = match weight {
                Weight::One => 1,
                Weight::Fixed(n) => n,
                Weight::FromSample => s.period.unwrap_or(1).max(1),
            };
            let user_stack = (s.user_regs.as_ref())
                .and_then(UserRegs::from_sample)
                .map(|regs| (regs, s.user_stack));
            Event::Fault(FaultSample {
                major: kind == EventKind::Major,
                pid,
                tid,
                time,
                addr_avma: addr,
                kernel_mode: s.cpu_mode == CpuMode::Kernel,
                callchain: s.callchain.map(Chain::Raw),
                weight,
                user_stack,
                entry: None,
            })
        }
        EventKind::EntryUser | EventKind::EntryKernel => {
            let fields = s
                .raw
                .as_ref()
                .and_then(|raw| Some((raw_u64(raw, 8)?, raw_u64(raw, 24)?)));
            let (Some(tid), Some((addr, error_code))) = (s.tid, fields) else {
                return Err(BadRecord);
            };
            Event::Entry(FaultEntry {
                tid,
                time,
                addr_avma: addr,
                error_code,
                kernel_mode: kind == EventKind::EntryKernel,
            })
        }
        EventKind::Munmap
        | EventKind::Madvise
        | EventKind::Mremap
        | EventKind::MremapDone
        | EventKind::BrkDone
        | EventKind::RssStat => {
            let (Some(pid), Some(tid), Some(raw)) = (s.pid, s.tid, s.raw.as_ref()) else {
                return Err(BadRecord);
            };
            let call = memory_call(kind, raw).ok_or(BadRecord)?;
            Event::MemoryCall {
                pid,
                tid,
                time,
                call,
            }
        }
        EventKind::MainEntry => match s.pid {
            Some(pid) => Event::MainEntry { pid, time },
            None => {
                return Err(BadRecord);
            }
        },
        EventKind::Other => return Ok(None),
    };
    Ok(Some(event))
}

/// A memory syscall's arguments or result from its tracepoint's raw data:
/// the common fields (8 bytes), `__syscall_nr` (padded to 8), then each
/// argument, or the result, as 8 bytes (the syscalls' tracepoints have kept
/// this layout since they exist); `rss_stat`'s fields (laid out alike since
/// 5.5).
fn memory_call(kind: EventKind, raw: &RawData<'_>) -> Option<MemoryCall> {
    let arg = |i: usize| raw_u64(raw, 16 + 8 * i);
    Some(match kind {
        EventKind::Munmap => MemoryCall::Munmap {
            addr: arg(0)?,
            len: arg(1)?,
        },
        EventKind::Madvise => MemoryCall::Madvise {
            addr: arg(0)?,
            len: arg(1)?,
            advice: arg(2)?,
        },
        EventKind::Mremap => MemoryCall::Mremap {
            addr: arg(0)?,
            old_len: arg(1)?,
            new_len: arg(2)?,
            flags: arg(3)?,
            new_addr: arg(4)?,
        },
        EventKind::MremapDone => MemoryCall::MremapDone {
            ret: arg(0)? as i64,
        },
        EventKind::BrkDone => MemoryCall::BrkDone { ret: arg(0)? },
        // `mm_id` (u32) at 8, `curr` (u32) at 12, `member` (i32) at 16,
        // `size` (long) at 24.
        EventKind::RssStat => {
            let word = raw_u64(raw, 8)?;
            MemoryCall::RssStat {
                curr: (word >> 32) as u32 != 0,
                mm_id: word as u32,
                member: raw_u64(raw, 16)? as u32 as i32,
                bytes: raw_u64(raw, 24)? as i64,
            }
        }
        _ => return None,
    })
}

/// Decodes records while they are being recorded (`--stream`): the drained
/// whole records are kept and indexed, and handed out in time order once
/// no CPU can still deliver an older one.
pub struct LiveDecoder {
    table: EventTable,
    kinds: Vec<EventKind>,
    /// The records not handed out yet.
    buf: Vec<u8>,
    /// Their places in time order.
    queue: TimeQueue,
    /// Records that did not parse.
    pub bad_records: u64,
}

impl LiveDecoder {
    /// From the recording's events (raw attrs, names, ids).
    pub fn new(events: &[crate::format::perf_data::EventDesc]) -> Option<LiveDecoder> {
        let table = EventTable::new(events.iter().map(|e| (&e.attr[..], &e.ids[..]))).ok()?;
        let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
        let kinds = kinds_of(&table, &names);
        Some(LiveDecoder {
            table,
            kinds,
            buf: Vec::new(),
            queue: TimeQueue::default(),
            bad_records: 0,
        })
    }

    /// Whether the fault-entry tracepoints are among the events.
    pub fn has_entries(&self) -> bool {
        (self.kinds.iter()).any(|k| matches!(k, EventKind::EntryUser | EventKind::EntryKernel))
    }

    /// Keeps and indexes a run of whole records, as the recorder's drain
    /// hands them out. Bytes that are not whole records (which the drain
    /// never hands out) count as one bad record and are dropped.
    pub fn push(&mut self, bytes: &[u8]) {
        let start = self.buf.len();
        self.buf.extend_from_slice(bytes);
        for record in records(&self.buf[start..]) {
            let record = match record {
                Ok(record) => record,
                Err(broken) => {
                    self.bad_records += 1;
                    self.buf.truncate(start + broken.offset);
                    break;
                }
            };
            match self.table.index(&record, start + record.offset) {
                Indexed::NotKernel => {}
                Indexed::NoEvent => self.bad_records += 1,
                Indexed::At(key) => self.queue.push(key),
            }
        }
    }

    /// Hands out, in time order, every record older than `cutoff` (all of
    /// them with `u64::MAX`) with its time, keeping the others for later.
    pub fn flush_before(&mut self, cutoff: u64, mut on_event: impl FnMut(u64, Event<'_>)) {
        let (buf, table, kinds) = (&self.buf, &self.table, &self.kinds);
        let bad_records = &mut self.bad_records;
        self.queue.pop_through(cutoff.checked_sub(1), |ready| {
            for &key in ready {
                let record = table.raw_record(buf, key);
                match to_event(&record, kinds[key.attr()], Weight::One, key.time) {
                    Ok(Some(event)) => on_event(key.time, event),
                    Ok(None) => {}
                    Err(BadRecord) => *bad_records += 1,
                }
            }
        });
        // Keep the records not handed out, in a buffer of their own.
        let mut buf = Vec::with_capacity(self.buf.len() / 2);
        for key in self.queue.waiting_mut() {
            let offset = key.offset();
            let head = RecordHead::parse(&self.buf[offset..]).expect("indexed records are whole");
            *key = key.moved_to(buf.len());
            buf.extend_from_slice(&self.buf[offset..offset + head.size]);
        }
        self.buf = buf;
    }
}
