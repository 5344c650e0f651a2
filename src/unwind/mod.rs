//! DWARF unwinding of sampled user stacks (`--call-graph dwarf`).
//!
//! Owns the address spaces as the recorder sees them (which executable
//! mappings every process has, over forks and execs) and turns a sample's
//! user registers and stack copy into a call chain with `framehop` over the
//! CFI (`.eh_frame`/`.eh_frame_hdr`, `.debug_frame` when there is no
//! `.eh_frame`) of each mapped file. Files are read once and shared by every
//! process that maps them.
//!
//! Each CFI row is computed once per (file, svma) ([`rows`]). The walk
//! ([`walk`]) steps the rows framehop would turn into its simple rules
//! (nearly all) from that cache, with framehop's checks; framehop steps
//! the rest, and the unwinder those whose CFA is another register (ld.so's
//! lazy-binding trampolines keep it in rbx), carrying rbx and r12-r15 from
//! the sampled registers through every frame by the CFI's rules. The files
//! and their CFI are [`files`]'.
//!
//! A chain that stops before the root (the outermost frame's CFI says "no
//! return address", as in `_start` and `clone3`) ends with
//! [`TRUNCATED_FRAME`]: the stack copy was too small, a frame lies in code
//! with no unwind information (a file that cannot be read), or the CFI led
//! nowhere. Frame pointers are followed in two places only, each step
//! checked and counted: anonymous executable memory (JIT code, which keeps
//! frame pointers by convention and has no CFI) and code no FDE covers in a
//! file that has CFI (`.init`). Elsewhere a marked `[unknown]` beats a
//! plausible-looking wrong caller.

mod files;
mod rows;
mod walk;

use crate::space::{Mapping, Mappings};
use files::{first_file, is_anonymous, is_file_path, load_file, locate, UnwindFile};
use rows::AtSvma;
use walk::{walk, Sampled};

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwinderX86_64};
use framehop::Unwinder as _;
use linux_perf_data::linux_perf_event_reader::{RawData, Regs};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

/// `PERF_CONTEXT_USER`, the call-chain mark before the user frames (the
/// kernel's uapi value; `format::records` holds every mark for the later
/// stages).
const CONTEXT_USER: u64 = perf_event_open_sys::bindings::PERF_CONTEXT_USER;

/// The last frame of a chain whose unwinding stopped early. Address 0 is
/// never code; perf shows it as `[unknown]` too.
pub const TRUNCATED_FRAME: u64 = 0;

/// `sample_regs_user` for x86_64 (perf_regs.h numbers): BX (1), BP (6),
/// SP (7), IP (8) and R12-R15 (20-23), in that order in each sample. rbx
/// and r12-r15 are callee-saved: a frame's CFA may be one of them.
pub const SAMPLE_REGS_USER: u64 =
    (1 << 1) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 20) | (1 << 21) | (1 << 22) | (1 << 23);

/// perf_regs.h numbers of rbp, rsp and rip.
const PERF_REG_BP: u64 = 6;
const PERF_REG_SP: u64 = 7;
const PERF_REG_IP: u64 = 8;

/// perf_regs.h numbers of rbx, r12, r13, r14, r15 (the order of
/// [`UserRegs::callee`]).
const CALLEE_SAVED_PERF_REGS: [u64; 5] = [1, 20, 21, 22, 23];

/// perf's default `kernel.perf_event_max_stack`: where the kernel cuts
/// frame-pointer chains.
pub const MAX_FRAMES: usize = 127;

/// Deepest chain the unwinder follows. Deeper than the kernel's
/// frame-pointer limit: interpreters recurse (124 of python's import chains
/// had more than 127 frames), and a 64 KiB stack copy holds thousands of
/// small frames.
pub const MAX_DWARF_FRAMES: usize = 1024;

/// Bytes after an ELF entry point that count as the entry code: a chain
/// reaching them is complete (the entry code is the root and may have no
/// CFI saying so, like ld.so's `_start`).
const ENTRY_CODE_BYTES: u64 = 64;

/// Largest user stack copy: the kernel's record size is a u16, and the
/// copy must be a multiple of 8.
pub const MAX_STACK_BYTES: u32 = 65_528;

/// Default bytes of user stack copied per sample. perf copies 8 KiB, which
/// cut 20% of python's chains (import recursion, 42-51 frames) and a
/// 60-frame recursion of 300-byte frames; with 32 KiB no chain of python,
/// gcc, gdb, git, bash or perl was cut by the copy. The kernel copies only
/// the mapped part but reserves the whole size in the ring for every
/// sample, so dwarf mode's rings are larger (`record::default_mmap_pages`)
/// and the drain gives space back every 256 records (`record::dwarf`).
pub const DEFAULT_STACK_BYTES: u32 = 32_768;

const PROT_EXEC: u32 = 4;
const PF_X: u32 = 1;

type Data = Arc<[u8]>;

/// What the unwinder needs of one sample: whose it is and when, and the
/// user registers and stack the kernel copied.
#[derive(Debug, Clone, Copy)]
pub struct UserSample<'a> {
    /// Process.
    pub pid: i32,
    /// Time stamp, to see the address space as it was then.
    pub time: u64,
    /// Taken in kernel mode (right after an exec: execve's own faults).
    pub kernel_mode: bool,
    /// The user registers.
    pub regs: UserRegs,
    /// The copied stack, from the sampled stack pointer up.
    pub stack: &'a [u8],
    /// Pages of `stack` that were not in memory (their bytes are not the
    /// stack's): bit i is page i, page 0 the one holding the stack pointer. A walk that needs one of their words stops there, as
    /// "stack not readable".
    pub holes: u32,
    /// The copy ended where an earlier chain of the thread stopped reading
    /// (the collector's `stack_tops`), not where the stack did: a walk that
    /// reads past it was cut by the copy's size.
    pub bounded: bool,
    /// The collector cut the copy short because its ring was filling (see
    /// `pressed_copies`): a walk that reads past it was cut by the copy,
    /// not by an unreadable page.
    pub pressed: bool,
}

/// User registers of a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs {
    /// Instruction pointer (avma).
    pub ip: u64,
    /// Stack pointer (avma).
    pub sp: u64,
    /// Frame pointer (avma).
    pub bp: u64,
    /// rbx, r12, r13, r14, r15: their values where [`UserRegs::callee_known`]
    /// has the bit (a plain array and a mask, not five `Option`s: every
    /// decoded fault is moved twice on its way to the analysis).
    pub callee: [u64; 5],
    /// Bit `i`: `callee[i]` was sampled.
    pub callee_known: u8,
}

