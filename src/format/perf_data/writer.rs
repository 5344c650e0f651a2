//! Writing a recording: the attrs as the file takes them, the data
//! streamed by a thread of its own, the feature sections at the end.

use super::*;

/// The published `perf_event_attr` sizes (PERF_ATTR_SIZE_VER0..VER9).
pub(super) const ATTR_SIZES: [usize; 10] = [64, 72, 80, 96, 104, 112, 120, 128, 136, 144];

/// The attr as it goes into the file: cut to the smallest published size
/// that keeps every non-zero byte, so that tools built against older
/// headers (perf refuses "a more recent ABI") can read it.
pub(super) fn file_attr(attr: &[u8]) -> Vec<u8> {
    let used = attr.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    let size = ATTR_SIZES
        .iter()
        .copied()
        .find(|&s| s >= used && s <= attr.len())
        .unwrap_or(attr.len());
    let mut out = attr[..size].to_vec();
    if out.len() >= 8 {
        out[4..8].copy_from_slice(&(size as u32).to_le_bytes());
    }
    out
}

/// Bytes gathered before they go to the writing thread.
pub(super) const CHUNK_BYTES: usize = 1 << 20;

/// What the writing thread does, in order.
pub(super) enum Job {
    /// Append.
    Data(Vec<u8>),
    /// Overwrite the file's first bytes (the header), then append again.
    Header(Vec<u8>),
}

/// A file written by a thread of its own: the recorder hands it chunks and
/// never waits for the disk. A write that blocks (dirty-page throttling
/// after a few large recordings, a slow disk) stalled the draining thread
/// for tens of milliseconds while the kernel's ring buffers overflowed.
/// The first error stops the writing and is returned by the next call.
pub(super) struct Background {
    tx: std::sync::mpsc::Sender<Job>,
    thread: std::thread::JoinHandle<File>,
    chunk: Vec<u8>,
    failed: std::sync::Arc<Failed>,
    /// Chunks the thread has written, for reuse: a fresh megabyte for each
    /// one cost the recorder 256 page faults of its own and a `malloc`
    /// each time (a tenth of the drain's time system-wide).
    spent: std::sync::mpsc::Receiver<Vec<u8>>,
}

/// The writing thread's first error. The drain looks at the flag for every
/// record, and never takes the lock while the thread writes: a lock held
/// across a write that waited on the disk (writeback throttling under a
/// build's I/O) stalled the drain until the rings overflowed (81,046
/// records lost in 65 s system-wide).
#[derive(Default)]
pub(super) struct Failed {
    flag: std::sync::atomic::AtomicBool,
    error: std::sync::Mutex<Option<io::Error>>,
}

impl Failed {
    pub(super) fn is_set(&self) -> bool {
        self.flag.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(super) fn set(&self, e: io::Error) {
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        self.flag.store(true, std::sync::atomic::Ordering::Release);
    }

    pub(super) fn take(&self) -> Option<io::Error> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Background {
    pub(super) fn new(mut file: File) -> io::Result<Background> {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let (give_back, spent) = std::sync::mpsc::channel::<Vec<u8>>();
        let failed = std::sync::Arc::new(Failed::default());
        let failed_in_thread = failed.clone();
        let thread = std::thread::Builder::new()
            .name("pfprof-writer".into())
            .spawn(move || {
                for job in rx {
                    if failed_in_thread.is_set() {
                        continue;
                    }
                    let done = match job {
                        Job::Data(mut bytes) => {
                            let done = file.write_all(&bytes);
                            bytes.clear();
                            let _ = give_back.send(bytes);
                            done
                        }
                        Job::Header(header) => file
                            .seek(SeekFrom::Start(0))
                            .and_then(|_| file.write_all(&header))
                            .and_then(|_| file.seek(SeekFrom::End(0)).map(|_| ())),
                    };
                    if let Err(e) = done {
                        failed_in_thread.set(e);
                    }
                }
                file
            })?;
        Ok(Background {
            tx,
            thread,
            chunk: Vec::with_capacity(CHUNK_BYTES),
            failed,
            spent,
        })
    }

    /// An empty chunk: one the thread has written, else a new one.
    pub(super) fn fresh_chunk(&self) -> Vec<u8> {
        self.spent
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES))
    }

