//! The in-kernel collector of `--call-graph dwarf` (the default): a BPF
//! program (`fault.bpf.c`, compiled into the committed `fault.bpf.o`) on the
//! `minor-faults` and `major-faults` events writes each fault as one compact
//! record, with only the stack bytes that are there to copy, into the ring
//! buffer pfprof already drains; the events' own samples, whose stack copy
//! reserves the whole size asked for whatever it holds, are suppressed.
//!
//! Why: a `--call-graph dwarf` sample reserves its full stack copy (32 KiB
//! by default) in the ring, so a 256 MiB ring holds about 8,000 faults and
//! a drain delayed by tens of milliseconds loses records; the kernel also
//! copies 32 KiB per fault where the stack above the stack pointer is
//! usually a few KiB (the copy stops at the end of the stack mapping). The
//! records here are the bytes copied, so the same ring holds ten to a
//! hundred times as many faults.
//!
//! The loader is small on purpose: the object has one program per fault
//! event, legacy map definitions (the `maps` section), no BTF, no global
//! data and no calls, so loading is: create the maps, point each map load
//! at its map's fd, load.

use std::io;
use std::os::fd::OwnedFd;

use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};
use perf_event_open_sys::bindings as b;

use crate::format::events::own;
use crate::format::events::{le_u32, le_u64, le_u64s};
use crate::sys::{bpf as sysbpf, procfs, PerfEventAttr};
use crate::unwind::UserRegs;

/// The compiled collector (see `build-bpf.sh`).
pub static OBJECT: &[u8] = include_bytes!("fault.bpf.o");

/// The most stack bytes a record carries (`MAX_STACK` in fault.bpf.c).
pub const MAX_STACK_BYTES: u32 = 61_440;

/// `MAGIC` in fault.bpf.c: the first word of each record.
const MAGIC: u32 = 0x7066_6231;
const FLAG_MAJOR: u32 = 1;
const FLAG_KERNEL_MODE: u32 = 2;
/// Bytes of the record's fixed part (`struct fault`).
const FAULT_HEADER: usize = 96;

/// `BPF_MAP_TYPE_PERF_EVENT_ARRAY`, `BPF_MAP_TYPE_ARRAY`.
const MAP_PERF_EVENT_ARRAY: u32 = 4;
const MAP_ARRAY: u32 = 2;

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

/// The loaded collector: its programs and maps.
pub struct FaultCollector {
    minor: OwnedFd,
    major: OwnedFd,
    /// The `events` map: CPU → its bpf-output event.
    events: OwnedFd,
    _scratch: OwnedFd,
    _config: OwnedFd,
}

/// A map definition of the object's `maps` section.
struct MapDef {
    name: String,
    map_type: u32,
    key_size: u32,
    value_size: u32,
}

/// Reads the object's map definitions, keyed by their offset in `maps`.
fn map_defs(
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
                map_type: word(0),
                key_size: word(1),
                value_size: word(2),
            },
        ));
    }
    Ok((section.index(), defs))
}

