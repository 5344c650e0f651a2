//! The resident-page ledger: per process, which pages are resident and which
//! fault made each present (its site: process, stack, target, kind of
//! memory). The syscalls that give memory back (`munmap`, `mremap`,
//! `madvise`, `brk`), exec and exit take pages away. It keeps the pages of
//! each site now, at the peak of the recorded processes' total, and at each
//! process's exit (or the recording's end): what `resident.folded` and
//! `resident-exit.folded` draw.
//!
//! It sees what faults and syscalls say, and the kernel's counts
//! (`kmem:rss_stat`) place the pages a fault made beyond its own (file
//! fault-around, a large folio mapped whole; a huge page, where the
//! anonymous counts are recorded).
//! What the kernel takes back without a syscall that frees memory
//! (reclaim, `MADV_PAGEOUT`: the kernel's counts drop, changed by another
//! task or in such a `madvise`) it cannot place, for the kernel does not
//! say which pages went: the sites keep them, and the ledger *reconciles*,
//! saying how much it holds beyond the kernel's count of those processes
//! at the peak (of what stayed resident) and at exit. Pages the kernel
//! fills for a syscall (`get_user_pages`) it does not see: the report says
//! so.
//!
//! Cost: a page is a slot of its process's page table (page_table.rs: about
//! 6.5 bytes a page where pages come in runs, 100 for a page alone in its
//! 64 KiB); a site is about 60 bytes. Nothing is kept per fault.

use rustc_hash::{FxHashMap, FxHashSet};

mod interval;

use crate::analysis::classify::{Access, FaultClass, TargetMapping};
use crate::analysis::page_table::{runs, PageTable};
use crate::analysis::process::{Mremap, MREMAP_FIXED};
use crate::analysis::stacks::StackId;
use crate::analysis::{Owner, TargetKey};
use crate::format::decode::MemoryCall;

/// Bytes of a page (x86-64's small page).
pub const PAGE_BYTES: u64 = 4096;
const PAGE_SHIFT: u32 = 12;

/// `MADV_DONTNEED`, `MADV_REMOVE`, `MADV_DONTNEED_LOCKED`: the advice that
/// unmaps pages at once (`MADV_FREE` leaves them resident until the kernel
/// needs memory: counted as resident, as the kernel counts them).
const MADV_DONTNEED: u64 = 4;
const MADV_REMOVE: u64 = 9;
const MADV_DONTNEED_LOCKED: u64 = 24;
/// `MADV_HUGEPAGE`: the range may get huge pages, which the ledger sees
/// only with the kernel's anonymous counts.
const MADV_HUGEPAGE: u64 = 14;
/// `MADV_PAGEOUT`: reclaim the range's pages now (those it can).
const MADV_PAGEOUT: u64 = 21;

/// The kinds of resident memory, as the kernel counts RSS (`RssAnon`,
/// `RssFile`, `RssShmem`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryKind {
    /// Private memory: anonymous pages and private copies of file pages.
    Anon = 0,
    /// Page-cache pages of files.
    File = 1,
    /// Shared memory: shared anonymous mappings, tmpfs, memfd, SysV.
    Shmem = 2,
}

impl MemoryKind {
    /// All kinds, in report order.
    pub const ALL: [MemoryKind; 3] = [MemoryKind::Anon, MemoryKind::File, MemoryKind::Shmem];

    /// The name report.json gives it.
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Anon => "anon",
            MemoryKind::File => "file",
            MemoryKind::Shmem => "shmem",
        }
    }
}

/// What made a page resident: the process, the faulting stack, the target
/// and the kind of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResidentKey {
    /// The process whose address space holds the page.
    pub owner: Owner,
    /// The stack of the fault that made it present.
    pub stack: StackId,
    /// Where it is.
    pub target: TargetKey,
    /// How the kernel counts it.
    pub kind: MemoryKind,
}

/// What a fault did to its page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Nothing the kernel counts (a read of untouched anonymous memory
    /// maps the shared zero page).
    None,
    /// A mapping the recording never showed (moved by `mremap`, which
    /// makes no mmap record), with the fault's access: see
    /// [`unknown_effect`].
    Unknown(Access),
    /// The page is present now, of this kind; `replaced` when a page that
    /// was present is replaced by a new one (a private copy).
    Present {
        /// Its kind.
        kind: MemoryKind,
        /// A present page was replaced (copy-on-write).
        replaced: bool,
    },
}

/// What a fault does to its page, from its mapping, access and class;
/// `shmem_file`: the mapped file is shared memory (memfd, tmpfs, SysV).
pub fn effect(
    mapping: Option<TargetMapping>,
    shmem_file: bool,
    access: Access,
    class: FaultClass,
) -> Effect {
    let Some(m) = mapping else {
        return Effect::Unknown(access);
    };
    let (kind, replaced) = match (m.file_backed, m.private) {
        (false, false) => (MemoryKind::Shmem, false),
        // A read of memory never written maps the zero page, which no RSS
        // counts; a write later makes the page (classed copy-on-write).
        (false, true) if access == Access::Read => return Effect::None,
        (false, true) => (MemoryKind::Anon, class == FaultClass::Cow),
        // A write to a private file mapping makes a private copy.
        (true, true) if access == Access::Write => (MemoryKind::Anon, true),
        (true, _) if shmem_file => (MemoryKind::Shmem, false),
        (true, _) => (MemoryKind::File, false),
    };
    Effect::Present { kind, replaced }
}

/// What a fault on a mapping the recording never showed made: a file or
/// shared page if the kernel's counters of those grew during it, else an
/// anonymous page for a write (a read of anonymous memory maps the zero
/// page; the kernel's count of anonymous pages is not recorded).
fn unknown_effect(gained: [u64; 3], access: Access) -> Effect {
    let kind = [MemoryKind::File, MemoryKind::Shmem]
        .into_iter()
        .find(|&k| gained[k as usize] > 0);
    match (kind, access) {
        (Some(kind), _) => Effect::Present {
            kind,
            replaced: false,
        },
        (None, Access::Write | Access::Unknown) => Effect::Present {
            kind: MemoryKind::Anon,
            replaced: false,
        },
        (None, _) => Effect::None,
    }
}

/// One process's resident pages: page number → site id.
#[derive(Default)]
struct Space {
    pages: PageTable,
    /// Its pages by kind (what it holds of each site's kind; kept here,
    /// where each fault finds it, not in a map of its own).
    held: [u64; 3],
    /// The program break `brk` returned last.
    brk: Option<u64>,
}

/// The pages at the peak of the recorded processes' total.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Peak {
    /// When (ns, the recording's clock).
    pub time: u64,
    /// Pages by [`MemoryKind`].
    pub pages: [u64; 3],
}

