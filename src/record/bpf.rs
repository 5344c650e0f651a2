//! The in-kernel collector (the default wherever BPF is permitted): a BPF
//! program (`fault.bpf.c`, compiled into the committed `fault.bpf.o`) writes
//! each fault as one compact record into a BPF ring buffer, one for every
//! [`CPUS_PER_RING`] CPUs, which pfprof drains beside its perf rings, in
//! every call-graph mode. Each
//! record is a perf sample record as the kernel would write one of a
//! bpf-output event ([`FaultCollector::output_attr`], id [`COLLECTOR_ID`]),
//! so the drain merges and reads it as one; writing it through a
//! bpf-output event cost 0.5 µs a fault more (the kernel prepares a perf
//! sample: 814 ns a run of the completion program against 317 ns, with
//! `kernel.bpf_stats_enabled`), which made the faulting host slower under
//! pfprof than under `perf record -g`.
//!
//! - At a fault's entry, a program on the `exceptions:page_fault_*`
//!   tracepoints keeps its error code, address and time per thread: a raw
//!   tracepoint program, attached once for the whole machine (programs on
//!   the tracepoints' perf events, the fallback, suppress their records;
//!   inherited by every child of a command, they cost each fork and exit
//!   about 90 ms on this machine's kernel: 50 runs of `true` from bash took
//!   5.6 s instead of 0.9 s). At its completion, a program on
//!   `minor-faults`/`major-faults` writes the fault with that error code and
//!   its time in the kernel, and suppresses the event's own sample. One
//!   record per fault where the kernel wrote two (three with the stack
//!   copy), and the pairing is the kernel's.
//! - The user call chain as the mode asks: (fp) a frame-pointer walk, the
//!   kernel's but for its last read at address 0, which cost a kernel page
//!   fault per record (0.9 µs of the completion's 1.4), or (dwarf) the
//!   stack from the stack pointer up, only the bytes that are there to
//!   copy: a `--call-graph dwarf` sample of perf's would reserve its whole
//!   stack copy (32 KiB by default) in the ring, so a 256 MiB ring held
//!   about 8,000 faults. A stack pfprof unwound once is
//!   remembered in the `unwound` map ([`FaultCollector::remember`]) with the
//!   stack words the unwinding read: when the same thread faults again with
//!   the same registers and those words unchanged, the record carries the
//!   chain found then and no stack (a loop touching pages, a `memset` over
//!   a new buffer: most of a fault storm). A copy ends at its thread's top
//!   in the `stack_tops` map ([`FaultCollector::set_stack_top`]), where the
//!   thread's chains stop reading.
//!
//! The loader is small on purpose: the object has one program per event,
//! legacy map definitions (the `maps` section), no BTF, no global data and
//! no calls, so loading is: create the maps, point each map load at its
//! map's fd, load.

use std::io;
use std::os::fd::OwnedFd;

use perf_event_open_sys::bindings as b;

use crate::format::events::own;
use crate::format::events::{le_u32, le_u64, le_u64s};
use crate::sys::{bpf as sysbpf, procfs, PerfEventAttr};
use crate::unwind::UserRegs;

use super::memory_events::{self, MemoryWatch};

mod load;
use super::ring::BpfRing;
use super::KernelCounts;
pub use load::CPUS_PER_RING;
use load::{
    create_maps, create_rings, fill_rings, load_programs, map_defs, shared_ring_bytes, Loader,
};

/// The compiled collector (see `build-bpf.sh`).
pub static OBJECT: &[u8] = include_bytes!("fault.bpf.o");

/// The most stack bytes a record carries (`MAX_STACK` in fault.bpf.c).
pub const MAX_STACK_BYTES: u32 = 61_440;

/// What an entry of the `unwound` map holds at most: stack words read
/// (`CACHE_WORDS`, as many as the unwinder notes), frames (`CACHE_FRAMES`).
pub const CACHE_WORDS: usize = crate::unwind::Reads::MAX_WORDS;
/// See [`CACHE_WORDS`].
pub const CACHE_FRAMES: usize = 64;
/// Entries of the `unwound` map (its `max_entries`).
pub const CACHE_ENTRIES: usize = 16_384;

/// `MAGIC` in fault.bpf.c: the first word of each record.
const MAGIC: u32 = 0x7066_6233;
const FLAG_MAJOR: u32 = 1;
const FLAG_KERNEL_MODE: u32 = 2;
const FLAG_ENTRY: u32 = 4;
const FLAG_ENTRY_KERNEL: u32 = 8;
const FLAG_CHAIN: u32 = 16;
const FLAG_CACHED: u32 = 32;
const FLAG_BOUNDED: u32 = 64;
const FLAG_PRESSED: u32 = 128;
/// Bytes of the record's fixed part (`struct fault`).
const FAULT_HEADER: usize = 128;
/// Bytes of a key and a value of `unwound` (`struct ukey`, `struct uvalue`).
const UKEY_BYTES: usize = 32;
const UVALUE_BYTES: usize = 16 + 2 * CACHE_WORDS + 8 * CACHE_WORDS + 8 * CACHE_FRAMES;

/// `BPF_MAP_TYPE_ARRAY`, `BPF_MAP_TYPE_PROG_ARRAY`,
/// `BPF_MAP_TYPE_ARRAY_OF_MAPS`, `BPF_MAP_TYPE_RINGBUF`.
const MAP_ARRAY: u32 = 2;
const MAP_PROG_ARRAY: u32 = 3;
const MAP_ARRAY_OF_MAPS: u32 = 12;
const MAP_RINGBUF: u32 = 27;

