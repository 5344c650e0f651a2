//! Replaying a recording file: its layout read, its records indexed and
//! merged across CPUs by time, each handed on as an [`Event`].

use super::*;
use crate::format::compressed::{RECORD_COMPRESSED, RECORD_COMPRESSED2};

pub(super) fn kind_from(type_: &PerfEventType, name: Option<&str>) -> EventKind {
    match (type_, name) {
        (PerfEventType::Software(SoftwareCounterType::PageFaultsMin), _) => EventKind::Minor,
        (PerfEventType::Software(SoftwareCounterType::PageFaultsMaj), _) => EventKind::Major,
        // perf's `page-faults` does not tell minor from major.
        (PerfEventType::Software(SoftwareCounterType::PageFaults), _) => EventKind::Minor,
        (PerfEventType::Tracepoint(_), Some(name)) if rec::FAULT_ENTRY_USER.is_named(name) => {
            EventKind::EntryUser
        }
        (PerfEventType::Tracepoint(_), Some(name)) if rec::FAULT_ENTRY_KERNEL.is_named(name) => {
            EventKind::EntryKernel
        }
        (_, Some(name)) if rec::MAIN_ENTRY.is_named(name) => EventKind::MainEntry,
        (PerfEventType::Tracepoint(_), Some(name)) => memory_call_kind(name),
        _ => EventKind::Other,
    }
}

/// The kind of a memory syscall's tracepoint named `name`, else Other.
fn memory_call_kind(name: &str) -> EventKind {
    let kinds = [
        EventKind::Munmap,
        EventKind::Madvise,
        EventKind::Mremap,
        EventKind::MremapDone,
        EventKind::BrkDone,
        EventKind::RssStat,
    ];
    (rec::MEMORY_CALLS.iter().zip(kinds))
        .find(|(event, _)| event.name == name)
        .map_or(EventKind::Other, |(_, kind)| kind)
}