/// How many pages each cause took away or added.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LedgerCounts {
    /// Pages faults made present.
    pub faulted: u64,
    /// Pages replaced by a private copy.
    pub replaced: u64,
    /// Pages `munmap` took away.
    pub munmap: u64,
    /// Pages `madvise` took away.
    pub madvise: u64,
    /// Pages `mremap` moved.
    pub mremap_moved: u64,
    /// Pages `mremap` or `brk` took away as they shrank a mapping.
    pub shrunk: u64,
    /// Pages that left with their process's exec.
    pub exec: u64,
    /// Pages that left with their process's exit.
    pub exit: u64,
    /// Pages a forked child started with (its parent's private pages).
    pub forked: u64,
    /// Pages a fault mapped beside its own (file fault-around, the rest of
    /// a huge page), as the kernel's counters said.
    pub around: u64,
    /// Pages the kernel's counters gained that no fault made (a syscall
    /// filled them, or pages of a kind the fault did not make).
    pub unattributed: u64,
    /// Pages of the ranges `madvise(MADV_HUGEPAGE)` asked huge pages for.
    pub huge_advised: u64,
    /// Pages the kernel's counters lost without a syscall that frees them
    /// (reclaim, `MADV_PAGEOUT`, another process's `process_madvise`):
    /// the ledger keeps them with their sites, and reconciles its totals
    /// with the kernel's (see [`Ledger::reconciled`]).
    pub taken_back: u64,
}

/// The ledger. See the module's documentation.
#[derive(Default)]
pub struct Ledger {
    keys: Vec<ResidentKey>,
    ids: FxHashMap<ResidentKey, u32>,
    /// Sites found lately, by their stack's low bits: a loop's faults come
    /// in runs of few sites, which then skip the hash. On a busy host the
    /// lookup was the ledger's largest cost (a fifth of it, the table's
    /// loads missing the caches the replay's other tables fill); 89% of
    /// the faults of a 10 s `record -a` of a build hit these slots.
    recent_sites: Vec<Option<(ResidentKey, u32)>>,
    /// Pages per site now, at the peak, at exit.
    now: Vec<u64>,
    at_peak: Vec<u64>,
    at_exit: Vec<u64>,
    /// The sites changed since the last peak (each once: `stamp` holds the
    /// epoch it was listed in), copied into `at_peak` at the next one:
    /// a new peak costs what changed since the last, not every site.
    changed: Vec<u32>,
    stamp: Vec<u32>,
    epoch: u32,
    /// Pages by kind now.
    total: [u64; 3],
    peak: Peak,
    /// Its pages less those reconciled at that moment.
    peak_resident: u64,
    spaces: FxHashMap<i32, Space>,
    counts: LedgerCounts,
    /// The latest fault's or call's time (a fork's pages count from then).
    last_time: u64,
    /// The kernel's own counts (`kmem:rss_stat`), when recorded.
    kernel: KernelCounts,
    /// Pages the ledger holds beyond the kernel's count, for processes the
    /// kernel took pages back from (see [`Ledger::reconciled`]): at the
    /// peak, and at the processes' exits.
    reconciled_at_peak: [u64; 3],
    reconciled_at_exit: [u64; 3],
    /// The totals over time, for the timeline.
    series: Series,
}

/// The ledger's totals over time, for the timeline's lane: at most
/// [`SERIES_POINTS`] points, each the totals at the highest moment of its
/// slot of time; when full, neighbours merge and the slots double.
#[derive(Default)]
struct Series {
    points: Vec<(u64, [u64; 3])>,
    /// Time a slot spans, ns (0 until the first merge: every change).
    slot_ns: u64,
}

/// Points of [`Series`] at most (the timeline has fewer bars).
const SERIES_POINTS: usize = 2048;

impl Series {
    /// The totals are `total` at `time`.
    fn note(&mut self, time: u64, total: [u64; 3]) {
        let sum = |t: &[u64; 3]| t.iter().sum::<u64>();
        if let Some(last) = self.points.last_mut() {
            if time < last.0.saturating_add(self.slot_ns) || time <= last.0 {
                if sum(&total) >= sum(&last.1) {
                    last.1 = total;
                }
                return;
            }
        }
        if self.points.len() == SERIES_POINTS {
            let span = time.saturating_sub(self.points[0].0);
            self.slot_ns = (self.slot_ns * 2)
                .max(span / (SERIES_POINTS as u64 / 2))
                .max(1);
            let merged: Vec<(u64, [u64; 3])> = (self.points.chunks(2))
                .map(|pair| {
                    let high = pair.iter().max_by_key(|p| sum(&p.1)).copied();
                    (pair[0].0, high.map_or([0; 3], |p| p.1))
                })
                .collect();
            self.points = merged;
        }
        self.points.push((time, total));
    }
}

/// The kernel's RSS counters of the recorded processes, as `kmem:rss_stat`
/// reports them from the process's own threads; beside the ledger's at the
/// same moments, and the source of the pages a fault maps beyond its own.
#[derive(Default)]
struct KernelCounts {
    /// Whether any `rss_stat` was seen.
    seen: bool,
    /// Whether the anonymous counts were recorded too (where transparent
    /// huge pages are always on).
    seen_anon: bool,
    /// Per process, pages by kind now.
    by_pid: FxHashMap<i32, [u64; 3]>,
    /// Their sum.
    total: [u64; 3],
    /// Per thread, pages of each kind gained since its last fault.
    gained: FxHashMap<i32, [u64; 3]>,
    /// The processes the kernel took pages back from (another task
    /// lowered their counts, or they paged out).
    taken_from: FxHashSet<i32>,
    /// The pages it took back, over the recording.
    taken_back: u64,
    /// The threads in a `madvise(MADV_PAGEOUT)`, whose own counts' drops
    /// are the kernel taking pages back too.
    paging_out: FxHashSet<i32>,
    /// The total at the ledger's peak, and at the processes' exits.
    at_peak: [u64; 3],
    at_exit: [u64; 3],
    /// A process asked for huge pages (`madvise(MADV_HUGEPAGE)`): the
    /// collector writes the anonymous counts from then on.
    hugepage_asked: bool,
    /// The anonymous counts began then, not with the recording: the
    /// kernel's anonymous total is not known, and a process's first
    /// anonymous count is its baseline unless it is in `anon_known`.
    anon_late: bool,
    /// Processes whose anonymous count the ledger knows from their start
    /// (exec'd or forked while recorded).
    anon_known: FxHashSet<i32>,
}

/// Pages a file fault maps around its own from small folios: the kernel's
/// `fault_around_bytes` (64 KiB) by default. A large folio in the page
/// cache is mapped whole (Linux 6.18: a fault on a file just written mapped
/// up to 512 pages; chromium's binary, 17-32), within the page table.
const FAULT_AROUND_PAGES: u64 = 16;
/// Pages of a huge page (2 MiB), and of one page table.
const HUGE_PAGES: u64 = 512;

