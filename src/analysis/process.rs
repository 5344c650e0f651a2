//! Process address spaces over time, rebuilt from the recorded side-band
//! records (mmap2, comm/exec, fork, exit) as they replay in time order, so a
//! lookup always sees the mappings as they were at the fault.
//!
//! perf reports no munmap: a range is retired when a later mapping covers it
//! (the loader's RELRO `mprotect`, `MAP_FIXED`, `mremap`). A fault cannot hit
//! an unmapped range, so a stale entry is only ever shadowed, never wrongly hit.
//!
//! Addresses here are process addresses (`avma`); a file-backed hit becomes a
//! `(module, file_offset)` pair, which is all the symbolizer needs to undo ASLR.

use rustc_hash::FxHashMap;

use crate::format::decode::MmapRecord;
use crate::space;
use crate::sys::maps::MappingPath;

/// Index into [`Modules`].
pub type ModuleId = u32;

/// A mapped file (or pseudo-file like `[vdso]`, or named memory: a memfd,
/// `[anon:NAME]`), identified by path and build-id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Module {
    /// Path as the kernel reported it.
    pub path: String,
    /// GNU build-id from the mmap2 record.
    pub build_id: Option<Vec<u8>>,
    /// What the path says the memory is (a function of `path`, kept so
    /// that no consumer guesses it again from the string).
    kind: MappingPath,
    /// Shared memory (a memfd, tmpfs under `/dev/shm`, SysV): its pages
    /// count as RssShmem, not RssFile. Also a function of `path`.
    shared_memory: bool,
}

impl Module {
    /// The file name, for compact display.
    pub fn short_name(&self) -> &str {
        crate::text::short(&self.path)
    }
    /// A file on disk: the symbolizer may open it, an archive may copy
    /// it. Not a memfd (its path names no file), `[vdso]` or named memory.
    pub fn is_file(&self) -> bool {
        self.kind == MappingPath::File
    }
    /// The kernel's vDSO, named from pfprof's own image when the
    /// recording's build-id says it is the same.
    pub fn is_vdso(&self) -> bool {
        self.path == crate::sys::vdso::PATH
    }
    /// Memory without a file to read code from (a memfd, `[anon:NAME]`):
    /// code executed there is JIT code, as the unwinder takes it too.
    pub fn is_anonymous(&self) -> bool {
        self.kind.is_anonymous()
    }
    /// Shared memory: the kernel counts its pages as RssShmem.
    pub fn is_shared_memory(&self) -> bool {
        self.shared_memory
    }
}

/// Whether a mapped file's path names shared memory (counted as RssShmem).
fn is_shared_memory_path(kind: MappingPath, path: &str) -> bool {
    kind == MappingPath::Memfd || path.starts_with("/dev/shm/") || path.starts_with("/SYSV")
}

/// Interned modules.
#[derive(Debug, Default, Clone)]
pub struct Modules {
    list: Vec<Module>,
    index: FxHashMap<Module, ModuleId>,
}

impl Modules {
    /// The id of `(path, build_id)`, adding it on first sight.
    pub fn intern(&mut self, path: &str, build_id: Option<Vec<u8>>) -> ModuleId {
        let kind = MappingPath::of(path.as_bytes());
        let key = Module {
            path: path.to_string(),
            build_id,
            kind,
            shared_memory: is_shared_memory_path(kind, path),
        };
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.list.len() as ModuleId;
        self.list.push(key.clone());
        self.index.insert(key, id);
        id
    }
    /// The module with this id.
    pub fn get(&self, id: ModuleId) -> &Module {
        &self.list[id as usize]
    }
    /// All modules.
    pub fn iter(&self) -> impl Iterator<Item = (ModuleId, &Module)> {
        self.list
            .iter()
            .enumerate()
            .map(|(i, m)| (i as ModuleId, m))
    }
}

/// An `mremap` call: the range asked for, the length wanted, `MREMAP_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mremap {
    /// Start of the old range (avma).
    pub addr: u64,
    /// Its bytes (0: a shared mapping duplicated).
    pub old_len: u64,
    /// Bytes wanted.
    pub new_len: u64,
    /// `MREMAP_*`.
    pub flags: u64,
}

