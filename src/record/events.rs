//! The events a recording opens: what each asks the kernel for (the fault
//! events, the fault-entry tracepoints, the uprobe on `main`) and what the
//! recording says of it; which tracepoints the kernel has.

use std::ffi::CString;
use std::path::Path;

use perf_event_open_sys::bindings as b;

use super::bpf;
use super::{RecordConfig, Target};
use crate::format::call_graph::CallGraph;
use crate::format::events::own;
use crate::format::perf_data::RecordClass;
use crate::format::records as rec;
use crate::sys::{self, procfs, PerfEventAttr};

/// The fault-entry tracepoints, or why they are not recorded.
pub(super) struct Tracepoints {
    /// The ids of `page_fault_user` and `page_fault_kernel`.
    pub(super) ids: Option<(u64, u64)>,
    /// The ids of the syscalls that give memory back
    /// ([`rec::MEMORY_TRACEPOINT_PATHS`]), recorded with the fault entries
    /// when the kernel has them all.
    pub(super) memory: Option<[u64; 6]>,
    /// Why not (None when they are recorded).
    pub(super) note: Option<String>,
    /// Their formats, for perf (which refuses tracepoints without).
    pub(super) formats: Option<crate::format::perf_compat::TracingData>,
}

/// Finds the tracepoints in tracefs (mounting it if needed), unless the
/// recording does without them.
pub(super) fn find_tracepoints(cfg: &RecordConfig) -> Tracepoints {
    let found = if cfg.class == RecordClass::Major {
        Err("not needed for --class major".to_string())
    } else if cfg.tracepoints {
        procfs::find_or_mount_tracefs().and_then(|tfs| {
            let ids = (
                procfs::tracepoint_id(&tfs, rec::TRACEPOINT_PATHS[0])?,
                procfs::tracepoint_id(&tfs, rec::TRACEPOINT_PATHS[1])?,
            );
            let memory =
                rec::MEMORY_TRACEPOINT_PATHS.map(|path| procfs::tracepoint_id(&tfs, path).ok());
            let memory = memory
                .iter()
                .all(Option::is_some)
                .then(|| memory.map(Option::unwrap_or_default));
            let mut paths = rec::TRACEPOINT_PATHS.to_vec();
            if memory.is_some() {
                paths.extend(rec::MEMORY_TRACEPOINT_PATHS);
            }
            Ok((
                ids,
                memory,
                crate::format::perf_compat::TracingData::read(&tfs, &paths).ok(),
            ))
        })
    } else {
        Err("disabled with --no-tracepoints".to_string())
    };
    match found {
        Ok((ids, memory, formats)) => Tracepoints {
            ids: Some(ids),
            memory,
            note: None,
            formats,
        },
        Err(why) => Tracepoints {
            ids: None,
            memory: None,
            note: Some(why),
            formats: None,
        },
    }
}

pub(super) struct EventSpec {
    pub(super) name: &'static str,
    /// What the kernel is asked for.
    pub(super) attr: PerfEventAttr,
    /// What the recording says, when pfprof rewrites the samples.
    pub(super) file_attr: Option<PerfEventAttr>,
    /// Not opened: pfprof writes this event's records under this id (the
    /// fault entries the collector pairs through raw tracepoints).
    pub(super) written_as: Option<u64>,
    /// The tracepoint's samples the kernel keeps (ftrace's filter).
    pub(super) filter: Option<&'static std::ffi::CStr>,
}

/// `kmem:rss_stat` of the process's own threads, but its anonymous pages:
/// a record per anonymous page (most faults) cost a third more CPU on the
/// 1 GiB touch; files' counts change once per fault-around batch.
const RSS_STAT_FILTER: &std::ffi::CStr = c"curr == 1 && member != 1";
/// The same with the anonymous pages, where a fault can make a huge page
/// (512 pages) resident: the ledger learns it only from the count.
const RSS_STAT_FILTER_HUGE: &std::ffi::CStr = c"curr == 1";