impl KernelCounts {
    /// `rss_stat` for process `pid` (thread `tid`): `member`'s count is
    /// `bytes` now, changed by the process itself (`curr`) or by another
    /// task. The tracepoint's own record of another task's change (the
    /// parent's copy at fork, an exit's or exec's teardown, reclaim) names
    /// the address space by a hash only (`mm_id`) and the changing task's
    /// pid: left out. The collector's (`mm_id` 0) names the owner.
    fn on_stat(&mut self, (pid, tid): (i32, i32), curr: bool, mm_id: u32, member: i32, bytes: i64) {
        let kind = match member {
            0 => MemoryKind::File,
            1 => MemoryKind::Anon,
            3 => MemoryKind::Shmem,
            _ => return,
        } as usize;
        if !curr && (mm_id != 0 || !self.by_pid.contains_key(&pid)) {
            return;
        }
        let anon = kind == MemoryKind::Anon as usize;
        self.anon_late |= anon && !self.seen_anon && self.hugepage_asked;
        self.seen = true;
        self.seen_anon |= anon;
        let pages = bytes.max(0) as u64 / PAGE_BYTES;
        // Its first report (or, counted late, its first anonymous one)
        // is its baseline, not pages its next fault made.
        let first_anon = anon && self.anon_late && self.anon_known.insert(pid);
        let first = !self.by_pid.contains_key(&pid) || first_anon;
        let now = self.by_pid.entry(pid).or_default();
        let before = now[kind];
        now[kind] = pages;
        self.total[kind] = (self.total[kind] + pages).saturating_sub(before);
        if curr && !first && pages > before {
            self.gained.entry(tid).or_default()[kind] += pages - before;
        }
        if !first && (!curr || self.paging_out.contains(&tid)) && pages < before {
            self.taken_from.insert(pid);
            self.taken_back += before - pages;
        }
    }

    /// Process `child` was forked with `pages` of each kind (the page-table
    /// entries the kernel copied, as the ledger knows them): its baseline,
    /// so that its first report, often a fault that mapped its neighbours,
    /// counts as a gain. (The kernel's own count of the copy is reported
    /// in the parent's context, naming the child's address space by a
    /// hash: not usable.)
    fn forked(&mut self, child: i32, pages: [u64; 3]) {
        self.gone(child, false);
        for (total, n) in self.total.iter_mut().zip(pages) {
            *total += n;
        }
        self.by_pid.insert(child, pages);
        self.anon_known.insert(child);
    }

    /// The process is gone (exit or exec): its counts leave the total.
    fn gone(&mut self, pid: i32, exited: bool) {
        self.taken_from.remove(&pid);
        self.anon_known.remove(&pid);
        if let Some(pages) = self.by_pid.remove(&pid) {
            for (kind, &n) in pages.iter().enumerate() {
                self.total[kind] = self.total[kind].saturating_sub(n);
                if exited {
                    self.at_exit[kind] += n;
                }
            }
        }
    }
}

impl Ledger {
    /// A fault of process `pid` at `addr_avma` with `effect`, made by site
    /// `key` (its kind taken from the effect), at `time`.
    /// `mapping`: the mapping's avma range, where the pages the kernel
    /// mapped beside the fault's own lie (fault-around, a huge page).
    pub fn fault(
        &mut self,
        (pid, tid): (i32, i32),
        addr_avma: u64,
        mapping: Option<(u64, u64)>,
        site: SiteOf,
        effect: Effect,
        time: u64,
    ) {
        self.last_time = self.last_time.max(time);
        self.kernel.paging_out.remove(&tid);
        let gained = self.kernel.gained.remove(&tid).unwrap_or_default();
        let effect = match effect {
            Effect::Unknown(access) => unknown_effect(gained, access),
            known => known,
        };
        let Effect::Present { kind, replaced } = effect else {
            self.counts.unattributed += gained.iter().sum::<u64>();
            return;
        };
        let id = self.site(ResidentKey {
            owner: site.owner,
            stack: site.stack,
            target: site.target,
            kind,
        });
        let page = addr_avma >> PAGE_SHIFT;
        let space = self.spaces.entry(pid).or_default();
        match space.pages.get_or_insert(page, id) {
            Some(old) if replaced && old != id => {
                space.pages.insert(page, id);
                let old_kind = self.keys[old as usize].kind as usize;
                space.held[old_kind] = space.held[old_kind].saturating_sub(1);
                space.held[kind as usize] += 1;
                self.counts.replaced += 1;
                self.sub(old, 1);
                self.add(id, 1, time);
            }
            Some(_) => {}
            None => {
                space.held[kind as usize] += 1;
                self.counts.faulted += 1;
                self.add(id, 1, time);
            }
        }
        // Pages of the fault's kind the kernel counted beyond its own: the
        // neighbours a file fault mapped (fault-around, a large folio),
        // the rest of a huge page or of a multi-size THP folio (16 pages
        // of 64 KiB; aligned at their size).
        let beyond = gained[kind as usize].saturating_sub(1);
        let window = match kind {
            MemoryKind::File | MemoryKind::Shmem => FAULT_AROUND_PAGES,
            MemoryKind::Anon => (beyond + 1).next_power_of_two().min(HUGE_PAGES),
        };
        let placed = match mapping {
            Some(range) if window > 1 && beyond > 0 => {
                self.around(pid, page, window, range, beyond, id, time)
            }
            _ => 0,
        };
        let other: u64 = gained.iter().sum::<u64>() - gained[kind as usize].min(1);
        self.counts.unattributed += other.saturating_sub(placed);
    }

    /// Places `n` pages of site `id` in the `window`-page aligned block
    /// around `page` (shifted into the mapping `range` where it starts
    /// before it, as the kernel's fault-around does), where no page is yet
    /// (the kernel maps pages it has and skips those mapped); then, for
    /// pages left (a large folio mapped whole), in blocks twice as large
    /// up to the page table's; how many. Where in the block a large
    /// folio's pages lie is not known: the count is exact, the pages are
    /// in its mapping and page table.
    #[allow(clippy::too_many_arguments)]
    fn around(
        &mut self,
        pid: i32,
        page: u64,
        window: u64,
        (start, end): (u64, u64),
        n: u64,
        id: u32,
        time: u64,
    ) -> u64 {
        let space = self.spaces.entry(pid).or_default();
        let table_end = (page & !(HUGE_PAGES - 1)) + HUGE_PAGES;
        let mut placed = 0;
        let mut window = window;
        loop {
            let first = (page & !(window - 1)).max(start >> PAGE_SHIFT);
            let last = (first + window)
                .min(end.div_ceil(PAGE_BYTES))
                .min(table_end);
            placed += space.pages.fill_vacant(first..last, id, n - placed);
            if placed == n || window >= HUGE_PAGES {
                break;
            }
            window *= 2;
        }
        space.held[self.keys[id as usize].kind as usize] += placed;
        self.counts.around += placed;
        if placed > 0 {
            self.add(id, placed, time);
        }
        placed
    }

