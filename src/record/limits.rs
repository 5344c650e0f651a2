//! The sizes and limits a recording needs: its rings (`--mmap-pages` and
//! the defaults), locked memory and open files, and the one-line errors
//! that say how to raise them.

use std::io;

use anyhow::{Context, Result};

use crate::error::{exit, CodedError};
use crate::format::call_graph::CallGraph;
use crate::sys::{self, procfs};

/// Largest `--mmap-pages`: 1 GiB per CPU (the wake-up watermark, a quarter
/// of the ring, must fit in 32 bits, and larger rings only fail later).
pub const MAX_MMAP_PAGES: usize = 1 << 18;

/// Parses `--mmap-pages`: 1..=[`MAX_MMAP_PAGES`], rounded up to a power of
/// two (the kernel maps only powers of two).
pub fn parse_mmap_pages(text: &str) -> std::result::Result<usize, String> {
    let pages: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a number of 4 KiB pages, not {text:?}"))?;
    if pages == 0 {
        return Err("must be at least 1 page".into());
    }
    if pages > MAX_MMAP_PAGES {
        return Err(format!(
            "at most {MAX_MMAP_PAGES} pages (1 GiB per CPU), not {pages}"
        ));
    }
    Ok(pages.next_power_of_two())
}

/// The smallest ring the default size shrinks to: room for four samples of
/// the largest kind (a dwarf sample carries its stack copy), so that at
/// least a slow program is recorded whole.
pub(super) fn min_ring_pages(call_graph: CallGraph) -> usize {
    let sample_bytes = match call_graph {
        CallGraph::Dwarf { stack_bytes } => stack_bytes as usize + 1024,
        CallGraph::Fp | CallGraph::None => 2048,
    };
    (4 * sample_bytes).div_ceil(4096).next_power_of_two().max(8)
}

/// Data pages of each CPU's ring buffer when `--mmap-pages` is not given:
/// 16 MiB; in dwarf mode 32 MiB through the BPF collector (`collector`),
/// else [`dwarf_ring_pages`].
pub fn default_mmap_pages(call_graph: CallGraph, collector: bool) -> usize {
    match call_graph {
        CallGraph::Dwarf { .. } if collector => PAGES_32_MIB,
        CallGraph::Dwarf { .. } => {
            dwarf_ring_pages(procfs::online_cpus().len(), procfs::mem_available_bytes())
        }
        CallGraph::Fp | CallGraph::None => PAGES_16_MIB,
    }
}

pub(super) const PAGES_16_MIB: usize = 4096;

/// The perf rings' pages beside the collector's rings of `collector_pages`:
/// they carry the side-band records only (mappings, processes), a small
/// part of a recording, so a sixteenth, at least 1 MiB.
pub(super) fn side_band_pages(collector_pages: usize) -> usize {
    (collector_pages / 16).max(256)
}
/// Each CPU's share of the collector's rings. Its records hold the stack
/// there is (4 KiB for a small C program, where perf reserves 32 KiB), so
/// chromium's start-up (70,000 faults in 2 s, 16 processes) lost nothing
/// in 10 of 10 runs with one 64 MiB ring for both CPUs, idle and beside a
/// spinner. A BPF ring's pages count in pfprof's RSS, which a long
/// system-wide run must keep under 256 MiB: under the busy host's mix the
/// drain keeps a 64 MiB ring at most 25 MB full (7 runs of 45 s, 0 lost).
/// Mapping 256 MiB rings cost a short run 0.35 s of system time (the
/// kernel zeroes them), 64 MiB 0.03 s.
pub(super) const PAGES_32_MIB: usize = 8192;

/// Dwarf mode's rings: every sample reserves its whole stack copy (32 KiB)
/// in the ring, whatever the kernel copies, so a ring holds few samples and
/// start-up bursts need room. 256 MiB per CPU, but at most 2 GiB in all and
/// a sixteenth of the available memory, a power of two, at least 16 MiB.
/// Measured on chromium's start-up (70,000 faults, 16 processes, deep
/// stacks): 64 and 128 MiB per CPU lost 0.2-3.7% of the records in 3 of 3
/// runs each, 256 MiB none in 3 of 3; the larger rings add 60 ms to the
/// start of a recording.
fn dwarf_ring_pages(cpus: usize, mem_available: Option<u64>) -> usize {
    const PAGES_256_MIB: usize = 65_536;
    const TOTAL_PAGES: usize = 524_288; // 2 GiB
    let cpus = cpus.max(1);
    let by_memory = mem_available.map_or(usize::MAX, |bytes| {
        usize::try_from(bytes / 16 / 4096).unwrap_or(usize::MAX) / cpus
    });
    let pages = PAGES_256_MIB.min(TOTAL_PAGES / cpus).min(by_memory);
    // The largest power of two that fits.
    let pages = if pages == 0 { 0 } else { 1 << pages.ilog2() };
    pages.max(PAGES_16_MIB)
}

/// File descriptors pfprof holds while recording besides those open now and
/// its events: the recording, /proc and tracefs reads, ELF files the
/// unwinder reads.
pub(super) const SPARE_FDS: u64 = 32;