impl UserRegs {
    /// The registers unwinding needs, from a sample's
    /// `PERF_SAMPLE_REGS_USER`; None without rip, rsp or rbp.
    pub fn from_sample(regs: &Regs<'_>) -> Option<UserRegs> {
        Some(UserRegs::from_callee(
            regs.get(PERF_REG_IP)?,
            regs.get(PERF_REG_SP)?,
            regs.get(PERF_REG_BP)?,
            CALLEE_SAVED_PERF_REGS.map(|reg| regs.get(reg)),
        ))
    }

    /// The registers, with the callee-saved ones that were sampled.
    pub fn from_callee(ip: u64, sp: u64, bp: u64, callee: [Option<u64>; 5]) -> UserRegs {
        let mut known = 0;
        for (i, value) in callee.iter().enumerate() {
            known |= u8::from(value.is_some()) << i;
        }
        UserRegs {
            ip,
            sp,
            bp,
            callee: callee.map(|value| value.unwrap_or(0)),
            callee_known: known,
        }
    }

    /// rbx, r12, r13, r14, r15, when sampled.
    pub fn callee(&self) -> [Option<u64>; 5] {
        let mut i = 0;
        self.callee.map(|value| {
            let known = self.callee_known >> i & 1 == 1;
            i += 1;
            known.then_some(value)
        })
    }
}

/// Loads one byte of each cache line of `bytes`: independent loads, whose
/// cache misses overlap, ahead of reads that would miss one at a time (a
/// stack walk, the drain's records).
pub(crate) fn touch_lines(bytes: &[u8]) {
    let mut sum = 0u8;
    for offset in (0..bytes.len()).step_by(64) {
        sum = sum.wrapping_add(bytes[offset]);
    }
    std::hint::black_box(sum);
}

/// The bytes of a sample's user stack copy that the kernel filled (its
/// `dyn_size`); empty without a copy.
pub fn copied_stack<'a>(user_stack: &Option<(RawData<'a>, u64)>) -> &'a [u8] {
    match user_stack {
        Some((RawData::Single(data), dyn_size)) => &data[..(*dyn_size as usize).min(data.len())],
        _ => &[],
    }
}

/// What an unwinding read of the stack: each word's offset above the
/// stack pointer and its value, once per word, in the order read; and
/// whether the chain depended on nothing else (no register the CFI named
/// besides rip, rsp and rbp, no frame-pointer guess that an unknown address
/// decided). Then the same registers over the same words unwind to the same
/// chain in the same address space (the collector's `unwound` map).
#[derive(Debug, Default, Clone)]
pub struct Reads {
    /// (offset, value) of each word read.
    pub words: Vec<(u32, u64)>,
    /// The chain is a function of the registers and `words` alone (and
    /// they are at most [`Reads::MAX_WORDS`]).
    pub only_words: bool,
    /// A bit per 8-byte word of a stack copy (64 KiB): noted already.
    noted: Vec<u64>,
    /// A complete chain: the bytes of stack above the stack pointer its
    /// walk read (every read, noted or not); else 0.
    pub needed: usize,
}

impl Reads {
    /// Words noted at most: a walk that reads more is not worth keeping
    /// (the collector's map holds 64 per stack).
    pub const MAX_WORDS: usize = 64;

    fn clear(&mut self) {
        for &(offset, _) in &self.words {
            let word = offset as usize / 8;
            self.noted[word / 64] &= !(1 << (word % 64));
        }
        self.words.clear();
        self.only_words = true;
        self.needed = 0;
        if self.noted.is_empty() {
            self.noted = vec![0; (MAX_STACK_BYTES as usize).div_ceil(8 * 64)];
        }
    }

    fn note(&mut self, offset: usize, value: u64) {
        if !self.only_words {
            return;
        }
        let word = offset / 8;
        let Some(bits) = self.noted.get_mut(word / 64).filter(|_| offset % 8 == 0) else {
            // Not a word of a stack copy the collector could keep.
            self.only_words = false;
            return;
        };
        let bit = 1 << (word % 64);
        if *bits & bit != 0 {
            return;
        }
        if self.words.len() == Self::MAX_WORDS {
            self.only_words = false;
            return;
        }
        *bits |= bit;
        self.words.push((offset as u32, value));
    }
}

/// How a chain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It reached the root frame.
    Complete,
    /// It stopped early; the chain ends with [`TRUNCATED_FRAME`].
    Truncated(Stop),
    /// The process or the code at the sampled IP is not known (yet): its
    /// mapping or fork record may still be in another CPU's buffer. Nothing
    /// was written.
    Unknown,
    /// The process was never seen; only the IP was written.
    NoProcess,
}

/// Why a chain stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The CFI needed stack beyond the copied bytes.
    StackCopy,
    /// The CFI needed stack the kernel was asked for but could not copy.
    StackUnreadable,
    /// A frame is in code without unwind information.
    NoUnwindInfo,
    /// The CFI gave an impossible frame.
    Corrupt,
    /// More than [`MAX_DWARF_FRAMES`] frames.
    TooDeep,
}

/// Unwinding counters, kept in the recording's metadata.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnwindStats {
    /// Samples unwound.
    pub samples: u64,
    /// Chains that reached their root.
    pub complete: u64,
    /// Stopped: stack copy too small.
    pub stack_copy: u64,
    /// Stopped: the CFI needed stack the kernel could not copy although
    /// it was asked for (a stack page not in memory, or the stack's end):
    /// a larger copy cannot help.
    #[serde(default)]
    pub stack_unreadable: u64,
    /// Stopped: code without unwind information.
    pub no_unwind_info: u64,
    /// Stopped: bad CFI.
    pub corrupt: u64,
    /// Stopped: deeper than [`MAX_DWARF_FRAMES`].
    #[serde(default)]
    pub too_deep: u64,
    /// Samples that did not parse (dropped, counted).
    #[serde(default)]
    pub bad_records: u64,
    /// Samples held back until their process's mappings were seen.
    pub deferred: u64,
    /// Samples without user registers (kernel threads).
    pub no_user_regs: u64,
    /// Frames left through frame pointers because no FDE covers their code
    /// (each step checked: the caller's frame lies above, its return
    /// address is in code).
    #[serde(default)]
    pub frame_pointer_steps: u64,
    /// Frames left through frame pointers in anonymous executable memory
    /// (JIT code), each step checked the same way.
    #[serde(default)]
    pub jit_frames: u64,
    /// Frames whose CFA is a register framehop does not track (rbx in
    /// ld.so's lazy-binding trampolines), stepped by pfprof's own CFI
    /// evaluation.
    #[serde(default)]
    pub register_cfa_steps: u64,
    /// Samples whose registers belong to no known image: faults the kernel
    /// takes inside execve (the old image's registers) and processes never
    /// seen. Only their IP is kept; `report` shows them as `[execve]`.
    #[serde(default)]
    pub no_process: u64,
    /// Files whose unwind information could not be read.
    pub unreadable_files: Vec<String>,
    /// Complete chains the collector found remembered, their stack words
    /// unchanged (they were not unwound again; counted in `complete`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub remembered: u64,
    /// Stack copies the collector ended at their thread's top (the
    /// farthest its chains read, see record/stack_tops.rs), short of the
    /// size asked for.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub copies_to_top: u64,
    /// Stack copies the collector cut to 1 KiB while its ring was more
    /// than half full (the drain behind): it keeps the fault and cuts a
    /// chain that needed more (counted in `stack_copy`) rather than lose
    /// the record.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pressed_copies: u64,
    /// Complete chains by the stack bytes their unwinding read, in powers
    /// of two: `[i]` counts chains that needed at most `64 << i` bytes
    /// (the last bucket, more). Tells which `--call-graph dwarf,SIZE` fits.
    #[serde(default)]
    pub stack_needed: [u64; 12],
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How much stack 99% of the chains needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackNeed {
    /// At most this many bytes.
    AtMost(u64),
    /// More than the copies held (over 1% of the chains were cut by them).
    MoreThanCopied,
}

