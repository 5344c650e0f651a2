//! `record --stream`: one line per fault while recording,
//! `[000000.012] MAJOR 0x7f2c7b100000 libc.so.6 .text 12.4ms`
//! (seconds since start, class, address, target object, section, latency),
//! plus the code site with `--stream=site`; under `--fixed-ts` the time is the
//! fault's sequence number as milliseconds (`[000000.001]` for the first) and
//! there is no latency. The stream ends with
//! `Summary: major=12 minor=542 cow=3`, the faults of each class (printed or
//! dropped), the line page-fault analyzers end with.
//!
//! Lines go through a bounded channel to a printing thread that owns its own
//! symbolizer: when the terminal cannot keep up, lines are dropped from the
//! stream (and counted), never records from the recording.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;

use pfprof_symbolize::{KernelSymbols, Options, PerfMap, Symbolizer};
use rustc_hash::FxHashMap;

use crate::analysis::classify::{ClassCounts, FaultClass};
use crate::analysis::stacks::FrameKey;
use crate::analysis::{Classified, LiveAnalyzer, TargetKey};
use crate::format::jitmaps;
use crate::sys::vdso;
use crate::text::display_safe;
use crate::text::{human_ns, site_label};

/// What each line shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// Class, address, target, latency.
    Fault,
    /// The same, plus the code site.
    Site,
}

/// A file location to symbolize: path, build-id, file offset.
type Lookup = (String, Option<Vec<u8>>, u64);

/// The code site of a line, as report.json names it.
enum Site {
    /// Code in a file.
    Code(Lookup),
    /// JIT code, named from the process's perf map while it runs.
    Jit { pid: i32, avma: u64 },
    /// Kernel code (`--kernel`), named from kallsyms.
    Kernel(u64),
    /// `[execve]`, `[unknown]`.
    Placeholder(&'static str),
}

/// The perf maps of the processes streamed, read from `/tmp` as they grow.
#[derive(Default)]
struct JitNames {
    since: Option<std::time::SystemTime>,
    /// Per process its map and the map file's size when read.
    maps: FxHashMap<i32, (Option<PerfMap>, Option<u64>)>,
}

impl JitNames {
    /// The name of JIT code at `avma` in `pid`, reading the map again
    /// when a lookup misses and the file has grown since.
    fn name(&mut self, pid: i32, avma: u64) -> Option<String> {
        let since = self.since;
        let (map, size) = self.maps.entry(pid).or_insert((None, None));
        let found = |map: &Option<PerfMap>| map.as_ref()?.lookup(avma).map(str::to_string);
        if let Some(name) = found(map) {
            return Some(name);
        }
        let now = jitmaps::live_size(pid);
        if now.is_none() || now == *size {
            return None;
        }
        *size = now;
        *map = jitmaps::read_live(pid, since);
        found(map)
    }
}

/// One line, before symbolization.
struct Line {
    since_start_ns: u64,
    class: FaultClass,
    addr_avma: u64,
    /// The name of the target's object (empty for a target without one).
    object: String,
    section: Option<Lookup>,
    /// Where the fault landed: its label unless an object names it (the
    /// anonymous mapping after an object's data is its `.bss` only where
    /// the object's segments reach, as the report decides).
    target: TargetKey,
    latency_ns: Option<u64>,
    site: Option<Site>,
}

/// The streaming side of a recording.
pub struct Streamer {
    tx: Option<SyncSender<Line>>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
    kind: StreamKind,
    start_ns: u64,
    /// Lines dropped because the printer was behind.
    pub dropped: u64,
    /// Faults sent, by class, for the summary line.
    counts: ClassCounts,
}

use crate::text::short;

/// The time field: seconds since start (`000000.012`), or under
/// `--fixed-ts` the sequence number as milliseconds (`000000.001`).
fn stamp(seq: Option<u64>, since_start_ns: u64) -> String {
    match seq {
        Some(seq) => format!("{:06}.{:03}", seq / 1000, seq % 1000),
        None => format!("{:010.3}", since_start_ns as f64 / 1e9),
    }
}

fn print(rx: Receiver<Line>, fixed_ts: bool, since: std::time::SystemTime) -> std::io::Result<u64> {
    let mut jit = JitNames {
        since: Some(since),
        ..JitNames::default()
    };
    let mut kernel: Option<Option<KernelSymbols>> = None;
    let mut symbolizer = Symbolizer::new(Options::default());
    // `[vdso]` frames are named from pfprof's own vDSO, as the report
    // names them: the recording is of this kernel.
    vdso::add_own_image(&mut symbolizer);
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut seq = 0u64;
    loop {
        // Flush whenever the queue runs dry, so lines show up promptly.
        let line = match rx.try_recv() {
            Ok(line) => line,
            Err(_) => {
                out.flush()?;
                match rx.recv() {
                    Ok(line) => line,
                    Err(_) => break,
                }
            }
        };
        seq += 1;
        let stamp = stamp(fixed_ts.then_some(seq), line.since_start_ns);
        let data = line.section.and_then(|(path, id, off)| {
            symbolizer
                .data(Path::new(&path), id.as_deref(), &[off])
                .pop()?
                .ok()
        });
        let object = line.target.label(data.is_some()).unwrap_or(&line.object);
        let section = data.and_then(|d| d.section).unwrap_or_else(|| "-".into());
        // Names from the profiled world reach the terminal escaped.
        write!(
            out,
            "[{stamp}] {:<5} {:#014x} {} {}",
            line.class.name().to_ascii_uppercase(),
            line.addr_avma,
            display_safe(object),
            display_safe(&section)
        )?;
        if let (Some(ns), false) = (line.latency_ns, fixed_ts) {
            write!(out, " {}", human_ns(ns))?;
        }
        if let Some(site) = line.site {
            let site = match site {
                Site::Code((path, id, off)) => match symbolizer
                    .code(Path::new(&path), id.as_deref(), &[off])
                    .pop()
                {
                    Some(Ok(site)) => {
                        let f = &site.frames[0];
                        site_label(&f.function, f.file.as_deref(), f.line)
                    }
                    _ => format!("{}+{off:#x}", short(&path)),
                },
                Site::Jit { pid, avma } => jit
                    .name(pid, avma)
                    .unwrap_or_else(|| format!("[jit {avma:#x}]")),
                Site::Kernel(avma) => {
                    let kernel = kernel.get_or_insert_with(KernelSymbols::load);
                    match kernel.as_ref().and_then(|k| k.lookup(avma)) {
                        Some((name, _)) => format!("{name}_[k]"),
                        None => format!("{avma:#x}_[k]"),
                    }
                }
                Site::Placeholder(name) => name.to_string(),
            };
            write!(out, " {}", display_safe(&site))?;
        }
        writeln!(out)?;
    }
    out.flush()?;
    Ok(seq)
}

impl Streamer {
    /// Starts the printing thread.
    pub fn spawn(kind: StreamKind, fixed_ts: bool, start_ns: u64) -> Streamer {
        let (tx, rx) = sync_channel(16 * 1024);
        let since = std::time::SystemTime::now();
        let thread = std::thread::spawn(move || print(rx, fixed_ts, since));
        Streamer {
            tx: Some(tx),
            thread: Some(thread),
            kind,
            start_ns,
            dropped: 0,
            counts: ClassCounts::default(),
        }
    }