    /// The first error the thread met, as a new error of the same kind.
    pub(super) fn check(&self) -> io::Result<()> {
        if !self.failed.is_set() {
            return Ok(());
        }
        match &*self.failed.error.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
            None => Ok(()),
        }
    }

    pub(super) fn send(&mut self, job: Job) -> io::Result<()> {
        self.tx
            .send(job)
            .map_err(|_| io::Error::other("the writing thread ended"))
    }

    pub(super) fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.check()?;
        self.chunk.extend_from_slice(bytes);
        if self.chunk.len() >= CHUNK_BYTES {
            let fresh = self.fresh_chunk();
            let chunk = std::mem::replace(&mut self.chunk, fresh);
            self.send(Job::Data(chunk))?;
        }
        Ok(())
    }

    /// Everything so far, then `header` over the file's start.
    pub(super) fn header(&mut self, header: Vec<u8>) -> io::Result<()> {
        self.check()?;
        let fresh = self.fresh_chunk();
        let chunk = std::mem::replace(&mut self.chunk, fresh);
        self.send(Job::Data(chunk))?;
        self.send(Job::Header(header))
    }

    /// Waits for every write; the file, or the first error.
    pub(super) fn finish(mut self) -> (File, io::Result<()>) {
        let chunk = std::mem::take(&mut self.chunk);
        let _ = self.tx.send(Job::Data(chunk));
        self.abandon()
    }

    /// Waits for the writes already handed to the thread; what was not
    /// handed yet is dropped.
    pub(super) fn abandon(self) -> (File, io::Result<()>) {
        let Background {
            tx, thread, failed, ..
        } = self;
        drop(tx);
        let file = thread
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        let result = match failed.take() {
            Some(e) => Err(e),
            None => Ok(()),
        };
        (file, result)
    }
}

/// Streams a recording to disk.
pub struct PerfDataWriter {
    /// None once [`salvage`](Self::salvage) has stopped the recording.
    out: Option<Background>,
    attr_size: u64,
    attrs_offset: u64,
    n_events: u64,
    data_offset: u64,
    data_size: u64,
    events: Vec<EventDesc>,
    /// Feature sections added by [`add_feature`](Self::add_feature).
    extra: Vec<(u32, Vec<u8>)>,
    /// Writing to `/dev/null` ([`discarding`](Self::discarding)).
    discard: bool,
    /// When the last round ended ([`end_pass`](Self::end_pass)).
    last_round: Option<std::time::Instant>,
}

/// The least time between two FINISHED_ROUND records. A reader may hand
/// out every record older than the round before the last: a record that
/// reaches the file a round late, stamped earlier than records already
/// written, is out of order for it. The fault entries the collector pairs
/// are written at the fault's completion, stamped at its entry, and the
/// kernel's `rss_stat` records of the same fault come between: with a
/// round per drain pass (a pass per fault while a program waited on the
/// disk) perf found them out of order. Rounds of 50 ms leave a fault 50 ms.
const ROUND_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

pub(super) fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_le_bytes());
}
pub(super) fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}
/// perf pads the strings of its header (and the names of its build-id
/// table) with NULs to a multiple of 64 bytes (`NAME_ALIGN`).
pub(super) const NAME_ALIGN: usize = 64;

/// Bytes a NUL-padded name of `len` bytes takes: at least one NUL.
pub(crate) fn name_padded(len: usize) -> usize {
    (len + 1).div_ceil(NAME_ALIGN) * NAME_ALIGN
}

/// `perf_header_string`: u32 length (NUL-padded to 64 bytes), then the bytes.
pub(crate) fn put_string(buf: &mut Vec<u8>, s: &str) {
    let padded = name_padded(s.len());
    put_u32(buf, padded as u32);
    buf.extend_from_slice(s.as_bytes());
    buf.resize(buf.len() + padded - s.len(), 0);
}

impl PerfDataWriter {
    /// Creates `path` and writes everything that precedes the data section.
    /// The file must not exist (`O_EXCL`, a link there is not followed); it
    /// is readable by its owner only (mode 0600, as `perf.data`: it holds
    /// command lines, paths and addresses), the invoking user under `sudo`.
    pub fn create(path: &Path, events: Vec<EventDesc>) -> io::Result<Self> {
        Self::on_file(crate::user::create_new_file(path, 0o600)?, events, false)
    }

    /// A writer that keeps nothing (`record --interval` without
    /// `--keep-recording`): the same records go through it, to `/dev/null`.
    pub fn discarding(events: Vec<EventDesc>) -> io::Result<Self> {
        let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        Self::on_file(null, events, true)
    }