/// The instructions of program section `name`, each map load pointed at
/// its map (`maps`: offset in the `maps` section → fd).
fn program(
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

/// The number of CPU ids, for the maps indexed by CPU (1,024 when the
/// kernel does not say).
fn possible_cpus() -> u32 {
    procfs::possible_cpu_ids().unwrap_or(1024)
}

impl FaultCollector {
    /// Loads the collector: records carry at most `stack_bytes` of user
    /// stack (≤ [`MAX_STACK_BYTES`]) and, with `kernel_frames`, the kernel's
    /// call chain of faults taken in kernel mode; the faults of process
    /// `own_pid` (pfprof's, system-wide) carry neither.
    pub fn load(
        stack_bytes: u32,
        kernel_frames: bool,
        own_pid: Option<i32>,
    ) -> Result<FaultCollector, BpfError> {
        let file = object::File::parse(OBJECT).map_err(|e| BpfError::Object(e.to_string()))?;
        let (maps_section, defs) = map_defs(&file)?;
        let cpus = possible_cpus();
        let mut fds = Vec::new();
        let mut by_name = std::collections::HashMap::new();
        for (offset, def) in &defs {
            let entries = match def.name.as_str() {
                "config" => 1,
                _ => cpus,
            };
            let fd = sysbpf::map_create(
                def.map_type,
                def.key_size,
                def.value_size,
                entries,
                &def.name,
            )
            .map_err(|source| BpfError::Map {
                name: def.name.clone(),
                source,
            })?;
            fds.push((*offset, std::os::fd::AsRawFd::as_raw_fd(&fd)));
            by_name.insert(def.name.clone(), (fd, def.map_type));
        }
        let mut take = |name: &str, map_type: u32| {
            by_name
                .remove(name)
                .filter(|(_, t)| *t == map_type)
                .map(|(fd, _)| fd)
                .ok_or_else(|| BpfError::Object(format!("no map {name}")))
        };
        let events = take("events", MAP_PERF_EVENT_ARRAY)?;
        let scratch = take("scratch", MAP_ARRAY)?;
        let config = take("config", MAP_ARRAY)?;
        let mut value = Vec::with_capacity(16);
        value.extend_from_slice(&stack_bytes.min(MAX_STACK_BYTES).to_le_bytes());
        value.extend_from_slice(&u32::from(kernel_frames).to_le_bytes());
        value.extend_from_slice(&own_pid.map_or(0, |pid| pid as u32).to_le_bytes());
        value.extend_from_slice(&0u32.to_le_bytes());
        sysbpf::map_update(&config, &0u32.to_le_bytes(), &value).map_err(|source| {
            BpfError::Map {
                name: "config".into(),
                source,
            }
        })?;
        let load = |section: &str, name: &str| -> Result<OwnedFd, BpfError> {
            let insns = program(&file, section, maps_section, &fds)?;
            sysbpf::prog_load(sysbpf::PROG_TYPE_PERF_EVENT, &insns, "Dual MIT/GPL", name).map_err(
                |source| BpfError::Load {
                    name: name.to_string(),
                    source,
                },
            )
        };
        Ok(FaultCollector {
            minor: load("perf_event/minor", "pfprof_minor")?,
            major: load("perf_event/major", "pfprof_major")?,
            events,
            _scratch: scratch,
            _config: config,
        })
    }

    /// The bpf-output event of one CPU, whose samples carry the records:
    /// its output is redirected into that CPU's ring (`set_output`), so it
    /// shares the clock and sample-id layout of `base` (pfprof's first event).
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

    /// Sends CPU `cpu`'s records to `output` (its bpf-output event).
    pub fn set_output(&self, cpu: i32, output: &OwnedFd) -> io::Result<()> {
        let fd = std::os::fd::AsRawFd::as_raw_fd(output) as u32;
        sysbpf::map_update(&self.events, &(cpu as u32).to_le_bytes(), &fd.to_le_bytes())
    }

    /// Runs the collector on each sample of `event`, a `minor-faults`
    /// (`major` false) or `major-faults` event.
    pub fn attach(&self, event: &OwnedFd, major: bool) -> io::Result<()> {
        sysbpf::attach_to_event(event, if major { &self.major } else { &self.minor })
    }
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
    /// The user registers unwinding needs.
    pub regs: UserRegs,
    /// The kernel's call chain (kernel-mode faults under `--kernel`),
    /// innermost first, as 8-byte little-endian IPs.
    pub kernel_ips: &'a [u8],
    /// The user stack from the stack pointer up.
    pub stack: &'a [u8],
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
        let user = |i: usize| word(24 + 8 * i);
        let kernel_len = (half(88)? as usize).checked_mul(8)?;
        let stack_len = half(92)? as usize;
        let kernel_ips = raw.get(FAULT_HEADER..FAULT_HEADER.checked_add(kernel_len)?)?;
        let stack_at = FAULT_HEADER + kernel_len;
        let stack = raw.get(stack_at..stack_at.checked_add(stack_len)?)?;
        Some(Fault {
            major: flags & FLAG_MAJOR != 0,
            kernel_mode: flags & FLAG_KERNEL_MODE != 0,
            ip: word(8)?,
            addr: word(16)?,
            regs: UserRegs {
                ip: user(0)?,
                sp: user(1)?,
                bp: user(2)?,
                callee: [user(3), user(4), user(5), user(6), user(7)],
            },
            kernel_ips,
            stack,
        })
    }
}

