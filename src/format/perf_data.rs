//! The recording container: a perf.data (`PERFILE2`) file, written here and
//! read back by [`read_layout`] (header, attrs, feature sections; every size
//! checked against the file) and `decode.rs` (the records).
//!
//! Layout: header | event ids | attrs | data (raw kernel records, as drained
//! from the ring buffers, with a `FINISHED_ROUND` after each drain pass) |
//! feature section table | feature sections. The header is rewritten with the
//! current data size at every checkpoint, so a recording cut short by a kill
//! still opens (without its feature sections).
//!
//! pfprof's own facts about the run (command, exit status, the kernel's fault
//! counters, whether the tracepoints were available) live in a private feature
//! section, [`PFPROF_META_FEATURE`], as JSON.
//!
//! Each section pfprof both writes and reads (`EVENT_DESC`, the build-id
//! table) is encoded beside its decoder, every section is read through one
//! bounds-checked cursor, and [`repair`] rebuilds a recording whose end is
//! missing with the same checks as the reader.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::Path;

use super::events::{le_u64, le_u64s, records, RecordHead};
use super::records::{OwnEvent, BUILD_ID_SIZE_MAX, MISC_BUILD_ID_SIZE, MISC_KERNEL, MISC_USER};
use serde::{Deserialize, Serialize};

/// Which faults `record` samples.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum RecordClass {
    /// Major faults only: cheap enough for a busy host; no tracepoints, so
    /// no latency or access type.
    Major,
    /// Minor faults (COW included) only.
    Minor,
    /// What COW needs: minor faults and the fault-entry tracepoints.
    Cow,
    /// Everything.
    #[default]
    All,
}

/// Feature bit of pfprof's metadata section. perf only interprets bits below
/// its `HEADER_LAST_FEATURE` (32 today) and skips the rest.
pub const PFPROF_META_FEATURE: u32 = 200;
/// Feature bit of the tracepoints' formats (perf_compat's `TracingData`).
pub const HEADER_TRACING_DATA: u32 = 1;
/// Feature bit of the build-id table ([`build_id_section`]).
pub const HEADER_BUILD_ID: u32 = 2;
const HEADER_HOSTNAME: u32 = 3;
const HEADER_OSRELEASE: u32 = 4;
/// Feature bit of the machine's architecture (`uname -m`).
pub const HEADER_ARCH: u32 = 6;
const HEADER_NRCPUS: u32 = 7;
const HEADER_CMDLINE: u32 = 11;
const HEADER_EVENT_DESC: u32 = 12;
/// `PERF_RECORD_FINISHED_ROUND`: all records before it may be sorted with
/// those of the next round only.
pub(crate) const PERF_RECORD_FINISHED_ROUND: u32 = 68;
/// Bytes of the fixed header (`struct perf_file_header`).
pub const HEADER_SIZE: u64 = 104;
/// The magic of a little-endian perf.data file.
const MAGIC: &[u8; 8] = b"PERFILE2";

/// The header's feature bitmap: bit `b` set says feature section `b`
/// follows the data (the sections in bit order, bits below 256).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Features([u64; 4]);

impl Features {
    /// Whether feature `bit`'s section is there.
    pub fn has(&self, bit: u32) -> bool {
        let (word, mask) = Self::place(bit);
        self.0.get(word).is_some_and(|w| w & mask != 0)
    }

    /// Marks feature `bit`'s section as there (bits past 255 have no place).
    pub fn set(&mut self, bit: u32) {
        let (word, mask) = Self::place(bit);
        if let Some(w) = self.0.get_mut(word) {
            *w |= mask;
        }
    }

    /// Whether no section is there (a recording not finished).
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The bits set, ascending: the order of the sections.
    pub fn bits(self) -> impl Iterator<Item = u32> {
        (0..256).filter(move |&bit| self.has(bit))
    }

    fn place(bit: u32) -> (usize, u64) {
        ((bit / 64) as usize, 1 << (bit % 64))
    }
}

/// One event of the recording: its attr, name and the ids the kernel gave
/// each of its per-CPU instances.
#[derive(Debug, Clone)]
pub struct EventDesc {
    /// The raw `perf_event_attr` bytes.
    pub attr: Vec<u8>,
    /// perf-style event name (`minor-faults`, `exceptions:page_fault_user`).
    pub name: String,
    /// `PERF_EVENT_IOC_ID` of each instance.
    pub ids: Vec<u64>,
}

/// How the profiled command ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// Exited with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// What a recording followed.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RecordMode {
    /// A command pfprof started (`record -- CMD`).
    #[default]
    Command,
    /// Running processes (`record -p PID`).
    Attach,
    /// Every process (`record -a`).
    System,
}

/// pfprof's metadata about a recording.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(default)]
pub struct RecordingMeta {
    /// pfprof version that wrote the file.
    pub pfprof_version: String,
    /// The profiled command line.
    pub command: Vec<String>,
    /// How the command ended (None if pfprof stopped first).
    pub exit: Option<Exit>,
    /// The kernel's count of minor faults of the process tree (counting events).
    pub kernel_minor: Option<u64>,
    /// The kernel's count of major faults of the process tree.
    pub kernel_major: Option<u64>,
    /// Whether the `exceptions:page_fault_*` tracepoints were recorded (error codes, COW).
    pub tracepoints: bool,
    /// Why the tracepoints are missing, when they are.
    pub tracepoints_note: Option<String>,
    /// Sample period (1 = every fault).
    pub period: u64,
    /// Call-graph mode.
    pub call_graph: crate::format::call_graph::CallGraph,
    /// Unwinding counters (dwarf mode).
    #[serde(default)]
    pub unwind: Option<crate::unwind::UnwindStats>,
    /// Whether kernel frames were kept.
    pub kernel_callchains: bool,
    /// Signal that made pfprof stop early, if any.
    pub interrupted_by: Option<i32>,
    /// Bytes of kernel records written.
    pub data_bytes: u64,
    /// Wall time of the recording, in nanoseconds.
    pub wall_ns: u64,
    /// Pid of the profiled command.
    pub root_pid: Option<i32>,
    /// Pid of pfprof itself (the command's parent).
    pub pfprof_pid: Option<i32>,
    /// What was followed.
    pub mode: RecordMode,
    /// The processes attached to (`-p`).
    pub pids: Vec<i32>,
    /// Which faults were sampled (`--class`).
    pub class: RecordClass,
    /// Bytes of each CPU's ring buffer (its share of the collector's ring
    /// when shared) as mapped: less than asked when the
    /// locked-memory limits shrank it (None in recordings before it was kept).
    #[serde(default)]
    pub ring_bytes_per_cpu: Option<u64>,
    /// How the draining thread was scheduled: `fifo` (real-time),
    /// `nice -10` or `ordinary` (None in older recordings).
    #[serde(default)]
    pub recorder_priority: Option<crate::format::recorder::RecorderPriority>,
    /// Who wrote the faults: `bpf` (pfprof's collector, one record per
    /// fault) or `perf` (the kernel's samples and, in dwarf mode, stack
    /// copies); None in older recordings.
    #[serde(default)]
    pub collector: Option<crate::format::recorder::Collector>,
    /// Fault entries that no completion followed (a SIGSEGV, a spurious
    /// fault), as the collector counted them where it paired entries in
    /// the kernel (the recording then holds only the paired entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished_entries: Option<u64>,
    /// `kernel.perf_event_max_stack`: where the kernel cuts frame-pointer chains.
    #[serde(default)]
    pub max_stack: Option<u32>,
    /// Mapped files without a build-id, by path: their size and mtime when
    /// recorded (several when different files were mapped under one path),
    /// so that `report` can tell a file changed since. Empty in older
    /// recordings.
    #[serde(default)]
    pub files: BTreeMap<String, Vec<FileStamp>>,
}