/// `MREMAP_DONTUNMAP`: the old range stays mapped (its pages moved).
pub const MREMAP_DONTUNMAP: u64 = 4;

/// `MREMAP_FIXED`: the destination was unmapped first.
pub const MREMAP_FIXED: u64 = 2;

/// What backs a mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MapKind {
    /// A file (an ELF object or any mapped file), or a memfd: shared
    /// memory whose pages are a file's (copy-on-write as a file's), though
    /// its module names no file on disk ([`Module::is_file`]).
    File(ModuleId),
    /// The anonymous mapping right after an object's last file page: the rest
    /// of its `.bss`. Its `file_offset` continues the file mapping's, so the
    /// symbolizer maps it into the object's `.bss`.
    BssTail(ModuleId),
    /// A named kernel mapping without a file: `[vdso]`, `[vvar]`, `[vsyscall]`.
    Pseudo(ModuleId),
    /// `[heap]` (brk).
    Heap,
    /// `[stack]`.
    Stack,
    /// Any other anonymous memory (malloc arenas, thread stacks, mmap).
    Anon,
}

/// What the analysis keeps of a mapping beside its range and file offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapAttrs {
    /// Backing.
    pub kind: MapKind,
    /// PROT_* bits.
    pub prot: u32,
    /// MAP_* bits.
    pub flags: u32,
}

/// One mapping of a process (its `file_offset` virtual for a `BssTail`).
pub type Mapping = space::Mapping<MapAttrs>;

impl Mapping {
    /// Private (copy-on-write) mapping.
    pub fn is_private(&self) -> bool {
        self.value.flags & libc::MAP_SHARED as u32 == 0
    }
    /// Writable mapping.
    pub fn is_writable(&self) -> bool {
        self.value.prot & libc::PROT_WRITE as u32 != 0
    }
    /// Backed by a file's page cache (the anonymous `.bss` tail is not).
    pub fn is_file_backed(&self) -> bool {
        matches!(self.value.kind, MapKind::File(_))
    }
}

/// The mappings of one process ([`space::Mappings`]), and how high they
/// ever reached.
#[derive(Debug, Clone, Default)]
pub struct AddressSpace {
    maps: space::Mappings<MapAttrs>,
    /// Highest end of any user mapping ever inserted.
    top: u64,
}

impl AddressSpace {
    /// Adds a mapping, trimming or splitting whatever it covers.
    pub fn insert(&mut self, new: Mapping) {
        if new.end_avma <= USER_TOP && new.start_avma < new.end_avma {
            self.top = self.top.max(new.end_avma);
        }
        self.maps.insert(new);
    }

    /// The mapping containing `avma`.
    pub fn find(&self, avma: u64) -> Option<&Mapping> {
        self.maps.find(avma)
    }

    /// `munmap` took `range` away (no record but the syscall's says so).
    pub fn unmapped(&mut self, range: std::ops::Range<u64>) {
        self.maps.remove(range);
    }

    /// `asked` (an `mremap`) returned `new_start`: the range it moved or
    /// resized in place keeps the backing of the mapping it was in, its
    /// file offset carried; the old range goes, unless it stays mapped
    /// (`old_len` 0 duplicates a shared mapping; `MREMAP_DONTUNMAP`).
    pub fn remapped(&mut self, asked: &Mremap, new_start: u64) {
        let Some(old) = self.maps.find(asked.addr).cloned() else {
            return;
        };
        if asked.old_len > 0 && asked.flags & MREMAP_DONTUNMAP == 0 {
            self.maps
                .remove(asked.addr..asked.addr.saturating_add(asked.old_len));
        }
        self.insert(Mapping {
            start_avma: new_start,
            end_avma: new_start.saturating_add(asked.new_len),
            file_offset: old.file_offset_of(asked.addr),
            value: old.value,
        });
    }

    /// The address ranges of the private file mappings (the ones whose
    /// page-table entries `fork` copies once one of their pages is a
    /// private copy), sorted.
    pub fn private_file_ranges(&self) -> Vec<std::ops::Range<u64>> {
        (self.maps.iter())
            .filter(|m| m.is_file_backed() && m.is_private())
            .map(|m| m.avma_range())
            .collect()
    }