/// Whether the collector can run here: it loads (BPF permitted, a kernel
/// with the helpers it calls). Used by tests to skip, not by `record`,
/// which loads it and falls back with a note.
pub fn available() -> bool {
    FaultCollector::load(8, false, None).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys;

    /// A record as fault.bpf.c writes it.
    fn record(flags: u32, kernel_ips: &[u64], stack: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&MAGIC.to_le_bytes());
        r.extend_from_slice(&flags.to_le_bytes());
        for word in [
            0x1000u64,
            0xdead_0000,
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
        r.extend_from_slice(&(kernel_ips.len() as u32).to_le_bytes());
        r.extend_from_slice(&(stack.len() as u32).to_le_bytes());
        assert_eq!(r.len(), FAULT_HEADER);
        for ip in kernel_ips {
            r.extend_from_slice(&ip.to_le_bytes());
        }
        r.extend_from_slice(stack);
        // The kernel pads raw data to 8 bytes after its u32 size.
        r.extend_from_slice(&[0; 4]);
        r
    }

    /// Every field is read from its place; kernel IPs and stack bytes are
    /// where the lengths say.
    #[test]
    fn parses_the_collectors_record() {
        let raw = record(
            FLAG_MAJOR | FLAG_KERNEL_MODE,
            &[0xffff_1111, 0xffff_2222],
            b"stackbytes",
        );
        let f = Fault::parse(&raw).unwrap();
        assert!(f.major && f.kernel_mode);
        assert_eq!((f.ip, f.addr), (0x1000, 0xdead_0000));
        assert_eq!(
            (f.regs.ip, f.regs.sp, f.regs.bp),
            (0x401234, 0x7ffc_0000, 0x7ffc_0100)
        );
        assert_eq!(
            f.regs.callee,
            [Some(3), Some(12), Some(13), Some(14), Some(15)]
        );
        assert_eq!(f.kernel_ips.len(), 16);
        assert_eq!(&f.kernel_ips[8..16], &0xffff_2222u64.to_le_bytes());
        assert_eq!(f.stack, b"stackbytes");
        let minor = record(0, &[], &[]);
        let f = Fault::parse(&minor).unwrap();
        assert!(!f.major && !f.kernel_mode && f.stack.is_empty());
    }

    /// Anything else, or a record whose lengths point past its end, is not
    /// read (the rewriter counts it as a bad record).
    #[test]
    fn refuses_what_is_not_a_whole_record() {
        let raw = record(0, &[1], &[7; 64]);
        assert!(Fault::parse(&raw[..FAULT_HEADER - 1]).is_none());
        assert!(Fault::parse(&raw[..FAULT_HEADER + 8 + 63]).is_none());
        let mut bad_magic = raw.clone();
        bad_magic[0] ^= 1;
        assert!(Fault::parse(&bad_magic).is_none());
        let mut huge = raw.clone();
        huge[88..92].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Fault::parse(&huge).is_none());
        huge[88..92].copy_from_slice(&1u32.to_le_bytes());
        huge[92..96].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Fault::parse(&huge).is_none());
        assert!(Fault::parse(&[]).is_none());
    }

    /// The output event keeps the first event's sample-id layout and clock
    /// (its records sort and name their event as the others), carries no
    /// side-band records, and is enabled now for its CPU alone.
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
        if let Err(e) = FaultCollector::load(32768, true, Some(1)) {
            panic!("{e}");
        }
    }
}