/// What identifies a file without a build-id: its size and modification
/// time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileStamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time, ns since the epoch.
    pub mtime_ns: i64,
}

impl FileStamp {
    /// The stamp of a file's metadata.
    pub fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            size: meta.size(),
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
        }
    }
}

/// The published `perf_event_attr` sizes (PERF_ATTR_SIZE_VER0..VER9).
const ATTR_SIZES: [usize; 10] = [64, 72, 80, 96, 104, 112, 120, 128, 136, 144];

/// The attr as it goes into the file: cut to the smallest published size
/// that keeps every non-zero byte, so that tools built against older
/// headers (perf refuses "a more recent ABI") can read it.
fn file_attr(attr: &[u8]) -> Vec<u8> {
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
const CHUNK_BYTES: usize = 1 << 20;

/// What the writing thread does, in order.
enum Job {
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
struct Background {
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
struct Failed {
    flag: std::sync::atomic::AtomicBool,
    error: std::sync::Mutex<Option<io::Error>>,
}

impl Failed {
    fn is_set(&self) -> bool {
        self.flag.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set(&self, e: io::Error) {
        *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        self.flag.store(true, std::sync::atomic::Ordering::Release);
    }

    fn take(&self) -> Option<io::Error> {
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Background {
    fn new(mut file: File) -> io::Result<Background> {
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
    fn fresh_chunk(&self) -> Vec<u8> {
        self.spent
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK_BYTES))
    }

    /// The first error the thread met, as a new error of the same kind.
    fn check(&self) -> io::Result<()> {
        if !self.failed.is_set() {
            return Ok(());
        }
        match &*self.failed.error.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(e) => Err(io::Error::new(e.kind(), e.to_string())),
            None => Ok(()),
        }
    }

    fn send(&mut self, job: Job) -> io::Result<()> {
        self.tx
            .send(job)
            .map_err(|_| io::Error::other("the writing thread ended"))
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
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
    fn header(&mut self, header: Vec<u8>) -> io::Result<()> {
        self.check()?;
        let fresh = self.fresh_chunk();
        let chunk = std::mem::replace(&mut self.chunk, fresh);
        self.send(Job::Data(chunk))?;
        self.send(Job::Header(header))
    }

    /// Waits for every write; the file, or the first error.
    fn finish(mut self) -> (File, io::Result<()>) {
        let chunk = std::mem::take(&mut self.chunk);
        let _ = self.tx.send(Job::Data(chunk));
        self.abandon()
    }

    /// Waits for the writes already handed to the thread; what was not
    /// handed yet is dropped.
    fn abandon(self) -> (File, io::Result<()>) {
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
}

fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(&v.to_le_bytes());
}
/// perf pads the strings of its header (and the names of its build-id
/// table) with NULs to a multiple of 64 bytes (`NAME_ALIGN`).
const NAME_ALIGN: usize = 64;

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

    fn on_file(file: File, mut events: Vec<EventDesc>, discard: bool) -> io::Result<Self> {
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
        };
        w.checkpoint()?;
        Ok(w)
    }

    fn out(&mut self) -> io::Result<&mut Background> {
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

    /// Marks the end of one drain pass over all ring buffers.
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
    fn header(&self, features: Features) -> Vec<u8> {
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
    fn own_sections(
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
fn feature_tail(table_offset: u64, mut sections: Vec<(u32, Vec<u8>)>) -> (Features, Vec<u8>) {
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
fn event_desc_section(events: &[EventDesc], attr_len: usize) -> Vec<u8> {
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

/// The parts of a perf.data header that decide how to read the file.
#[derive(Debug, Clone, Copy)]
pub struct HeaderFacts {
    /// `attr_size` (attr + ids section).
    pub attr_size: u64,
    /// Attr section (offset, size).
    pub attrs: (u64, u64),
    /// Data section (offset, size).
    pub data: (u64, u64),
    /// Feature bitmap.
    pub features: Features,
}

/// Where [`HeaderFacts`]' fields lie in the header: attr size, attr
/// section, data section (offset and size each), feature bitmap.
const AT_ATTR_SIZE: usize = 16;
const AT_ATTRS: usize = 24;
const AT_DATA: usize = 40;
const AT_FEATURES: usize = 72;

impl HeaderFacts {
    /// Parses the fixed header; None if it is not a little-endian PERFILE2.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.get(..8)? != MAGIC {
            return None;
        }
        let u = |i: usize| le_u64(bytes, i);
        let f = AT_FEATURES;
        Some(HeaderFacts {
            attr_size: u(AT_ATTR_SIZE)?,
            attrs: (u(AT_ATTRS)?, u(AT_ATTRS + 8)?),
            data: (u(AT_DATA)?, u(AT_DATA + 8)?),
            features: Features([u(f)?, u(f + 8)?, u(f + 16)?, u(f + 24)?]),
        })
    }

    /// Writes the fields into `header` (at least [`HEADER_SIZE`] bytes),
    /// leaving the others (magic, header size, event types) as they are.
    fn write_into(&self, header: &mut [u8]) {
        let mut put = |at: usize, v: u64| header[at..at + 8].copy_from_slice(&v.to_le_bytes());
        put(AT_ATTR_SIZE, self.attr_size);
        put(AT_ATTRS, self.attrs.0);
        put(AT_ATTRS + 8, self.attrs.1);
        put(AT_DATA, self.data.0);
        put(AT_DATA + 8, self.data.1);
        for (i, word) in self.features.0.iter().enumerate() {
            put(AT_FEATURES + 8 * i, *word);
        }
    }

    /// Whether the file was finished (feature sections written).
    pub fn finished(&self) -> bool {
        self.features.has(HEADER_EVENT_DESC)
    }

    /// The length of an attr without its ids' place (`attr_size` - 16),
    /// when it is one a `perf_event_attr` can have.
    pub fn attr_len(&self) -> Option<usize> {
        let len = usize::try_from(self.attr_size.checked_sub(16)?).ok()?;
        (ATTR_SIZE_MIN..=ATTR_SIZE_MAX)
            .contains(&len)
            .then_some(len)
    }
}

/// Where and why a recording's header, attributes or feature sections do
/// not hold together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError {
    /// Byte offset in the file of the field that is wrong.
    pub offset: u64,
    /// What is wrong, naming the part of the file.
    pub what: String,
}

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at byte {})", self.what, self.offset)
    }
}

/// What a reader takes from a recording besides its records: the events
/// (attr bytes, name, ids), the command line, pfprof's metadata. Read here
/// rather than by `linux-perf-data`, which allocates whatever sizes the file
/// declares: every size, count and offset is checked against the file's
/// length before it is used, so nothing allocates more than the file holds.
#[derive(Debug)]
pub struct Layout {
    /// The fixed header.
    pub facts: HeaderFacts,
    /// Events from `EVENT_DESC` when present, else from the attr section
    /// (unnamed).
    pub events: Vec<EventDesc>,
    /// `CMDLINE` feature.
    pub cmdline: Option<Vec<String>>,
    /// Byte range of pfprof's metadata feature ([`PFPROF_META_FEATURE`]).
    pub meta: Option<std::ops::Range<usize>>,
    /// File offset of each event's attr (for errors).
    pub event_offsets: Vec<u64>,
    /// `BUILD_ID` feature (perf writes it): (path, build-id) of the files
    /// the samples hit. perf's mmap records carry inodes, not build-ids.
    pub build_ids: Vec<PathBuildId>,
}

/// A file's path and its build-id.
pub type PathBuildId = (Vec<u8>, Vec<u8>);

/// Bounds-checked little-endian reads over a part of the file, reporting
/// failures at absolute file offsets: every reader of perf.data sections
/// (here, and perf_compat's) reads through it.
pub(crate) struct Fields<'a> {
    bytes: &'a [u8],
    /// Next read position (absolute).
    at: usize,
    /// End of the part being read (absolute).
    end: usize,
    /// Names the part in errors.
    part: &'static str,
}

impl<'a> Fields<'a> {
    /// Reads `len` bytes of `bytes` from `start` (fewer if the bytes end
    /// first), the part named `part` in errors.
    pub(crate) fn new(bytes: &'a [u8], start: usize, len: usize, part: &'static str) -> Self {
        Fields {
            bytes,
            at: start,
            end: start.saturating_add(len).min(bytes.len()),
            part,
        }
    }

    /// An error at the next read's offset.
    pub(crate) fn error(&self, what: impl std::fmt::Display) -> LayoutError {
        LayoutError {
            offset: self.at as u64,
            what: format!("{}: {what}", self.part),
        }
    }

    /// Bytes not read yet.
    pub(crate) fn left(&self) -> usize {
        self.end.saturating_sub(self.at)
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], LayoutError> {
        match self.at.checked_add(n).filter(|&e| e <= self.end) {
            Some(end) => {
                let out = &self.bytes[self.at..end];
                self.at = end;
                Ok(out)
            }
            None => Err(self.error(format_args!(
                "{n} bytes declared, {} left",
                self.end.saturating_sub(self.at)
            ))),
        }
    }

    /// The next `n` bytes, `n` as a file states it.
    pub(crate) fn take_u64(&mut self, n: u64) -> Result<&'a [u8], LayoutError> {
        self.take(usize::try_from(n).unwrap_or(usize::MAX))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, LayoutError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, LayoutError> {
        Ok(le_u64(self.take(8)?, 0).unwrap_or_default())
    }

    /// A NUL-terminated string (the NUL read too).
    pub(crate) fn cstring(&mut self) -> Result<String, LayoutError> {
        let rest = &self.bytes[self.at.min(self.end)..self.end];
        let len = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| self.error("unterminated string"))?;
        let text = String::from_utf8_lossy(&rest[..len]).into_owned();
        self.at += len + 1;
        Ok(text)
    }

    /// The header of the record that starts here.
    fn record_head(&mut self) -> Result<RecordHead, LayoutError> {
        let bytes = self.take(8)?;
        RecordHead::parse(bytes).ok_or_else(|| self.error("a cut record header"))
    }

    /// The bytes read since `start`.
    fn since(&self, start: usize) -> &'a [u8] {
        &self.bytes[start..self.at]
    }

    /// `perf_header_string`: u32 length, then that many bytes, NUL padded.
    fn string(&mut self) -> Result<String, LayoutError> {
        let len = self.u32()? as usize;
        let raw = self.take(len)?;
        let text = raw.split(|&b| b == 0).next().unwrap_or_default();
        Ok(String::from_utf8_lossy(text).into_owned())
    }
}