/// Makes room for `events` fds: raises the soft `RLIMIT_NOFILE` to the hard
/// one when the soft one is too low (the command was forked before and keeps
/// the limit it was given); when the hard one is too low as well, says how
/// many are needed and how to raise it (exit 2).
pub(super) fn ensure_open_files(events: u64, what: &str) -> Result<()> {
    // read_dir holds one more fd while it lists: counted as a spare one.
    let open_now = procfs::open_fds().unwrap_or(3);
    let needed = open_now + events + SPARE_FDS;
    let (soft, hard) = sys::get_limit(sys::Limit::OpenFiles).context("getrlimit failed")?;
    if needed <= soft {
        return Ok(());
    }
    // An unlimited hard limit cannot be the soft one (fs.nr_open caps it):
    // then just what is needed.
    if needed <= hard
        && sys::set_soft_limit(sys::Limit::OpenFiles, hard)
            .or_else(|_| sys::set_soft_limit(sys::Limit::OpenFiles, needed))
            .is_ok()
    {
        return Ok(());
    }
    Err(open_files_error(needed, what, soft, hard))
}

pub(super) fn open_files_error(needed: u64, what: &str, soft: u64, hard: u64) -> anyhow::Error {
    let show = |n: u64| {
        if n == u64::MAX {
            "unlimited".to_string()
        } else {
            n.to_string()
        }
    };
    CodedError::new(
        exit::CONFIG,
        format!(
            "pfprof needs about {needed} file descriptors ({what}, plus its own), but the open-file \
             limit is {} (hard limit {}); raise it with `ulimit -n {needed}` (above the hard limit: \
             `ulimit -Hn {needed}` as root, or `nofile` in /etc/security/limits.conf) and run pfprof \
             again",
            show(soft),
            show(hard)
        ),
    )
    .into()
}

/// The locked-memory figures that bound the ring buffers, for messages.
pub(super) fn memlock_figures(cpus: usize) -> String {
    let rlimit = match sys::get_limit(sys::Limit::LockedMemory) {
        Ok((soft, _)) if soft == u64::MAX => "unlimited".to_string(),
        Ok((soft, _)) => format!("{} KiB", soft / 1024),
        Err(_) => "unknown".to_string(),
    };
    let mlock_kb = procfs::kernel_setting("perf_event_mlock_kb")
        .map_or_else(|| "unknown".into(), |kib| format!("{kib} KiB"));
    format!(
        "RLIMIT_MEMLOCK is {rlimit}, kernel.perf_event_mlock_kb is {mlock_kb} (shared by pfprof's \
         {cpus} CPU rings and the user's other perf buffers)"
    )
}

/// How to lift the locked-memory limits for rings of `pages` pages.
pub(super) fn memlock_fix(pages: usize) -> String {
    format!(
        "raise them (`ulimit -l unlimited`, `sudo sysctl kernel.perf_event_mlock_kb={}`) or run pfprof \
         as root (CAP_IPC_LOCK lifts both)",
        (pages + 1) * 4
    )
}

/// A ring buffer of `pages` pages could not be mapped.
pub(super) fn ring_error(
    e: &io::Error,
    pages: usize,
    cpus: usize,
    explicit: bool,
) -> anyhow::Error {
    let size = crate::text::human_bytes(pages as u64 * 4096);
    let message = if e.raw_os_error() == Some(libc::EPERM) {
        let smaller = if explicit {
            ", or ask for a smaller --mmap-pages"
        } else {
            ""
        };
        format!(
            "cannot map a {size} ring buffer per CPU: the locked-memory limit refuses it ({e}); {}; {}{smaller}",
            memlock_figures(cpus),
            memlock_fix(pages)
        )
    } else {
        format!("cannot map a {size} ring buffer per CPU ({e}); try a smaller --mmap-pages")
    };
    CodedError::new(exit::CONFIG, message).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dwarf mode's default rings by CPUs and available memory.
    #[test]
    fn dwarf_ring_sizes() {
        const GIB: u64 = 1 << 30;
        let cases = [
            // (cpus, MemAvailable, pages per CPU)
            (2, Some(23 * GIB), 65_536),    // 256 MiB each
            (2, None, 65_536),              // unknown memory
            (16, Some(256 * GIB), 32_768),  // 2 GiB in all: 128 MiB each
            (64, Some(256 * GIB), 8_192),   // 32 MiB each
            (2, Some(4 * GIB), 32_768),     // 256 MiB in all: 128 MiB each
            (2, Some(GIB / 2), 4_096),      // never under 16 MiB
            (512, Some(1024 * GIB), 4_096), // 2 GiB / 512 = 4 MiB: 16 MiB
            (0, Some(23 * GIB), 65_536),    // no CPU count: as one
        ];
        for (cpus, mem, want) in cases {
            assert_eq!(dwarf_ring_pages(cpus, mem), want, "{cpus} CPUs, {mem:?}");
        }
    }

    /// `--mmap-pages`: 1..=MAX, rounded up to a power of two; the rest refused.
    #[test]
    fn mmap_pages_values() {
        for (text, want) in [
            ("1", Ok(1)),
            ("3", Ok(4)),
            ("4096", Ok(4096)),
            ("262144", Ok(262144)),
            ("0", Err(())),
            ("262145", Err(())),
            ("-1", Err(())),
            ("x", Err(())),
            ("", Err(())),
            ("99999999999999999999999", Err(())),
        ] {
            assert_eq!(parse_mmap_pages(text).map_err(|_| ()), want, "{text:?}");
        }
    }

    /// The smallest default ring holds four samples of the largest kind.
    #[test]
    fn smallest_rings() {
        for (call_graph, want) in [
            (CallGraph::Fp, 8),
            (CallGraph::None, 8),
            (CallGraph::Dwarf { stack_bytes: 8192 }, 16),
            (CallGraph::Dwarf { stack_bytes: 65528 }, 128),
        ] {
            assert_eq!(min_ring_pages(call_graph), want, "{call_graph:?}");
        }
    }
}