    pub(super) fn on_file(
        file: File,
        mut events: Vec<EventDesc>,
        discard: bool,
    ) -> io::Result<Self> {
        for e in &mut events {
            e.attr = file_attr(&e.attr);
        }
        let attr_len = events.iter().map(|e| e.attr.len()).max().unwrap_or(0) as u64;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&[0u8; HEADER_SIZE as usize])?;
        // Id arrays first, so that each attr entry can point at its ids.
        let mut offset = HEADER_SIZE;
        let mut id_sections = Vec::new();
        for e in &events {
            let mut buf = Vec::new();
            for id in &e.ids {
                put_u64(&mut buf, *id);
            }
            out.write_all(&buf)?;
            id_sections.push((offset, buf.len() as u64));
            offset += buf.len() as u64;
        }
        let attrs_offset = offset;
        for (e, (ids_offset, ids_size)) in events.iter().zip(&id_sections) {
            let mut buf = e.attr.clone();
            buf.resize(attr_len as usize, 0);
            put_u64(&mut buf, *ids_offset);
            put_u64(&mut buf, *ids_size);
            out.write_all(&buf)?;
        }
        let attr_size = attr_len + 16;
        let data_offset = attrs_offset + attr_size * events.len() as u64;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        let mut w = PerfDataWriter {
            out: Some(Background::new(file)?),
            attr_size,
            attrs_offset,
            n_events: events.len() as u64,
            data_offset,
            data_size: 0,
            events,
            extra: Vec::new(),
            discard,
            last_round: None,
        };
        w.checkpoint()?;
        Ok(w)
    }

    pub(super) fn out(&mut self) -> io::Result<&mut Background> {
        self.out
            .as_mut()
            .ok_or_else(|| io::Error::other("the recording was stopped by an earlier write error"))
    }

    /// Appends raw kernel records.
    pub fn write_records(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out()?.write_all(bytes)?;
        self.data_size += bytes.len() as u64;
        Ok(())
    }

    /// The end of a drain pass: a round ends if [`ROUND_EVERY`] passed
    /// since the last one did, or at the `last` pass.
    pub fn end_pass(&mut self, last: bool) -> io::Result<()> {
        let now = std::time::Instant::now();
        let due = self
            .last_round
            .map_or(true, |t| now.duration_since(t) >= ROUND_EVERY);
        if last || due {
            self.last_round = Some(now);
            self.finish_round()?;
        }
        Ok(())
    }

    /// Marks the end of a round: every record before it was drained.
    pub fn finish_round(&mut self) -> io::Result<()> {
        let round = RecordHead {
            record_type: PERF_RECORD_FINISHED_ROUND,
            misc: 0,
            size: 8,
        };
        self.write_records(&round.encode())
    }

    /// A feature section (`bit`, below 256) for [`finish`](Self::finish)
    /// to write besides its own.
    pub fn add_feature(&mut self, bit: u32, body: Vec<u8>) {
        self.extra.retain(|(b, _)| *b != bit);
        self.extra.push((bit, body));
    }

    /// Bytes of records written so far.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// The file's header, the unused event-types section (perf's
    /// `event_types`) zero.
    pub(super) fn header(&self, features: Features) -> Vec<u8> {
        let mut h = vec![0u8; HEADER_SIZE as usize];
        h[..8].copy_from_slice(MAGIC);
        h[8..16].copy_from_slice(&HEADER_SIZE.to_le_bytes());
        let facts = HeaderFacts {
            attr_size: self.attr_size,
            attrs: (self.attrs_offset, self.attr_size * self.n_events),
            data: (self.data_offset, self.data_size),
            features,
        };
        facts.write_into(&mut h);
        h
    }

    /// Records the current data size in the header (once the writing
    /// thread has written what came before), so that the file is readable
    /// even if pfprof dies before [`finish`](Self::finish).
    pub fn checkpoint(&mut self) -> io::Result<()> {
        let h = self.header(Features::default());
        self.out()?.header(h)
    }

    /// After a write error: keeps the recording readable and stops it.
    /// What the buffer still holds is dropped, the file is cut to the data
    /// bytes that reached it (the reader drops a record cut in two), and the
    /// header says so, without feature sections, as for a recording whose
    /// writer was killed. Returns the data bytes kept; writes fail from now on.
    pub fn salvage(&mut self) -> io::Result<u64> {
        let out = self
            .out
            .take()
            .ok_or_else(|| io::Error::other("the recording was already stopped"))?;
        // What the thread wrote before the error stays; the chunk not
        // handed to it may hold the half a write that failed: dropped.
        let (mut file, _) = out.abandon();
        let len = file.metadata()?.len();
        let kept = len.saturating_sub(self.data_offset).min(self.data_size);
        // Cutting a file and overwriting its first bytes need no new blocks.
        file.set_len(self.data_offset + kept)?;
        self.data_size = kept;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&self.header(Features::default()))?;
        let _ = file.sync_data();
        Ok(kept)
    }

    /// Writes the feature sections and the final header. When this fails,
    /// [`salvage`](Self::salvage) still leaves the records readable.
    pub fn finish(
        &mut self,
        meta: &RecordingMeta,
        hostname: &str,
        os_release: &str,
        nr_cpus: u32,
    ) -> io::Result<()> {
        let mut sections = self.own_sections(meta, hostname, os_release, nr_cpus)?;
        let own: Vec<u32> = sections.iter().map(|(bit, _)| *bit).collect();
        sections.extend(
            self.extra
                .iter()
                .filter(|(bit, _)| *bit < 256 && !own.contains(bit))
                .cloned(),
        );
        let (features, tail) = feature_tail(self.data_offset + self.data_size, sections);
        let out = self.out.take().ok_or_else(|| {
            io::Error::other("the recording was stopped by an earlier write error")
        })?;
        let (mut file, written) = out.finish();
        let result = written.and_then(|()| {
            file.write_all(&tail)?;
            file.seek(SeekFrom::Start(0))?;
            file.write_all(&self.header(features))?;
            if self.discard {
                return Ok(());
            }
            file.sync_all()
        });
        if result.is_err() {
            // Left to `salvage`, which cuts the file back to its records.
            self.out = Some(Background::new(file)?);
        }
        result
    }

    /// pfprof's own feature sections: host name, kernel release, CPUs,
    /// command line, the events, and pfprof's metadata.
    pub(super) fn own_sections(
        &self,
        meta: &RecordingMeta,
        hostname: &str,
        os_release: &str,
        nr_cpus: u32,
    ) -> io::Result<Vec<(u32, Vec<u8>)>> {
        let string = |text: &str| {
            let mut s = Vec::new();
            put_string(&mut s, text);
            s
        };
        let mut cpus = Vec::new();
        put_u32(&mut cpus, nr_cpus);
        put_u32(&mut cpus, nr_cpus);
        let mut cmdline = Vec::new();
        put_u32(&mut cmdline, meta.command.len() as u32 + 1);
        for arg in std::iter::once("pfprof").chain(meta.command.iter().map(String::as_str)) {
            put_string(&mut cmdline, arg);
        }
        let attr_len = (self.attr_size - 16) as usize;
        Ok(vec![
            (HEADER_HOSTNAME, string(hostname)),
            (HEADER_OSRELEASE, string(os_release)),
            (HEADER_NRCPUS, cpus),
            (HEADER_CMDLINE, cmdline),
            (
                HEADER_EVENT_DESC,
                event_desc_section(&self.events, attr_len),
            ),
            (
                PFPROF_META_FEATURE,
                serde_json::to_vec(meta).map_err(io::Error::other)?,
            ),
        ])
    }
}