/// perf's smallest `perf_event_attr` (`PERF_ATTR_SIZE_VER0`).
const ATTR_SIZE_MIN: usize = 64;
/// Far above any kernel's `perf_event_attr` (144 bytes in 6.x).
const ATTR_SIZE_MAX: usize = 4096;
/// Readers key records by attr index in 16 bits.
pub const MAX_EVENTS: usize = 0xffff;

fn range_in(bytes: &[u8], offset: u64, size: u64) -> Option<std::ops::Range<usize>> {
    let end = offset.checked_add(size)?;
    (end <= bytes.len() as u64).then_some(offset as usize..end as usize)
}

/// Reads and checks everything but the records (see [`Layout`]). The data
/// section itself may be cut short (the caller decides whether to repair),
/// but must start inside the file.
pub fn read_layout(bytes: &[u8]) -> Result<Layout, LayoutError> {
    check_magic(bytes)?;
    let facts = HeaderFacts::parse(bytes)
        .ok_or_else(|| layout_error(bytes.len() as u64, "the perf.data header is cut"))?;
    let (attr_len, attrs) = check_sections(bytes, &facts)?;
    let (events, event_offsets) = attr_section(bytes, &facts, attr_len, attrs)?;
    let mut layout = Layout {
        facts,
        events,
        cmdline: None,
        meta: None,
        event_offsets,
        build_ids: Vec::new(),
    };
    if facts.finished() {
        read_features(bytes, &mut layout)?;
    }
    Ok(layout)
}

/// A [`LayoutError`] at `offset`.
fn layout_error(offset: u64, what: &str) -> LayoutError {
    LayoutError {
        offset,
        what: what.to_string(),
    }
}

/// Refuses anything but a little-endian PERFILE2 file, naming what it is.
fn check_magic(bytes: &[u8]) -> Result<(), LayoutError> {
    match bytes.get(..8) {
        Some(b"PERFILE2") => Ok(()),
        Some(b"2ELIFREP") => Err(layout_error(
            0,
            "a big-endian perf.data file (not supported)",
        )),
        Some(magic) if magic.starts_with(b"PERFFILE") => Err(layout_error(
            0,
            "a perf.data file of the old format (PERFFILE)",
        )),
        _ => Err(layout_error(0, "not a perf.data file (no PERFILE2 magic)")),
    }
}

