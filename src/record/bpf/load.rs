//! Loading the collector's object (`fault.bpf.o`): its maps as its
//! `maps` section defines them (the ring buffers, one per group of CPUs,
//! among them), and its programs, relocated to those maps.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};

use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};

use crate::format::events::{le_u32, le_u64s};
use crate::sys::{bpf as sysbpf, procfs};

use super::memory_events;
use super::{
    BpfError, ChainMode, MemoryPrograms, Settings, MAP_ARRAY, MAP_ARRAY_OF_MAPS, MAP_PROG_ARRAY,
    MAP_RINGBUF,
};

/// A map definition of the object's `maps` section.
pub(super) struct MapDef {
    name: String,
    shape: sysbpf::MapShape,
}

/// Reads the object's map definitions, keyed by their offset in `maps`.
pub(super) fn map_defs(
    file: &object::File<'_>,
) -> Result<(object::SectionIndex, Vec<(u64, MapDef)>), BpfError> {
    let bad = |what: &str| BpfError::Object(what.to_string());
    let section = file
        .section_by_name("maps")
        .ok_or_else(|| bad("no maps section"))?;
    let data = section.data().map_err(|e| bad(&e.to_string()))?;
    let mut defs = Vec::new();
    for symbol in file.symbols() {
        if symbol.section_index() != Some(section.index()) {
            continue;
        }
        let offset = symbol.address() as usize;
        let def = data
            .get(offset..offset + 20)
            .ok_or_else(|| bad("a map definition is cut short"))?;
        let word = |i: usize| le_u32(def, i * 4).unwrap_or_default();
        defs.push((
            symbol.address(),
            MapDef {
                name: symbol.name().map_err(|e| bad(&e.to_string()))?.to_string(),
                shape: sysbpf::MapShape {
                    map_type: word(0),
                    key_size: word(1),
                    value_size: word(2),
                    max_entries: word(3),
                    map_flags: word(4),
                },
            },
        ));
    }
    Ok((section.index(), defs))
}
/// The instructions of program section `name`, each map load pointed at
/// its map (`maps`: offset in the `maps` section → fd).
pub(super) fn program(
    file: &object::File<'_>,
    name: &str,
    maps_section: object::SectionIndex,
    maps: &[(u64, i32)],
) -> Result<Vec<u64>, BpfError> {
    let bad = |what: String| BpfError::Object(what);
    let section = file
        .section_by_name(name)
        .ok_or_else(|| bad(format!("no section {name}")))?;
    let data = section.data().map_err(|e| bad(e.to_string()))?;
    if data.len() % 8 != 0 {
        return Err(bad(format!("{name} is not whole instructions")));
    }
    let mut insns: Vec<u64> = le_u64s(data).collect();
    for (offset, relocation) in section.relocations() {
        let RelocationTarget::Symbol(index) = relocation.target() else {
            return Err(bad(format!("{name}: a relocation without a symbol")));
        };
        let symbol = file
            .symbol_by_index(index)
            .map_err(|e| bad(e.to_string()))?;
        if symbol.section_index() != Some(maps_section) {
            return Err(bad(format!("{name}: a relocation to something not a map")));
        }
        let fd = maps
            .iter()
            .find(|(at, _)| *at == symbol.address())
            .map(|&(_, fd)| fd)
            .ok_or_else(|| bad(format!("{name}: a relocation to an unknown map")))?;
        let insn = insns
            .get_mut((offset / 8) as usize)
            .ok_or_else(|| bad(format!("{name}: a relocation past the end")))?;
        // `ld_imm64 dst, map`: src_reg = BPF_PSEUDO_MAP_FD, imm = the fd.
        if *insn & 0xff != 0x18 {
            return Err(bad(format!(
                "{name}: a map relocation on another instruction"
            )));
        }
        let regs = ((*insn >> 8) & 0x0f) | (1 << 4);
        *insn = (*insn & 0xff) | (regs << 8) | (u64::from(fd as u32) << 32);
    }
    Ok(insns)
}

/// CPUs that share a ring buffer, which holds their shares together: a
/// burst comes from one CPU or another, and a shared ring gives it the
/// others' share too. The kernel serializes the writers of a ring with a
/// spin lock held for the reservation only, so a few CPUs share one without
/// waiting on each other. Records of a shared ring are in the order they
/// were reserved, which is their time order within the time between the
/// time stamp and the reservation (the merge of the rings takes each ring
/// in its own order). Sharing did not make room for smaller rings: one 64
/// MiB ring for two CPUs (half the memory) lost 2,471 and 6,783 records in
/// 2 of 6 runs on the busy host's mix, in the first seconds of the run.
pub const CPUS_PER_RING: usize = 4;

