//! The perf record types, header `misc` bits and call-chain context marks
//! pfprof reads and writes: one table, taken from the kernel's uapi as
//! `perf_event_open_sys` carries it (the `misc` bits as the 16-bit header
//! field holds them). Also the one table of pfprof's own events: what each
//! is opened as and what a recording names it.

use perf_event_open_sys::bindings as b;

/// `PERF_RECORD_MMAP`.
pub const MMAP: u32 = b::PERF_RECORD_MMAP;
/// `PERF_RECORD_COMM`.
pub const COMM: u32 = b::PERF_RECORD_COMM;
/// `PERF_RECORD_EXIT`.
pub const EXIT: u32 = b::PERF_RECORD_EXIT;
/// `PERF_RECORD_FORK`.
pub const FORK: u32 = b::PERF_RECORD_FORK;
/// `PERF_RECORD_SAMPLE`.
pub const SAMPLE: u32 = b::PERF_RECORD_SAMPLE;
/// `PERF_RECORD_LOST`.
pub const LOST: u32 = b::PERF_RECORD_LOST;
/// `PERF_RECORD_LOST_SAMPLES`.
pub const LOST_SAMPLES: u32 = b::PERF_RECORD_LOST_SAMPLES;
/// `PERF_RECORD_MMAP2`.
pub const MMAP2: u32 = b::PERF_RECORD_MMAP2;

/// `PERF_RECORD_MISC_KERNEL`.
pub const MISC_KERNEL: u16 = b::PERF_RECORD_MISC_KERNEL as u16;
/// `PERF_RECORD_MISC_USER`.
pub const MISC_USER: u16 = b::PERF_RECORD_MISC_USER as u16;
/// `PERF_RECORD_MISC_MMAP_DATA`: a mapping without `PROT_EXEC`.
pub const MISC_MMAP_DATA: u16 = b::PERF_RECORD_MISC_MMAP_DATA as u16;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: the MMAP2 record holds a build-id.
pub const MISC_MMAP_BUILD_ID: u16 = b::PERF_RECORD_MISC_MMAP_BUILD_ID as u16;
/// `PERF_RECORD_MISC_BUILD_ID_SIZE`: a build-id table entry says its
/// build-id's length (perf's own header, not the kernel's uapi).
pub const MISC_BUILD_ID_SIZE: u16 = 1 << 15;

/// `PERF_CONTEXT_KERNEL`: kernel frames follow in a call chain.
pub const CONTEXT_KERNEL: u64 = b::PERF_CONTEXT_KERNEL;
/// `PERF_CONTEXT_USER`: user frames follow.
pub const CONTEXT_USER: u64 = b::PERF_CONTEXT_USER;
/// `PERF_CONTEXT_MAX`: every value from here up is a context mark.
pub const CONTEXT_MAX: u64 = b::PERF_CONTEXT_MAX;

/// The longest build-id a perf record or build-id table entry holds
/// (`BUILD_ID_SIZE`: a SHA-1's 20 bytes).
pub const BUILD_ID_SIZE_MAX: usize = 20;

/// What one of pfprof's events is opened as: its attr's type and config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventSource {
    /// `PERF_TYPE_SOFTWARE` with this config.
    Software(u64),
    /// `PERF_TYPE_TRACEPOINT`; the config is the id tracefs gives the
    /// tracepoint at this path (`system/name` under `events/`), which
    /// differs between kernels.
    Tracepoint(&'static str),
    /// The `uprobe` PMU, whose type the kernel chooses at boot.
    Uprobe,
}

/// One of the events pfprof records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OwnEvent {
    /// The name a recording gives it (perf's: `EVENT_DESC`).
    pub name: &'static str,
    /// What it is opened as.
    pub source: EventSource,
}

/// Minor faults (sampled; carries the side-band records).
pub const MINOR_FAULTS: OwnEvent = OwnEvent {
    name: "minor-faults",
    source: EventSource::Software(b::PERF_COUNT_SW_PAGE_FAULTS_MIN as u64),
};
/// Major faults.
pub const MAJOR_FAULTS: OwnEvent = OwnEvent {
    name: "major-faults",
    source: EventSource::Software(b::PERF_COUNT_SW_PAGE_FAULTS_MAJ as u64),
};
/// The fault-entry tracepoints pfprof records, as tracefs `events/` paths.
pub const TRACEPOINT_PATHS: [&str; 2] =
    ["exceptions/page_fault_user", "exceptions/page_fault_kernel"];