/// The counters of fault.bpf.c (`COUNT_*`), in the `counters` map.
const COUNTERS: usize = 8;
/// `COUNT_LOST`, `COUNT_LOST_MAJOR`, `COUNT_LOST_RSS`: records of minor
/// (COW included) and of major faults, and `rss_stat` records, that found
/// their ring full.
const COUNT_LOST: u32 = 3;
const COUNT_LOST_MAJOR: u32 = 4;
const COUNT_LOST_RSS: u32 = 5;
/// `COUNT_SEEN`, `COUNT_SEEN_MAJOR`: the faults the completion programs
/// ran for, minor and major.
const COUNT_SEEN: u32 = 6;
const COUNT_SEEN_MAJOR: u32 = 7;

/// The sample id of the collector's records (`COLLECTOR_ID` in
/// fault.bpf.c): no event of the kernel's, whose ids count up from 1.
pub const COLLECTOR_ID: u64 = 0xffff_ffff_fffe_7066;
/// The sample ids of the fault entries the collector pairs through raw
/// tracepoint programs, whose perf events are then never opened.
pub const ENTRY_USER_ID: u64 = COLLECTOR_ID + 1;
/// The sample id of kernel-mode fault entries (see [`ENTRY_USER_ID`]).
pub const ENTRY_KERNEL_ID: u64 = COLLECTOR_ID + 2;
/// The sample ids of the memory events' records the collector makes
/// (see [`FaultCollector::watch_memory`]), in the order of
/// [`crate::format::records::MEMORY_CALLS`]: the syscalls, `kmem:rss_stat`.
pub const MEMORY_IDS: [u64; 6] = [
    COLLECTOR_ID + 3,
    COLLECTOR_ID + 4,
    COLLECTOR_ID + 5,
    COLLECTOR_ID + 6,
    COLLECTOR_ID + 7,
    COLLECTOR_ID + 8,
];

/// `PROC_PID_INIT_INO`: the initial pid namespace's inode number.
const INIT_PIDNS_INO: u64 = 0xefff_fffc;

/// Why the collector could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    /// The embedded object is not what the loader expects.
    #[error("the BPF object is malformed: {0}")]
    Object(String),
    /// A map could not be created.
    #[error("cannot create BPF map {name}: {source}")]
    Map {
        /// The map.
        name: String,
        /// Why.
        source: io::Error,
    },
    /// The kernel refused a program.
    #[error("cannot load BPF program {name}: {source}")]
    Load {
        /// The program.
        name: String,
        /// Why.
        source: io::Error,
    },
}

impl BpfError {
    /// The kernel's error number, when the kernel refused.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            BpfError::Object(_) => None,
            BpfError::Map { source, .. } | BpfError::Load { source, .. } => source.raw_os_error(),
        }
    }
}

/// The user call chain a record carries (`MODE_*` in fault.bpf.c).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainMode {
    /// None.
    None,
    /// A frame-pointer walk, as the kernel's for perf.
    Fp,
    /// The stack, at most this many bytes of it (≤ [`MAX_STACK_BYTES`]),
    /// to unwind with its CFI.
    Dwarf {
        /// Bytes of stack to copy at most.
        stack_bytes: u32,
    },
}

/// What the collector is loaded for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// The user chain.
    pub chain: ChainMode,
    /// Add the kernel's call chain of faults taken in kernel mode.
    pub kernel_frames: bool,
    /// pfprof's own process (system-wide): its faults carry no chain.
    pub own_pid: Option<i32>,
    /// Every fault is sampled (`--period 1`): an entry its completion never
    /// followed is counted.
    pub every_fault: bool,
    /// Bytes of ring buffer per CPU (a ring is shared by up to
    /// [`CPUS_PER_RING`] CPUs and holds their shares): a power of two,
    /// whole pages.
    pub ring_bytes: u32,
    /// Load the memory events' programs (`record --resident`; see
    /// [`FaultCollector::watch_memory`]): the verifier's time is not spent
    /// on them otherwise.
    pub memory: bool,
}

/// The loaded collector: its programs and maps.
pub struct FaultCollector {
    /// The completion program, which the minor-faults events run.
    completion: OwnedFd,
    /// What the major-faults events run: it marks the fault major and
    /// jumps to the completion program.
    on_major: OwnedFd,
    /// The jump's table (entry 0: the completion program). The kernel
    /// empties it when its last descriptor closes.
    _jump: OwnedFd,
    /// Its attachments to the fault events (closed, they detach it).
    links: Vec<OwnedFd>,
    entry_user: OwnedFd,
    entry_kernel: OwnedFd,
    /// The same entry programs as raw tracepoint programs, when the kernel
    /// loads them.
    raw_entries: Option<(OwnedFd, OwnedFd)>,
    /// The memory events' programs, when the kernel loads them.
    memory: Option<MemoryPrograms>,
    /// `on_exec`'s attachment to `sched_process_exec` (dwarf mode).
    _exec_link: Option<OwnedFd>,
    /// The ring buffers, each with the CPUs that write it (online ones
    /// when loaded).
    rings: Vec<(Vec<i32>, OwnedFd)>,
    /// The `rings` map: CPU → its ring buffer.
    _rings_map: OwnedFd,
    /// Bytes of each ring: the CPUs' shares ([`shared_ring_bytes`]).
    ring_bytes: u32,
    config: OwnedFd,
    settings: Settings,
    unwound: OwnedFd,
    /// Per thread, where its stack copies end (see record/stack_tops.rs).
    stack_tops: OwnedFd,
    counters: OwnedFd,
    _scratch: OwnedFd,
    _entries: OwnedFd,
    /// Possible CPUs: the values a lookup of a per-CPU map returns.
    cpus: u32,
}