impl UnwindStats {
    /// The stack copy size (a power of two) that held 99% of the complete
    /// chains' stack reads.
    pub fn p99_stack_needed(&self) -> Option<StackNeed> {
        // Chains cut by the copy's size needed more than was copied.
        let total: u64 = self.stack_needed.iter().sum::<u64>() + self.stack_copy;
        let mut seen = 0;
        for (i, n) in self.stack_needed.iter().enumerate() {
            seen += n;
            if total > 0 && seen * 100 >= total * 99 {
                return Some(StackNeed::AtMost(64 << i));
            }
        }
        (total > 0).then_some(StackNeed::MoreThanCopied)
    }

    /// Chains that stopped early.
    pub fn truncated(&self) -> u64 {
        self.stack_copy + self.stack_unreadable + self.no_unwind_info + self.corrupt + self.too_deep
    }

    /// Counts a complete chain that the collector found remembered (see
    /// [`Reads`]): its words span `needed` bytes of stack.
    pub fn count_remembered(&mut self, needed: usize) {
        self.count(Outcome::Complete);
        self.count_stack_needed(needed);
        self.remembered += 1;
    }

    /// Counts a complete chain whose unwinding read `needed` bytes of stack.
    fn count_stack_needed(&mut self, needed: usize) {
        let bucket = (needed
            .max(1)
            .div_ceil(64)
            .next_power_of_two()
            .trailing_zeros() as usize)
            .min(self.stack_needed.len() - 1);
        self.stack_needed[bucket] += 1;
    }

    fn count(&mut self, outcome: Outcome) {
        self.samples += 1;
        match outcome {
            Outcome::Complete => self.complete += 1,
            Outcome::Truncated(Stop::StackCopy) => self.stack_copy += 1,
            Outcome::Truncated(Stop::StackUnreadable) => self.stack_unreadable += 1,
            Outcome::Truncated(Stop::NoUnwindInfo) => self.no_unwind_info += 1,
            Outcome::Truncated(Stop::Corrupt) => self.corrupt += 1,
            Outcome::Truncated(Stop::TooDeep) => self.too_deep += 1,
            Outcome::NoProcess => self.no_process += 1,
            Outcome::Unknown => {}
        }
    }
}

/// A mapped file's CFI and its load bias (avma - svma).
type FileCfi = (Arc<UnwindFile>, u64);

/// What the unwinder keeps of an executable mapping.
#[derive(Clone)]
struct Region {
    /// Its path: what a part of it that a later mapping leaves needs to
    /// be placed again.
    name: Arc<str>,
    /// The file's entry point (avma), if it has one.
    entry: Option<u64>,
    /// The file whose CFI framehop has for it, and its load bias (avma -
    /// svma); None for JIT code and files that cannot be read.
    cfi: Option<FileCfi>,
    /// Anonymous memory (no file): JIT code.
    anonymous: bool,
}

/// What an address is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Code {
    /// Code with unwind information.
    Unwindable,
    /// The entry code of a file: the root of every chain.
    Entry,
    /// Code in a file with CFI that no FDE covers (`.init`, crtstuff's
    /// `__do_global_dtors_aux`): framehop steps through it with frame
    /// pointers, and the step is kept only if it checks out.
    NoFde,
    /// Anonymous executable memory: JIT code, which has no CFI but keeps
    /// frame pointers by convention (V8, the JVM, LuaJIT, .NET).
    Jit,
    /// A file without unwind information (or that cannot be read).
    Opaque,
}

/// One process's executable mappings.
#[derive(Clone, Default)]
struct Space {
    unwinder: UnwinderX86_64<Data>,
    /// The executable mappings.
    code: Mappings<Region>,
    /// The image before the last exec, for samples stamped before it that
    /// are unwound after it.
    before_exec: Option<(u64, Box<Space>)>,
    /// Exec'd, and no user-mode fault yet: kernel-mode faults are execve's
    /// own, with the old image's registers.
    exec_pending: bool,
    /// Signal return trampolines (avma) in the mapped code.
    sigreturn: BTreeSet<u64>,
    /// The kernel's `[uprobes]` page, where a uprobe runs the probed
    /// instruction out of line.
    uprobes: Option<Range<u64>>,
    /// Where pfprof's uprobe on `main` sits in this process (avma).
    main_probe_avma: Option<u64>,
}

impl Space {
    /// What kind of code `avma` is in; None outside every executable
    /// mapping.
    fn lookup(&self, avma: u64) -> Option<Code> {
        self.locate(avma).map(|(code, _)| code)
    }

    /// What kind of code `avma` is in, and the file with its CFI and load
    /// bias when it has some.
    fn locate(&self, avma: u64) -> Option<(Code, Option<&FileCfi>)> {
        let region = &self.code.find(avma)?.value;
        let Some(cfi) = &region.cfi else {
            let code = if region.anonymous {
                Code::Jit
            } else {
                Code::Opaque
            };
            return Some((code, None));
        };
        let code = match region.entry {
            Some(e) if avma >= e && avma - e < ENTRY_CODE_BYTES => Code::Entry,
            // Whether an FDE covers it is the walk's to ask (once per
            // address: [`Scratch::at`]).
            _ => Code::Unwindable,
        };
        Some((code, Some(cfi)))
    }

    /// Removes what a new mapping over `range` replaced: the code it
    /// covers, and the part it covers of the code it overlaps, which keeps
    /// its parts outside it (the analysis's address space keeps them too):
    /// an `mprotect` of a page of JIT code, or of a file's text, leaves the
    /// rest of the mapping as it was. Whether it touched code.
    fn unmap(&mut self, range: &Range<u64>) -> bool {
        let cuts = self.code.remove(range.clone());
        for cut in &cuts {
            if cut.was.value.cfi.is_some() {
                self.unwinder.remove_module(cut.was.start_avma);
            }
            for part in cut.kept.iter().flatten() {
                self.place_part(part);
            }
        }
        let gone: Vec<u64> = self.sigreturn.range(range.clone()).copied().collect();
        for avma in gone {
            self.sigreturn.remove(&avma);
        }
        !cuts.is_empty()
    }