/// The `rss_stat` filter for a kernel whose transparent huge pages are on
/// for all anonymous memory (`huge_always`) or not.
fn rss_stat_filter(huge_always: bool) -> &'static std::ffi::CStr {
    if huge_always {
        RSS_STAT_FILTER_HUGE
    } else {
        RSS_STAT_FILTER
    }
}

/// What the events of a recording are asked for beyond the configuration.
#[derive(Clone, Copy)]
pub(super) struct SpecOptions {
    /// The BPF collector writes the faults.
    pub(super) collector: bool,
    /// The collector's raw tracepoint programs pair the fault entries: the
    /// tracepoints' perf events are not opened. (Opened and closed, they
    /// cost a synchronize_rcu each at close: 100 ms of every start.)
    pub(super) entries_paired: bool,
    /// The collector writes the memory events' records (see
    /// [`bpf::FaultCollector::watch_memory`]): their events are not opened.
    pub(super) memory_watched: bool,
}

/// Whether the recording keeps the resident-page ledger
/// (`analysis/resident.rs`), which needs every fault: not when faults are
/// sampled.
pub(super) fn ledger_wanted(cfg: &RecordConfig) -> bool {
    cfg.resident && cfg.period == 1 && matches!(cfg.class, RecordClass::All | RecordClass::Cow)
}

pub(super) fn base_attr(cfg: &RecordConfig) -> PerfEventAttr {
    let mut attr = sys::new_attr();
    attr.__bindgen_anon_1.sample_period = 1;
    // Every record says whose, when, where and of which event, in the
    // layout the records pfprof writes itself share.
    own::identified(&mut attr);
    attr.set_disabled(1);
    // A command's events start at its exec; attached and system-wide ones
    // are enabled once the existing address spaces are written down.
    let command = matches!(cfg.target, Target::Command(_));
    attr.set_inherit(u64::from(!matches!(cfg.target, Target::System)));
    attr.set_enable_on_exec(u64::from(command));
    // CLOCK_MONOTONIC, so that records pfprof writes itself (the mappings of
    // processes that already run) sort with the kernel's.
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.set_exclude_hv(1);
    // Faults taken in kernel mode on user memory (read() into a fresh buffer)
    // are kernel-mode events: keep them, but leave kernel frames out.
    attr.set_exclude_callchain_kernel(if cfg.kernel_callchains { 0 } else { 1 });
    // Each event counts what its ring turned away (`record/lost.rs`).
    if procfs::kernel_at_least(6, 0) {
        attr.read_format |= b::PERF_FORMAT_LOST as u64;
    }
    attr
}

/// A uprobe on the program's `main`: marks the end of start-up exactly.
pub(super) struct MainProbe {
    /// Dynamic PMU type of `uprobe`.
    pub(super) pmu_type: u32,
    /// The executable (kept alive: the attr points at it).
    pub(super) path: CString,
    /// File offset of `main`.
    pub(super) file_offset: u64,
}

/// Finds `main` in the executable and the uprobe PMU; None when either is
/// missing (stripped binary, no uprobes): start-up then ends at the first
/// fault whose stack shows `main`.
pub(super) fn main_probe(program: &Path) -> Option<MainProbe> {
    let pmu_type = procfs::pmu_type("uprobe")?;
    let mut symbolizer = pfprof_symbolize::Symbolizer::new(pfprof_symbolize::Options::default());
    let (_, range) = symbolizer
        .function_ranges(program, None, &["main"])
        .into_iter()
        .next()?;
    let path = CString::new(program.as_os_str().as_encoded_bytes()).ok()?;
    Some(MainProbe {
        pmu_type,
        path,
        file_offset: range.start,
    })
}