/// The programs of `record --resident`'s memory events.
struct MemoryPrograms {
    /// `on_rss_stat`.
    rss: OwnedFd,
    /// Its `rss_config` map (the syscalls' programs read it too).
    config: OwnedFd,
    /// `rss_mode`: which of the syscalls' programs write.
    mode: OwnedFd,
    /// `on_sys_enter`, `on_sys_exit`: the syscalls' records from the raw
    /// tracepoints on every syscall.
    raw: [OwnedFd; 2],
    /// The same from the five syscalls' own tracepoints, in the order of
    /// [`crate::format::records::MEMORY_TRACEPOINT_PATHS`].
    by_events: [OwnedFd; 5],
}

/// The number of CPU ids, for the maps indexed by CPU (1,024 when the
/// kernel does not say).
fn possible_cpus() -> u32 {
    procfs::possible_cpu_ids().unwrap_or(1024)
}

/// The `config` map's value (`struct config`).
fn config_value(settings: &Settings, entries: bool) -> Vec<u8> {
    let (mode, stack_bytes) = match settings.chain {
        ChainMode::None => (0u32, 0),
        ChainMode::Fp => (1, 0),
        ChainMode::Dwarf { stack_bytes } => (2, stack_bytes.min(MAX_STACK_BYTES)),
    };
    let (pidns_dev, pidns_ino) = own_pid_namespace();
    let mut value: Vec<u8> = [
        stack_bytes,
        u32::from(settings.kernel_frames),
        settings.own_pid.map_or(0, |pid| pid as u32),
        mode,
        u32::from(entries),
        u32::from(settings.every_fault),
    ]
    .iter()
    .flat_map(|w| w.to_le_bytes())
    .collect();
    value.extend_from_slice(&pidns_dev.to_le_bytes());
    value.extend_from_slice(&pidns_ino.to_le_bytes());
    value
}

/// pfprof's pid namespace (device and inode of `/proc/self/ns/pid`), or
/// (0, 0) for the initial one, whose pids the kernel's helpers give.
fn own_pid_namespace() -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata("/proc/self/ns/pid") {
        Ok(m) if m.ino() != INIT_PIDNS_INO => (m.dev(), m.ino()),
        _ => (0, 0),
    }
}

impl FaultCollector {
    /// Loads the collector for `settings`; the entries of faults are not
    /// paired until [`FaultCollector::pair_entries`].
    pub fn load(settings: Settings) -> Result<FaultCollector, BpfError> {
        let file = object::File::parse(OBJECT).map_err(|e| BpfError::Object(e.to_string()))?;
        let (maps_section, defs) = map_defs(&file)?;
        let cpus = possible_cpus();
        // One list for both: a CPU brought online in between would
        // otherwise have a ring sized for one group fewer.
        let online = procfs::online_cpus();
        let ring_bytes = shared_ring_bytes(settings.ring_bytes, online.len());
        let rings = create_rings(&online, ring_bytes)?;
        let (fds, mut by_name) = create_maps(&defs, &rings, cpus, settings.memory)?;
        let mut take = |name: &str, map_type: Option<u32>| {
            by_name
                .remove(name)
                .filter(|(_, shape)| map_type.map_or(true, |t| shape.map_type == t))
                .map(|(fd, _)| fd)
                .ok_or_else(|| BpfError::Object(format!("no map {name}")))
        };
        let rings_map = take("rings", Some(MAP_ARRAY_OF_MAPS))?;
        let scratch = take("scratch", Some(MAP_ARRAY))?;
        let config = take("config", Some(MAP_ARRAY))?;
        let entries = take("entries", None)?;
        let unwound = take("unwound", None)?;
        let stack_tops = take("stack_tops", None)?;
        let counters = take("counters", None)?;
        sysbpf::map_update(
            &config,
            &0u32.to_le_bytes(),
            &config_value(&settings, false),
        )
        .map_err(|source| BpfError::Map {
            name: "config".into(),
            source,
        })?;
        let loader = Loader {
            file: &file,
            maps_section,
            fds: &fds,
        };
        fill_rings(&rings_map, &rings)?;
        let programs = load_programs(&loader, &settings, &mut take)?;
        Ok(FaultCollector {
            _exec_link: programs.exec_link,
            raw_entries: programs.raw_entries,
            memory: programs.memory,
            on_major: programs.on_major,
            _jump: programs.jump,
            completion: programs.completion,
            links: Vec::new(),
            entry_user: programs.entry_user,
            entry_kernel: programs.entry_kernel,
            rings,
            _rings_map: rings_map,
            ring_bytes,
            config,
            settings,
            unwound,
            stack_tops,
            counters,
            _scratch: scratch,
            _entries: entries,
            cpus,
        })
    }

    /// What the collector was loaded for.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The layout of the collector's records: a bpf-output event's, with
    /// the clock and sample-id layout of `base` (pfprof's first event), so
    /// that they sort and parse as the kernel's records do.
    pub fn output_attr(base: &PerfEventAttr) -> PerfEventAttr {
        let mut attr = *base;
        attr.type_ = b::PERF_TYPE_SOFTWARE;
        attr.config = b::PERF_COUNT_SW_BPF_OUTPUT as u64;
        attr.__bindgen_anon_1.sample_period = 1;
        own::identified(&mut attr);
        attr.sample_type |= b::PERF_SAMPLE_RAW as u64;
        attr.sample_regs_user = 0;
        attr.sample_stack_user = 0;
        // Per CPU, for every task: never inherited, and enabled now (a
        // program's output needs its event on the CPU).
        attr.set_inherit(0);
        attr.set_enable_on_exec(0);
        attr.set_disabled(0);
        own::side_band(&mut attr, false, false);
        attr.set_watermark(0);
        attr.__bindgen_anon_2.wakeup_events = 0;
        attr
    }