/// Checks the header's attr size and its attr and data sections against
/// the file; the attr's length (without its ids' place) and the attr
/// section's byte range.
fn check_sections(
    bytes: &[u8],
    facts: &HeaderFacts,
) -> Result<(usize, std::ops::Range<usize>), LayoutError> {
    let at = |offset: u64, what: String| LayoutError { offset, what };
    let attr_len = facts
        .attr_len()
        .ok_or_else(|| at(16, format!("attr size {} is impossible", facts.attr_size)))?;
    let (attrs_offset, attrs_size) = facts.attrs;
    let attrs = range_in(bytes, attrs_offset, attrs_size).ok_or_else(|| {
        at(
            24,
            format!(
                "the attr section ({attrs_size} bytes at {attrs_offset}) ends past the file's {} bytes",
                bytes.len()
            ),
        )
    })?;
    if attrs_size == 0 {
        return Err(layout_error(32, "the attr section is empty (no events)"));
    }
    if attrs_size % facts.attr_size != 0 {
        return Err(at(
            32,
            format!(
                "the attr section's size {attrs_size} is not a multiple of the attr size {}",
                facts.attr_size
            ),
        ));
    }
    let data_offset = facts.data.0;
    if data_offset < HEADER_SIZE || data_offset > bytes.len() as u64 {
        return Err(at(
            40,
            format!(
                "the data section starts at byte {data_offset}, outside the file's {} bytes",
                bytes.len()
            ),
        ));
    }
    if attrs_size / facts.attr_size > MAX_EVENTS as u64 {
        return Err(at(
            32,
            format!(
                "{} events (at most {MAX_EVENTS} are supported)",
                attrs_size / facts.attr_size
            ),
        ));
    }
    Ok((attr_len, attrs))
}

/// The events of the attr section (unnamed) and each one's file offset.
/// Each attr points at its own id array; a file whose arrays add up to
/// more than the file is lying.
fn attr_section(
    bytes: &[u8],
    facts: &HeaderFacts,
    attr_len: usize,
    attrs: std::ops::Range<usize>,
) -> Result<(Vec<EventDesc>, Vec<u64>), LayoutError> {
    let mut events = Vec::new();
    let mut event_offsets = Vec::new();
    let mut id_bytes = 0usize;
    for (i, entry) in bytes[attrs.clone()]
        .chunks_exact(facts.attr_size as usize)
        .enumerate()
    {
        let entry_offset = (attrs.start + i * facts.attr_size as usize) as u64;
        event_offsets.push(entry_offset);
        let ids_at = entry_offset + attr_len as u64;
        let (ids_offset, ids_size) = (
            le_u64(entry, attr_len).unwrap_or_default(),
            le_u64(entry, attr_len + 8).unwrap_or_default(),
        );
        let ids = range_in(bytes, ids_offset, ids_size)
            .filter(|r| r.len() % 8 == 0)
            .ok_or_else(|| LayoutError {
                offset: ids_at,
                what: format!(
                    "the event ids ({ids_size} bytes at {ids_offset}) are outside the file"
                ),
            })?;
        id_bytes += ids.len();
        if id_bytes > bytes.len() {
            return Err(layout_error(
                ids_at,
                "the event id arrays add up to more than the file",
            ));
        }
        events.push(EventDesc {
            attr: entry[..attr_len].to_vec(),
            name: String::new(),
            ids: le_u64s(&bytes[ids]).collect(),
        });
    }
    Ok((events, event_offsets))
}

/// Reads the feature sections pfprof uses into `layout`: a table of
/// (offset, size) at the data section's end, one entry per bit set, in
/// bit order.
fn read_features(bytes: &[u8], layout: &mut Layout) -> Result<(), LayoutError> {
    let facts = layout.facts;
    let (data_offset, data_size) = facts.data;
    let table = data_offset
        .checked_add(data_size)
        .filter(|&end| end <= bytes.len() as u64)
        .ok_or_else(|| LayoutError {
            offset: 48,
            what: format!(
                "the data section ({data_size} bytes at {data_offset}) ends past the file's {} bytes",
                bytes.len()
            ),
        })?;
    let mut entries = Fields::new(bytes, table as usize, usize::MAX, "feature section table");
    for bit in facts.features.bits() {
        let entry_at = entries.at as u64;
        let entry = entries.take(16)?;
        let (offset, size) = (
            le_u64(entry, 0).unwrap_or_default(),
            le_u64(entry, 8).unwrap_or_default(),
        );
        let range = range_in(bytes, offset, size).ok_or_else(|| LayoutError {
            offset: entry_at,
            what: format!(
                "feature {bit}'s section ({size} bytes at {offset}) ends past the file's {} bytes",
                bytes.len()
            ),
        })?;
        match bit {
            HEADER_CMDLINE => layout.cmdline = Some(cmdline(bytes, range)?),
            HEADER_EVENT_DESC => {
                (layout.events, layout.event_offsets) = event_desc(bytes, range)?;
            }
            PFPROF_META_FEATURE => layout.meta = Some(range),
            HEADER_BUILD_ID => layout.build_ids = build_ids(bytes, range)?,
            _ => {}
        }
    }
    Ok(())
}

/// The `CMDLINE` feature: u32 count, then each argument as a
/// `perf_header_string`.
fn cmdline(bytes: &[u8], range: std::ops::Range<usize>) -> Result<Vec<String>, LayoutError> {
    let mut f = Fields::new(bytes, range.start, range.len(), "CMDLINE feature");
    let n = f.u32()?;
    let mut args = Vec::new();
    for _ in 0..n {
        args.push(f.string()?);
    }
    Ok(args)
}

/// One file of the build-id table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct BuildIdEntry {
    /// The kernel image rather than a user-space file.
    pub kernel: bool,
    /// The GNU build-id (at most [`BUILD_ID_SIZE_MAX`] bytes).
    pub build_id: Vec<u8>,
    /// The path as the mappings name it (`[kernel.kallsyms]` for the kernel).
    pub path: String,
}

/// A build-id table entry (perf's `perf_record_header_build_id`): a record
/// header, then, at these offsets from the entry's start, i32 pid, the
/// build-id in a field of [`BUILD_ID_SIZE_MAX`] bytes, u8 its length (valid
/// with [`MISC_BUILD_ID_SIZE`]; else the whole field), 3 reserved bytes, and
/// the NUL-padded path, up to the header's size.
const ENTRY_PID: usize = 8;
const ENTRY_ID: usize = ENTRY_PID + 4;
const ENTRY_ID_LEN: usize = ENTRY_ID + BUILD_ID_SIZE_MAX;
const ENTRY_PATH: usize = ENTRY_ID_LEN + 4;
/// perf's pid for the host machine (`HOST_KERNEL_ID`).
const HOST: i32 = -1;