    /// A memory syscall of thread `tid` of process `pid`.
    pub fn on_call(&mut self, (pid, tid): (i32, i32), time: u64, call: MemoryCall) {
        self.last_time = self.last_time.max(time);
        if !matches!(call, MemoryCall::RssStat { .. }) {
            self.kernel.paging_out.remove(&tid);
        }
        match call {
            MemoryCall::Munmap { addr, len } => {
                let n = self.remove(pid, addr, addr.saturating_add(len));
                self.counts.munmap += n;
            }
            MemoryCall::Madvise { addr, len, advice } => {
                if matches!(advice, MADV_DONTNEED | MADV_REMOVE | MADV_DONTNEED_LOCKED) {
                    let n = self.remove(pid, addr, addr.saturating_add(len));
                    self.counts.madvise += n;
                } else if advice == MADV_HUGEPAGE {
                    self.kernel.hugepage_asked = true;
                    self.counts.huge_advised += len.div_ceil(PAGE_BYTES);
                } else if advice == MADV_PAGEOUT {
                    // Which pages it reclaims the kernel does not say: its
                    // counts' drops until the thread's next event do.
                    self.kernel.paging_out.insert(tid);
                    self.kernel.taken_from.insert(pid);
                }
            }
            // Paired by the analysis, which moves the mapping too and hands
            // the ledger the call once it returned ([`Ledger::remapped`]).
            MemoryCall::Mremap { .. } | MemoryCall::MremapDone { .. } => {}
            MemoryCall::BrkDone { ret } => self.brk(pid, ret),
            MemoryCall::RssStat {
                curr,
                mm_id,
                member,
                bytes,
            } => self.kernel.on_stat((pid, tid), curr, mm_id, member, bytes),
        }
    }

    /// `mremap(addr, old_len, new_len, flags)` of process `pid` returned
    /// `new_start`: its pages move (the tail beyond `new_len` goes).
    pub(super) fn remapped(&mut self, pid: i32, call: Mremap, new_start: u64) {
        let Mremap {
            addr,
            old_len,
            new_len,
            flags,
        } = call;
        let old_end = addr.saturating_add(old_len);
        // Shrunk: the tail is gone, wherever the rest went.
        if new_len < old_len {
            let n = self.remove(pid, addr.saturating_add(new_len), old_end);
            self.counts.shrunk += n;
        }
        if new_start == addr || old_len == 0 {
            return;
        }
        if flags & MREMAP_FIXED != 0 {
            let n = self.remove(pid, new_start, new_start.saturating_add(new_len));
            self.counts.munmap += n;
        }
        let Some(space) = self.spaces.get_mut(&pid) else {
            return;
        };
        let kept_end = addr.saturating_add(old_len.min(new_len));
        let moved = space.pages.take_range(page_range(addr, kept_end));
        let shift = |page: u64| page - (addr >> PAGE_SHIFT) + (new_start >> PAGE_SHIFT);
        self.counts.mremap_moved += moved.len() as u64;
        for (page, id) in moved {
            space.pages.insert(shift(page), id);
        }
    }

    /// `brk` returned `ret`: a lower break than the last takes the pages
    /// above it away.
    fn brk(&mut self, pid: i32, ret: u64) {
        let last = self.spaces.entry(pid).or_default().brk.replace(ret);
        if let Some(last) = last.filter(|&last| ret < last) {
            let n = self.remove(pid, ret.next_multiple_of(PAGE_BYTES), last);
            self.counts.shrunk += n;
        }
    }

    /// Takes the pages of `[start, end)` (avma) of `pid` away; how many.
    fn remove(&mut self, pid: i32, start: u64, end: u64) -> u64 {
        let Some(space) = self.spaces.get_mut(&pid) else {
            return 0;
        };
        let gone_runs = space.pages.take_runs(page_range(start, end));
        let mut gone = 0;
        for &(id, n) in &gone_runs {
            let kind = self.keys[id as usize].kind as usize;
            space.held[kind] = space.held[kind].saturating_sub(n);
            gone += n;
        }
        for (id, n) in gone_runs {
            self.sub(id, n);
        }
        gone
    }

    /// Process `pid` exec'd: its pages are gone.
    pub fn exec(&mut self, pid: i32) {
        self.kernel.gone(pid, false);
        // A new address space: its counts start at none (exec maps no
        // page; the stack the kernel filled is anonymous), so its first
        // report is a gain, not a baseline.
        self.kernel.by_pid.insert(pid, [0; 3]);
        self.kernel.anon_known.insert(pid);
        self.counts.exec += self.drop_space(pid, false);
    }

    /// Process `pid` exited: its pages count at its exit, and are gone.
    pub fn exit(&mut self, pid: i32) {
        self.reconcile_at_exit(pid);
        self.kernel.gone(pid, true);
        self.counts.exit += self.drop_space(pid, true);
    }

    /// Takes every page of `pid` away (counted at its exit when `exited`);
    /// how many.
    fn drop_space(&mut self, pid: i32, exited: bool) -> u64 {
        let Some(space) = self.spaces.remove(&pid) else {
            return 0;
        };
        let n = space.pages.len();
        for (id, pages) in runs(space.pages.ids()) {
            if exited {
                self.at_exit[id as usize] += pages;
            }
            self.sub(id, pages);
        }
        n
    }

    /// Process `child` was forked from `parent`: it starts with the
    /// parent's private pages (shared with it until a write copies them).
    /// The kernel copies the page-table entries of a mapping only once it
    /// has private pages (an `anon_vma`): of a private file mapping
    /// (`private_file_ranges`, avma, sorted) with a private copy among its
    /// pages, the file pages too; of shared or unwritten file mappings
    /// none, those the child faults in itself.
    pub fn fork(
        &mut self,
        child: i32,
        parent: i32,
        child_owner: Owner,
        private_file_ranges: &[std::ops::Range<u64>],
    ) {
        let Some(space) = self.spaces.get(&parent) else {
            return;
        };
        let keys = &self.keys;
        let is_anon = |id: u32| keys[id as usize].kind == MemoryKind::Anon;
        let copied: Vec<std::ops::Range<u64>> = (private_file_ranges.iter())
            .map(|r| (r.start >> PAGE_SHIFT)..(r.end >> PAGE_SHIFT))
            .filter(|pages| space.pages.range(pages.clone()).any(|(_, id)| is_anon(id)))
            .collect();
        let in_copied = |page: u64| {
            let i = copied.partition_point(|r| r.end <= page);
            copied.get(i).is_some_and(|r| r.contains(&page))
        };
        let private: Vec<(u64, ResidentKey)> = (space.pages.iter())
            .filter(|&(page, id)| is_anon(id) || in_copied(page))
            .map(|(page, id)| (page, self.keys[id as usize]))
            .collect();
        let brk = space.brk;
        let mut pages = PageTable::default();
        let mut by_kind = [0; 3];
        let mut ids = Vec::with_capacity(private.len());
        for (page, key) in private {
            let id = self.site(ResidentKey {
                owner: child_owner,
                ..key
            });
            pages.insert(page, id);
            ids.push(id);
            by_kind[key.kind as usize] += 1;
        }
        // The total grows once the child holds its pages and the kernel's
        // view of it is new (the peak's reconciliation reads both), by runs
        // of one site in page order.
        self.kernel.forked(child, by_kind);
        self.counts.forked += pages.len();
        self.spaces.insert(
            child,
            Space {
                pages,
                held: by_kind,
                brk,
            },
        );
        for (id, n) in runs(ids) {
            self.add(id, n, self.last_time);
        }
    }