    /// Maps the ring buffers, to be drained.
    pub fn map_rings(&self) -> io::Result<Vec<BpfRing>> {
        (self.rings.iter())
            .map(|(_, fd)| BpfRing::new(fd, self.ring_bytes as usize))
            .collect()
    }

    /// Records that found their ring full so far (summed over the CPUs):
    /// minor faults' (COW included), major faults', `rss_stat`'s.
    pub fn lost(&self) -> io::Result<[u64; 3]> {
        Ok([
            self.counter(COUNT_LOST)?,
            self.counter(COUNT_LOST_MAJOR)?,
            self.counter(COUNT_LOST_RSS)?,
        ])
    }

    /// Of the faults the kernel counted (`kernel`, read once the events
    /// stopped), those it did not run the completion programs for (see
    /// `COUNT_SEEN` in fault.bpf.c): no record holds them.
    pub fn skipped(&self, kernel: KernelCounts) -> Option<u64> {
        let minor = self.counter(COUNT_SEEN).ok()?;
        let major = self.counter(COUNT_SEEN_MAJOR).ok()?;
        Some(kernel.minor.saturating_sub(minor) + kernel.major.saturating_sub(major))
    }

    /// Counter `which` (`COUNT_*`), summed over the CPUs.
    fn counter(&self, which: u32) -> io::Result<u64> {
        let mut values = vec![0u8; self.cpus as usize * 8];
        sysbpf::map_lookup(&self.counters, &which.to_le_bytes(), &mut values)?;
        Ok(le_u64s(&values).sum())
    }

    /// Detaches the collector from every event it was attached to (before
    /// attaching it to those of another attempt at opening them: a link
    /// holds its event open, and enabled).
    pub fn detach_all(&mut self) {
        self.links.clear();
    }

    /// Runs the collector on each sample of `event`, a `minor-faults`
    /// (`major` false) or `major-faults` event.
    pub fn attach(&mut self, event: &OwnedFd, major: bool) -> io::Result<()> {
        let prog = if major {
            &self.on_major
        } else {
            &self.completion
        };
        let link = sysbpf::link_to_event(event, prog)?;
        self.links.push(link);
        Ok(())
    }

    /// Pairs each fault with its entry: the programs run at every hit of
    /// the `page_fault_user` and `page_fault_kernel` tracepoints, whose
    /// events `user` and `kernel` are (one of each: a tracepoint's programs
    /// run for all its events), and suppress their samples.
    pub fn pair_entries(&self, user: &OwnedFd, kernel: &OwnedFd) -> io::Result<()> {
        sysbpf::attach_to_event(user, &self.entry_user)?;
        sysbpf::attach_to_event(kernel, &self.entry_kernel)?;
        sysbpf::map_update(
            &self.config,
            &0u32.to_le_bytes(),
            &config_value(&self.settings, true),
        )
    }

    /// Pairs each fault with its entry through raw tracepoint programs on
    /// `page_fault_user` and `page_fault_kernel`, which run for every task
    /// on the machine (the completion programs only for the followed ones:
    /// an entry of a task never followed is never read). Returns the
    /// attachments: closing them detaches the programs, which must happen
    /// before the fault events stop, or the entries of faults no longer
    /// completed would count as unfinished.
    pub fn pair_entries_raw(&self) -> io::Result<[OwnedFd; 2]> {
        let (user, kernel) = self
            .raw_entries
            .as_ref()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EOPNOTSUPP))?;
        let links = [
            sysbpf::attach_raw_tracepoint("page_fault_user", user)?,
            sysbpf::attach_raw_tracepoint("page_fault_kernel", kernel)?,
        ];
        sysbpf::map_update(
            &self.config,
            &0u32.to_le_bytes(),
            &config_value(&self.settings, true),
        )?;
        Ok(links)
    }

    /// Has the collector write the memory events of the followed
    /// processes under [`MEMORY_IDS`]: `on_rss_stat` their own file and
    /// shared-memory counts (`anon`: anonymous too; see [`memory_events::RssStat`]), read
    /// by the offsets the running kernel's BTF gives; the syscalls'
    /// programs the syscalls that give memory back (see
    /// [`memory_events::SyscallRecord`]), whose tracepoints' ids are
    /// `syscall_ids` (the first five of
    /// [`crate::format::records::MEMORY_TRACEPOINT_PATHS`]).
    pub fn watch_memory(&self, anon: bool, syscall_ids: &[u64]) -> io::Result<MemoryWatch> {
        let unsupported = |what: String| io::Error::new(io::ErrorKind::Unsupported, what);
        let memory = (self.memory.as_ref())
            .ok_or_else(|| unsupported("the kernel refused the memory programs".into()))?;
        if syscall_ids.len() != memory.by_events.len() {
            return Err(unsupported(
                "not every syscall's tracepoint is known".into(),
            ));
        }
        let layout = memory_events::RssLayout::of_running_kernel().map_err(unsupported)?;
        let value = layout.config_value(anon);
        sysbpf::map_update(&memory.config, &0u32.to_le_bytes(), &value)?;
        sysbpf::map_update(&memory.mode, &0u32.to_le_bytes(), &0u32.to_le_bytes())?;
        let [enter, exit] = &memory.raw;
        let links = vec![
            sysbpf::attach_raw_tracepoint("rss_stat", &memory.rss)?,
            sysbpf::attach_raw_tracepoint("sys_enter", enter)?,
            sysbpf::attach_raw_tracepoint("sys_exit", exit)?,
        ];
        let programs = (memory.by_events.iter().zip(syscall_ids))
            .map(|(prog, &id)| Ok((prog.try_clone()?, id)))
            .collect::<io::Result<_>>()?;
        let maps = (memory.config.try_clone()?, memory.mode.try_clone()?);
        Ok(MemoryWatch::new(links, maps, programs))
    }

    /// Remembers the unwinding of a stack (see [`Unwound`]) in the kernel's
    /// `unwound` map, so that the same stack is not copied again.
    pub fn remember(&self, key: &UnwoundKey, unwound: &Unwound<'_>) -> io::Result<()> {
        let value = unwound
            .encode()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::E2BIG))?;
        sysbpf::map_update(&self.unwound, &key.encode(), &value)
    }

    /// Forgets a remembered unwinding (ENOENT when it is not there).
    pub fn forget(&self, key: &UnwoundKey) -> io::Result<()> {
        sysbpf::map_delete(&self.unwound, &key.encode())
    }

    /// Has the stack copies of thread `tid` end at `top_avma`.
    pub fn set_stack_top(&self, tid: i32, top_avma: u64) -> io::Result<()> {
        sysbpf::map_update(
            &self.stack_tops,
            &tid.to_le_bytes(),
            &top_avma.to_le_bytes(),
        )
    }

    /// Has the stack copies of thread `tid` go as far as asked (ENOENT
    /// when they did).
    pub fn forget_stack_top(&self, tid: i32) -> io::Result<()> {
        sysbpf::map_delete(&self.stack_tops, &tid.to_le_bytes())
    }

    /// The collector's counters so far, summed over the CPUs.
    pub fn counters(&self) -> io::Result<Counters> {
        let mut sums = [0u64; COUNTERS];
        for (i, sum) in sums.iter_mut().enumerate() {
            *sum = self.counter(i as u32)?;
        }
        Ok(Counters {
            unfinished_entries: sums[0],
            cache_hits: sums[1],
            cache_stale: sums[2],
        })
    }
}