/// Bytes of each ring for `bytes_per_cpu` and `cpus` online: every ring
/// the same size (the array of rings takes one shape), a power of two.
pub(super) fn shared_ring_bytes(bytes_per_cpu: u32, cpus: usize) -> u32 {
    let sharing = cpus.clamp(1, CPUS_PER_RING) as u32;
    bytes_per_cpu
        .saturating_mul(sharing)
        .checked_next_power_of_two()
        .unwrap_or(1 << 31)
}

/// The `online` CPUs in groups of [`CPUS_PER_RING`], and a BPF ring buffer
/// of `bytes` for each group.
pub(super) fn create_rings(
    online: &[i32],
    bytes: u32,
) -> Result<Vec<(Vec<i32>, OwnedFd)>, BpfError> {
    let shape = sysbpf::MapShape {
        map_type: MAP_RINGBUF,
        key_size: 0,
        value_size: 0,
        max_entries: bytes,
        map_flags: 0,
    };
    online
        .chunks(CPUS_PER_RING)
        .map(|cpus| {
            let fd = sysbpf::map_create(shape, "pfprof_ring").map_err(|source| BpfError::Map {
                name: format!("ring of CPUs {cpus:?}"),
                source,
            })?;
            Ok((cpus.to_vec(), fd))
        })
        .collect()
}

/// The completion program for `settings`: one per call-graph mode, with
/// and without kernel frames (see `fault.bpf.c`).
pub(super) fn completion_section(settings: &Settings) -> String {
    let mode = match settings.chain {
        ChainMode::None => "none",
        ChainMode::Fp => "fp",
        ChainMode::Dwarf { .. } => "dwarf",
    };
    let kernel = if settings.kernel_frames {
        "+kernel"
    } else {
        ""
    };
    format!("perf_event/{mode}{kernel}")
}

/// The collector's maps by name (each with its shape), and (offset in the
/// `maps` section, fd) of each for the programs' relocations.
pub(super) type CreatedMaps = (
    Vec<(u64, i32)>,
    HashMap<String, (OwnedFd, sysbpf::MapShape)>,
);

/// Creates the maps `defs` describes: those indexed by CPU with an entry
/// per possible CPU (`cpus`), the array of rings with `rings`' shape; the
/// memory events' tables of processes the least they can be when
/// `memory` is off (the programs name them; an LRU map's entries are all
/// made at once, ~1.8 ms each of 65,536).
pub(super) fn create_maps(
    defs: &[(u64, MapDef)],
    rings: &[(Vec<i32>, OwnedFd)],
    cpus: u32,
    memory: bool,
) -> Result<CreatedMaps, BpfError> {
    let mut fds = Vec::new();
    let mut by_name = HashMap::new();
    for (offset, def) in defs {
        let mut shape = def.shape;
        match def.name.as_str() {
            "rings" | "scratch" => shape.max_entries = cpus,
            "followed" | "mm_owners" if !memory => shape.max_entries = cpus,
            _ => {}
        }
        let created = match (shape.map_type, rings.first()) {
            (MAP_ARRAY_OF_MAPS, Some((_, inner))) => {
                sysbpf::map_create_of_maps(shape, inner, &def.name)
            }
            _ => sysbpf::map_create(shape, &def.name),
        };
        let fd = created.map_err(|source| BpfError::Map {
            name: def.name.clone(),
            source,
        })?;
        fds.push((*offset, fd.as_raw_fd()));
        by_name.insert(def.name.clone(), (fd, shape));
    }
    Ok((fds, by_name))
}

/// Points each CPU's slot of the `rings` map at its group's ring, in one
/// batch: an update of a map of maps waits for the programs that may read
/// it (an RCU grace period, 12-16 ms here), once a call.
pub(super) fn fill_rings(
    rings_map: &OwnedFd,
    rings: &[(Vec<i32>, OwnedFd)],
) -> Result<(), BpfError> {
    let slots: Vec<(u32, u32)> = (rings.iter())
        .flat_map(|(cpus, ring)| {
            cpus.iter()
                .map(|&cpu| (cpu as u32, ring.as_raw_fd() as u32))
        })
        .collect();
    sysbpf::map_update_u32s(rings_map, &slots).map_err(|source| BpfError::Map {
        name: "rings".into(),
        source,
    })
}