    /// Places the CFI of `part`, what a cut left of a mapping (none when
    /// the part holds no segment of its file).
    fn place_part(&mut self, part: &Range<u64>) {
        let Some(kept) = self.code.starting_at_mut(part.start) else {
            return;
        };
        let Some((file, _)) = kept.value.cfi.take() else {
            return;
        };
        if let Some((module, bias)) = file.module(&kept.value.name, part.clone(), kept.file_offset)
        {
            kept.value.cfi = Some((file, bias));
            self.unwinder.add_module(module);
        }
    }

    fn at(&self, time: u64) -> &Space {
        match &self.before_exec {
            Some((exec_time, before)) if time < *exec_time => before,
            _ => self,
        }
    }
}

/// The unwinder's caches, shared by every process.
#[derive(Default)]
struct Scratch {
    /// framehop's rule cache.
    cache: CacheX86_64,
    /// What the CFI says at each (file, svma) a walk met.
    rows: FxHashMap<(usize, u64), AtSvma>,
    /// gimli's CFI evaluation state, reused.
    ctx: Box<gimli::UnwindContext<usize>>,
}

impl Scratch {
    /// What the CFI of `file` says at `svma`, found once: whether an FDE
    /// covers it (a binary search of a large file's FDEs misses the cache
    /// at every step), and its row.
    fn at(&mut self, file: &Arc<UnwindFile>, svma: u64) -> AtSvma {
        let ctx = &mut self.ctx;
        *self
            .rows
            .entry((Arc::as_ptr(file) as usize, svma))
            .or_insert_with(|| rows::row_at(&file.row_sections(), svma, ctx))
    }
}

/// How often, in recording time, the files no process maps are dropped
/// ([`StackUnwinder::forget_exited`]): seldom enough that a program run
/// again and again (a compiler in a build) has its file read again at most
/// twice a minute.
const FILE_SWEEP_NS: u64 = 30_000_000_000;

/// Unwind data by (path, build-id, (device, inode) when there is no
/// build-id); None: the file has none or cannot be read.
type FileCache = FxHashMap<(Vec<u8>, Option<Vec<u8>>, Option<(u64, u64)>), Option<Arc<UnwindFile>>>;

/// Address spaces, files and the unwinding cache of one recording.
#[derive(Default)]
pub struct StackUnwinder {
    /// Path (+ build-id) → the file's unwind data; None: unusable.
    files: FileCache,
    /// pfprof's uprobe on `main`: the executable's path and file offset.
    main_probe: Option<(Vec<u8>, u64)>,
    /// Bytes of stack each sample asked the kernel for (0: unknown).
    stack_requested: usize,
    spaces: FxHashMap<i32, Space>,
    scratch: Scratch,
    /// Processes that exited, to forget once no sample of theirs can come.
    exited: Vec<(u64, i32)>,
    /// When [`StackUnwinder::forget_exited`] next drops the files no
    /// process maps (recording time, ns).
    next_file_sweep: u64,
    /// Set when unwinding a finished recording (`report` of perf's
    /// `--call-graph dwarf`): files are found by path, `--symfs` and
    /// build-id caches, never through `/proc/PID` (those pids are gone, or
    /// another process's now).
    offline: Option<pfprof_symbolize::Options>,
    /// Counters.
    pub stats: UnwindStats,
}

impl StackUnwinder {
    /// An unwinder that knows no process yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// pfprof put a uprobe on `main` at `file_offset` of the executable
    /// `path`. The kernel executes the probed instruction out of line in
    /// its `[uprobes]` page; a fault taken there (fetching that page) has
    /// main's registers at entry, so it is unwound from main's entry.
    pub fn set_main_probe(&mut self, path: &[u8], file_offset: u64) {
        self.main_probe = Some((path.to_vec(), file_offset));
    }

    /// An unwinder of a finished recording: files are looked up as
    /// `options` says (see [`pfprof_symbolize::Options::file_candidates`]).
    pub fn offline(options: pfprof_symbolize::Options) -> Self {
        StackUnwinder {
            offline: Some(options),
            ..Self::default()
        }
    }

    /// Each sample asked the kernel for `bytes` of stack: a copy that came
    /// back shorter stopped at memory the kernel could not read.
    pub fn set_stack_requested(&mut self, bytes: usize) {
        self.stack_requested = bytes;
    }

    /// A mapping appeared in `pid`; true when it replaced (part of) code
    /// the process had mapped, which may unwind differently now.
    pub fn on_mmap(
        &mut self,
        pid: i32,
        avma: Range<u64>,
        file_offset: u64,
        prot: u32,
        path: &[u8],
        build_id: Option<&[u8]>,
    ) -> bool {
        let space = self.spaces.entry(pid).or_default();
        let replaced = space.unmap(&avma);
        if prot & PROT_EXEC == 0 || avma.is_empty() {
            return replaced;
        }
        if path == b"[uprobes]" {
            space.uprobes = Some(avma.clone());
        }
        if let Some((probe_path, probe_offset)) = &self.main_probe {
            let len = avma.end - avma.start;
            if path == &probe_path[..] && (file_offset..file_offset + len).contains(probe_offset) {
                space.main_probe_avma = Some(avma.start + (probe_offset - file_offset));
            }
        }
        let file = self.file_of(pid, &avma, path, build_id);
        let name = String::from_utf8_lossy(path);
        let space = self.spaces.entry(pid).or_default();
        let module = file.and_then(|file| {
            let (module, bias) = file.module(&name, avma.clone(), file_offset)?;
            let cfi = (file.clone(), bias);
            let trampolines = file.sections.sigreturn_svmas.iter();
            space.sigreturn.extend(
                trampolines
                    .map(|svma| svma.wrapping_add(bias))
                    .filter(|avma_of| avma.contains(avma_of)),
            );
            let entry = file.sections.entry_svma;
            Some((module, (entry != 0).then(|| entry.wrapping_add(bias)), cfi))
        });
        let region = Region {
            name: Arc::from(name),
            entry: module.as_ref().and_then(|m| m.1),
            cfi: module.as_ref().map(|m| m.2.clone()),
            anonymous: is_anonymous(path),
        };
        space.code.insert(Mapping {
            start_avma: avma.start,
            end_avma: avma.end,
            file_offset,
            value: region,
        });
        if let Some((module, _, _)) = module {
            space.unwinder.add_module(module);
        }
        replaced
    }