/// What the collector counted in the kernel.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    /// Fault entries no completion followed (a SIGSEGV, a spurious fault,
    /// another page's completion): counted with `every_fault` only.
    pub unfinished_entries: u64,
    /// Records whose chain came from the `unwound` map.
    pub cache_hits: u64,
    /// Lookups in `unwound` whose words had changed (the stack was copied).
    pub cache_stale: u64,
}

/// The registers an unwinding started from, in a process: the key of the
/// `unwound` map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnwoundKey {
    /// The process.
    pub pid: i32,
    /// rip, rsp, rbp.
    pub ip: u64,
    /// See `ip`.
    pub sp: u64,
    /// See `ip`.
    pub bp: u64,
}

impl UnwoundKey {
    fn encode(&self) -> [u8; UKEY_BYTES] {
        let mut key = [0u8; UKEY_BYTES];
        key[..4].copy_from_slice(&(self.pid as u32).to_le_bytes());
        key[8..16].copy_from_slice(&self.ip.to_le_bytes());
        key[16..24].copy_from_slice(&self.sp.to_le_bytes());
        key[24..32].copy_from_slice(&self.bp.to_le_bytes());
        key
    }
}

/// What an unwinding depended on and found: the stack words it read (their
/// offsets above the stack pointer, multiples of 8, and values) and the
/// user chain.
#[derive(Debug, Clone, Copy)]
pub struct Unwound<'a> {
    /// (offset, value) of each word read.
    pub words: &'a [(u32, u64)],
    /// The chain, leaf first.
    pub frames: &'a [u64],
}

impl Unwound<'_> {
    /// The bytes of stack the words span.
    fn span(&self) -> u32 {
        self.words
            .iter()
            .map(|&(off, _)| off + 8)
            .max()
            .unwrap_or(0)
    }

    /// Whether it fits an entry of the map: not too many words or frames,
    /// the words within a stack copy and a multiple of 8 bytes from the
    /// stack pointer (the map keeps word offsets).
    pub fn fits(&self) -> bool {
        self.words.len() <= CACHE_WORDS
            && self.frames.len() <= CACHE_FRAMES
            && self.span() <= MAX_STACK_BYTES
            && self.words.iter().all(|&(off, _)| off % 8 == 0)
    }

    /// The `unwound` map's value (`struct uvalue`); None when it does not
    /// fit one.
    fn encode(&self) -> Option<Vec<u8>> {
        if !self.fits() {
            return None;
        }
        let span = self.span();
        let mut v = vec![0u8; UVALUE_BYTES];
        v[..4].copy_from_slice(&(self.words.len() as u32).to_le_bytes());
        v[4..8].copy_from_slice(&(self.frames.len() as u32).to_le_bytes());
        v[8..12].copy_from_slice(&span.to_le_bytes());
        let woff = 16;
        let words = woff + 2 * CACHE_WORDS;
        let frames = words + 8 * CACHE_WORDS;
        for (i, &(off, value)) in self.words.iter().enumerate() {
            v[woff + 2 * i..woff + 2 * i + 2].copy_from_slice(&((off / 8) as u16).to_le_bytes());
            v[words + 8 * i..words + 8 * i + 8].copy_from_slice(&value.to_le_bytes());
        }
        for (i, frame) in self.frames.iter().enumerate() {
            v[frames + 8 * i..frames + 8 * i + 8].copy_from_slice(&frame.to_le_bytes());
        }
        Some(v)
    }
}

/// A fault's entry, as the collector paired it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The x86 error code.
    pub error_code: u64,
    /// Time from entry to completion, ns.
    pub latency_ns: u64,
    /// The kernel-mode tracepoint's (a fault on user memory in a syscall).
    pub kernel: bool,
}