/// Loads the programs of the collector's object, relocated to its maps.
pub(super) struct Loader<'a> {
    pub(super) file: &'a object::File<'a>,
    pub(super) maps_section: object::SectionIndex,
    pub(super) fds: &'a [(u64, i32)],
}

impl Loader<'_> {
    /// Loads the program of `section` as `prog_type`, named `name`.
    fn load(&self, section: &str, prog_type: u32, name: &str) -> Result<OwnedFd, BpfError> {
        let insns = program(self.file, section, self.maps_section, self.fds)?;
        sysbpf::prog_load(prog_type, &insns, "Dual MIT/GPL", name).map_err(|source| {
            BpfError::Load {
                name: name.to_string(),
                source,
            }
        })
    }
}

/// The collector's programs, loaded.
pub(super) struct Programs {
    pub(super) completion: OwnedFd,
    pub(super) on_major: OwnedFd,
    pub(super) jump: OwnedFd,
    pub(super) entry_user: OwnedFd,
    pub(super) entry_kernel: OwnedFd,
    pub(super) raw_entries: Option<(OwnedFd, OwnedFd)>,
    pub(super) memory: Option<MemoryPrograms>,
    pub(super) exec_link: Option<OwnedFd>,
}

/// Loads the programs `settings` needs; `take` hands over a map by name
/// (and type) that a program's holder keeps.
pub(super) fn load_programs(
    loader: &Loader<'_>,
    settings: &Settings,
    mut take: impl FnMut(&str, Option<u32>) -> Result<OwnedFd, BpfError>,
) -> Result<Programs, BpfError> {
    let load = |section: &str, prog_type: u32, name: &str| loader.load(section, prog_type, name);
    let perf = sysbpf::PROG_TYPE_PERF_EVENT;
    let tracepoint = sysbpf::PROG_TYPE_TRACEPOINT;
    let raw = sysbpf::PROG_TYPE_RAW_TRACEPOINT;
    let raw_entries = load("raw_tracepoint/user", raw, "pfprof_raw_u")
        .and_then(|u| Ok((u, load("raw_tracepoint/kernel", raw, "pfprof_raw_k")?)))
        .ok();
    let memory = settings.memory.then_some(()).and_then(|()| {
        let syscall = |(section, name)| load(section, tracepoint, name).ok();
        Some(MemoryPrograms {
            config: take("rss_config", Some(MAP_ARRAY)).ok()?,
            mode: take("rss_mode", Some(MAP_ARRAY)).ok()?,
            rss: load(
                &memory_events::rss_stat_section(procfs::possible_cpu_ids()),
                raw,
                "pfprof_rss",
            )
            .ok()?,
            raw: [
                load("raw_tracepoint/sys_enter", raw, "pfprof_sys_in").ok()?,
                load("raw_tracepoint/sys_exit", raw, "pfprof_sys_out").ok()?,
            ],
            by_events: [
                syscall(("tracepoint/munmap", "pfprof_munmap"))?,
                syscall(("tracepoint/madvise", "pfprof_madvise"))?,
                syscall(("tracepoint/mremap", "pfprof_mremap"))?,
                syscall(("tracepoint/mremap_exit", "pfprof_mremap_x"))?,
                syscall(("tracepoint/brk_exit", "pfprof_brk_x"))?,
            ],
        })
    });
    // Dwarf's stack tops are forgotten at exec in the kernel, at once
    // (see `on_exec`); refused, pfprof's own forgetting remains.
    let exec_link = matches!(settings.chain, ChainMode::Dwarf { .. })
        .then(|| load("raw_tracepoint/exec", raw, "pfprof_exec").ok())
        .flatten()
        .and_then(|prog| sysbpf::attach_raw_tracepoint("sched_process_exec", &prog).ok());
    let completion = load(&completion_section(settings), perf, "pfprof_fault")?;
    let jump = take("completion", Some(MAP_PROG_ARRAY))?;
    let completion_fd = completion.as_raw_fd() as u32;
    sysbpf::map_update(&jump, &0u32.to_le_bytes(), &completion_fd.to_le_bytes()).map_err(
        |source| BpfError::Map {
            name: "completion".into(),
            source,
        },
    )?;
    Ok(Programs {
        completion,
        on_major: load("perf_event/major", perf, "pfprof_major")?,
        jump,
        entry_user: load("tracepoint/user", tracepoint, "pfprof_entry_u")?,
        entry_kernel: load("tracepoint/kernel", tracepoint, "pfprof_entry_k")?,
        raw_entries,
        memory,
        exec_link,
    })
}