    /// Loads the CFI of a file `pid` maps executable at `avma`, before its
    /// mapping is told (`on_mmap` then finds it loaded): reading a large
    /// library's `.eh_frame` takes milliseconds, which a recording spends
    /// better before its events are enabled than while its rings fill.
    pub fn preload(
        &mut self,
        pid: i32,
        avma: &Range<u64>,
        prot: u32,
        path: &[u8],
        build_id: Option<&[u8]>,
    ) {
        if prot & PROT_EXEC != 0 && !avma.is_empty() {
            self.file_of(pid, avma, path, build_id);
        }
    }

    /// The unwind data of the file `pid` maps at `avma`, loaded once per
    /// (path, build-id or inode).
    fn file_of(
        &mut self,
        pid: i32,
        avma: &Range<u64>,
        path: &[u8],
        build_id: Option<&[u8]>,
    ) -> Option<Arc<UnwindFile>> {
        // Without a build-id, only the inode tells which file this is.
        let located = match (build_id, &self.offline) {
            (None, Some(options)) if is_file_path(path) => {
                use std::os::unix::ffi::OsStrExt;
                let path = Path::new(std::ffi::OsStr::from_bytes(path));
                first_file(options.file_candidates(path, None))
            }
            (None, None) if is_file_path(path) => locate(pid, path, avma),
            _ => None,
        };
        let key = (
            path.to_vec(),
            build_id.map(<[u8]>::to_vec),
            located.as_ref().and_then(|l| l.identity),
        );
        let stats = &mut self.stats;
        let offline = self.offline.as_ref();
        self.files
            .entry(key)
            .or_insert_with(|| {
                let at = (pid, avma);
                load_file(at, path, build_id, located.as_ref(), offline, stats)
            })
            .clone()
    }

    /// `pid` exec'd at `time`: a new, empty address space.
    pub fn on_exec(&mut self, pid: i32, time: u64) {
        let mut old = self.spaces.remove(&pid).unwrap_or_default();
        old.before_exec = None;
        self.spaces.insert(
            pid,
            Space {
                before_exec: Some((time, Box::new(old))),
                exec_pending: true,
                ..Space::default()
            },
        );
    }

    /// A new process `pid` forked from `ppid` (threads need nothing).
    pub fn on_fork(&mut self, pid: i32, ppid: i32) {
        if pid == ppid {
            return;
        }
        let mut space = self.spaces.get(&ppid).cloned().unwrap_or_default();
        space.before_exec = None;
        self.spaces.insert(pid, space);
    }

    /// Process `pid` exited at `time`.
    pub fn on_exit(&mut self, pid: i32, time: u64) {
        self.exited.push((time, pid));
    }

    /// Forgets process `pid` now (its samples are all in).
    pub fn forget(&mut self, pid: i32) {
        self.spaces.remove(&pid);
    }

    /// Forgets processes that exited before `time` (no sample of theirs can
    /// still be on its way).
    pub fn forget_exited(&mut self, time: u64) {
        let spaces = &mut self.spaces;
        self.exited.retain(|&(exit_time, pid)| {
            if exit_time < time {
                spaces.remove(&pid);
                false
            } else {
                true
            }
        });
        if time >= self.next_file_sweep {
            self.forget_unmapped_files();
            self.next_file_sweep = time.saturating_add(FILE_SWEEP_NS);
        }
    }

    /// Drops the unwind data of the files no process maps any more, and
    /// what the walks cached about them: a long run then holds the files of
    /// the processes that live, not of every program it met (a host that
    /// builds and runs new binaries meets new files all day). A file
    /// mapped again is read again.
    fn forget_unmapped_files(&mut self) {
        let mut gone = FxHashSet::default();
        self.files.retain(|_, file| match file {
            Some(file) if Arc::strong_count(file) == 1 => {
                gone.insert(Arc::as_ptr(file) as usize);
                false
            }
            _ => true,
        });
        // The rows are keyed by the file's address, which a file read later
        // may get.
        if !gone.is_empty() {
            self.scratch
                .rows
                .retain(|(file, _), _| !gone.contains(file));
        }
    }

    /// Completes a sample's call chain as the kernel writes one when it
    /// walks the user stack itself (what the recorder writes): `chain`
    /// holds the kernel's part (its context marks included), then come
    /// perf's user mark and the frames [`StackUnwinder::unwind`] finds. A
    /// kernel part that goes on into user frames (a recording made without
    /// `exclude_callchain_user`) is cut at its user mark first: the unwound
    /// frames replace those. On [`Outcome::Unknown`] `chain` keeps the
    /// kernel's part only. What the walk read of the stack goes to `reads`,
    /// when given.
    pub fn unwind_user_part_reading(
        &mut self,
        sample: UserSample<'_>,
        final_attempt: bool,
        chain: &mut Vec<u64>,
        reads: Option<&mut Reads>,
    ) -> Outcome {
        if let Some(user) = chain.iter().position(|&a| a == CONTEXT_USER) {
            chain.truncate(user);
        }
        let kernel_len = chain.len();
        chain.push(CONTEXT_USER);
        let outcome = self.unwind_reading(sample, final_attempt, chain, reads);
        if outcome == Outcome::Unknown {
            chain.truncate(kernel_len);
        }
        outcome
    }

    /// Unwinds a sample of a finished recording (every mapping of it is
    /// known) into `frames`, cleared first: the sampled IP, then each
    /// return address, without marks; and how the walk ended
    /// ([`Outcome::Truncated`]: it stopped early).
    pub fn unwind_frames(&mut self, sample: UserSample<'_>, frames: &mut Vec<u64>) -> Outcome {
        frames.clear();
        let outcome = self.unwind(sample, true, frames);
        if matches!(outcome, Outcome::Truncated(_)) && frames.last() == Some(&TRUNCATED_FRAME) {
            frames.pop();
        }
        outcome
    }

    /// Unwinds one sample into `chain` (appended: leaf IP first, then return
    /// addresses, then [`TRUNCATED_FRAME`] if it stopped early). With
    /// `final_attempt` unset, a sample of an unknown process or code
    /// returns [`Outcome::Unknown`] without writing, to be retried once the
    /// other buffers have been read.
    pub fn unwind(
        &mut self,
        sample: UserSample<'_>,
        final_attempt: bool,
        chain: &mut Vec<u64>,
    ) -> Outcome {
        self.unwind_reading(sample, final_attempt, chain, None)
    }