    /// The mapping ending exactly at `avma`.
    fn ending_at(&self, avma: u64) -> Option<&Mapping> {
        self.maps.ending_at(avma)
    }

    /// Whether an anonymous mapping at `avma` is the first `brk` heap: the
    /// kernel names the first growth of the heap `//anon` (its check runs
    /// before `mm->brk` moves), and `[heap]` only once it grows again. The
    /// heap starts at most 1 GiB (x86_64's brk randomization) after the
    /// executable's last mapping, where `mmap` never places memory by
    /// itself (it works down from below the stack), and there is one.
    fn first_heap_at(&self, avma: u64, exe: Option<ModuleId>) -> bool {
        const BRK_RANDOM_RANGE: u64 = 1 << 30;
        let Some(exe) = exe else { return false };
        if self.maps.iter().any(|m| m.value.kind == MapKind::Heap) {
            return false;
        }
        let exe_end = (self.maps.iter())
            .filter(
                |m| matches!(m.value.kind, MapKind::File(id) | MapKind::BssTail(id) if id == exe),
            )
            .map(|m| m.end_avma)
            .max();
        exe_end.is_some_and(|end| avma >= end && avma - end <= BRK_RANDOM_RANGE)
    }

    /// Highest end address of any user mapping.
    fn top(&self) -> u64 {
        self.top
    }
}

/// End of the x86_64 user address space (47-bit).
pub const USER_TOP: u64 = 0x8000_0000_0000;

/// A process seen in the recording.
#[derive(Debug, Clone)]
pub struct Process {
    /// Process id.
    pub pid: i32,
    /// Parent process id (0 when unknown).
    pub ppid: i32,
    /// Name (`comm`) of the main thread, after its last exec.
    pub comm: String,
    /// The executable, once exec'd and mapped.
    pub exe: Option<ModuleId>,
    /// The programs this process ran, in order: each exec's executable (and
    /// the one it ran when first seen, if it had not exec'd in the recording).
    pub execs: Vec<ModuleId>,
    /// Mappings now.
    pub space: AddressSpace,
    /// Threads seen.
    pub threads: u32,
    /// Between an exec and the first user-mode fault of the new image.
    pub exec_pending: bool,
    /// Its program (`comm`) in [`Programs`]; None until asked for, and
    /// again after its name changed.
    program: Option<ProgramId>,
    /// Renewed at every change of the process's mappings (or exe), and
    /// never given twice: what was worked out from its mappings holds while
    /// the stamp is the same.
    pub stamp: u64,
}

/// Where an address points, as attribution needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Place {
    /// Inside a module at this file offset (file mapping or bss tail).
    Module {
        /// The module.
        module: ModuleId,
        /// File offset (virtual beyond the file for the bss tail).
        file_offset: u64,
        /// Kind of the mapping.
        kind: MapKind,
    },
    /// Anonymous or special memory.
    Region(MapKind),
    /// Inferred main-thread stack (above every mapping; perf does not report
    /// the stack mapping set up by exec).
    InferredStack,
    /// Unmapped as far as the recording knows.
    Unknown,
}

/// Whether a fork record `(pid, ppid, tid)` is of a new process (its main
/// thread, in another process than its parent's), not of a new thread.
pub fn is_new_process(pid: i32, ppid: i32, tid: i32) -> bool {
    pid == tid && pid != ppid
}

/// Index into [`Programs`].
pub type ProgramId = u32;

/// The programs of a recording by their command name (`comm`), each
/// once: a system-wide recording counts faults per program, not per
/// process, so that the thousands of processes of a build do not multiply
/// what is kept.
#[derive(Debug, Default, Clone)]
pub struct Programs {
    names: Vec<String>,
    index: FxHashMap<String, ProgramId>,
}

impl Programs {
    /// The id of the program `comm`.
    pub fn intern(&mut self, comm: &str) -> ProgramId {
        if let Some(&id) = self.index.get(comm) {
            return id;
        }
        let id = self.names.len() as ProgramId;
        self.names.push(comm.to_string());
        self.index.insert(comm.to_string(), id);
        id
    }

