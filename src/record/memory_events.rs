//! The BPF collector's memory events (`record --resident`; `on_rss_stat`
//! and the syscalls' programs in fault.bpf.c): where the counters they
//! read lie on this kernel, their programs attached and moved
//! ([`MemoryWatch`]), their records' parsing, and the tracepoints' records
//! pfprof writes for them.

use std::io;
use std::os::fd::OwnedFd;

use perf_event_open_sys::bindings as b;

use crate::format::events::own::{self, SampleId};
use crate::format::events::{le_u32, le_u64};
use crate::sys::{bpf as sysbpf, procfs};

use super::btf;

/// `RSS_MAGIC` in fault.bpf.c: the first word of an `rss_stat` record.
pub(super) const RSS_MAGIC: u32 = 0x7066_7231;
/// [`RSS_MAGIC`] as a record's first bytes.
const RSS_MAGIC_BYTES: [u8; 4] = RSS_MAGIC.to_le_bytes();
/// `SYSCALL_MAGIC` in fault.bpf.c: the first word of a syscall's record.
pub(super) const SYSCALL_MAGIC: u32 = 0x7066_7331;
/// [`SYSCALL_MAGIC`] as a record's first bytes.
const SYSCALL_MAGIC_BYTES: [u8; 4] = SYSCALL_MAGIC.to_le_bytes();

/// The builds of `on_rss_stat` (fault.bpf.c's `RSS_STAT_PROGRAM`): the CPU
/// ids whose parts of a counter each sums at most. The verifier walks each
/// turn of the sum's loop (40 ms of the kernel's CPU for 256, 1.5 for 8),
/// so the loader takes the smallest that covers the machine.
pub(super) const RSS_STAT_BUILDS: [u32; 3] = [8, 64, 256];

/// CPU ids whose parts of a counter `on_rss_stat` sums at most: beyond,
/// its counts would be short, so the tracepoint's event is opened instead.
pub(super) const RSS_MAX_CPUS: u32 = RSS_STAT_BUILDS[RSS_STAT_BUILDS.len() - 1];

/// The section of the `on_rss_stat` build for a machine of `cpu_ids`
/// possible CPU ids (the largest when they are not known).
pub(super) fn rss_stat_section(cpu_ids: Option<u32>) -> String {
    let cpu_ids = cpu_ids.unwrap_or(RSS_MAX_CPUS);
    let build = RSS_STAT_BUILDS
        .into_iter()
        .find(|&build| build >= cpu_ids)
        .unwrap_or(RSS_MAX_CPUS);
    format!("raw_tracepoint/rss_stat/{build}")
}

/// Whether a collector's record is a memory event's (`rss_stat`, a
/// syscall), not a fault's.
pub(super) fn is_memory_record(raw: &[u8]) -> bool {
    let magic = raw.get(..4);
    magic == Some(&RSS_MAGIC_BYTES) || magic == Some(&SYSCALL_MAGIC_BYTES)
}

/// Appends the tracepoint's record for a memory event's record `raw` of
/// the collector's, as `events`' (each its id and its tracepoint's id, in
/// the order of `MEMORY_CALLS`); false when `raw` is not one.
pub(super) fn write_tracepoint_record(
    raw: &[u8],
    events: &[(u64, u16); 6],
    sample_id: SampleId,
    out: &mut Vec<u8>,
) -> bool {
    if let Some(stat) = RssStat::parse(raw) {
        let (id, tracepoint) = events[5];
        own::RssStatRecord {
            sample_id: SampleId { id, ..sample_id },
            tracepoint,
            member: stat.member,
            bytes: stat.pages.saturating_mul(4096),
            curr: stat.curr,
        }
        .write(out);
    } else if let Some(call) = SyscallRecord::parse(raw) {
        // munmap's two arguments, madvise's three, mremap's five; an
        // exit's result.
        let args = [2, 3, 5, 1, 1][call.call];
        let (id, tracepoint) = events[call.call];
        own::SyscallTracepointRecord {
            sample_id: SampleId { id, ..sample_id },
            tracepoint,
            nr: call.nr,
            args: &call.args[..args],
        }
        .write(out);
    } else {
        return false;
    }
    true
}