    fn unwind_reading(
        &mut self,
        sample: UserSample<'_>,
        final_attempt: bool,
        chain: &mut Vec<u64>,
        mut reads: Option<&mut Reads>,
    ) -> Outcome {
        if let Some(reads) = reads.as_deref_mut() {
            reads.clear();
        }
        let UserSample {
            pid,
            time,
            kernel_mode,
            regs,
            stack,
            holes,
            bounded,
            pressed,
        } = sample;
        let space = self.spaces.get_mut(&pid).map(|space| {
            if space.exec_pending && time >= space.before_exec.as_ref().map_or(0, |b| b.0) {
                space.exec_pending = kernel_mode;
            }
            &*space
        });
        if let Some(reads) = reads.as_deref_mut() {
            // The image before an exec is no longer the process's.
            let before_exec = space.and_then(|s| s.before_exec.as_ref());
            reads.only_words &= !before_exec.is_some_and(|(exec_time, _)| time < *exec_time);
        }
        let space = space.map(|s| s.at(time));
        if space.is_some_and(|s| s.exec_pending) {
            chain.push(regs.ip);
            self.stats.count(Outcome::NoProcess);
            return Outcome::NoProcess;
        }
        let mut regs = regs;
        if let Some(space) = space {
            if let (Some(xol), Some(probed)) = (&space.uprobes, space.main_probe_avma) {
                if xol.contains(&regs.ip) {
                    regs.ip = probed;
                }
            }
        }
        // Outside every executable mapping: its mmap record may still be in
        // another CPU's buffer.
        let code = space.and_then(|s| s.lookup(regs.ip));
        if code.is_none() && !final_attempt {
            return Outcome::Unknown;
        }
        let outcome = match space {
            Some(space) if code.is_some_and(|c| c != Code::Opaque) => {
                let short_copy = stack.len() < self.stack_requested && !bounded && !pressed;
                let outcome = walk(
                    space,
                    &mut self.scratch,
                    Sampled { regs, stack, holes },
                    chain,
                    &mut self.stats,
                    reads,
                );
                match outcome {
                    Outcome::Truncated(Stop::StackCopy) if short_copy => {
                        Outcome::Truncated(Stop::StackUnreadable)
                    }
                    other => other,
                }
            }
            Some(_) => {
                chain.extend([regs.ip, TRUNCATED_FRAME]);
                Outcome::Truncated(Stop::NoUnwindInfo)
            }
            None => {
                // No record of this process at all.
                chain.push(regs.ip);
                Outcome::NoProcess
            }
        };
        self.stats.count(outcome);
        outcome
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn callee_saved_registers_keep_which_were_sampled() {
        let callee = [Some(1), None, Some(0), None, Some(u64::MAX)];
        let regs = UserRegs::from_callee(10, 20, 30, callee);
        assert_eq!(regs.callee(), callee);
        assert_eq!((regs.ip, regs.sp, regs.bp), (10, 20, 30));
        assert_eq!(
            UserRegs::from_callee(1, 2, 3, [None; 5]).callee(),
            [None; 5]
        );
    }

    /// Complete chains are counted by the stack they read, in powers of
    /// two from 64 bytes; the last bucket takes everything larger.
    #[test]
    fn counts_stack_needed_in_powers_of_two() {
        let mut stats = UnwindStats::default();
        for needed in [0, 64, 65, 128, 129, 1 << 20] {
            stats.count_stack_needed(needed);
        }
        assert_eq!(stats.stack_needed[..4], [2, 2, 1, 0]);
        assert_eq!(stats.stack_needed[11], 1);
    }

    /// 99% of the chains: the complete ones by the stack they read, and
    /// those the copy's size cut, which needed more than was copied.
    #[test]
    fn stack_needed_counts_cut_chains() {
        let stats = |buckets: &[(usize, u64)], stack_copy| {
            let mut s = UnwindStats {
                stack_copy,
                ..UnwindStats::default()
            };
            for &(i, n) in buckets {
                s.stack_needed[i] = n;
            }
            s
        };
        let cases = [
            (stats(&[], 0), None),
            (
                stats(&[(4, 990), (5, 10)], 0),
                Some(StackNeed::AtMost(1024)),
            ),
            (stats(&[(4, 995)], 5), Some(StackNeed::AtMost(1024))),
            (stats(&[(4, 980)], 20), Some(StackNeed::MoreThanCopied)),
            (stats(&[], 3), Some(StackNeed::MoreThanCopied)),
        ];
        for (s, want) in cases {
            assert_eq!(s.p99_stack_needed(), want, "{s:?}");
        }
    }

    /// A stack captured by `fixtures/snapshots/make.sh` (gdb stopped at the
    /// faulting store in `leaf` of the committed `-O2 -fomit-frame-pointer`
    /// binary `nofp`).
    pub(crate) struct Snapshot {
        pub(crate) regs: UserRegs,
        pub(crate) stack: Vec<u8>,
        pub(crate) text: Range<u64>,
        pub(crate) text_file_offset: u64,
        libc_text: Range<u64>,
        /// IP, then return addresses, leaf to main.
        pub(crate) expected: Vec<u64>,
    }

    impl Snapshot {
        /// The snapshot's fault as a sample of [`PID`] at time 0, in user mode.
        pub(crate) fn sample(&self) -> UserSample<'_> {
            UserSample {
                pid: PID,
                time: 0,
                kernel_mode: false,
                regs: self.regs,
                stack: &self.stack,
                holes: 0,
                bounded: false,
                pressed: false,
            }
        }
    }

    pub(crate) const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/snapshots");

    pub(crate) fn snapshot() -> Snapshot {
        let text = std::fs::read_to_string(format!("{DIR}/nofp.snap")).unwrap();
        let values: FxHashMap<&str, &str> =
            text.lines().filter_map(|l| l.split_once('=')).collect();
        let hex =
            |key: &str| u64::from_str_radix(values[key].trim_start_matches("0x"), 16).unwrap();
        Snapshot {
            regs: UserRegs::from_callee(hex("ip"), hex("sp"), hex("bp"), [None; 5]),
            stack: std::fs::read(format!("{DIR}/nofp.stack")).unwrap(),
            text: hex("text_avma_start")..hex("text_avma_end"),
            text_file_offset: hex("text_file_offset"),
            libc_text: hex("libc_text_avma_start")..hex("libc_text_avma_end"),
            expected: values["expected_return_addresses"]
                .split(',')
                .map(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap())
                .collect(),
        }
    }

    pub(crate) const PID: i32 = 100;

    pub(crate) fn unwinder_with_nofp(snap: &Snapshot) -> StackUnwinder {
        let mut u = StackUnwinder::new();
        let path = format!("{DIR}/nofp");
        u.on_mmap(
            PID,
            snap.text.clone(),
            snap.text_file_offset,
            PROT_EXEC | 1,
            path.as_bytes(),
            None,
        );
        u
    }