    /// Queues the line of a classified fault; drops it if the printer is behind.
    pub fn send(&mut self, fault: &Classified, analyzer: &LiveAnalyzer) {
        let lookup = |module, file_offset| {
            let m = analyzer.module(module);
            (m.path.clone(), m.build_id.clone(), file_offset)
        };
        let (object, section) = match fault.target {
            TargetKey::Module {
                module,
                file_offset,
                ..
            } => (
                short(&analyzer.module(module).path).to_string(),
                Some(lookup(module, file_offset)),
            ),
            TargetKey::Pseudo(module) => (analyzer.module(module).path.clone(), None),
            _ => (String::new(), None),
        };
        let site = match (self.kind, fault.leaf) {
            (StreamKind::Fault, _) | (_, None) => None,
            (StreamKind::Site, Some(leaf)) => Some(match leaf {
                FrameKey::Code {
                    module,
                    lookup_file_offset,
                } => Site::Code(lookup(module, lookup_file_offset)),
                FrameKey::Jit { pid, avma } => Site::Jit { pid, avma },
                FrameKey::Kernel { avma } => Site::Kernel(avma),
                FrameKey::Exec => Site::Placeholder("[execve]"),
                FrameKey::Unknown => Site::Placeholder("[unknown]"),
            }),
        };
        self.counts.add(fault.class, 1);
        let line = Line {
            since_start_ns: fault.time.saturating_sub(self.start_ns),
            class: fault.class,
            addr_avma: fault.addr_avma,
            object,
            section,
            target: fault.target,
            latency_ns: fault.latency_ns,
            site,
        };
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = tx.try_send(line) {
                self.dropped += 1;
            }
        }
    }

    /// Waits for the printer, then ends the stream with the summary line;
    /// returns the number of fault lines printed.
    pub fn finish(mut self) -> u64 {
        drop(self.tx.take());
        let printed = self
            .thread
            .take()
            .and_then(|t| t.join().ok())
            .and_then(Result::ok)
            .unwrap_or(0);
        // A closed stdout (`| head`) is not an error of the recording.
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", summary(self.counts)).and_then(|()| out.flush());
        printed
    }
}

/// `Summary: major=12 minor=542 cow=3` from counts by class.
fn summary(c: ClassCounts) -> String {
    format!("Summary: major={} minor={} cow={}", c.major, c.minor, c.cow)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The summary line's exact shape.
    #[test]
    fn summary_line() {
        let counts = ClassCounts {
            minor: 542,
            major: 12,
            cow: 3,
        };
        assert_eq!(summary(counts), "Summary: major=12 minor=542 cow=3");
        assert_eq!(
            summary(ClassCounts::default()),
            "Summary: major=0 minor=0 cow=0"
        );
    }

    /// Both kinds of stamp have the same shape; fixed ones count
    /// milliseconds by fault.
    #[test]
    fn stamps() {
        for (seq, ns, want) in [
            (Some(1), 5_000_000_000, "000000.001"),
            (Some(999), 0, "000000.999"),
            (Some(1000), 0, "000001.000"),
            (Some(1_234_567), 0, "001234.567"),
            (None, 12_000_000, "000000.012"),
            (None, 61_500_000_000, "000061.500"),
        ] {
            assert_eq!(stamp(seq, ns), want);
        }
    }
}