/// Where `on_rss_stat` finds a process's counters on this kernel (`struct
/// rss_config` in fault.bpf.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RssLayout {
    task_mm: u32,
    mm_rss_stat: u32,
    counter_size: u32,
    counter_count: u32,
    counter_counters: u32,
    cpus: u32,
    array_pptrs: u32,
    mm_users: u32,
}

impl RssLayout {
    /// From the kernel's BTF and its CPU ids.
    pub(super) fn of_running_kernel() -> Result<RssLayout, String> {
        let bytes = btf::VmlinuxBytes::load().map_err(|e| format!("{}: {e}", btf::VMLINUX))?;
        let types = btf::Btf::parse(&bytes).map_err(|e| e.to_string())?;
        let offset = |s: &str, m: &str| types.member_offset(s, m).map_err(|e| e.to_string());
        Ok(RssLayout {
            task_mm: offset("task_struct", "mm")?,
            mm_rss_stat: offset("mm_struct", "rss_stat")?,
            counter_size: (types.struct_size("percpu_counter")).map_err(|e| e.to_string())?,
            counter_count: offset("percpu_counter", "count")?,
            counter_counters: offset("percpu_counter", "counters")?,
            cpus: procfs::possible_cpu_ids()
                .filter(|&cpus| cpus <= RSS_MAX_CPUS)
                .ok_or("the possible CPUs are not known, or more than on_rss_stat sums")?,
            array_pptrs: offset("bpf_array", "pptrs")?,
            mm_users: offset("mm_struct", "mm_users")?,
        })
    }

    /// `rss_config` turned off (its first word, `on`, 0).
    pub(super) const OFF: [u8; 40] = [0; 40];