    /// Through five frames of code without frame pointers (one with 3 KiB
    /// of locals), from the faulting store to `main`; the caller of `main`
    /// is in libc, which this address space lacks, so the chain ends
    /// there with the marker. Smaller stack copies stop early, marked.
    #[test]
    fn unwinds_snapshot_without_frame_pointers() {
        let snap = snapshot();
        assert_eq!(snap.expected.len(), 6, "leaf, c, big, b, a, main");
        // (stack bytes copied, frames expected before the marker, outcome)
        let cases = [
            (snap.stack.len(), 7, Outcome::Truncated(Stop::NoUnwindInfo)),
            (512, 3, Outcome::Truncated(Stop::StackCopy)),
            (0, 1, Outcome::Truncated(Stop::StackCopy)),
        ];
        for (bytes, frames, outcome) in cases {
            let mut u = unwinder_with_nofp(&snap);
            let mut chain = Vec::new();
            let got = u.unwind(
                UserSample {
                    stack: &snap.stack[..bytes],
                    ..snap.sample()
                },
                false,
                &mut chain,
            );
            assert_eq!(got, outcome, "{bytes} bytes");
            assert_eq!(chain.len(), frames + 1, "{bytes} bytes: {chain:x?}");
            assert_eq!(chain[..frames.min(6)], snap.expected[..frames.min(6)]);
            assert_eq!(chain.last(), Some(&TRUNCATED_FRAME));
            if frames == 7 {
                assert!(
                    snap.libc_text.contains(&chain[6]),
                    "main's caller is in libc"
                );
            }
            assert_eq!(u.stats.truncated(), 1);
        }
    }

    /// Pages of the copy that were not in memory: a walk that needs a word
    /// of one stops there as "stack not readable"; one it does not need
    /// changes nothing.
    #[test]
    fn a_walk_stops_at_a_page_not_in_memory_only_when_it_needs_it() {
        let snap = snapshot();
        let walk = |holes: u32| {
            let mut u = unwinder_with_nofp(&snap);
            let mut chain = Vec::new();
            let got = u.unwind(
                UserSample {
                    holes,
                    ..snap.sample()
                },
                false,
                &mut chain,
            );
            (got, chain)
        };
        let (whole, whole_chain) = walk(0);
        assert_eq!(whole, Outcome::Truncated(Stop::NoUnwindInfo));
        // The last page of the copy holds main's frame, which the walk
        // needs; the page above the copy nothing.
        let last_page = ((snap.regs.sp & 0xfff) as usize + snap.stack.len() - 1) / 4096;
        assert_eq!(walk(1 << (last_page + 1)), (whole, whole_chain.clone()));
        let (got, chain) = walk(1 << last_page);
        assert_eq!(got, Outcome::Truncated(Stop::StackUnreadable));
        assert!(chain.len() < whole_chain.len(), "{chain:x?}");
        assert_eq!(chain[..chain.len() - 1], whole_chain[..chain.len() - 1]);
        assert_eq!(chain.last(), Some(&TRUNCATED_FRAME));
    }

    /// The words a walk notes for the collector are those its chain
    /// depends on: through code without frame pointers, the return
    /// addresses alone, not the callee-saved registers and rbp its frames
    /// saved (their values change with the data, and a stack whose noted
    /// words changed is unwound again).
    #[test]
    fn a_walk_notes_the_return_addresses_alone() {
        let snap = snapshot();
        let mut u = unwinder_with_nofp(&snap);
        let (mut chain, mut reads) = (Vec::new(), Reads::default());
        u.unwind_reading(snap.sample(), false, &mut chain, Some(&mut reads));
        let noted: Vec<u64> = reads.words.iter().map(|&(_, value)| value).collect();
        assert_eq!(noted, chain[1..7], "{chain:x?}");
        assert!(reads.only_words);
    }

    /// A file's unwind data and the rows its walks cached stay while a
    /// process maps it, and go at the first sweep after the last one that
    /// did exits; mapped again, it unwinds as before.
    #[test]
    fn files_no_process_maps_are_forgotten() {
        let snap = snapshot();
        let mut u = unwinder_with_nofp(&snap);
        let mut chain = Vec::new();
        let unwind = |u: &mut StackUnwinder, chain: &mut Vec<u64>| {
            chain.clear();
            u.unwind(snap.sample(), false, chain)
        };
        let first = unwind(&mut u, &mut chain);
        let first_chain = chain.clone();
        assert_eq!(chain[..6], snap.expected[..]);
        assert!(!u.scratch.rows.is_empty());
        u.forget_exited(FILE_SWEEP_NS);
        assert_eq!(u.files.len(), 1, "mapped: kept");
        u.on_exit(PID, 10);
        u.forget_exited(2 * FILE_SWEEP_NS);
        assert!(u.files.is_empty(), "nobody maps it");
        assert!(u.scratch.rows.is_empty(), "its rows went with it");
        let path = format!("{DIR}/nofp");
        let (start, offset) = (snap.text.clone(), snap.text_file_offset);
        u.on_mmap(PID, start, offset, PROT_EXEC | 1, path.as_bytes(), None);
        assert_eq!(unwind(&mut u, &mut chain), first);
        assert_eq!(chain, first_chain);
    }

    /// Forks inherit the address space; exec replaces it, but samples
    /// stamped before the exec still see the old image; an IP outside
    /// every module is held back until the last attempt, then marked; a
    /// process never seen gets its IP alone.
    #[test]
    fn address_spaces_over_fork_and_exec() {
        let snap = snapshot();
        let mut u = unwinder_with_nofp(&snap);
        let mut chain = Vec::new();
        u.on_fork(PID + 1, PID);
        let got = u.unwind(
            UserSample {
                pid: PID + 1,
                time: 10,
                ..snap.sample()
            },
            false,
            &mut chain,
        );
        assert_eq!(got, Outcome::Truncated(Stop::NoUnwindInfo));
        assert_eq!(chain[..6], snap.expected[..]);

        u.on_exec(PID, 1_000);
        chain.clear();
        let before = u.unwind(
            UserSample {
                time: 999,
                ..snap.sample()
            },
            false,
            &mut chain,
        );
        assert_eq!(
            (before, chain.len()),
            (Outcome::Truncated(Stop::NoUnwindInfo), 8)
        );
        // Kernel-mode faults right after the exec are execve's own.
        chain.clear();
        let in_exec = u.unwind(
            UserSample {
                time: 1_000,
                kernel_mode: true,
                ..snap.sample()
            },
            false,
            &mut chain,
        );
        assert_eq!(
            (in_exec, &chain[..]),
            (Outcome::NoProcess, &[snap.regs.ip][..])
        );
        chain.clear();
        let after = u.unwind(
            UserSample {
                time: 1_001,
                ..snap.sample()
            },
            false,
            &mut chain,
        );
        assert_eq!((after, chain.len()), (Outcome::Unknown, 0), "held back");
        let settled = u.unwind(
            UserSample {
                time: 1_001,
                ..snap.sample()
            },
            true,
            &mut chain,
        );
        assert_eq!(settled, Outcome::Truncated(Stop::NoUnwindInfo));
        assert_eq!(chain, vec![snap.regs.ip, TRUNCATED_FRAME]);

        // Executable memory without CFI (JIT code): settled at once.
        let jit = 0x7000_0000..0x7000_1000;
        u.on_mmap(PID, jit.clone(), 0, PROT_EXEC, b"//anon", None);
        chain.clear();
        let regs = UserRegs {
            ip: jit.start + 16,
            ..snap.regs
        };
        let opaque = u.unwind(
            UserSample {
                time: 1_002,
                regs,
                ..snap.sample()
            },
            false,
            &mut chain,
        );
        assert_eq!(opaque, Outcome::Truncated(Stop::NoUnwindInfo));
        assert_eq!(chain, [regs.ip, TRUNCATED_FRAME]);

        chain.clear();
        let stranger = u.unwind(
            UserSample {
                pid: 7,
                ..snap.sample()
            },
            true,
            &mut chain,
        );
        assert_eq!(
            (stranger, &chain[..]),
            (Outcome::NoProcess, &[snap.regs.ip][..])
        );

        // A new mapping over the module removes it; exiting forgets the pid.
        u.on_mmap(PID + 1, snap.text.clone(), 0, 1, b"//anon", None);
        chain.clear();
        let unmapped = u.unwind(
            UserSample {
                pid: PID + 1,
                time: 20,
                ..snap.sample()
            },
            false,
            &mut chain,
        );
        assert_eq!(unmapped, Outcome::Unknown);
        u.on_exit(PID + 1, 30);
        u.forget_exited(31);
        let forgotten = u.unwind(
            UserSample {
                pid: PID + 1,
                time: 40,
                ..snap.sample()
            },
            true,
            &mut chain,
        );
        assert_eq!(forgotten, Outcome::NoProcess);
    }