    /// Programs interned.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The command name of program `id`.
    pub fn name(&self, id: ProgramId) -> &str {
        self.names.get(id as usize).map_or("?", String::as_str)
    }
}

/// All processes of a recording.
#[derive(Debug, Default)]
pub struct Processes {
    /// By pid.
    pub by_pid: FxHashMap<i32, Process>,
    /// Interned modules.
    pub modules: Modules,
    /// Interned programs.
    pub programs: Programs,
    /// Stamps given out (see [`Process::stamp`]).
    stamps: u64,
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl Processes {
    /// The modules and the processes `pids` by name, without their
    /// address spaces: what a profile's names need of them (an interval's,
    /// resolved on another thread while the address spaces go on).
    pub fn names_of(&self, pids: impl IntoIterator<Item = i32>) -> Processes {
        let by_pid = pids
            .into_iter()
            .filter_map(|pid| {
                let p = self.by_pid.get(&pid)?;
                let named = Process {
                    space: AddressSpace::default(),
                    execs: p.execs.clone(),
                    comm: p.comm.clone(),
                    ..Process::new(pid, 0)
                };
                Some((
                    pid,
                    Process {
                        ppid: p.ppid,
                        exe: p.exe,
                        threads: p.threads,
                        ..named
                    },
                ))
            })
            .collect();
        Processes {
            by_pid,
            modules: self.modules.clone(),
            programs: self.programs.clone(),
            stamps: 0,
        }
    }

    /// The program process `pid` runs now (by its command name).
    pub fn program_of(&mut self, pid: i32) -> ProgramId {
        let process = self
            .by_pid
            .entry(pid)
            .or_insert_with(|| Process::new(pid, 0));
        match process.program {
            Some(id) => id,
            None => {
                let id = self.programs.intern(&process.comm);
                process.program = Some(id);
                id
            }
        }
    }

    /// Process `pid` exited: its mappings are forgotten (nothing of it can
    /// fault again), its names and counts stay for the report.
    pub fn on_exit(&mut self, pid: i32) {
        if self.by_pid.contains_key(&pid) {
            self.get_or_create(pid).space = AddressSpace::default();
        }
    }

    /// The process, created on first sight, with a new stamp: the caller
    /// changes it.
    pub fn get_or_create(&mut self, pid: i32) -> &mut Process {
        self.stamps += 1;
        let stamp = self.stamps;
        let process = self
            .by_pid
            .entry(pid)
            .or_insert_with(|| Process::new(pid, stamp));
        process.stamp = stamp;
        process
    }

    /// The address space of a process seen before, with a new stamp: the
    /// caller changes it (a syscall's record: no mmap record says so).
    pub fn space_to_change(&mut self, pid: i32) -> Option<&mut AddressSpace> {
        if !self.by_pid.contains_key(&pid) {
            return None;
        }
        Some(&mut self.get_or_create(pid).space)
    }

    /// An mmap/mmap2 record: the kind of mapping it made, as placed.
    pub fn on_mmap(&mut self, m: MmapRecord, path: &[u8], build_id: Option<Vec<u8>>) -> MapKind {
        let MmapRecord {
            pid,
            avma,
            len,
            file_offset,
            prot,
            flags,
        } = m;
        let end_avma = avma.saturating_add(len);
        // A memfd and prctl-named memory keep their names as targets; their
        // modules say they are no files (code there is JIT code).
        let kind = match MappingPath::of(path) {
            MappingPath::Anon => MapKind::Anon,
            MappingPath::Heap => MapKind::Heap,
            MappingPath::Stack => MapKind::Stack,
            MappingPath::File | MappingPath::Memfd => {
                MapKind::File(self.modules.intern(&lossy(path), build_id))
            }
            // `[vdso]` has the build-id the recording's header gives it.
            MappingPath::Special | MappingPath::NamedAnon => {
                MapKind::Pseudo(self.modules.intern(&lossy(path), build_id))
            }
        };
        self.get_or_create(pid);
        let modules = &self.modules;
        let process = self.by_pid.get_mut(&pid).expect("created above");
        let (kind, file_offset) = match kind {
            MapKind::Anon => {
                // ld.so (and the kernel's ELF loader) maps the .bss pages past
                // an object's last page as anonymous memory right after it
                // (a memfd has no .bss).
                let bss_of = (process.space.ending_at(avma))
                    .filter(|prev| prev.is_writable())
                    .and_then(|prev| match prev.value.kind {
                        MapKind::File(module) if modules.get(module).is_file() => {
                            Some((module, prev.file_offset_of(avma)))
                        }
                        _ => None,
                    });
                match bss_of {
                    Some((module, offset)) => (MapKind::BssTail(module), offset),
                    None if process.space.first_heap_at(avma, process.exe) => (MapKind::Heap, 0),
                    None => (MapKind::Anon, 0),
                }
            }
            other => (other, file_offset),
        };
        if process.exe.is_none() {
            if let MapKind::File(module) = kind {
                if prot & libc::PROT_EXEC as u32 != 0 || file_offset == 0 {
                    process.exe = Some(module);
                    process.execs.push(module);
                }
            }
        }
        process.space.insert(Mapping {
            start_avma: avma,
            end_avma,
            file_offset,
            value: MapAttrs { kind, prot, flags },
        });
        kind
    }

    /// A comm record; `exec` resets the address space.
    pub fn on_comm(&mut self, pid: i32, tid: i32, name: &[u8], exec: bool) {
        let process = self.get_or_create(pid);
        if exec {
            process.space = AddressSpace::default();
            process.exe = None;
            process.exec_pending = true;
        }
        if exec || pid == tid {
            process.comm = lossy(name);
            process.program = None;
        }
    }

    /// A fork record: a new process copies its parent's address space; a new
    /// thread shares it.
    pub fn on_fork(&mut self, pid: i32, ppid: i32, tid: i32) {
        if is_new_process(pid, ppid, tid) {
            let parent = self.by_pid.get(&ppid).cloned();
            let child = self.get_or_create(pid);
            child.ppid = ppid;
            if let Some(parent) = parent {
                child.comm = parent.comm;
                child.program = parent.program;
                child.exe = parent.exe;
                child.space = parent.space;
            }
        } else {
            self.get_or_create(pid).threads += 1;
        }
    }
}

impl Process {
    /// A process first seen now: nothing known yet.
    fn new(pid: i32, stamp: u64) -> Process {
        Process {
            pid,
            ppid: 0,
            comm: String::from("?"),
            exe: None,
            execs: Vec::new(),
            space: AddressSpace::default(),
            threads: 1,
            exec_pending: false,
            program: None,
            stamp,
        }
    }