/// One fault as the collector wrote it.
#[derive(Debug, Clone, Copy)]
pub struct Fault<'a> {
    /// A major fault (`major-faults` fired), else minor.
    pub major: bool,
    /// Taken in kernel mode (on user memory).
    pub kernel_mode: bool,
    /// The faulting instruction (a kernel address for a kernel-mode fault).
    pub ip: u64,
    /// The faulting data address.
    pub addr: u64,
    /// Its entry, when the collector paired one.
    pub entry: Option<Entry>,
    /// The user registers unwinding needs.
    pub regs: UserRegs,
    /// The kernel's call chain (kernel-mode faults under `--kernel`),
    /// innermost first, as 8-byte little-endian IPs.
    pub kernel_ips: &'a [u8],
    /// The user chain, when the record carries one (fp; dwarf from the
    /// `unwound` map), innermost first, as 8-byte little-endian IPs.
    pub user_ips: Option<&'a [u8]>,
    /// A chain from `unwound`: the bytes of stack its words span.
    pub cached_span: Option<u32>,
    /// The user stack from the stack pointer up (dwarf).
    pub stack: &'a [u8],
    /// Pages of `stack` that were not in memory (their bytes are not the
    /// stack's): bit i is page i, page 0 the one holding the stack pointer.
    pub holes: u32,
    /// The stack copy ended at its thread's top (see record/stack_tops.rs).
    pub bounded: bool,
    /// The copy was cut to 1 KiB because the ring was more than half
    /// full (`PRESSED_STACK` in fault.bpf.c): a chain that needed more is
    /// cut by it.
    pub pressed: bool,
}

impl<'a> Fault<'a> {
    /// Parses a record (a bpf-output sample's raw data); None when it is
    /// not one of the collector's or is cut short.
    pub fn parse(raw: &'a [u8]) -> Option<Fault<'a>> {
        let word = |i: usize| le_u64(raw, i);
        let half = |i: usize| le_u32(raw, i);
        if half(0)? != MAGIC {
            return None;
        }
        let flags = half(4)?;
        let user = |i: usize| word(40 + 8 * i);
        let kernel_len = (half(104)? as usize).checked_mul(8)?;
        let user_len = (half(108)? as usize).checked_mul(8)?;
        let stack_len = half(112)? as usize;
        let span = half(116)?;
        let holes = half(120)?;
        let mut at = FAULT_HEADER;
        let mut take = |len: usize| {
            let bytes = raw.get(at..at.checked_add(len)?)?;
            at += len;
            Some(bytes)
        };
        let kernel_ips = take(kernel_len)?;
        let user_ips = take(user_len)?;
        let stack = take(stack_len)?;
        Some(Fault {
            major: flags & FLAG_MAJOR != 0,
            kernel_mode: flags & FLAG_KERNEL_MODE != 0,
            ip: word(8)?,
            addr: word(16)?,
            entry: (flags & FLAG_ENTRY != 0).then_some(Entry {
                error_code: word(24)?,
                latency_ns: word(32)?,
                kernel: flags & FLAG_ENTRY_KERNEL != 0,
            }),
            regs: UserRegs::from_callee(
                user(0)?,
                user(1)?,
                user(2)?,
                [user(3), user(4), user(5), user(6), user(7)],
            ),
            kernel_ips,
            user_ips: (flags & FLAG_CHAIN != 0).then_some(user_ips),
            cached_span: (flags & FLAG_CACHED != 0).then_some(span),
            holes,
            bounded: flags & FLAG_BOUNDED != 0,
            pressed: flags & FLAG_PRESSED != 0,
            stack,
        })
    }
}

/// Whether the collector can run here: it loads (BPF permitted, a kernel
/// with the helpers it calls). Used by tests to skip, not by `record`,
/// which loads it and falls back with a note.
pub fn available() -> bool {
    FaultCollector::load(Settings {
        chain: ChainMode::Dwarf { stack_bytes: 8 },
        kernel_frames: false,
        own_pid: None,
        every_fault: true,
        ring_bytes: 4096,
        memory: false,
    })
    .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring holds the shares of the CPUs that write it, in one size for
    /// all rings, a power of two.
    #[test]
    fn shared_rings_hold_their_cpus_shares() {
        let mib = 1 << 20;
        assert_eq!(shared_ring_bytes(64 * mib, 1), 64 * mib);
        assert_eq!(shared_ring_bytes(64 * mib, 2), 128 * mib);
        assert_eq!(shared_ring_bytes(64 * mib, 3), 256 * mib);
        assert_eq!(shared_ring_bytes(64 * mib, 64), 256 * mib);
        assert_eq!(shared_ring_bytes(4096, 0), 4096);
        assert_eq!(shared_ring_bytes(1 << 31, 4), 1 << 31);
    }
    use crate::sys;

    /// A record as fault.bpf.c writes it.
    fn record(flags: u32, kernel_ips: &[u64], user_ips: &[u64], stack: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&MAGIC.to_le_bytes());
        r.extend_from_slice(&flags.to_le_bytes());
        for word in [
            0x1000u64,
            0xdead_0000,
            0x7,
            1234,
            0x401234,
            0x7ffc_0000,
            0x7ffc_0100,
            3,
            12,
            13,
            14,
            15,
        ] {
            r.extend_from_slice(&word.to_le_bytes());
        }
        for n in [kernel_ips.len(), user_ips.len(), stack.len(), 96, 0b10, 0] {
            r.extend_from_slice(&(n as u32).to_le_bytes());
        }
        assert_eq!(r.len(), FAULT_HEADER);
        for ip in kernel_ips.iter().chain(user_ips) {
            r.extend_from_slice(&ip.to_le_bytes());
        }
        r.extend_from_slice(stack);
        // The kernel pads raw data to 8 bytes after its u32 size.
        r.extend_from_slice(&[0; 4]);
        r
    }