    /// `rss_config`'s value: on, with anonymous pages' counts (`anon`).
    pub(super) fn config_value(&self, anon: bool) -> Vec<u8> {
        let words = [
            1,
            u32::from(anon),
            self.task_mm,
            self.mm_rss_stat,
            self.counter_size,
            self.counter_count,
            self.counter_counters,
            self.cpus,
            self.array_pptrs,
            self.mm_users,
        ];
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

/// The memory programs attached (`FaultCollector::watch_memory` in bpf.rs). The
/// syscalls' records come first from the raw tracepoints on every syscall,
/// whose closing costs nothing; [`MemoryWatch::move_to_events`] moves them
/// to the five syscalls' own tracepoints, which cost the machine's other
/// syscalls a third as much, but whose closing waits for RCU grace periods
/// (0.3 s): worth it once a recording has run a while.
pub struct MemoryWatch {
    /// `on_rss_stat`'s and the raw tracepoints' attachments.
    links: Vec<OwnedFd>,
    /// The syscalls' tracepoints' events and attachments, once moved.
    events: Vec<OwnedFd>,
    /// Whether [`MemoryWatch::move_to_events`] was called.
    tried: bool,
    /// `rss_config`, turned off at the end.
    config: OwnedFd,
    /// `rss_mode`: which programs write the syscalls' records.
    mode: OwnedFd,
    /// The five programs, and the ids of their tracepoints.
    programs: Vec<(OwnedFd, u64)>,
}

impl MemoryWatch {
    /// The watch of `links` (`on_rss_stat`'s, then the raw tracepoints'),
    /// the maps `rss_config` (`config`) and `rss_mode` (`mode`), and the
    /// syscalls' tracepoints' programs with their tracepoints' ids.
    pub(super) fn new(
        links: Vec<OwnedFd>,
        (config, mode): (OwnedFd, OwnedFd),
        programs: Vec<(OwnedFd, u64)>,
    ) -> MemoryWatch {
        MemoryWatch {
            links,
            events: Vec::new(),
            tried: false,
            config,
            mode,
            programs,
        }
    }

    /// Moves the syscalls' records to the programs on their own
    /// tracepoints (see [`MemoryWatch`]); on failure they stay where they
    /// were. Both are attached while the config says which programs write,
    /// so no record is lost: the raw tracepoint's program, attached first,
    /// runs first at a syscall, and a syscall the change falls between the
    /// two programs of is written twice, which the ledger takes as once
    /// (its removals and a brk's or mremap's result are idempotent).
    pub fn move_to_events(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.tried, true) {
            return Ok(());
        }
        let paths = crate::format::records::MEMORY_TRACEPOINT_PATHS;
        let mut events = Vec::new();
        for ((prog, id), path) in self.programs.iter().zip(paths) {
            // One event of the machine (all tasks, one CPU): its program
            // runs at every hit of the tracepoint, on every CPU. A
            // counting event: the program lets the hit through (others'
            // events on the tracepoint record it), and this one only
            // adds to its count.
            let mut attr = crate::sys::new_attr();
            attr.type_ = b::PERF_TYPE_TRACEPOINT;
            attr.config = *id;
            attr.__bindgen_anon_1.sample_period = 0;
            attr.sample_type = 0;
            let link = crate::sys::perf_event_open(&attr, -1, 0)
                .and_then(|event| Ok([sysbpf::link_to_event(&event, prog)?, event]));
            events.extend(link.map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?);
        }
        // `rss_mode` alone: `rss_config`'s `anon`, which the programs
        // set when a process asks for huge pages, stays as they left it.
        sysbpf::map_update(&self.mode, &0u32.to_le_bytes(), &1u32.to_le_bytes())?;
        self.events = events;
        // The raw tracepoints' (after `on_rss_stat`'s): they return at once.
        self.links.truncate(1);
        Ok(())
    }

    /// Whether [`MemoryWatch::move_to_events`] was called (once is enough:
    /// refused, the raw tracepoints stay).
    pub fn tried_events(&self) -> bool {
        self.tried
    }

    /// How many attachments are open: `on_rss_stat`'s and the raw
    /// tracepoints', and the syscalls' tracepoints' events and theirs.
    #[cfg(test)]
    pub(super) fn attached(&self) -> (usize, usize) {
        (self.links.len(), self.events.len())
    }

    /// Turns the programs off, then closes their attachments: on a thread
    /// of its own when the syscalls' tracepoints' events must close, which
    /// the analysis need not wait for.
    pub fn stop(self) {
        let _ = sysbpf::map_update(&self.config, &0u32.to_le_bytes(), &RssLayout::OFF);
        drop(self.links);
        if self.events.is_empty() {
            return;
        }
        let events = self.events;
        // Refused a thread, the closure and its events are dropped here.
        let _ = std::thread::Builder::new()
            .name("pfprof-detach".into())
            .spawn(move || drop(events));
    }
}

/// An `rss_stat` record of the collector's `on_rss_stat`: counter `member`
/// (0 file, 1 anonymous, 3 shared memory) of the record's process holds
/// `pages` now, changed by its own task (`curr`) or by another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RssStat {
    /// `MM_FILEPAGES` and so on.
    pub member: u32,
    /// The counter's value.
    pub pages: u64,
    /// Whether the process's own task changed it.
    pub curr: bool,
}

impl RssStat {
    /// Parses a record (a bpf-output sample's raw data); None when it is
    /// not an `rss_stat` record or is cut short.
    pub(super) fn parse(raw: &[u8]) -> Option<RssStat> {
        (le_u32(raw, 0)? == RSS_MAGIC).then_some(())?;
        Some(RssStat {
            member: le_u32(raw, 4)?,
            pages: le_u64(raw, 8)?,
            curr: le_u32(raw, 16)? != 0,
        })
    }
}