    /// Where `avma` points in this process right now.
    pub fn place(&self, avma: u64) -> Place {
        self.place_in(self.space.find(avma), avma)
    }

    /// [`Process::place`], given the mapping `avma` is in (`self.space.find`).
    pub fn place_in(&self, found: Option<&Mapping>, avma: u64) -> Place {
        let process = self;
        match found {
            Some(m) => match m.value.kind {
                MapKind::File(module) | MapKind::BssTail(module) | MapKind::Pseudo(module) => {
                    Place::Module {
                        module,
                        file_offset: m.file_offset_of(avma),
                        kind: m.value.kind,
                    }
                }
                kind => Place::Region(kind),
            },
            None if avma < USER_TOP && avma >= process.space.top() && process.space.top() > 0 => {
                Place::InferredStack
            }
            None => Place::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A memfd, tmpfs under /dev/shm and SysV segments are shared memory;
    /// files and anonymous memory are not.
    #[test]
    fn shared_memory_by_path() {
        let mut modules = Modules::default();
        let shared = |modules: &mut Modules, path: &str| {
            let id = modules.intern(path, None);
            modules.get(id).is_shared_memory()
        };
        for path in [
            "/memfd:jit (deleted)",
            "/dev/shm/queue",
            "/SYSV00000000 (deleted)",
        ] {
            assert!(shared(&mut modules, path), "{path}");
        }
        for path in ["/usr/lib/libc.so.6", "[heap]", "//anon", "/dev/shmx"] {
            assert!(!shared(&mut modules, path), "{path}");
        }
    }

    /// An mmap record of `len` bytes at `avma`.
    fn rec(pid: i32, avma: u64, len: u64, file_offset: u64, prot: u32, flags: u32) -> MmapRecord {
        MmapRecord {
            pid,
            avma,
            len,
            file_offset,
            prot,
            flags,
        }
    }

    fn map(start: u64, end: u64, off: u64) -> Mapping {
        Mapping {
            start_avma: start,
            end_avma: end,
            file_offset: off,
            value: MapAttrs {
                kind: MapKind::Anon,
                prot: 3,
                flags: 2,
            },
        }
    }

    /// Inserting over existing mappings trims, splits and replaces them.
    #[test]
    fn insert_overlaps() {
        type Range = (u64, u64, u64);
        let cases: &[(&[Range], Range, &[Range])] = &[
            // disjoint
            (
                &[(0x1000, 0x2000, 0)],
                (0x3000, 0x4000, 0),
                &[(0x1000, 0x2000, 0), (0x3000, 0x4000, 0)],
            ),
            // split in the middle (RELRO mprotect): the right part keeps its file offset
            (
                &[(0x1000, 0x5000, 0x10000)],
                (0x2000, 0x3000, 0x11000),
                &[
                    (0x1000, 0x2000, 0x10000),
                    (0x2000, 0x3000, 0x11000),
                    (0x3000, 0x5000, 0x12000),
                ],
            ),
            // cover exactly
            (
                &[(0x1000, 0x2000, 0)],
                (0x1000, 0x2000, 7),
                &[(0x1000, 0x2000, 7)],
            ),
            // cover two and trim ends
            (
                &[(0x1000, 0x3000, 0), (0x3000, 0x6000, 0x2000)],
                (0x2000, 0x4000, 9),
                &[
                    (0x1000, 0x2000, 0),
                    (0x2000, 0x4000, 9),
                    (0x4000, 0x6000, 0x3000),
                ],
            ),
        ];
        for (before, new, after) in cases {
            let mut space = AddressSpace::default();
            for &(s, e, o) in *before {
                space.insert(map(s, e, o));
            }
            space.insert(map(new.0, new.1, new.2));
            let got: Vec<_> = space
                .maps
                .iter()
                .map(|m| (m.start_avma, m.end_avma, m.file_offset))
                .collect();
            assert_eq!(&got, after, "inserting {new:x?} into {before:x?}");
        }
    }

    /// `mremap` moves a mapping (its file offset carried, the old range
    /// gone), grows or shrinks one in place, and leaves the old range
    /// mapped where it duplicates (`old_len` 0) or is told to.
    #[test]
    fn remapped_mappings() {
        let ranges = |space: &AddressSpace| -> Vec<(u64, u64, u64)> {
            (space.maps.iter())
                .map(|m| (m.start_avma, m.end_avma, m.file_offset))
                .collect()
        };
        let asked = |addr, old_len, new_len, flags| Mremap {
            addr,
            old_len,
            new_len,
            flags,
        };
        let mut space = AddressSpace::default();
        space.insert(map(0x10000, 0x18000, 0x100));
        // Its last 0x4000 move to 0x40000, grown to 0x6000.
        space.remapped(&asked(0x14000, 0x4000, 0x6000, 1), 0x40000);
        let moved = [(0x10000, 0x14000, 0x100), (0x40000, 0x46000, 0x4100)];
        assert_eq!(ranges(&space), moved);
        assert_eq!(
            space.find(0x45fff).map(|m| m.value.kind),
            Some(MapKind::Anon)
        );
        // Grown in place, then shrunk in place.
        space.remapped(&asked(0x10000, 0x4000, 0x8000, 1), 0x10000);
        assert_eq!(ranges(&space)[0], (0x10000, 0x18000, 0x100));
        space.remapped(&asked(0x10000, 0x8000, 0x2000, 0), 0x10000);
        assert_eq!(ranges(&space)[0], (0x10000, 0x12000, 0x100));
        // Duplicated, and moved with MREMAP_DONTUNMAP: the old stays.
        space.remapped(&asked(0x10000, 0, 0x2000, 1), 0x60000);
        space.remapped(
            &asked(0x40000, 0x6000, 0x6000, 3 | MREMAP_DONTUNMAP),
            0x80000,
        );
        assert_eq!(
            ranges(&space),
            [
                (0x10000, 0x12000, 0x100),
                (0x40000, 0x46000, 0x4100),
                (0x60000, 0x62000, 0x100),
                (0x80000, 0x86000, 0x4100),
            ]
        );
        // Nothing mapped where it asked: nothing changes.
        space.remapped(&asked(0x90000, 0x1000, 0x1000, 1), 0xa0000);
        assert_eq!(ranges(&space).len(), 4);
    }

    /// Lookups hit the right mapping and miss gaps.
    #[test]
    fn find() {
        let mut space = AddressSpace::default();
        space.insert(map(0x1000, 0x2000, 0));
        space.insert(map(0x4000, 0x6000, 0x1000));
        for (avma, want) in [
            (0x0fff, None),
            (0x1000, Some(0x1000)),
            (0x1fff, Some(0x1000)),
            (0x2000, None),
            (0x5fff, Some(0x4000)),
            (0x6000, None),
        ] {
            assert_eq!(space.find(avma).map(|m| m.start_avma), want, "{avma:#x}");
        }
        // The mapping found last is tried first: one split or shifted since
        // must not answer for addresses it no longer holds.
        assert_eq!(space.find(0x5fff).map(|m| m.start_avma), Some(0x4000));
        space.insert(map(0x5000, 0x5800, 0x9000));
        let found =
            |space: &AddressSpace, avma| space.find(avma).map(|m| (m.start_avma, m.file_offset));
        assert_eq!(found(&space, 0x5fff), Some((0x5800, 0x2800)));
        assert_eq!(found(&space, 0x5400), Some((0x5000, 0x9000)));
        space.insert(map(0x0, 0x800, 0));
        assert_eq!(found(&space, 0x5400), Some((0x5000, 0x9000)));
        assert_eq!(found(&space, 0x4000), Some((0x4000, 0x1000)));
    }

    /// A module knows what its path named: a file to open, the vDSO, or
    /// memory without a file (a memfd, `[anon:NAME]`); anonymous memory
    /// right after a writable memfd mapping is no .bss tail of it.
    #[test]
    fn module_kinds() {
        let mut p = Processes::default();
        let prw = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        let mut module_at =
            |avma, path: &[u8]| match p.on_mmap(rec(1, avma, 0x1000, 0, prw, 1), path, None) {
                MapKind::File(id) | MapKind::Pseudo(id) => id,
                kind => panic!("{kind:?}"),
            };
        let file = module_at(0x1000, b"/usr/lib/libc.so.6");
        let vdso = module_at(0x3000, b"[vdso]");
        let memfd = module_at(0x7f00_0000_0000, b"/memfd:jit (deleted)");
        let named = module_at(0x7000, b"[anon:v8 code]");
        let flags = |id| {
            let m = p.modules.get(id);
            (m.is_file(), m.is_vdso(), m.is_anonymous())
        };
        assert_eq!(flags(file), (true, false, false));
        assert_eq!(flags(vdso), (false, true, false));
        assert_eq!(flags(memfd), (false, false, true));
        assert_eq!(flags(named), (false, false, true));
        // Right after the writable memfd mapping (where mmap places memory,
        // far from the first heap): anonymous memory, no tail.
        let after = p.on_mmap(
            rec(1, 0x7f00_0000_1000, 0x1000, 0, prw, 0x22),
            b"//anon",
            None,
        );
        assert_eq!(after, MapKind::Anon);
        // Right after the writable file mapping: its .bss tail.
        let after = p.on_mmap(rec(1, 0x2000, 0x1000, 0, prw, 0x22), b"//anon", None);
        assert_eq!(after, MapKind::BssTail(file));
    }

    /// An anonymous mapping right after a writable file mapping is that
    /// object's .bss tail, with file offsets continuing the file's.
    /// A process's stamp changes with every change of its mappings and
    /// is never given twice, not even to a pid used again.
    #[test]
    fn stamps_change_with_the_mappings() {
        let mut p = Processes::default();
        let mut seen = std::collections::HashSet::new();
        let mut stamp = |p: &Processes, pid: i32| {
            let stamp = p.by_pid[&pid].stamp;
            assert!(seen.insert(stamp), "stamp {stamp} given twice");
        };
        p.on_mmap(rec(10, 0x1000, 0x1000, 0, 5, 2), b"/bin/app", None);
        stamp(&p, 10);
        p.on_mmap(rec(10, 0x3000, 0x1000, 0, 5, 2), b"/bin/lib", None);
        stamp(&p, 10);
        p.on_fork(11, 10, 11);
        stamp(&p, 11);
        p.on_comm(11, 11, b"other", true);
        stamp(&p, 11);
        p.on_exit(10);
        stamp(&p, 10);
        p.by_pid.remove(&10);
        p.on_fork(10, 1, 10);
        stamp(&p, 10);
        let before = p.by_pid[&11].stamp;
        p.program_of(11);
        assert_eq!(p.by_pid[&11].stamp, before, "naming changes no mapping");
    }

    #[test]
    fn bss_tail_and_fork_and_exec() {
        let mut p = Processes::default();
        let prw = (libc::PROT_READ | libc::PROT_WRITE) as u32;
        p.on_comm(10, 10, b"app", true);
        p.on_mmap(
            rec(10, 0x40_0000, 0x1000, 0, 5, 2),
            b"/bin/app",
            Some(vec![1, 2]),
        );
        p.on_mmap(
            rec(10, 0x40_3000, 0x1000, 0x2000, prw, 2),
            b"/bin/app",
            Some(vec![1, 2]),
        );
        p.on_mmap(rec(10, 0x40_4000, 0x3000, 0, prw, 0x22), b"//anon", None);
        // The first anonymous mapping within 1 GiB after the executable is
        // the heap's first growth (named //anon by the kernel); later ones,
        // and those where mmap places memory, are anonymous memory.
        p.on_mmap(rec(10, 0x50_0000, 0x1000, 0, prw, 0x22), b"//anon", None);
        p.on_mmap(rec(10, 0x60_0000, 0x1000, 0, prw, 0x22), b"//anon", None);
        p.on_mmap(
            rec(10, 0x7f00_0000_0000, 0x1000, 0, prw, 0x22),
            b"//anon",
            None,
        );
        let app = p.modules.intern("/bin/app", Some(vec![1, 2]));
        assert_eq!(p.by_pid[&10].exe, Some(app));
        assert_eq!(
            p.by_pid[&10].place(0x40_5010),
            Place::Module {
                module: app,
                file_offset: 0x4010,
                kind: MapKind::BssTail(app)
            }
        );
        assert_eq!(p.by_pid[&10].place(0x50_0000), Place::Region(MapKind::Heap));
        assert_eq!(p.by_pid[&10].place(0x60_0000), Place::Region(MapKind::Anon));
        assert_eq!(
            p.by_pid[&10].place(0x7f00_0000_0000),
            Place::Region(MapKind::Anon)
        );
        assert_eq!(p.by_pid[&10].place(0x7ffd_0000_0000), Place::InferredStack);
        assert_eq!(p.by_pid[&10].place(0x100), Place::Unknown);
        p.on_fork(11, 10, 11);
        assert_eq!(p.by_pid[&11].comm, "app");
        assert_eq!(
            p.by_pid[&11].place(0x40_3000),
            p.by_pid[&10].place(0x40_3000)
        );
        p.on_comm(11, 11, b"other", true);
        assert_eq!(p.by_pid[&11].place(0x40_3000), Place::Unknown);
        assert_eq!(p.by_pid[&11].comm, "other");
        // a thread shares, it does not copy
        p.on_fork(10, 10, 12);
        assert_eq!(p.by_pid[&10].threads, 2);
    }
}