/// The events of a recording: minor and major faults, the fault-entry
/// tracepoints, the main-entry probe, and the syscalls that give memory
/// back, in this order (the first carries the side-band records).
pub(super) fn event_specs(
    cfg: &RecordConfig,
    mmap_pages: usize,
    found: &Tracepoints,
    probe: Option<&MainProbe>,
    options: SpecOptions,
) -> Vec<EventSpec> {
    let tracepoints = found.ids;
    let collector = options.collector;
    let mut specs = vec![
        fault_event(
            cfg,
            b::PERF_COUNT_SW_PAGE_FAULTS_MIN,
            Some(mmap_pages),
            collector,
        ),
        fault_event(cfg, b::PERF_COUNT_SW_PAGE_FAULTS_MAJ, None, collector),
    ];
    if let Some((user_id, kernel_id)) = tracepoints {
        let paired = options.entries_paired && collector;
        for (name, id, written_as) in [
            (rec::FAULT_ENTRY_USER.name, user_id, bpf::ENTRY_USER_ID),
            (
                rec::FAULT_ENTRY_KERNEL.name,
                kernel_id,
                bpf::ENTRY_KERNEL_ID,
            ),
        ] {
            let mut attr = base_attr(cfg);
            attr.type_ = b::PERF_TYPE_TRACEPOINT;
            attr.config = id;
            attr.sample_type |= b::PERF_SAMPLE_RAW as u64;
            specs.push(EventSpec {
                name,
                attr,
                file_attr: None,
                written_as: paired.then_some(written_as),
                filter: None,
            });
        }
    }
    specs.extend(probe.map(|probe| main_probe_event(cfg, probe)));
    let memory = found
        .memory
        .filter(|_| tracepoints.is_some() && ledger_wanted(cfg));
    let watched = options.memory_watched && collector;
    let calls = rec::MEMORY_CALLS.iter().zip(memory.into_iter().flatten());
    for (i, (event, id)) in calls.enumerate() {
        let mut attr = base_attr(cfg);
        attr.type_ = b::PERF_TYPE_TRACEPOINT;
        attr.config = id;
        attr.sample_type |= b::PERF_SAMPLE_RAW as u64;
        let filter = (*event == rec::RSS_STAT && !watched)
            .then(|| rss_stat_filter(crate::sys::procfs::anon_folios_unasked()));
        specs.push(EventSpec {
            name: event.name,
            attr,
            file_attr: None,
            written_as: watched.then_some(bpf::MEMORY_IDS[i]),
            filter,
        });
    }
    specs
}