/// A syscall's record of the collector's `on_sys_enter` or `on_sys_exit`:
/// which of [`crate::format::records::MEMORY_CALLS`], its number, and its
/// arguments (entries) or its result (exits, in `args[0]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SyscallRecord {
    /// The index in `MEMORY_CALLS` (0-4).
    pub call: usize,
    /// The syscall's number.
    pub nr: u32,
    /// Its arguments, or its result.
    pub args: [u64; 5],
}

impl SyscallRecord {
    /// Parses a record (a bpf-output sample's raw data); None when it is
    /// not a syscall's record, names no syscall, or is cut short.
    pub(super) fn parse(raw: &[u8]) -> Option<SyscallRecord> {
        (le_u32(raw, 0)? == SYSCALL_MAGIC).then_some(())?;
        let call = le_u32(raw, 4)? as usize;
        let arg = |i: usize| le_u64(raw, 12 + 8 * i);
        (call < 5).then_some(SyscallRecord {
            call,
            nr: le_u32(raw, 8)?,
            args: [arg(0)?, arg(1)?, arg(2)?, arg(3)?, arg(4)?],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest build that sums every CPU id; the largest when the
    /// ids are not known or more than any sums.
    #[test]
    fn rss_stat_build_covers_the_cpus() {
        let build = |ids| {
            rss_stat_section(ids)
                .rsplit('/')
                .next()
                .unwrap()
                .to_string()
        };
        assert_eq!(build(Some(2)), "8");
        assert_eq!(build(Some(8)), "8");
        assert_eq!(build(Some(9)), "64");
        assert_eq!(build(Some(256)), "256");
        assert_eq!(build(Some(4096)), "256");
        assert_eq!(build(None), "256");
    }

    /// `on_rss_stat`'s records: magic, member, pages, curr; a fault's
    /// record or a short one is not one.
    #[test]
    fn parses_rss_stat_records() {
        let mut raw = RSS_MAGIC_BYTES.to_vec();
        raw.extend_from_slice(&3u32.to_le_bytes());
        raw.extend_from_slice(&(1u64 << 33).to_le_bytes());
        raw.extend_from_slice(&1u32.to_le_bytes());
        let stat = RssStat::parse(&raw).unwrap();
        assert_eq!((stat.member, stat.pages, stat.curr), (3, 1 << 33, true));
        raw[16] = 0;
        assert!(!RssStat::parse(&raw).unwrap().curr);
        assert!(RssStat::parse(&raw[..19]).is_none());
        assert!(RssStat::parse(b"pfb3\0\0\0\0\0\0\0\0\0\0\0\0").is_none());
        let mut raw = SYSCALL_MAGIC_BYTES.to_vec();
        for word in [2u32, 25] {
            raw.extend_from_slice(&word.to_le_bytes());
        }
        for arg in 1..=5u64 {
            raw.extend_from_slice(&arg.to_le_bytes());
        }
        let call = SyscallRecord::parse(&raw).unwrap();
        assert_eq!((call.call, call.nr, call.args), (2, 25, [1, 2, 3, 4, 5]));
        assert!(SyscallRecord::parse(&raw[..raw.len() - 1]).is_none());
        raw[4] = 5;
        assert!(SyscallRecord::parse(&raw).is_none());
    }

    /// The running kernel's layout of the counters `on_rss_stat` reads.
    #[test]
    fn rss_layout_of_the_running_kernel() {
        if !std::path::Path::new(btf::VMLINUX).exists() {
            return;
        }
        let layout = RssLayout::of_running_kernel().unwrap();
        assert!(layout.mm_rss_stat > 0 && layout.task_mm > 0 && layout.array_pptrs > 0);
        assert!(layout.counter_counters > layout.counter_count);
        assert_eq!(layout.config_value(true).len(), 4 * 10);
        assert_eq!(RssLayout::OFF.len(), 4 * 10);
    }
}