    /// The recording ended: the pages of processes still alive count as
    /// theirs at exit.
    pub fn finish(&mut self) {
        let alive: Vec<i32> = self.kernel.taken_from.iter().copied().collect();
        for pid in alive {
            self.reconcile_at_exit(pid);
        }
        for pages in self.kernel.by_pid.values() {
            for (at_exit, n) in self.kernel.at_exit.iter_mut().zip(pages) {
                *at_exit += n;
            }
        }
        for space in self.spaces.values() {
            for id in space.pages.ids() {
                self.at_exit[id as usize] += 1;
            }
        }
    }

    /// The peak of the total.
    pub fn peak(&self) -> Peak {
        self.peak
    }

    /// The totals by kind over time: (time, pages by kind), at most a few
    /// thousand points, each its slot's highest.
    pub fn series(&self) -> &[(u64, [u64; 3])] {
        &self.series.points
    }

    /// Pages now, by kind.
    pub fn now(&self) -> [u64; 3] {
        self.total
    }

    /// Whether the kernel's counts include anonymous pages (recorded where
    /// transparent huge pages are always on; counted from a process's
    /// first request for huge pages on, the total is not known).
    pub fn kernel_counts_anon(&self) -> bool {
        self.kernel.seen_anon && !self.kernel.anon_late
    }

    /// Whether the anonymous counts were recorded, from the start or from
    /// a process's first request for huge pages: each huge page (or large
    /// anonymous folio) is then placed whole at the site that faulted it.
    pub fn huge_pages_placed(&self) -> bool {
        self.kernel.seen_anon
    }

    /// The kernel's own counts at the peak and at exit, by kind, when the
    /// recording has them.
    pub fn kernel(&self) -> Option<([u64; 3], [u64; 3])> {
        let k = &self.kernel;
        k.seen.then_some((k.at_peak, k.at_exit))
    }

    /// What each cause added and took away.
    pub fn counts(&self) -> LedgerCounts {
        LedgerCounts {
            taken_back: self.kernel.taken_back,
            ..self.counts
        }
    }

    /// Pages by kind the ledger holds beyond the kernel's own count at
    /// the peak and at exit, of the processes whose pages the kernel took
    /// back without a syscall that frees them: which pages went, the
    /// kernel does not say, so they stay with the sites that made them
    /// resident; the totals less these are what stayed resident.
    pub fn reconciled(&self) -> ([u64; 3], [u64; 3]) {
        (self.reconciled_at_peak, self.reconciled_at_exit)
    }

    /// [`Ledger::reconciled`] of process `pid` now.
    fn reconciled_of(&self, pid: i32) -> [u64; 3] {
        let held = self.spaces.get(&pid).map(|space| &space.held);
        let (Some(held), Some(kernel)) = (held, self.kernel.by_pid.get(&pid)) else {
            return [0; 3];
        };
        if !self.kernel.taken_from.contains(&pid) {
            return [0; 3];
        }
        // Anonymous pages only where the kernel's counts of them were
        // recorded (transparent huge pages always on).
        let anon = self.kernel.seen_anon;
        [0, 1, 2].map(|kind| {
            let counted = kind != MemoryKind::Anon as usize || anon;
            if counted {
                held[kind].saturating_sub(kernel[kind])
            } else {
                0
            }
        })
    }

    /// Adds what process `pid` holds beyond the kernel's count to the
    /// exit view's.
    fn reconcile_at_exit(&mut self, pid: i32) {
        let reconciled = self.reconciled_of(pid);
        for (total, n) in self.reconciled_at_exit.iter_mut().zip(reconciled) {
            *total += n;
        }
    }

    /// [`Ledger::reconciled_of`] summed over the processes now.
    fn reconciled_now(&self) -> [u64; 3] {
        let mut sum = [0; 3];
        for &pid in &self.kernel.taken_from {
            for (total, n) in sum.iter_mut().zip(self.reconciled_of(pid)) {
                *total += n;
            }
        }
        sum
    }

    /// Each site with its pages at the peak (sites with none left out).
    pub fn at_peak(&self) -> impl Iterator<Item = (ResidentKey, u64)> + '_ {
        self.per_site(&self.at_peak)
    }

    /// Each site with its pages at its process's exit or the recording's
    /// end ([`Ledger::finish`]).
    pub fn at_exit(&self) -> impl Iterator<Item = (ResidentKey, u64)> + '_ {
        self.per_site(&self.at_exit)
    }

    fn per_site<'a>(&'a self, pages: &'a [u64]) -> impl Iterator<Item = (ResidentKey, u64)> + 'a {
        (self.keys.iter().zip(pages))
            .filter(|(_, &n)| n > 0)
            .map(|(&key, &n)| (key, n))
    }

    fn site(&mut self, key: ResidentKey) -> u32 {
        if self.recent_sites.is_empty() {
            self.recent_sites = vec![None; RECENT_SITES];
        }
        let slot = key.stack as usize % RECENT_SITES;
        match self.recent_sites[slot] {
            Some((recent, id)) if recent == key => return id,
            _ => {}
        }
        let id = self.site_of(key);
        self.recent_sites[slot] = Some((key, id));
        id
    }

    /// Forgets the sites found lately (their ids are about to change).
    pub(super) fn forget_recent_sites(&mut self) {
        self.recent_sites.clear();
    }

    fn site_of(&mut self, key: ResidentKey) -> u32 {
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = u32::try_from(self.keys.len()).unwrap_or(u32::MAX);
        self.keys.push(key);
        self.ids.insert(key, id);
        self.now.push(0);
        self.at_peak.push(0);
        self.at_exit.push(0);
        self.stamp.push(0);
        id
    }

    fn touched(&mut self, id: u32) {
        let stamp = &mut self.stamp[id as usize];
        if *stamp != self.epoch + 1 {
            *stamp = self.epoch + 1;
            self.changed.push(id);
        }
    }

    /// `pages` more of site `id` (a site's owner may be its program:
    /// system-wide, its processes share it); the caller counts them in its
    /// process's `held` first.
    fn add(&mut self, id: u32, pages: u64, time: u64) {
        self.touched(id);
        self.now[id as usize] += pages;
        let key = self.keys[id as usize];
        self.total[key.kind as usize] += pages;
        self.series.note(time, self.total);
        // The peak of what is resident: less what the kernel took back.
        let reconciled = if self.kernel.taken_from.is_empty() {
            [0; 3]
        } else {
            self.reconciled_now()
        };
        let resident = self.total.iter().sum::<u64>() - reconciled.iter().sum::<u64>();
        if resident > self.peak_resident {
            for id in self.changed.drain(..) {
                self.at_peak[id as usize] = self.now[id as usize];
            }
            self.epoch += 1;
            self.peak = Peak {
                time,
                pages: self.total,
            };
            self.peak_resident = resident;
            self.kernel.at_peak = self.kernel.total;
            self.reconciled_at_peak = reconciled;
        }
    }

    /// `pages` fewer of site `id` (its process's `held` is the caller's).
    fn sub(&mut self, id: u32, pages: u64) {
        self.touched(id);
        let now = &mut self.now[id as usize];
        *now = now.saturating_sub(pages);
        let key = self.keys[id as usize];
        let total = &mut self.total[key.kind as usize];
        *total = total.saturating_sub(pages);
        self.series.note(self.last_time, self.total);
    }
}