/// A software page-fault event (`config`: minor or major) sampled with the
/// data address and the call chain `cfg` asks for; `side_band` (the first
/// event's ring size) makes it carry the side-band records.
pub(super) fn fault_event(
    cfg: &RecordConfig,
    config: u32,
    side_band: Option<usize>,
    collector: bool,
) -> EventSpec {
    let name = if config == b::PERF_COUNT_SW_PAGE_FAULTS_MIN {
        rec::MINOR_FAULTS.name
    } else {
        rec::MAJOR_FAULTS.name
    };
    let mut attr = base_attr(cfg);
    attr.type_ = b::PERF_TYPE_SOFTWARE;
    attr.config = config as u64;
    // --class major: minor faults are only counted (the event stays, for
    // its side-band records and its counter), and vice versa.
    let sampled = match cfg.class {
        RecordClass::All | RecordClass::Cow => true,
        RecordClass::Minor => config == b::PERF_COUNT_SW_PAGE_FAULTS_MIN,
        RecordClass::Major => config == b::PERF_COUNT_SW_PAGE_FAULTS_MAJ,
    };
    attr.__bindgen_anon_1.sample_period = if sampled { cfg.period } else { 1 << 62 };
    attr.sample_type |= own::FAULT_FIELDS;
    // With the collector the kernel writes no sample of these events (the
    // collector writes the fault), so it is asked for nothing more.
    if !collector {
        match cfg.call_graph {
            CallGraph::Fp => attr.sample_type |= b::PERF_SAMPLE_CALLCHAIN as u64,
            CallGraph::Dwarf { stack_bytes } => {
                attr.sample_type |= (b::PERF_SAMPLE_REGS_USER | b::PERF_SAMPLE_STACK_USER) as u64;
                attr.sample_regs_user = crate::unwind::SAMPLE_REGS_USER;
                attr.sample_stack_user = stack_bytes;
            }
            CallGraph::None => {}
        }
        if cfg.call_graph != CallGraph::Fp && cfg.kernel_callchains {
            // The kernel's part of the chain only; the user part is unwound.
            attr.sample_type |= b::PERF_SAMPLE_CALLCHAIN as u64;
            attr.set_exclude_callchain_user(1);
        }
    }
    if let Some(mmap_pages) = side_band {
        // The side-band records come from the first event only. Without
        // build-ids from the kernel (`attr.build_id`): its mmap output sets
        // the build-id flag in the header it shares with every event it
        // writes the mapping to next and does not clear it, so perf
        // recording beside pfprof read maj/min/ino as a build-id of 254
        // bytes and died ("assertion failed at util/build-id.c:1010",
        // then a smashed stack). The drain fills the build-ids in
        // ([`super::build_ids`]).
        own::side_band(&mut attr, true, false);
        attr.set_watermark(1);
        // Woken at 1/32 of a ring instead, the drain's fixed cost per
        // pass (8 times as many) lost the fork storm's records in 1 of 3
        // runs; at 1/4, none in 3.
        attr.__bindgen_anon_2.wakeup_watermark = ((mmap_pages * 4096) / 4) as u32;
    }
    // The collector's records, and in dwarf mode the chains unwound in
    // place of the register and stack copies, are written as samples of
    // these events: the recording says what they hold.
    let file_attr = (collector || matches!(cfg.call_graph, CallGraph::Dwarf { .. })).then(|| {
        let mut file_attr = attr;
        file_attr.sample_type = if chains_recorded(cfg) {
            own::FAULT_SAMPLE
        } else {
            own::SAMPLE_ID | own::FAULT_FIELDS
        };
        file_attr.sample_regs_user = 0;
        file_attr.sample_stack_user = 0;
        file_attr.set_exclude_callchain_user(0);
        file_attr
    });
    EventSpec {
        name,
        attr,
        file_attr,
        written_as: None,
        filter: None,
    }
}

/// Whether the recording's fault samples carry call chains: not with
/// `--call-graph none` unless kernel frames are kept.
pub(super) fn chains_recorded(cfg: &RecordConfig) -> bool {
    cfg.call_graph != CallGraph::None || cfg.kernel_callchains
}