/// The `BUILD_ID` section: one entry per file, its path NUL-padded to 64
/// bytes. Ids longer than [`BUILD_ID_SIZE_MAX`] are left out (the entry
/// has no room for them), and paths longer than an entry can hold.
pub fn build_id_section(entries: &[BuildIdEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        let id_len = e.build_id.len();
        if id_len == 0 || id_len > BUILD_ID_SIZE_MAX {
            continue;
        }
        let path_len = name_padded(e.path.len());
        let Ok(size) = u16::try_from(ENTRY_PATH + path_len) else {
            continue; // a path perf could not store either
        };
        let misc = MISC_BUILD_ID_SIZE | if e.kernel { MISC_KERNEL } else { MISC_USER };
        let mut entry = vec![0u8; ENTRY_PATH + path_len];
        // A record header whose type is unused here.
        let head = RecordHead {
            record_type: 0,
            misc,
            size: usize::from(size),
        };
        entry[..8].copy_from_slice(&head.encode());
        entry[ENTRY_PID..ENTRY_ID].copy_from_slice(&HOST.to_le_bytes());
        entry[ENTRY_ID..ENTRY_ID + id_len].copy_from_slice(&e.build_id);
        entry[ENTRY_ID_LEN] = id_len as u8;
        entry[ENTRY_PATH..ENTRY_PATH + e.path.len()].copy_from_slice(e.path.as_bytes());
        out.extend_from_slice(&entry);
    }
    out
}

/// The `BUILD_ID` feature's (path, build-id) pairs, entries laid out as
/// [`build_id_section`] writes them; entries without a path or an id are
/// skipped.
pub(crate) fn build_ids(
    bytes: &[u8],
    range: std::ops::Range<usize>,
) -> Result<Vec<PathBuildId>, LayoutError> {
    let mut f = Fields::new(bytes, range.start, range.len(), "BUILD_ID feature");
    let mut out = Vec::new();
    while f.left() > 0 {
        let start = f.at;
        let head = f.record_head()?;
        if head.size < ENTRY_PATH {
            return Err(f.error(format_args!("an entry of {} bytes", head.size)));
        }
        f.take(head.size - 8)?;
        let entry = f.since(start);
        let len = if head.misc & MISC_BUILD_ID_SIZE != 0 {
            usize::from(entry[ENTRY_ID_LEN]).min(BUILD_ID_SIZE_MAX)
        } else {
            BUILD_ID_SIZE_MAX
        };
        let path = entry[ENTRY_PATH..]
            .split(|&b| b == 0)
            .next()
            .unwrap_or_default();
        if len > 0 && !path.is_empty() {
            out.push((path.to_vec(), entry[ENTRY_ID..ENTRY_ID + len].to_vec()));
        }
    }
    Ok(out)
}

/// The `EVENT_DESC` feature: u32 count, u32 attr size, then per event the
/// attr, u32 id count, the name (`perf_header_string`) and the ids.
fn event_desc(
    bytes: &[u8],
    range: std::ops::Range<usize>,
) -> Result<(Vec<EventDesc>, Vec<u64>), LayoutError> {
    let mut f = Fields::new(bytes, range.start, range.len(), "EVENT_DESC feature");
    let n = f.u32()?;
    if n as usize > MAX_EVENTS {
        return Err(f.error(format_args!(
            "{n} events (at most {MAX_EVENTS} are supported)"
        )));
    }
    let attr_len = f.u32()? as usize;
    if !(ATTR_SIZE_MIN..=ATTR_SIZE_MAX).contains(&attr_len) {
        return Err(f.error(format_args!("attr size {attr_len} is impossible")));
    }
    let mut events = Vec::new();
    let mut offsets = Vec::new();
    for _ in 0..n {
        offsets.push(f.at as u64);
        let attr = f.take(attr_len)?.to_vec();
        let n_ids = f.u32()? as usize;
        let name = f.string()?;
        let ids = le_u64s(f.take(n_ids.saturating_mul(8))?).collect();
        events.push(EventDesc { attr, name, ids });
    }
    Ok((events, offsets))
}

/// Rebuilds a readable image of a recording whose end is missing: pfprof was
/// killed before writing the feature sections, or the file was cut. Keeps
/// every complete record and synthesizes `EVENT_DESC` from the attrs and
/// their ids (pfprof writes its events in a fixed order, which names the
/// tracepoints). Returns the image and the number of data bytes kept; None
/// when the header or the attrs do not hold together.
pub fn repair(bytes: &[u8]) -> Option<(Vec<u8>, u64)> {
    let facts = HeaderFacts::parse(bytes)?;
    let (attr_len, events) = events_from_attrs(bytes, &facts)?;
    let end = complete_records_end(bytes, &facts);
    let image = image_with_event_desc(bytes, facts, end, &events, attr_len);
    Some((image, end as u64 - facts.data.0))
}

/// The events of the attr section, checked as [`read_layout`] checks them,
/// named as pfprof names its own (see [`OwnEvent::of_attr`]); with the
/// attrs' length.
fn events_from_attrs(bytes: &[u8], facts: &HeaderFacts) -> Option<(usize, Vec<EventDesc>)> {
    let (attr_len, attrs) = check_sections(bytes, facts).ok()?;
    let (mut events, _) = attr_section(bytes, facts, attr_len, attrs).ok()?;
    let mut tracepoints = 0;
    for e in &mut events {
        // attr: u32 type, u32 size, u64 config (attr_len is at least 64).
        let type_ = u32::from_le_bytes(e.attr[..4].try_into().unwrap_or_default());
        let config = le_u64(&e.attr, 8).unwrap_or_default();
        e.name = OwnEvent::of_attr(type_, config, tracepoints).map_or_else(
            || format!("tracepoint:{config}"),
            |own| own.name.to_string(),
        );
        if type_ == perf_event_open_sys::bindings::PERF_TYPE_TRACEPOINT {
            tracepoints += 1;
        }
    }
    Some((attr_len, events))
}

/// Where the last complete record ends: whole records from the data
/// section's start, up to its declared end in a finished file, else up to
/// the file's end.
fn complete_records_end(bytes: &[u8], facts: &HeaderFacts) -> usize {
    // check_sections put the data's start inside the file.
    let data_start = facts.data.0 as usize;
    let limit = if facts.finished() {
        bytes
            .len()
            .min(data_start.saturating_add(facts.data.1 as usize))
    } else {
        bytes.len()
    };
    let mut whole = records(&bytes[data_start..limit]);
    whole.by_ref().take_while(Result::is_ok).for_each(drop);
    data_start + whole.offset()
}