/// What follows the data section: the feature section table (offset and
/// size of each section, in bit order), then the sections; with the
/// bitmap that lists them. `table_offset` is where the table goes.
pub(super) fn feature_tail(
    table_offset: u64,
    mut sections: Vec<(u32, Vec<u8>)>,
) -> (Features, Vec<u8>) {
    sections.sort_by_key(|(bit, _)| *bit);
    let mut features = Features::default();
    let mut offset = table_offset + 16 * sections.len() as u64;
    let mut tail = Vec::new();
    for (bit, body) in &sections {
        features.set(*bit);
        put_u64(&mut tail, offset);
        put_u64(&mut tail, body.len() as u64);
        offset += body.len() as u64;
    }
    for (_, body) in &sections {
        tail.extend_from_slice(body);
    }
    (features, tail)
}

/// The `EVENT_DESC` feature: u32 count, u32 attr size, then per event the
/// attr (zero-padded to `attr_len`), u32 id count, the name
/// (`perf_header_string`) and the ids.
pub(super) fn event_desc_section(events: &[EventDesc], attr_len: usize) -> Vec<u8> {
    let mut s = Vec::new();
    put_u32(&mut s, events.len() as u32);
    put_u32(&mut s, attr_len as u32);
    for e in events {
        let start = s.len();
        s.extend_from_slice(&e.attr);
        s.resize(start + attr_len, 0);
        put_u32(&mut s, e.ids.len() as u32);
        put_string(&mut s, &e.name);
        for id in &e.ids {
            put_u64(&mut s, *id);
        }
    }
    s
}