/// Who a fault's page belongs to, but its kind (the effect says).
#[derive(Debug, Clone, Copy)]
pub struct SiteOf {
    /// The process (or program).
    pub owner: Owner,
    /// The fault's stack.
    pub stack: StackId,
    /// Its target.
    pub target: TargetKey,
}

/// Slots of [`Ledger`]'s sites found lately.
const RECENT_SITES: usize = 64;

/// The pages `[start, end)` (avma) covers, in part or whole.
fn page_range(start: u64, end: u64) -> std::ops::Range<u64> {
    (start >> PAGE_SHIFT)..end.div_ceil(PAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(stack: u32) -> SiteOf {
        SiteOf {
            owner: Owner::Process(1),
            stack,
            target: TargetKey::Anon,
        }
    }

    const ANON: Effect = Effect::Present {
        kind: MemoryKind::Anon,
        replaced: false,
    };

    /// Process 1's anonymous faults on `pages` pages from `base` (avma),
    /// made by `stack`, the first at time `t0`, one a nanosecond.
    fn touch(ledger: &mut Ledger, base: u64, pages: std::ops::Range<u64>, stack: u32, t0: u64) {
        for i in pages {
            ledger.fault(
                (1, 1),
                base + i * PAGE_BYTES,
                None,
                site(stack),
                ANON,
                t0 + i,
            );
        }
    }

    fn pages_of(ledger: &Ledger, at: &[u64]) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = (ledger.keys.iter().zip(at))
            .filter(|(_, &n)| n > 0)
            .map(|(k, &n)| (k.stack, n))
            .collect();
        v.sort_unstable();
        v
    }

    /// `rss_stat` of thread `ids`, changed by itself: `member`'s count is
    /// `pages` now.
    fn own_count(ledger: &mut Ledger, ids: (i32, i32), member: i32, pages: i64, time: u64) {
        let call = MemoryCall::RssStat {
            curr: true,
            mm_id: 0,
            member,
            bytes: pages * PAGE_BYTES as i64,
        };
        ledger.on_call(ids, time, call);
    }

    /// Ten pages by one stack, four by another, then six of the first
    /// unmapped and two more by the second: the peak (14) is before the
    /// unmap, whatever came after; the exit view is what was left.
    #[test]
    fn peak_and_exit_per_site() {
        let mut ledger = Ledger::default();
        touch(&mut ledger, 0x10000, 0..10, 1, 0);
        touch(&mut ledger, 0x40000, 0..4, 2, 10);
        // A second fault on a present page adds nothing.
        ledger.fault((1, 1), 0x10000, None, site(2), ANON, 14);
        ledger.on_call(
            (1, 1),
            15,
            MemoryCall::Munmap {
                addr: 0x10000,
                len: 6 * PAGE_BYTES,
            },
        );
        touch(&mut ledger, 0x40000, 4..6, 2, 16);
        assert_eq!(
            ledger.peak(),
            Peak {
                time: 13,
                pages: [14, 0, 0]
            }
        );
        assert_eq!(pages_of(&ledger, &ledger.at_peak), [(1, 10), (2, 4)]);
        ledger.exit(1);
        assert_eq!(ledger.now(), [0, 0, 0]);
        assert_eq!(pages_of(&ledger, &ledger.at_exit), [(1, 4), (2, 6)]);
        assert_eq!(ledger.counts().munmap, 6);
    }

    /// Stacks whose sites share a slot of the recently found ones (1 and
    /// 1 + the slots), faulting in turns, keep their own sites; an unmap
    /// of pages of both in runs subtracts each run from its own site.
    #[test]
    fn sites_sharing_a_recent_slot_stay_apart() {
        let mut ledger = Ledger::default();
        let other = 1 + RECENT_SITES as u32;
        for i in 0..8u64 {
            let stack = if i % 4 < 2 { 1 } else { other };
            ledger.fault((1, 1), 0x10000 + i * PAGE_BYTES, None, site(stack), ANON, i);
        }
        assert_eq!(pages_of(&ledger, &ledger.now), [(1, 4), (other, 4)]);
        ledger.on_call(
            (1, 1),
            9,
            MemoryCall::Munmap {
                addr: 0x10000 + PAGE_BYTES,
                len: 6 * PAGE_BYTES,
            },
        );
        assert_eq!(pages_of(&ledger, &ledger.now), [(1, 1), (other, 1)]);
        assert_eq!(ledger.now(), [2, 0, 0]);
        assert_eq!(ledger.counts().munmap, 6);
    }

    #[test]
    fn runs_of_equal_sites() {
        let found: Vec<_> = runs([3, 3, 3, 5, 3, 3]).collect();
        assert_eq!(found, [(3, 3), (5, 1), (3, 2)]);
        assert_eq!(runs([]).count(), 0);
    }

    /// System-wide, a site belongs to a program: two of its processes (one
    /// forked from the other) share it, each exit adds what that process
    /// held, and what each process holds is still its own (the kernel's
    /// per-process count, reconciled against it, is).
    #[test]
    fn processes_of_one_program_share_its_sites() {
        let program = Owner::Program(7);
        let site = |stack| SiteOf {
            owner: program,
            stack,
            target: TargetKey::Anon,
        };
        let mut ledger = Ledger::default();
        for i in 0..6 {
            ledger.fault((1, 1), 0x10000 + i * PAGE_BYTES, None, site(1), ANON, i);
        }
        ledger.fork(2, 1, program, &[]);
        for i in 0..3 {
            ledger.fault(
                (2, 2),
                0x80000 + i * PAGE_BYTES,
                None,
                site(1),
                ANON,
                10 + i,
            );
        }
        ledger.fault((2, 2), 0x90000, None, site(2), ANON, 13);
        assert_eq!(ledger.keys.len(), 2, "{:?}", ledger.keys);
        assert_eq!(pages_of(&ledger, &ledger.now), [(1, 15), (2, 1)]);
        assert_eq!(ledger.spaces[&1].held, [6, 0, 0]);
        assert_eq!(ledger.spaces[&2].held, [10, 0, 0]);
        ledger.exit(2);
        assert_eq!(pages_of(&ledger, &ledger.at_exit), [(1, 9), (2, 1)]);
        assert_eq!(ledger.spaces[&1].held, [6, 0, 0]);
        ledger.exit(1);
        assert_eq!(pages_of(&ledger, &ledger.at_exit), [(1, 15), (2, 1)]);
        assert_eq!(ledger.now(), [0, 0, 0]);
    }

    /// The kernel's count lowered by another task (reclaim: the
    /// collector's record, `mm_id` 0, `curr` false) is taken back: the
    /// sites keep their pages, and what the ledger holds beyond the
    /// kernel's count is reconciled at the peak (of what stayed resident)
    /// and at exit. The tracepoint's own record of another task's change
    /// (its `mm_id` a hash, its pid the changing task's) is left out.
    #[test]
    fn pages_taken_back_are_reconciled() {
        let mut ledger = Ledger::default();
        let stat = |ledger: &mut Ledger, curr: bool, mm_id: u32, pages: i64, time: u64| {
            let call = MemoryCall::RssStat {
                curr,
                mm_id,
                member: 1,
                bytes: pages * PAGE_BYTES as i64,
            };
            ledger.on_call((1, 1), time, call);
        };
        stat(&mut ledger, true, 0, 0, 0);
        touch(&mut ledger, 0x10000, 0..10, 1, 1);
        stat(&mut ledger, true, 0, 10, 20);
        stat(&mut ledger, false, 0x1234, 2, 21);
        assert_eq!(ledger.counts().taken_back, 0);
        stat(&mut ledger, false, 0, 6, 22);
        assert_eq!(ledger.counts().taken_back, 4);
        // 12 held, 8 resident: the peak is still the 10 before.
        touch(&mut ledger, 0x40000, 0..2, 2, 23);
        stat(&mut ledger, true, 0, 8, 25);
        assert_eq!(ledger.peak().pages, [10, 0, 0]);
        assert_eq!(ledger.reconciled().0, [0, 0, 0]);
        // 17 held, 13 resident: a new peak, 4 of it taken back (the
        // kernel counts a page before the fault's record).
        touch(&mut ledger, 0x40000, 2..6, 2, 26);
        stat(&mut ledger, true, 0, 13, 32);
        touch(&mut ledger, 0x80000, 0..1, 2, 33);
        assert_eq!(ledger.peak().pages, [17, 0, 0]);
        assert_eq!(ledger.reconciled().0, [4, 0, 0]);
        ledger.exit(1);
        assert_eq!(ledger.reconciled().1, [4, 0, 0]);
        assert_eq!(pages_of(&ledger, &ledger.at_exit), [(1, 10), (2, 7)]);
    }

    /// Anonymous counts that begin at a request for huge pages (where
    /// transparent huge pages are `madvise`): a process's first one is its
    /// baseline, not a gain its next fault made; the huge page a fault
    /// then makes counts 512 pages at its site, a 64 KiB folio 16; the
    /// kernel's anonymous total is not known.
    #[test]
    fn anonymous_counts_from_a_request_for_huge_pages_on() {
        let mut ledger = Ledger::default();
        let stat = |ledger: &mut Ledger, member, pages, time| {
            own_count(ledger, (1, 1), member, pages, time)
        };
        stat(&mut ledger, 0, 5, 0);
        touch(&mut ledger, 0x10000, 0..10, 1, 1);
        let huge = MemoryCall::Madvise {
            addr: 0x200000,
            len: HUGE_PAGES * PAGE_BYTES,
            advice: MADV_HUGEPAGE,
        };
        ledger.on_call((1, 1), 20, huge);
        // The first anonymous count: the ten pages and two of the stack.
        stat(&mut ledger, 1, 12, 21);
        stat(&mut ledger, 1, 12 + HUGE_PAGES as i64, 22);
        let range = Some((0x200000, 0x200000 + HUGE_PAGES * PAGE_BYTES));
        ledger.fault((1, 1), 0x200000, range, site(2), ANON, 23);
        assert_eq!(ledger.now(), [10 + HUGE_PAGES, 0, 0]);
        assert_eq!(pages_of(&ledger, &ledger.now), [(1, 10), (2, HUGE_PAGES)]);
        assert_eq!(ledger.counts().unattributed, 0);
        // A multi-size THP folio (64 KiB): its 16 pages, aligned.
        stat(&mut ledger, 1, 12 + HUGE_PAGES as i64 + 16, 24);
        let range = Some((0x400000, 0x400000 + 64 * PAGE_BYTES));
        ledger.fault((1, 1), 0x423000, range, site(3), ANON, 25);
        assert_eq!(pages_of(&ledger, &ledger.now)[2], (3, 16));
        let folio = ledger.spaces[&1].pages.range(0x420..0x430).count();
        assert_eq!(folio, 16);
        assert_eq!(ledger.counts().unattributed, 0);
        assert!(ledger.huge_pages_placed());
        assert!(!ledger.kernel_counts_anon());
        // A process first seen by an anonymous count: that one is its
        // baseline, its next a gain (three pages, one the fault's own: two
        // no fault made).
        let stat2 = |ledger: &mut Ledger, pages, time| own_count(ledger, (2, 2), 1, pages, time);
        stat2(&mut ledger, 40, 30);
        stat2(&mut ledger, 43, 31);
        let site2 = SiteOf {
            owner: Owner::Process(2),
            ..site(3)
        };
        ledger.fault((2, 2), 0x700000, None, site2, ANON, 32);
        assert_eq!(ledger.counts().unattributed, 2);
        assert_eq!(ledger.now(), [11 + HUGE_PAGES + 16, 0, 0]);
    }

    /// DONTNEED takes pages away, FREE leaves them; mremap moves them
    /// (a later unmap of the new place finds them) and its shrinking
    /// drops the tail; brk's lower break drops the pages above it. (A
    /// failed mremap the analysis does not hand on: `Analyzer`'s test.)
    #[test]
    fn syscalls_take_pages_away() {
        let mut ledger = Ledger::default();
        touch(&mut ledger, 0x100000, 0..8, 1, 0);
        let madvise = |advice| MemoryCall::Madvise {
            addr: 0x100000,
            len: 2 * PAGE_BYTES,
            advice,
        };
        ledger.on_call((1, 1), 0, madvise(8));
        assert_eq!(ledger.now(), [8, 0, 0]);
        ledger.on_call((1, 1), 0, madvise(MADV_DONTNEED));
        assert_eq!(ledger.now(), [6, 0, 0]);
        // Pages 2..8 move to 0x900000, shrunk to 4 pages: pages 6, 7 go.
        let remap = Mremap {
            addr: 0x100000,
            old_len: 8 * PAGE_BYTES,
            new_len: 6 * PAGE_BYTES,
            flags: 1,
        };
        ledger.remapped(1, remap, 0x900000);
        assert_eq!(ledger.now(), [4, 0, 0]);
        let unmap_old = MemoryCall::Munmap {
            addr: 0x100000,
            len: 8 * PAGE_BYTES,
        };
        ledger.on_call((1, 1), 0, unmap_old);
        assert_eq!(ledger.now(), [4, 0, 0]);
        let unmap_new = MemoryCall::Munmap {
            addr: 0x900000,
            len: 6 * PAGE_BYTES,
        };
        ledger.on_call((1, 1), 0, unmap_new);
        assert_eq!(ledger.now(), [0, 0, 0]);
        // The heap: brk grows it, four pages touched, brk shrinks it by two
        // and a half pages: the two pages wholly above the break go.
        ledger.on_call((1, 1), 0, MemoryCall::BrkDone { ret: 0x500000 });
        ledger.on_call((1, 1), 0, MemoryCall::BrkDone { ret: 0x504000 });
        touch(&mut ledger, 0x500000, 0..4, 3, 18);
        ledger.on_call((1, 1), 0, MemoryCall::BrkDone { ret: 0x501800 });
        assert_eq!(ledger.now(), [2, 0, 0]);
    }

    /// A child starts with its parent's private pages, under its own
    /// name; a copy-on-write fault moves the page to the writer's site;
    /// exec drops the pages without counting them at exit.
    /// The series keeps at most its size in points, each its slot's highest
    /// total, in time order, and the highest point of all survives merges.
    #[test]
    fn the_series_is_bounded_and_keeps_the_highs() {
        let mut series = Series::default();
        for i in 0..10_000u64 {
            // A sawtooth with one spike at i = 7777.
            let pages = if i == 7777 { 1_000_000 } else { i % 100 };
            series.note(i * 10, [pages, 0, 0]);
        }
        assert!(series.points.len() <= SERIES_POINTS);
        assert!(series.points.len() > SERIES_POINTS / 4);
        assert!(series.points.windows(2).all(|w| w[0].0 < w[1].0));
        let high = series.points.iter().map(|p| p.1[0]).max();
        assert_eq!(high, Some(1_000_000));
    }

    /// A private file mapping with a private copy among its pages has its
    /// file pages copied into the child too (the kernel copies the whole
    /// mapping's page-table entries); one without keeps them to itself.
    #[test]
    fn fork_copies_the_file_pages_of_written_private_mappings() {
        let mut ledger = Ledger::default();
        let file = Effect::Present {
            kind: MemoryKind::File,
            replaced: false,
        };
        let copy = Effect::Present {
            kind: MemoryKind::Anon,
            replaced: true,
        };
        // Mapping A (0x10000-0x14000): two file pages and one copy; mapping
        // B (0x20000-0x24000): one file page, never written.
        for (addr, effect) in [
            (0x10000, file),
            (0x11000, file),
            (0x12000, copy),
            (0x20000, file),
        ] {
            ledger.fault((1, 1), addr, None, site(1), effect, 1);
        }
        ledger.fork(
            2,
            1,
            Owner::Process(2),
            &[0x10000..0x14000, 0x20000..0x24000],
        );
        // [anon, file, shmem]: the parent's 1 and 3, the child's 1 and 2
        // (mapping A's file pages, not B's).
        assert_eq!(ledger.now(), [2, 5, 0]);
    }

    /// The file pages the kernel counts beyond a fault's own are placed
    /// beside it: fault-around's 16-page block first, then (a large folio
    /// mapped whole) blocks twice as large, never past the mapping or the
    /// page table; what does not fit stays unattributed.
    #[test]
    fn file_faults_place_the_pages_mapped_beside_them() {
        let mut ledger = Ledger::default();
        let file = Effect::Present {
            kind: MemoryKind::File,
            replaced: false,
        };
        let stat = |ledger: &mut Ledger, pages, time| own_count(ledger, (1, 1), 0, pages, time);
        let held_in = |ledger: &Ledger, pages: std::ops::Range<u64>| {
            ledger.spaces[&1].pages.range(pages).count() as u64
        };
        // A mapping of 700 pages from 0x400000 (page 0x400, a page table's
        // first page 0x400): fault-around's 16.
        let mapping = Some((0x400000, 0x400000 + 700 * PAGE_BYTES));
        stat(&mut ledger, 0, 0);
        stat(&mut ledger, 16, 1);
        ledger.fault((1, 1), 0x405000, mapping, site(1), file, 2);
        assert_eq!(held_in(&ledger, 0x400..0x410), 16);
        // 64 at page 0x420 (a large folio's): its 16-page block, then the
        // blocks of 32, 64 and 128 around it, nearest first.
        stat(&mut ledger, 16 + 64, 3);
        ledger.fault((1, 1), 0x420000, mapping, site(1), file, 4);
        assert_eq!(held_in(&ledger, 0x400..0x440), 64);
        assert_eq!(held_in(&ledger, 0x440..0x480), 16);
        assert_eq!(ledger.counts().unattributed, 0);
        // 600 at the table's last page: 512 at most, the table's 432 left
        // vacant, the rest unattributed.
        stat(&mut ledger, 16 + 64 + 600, 5);
        ledger.fault((1, 1), 0x5ff000, mapping, site(1), file, 6);
        assert_eq!(held_in(&ledger, 0x400..0x600), 512);
        assert_eq!(held_in(&ledger, 0x600..0x800), 0);
        assert_eq!(ledger.now(), [0, 512, 0]);
        assert_eq!(ledger.counts().unattributed, 600 - 432);
    }

    #[test]
    fn fork_copy_and_exec() {
        let mut ledger = Ledger::default();
        touch(&mut ledger, 0x10000, 0..3, 1, 0);
        let file = Effect::Present {
            kind: MemoryKind::File,
            replaced: false,
        };
        ledger.fault((1, 1), 0x80000, None, site(1), file, 3);
        ledger.fork(2, 1, Owner::Process(2), &[]);
        assert_eq!(ledger.now(), [6, 1, 0]);
        let child = SiteOf {
            owner: Owner::Process(2),
            ..site(5)
        };
        let cow = Effect::Present {
            kind: MemoryKind::Anon,
            replaced: true,
        };
        ledger.fault((2, 2), 0x10000, None, child, cow, 5);
        assert_eq!(ledger.now(), [6, 1, 0]);
        let of_child: Vec<(u32, u64)> = ledger
            .at_peak()
            .filter(|(k, _)| k.owner == Owner::Process(2))
            .map(|(k, n)| (k.stack, n))
            .collect();
        assert_eq!(of_child, [(1, 3)], "the peak came before the copy");
        ledger.exec(2);
        assert_eq!(ledger.now(), [3, 1, 0]);
        ledger.finish();
        // The parent's three anonymous pages and its file page.
        assert_eq!(pages_of(&ledger, &ledger.at_exit), [(1, 1), (1, 3)]);
    }

    /// What a fault does: zero page for reads of anonymous memory, a
    /// private copy for writes to private files, shared memory by mapping
    /// or path.
    #[test]
    fn effects() {
        let m = |file_backed, private| {
            Some(TargetMapping {
                file_backed,
                private,
                writable: true,
            })
        };
        let present = |kind, replaced| Effect::Present { kind, replaced };
        use FaultClass::*;
        let (anon, file, shmem) = (
            present(MemoryKind::Anon, false),
            present(MemoryKind::File, false),
            present(MemoryKind::Shmem, false),
        );
        let copy = present(MemoryKind::Anon, true);
        let (read, write) = (Access::Read, Access::Write);
        let cases = [
            (m(false, true), false, read, Minor, Effect::None),
            (m(false, true), false, write, Minor, anon),
            (m(false, true), false, write, Cow, copy),
            (m(false, false), false, read, Minor, shmem),
            (m(true, true), false, read, Major, file),
            (m(true, true), false, write, Cow, copy),
            (m(true, false), false, write, Minor, file),
            (m(true, false), true, read, Minor, shmem),
            (None, false, write, Minor, Effect::Unknown(write)),
        ];
        for (mapping, shmem, access, class, want) in cases {
            assert_eq!(
                effect(mapping, shmem, access, class),
                want,
                "{mapping:?} {access:?} {class:?}"
            );
        }
        assert_eq!(unknown_effect([0, 0, 0], write), anon);
        assert_eq!(unknown_effect([0, 0, 0], read), Effect::None);
        assert_eq!(unknown_effect([0, 3, 0], read), file);
    }
}