/// Fault entry in user mode (error code, for COW and the access type).
pub const FAULT_ENTRY_USER: OwnEvent = OwnEvent {
    name: "exceptions:page_fault_user",
    source: EventSource::Tracepoint(TRACEPOINT_PATHS[0]),
};
/// Fault entry in kernel mode.
pub const FAULT_ENTRY_KERNEL: OwnEvent = OwnEvent {
    name: "exceptions:page_fault_kernel",
    source: EventSource::Tracepoint(TRACEPOINT_PATHS[1]),
};
/// The syscalls that give memory back, as tracefs `events/` paths: their
/// arguments (or results) say which pages leave an address space (see
/// `analysis/resident.rs`); and the kernel's RSS counters as they change.
/// All six are recorded, or none.
pub const MEMORY_TRACEPOINT_PATHS: [&str; 6] = [
    "syscalls/sys_enter_munmap",
    "syscalls/sys_enter_madvise",
    "syscalls/sys_enter_mremap",
    "syscalls/sys_exit_mremap",
    "syscalls/sys_exit_brk",
    "kmem/rss_stat",
];
/// `munmap(addr, len)`.
pub const MUNMAP: OwnEvent = OwnEvent {
    name: "syscalls:sys_enter_munmap",
    source: EventSource::Tracepoint(MEMORY_TRACEPOINT_PATHS[0]),
};
/// `madvise(start, len, advice)`.
pub const MADVISE: OwnEvent = OwnEvent {
    name: "syscalls:sys_enter_madvise",
    source: EventSource::Tracepoint(MEMORY_TRACEPOINT_PATHS[1]),
};
/// `mremap(addr, old_len, new_len, flags, new_addr)`.
pub const MREMAP: OwnEvent = OwnEvent {
    name: "syscalls:sys_enter_mremap",
    source: EventSource::Tracepoint(MEMORY_TRACEPOINT_PATHS[2]),
};
/// `mremap`'s result: where the mapping is now.
pub const MREMAP_DONE: OwnEvent = OwnEvent {
    name: "syscalls:sys_exit_mremap",
    source: EventSource::Tracepoint(MEMORY_TRACEPOINT_PATHS[3]),
};
/// `brk`'s result: the program break now.
pub const BRK_DONE: OwnEvent = OwnEvent {
    name: "syscalls:sys_exit_brk",
    source: EventSource::Tracepoint(MEMORY_TRACEPOINT_PATHS[4]),
};
/// A process's RSS counter changed: how many pages of a kind it has now.
pub const RSS_STAT: OwnEvent = OwnEvent {
    name: "kmem:rss_stat",
    source: EventSource::Tracepoint(MEMORY_TRACEPOINT_PATHS[5]),
};
/// The memory events, in [`MEMORY_TRACEPOINT_PATHS`]' order.
pub const MEMORY_CALLS: [OwnEvent; 6] = [MUNMAP, MADVISE, MREMAP, MREMAP_DONE, BRK_DONE, RSS_STAT];

/// The uprobe on the program's `main`: the end of start-up.
pub const MAIN_ENTRY: OwnEvent = OwnEvent {
    name: "pfprof:main_entry",
    source: EventSource::Uprobe,
};

/// pfprof's events in the order a recording holds them (each one it could
/// open: the tracepoints and the uprobe may be missing).
pub const OWN_EVENTS: [OwnEvent; 11] = [
    MINOR_FAULTS,
    MAJOR_FAULTS,
    FAULT_ENTRY_USER,
    FAULT_ENTRY_KERNEL,
    MAIN_ENTRY,
    MUNMAP,
    MADVISE,
    MREMAP,
    MREMAP_DONE,
    BRK_DONE,
    RSS_STAT,
];