    /// Every field is read from its place; kernel IPs, user IPs and stack
    /// bytes are where the lengths say; the flags say what is there.
    #[test]
    fn parses_the_collectors_record() {
        let raw = record(
            FLAG_MAJOR | FLAG_KERNEL_MODE | FLAG_ENTRY | FLAG_ENTRY_KERNEL,
            &[0xffff_1111, 0xffff_2222],
            &[],
            b"stackbytes",
        );
        let f = Fault::parse(&raw).unwrap();
        assert!(f.major && f.kernel_mode);
        assert_eq!((f.ip, f.addr), (0x1000, 0xdead_0000));
        let entry = Entry {
            error_code: 7,
            latency_ns: 1234,
            kernel: true,
        };
        assert_eq!(f.entry, Some(entry));
        assert_eq!(
            (f.regs.ip, f.regs.sp, f.regs.bp),
            (0x401234, 0x7ffc_0000, 0x7ffc_0100)
        );
        assert_eq!(
            f.regs.callee(),
            [Some(3), Some(12), Some(13), Some(14), Some(15)]
        );
        assert_eq!(f.kernel_ips.len(), 16);
        assert_eq!(&f.kernel_ips[8..16], &0xffff_2222u64.to_le_bytes());
        assert_eq!((f.user_ips, f.cached_span), (None, None));
        assert_eq!((f.stack, f.holes), (&b"stackbytes"[..], 0b10));
        let chain = record(FLAG_CHAIN | FLAG_CACHED, &[], &[0x401000, 0x402000], &[]);
        let f = Fault::parse(&chain).unwrap();
        assert!(!f.major && !f.kernel_mode && f.entry.is_none() && f.stack.is_empty());
        let user: Vec<u64> = le_u64s(f.user_ips.unwrap()).collect();
        assert_eq!((user, f.cached_span), (vec![0x401000, 0x402000], Some(96)));
    }

    /// Anything else, or a record whose lengths point past its end, is not
    /// read (the rewriter counts it as a bad record).
    #[test]
    fn refuses_what_is_not_a_whole_record() {
        let raw = record(0, &[1], &[2], &[7; 64]);
        assert!(Fault::parse(&raw[..FAULT_HEADER - 1]).is_none());
        assert!(Fault::parse(&raw[..FAULT_HEADER + 16 + 63]).is_none());
        let mut bad_magic = raw.clone();
        bad_magic[0] ^= 1;
        assert!(Fault::parse(&bad_magic).is_none());
        for field in [104, 108, 112] {
            let mut huge = raw.clone();
            huge[field..field + 4].copy_from_slice(&u32::MAX.to_le_bytes());
            assert!(Fault::parse(&huge).is_none(), "field at {field}");
        }
        assert!(Fault::parse(&[]).is_none());
    }

    /// An unwinding is remembered as fault.bpf.c reads it: word offsets in
    /// words, values, frames, and the bytes they span; one that does not
    /// fit (more words or frames than an entry holds, a word not 8 bytes
    /// apart from the stack pointer) is not.
    #[test]
    fn encodes_what_an_unwinding_read() {
        let words = [(0, 0x401000), (24, 0x7ffc_0040)];
        let frames = [0x401010, 0x402020, 0x403030];
        let v = Unwound {
            words: &words,
            frames: &frames,
        }
        .encode()
        .unwrap();
        assert_eq!(v.len(), UVALUE_BYTES);
        assert_eq!(le_u32(&v, 0), Some(2));
        assert_eq!(le_u32(&v, 4), Some(3));
        assert_eq!(le_u32(&v, 8), Some(32));
        assert_eq!(&v[16..20], &[0, 0, 3, 0]);
        let words_at = 16 + 2 * CACHE_WORDS;
        assert_eq!(le_u64(&v, words_at + 8), Some(0x7ffc_0040));
        let frames_at = words_at + 8 * CACHE_WORDS;
        assert_eq!(le_u64(&v, frames_at + 16), Some(0x403030));
        let many = vec![(0, 0); CACHE_WORDS + 1];
        let too_many = Unwound {
            words: &many,
            frames: &frames,
        };
        assert!(too_many.encode().is_none());
        let odd = Unwound {
            words: &[(12, 1)],
            frames: &frames,
        };
        assert!(odd.encode().is_none());
        let key = UnwoundKey {
            pid: 7,
            ip: 1,
            sp: 2,
            bp: 3,
        }
        .encode();
        assert_eq!((le_u32(&key, 0), le_u64(&key, 24)), (Some(7), Some(3)));
    }

    /// The collector's records are read with the first event's sample-id
    /// layout and clock (they sort and name their event as the others),
    /// and with no side-band records of their own.
    #[test]
    fn output_attr_keeps_the_layout_not_the_side_band() {
        let mut base = sys::new_attr();
        own::identified(&mut base);
        base.sample_type |= own::FAULT_FIELDS;
        own::side_band(&mut base, true, true);
        base.set_use_clockid(1);
        base.clockid = libc::CLOCK_MONOTONIC;
        base.set_watermark(1);
        base.set_disabled(1);
        base.set_inherit(1);
        let attr = FaultCollector::output_attr(&base);
        assert_eq!(attr.sample_type, own::SAMPLE_ID | b::PERF_SAMPLE_RAW as u64);
        assert_eq!(
            (attr.sample_id_all(), attr.use_clockid(), attr.clockid),
            (1, 1, libc::CLOCK_MONOTONIC)
        );
        let off = [attr.mmap2(), attr.comm(), attr.task(), attr.build_id()];
        assert_eq!(off, [0; 4]);
        let now = [attr.watermark(), attr.disabled(), attr.inherit()];
        assert_eq!(now, [0; 3]);
    }