/// Reads a u64 at `offset` of a tracepoint's raw data (little endian).
pub(super) fn raw_u64(raw: &RawData<'_>, offset: usize) -> Option<u64> {
    let mut bytes = [0u8; 8];
    raw.get(offset..offset + 8)?.read_exact(&mut bytes).ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// Replays `path`, calling `on_event` for each record in time order.
///
/// The file is read once; records are indexed by (time, offset), sorted
/// (each CPU's stream is already in order, so the sort is cheap), and parsed
/// in place: no per-record copy or allocation.
///
/// A recording that pfprof could not finish (killed) is repaired in memory
/// and read up to its last complete record; a file cut short elsewhere is an
/// error unless `partial` asks for the same repair. Anything but a regular
/// file (a FIFO, a device, a directory) is refused before it is opened for
/// reading, so nothing blocks.
pub fn replay(
    path: &Path,
    partial: bool,
    on_event: impl FnMut(&Event<'_>),
) -> Result<(Header, DecodeStats), DecodeError> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let display = path.display().to_string();
    let open_error = |source| DecodeError::Open {
        path: display.clone(),
        source,
    };
    let not_recording = |what: &str| DecodeError::NotRecording {
        path: display.clone(),
        what: what.to_string(),
    };
    let kind = std::fs::metadata(path).map_err(open_error)?.file_type();
    if kind.is_dir() {
        return Err(not_recording("a directory without a pfprof.data"));
    } else if kind.is_fifo() {
        return Err(not_recording(
            "a FIFO (pfprof reads recordings from regular files)",
        ));
    } else if kind.is_socket() {
        return Err(not_recording("a socket"));
    } else if kind.is_char_device() || kind.is_block_device() {
        return Err(not_recording("a device"));
    }
    // O_NONBLOCK: the path may have been swapped for a FIFO since the check.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(open_error)?;
    if !file.metadata().map_err(open_error)?.is_file() {
        return Err(not_recording("not a regular file"));
    }
    if file.metadata().map_err(open_error)?.len() == 0 {
        return Err(not_recording("the file is empty"));
    }
    let bytes = MappedFile::new(&file).map_err(open_error)?;
    replay_image(&bytes, &display, partial, on_event)
}

/// Replays a recording held in memory (`display` names it in errors): the
/// whole of [`replay`] after the file is mapped, so fuzzing reaches the real
/// path.
pub fn replay_image(
    bytes: &[u8],
    display: &str,
    partial: bool,
    mut on_event: impl FnMut(&Event<'_>),
) -> Result<(Header, DecodeStats), DecodeError> {
    let path = display.to_string();
    if bytes.is_empty() {
        return Err(DecodeError::NotRecording {
            path,
            what: "the file is empty".into(),
        });
    }
    let repaired = |facts: Option<HeaderFacts>,
                    damage: Option<LayoutError>|
     -> Result<(Vec<u8>, String), DecodeError> {
        let header_error = |e: LayoutError| DecodeError::Header {
            path: path.clone(),
            offset: e.offset,
            what: e.what,
        };
        let Some((image, kept)) = repair(bytes) else {
            return Err(match damage {
                Some(damage) => header_error(damage),
                None => DecodeError::Header {
                    path: path.clone(),
                    offset: 16,
                    what: "its attributes are damaged".into(),
                },
            });
        };
        let why = if facts.is_some_and(|f| f.finished()) {
            format!("the recording is cut short; read its first {kept} bytes of complete records")
        } else {
            format!("the recording was not finished (pfprof was killed?); read its {kept} bytes of complete records")
        };
        Ok((image, why))
    };
    let (image, why) = match read_layout(bytes) {
        Ok(layout) if layout.facts.finished() => {
            return replay_layout(bytes, layout, &path, partial, None, &mut on_event);
        }
        Ok(layout) => repaired(Some(layout.facts), None)?,
        // Not a perf.data file at all.
        Err(e) if e.offset == 0 => {
            return Err(DecodeError::NotRecording { path, what: e.what });
        }
        Err(e) if partial => repaired(HeaderFacts::parse(bytes), Some(e))?,
        Err(e) => {
            let facts = HeaderFacts::parse(bytes);
            let data_end = facts.map_or(0, |f| f.data.0.saturating_add(f.data.1));
            if facts.is_some_and(|f| f.finished()) && data_end > bytes.len() as u64 {
                return Err(DecodeError::Truncated {
                    path,
                    offset: bytes.len() as u64,
                    record: String::new(),
                    records: 0,
                    what: format!(
                        "the data section ends at byte {data_end} but the file has {} bytes",
                        bytes.len()
                    ),
                });
            }
            return Err(DecodeError::Header {
                path,
                offset: e.offset,
                what: e.what,
            });
        }
    };
    let layout = read_layout(&image).map_err(|e| DecodeError::Header {
        path: path.clone(),
        offset: e.offset,
        what: format!("even repaired: {}", e.what),
    })?;
    replay_layout(&image, layout, &path, partial, Some(why), &mut on_event)
}

/// Replays a recording whose layout was read: its events and header, then
/// its records in time order; an error when nothing (or no fault) decoded.
pub(super) fn replay_layout(
    bytes: &[u8],
    layout: Layout,
    display: &str,
    partial: bool,
    repaired: Option<String>,
    mut on_event: impl FnMut(&Event<'_>),
) -> Result<(Header, DecodeStats), DecodeError> {
    let (table, kinds) = read_events(&layout, display)?;
    let weights = weights(&table.attrs, layout.meta.is_some());
    let build_ids: FxHashMap<Vec<u8>, Vec<u8>> = layout.build_ids.iter().cloned().collect();
    let facts = layout.facts;
    let header = header(bytes, layout, &table.attrs, &kinds, &build_ids);
    let repaired_image = repaired.is_some();
    let mut stats = DecodeStats {
        truncated: repaired,
        ..DecodeStats::default()
    };
    let data = data_section(bytes, facts, repaired_image, display)?;
    on_event(&Event::Begin(&header));
    let (decoded, counts) = decode_beside(
        Emitter {
            data: &data,
            table: &table,
            kinds: &kinds,
            weights: &weights,
            build_ids: &build_ids,
            stats: &mut stats,
            counts: Counts::default(),
        },
        facts.data.0 as usize,
        partial,
        display,
        &mut on_event,
    );
    decoded?;
    if let Some(what) = nothing_decoded(&counts, &stats, header.meta.is_some()) {
        return Err(DecodeError::NoRecords {
            path: display.to_string(),
            what,
        });
    }
    Ok((header, stats))
}

/// Events handed from the decoding thread to the analysis at a time.
const BATCH: usize = 4096;

/// Decodes the records on a thread of its own, while the caller's thread
/// hands each event to `on_event` in order: a replay splits over two cores
/// (perf's fp recording of the 1 GiB touch: 39-45 -> 36 ms). Batches go
/// back to the decoder to be filled again, so nothing allocates per event.
/// Without a thread (none could start) it decodes on the caller's.
fn decode_beside<'a>(
    out: Emitter<'a>,
    data_start: usize,
    partial: bool,
    display: &str,
    on_event: &mut impl FnMut(&Event<'_>),
) -> (Result<(), DecodeError>, Counts) {
    use std::sync::mpsc::{channel, sync_channel};
    // The decoder takes the emitter from here; if it never started, this
    // thread does.
    let slot = std::sync::Mutex::new(Some(out));
    let take = || slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    let take = &take;
    let started = std::thread::scope(|scope| {
        let (full, batches) = sync_channel::<Vec<Event<'a>>>(4);
        let (empty, emptied) = channel::<Vec<Event<'a>>>();
        let decoder = std::thread::Builder::new()
            .name("pfprof-decode".into())
            .spawn_scoped(scope, move || {
                let mut out = take()?;
                let mut batch = Vec::with_capacity(BATCH);
                let decoded = index_records(&mut out, data_start, partial, display, &mut |event| {
                    batch.push(event);
                    if batch.len() == BATCH {
                        let next = emptied
                            .try_recv()
                            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
                        // The receiver is gone only if the analysis panicked.
                        let _ = full.send(std::mem::replace(&mut batch, next));
                    }
                });
                let _ = full.send(batch);
                Some((decoded, out.counts))
            })
            .ok()?;
        // By reference: an event is some 200 bytes, and each move of one
        // by value was a call to memmove (a tenth of the replay's CPU).
        for mut batch in batches {
            for event in &batch {
                on_event(event);
            }
            batch.clear();
            let _ = empty.send(batch);
        }
        decoder
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    });
    if let Some(done) = started {
        return done;
    }
    // (None only if a started decoder returned nothing, which it cannot:
    // then nothing decoded, an error for the caller.)
    let Some(mut out) = take() else {
        return (Ok(()), Counts::default());
    };
    let decoded = index_records(&mut out, data_start, partial, display, &mut |event| {
        on_event(&event)
    });
    (decoded, out.counts)
}

/// Parses the events' attrs and tells their kinds; a recording without a
/// fault event is not one pfprof reads.
pub(super) fn read_events(
    layout: &Layout,
    display: &str,
) -> Result<(EventTable, Vec<EventKind>), DecodeError> {
    let table = EventTable::new(layout.events.iter().map(|e| (&e.attr[..], &e.ids[..]))).map_err(
        |(index, e)| DecodeError::Header {
            path: display.to_string(),
            offset: layout.event_offsets[index],
            what: format!("event {index} has a malformed perf_event_attr ({e})"),
        },
    )?;
    let kinds: Vec<EventKind> = table
        .attrs
        .iter()
        .zip(&layout.events)
        .map(|(attr, event)| {
            kind_from(
                &attr.type_,
                Some(event.name.as_str()).filter(|n| !n.is_empty()),
            )
        })
        .collect();
    if !kinds
        .iter()
        .any(|k| matches!(k, EventKind::Minor | EventKind::Major))
    {
        let names: Vec<&str> = layout
            .events
            .iter()
            .map(|e| {
                if e.name.is_empty() {
                    "unnamed"
                } else {
                    e.name.as_str()
                }
            })
            .collect();
        return Err(DecodeError::NotRecording {
            path: display.to_string(),
            what: format!(
                "it has no minor-faults or major-faults event (events: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            ),
        });
    }
    Ok((table, kinds))
}

/// Faults a sample of each event stands for. pfprof counts its own sampled
/// recordings (`own`) as they are (its report says "1 in N"); perf's
/// samples stand for their period.
pub(super) fn weights(attrs: &[PerfEventAttr], own: bool) -> Vec<Weight> {
    attrs
        .iter()
        .map(|a| match a.sampling_policy {
            _ if own => Weight::One,
            SamplingPolicy::Period(n) => Weight::Fixed(n.get()),
            SamplingPolicy::Frequency(_) => Weight::FromSample,
            SamplingPolicy::NoSampling => Weight::One,
        })
        .collect()
}

/// The header facts replay hands out before any record.
pub(super) fn header(
    bytes: &[u8],
    layout: Layout,
    attrs: &[PerfEventAttr],
    kinds: &[EventKind],
    build_ids: &FxHashMap<Vec<u8>, Vec<u8>>,
) -> Header {
    let own = layout.meta.is_some();
    let sampling = attrs
        .iter()
        .zip(kinds)
        .filter(|(_, k)| matches!(k, EventKind::Minor | EventKind::Major))
        .find_map(|(a, _)| match a.sampling_policy {
            _ if own => None,
            SamplingPolicy::Period(n) if n.get() > 1 => Some(Sampling::Period(n.get())),
            SamplingPolicy::Frequency(hz) => Some(Sampling::Frequency(hz)),
            _ => None,
        });
    let any_fault_event = attrs.iter().any(|a| {
        matches!(
            a.type_,
            PerfEventType::Software(SoftwareCounterType::PageFaults)
        )
    });
    let meta = layout
        .meta
        .and_then(|range| serde_json::from_slice::<RecordingMeta>(&bytes[range]).ok());
    Header {
        meta,
        kinds: kinds.to_vec(),
        cmdline: layout.cmdline,
        sampling,
        any_fault_event,
        kernel_build_id: build_ids.get(&b"[kernel.kallsyms]"[..]).cloned(),
        user_stacks: !own
            && attrs.iter().zip(kinds).any(|(a, k)| {
                matches!(k, EventKind::Minor | EventKind::Major)
                    && a.sample_format
                        .contains(SampleFormat::REGS_USER | SampleFormat::STACK_USER)
            }),
    }
}

/// The data section's records: in place, or for perf record -z
/// decompressed (up to 64 times the compressed size, at least 256 MiB;
/// zstd rarely does better on records). Only a recording whose header
/// announces compression, or has no whole header (`repaired`), is searched
/// for compressed records: the search read every record once more (3% of
/// a fast replay's CPU; `report` of a 1.4 GB recording took 0.66 s with
/// it, 0.58 s without).
/// A compressed record the header did not announce is an error when it is
/// met ([`index_records`]).
pub(super) fn data_section<'a>(
    bytes: &'a [u8],
    facts: HeaderFacts,
    repaired: bool,
    display: &str,
) -> Result<Cow<'a, [u8]>, DecodeError> {
    let data_start = facts.data.0 as usize;
    let data = bytes
        .get(
            data_start
                ..data_start
                    .saturating_add(facts.data.1 as usize)
                    .min(bytes.len()),
        )
        .unwrap_or_default();
    let announced = facts
        .features
        .has(crate::format::perf_data::HEADER_COMPRESSED);
    if !(announced || repaired) || !crate::format::compressed::has_compressed(data) {
        return Ok(Cow::Borrowed(data));
    }
    let limit = data.len().saturating_mul(64).max(1 << 28);
    crate::format::compressed::decompress(data, limit)
        .map(Cow::Owned)
        .map_err(|why| DecodeError::NoRecords {
            path: display.to_string(),
            what: format!("its compressed records (perf record -z) cannot be read: {why}"),
        })
}

/// Indexes every kernel record of `out.data` by time and hands them to
/// `out` round by round. Damage is an error, or with `partial` the end of
/// replay (noted in the stats). `data_start` places offsets in the file.
pub(super) fn index_records<'a>(
    out: &mut Emitter<'a>,
    data_start: usize,
    partial: bool,
    display: &str,
    on_event: &mut impl FnMut(Event<'a>),
) -> Result<(), DecodeError> {
    let data = out.data;
    let mut rounds = Rounds::default();
    let mut indexed = 0u64;
    for record in records(data) {
        let record = match record {
            Ok(record) => record,
            Err(broken) => {
                let (why, record, at) = damage(broken, data.len(), data_start);
                if partial {
                    out.stats.truncated = Some(match record.is_empty() {
                        true => format!("after {indexed} records: {why}"),
                        false => format!("after {indexed} records: at byte {at}{record}: {why}"),
                    });
                    break;
                }
                return Err(DecodeError::Truncated {
                    path: display.to_string(),
                    offset: at as u64,
                    record,
                    records: indexed,
                    what: why,
                });
            }
        };
        match record.head.record_type {
            PERF_RECORD_FINISHED_ROUND => {
                rounds.end_round(|ready| out.emit(ready, on_event));
                continue;
            }
            // Not decompressed: the header did not announce them.
            RECORD_COMPRESSED | RECORD_COMPRESSED2 => {
                return Err(DecodeError::NoRecords {
                    path: display.to_string(),
                    what: "compressed records (perf record -z) that its header does not announce"
                        .to_string(),
                })
            }
            _ => {}
        }
        match out.table.index(&record, record.offset) {
            Indexed::NotKernel => {}
            Indexed::NoEvent => out.stats.bad_records += 1,
            Indexed::At(key) => {
                indexed += 1;
                rounds.push(key);
            }
        }
    }
    rounds.finish(|all| out.emit(all, on_event));
    Ok(())
}

/// What is wrong where the data section (`len` bytes, at `data_start` of
/// the file) stops holding whole records: why, ` (record type N, NAME)`
/// when a header was read there (else empty), and the byte in the file.
pub(super) fn damage(broken: Broken, len: usize, data_start: usize) -> (String, String, usize) {
    let at = data_start + broken.offset;
    match broken.head {
        None => (
            format!(
                "{} bytes left, too few for a record header",
                len - broken.offset
            ),
            String::new(),
            at,
        ),
        Some(head) => (
            format!("the record's size ({} bytes) is impossible", head.size),
            format!(
                " (record type {}, {})",
                head.record_type,
                record_type_name(head.record_type)
            ),
            at,
        ),
    }
}

/// Records handed out in time order round by round, as perf reads them: at
/// each FINISHED_ROUND, everything up to the newest time of the round
/// before is in the file, so it is sorted and handed out. The queue then
/// holds about two drain passes, not the whole recording. (A file without
/// rounds is sorted whole at the end.)
#[derive(Default)]
pub(super) struct Rounds {
    queue: TimeQueue,
    /// The newest time indexed.
    newest: u64,
    /// The newest time when the last round ended.
    flush_limit: Option<u64>,
}

impl Rounds {
    /// Indexes a record.
    pub(super) fn push(&mut self, record: TimeOrdered) {
        self.newest = self.newest.max(record.time);
        self.queue.push(record);
    }

    /// At a FINISHED_ROUND: hands `emit` the records no later one can
    /// precede, in order.
    pub(super) fn end_round(&mut self, emit: impl FnOnce(&[TimeOrdered])) {
        if let Some(limit) = self.flush_limit {
            self.queue.pop_through(Some(limit), emit);
        }
        self.flush_limit = Some(self.newest);
    }

    /// At the end: hands `emit` the rest, in order.
    pub(super) fn finish(mut self, emit: impl FnOnce(&[TimeOrdered])) {
        self.queue.pop_through(Some(u64::MAX), emit);
    }
}

/// Why a replay is no result, or None when it is: never an empty profile
/// passed off as a result. A recording whose records, or whose fault
/// samples, all failed to decode is an error; so is perf's file without a
/// fault (`own`: pfprof's own recording, whose program may take none).
pub(super) fn nothing_decoded(counts: &Counts, stats: &DecodeStats, own: bool) -> Option<String> {
    let Counts {
        decoded,
        faults,
        bad_faults,
        lost,
    } = *counts;
    if decoded == 0 && stats.bad_records > 0 {
        Some(format!(
            "no record could be decoded (all {} are damaged or belong to no event of the recording)",
            stats.bad_records
        ))
    } else if decoded == 0 {
        Some("no record could be decoded (the recording holds none)".to_string())
    } else if faults == 0 && bad_faults > 0 {
        Some(format!(
            "none of its {bad_faults} fault samples could be decoded (each needs a pid, tid and data address: perf record without -d?)"
        ))
    } else if faults == 0 && !own {
        // pfprof's own recording of a program that took no fault (of the
        // sampled class) is a result; perf's file without one is not.
        let lost = lost[0].max(lost[1]);
        Some(if lost > 0 {
            format!(
                "it holds no fault sample: perf lost all {lost} (its buffers were too small: perf record -m PAGES)"
            )
        } else {
            format!(
                "it holds no fault sample ({} records of other kinds): nothing to analyse",
                stats.records
            )
        })
    } else {
        None
    }
}

/// What the emitter handed out, for [`nothing_decoded`].
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Counts {
    pub(super) decoded: u64,
    pub(super) faults: u64,
    pub(super) bad_faults: u64,
    /// Records lost by the ring (PERF_RECORD_LOST), samples lost by event
    /// (PERF_RECORD_LOST_SAMPLES): perf writes both for the same loss.
    pub(super) lost: [u64; 2],
}

/// Hands out indexed records in the order given, and counts them.
pub(super) struct Emitter<'a> {
    data: &'a [u8],
    table: &'a EventTable,
    kinds: &'a [EventKind],
    weights: &'a [Weight],
    build_ids: &'a FxHashMap<Vec<u8>, Vec<u8>>,
    stats: &'a mut DecodeStats,
    counts: Counts,
}

impl<'a> Emitter<'a> {
    pub(super) fn emit(&mut self, sorted: &[TimeOrdered], on_event: &mut impl FnMut(Event<'a>)) {
        let data = self.data;
        for &key in sorted {
            let (time, attr_index) = (key.time, key.attr());
            let record = self.table.raw_record(data, key);
            let stats = &mut *self.stats;
            stats.records += 1;
            // Not the kernel's map, which is written at time 0.
            if time > 0 {
                stats.first_time = Some(stats.first_time.map_or(time, |t| t.min(time)));
            }
            stats.last_time = Some(stats.last_time.map_or(time, |t| t.max(time)));
            let kind = self.kinds[attr_index];
            let fault_kind = matches!(kind, EventKind::Minor | EventKind::Major);
            let counts = &mut self.counts;
            match to_event(&record, kind, self.weights[attr_index], time) {
                Ok(Some(mut event)) => {
                    // perf's mmaps carry inodes; its header has the build-ids.
                    if let Event::Mmap {
                        build_id: build_id @ None,
                        path,
                        ..
                    } = &mut event
                    {
                        *build_id = self.build_ids.get(&path.as_slice()[..]).cloned();
                    }
                    counts.decoded += 1;
                    counts.faults += u64::from(matches!(event, Event::Fault(_)));
                    if let Event::Lost { count, kind } = event {
                        let slot = &mut counts.lost[usize::from(kind.is_some())];
                        *slot = slot.saturating_add(count);
                    }
                    on_event(event)
                }
                Ok(None) => counts.decoded += 1,
                Err(BadRecord) => {
                    stats.bad_records += 1;
                    counts.bad_faults +=
                        u64::from(fault_kind && record.record_type.0 == rec::SAMPLE);
                }
            }
        }
    }
}