impl OwnEvent {
    /// Which of pfprof's events an attr of `type_` and `config` is, in a
    /// recording pfprof wrote: the fault events by their config, the
    /// tracepoints by their order (`tracepoints_before` of them came
    /// earlier), anything else the uprobe. None for a tracepoint past
    /// pfprof's.
    pub fn of_attr(type_: u32, config: u64, tracepoints_before: usize) -> Option<OwnEvent> {
        if type_ == b::PERF_TYPE_TRACEPOINT {
            let tracepoints = [FAULT_ENTRY_USER, FAULT_ENTRY_KERNEL];
            return (tracepoints.iter().chain(&MEMORY_CALLS))
                .nth(tracepoints_before)
                .copied();
        }
        let fault = [MINOR_FAULTS, MAJOR_FAULTS]
            .into_iter()
            .find(|e| type_ == b::PERF_TYPE_SOFTWARE && e.source == EventSource::Software(config));
        Some(fault.unwrap_or(MAIN_ENTRY))
    }

    /// Whether a recording's event `name` is this event: pfprof's name, or
    /// for a tracepoint any name ending in its own (`page_fault_user`), as
    /// perf's recordings name it.
    pub fn is_named(&self, name: &str) -> bool {
        match self.source {
            EventSource::Tracepoint(path) => path
                .rsplit_once('/')
                .is_some_and(|(_, own)| name.ends_with(own)),
            _ => name == self.name,
        }
    }
}

/// Record types from here on are perf's own (FINISHED_ROUND, the
/// HEADER_* records of its pipe mode), never the kernel's:
/// `PERF_RECORD_USER_TYPE_START`.
pub const USER_TYPE_START: u32 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    /// The values perf.data files carry (the uapi is stable; a binding
    /// change would break every recording).
    #[test]
    fn values_of_the_file_format() {
        assert_eq!((MMAP, COMM, EXIT, FORK, SAMPLE, MMAP2), (1, 3, 4, 7, 9, 10));
        assert_eq!((MISC_KERNEL, MISC_USER), (1, 2));
        assert_eq!(
            (MISC_MMAP_DATA, MISC_MMAP_BUILD_ID, MISC_BUILD_ID_SIZE),
            (1 << 13, 1 << 14, 1 << 15)
        );
        assert_eq!(CONTEXT_USER, (-512i64) as u64);
        assert_eq!(CONTEXT_KERNEL, (-128i64) as u64);
        assert_eq!(CONTEXT_MAX, (-4095i64) as u64);
    }

    /// pfprof's events are told back from their attrs (the fault events by
    /// config, the tracepoints by order, the rest as the uprobe; a ninth
    /// tracepoint is none of pfprof's) and from their names.
    #[test]
    fn own_events_from_attrs() {
        let software = b::PERF_TYPE_SOFTWARE;
        let tracepoint = b::PERF_TYPE_TRACEPOINT;
        let cases = [
            ((software, 5, 0), Some(MINOR_FAULTS)),
            ((software, 6, 0), Some(MAJOR_FAULTS)),
            ((software, 2, 0), Some(MAIN_ENTRY)),
            ((tracepoint, 190, 0), Some(FAULT_ENTRY_USER)),
            ((tracepoint, 189, 1), Some(FAULT_ENTRY_KERNEL)),
            ((tracepoint, 188, 2), Some(MUNMAP)),
            ((tracepoint, 187, 6), Some(BRK_DONE)),
            ((tracepoint, 186, 7), Some(RSS_STAT)),
            ((tracepoint, 185, 8), None),
            ((9, 0, 2), Some(MAIN_ENTRY)),
        ];
        for ((type_, config, before), want) in cases {
            assert_eq!(
                OwnEvent::of_attr(type_, config, before),
                want,
                "{type_} {config}"
            );
        }
        assert!(FAULT_ENTRY_KERNEL.is_named("exceptions:page_fault_kernel"));
        assert!(FAULT_ENTRY_KERNEL.is_named("page_fault_kernel"));
        assert!(!FAULT_ENTRY_KERNEL.is_named("exceptions:page_fault_user"));
        assert!(MAIN_ENTRY.is_named("pfprof:main_entry"));
        assert!(!MAIN_ENTRY.is_named("x:pfprof:main_entry"));
        // Each tracepoint's name is its tracefs path with a colon.
        for e in OWN_EVENTS {
            if let EventSource::Tracepoint(path) = e.source {
                assert_eq!(e.name, path.replace('/', ":"));
            }
        }
    }
}