    /// The limits fault.bpf.c defines are those this side encodes and
    /// parses.
    #[test]
    fn limits_match_the_source() {
        let source = include_str!("fault.bpf.c");
        for (name, value) in [
            ("CACHE_WORDS", CACHE_WORDS),
            ("CACHE_FRAMES", CACHE_FRAMES),
            ("MAX_STACK", MAX_STACK_BYTES as usize),
            ("MAGIC", MAGIC as usize),
            ("COUNT_LOST", COUNT_LOST as usize),
            ("COUNT_LOST_MAJOR", COUNT_LOST_MAJOR as usize),
            ("COUNT_LOST_RSS", COUNT_LOST_RSS as usize),
            ("COUNT_SEEN", COUNT_SEEN as usize),
            ("COUNT_SEEN_MAJOR", COUNT_SEEN_MAJOR as usize),
            ("RSS_MAGIC", memory_events::RSS_MAGIC as usize),
            ("SYSCALL_MAGIC", memory_events::SYSCALL_MAGIC as usize),
            ("COUNTERS", COUNTERS),
            ("COLLECTOR_ID", COLLECTOR_ID as usize),
        ] {
            let define = format!("#define {name} {value}");
            let hex = format!("#define {name} {value:#x}");
            assert!(
                source.contains(&define) || source.contains(&hex),
                "fault.bpf.c: {define}"
            );
        }
        let entries = format!(".max_entries = {CACHE_ENTRIES},");
        assert!(source.contains(&entries), "fault.bpf.c: {entries}");
        for build in memory_events::RSS_STAT_BUILDS {
            let program = format!("\nRSS_STAT_PROGRAM({build})\n");
            assert!(source.contains(&program), "fault.bpf.c: {program}");
        }
    }

    /// The committed object is what `build-bpf.sh` makes of fault.bpf.c
    /// (where clang is installed: CI installs it).
    #[test]
    fn object_matches_its_source() {
        if std::process::Command::new("clang")
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("clang is not installed: the BPF object is not checked against its source");
            return;
        }
        let out = std::env::temp_dir().join(format!("pfprof-fault-{}.bpf.o", std::process::id()));
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/src/record/build-bpf.sh");
        let status = std::process::Command::new("sh")
            .arg(script)
            .arg(&out)
            .status()
            .unwrap();
        assert!(status.success(), "{script} failed");
        let built = std::fs::read(&out).unwrap();
        std::fs::remove_file(&out).unwrap();
        assert!(
            built == OBJECT,
            "src/record/fault.bpf.o is not built from fault.bpf.c: run src/record/build-bpf.sh"
        );
    }

    /// The committed object loads and passes the verifier (where BPF is
    /// permitted: root).
    #[test]
    fn loads() {
        if sys::euid() != 0 {
            return;
        }
        for chain in [
            ChainMode::None,
            ChainMode::Fp,
            ChainMode::Dwarf { stack_bytes: 32768 },
        ] {
            let settings = Settings {
                chain,
                kernel_frames: true,
                own_pid: Some(1),
                every_fault: true,
                ring_bytes: 1 << 16,
                memory: true,
            };
            match FaultCollector::load(settings) {
                // The memory events' programs are loaded where they can
                // be: here they must.
                Ok(collector) => assert!(collector.memory.is_some(), "{chain:?}: memory"),
                Err(e) => panic!("{e}"),
            }
        }
    }

    /// The verifier's walk of each completion program stays near what it
    /// was made to take (instructions it processed, on this kernel: dwarf
    /// 16,600, with kernel frames 33,000, fp 4,600): a value that reaches
    /// the stack copy's loops in ranges of its own doubles it (it had
    /// grown back to 44,000 and 85,000: 45 and 110 ms of every start).
    #[test]
    fn the_verifier_walks_each_mode_briefly() {
        if sys::euid() != 0 {
            return;
        }
        for (chain, kernel_frames, most) in [
            (ChainMode::Fp, false, 8_000),
            (ChainMode::Dwarf { stack_bytes: 32768 }, false, 25_000),
            (ChainMode::Dwarf { stack_bytes: 32768 }, true, 50_000),
        ] {
            let settings = Settings {
                chain,
                kernel_frames,
                own_pid: None,
                every_fault: true,
                ring_bytes: 1 << 16,
                memory: false,
            };
            let collector = FaultCollector::load(settings).unwrap();
            // Kernels before 5.16 do not say.
            let Some(walked) = sysbpf::verified_insns(&collector.completion).unwrap() else {
                return;
            };
            assert!(
                walked > 100 && walked <= most,
                "{chain:?} kernel frames {kernel_frames}: {walked} instructions"
            );
        }
    }

    /// The memory programs attach here, and move to the syscalls' own
    /// tracepoints (where they do not attach, `record` falls back to the
    /// tracepoints' events, which the ledger's tests tell from the
    /// collector's only by what another task takes back).
    #[test]
    fn memory_programs_attach() {
        if sys::euid() != 0 {
            return;
        }
        let tracefs = sys::procfs::find_or_mount_tracefs().unwrap();
        let paths = crate::format::records::MEMORY_TRACEPOINT_PATHS;
        let ids: Vec<u64> = (paths[..5].iter())
            .map(|path| sys::procfs::tracepoint_id(&tracefs, path).unwrap())
            .collect();
        let settings = Settings {
            chain: ChainMode::None,
            kernel_frames: false,
            own_pid: Some(1),
            every_fault: true,
            ring_bytes: 1 << 16,
            memory: true,
        };
        let collector = FaultCollector::load(settings).unwrap();
        let mut watch = collector.watch_memory(false, &ids).unwrap();
        // rss_stat's and the raw tracepoints' links.
        assert_eq!(watch.attached(), (3, 0));
        watch.move_to_events().unwrap();
        assert!(watch.tried_events());
        // Each syscall's event and link; the raw tracepoints' closed.
        assert_eq!(watch.attached(), (1, 2 * 5));
        watch.stop();
        assert!(collector.watch_memory(false, &ids[..4]).is_err());
    }
}