/// The recording's bytes up to `end` (header, attrs, complete records),
/// then a feature section table with `EVENT_DESC` only and that section;
/// the header says so, and how many data bytes there are.
fn image_with_event_desc(
    bytes: &[u8],
    mut facts: HeaderFacts,
    end: usize,
    events: &[EventDesc],
    attr_len: usize,
) -> Vec<u8> {
    let data_start = facts.data.0 as usize;
    let (features, tail) = feature_tail(
        end as u64,
        vec![(HEADER_EVENT_DESC, event_desc_section(events, attr_len))],
    );
    facts.data.1 = (end - data_start) as u64;
    facts.features = features;
    let mut image = Vec::with_capacity(end + tail.len());
    image.extend_from_slice(&bytes[..end]);
    image.extend_from_slice(&tail);
    facts.write_into(&mut image);
    image
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(type_: u32, config: u64) -> Vec<u8> {
        let mut a = vec![0u8; 128];
        a[..4].copy_from_slice(&type_.to_le_bytes());
        a[4..8].copy_from_slice(&128u32.to_le_bytes());
        a[8..16].copy_from_slice(&config.to_le_bytes());
        a
    }

    fn record(len: u16) -> Vec<u8> {
        let mut r = vec![0u8; len as usize];
        r[..4].copy_from_slice(&9u32.to_le_bytes()); // PERF_RECORD_SAMPLE
        r[6..8].copy_from_slice(&len.to_le_bytes());
        r
    }

    fn repair_events() -> Vec<EventDesc> {
        vec![
            EventDesc {
                attr: attr(1, 5),
                name: "minor-faults".into(),
                ids: vec![1, 2],
            },
            EventDesc {
                attr: attr(1, 6),
                name: "major-faults".into(),
                ids: vec![3, 4],
            },
            EventDesc {
                attr: attr(2, 190),
                name: "exceptions:page_fault_user".into(),
                ids: vec![5, 6],
            },
        ]
    }

    /// Attrs are cut to the smallest published size that keeps their
    /// non-zero bytes, and say so in their size field.
    #[test]
    fn attrs_are_cut_to_a_published_size() {
        for (len, last_nonzero, want) in [
            (144usize, 100usize, 104usize),
            (144, 130, 136),
            (144, 10, 64),
            (144, 143, 144),
            (136, 135, 136),
        ] {
            let mut attr = vec![0u8; len];
            attr[last_nonzero] = 1;
            let out = file_attr(&attr);
            assert_eq!(out.len(), want, "{len} {last_nonzero}");
            assert_eq!(
                u32::from_le_bytes(out[4..8].try_into().unwrap()) as usize,
                want
            );
        }
    }

    /// The magic says which file it is: only little-endian PERFILE2 is read.
    #[test]
    fn magic_names_the_format() {
        assert_eq!(check_magic(b"PERFILE2 and more"), Ok(()));
        let what = |bytes: &[u8]| check_magic(bytes).unwrap_err().what;
        assert!(what(b"2ELIFREP").contains("big-endian"));
        assert!(what(b"PERFFILE").contains("old format"));
        assert!(what(b"PERF").contains("no PERFILE2 magic"));
    }

    /// The CMDLINE feature is a count, then that many strings; a count
    /// beyond the section is an error at the string's place.
    #[test]
    fn reads_cmdline() {
        let mut bytes = 2u32.to_le_bytes().to_vec();
        for arg in ["ls", "-l"] {
            bytes.extend_from_slice(&4u32.to_le_bytes());
            bytes.extend_from_slice(arg.as_bytes());
            bytes.resize(bytes.len() + 4 - arg.len(), 0);
        }
        assert_eq!(cmdline(&bytes, 0..bytes.len()).unwrap(), ["ls", "-l"]);
        bytes[0] = 3;
        let error = cmdline(&bytes, 0..bytes.len()).unwrap_err();
        assert_eq!(error.offset, bytes.len() as u64);
    }

    /// A finished recording reads back whole; each size, count and offset
    /// field set to a lie is refused with the field's byte offset, before
    /// anything is allocated from it.
    #[test]
    fn read_layout_checks_every_field() {
        let dir = std::env::temp_dir().join(format!("pfprof-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("l.data");
        let events = vec![
            EventDesc {
                attr: attr(1, 5),
                name: "minor-faults".into(),
                ids: vec![1, 2],
            },
            EventDesc {
                attr: attr(2, 190),
                name: "exceptions:page_fault_user".into(),
                ids: vec![5],
            },
        ];
        let mut w = PerfDataWriter::create(&path, events).unwrap();
        w.write_records(&record(16)).unwrap();
        let meta = RecordingMeta {
            command: vec!["app".into(), "arg".into()],
            ..RecordingMeta::default()
        };
        w.finish(&meta, "h", "r", 2).unwrap();
        let full = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();

        let layout = read_layout(&full).unwrap();
        let names: Vec<&str> = layout.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["minor-faults", "exceptions:page_fault_user"]);
        assert_eq!(layout.events[0].ids, [1, 2]);
        assert_eq!(
            layout.cmdline.as_deref(),
            Some(&["pfprof".to_string(), "app".into(), "arg".into()][..])
        );
        let json: RecordingMeta = serde_json::from_slice(&full[layout.meta.unwrap()]).unwrap();
        assert_eq!(json.command, ["app", "arg"]);

        let u64_at = |at: usize| u64::from_le_bytes(full[at..at + 8].try_into().unwrap());
        let (attr_size, attrs) = (u64_at(16) as usize, u64_at(24) as usize);
        let table = (u64_at(40) + u64_at(48)) as usize;
        // Table entries in bit order: HOSTNAME, OSRELEASE, NRCPUS, CMDLINE,
        // EVENT_DESC, pfprof's metadata.
        let section = |index: usize| u64_at(table + 16 * index) as usize;
        let (cmdline, event_desc) = (section(3), section(4));
        let cases: &[(&str, usize, &[u8], u64, &str)] = &[
            ("magic", 0, b"PERFILE3", 0, "not a perf.data file"),
            ("big-endian", 0, b"2ELIFREP", 0, "big-endian"),
            ("attr size small", 16, &8u64.to_le_bytes(), 16, "attr size"),
            (
                "attr size huge",
                16,
                &(1u64 << 40).to_le_bytes(),
                16,
                "attr size",
            ),
            (
                "attrs past the end",
                32,
                &u64::MAX.to_le_bytes(),
                24,
                "attr section",
            ),
            (
                "attrs not whole",
                32,
                &(attr_size as u64 + 1).to_le_bytes(),
                32,
                "multiple",
            ),
            (
                "data before the header end",
                40,
                &0u64.to_le_bytes(),
                40,
                "data section",
            ),
            (
                "data past the end",
                48,
                &u64::MAX.to_le_bytes(),
                48,
                "data section",
            ),
            (
                "ids huge",
                attrs + attr_size - 8,
                &(1u64 << 50).to_le_bytes(),
                (attrs + attr_size - 16) as u64,
                "event ids",
            ),
            (
                "feature section past the end",
                table + 8,
                &u64::MAX.to_le_bytes(),
                table as u64,
                "feature 3",
            ),
            (
                "EVENT_DESC count",
                event_desc,
                &u32::MAX.to_le_bytes(),
                event_desc as u64 + 4,
                "EVENT_DESC feature: 4294967295 events",
            ),
            (
                "EVENT_DESC attr size",
                event_desc + 4,
                &u32::MAX.to_le_bytes(),
                event_desc as u64 + 8,
                "EVENT_DESC feature: attr size",
            ),
            (
                "CMDLINE count",
                cmdline,
                &u32::MAX.to_le_bytes(),
                0,
                "CMDLINE feature",
            ),
        ];
        for &(name, at, value, offset, what) in cases {
            let mut bytes = full.clone();
            bytes[at..at + value.len()].copy_from_slice(value);
            let error = read_layout(&bytes).unwrap_err();
            assert!(error.what.contains(what), "{name}: {error}");
            if offset != 0 || at == 0 {
                assert_eq!(error.offset, offset, "{name}: {error}");
            }
        }
        // The table itself cut short.
        let error = read_layout(&full[..table + 20]).unwrap_err();
        assert!(error.what.contains("feature"), "{error}");
        assert!(read_layout(b"").is_err());
        assert!(read_layout(&full[..50]).is_err());
    }

    /// Sections added for perf take their place in bit order among
    /// pfprof's own; the file still reads back.
    #[test]
    fn added_features_in_bit_order() {
        let dir = std::env::temp_dir().join(format!("pfprof-features-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.data");
        let mut w = PerfDataWriter::create(&path, repair_events()).unwrap();
        w.write_records(&record(16)).unwrap();
        // Bit 5 (HEADER_VERSION): a body the reader does not parse.
        w.add_feature(5, b"version".to_vec());
        w.add_feature(1, b"old".to_vec());
        w.add_feature(1, b"tracing".to_vec());
        w.finish(&RecordingMeta::default(), "h", "r", 2).unwrap();
        let full = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let layout = read_layout(&full).unwrap();
        assert_eq!(layout.events.len(), 3);
        let u64_at = |at: usize| u64::from_le_bytes(full[at..at + 8].try_into().unwrap());
        let bits = u64_at(72);
        let want = [1, 3, 4, 5, 7, 11, 12];
        assert_eq!(bits, want.iter().map(|b| 1u64 << b).sum::<u64>());
        let table = (u64_at(40) + u64_at(48)) as usize;
        let section = |i: usize| {
            let (offset, size) = (u64_at(table + 16 * i) as usize, u64_at(table + 16 * i + 8));
            &full[offset..offset + size as usize]
        };
        assert_eq!(section(0), b"tracing");
        assert_eq!(section(3), b"version");
    }

    /// A recording cut anywhere inside its data keeps exactly its complete
    /// records, gets an EVENT_DESC naming pfprof's events, and is readable.
    #[test]
    fn repair_keeps_complete_records() {
        let dir = std::env::temp_dir().join(format!("pfprof-repair-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.data");
        let mut w = PerfDataWriter::create(&path, repair_events()).unwrap();
        for len in [16, 24, 32] {
            w.write_records(&record(len)).unwrap();
        }
        w.finish(&RecordingMeta::default(), "h", "r", 2).unwrap();
        let full = std::fs::read(&path).unwrap();
        let facts = HeaderFacts::parse(&full).unwrap();
        assert!(facts.finished());
        let data_start = facts.data.0 as usize;
        for (cut, kept) in [
            (data_start + 72, 72),
            (data_start + 71, 40),
            (data_start + 16, 16),
            (data_start + 3, 0),
        ] {
            let (image, data_bytes) = repair(&full[..cut]).unwrap();
            assert_eq!(data_bytes, kept, "cut at +{}", cut - data_start);
            let reader =
                linux_perf_data::PerfFileReader::parse_file(std::io::Cursor::new(image)).unwrap();
            let names: Vec<_> = reader
                .perf_file
                .event_attributes()
                .iter()
                .map(|a| a.name().unwrap().to_string())
                .collect();
            assert_eq!(
                names,
                ["minor-faults", "major-faults", "exceptions:page_fault_user"]
            );
            assert_eq!(reader.perf_file.event_attributes()[2].ids(), [5, 6]);
        }
        // A write error: salvage keeps what reached the file (the checkpoint
        // flushed it), drops the buffer, and the result reads like a
        // recording whose writer was killed.
        let path = dir.join("stopped.data");
        let mut w = PerfDataWriter::create(&path, repair_events()).unwrap();
        w.write_records(&record(16)).unwrap();
        w.checkpoint().unwrap();
        w.write_records(&record(24)).unwrap();
        assert_eq!(w.salvage().unwrap(), 16);
        assert!(w.write_records(&record(8)).is_err(), "stopped");
        let stopped = std::fs::read(&path).unwrap();
        let facts = HeaderFacts::parse(&stopped).unwrap();
        assert!(!facts.finished());
        assert_eq!(facts.data.1, 16);
        assert_eq!(stopped.len() as u64, facts.data.0 + 16);
        assert_eq!(repair(&stopped).unwrap().1, 16);
        assert!(
            repair(&full[..50]).is_none(),
            "a cut header cannot be repaired"
        );
        assert!(repair(b"not a perf file").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Feature bits land in their word and bit, are listed ascending, and
    /// a bit past 255 has no place (ignored, never a panic).
    #[test]
    fn feature_bitmap() {
        let mut f = Features::default();
        assert!(f.is_empty());
        for bit in [
            PFPROF_META_FEATURE,
            HEADER_EVENT_DESC,
            0,
            255,
            256,
            u32::MAX,
        ] {
            f.set(bit);
        }
        assert_eq!(f.0, [1 | 1 << 12, 0, 0, 1 << 8 | 1 << 63]);
        assert_eq!(f.bits().collect::<Vec<_>>(), [0, 12, 200, 255]);
        assert!(f.has(200) && !f.has(201) && !f.has(256) && !f.has(u32::MAX));
        assert!(!f.is_empty());
    }

    /// The header's fields are written where they are read, and nothing
    /// else of the header is touched.
    #[test]
    fn header_fields_round_trip() {
        let mut features = Features::default();
        features.set(HEADER_EVENT_DESC);
        let facts = HeaderFacts {
            attr_size: 136,
            attrs: (104, 408),
            data: (600, 1 << 40),
            features,
        };
        let mut header = vec![0xeeu8; HEADER_SIZE as usize];
        header[..8].copy_from_slice(MAGIC);
        facts.write_into(&mut header);
        let back = HeaderFacts::parse(&header).unwrap();
        assert_eq!(
            (back.attr_size, back.attrs, back.data, back.features),
            (facts.attr_size, facts.attrs, facts.data, facts.features)
        );
        assert!(back.finished());
        assert!(header[8..16]
            .iter()
            .chain(&header[56..72])
            .all(|&b| b == 0xee));
        assert!(HeaderFacts::parse(&header[..HEADER_SIZE as usize - 1]).is_none());
    }

    /// EVENT_DESC as written reads back: attrs zero-padded to the common
    /// length, names and ids kept.
    #[test]
    fn event_desc_round_trip() {
        let mut events = repair_events();
        events[1].attr.truncate(64);
        events[2].ids.clear();
        let bytes = event_desc_section(&events, 128);
        let (back, offsets) = event_desc(&bytes, 0..bytes.len()).unwrap();
        assert_eq!(offsets[0], 8);
        for (want, got) in events.iter().zip(&back) {
            let mut attr = want.attr.clone();
            attr.resize(128, 0);
            assert_eq!(
                (&got.attr, &got.name, &got.ids),
                (&attr, &want.name, &want.ids)
            );
        }
        assert_eq!(back.len(), 3);
    }

    /// A repaired recording names pfprof's events from their attrs: the
    /// fault events by config, the tracepoints by order (a third one by its
    /// id), anything else as the main-entry uprobe.
    #[test]
    fn repair_names_events_from_attrs() {
        let dir = std::env::temp_dir().join(format!("pfprof-repair-names-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("n.data");
        let unnamed = |attr: Vec<u8>| EventDesc {
            attr,
            name: String::new(),
            ids: vec![],
        };
        let events = vec![
            unnamed(attr(1, 6)),
            unnamed(attr(2, 190)),
            unnamed(attr(1, 5)),
            unnamed(attr(2, 189)),
            unnamed(attr(2, 188)),
            unnamed(attr(9, 0)),
        ];
        let mut w = PerfDataWriter::create(&path, events).unwrap();
        w.write_records(&record(16)).unwrap();
        w.checkpoint().unwrap();
        w.salvage().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let (image, kept) = repair(&bytes).unwrap();
        assert_eq!(kept, 16);
        let names: Vec<String> = read_layout(&image)
            .unwrap()
            .events
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(
            names,
            [
                "major-faults",
                "exceptions:page_fault_user",
                "minor-faults",
                "exceptions:page_fault_kernel",
                "tracepoint:188",
                "pfprof:main_entry"
            ]
        );
    }

    /// Repair checks the attrs as the reader does: an attr section that is
    /// not whole attrs, or an id array that is not whole ids, is refused
    /// (the image would not read either).
    #[test]
    fn repair_checks_attrs_as_the_reader() {
        let dir = std::env::temp_dir().join(format!("pfprof-repair-attrs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.data");
        let mut w = PerfDataWriter::create(&path, repair_events()).unwrap();
        w.write_records(&record(16)).unwrap();
        w.checkpoint().unwrap();
        w.salvage().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(repair(&bytes).is_some());
        let facts = HeaderFacts::parse(&bytes).unwrap();
        let mut ragged = bytes.clone();
        ragged[AT_ATTRS + 8..AT_ATTRS + 16].copy_from_slice(&(facts.attrs.1 - 1).to_le_bytes());
        assert!(read_layout(&ragged).is_err());
        assert!(repair(&ragged).is_none(), "attrs not whole");
        let mut odd_ids = bytes;
        let ids_size_at = (facts.attrs.0 + facts.attr_size - 8) as usize;
        odd_ids[ids_size_at..ids_size_at + 8].copy_from_slice(&15u64.to_le_bytes());
        assert!(read_layout(&odd_ids).is_err());
        assert!(repair(&odd_ids).is_none(), "ids not whole");
    }
}

#[cfg(test)]
mod build_id_tests {
    use super::*;

    /// One `BUILD_ID` entry as perf writes it: `misc` with or without the
    /// size flag, the id padded to 20 bytes, the path NUL-padded to 8.
    fn entry(misc: u16, id: &[u8], path: &str) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&(-1i32).to_le_bytes());
        let mut padded = id.to_vec();
        padded.resize(20, 0);
        body.extend_from_slice(&padded);
        body.extend_from_slice(&[id.len() as u8, 0, 0, 0]);
        body.extend_from_slice(path.as_bytes());
        body.resize((body.len() + 1).next_multiple_of(8), 0);
        let mut out = Vec::new();
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&misc.to_le_bytes());
        out.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Entries with and without perf's size flag, several in a row, and
    /// sizes that lie.
    #[test]
    fn build_id_feature() {
        let id20: Vec<u8> = (1..=20).collect();
        let id16: Vec<u8> = (1..=16).collect();
        let two = [
            entry(0, &id20, "/usr/bin/a"),
            entry(MISC_BUILD_ID_SIZE, &id16, "/b"),
        ]
        .concat();
        let mut short = entry(0, &id20, "/a");
        short[6..8].copy_from_slice(&20u16.to_le_bytes());
        let mut long = entry(0, &id20, "/a");
        long[6..8].copy_from_slice(&4000u16.to_le_bytes());
        type Case = (&'static str, Vec<u8>, Result<Vec<PathBuildId>, ()>);
        let cases: Vec<Case> = vec![
            ("empty", Vec::new(), Ok(vec![])),
            (
                "no size flag: 20 bytes",
                entry(0, &id20, "/usr/bin/a"),
                Ok(vec![(b"/usr/bin/a".to_vec(), id20.clone())]),
            ),
            (
                "size flag: 16 bytes",
                entry(MISC_BUILD_ID_SIZE, &id16, "/b"),
                Ok(vec![(b"/b".to_vec(), id16.clone())]),
            ),
            (
                "two entries",
                two,
                Ok(vec![
                    (b"/usr/bin/a".to_vec(), id20.clone()),
                    (b"/b".to_vec(), id16),
                ]),
            ),
            ("entry smaller than its fields", short, Err(())),
            ("entry past the section", long, Err(())),
        ];
        for (what, bytes, want) in cases {
            let got = build_ids(&bytes, 0..bytes.len()).map_err(|_| ());
            assert_eq!(got, want, "{what}");
        }
    }

    /// Build-id entries: 36-byte header, name padded to 64, the id's size
    /// given; ids perf cannot hold are left out.
    #[test]
    fn build_id_table() {
        let entries = vec![
            BuildIdEntry {
                kernel: true,
                build_id: vec![0xab; 20],
                path: "[kernel.kallsyms]".into(),
            },
            BuildIdEntry {
                kernel: false,
                build_id: vec![1, 2, 3, 4, 5, 6, 7, 8],
                path: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            },
            BuildIdEntry {
                kernel: false,
                build_id: vec![7; 64],
                path: "/too/long/an/id".into(),
            },
            BuildIdEntry {
                kernel: false,
                build_id: vec![],
                path: "/no/id".into(),
            },
        ];
        let bytes = build_id_section(&entries);
        assert_eq!(bytes.len(), 2 * (36 + 64));
        assert_eq!(
            &bytes[4..6],
            (MISC_BUILD_ID_SIZE | MISC_KERNEL).to_le_bytes()
        );
        assert_eq!(&bytes[6..8], 100u16.to_le_bytes());
        assert_eq!(&bytes[8..12], (-1i32).to_le_bytes());
        assert_eq!(bytes[32], 20);
        // Read back (the kernel flag is perf's to use; the reader keeps
        // path and id).
        let read = build_ids(&bytes, 0..bytes.len()).unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = entries[..2]
            .iter()
            .map(|e| (e.path.clone().into_bytes(), e.build_id.clone()))
            .collect();
        assert_eq!(read, want);
        for cut in [1, 35, 99, 101, 199] {
            let got = build_ids(&bytes[..cut], 0..cut);
            assert!(got.is_err(), "cut at {cut}");
        }
    }
}