/// The uprobe on the program's `main`.
pub(super) fn main_probe_event(cfg: &RecordConfig, probe: &MainProbe) -> EventSpec {
    let mut attr = base_attr(cfg);
    attr.type_ = probe.pmu_type;
    // uprobe PMU: config1 = path, config2 = file offset.
    attr.__bindgen_anon_3.config1 = probe.path.as_ptr() as u64;
    attr.__bindgen_anon_4.config2 = probe.file_offset;
    // Not inherited: an inherited uprobe event re-reads its path through
    // the config1 pointer in the *forking* process, where it is not
    // mapped, and fork/clone then fail with EFAULT. Only the program's
    // own process needs it.
    attr.set_inherit(0);
    // The IP (main's address) only for perf: `perf script` refuses an
    // event whose samples have neither IP nor address.
    attr.sample_type |= b::PERF_SAMPLE_IP as u64;
    EventSpec {
        name: rec::MAIN_ENTRY.name,
        attr,
        file_attr: None,
        written_as: None,
        filter: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::test_config;

    /// Where transparent huge pages are always on, the anonymous counts
    /// come too (a huge page is known only by them).
    #[test]
    fn rss_stat_keeps_anonymous_counts_only_for_huge_pages() {
        assert_eq!(rss_stat_filter(false), c"curr == 1 && member != 1");
        assert_eq!(rss_stat_filter(true), c"curr == 1");
    }

    /// Minor faults, major faults, the tracepoints, the probe, then the
    /// memory events; only the first carries the side-band records, and
    /// the probe is not inherited; dwarf mode's recording says call chains.
    #[test]
    fn event_order_and_side_band() {
        let cfg = RecordConfig {
            call_graph: CallGraph::Dwarf { stack_bytes: 8192 },
            data_path: Some("pfprof.data".into()),
            ..test_config()
        };
        // No memory events unless asked for, nor when faults are sampled.
        let interval = RecordConfig {
            resident: false,
            ..test_config()
        };
        let sampled = RecordConfig {
            period: 10,
            ..cfg.clone()
        };
        let options = SpecOptions {
            collector: false,
            entries_paired: false,
            memory_watched: false,
        };
        for other in [interval, sampled] {
            assert_eq!(
                event_specs(&other, 64, &tracepoints(), None, options).len(),
                4
            );
        }
        let probe = MainProbe {
            pmu_type: 9,
            path: CString::new("/bin/true").unwrap(),
            file_offset: 0x1000,
        };
        let options = SpecOptions {
            collector: false,
            entries_paired: false,
            memory_watched: false,
        };
        let specs = event_specs(&cfg, 64, &tracepoints(), Some(&probe), options);
        let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "minor-faults",
                "major-faults",
                "exceptions:page_fault_user",
                "exceptions:page_fault_kernel",
                "pfprof:main_entry",
                "syscalls:sys_enter_munmap",
                "syscalls:sys_enter_madvise",
                "syscalls:sys_enter_mremap",
                "syscalls:sys_exit_mremap",
                "syscalls:sys_exit_brk",
                "kmem:rss_stat",
            ]
        );
        let side_band: Vec<bool> = specs.iter().map(|s| s.attr.mmap2() == 1).collect();
        assert_eq!(side_band.iter().filter(|&&b| b).count(), 1);
        assert!(side_band[0]);
        let configs: Vec<u64> = specs[5..].iter().map(|s| s.attr.config).collect();
        assert_eq!(configs, [3, 4, 5, 6, 7, 8]);
        // Each syscall's tracepoint is inherited, as the faults are.
        assert!(specs[5..].iter().all(|s| s.attr.inherit() == 1));
        assert_eq!(specs[0].attr.build_id(), 0);
        assert_eq!(specs[4].attr.inherit(), 0);
        let file = specs[0].file_attr.unwrap();
        assert_eq!(
            file.sample_type & b::PERF_SAMPLE_CALLCHAIN as u64,
            b::PERF_SAMPLE_CALLCHAIN as u64
        );
        assert_eq!(file.sample_stack_user, 0);
        assert!(specs.iter().all(|s| s.written_as.is_none()));

        // Entries paired by the collector: the tracepoints are not opened,
        // and their records carry pfprof's ids.
        let paired = SpecOptions {
            collector: true,
            entries_paired: true,
            memory_watched: false,
        };
        let specs = event_specs(&cfg, 64, &tracepoints(), Some(&probe), paired);
        let written: Vec<Option<u64>> = specs.iter().map(|s| s.written_as).collect();
        assert_eq!(
            written[..5],
            [
                None,
                None,
                Some(bpf::ENTRY_USER_ID),
                Some(bpf::ENTRY_KERNEL_ID),
                None
            ]
        );
        assert_eq!(written[10], None);
        // The memory events written by the collector: not opened, no filter.
        let watched = SpecOptions {
            memory_watched: true,
            ..paired
        };
        let specs = event_specs(&cfg, 64, &tracepoints(), Some(&probe), watched);
        let written: Vec<Option<u64>> = specs[5..].iter().map(|s| s.written_as).collect();
        assert_eq!(written, bpf::MEMORY_IDS.map(Some));
        assert!(specs[10].filter.is_none());
        // Without the fault entries, no syscalls either.
        let none = super::Tracepoints {
            ids: None,
            ..tracepoints()
        };
        assert_eq!(event_specs(&cfg, 64, &none, None, paired).len(), 2);
    }

    fn tracepoints() -> super::Tracepoints {
        super::Tracepoints {
            ids: Some((1, 2)),
            memory: Some([3, 4, 5, 6, 7, 8]),
            note: None,
            formats: None,
        }
    }
}