    /// The user part follows the kernel's part after perf's user mark; a
    /// kernel part that went on into user frames is cut at its mark; a
    /// sample held back leaves the kernel's part alone.
    #[test]
    fn user_part_after_the_kernel_part() {
        use crate::format::decode::{Chain, UnwoundChain};
        let snap = snapshot();
        let kernel = (-128i64) as u64; // PERF_CONTEXT_KERNEL
        assert_eq!(CONTEXT_USER, (-512i64) as u64);
        let mut want = vec![kernel, 0xffff_1000, CONTEXT_USER];
        want.extend(&snap.expected);
        for given in [
            vec![kernel, 0xffff_1000],
            vec![kernel, 0xffff_1000, CONTEXT_USER, 0x1234, 0x5678],
        ] {
            let mut u = unwinder_with_nofp(&snap);
            let mut chain = given.clone();
            let got = u.unwind_user_part_reading(
                UserSample {
                    kernel_mode: true,
                    ..snap.sample()
                },
                true,
                &mut chain,
                None,
            );
            assert_eq!(got, Outcome::Truncated(Stop::NoUnwindInfo), "{given:x?}");
            assert_eq!(chain[..want.len()], want[..], "{given:x?}");
            assert_eq!(chain.len(), want.len() + 2, "main's caller, the marker");
            // The analysis's typed chain (frames without marks, and whether
            // the walk stopped early) reads as the words the recorder writes.
            let mut u = unwinder_with_nofp(&snap);
            let mut frames = Vec::new();
            let sample = UserSample {
                kernel_mode: true,
                ..snap.sample()
            };
            assert_eq!(u.unwind_frames(sample, &mut frames), got);
            assert_eq!(frames.len(), snap.expected.len() + 1, "main's caller");
            let typed = UnwoundChain::new(Some(Chain::Words(&given)), &frames, true);
            let read: Vec<u64> = Chain::Unwound(&typed).iter().collect();
            assert_eq!(read, chain, "{given:x?}");
        }
        let mut u = unwinder_with_nofp(&snap);
        let mut chain = vec![kernel, 0xffff_1000];
        let regs = UserRegs {
            ip: 0x10,
            ..snap.regs
        };
        let held = u.unwind_user_part_reading(
            UserSample {
                kernel_mode: true,
                regs,
                ..snap.sample()
            },
            false,
            &mut chain,
            None,
        );
        assert_eq!(
            (held, &chain[..]),
            (Outcome::Unknown, &[kernel, 0xffff_1000][..])
        );
    }

    /// A mapping over part of an executable one (an `mprotect` of a page)
    /// leaves the rest: JIT code around a page made writable is still JIT
    /// code, and a file's text around such a page still unwinds by its
    /// CFI; the page itself is no code until mapped executable again.
    #[test]
    fn a_mapping_over_part_of_another_keeps_the_rest() {
        let snap = snapshot();
        let mut u = StackUnwinder::new();
        let path = format!("{DIR}/nofp");
        // The text page, then two more pages of the same mapping.
        let text = snap.text.start..snap.text.end + 0x2000;
        u.on_mmap(
            PID,
            text.clone(),
            snap.text_file_offset,
            PROT_EXEC | 1,
            path.as_bytes(),
            None,
        );
        let jit = 0x7000_0000..0x7000_4000;
        u.on_mmap(PID, jit.clone(), 0, PROT_EXEC, b"//anon", None);
        let rw = 3;
        u.on_mmap(PID, 0x7000_1000..0x7000_2000, 0, rw, b"//anon", None);
        u.on_mmap(
            PID,
            snap.text.end..snap.text.end + 0x1000,
            0,
            rw,
            path.as_bytes(),
            None,
        );
        let space = &u.spaces[&PID];
        for (avma, want) in [
            (0x7000_0010, Some(Code::Jit)),
            (0x7000_1010, None),
            (0x7000_2010, Some(Code::Jit)),
            (0x7000_3ff0, Some(Code::Jit)),
            (snap.text.end + 0x10, None),
        ] {
            assert_eq!(space.lookup(avma), want, "{avma:#x}");
        }
        assert!(space.lookup(snap.text.end + 0x1010).is_some());
        let mut chain = Vec::new();
        let got = u.unwind(snap.sample(), false, &mut chain);
        assert_eq!(got, Outcome::Truncated(Stop::NoUnwindInfo));
        assert_eq!(chain[..6], snap.expected[..]);
    }

    /// A chain that reaches the entry code of a file is complete even
    /// without CFI that says so (ld.so's `_start`).
    #[test]
    fn entry_code_ends_the_chain() {
        let snap = snapshot();
        let mut u = unwinder_with_nofp(&snap);
        let entry_space = u.spaces.get_mut(&PID).unwrap();
        let first = entry_space.code.iter().next().unwrap().start_avma;
        let region = &mut entry_space.code.starting_at_mut(first).unwrap().value;
        // Pretend `a`'s return site into main is the entry code.
        region.entry = Some(snap.expected[5] - 1 - 8);
        let mut chain = Vec::new();
        let got = u.unwind(snap.sample(), false, &mut chain);
        assert_eq!(got, Outcome::Complete);
        assert_eq!(chain, snap.expected);
    }
}
