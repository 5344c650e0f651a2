// SPDX-License-Identifier: MIT OR GPL-2.0-only
//
// pfprof's in-kernel collector (see record/bpf.rs): one record per fault.
//
// At a fault's entry the `exceptions:page_fault_user`/`_kernel` tracepoints
// run `on_entry_*`, which keeps the x86 error code, the address and the time
// for the thread: as raw tracepoint programs, attached once for the whole
// machine, where the kernel allows them; else as programs of the
// tracepoints' perf events, whose own samples they suppress. At the fault's
// completion the `minor-faults`/`major-faults` software events run the
// completion program (`on_major` first for major ones) in the faulting
// thread, which writes one compact
// record into that CPU's BPF ring buffer, which pfprof drains: a perf
// sample record as the kernel writes one of a bpf-output event (so that
// the rest of pfprof reads it as one), whose raw data is the IP and data
// address, the entry's error code and
// the time between entry and completion, the user registers, the kernel's
// call chain when asked, and the user call chain as the mode asks:
// - fp: a walk of the frame pointers, as the kernel's (`fp_chain`);
// - dwarf: a copy of the user stack from the stack pointer up, page by
//   page, only as far as it is readable (and no farther than the thread's
//   top in `stack_tops`), which pfprof unwinds. Unless the
//   `unwound` map holds this thread's registers (process, ip, sp, bp):
//   pfprof put there, for a stack it unwound, every stack word the unwinding
//   read and the chain it found. When those words are the same now, the
//   chain is the same (unwinding reads nothing else), so the record carries
//   the chain and no stack copy;
// - none: no chain.
// The software events' own samples, whose stack copy would reserve the whole
// size asked for in the ring whatever it holds, are suppressed (return 0).
//
// Built by `src/record/build-bpf.sh` into fault.bpf.o, which is committed
// (cargo needs no clang); a test checks that the object matches this source.
// No BTF, no global data, no BPF-to-BPF calls (one tail call): pfprof's
// loader is small.

#include <linux/types.h>
#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))
#define INLINE static inline __attribute__((always_inline))

// Helpers, by number (include/uapi/linux/bpf.h).
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value,
				   __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static long (*bpf_tail_call)(void *ctx, void *prog_array, __u32 index) = (void *)12;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)8;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static __u64 (*bpf_get_current_task)(void) = (void *)35;
static void *(*bpf_map_lookup_percpu_elem)(void *map, const void *key, __u32 cpu) = (void *)195;
static long (*bpf_get_stack)(void *ctx, void *buf, __u32 size, __u64 flags) = (void *)67;
static long (*bpf_probe_read_user)(void *dst, __u32 size, const void *src) = (void *)112;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) = (void *)113;
static void *(*bpf_get_current_task_btf)(void) = (void *)158;
static long (*bpf_get_ns_current_pid_tgid)(__u64 dev, __u64 ino, void *nsdata,
					  __u32 size) = (void *)120;
static long (*bpf_ringbuf_output)(void *ringbuf, void *data, __u64 size, __u64 flags) = (void *)130;
static __u64 (*bpf_ringbuf_query)(void *ringbuf, __u64 flags) = (void *)134;
static void *(*bpf_task_pt_regs)(void *task) = (void *)175;

// The legacy map definition the loader reads from the "maps" section.
struct map_def {
	__u32 type;
	__u32 key_size;
	__u32 value_size;
	__u32 max_entries;
	__u32 map_flags;
};

// x86-64 `struct pt_regs` (its layout is the ABI of ptrace and perf).
struct regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di;
	__u64 orig_ax, ip, cs, flags, sp, ss;
};

// The context of a perf_event program: `struct bpf_perf_event_data`.
struct perf_ctx {
	struct regs regs;
	__u64 sample_period;
	__u64 addr;
};

// The context of a tracepoint program: the tracepoint's record, whose first
// 8 bytes (the common fields) the kernel replaced by a pointer.
struct entry_ctx {
	__u64 common;
	__u64 address;
	__u64 ip;
	__u64 error_code;
};

// The context of a raw tracepoint program: the tracepoint's arguments,
// `(unsigned long address, struct pt_regs *regs, unsigned long error_code)`.
struct raw_entry_ctx {
	__u64 address;
	__u64 regs;
	__u64 error_code;
};

#define PAGE 4096
// The most stack a record carries (the largest `dwarf,N`), and the kernel
// and user frames at most (perf's default kernel.perf_event_max_stack).
#define MAX_STACK 61440
#define MAX_FRAMES 127
// Pages not in memory a stack copy passes at most (see `copy_start`).
#define MAX_HOLE_PAGES 8
// What an entry of `unwound` holds at most: stack words read, frames.
#define CACHE_WORDS 64
#define CACHE_FRAMES 64

#define FLAG_MAJOR 1
#define FLAG_KERNEL_MODE 2
// The fault's entry was seen: error_code and latency_ns are set.
#define FLAG_ENTRY 4
// That entry was the kernel-mode tracepoint's.
#define FLAG_ENTRY_KERNEL 8
// The user chain follows (fp, or a dwarf stack unwound before).
#define FLAG_CHAIN 16
// The chain came from `unwound` (`span` is the stack its words cover).
#define FLAG_CACHED 32
// The stack copy ended at the thread's `stack_tops` entry (before the
// size asked for, and before any page it could not read).
#define FLAG_BOUNDED 64
// The stack copy was cut to PRESSED_STACK bytes: the ring was more than
// half full (the drain behind).
#define FLAG_PRESSED 128

// What a stack copy holds at most while the ring is more than half full.
// A drain the kernel stalls (a fault of its own on a page that compaction
// is migrating, or a read of /proc waiting on another process's mmap
// lock, while the task holding it waits for a CPU behind the traced
// program's threads) fell 100-250 ms behind, and a fork storm's copies
// (about 2 KiB each, up to 8) then filled a 128 MiB ring: with copies of
// 1 KiB at most the rest of the ring holds more faults, and a chain that
// needed more is cut and counted rather than the fault lost.
#define PRESSED_STACK 1024
#define BPF_RB_AVAIL_DATA 0
#define BPF_RB_RING_SIZE 1

// The user code segment of a 64-bit task (__USER_CS), the end of user
// space (TASK_SIZE_MAX with 4-level page tables, as the kernel's frame walk
// checks it), and the lowest address a frame can be at (the default
// vm.mmap_min_addr: below it nothing is mapped).
#define USER_CS_64 0x33
#define USER_TOP 0x7ffffffff000ULL
#define LOWEST_FRAME 0x10000

#define MODE_NONE 0
#define MODE_FP 1
#define MODE_DWARF 2

// The record's fixed part; then `kernel_frames` u64 IPs, `user_frames` u64
// IPs, then `stack_len` bytes of stack (record/bpf.rs parses the same).
struct fault {
	__u32 magic;
	__u32 flags;
	__u64 ip;
	__u64 addr;
	__u64 error_code;
	__u64 latency_ns;
	// rip, rsp, rbp, rbx, r12, r13, r14, r15 of user mode.
	__u64 user[8];
	__u32 kernel_frames;
	__u32 user_frames;
	__u32 stack_len;
	__u32 span;
	// Pages of the stack copy not in memory, their bytes not the stack's:
	// bit i is the copy's page i, page 0 the one holding sp (see
	// `copy_start`).
	__u32 holes;
	__u32 pad;
};

#define MAGIC 0x70666233 /* "pfb3" */

// The sample id of the records (no event of the kernel's has it: pfprof
// reads them with the layout of a bpf-output event, see record/bpf.rs).
#define COLLECTOR_ID 0xfffffffffffe7066ULL
#define PERF_RECORD_SAMPLE 9
#define PERF_RECORD_MISC_KERNEL 1
#define PERF_RECORD_MISC_USER 2

// The perf sample record a fault's record is the raw data of, as the kernel
// writes one for sample type IDENTIFIER | TID | TIME | CPU | RAW: header,
// id, pid and tid, time, cpu, then the raw data's size. In 32-bit words, at
// offset 4 of the scratch (`pad` is not written out), so that the record
// after it is aligned to 8 bytes.
struct sample_head {
	__u32 pad;
	__u32 type;
	__u32 misc_size;
	__u32 id[2];
	__u32 pid;
	__u32 tid;
	__u32 time[2];
	__u32 cpu;
	__u32 res;
	__u32 raw_size;
};

#define HEAD_OUT (sizeof(struct sample_head) - 4)

// The verifier bounds a copy's offset and size by these masks (it tracks
// masks reliably, comparisons of a register's copies not always): every
// offset below OFFSET_MASK + 1 plus every size below SIZE_MASK + 1 fits.
#define OFFSET_MASK 0xffff
#define SIZE_MASK 0x1fff

struct scratch {
	struct sample_head h;
	struct fault f;
	__u8 data[OFFSET_MASK + 1 + SIZE_MASK + 1];
};

struct config {
	// Bytes of user stack to copy at most (a multiple of 8), dwarf mode.
	__u32 stack_bytes;
	// Nonzero: add the kernel's call chain.
	__u32 kernel_frames;
	// pfprof's own process (system-wide): its faults are only counted, so
	// they get no stack (unwinding them would make pfprof fault more).
	__u32 own_tgid;
	// MODE_*.
	__u32 mode;
	// Nonzero: the entry tracepoints run (pair with them).
	__u32 entries;
	// Nonzero: every fault is sampled, so an entry left without its
	// completion (a SIGSEGV, a spurious fault) is counted.
	__u32 every_fault;
	// pfprof's pid namespace, when it is not the initial one: the records
	// carry the pids pfprof sees (those of its perf records).
	__u64 pidns_dev;
	__u64 pidns_ino;
};

// A fault's entry, kept per thread until its completion.
struct entry {
	__u64 time;
	__u64 addr;
	__u32 error_code;
	// ENTRY_LIVE, ENTRY_KERNEL.
	__u32 flags;
};

#define ENTRY_LIVE 1
#define ENTRY_KERNEL 2
// The thread had a fault completed here before: it is followed (the entry
// programs run for every thread on the machine, the completion programs
// for the followed ones only), so an entry of its left without completion
// is one to count.
#define ENTRY_FOLLOWED 4

// What the unwinding of a stack depended on: the registers it started from.
struct ukey {
	__u32 tgid;
	__u32 pad;
	__u64 ip;
	__u64 sp;
	__u64 bp;
};

// ... and the stack words it read (word `woff[i]` above sp held
// `words[i]`), within `span` bytes of sp; the chain it found.
struct uvalue {
	__u32 nwords;
	__u32 nframes;
	__u32 span;
	__u32 pad;
	__u16 woff[CACHE_WORDS];
	__u64 words[CACHE_WORDS];
	__u64 frames[CACHE_FRAMES];
};

// Counters, per CPU (`counters` map).
#define COUNT_UNFINISHED 0
#define COUNT_CACHE_HITS 1
#define COUNT_CACHE_STALE 2
// Records that found their ring full (or no ring for their CPU): minor
// faults' (COW included), major faults'.
#define COUNT_LOST 3
#define COUNT_LOST_MAJOR 4
// `rss_stat` and syscall records that found their ring full.
#define COUNT_LOST_RSS 5
// Faults the completion programs ran for: minor (COW included), major.
// The kernel runs no perf event's program while its CPU is in BPF code
// already (a program or a map operation: `bpf_prog_active`), and still
// counts the fault: the counts less these are the faults it never handed
// over (3 at a time, in a third of busy 5 s runs here).
#define COUNT_SEEN 6
#define COUNT_SEEN_MAJOR 7
#define COUNTERS 8

// Per CPU, the BPF ring buffer its records go to (pfprof creates them,
// one for a few CPUs): cheaper than a bpf-output event by 0.5 µs a fault
// here (no perf sample to prepare).
struct map_def SEC("maps") rings = {
	.type = BPF_MAP_TYPE_ARRAY_OF_MAPS,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u32),
	.max_entries = 1024,
};

// One scratch record per CPU, indexed by CPU number: a per-CPU array's
// values are limited to 32 KiB. The program runs with preemption off.
struct map_def SEC("maps") scratch = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct scratch),
	.max_entries = 1024,
};

struct map_def SEC("maps") config = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct config),
	.max_entries = 1,
};

// Per thread: the fault it entered last. The least recently used go first
// (the tracepoints run for every thread on the machine).
struct map_def SEC("maps") entries = {
	.type = BPF_MAP_TYPE_LRU_HASH,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct entry),
	.max_entries = 65536,
	.map_flags = BPF_F_NO_COMMON_LRU,
};

// Filled by pfprof. Not preallocated: an entry pfprof replaces is freed
// after every program that may read it has ended, so a program never reads
// one half written.
struct map_def SEC("maps") unwound = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(struct ukey),
	.value_size = sizeof(struct uvalue),
	.max_entries = 16384,
	.map_flags = BPF_F_NO_PREALLOC,
};

// Filled by pfprof, per thread: how far up its stack an unwinding reads
// (the outermost frame's words: every chain of a thread ends at the same
// root). The stack above it (the environment, the thread's control block)
// is not copied: about half of what the copies held on a busy host.
struct map_def SEC("maps") stack_tops = {
	.type = BPF_MAP_TYPE_LRU_HASH,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 65536,
};

struct map_def SEC("maps") counters = {
	.type = BPF_MAP_TYPE_PERCPU_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = COUNTERS,
};

// For the memory events' programs (`record --resident`), filled by pfprof
// from the kernel's BTF: where the fields they read lie on this kernel.
struct rss_config {
	// Nonzero: the completion programs mark the followed processes.
	__u32 on;
	// Nonzero: anonymous pages' counts too (huge pages: see record/events.rs).
	__u32 anon;
	// offsetof(struct task_struct, mm), offsetof(struct mm_struct,
	// rss_stat), sizeof(struct percpu_counter), offsetof(struct
	// percpu_counter, count), offsetof(struct percpu_counter, counters).
	__u32 task_mm;
	__u32 mm_rss_stat;
	__u32 counter_size;
	__u32 counter_count;
	__u32 counter_counters;
	// CPU ids (`nr_cpu_ids`): the per-CPU parts of a counter.
	__u32 cpus;
	// offsetof(struct bpf_array, pptrs): where `cpu_areas` keeps the
	// per-CPU address of its value.
	__u32 array_pptrs;
	// offsetof(struct mm_struct, mm_users): 0 once the address space is
	// being torn down.
	__u32 mm_users;
};

struct map_def SEC("maps") rss_config = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct rss_config),
	.max_entries = 1,
};

// Which programs write the syscalls' records: 0 the raw tracepoints' on
// every syscall, 1 the five syscalls' tracepoints' (see below). A map of
// its own, which pfprof alone writes: the programs write rss_config's
// `anon`, which a rewrite of rss_config to move the records could undo.
struct map_def SEC("maps") rss_mode = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u32),
	.max_entries = 1,
};

// A per-CPU value whose address on each CPU, less its per-CPU address,
// is that CPU's per-CPU offset (the kernel's `__per_cpu_offset[cpu]`,
// whose symbol /proc/kallsyms lists only with CONFIG_KALLSYMS_ALL).
struct map_def SEC("maps") cpu_areas = {
	.type = BPF_MAP_TYPE_PERCPU_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 1,
};

// The processes followed (their tgid, as the kernel's initial pid
// namespace has it), marked by the completion programs at each fault:
// `rss_stat` fires for every process on the machine.
struct map_def SEC("maps") followed = {
	.type = BPF_MAP_TYPE_LRU_HASH,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u32),
	.max_entries = 65536,
};

// The address spaces of the followed processes (mm → tgid), as their own
// `rss_stat`s showed them: so that a change another task makes to one
// (kswapd's or another process's reclaim, process_madvise) is recorded
// as the owner's. An entry goes at its mm's teardown (exit, the old mm of
// an exec), and an owner's own change replaces an earlier owner's: the
// kernel reuses a freed mm's memory for the next, whose fork copy (its
// parent's doing) the entry would otherwise name the earlier owner's. One
// left (LRU, a teardown with nothing resident) names a pid the analysis
// knows no more, or is replaced at its new owner's first change.
struct mm_owner {
	// As the kernel's initial pid namespace has it, and as pfprof's does
	// (the record's pid: another task's namespace cannot translate it).
	__u32 tgid;
	__u32 seen;
};

struct map_def SEC("maps") mm_owners = {
	.type = BPF_MAP_TYPE_LRU_HASH,
	.key_size = sizeof(__u64),
	.value_size = sizeof(struct mm_owner),
	.max_entries = 65536,
};

// Per CPU, what the completion program running there is doing.
struct inside {
	// Nonzero while it runs: a fault its own reads of user memory take
	// (the stack copy's end, a frame-pointer walk into garbage) passes
	// the entry tracepoints too, and a raw tracepoint program, unlike a
	// perf event's, is not kept from running inside another program.
	// Such an entry is no fault of the thread's: it is ignored.
	__u32 busy;
	// Set by `on_major` just before it jumps to the completion program.
	__u32 major;
};

struct map_def SEC("maps") inside = {
	.type = BPF_MAP_TYPE_PERCPU_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(struct inside),
	.max_entries = 1,
};

// Entry 0: the completion program, filled by pfprof, where `on_major`
// jumps.
struct map_def SEC("maps") completion = {
	.type = BPF_MAP_TYPE_PROG_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u32),
	.max_entries = 1,
};

INLINE void count(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&counters, &which);
	if (n)
		*n += 1;
}

INLINE int on_entry(__u64 address, __u64 error_code, __u32 kernel)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return 0;
	struct inside *in = bpf_map_lookup_elem(&inside, &zero);
	if (in && in->busy)
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct entry fresh = {
		.time = bpf_ktime_get_ns(),
		.addr = address,
		.error_code = (__u32)error_code,
		.flags = ENTRY_LIVE | (kernel ? ENTRY_KERNEL : 0),
	};
	struct entry *e = bpf_map_lookup_elem(&entries, &tid);
	if (e) {
		__u32 followed = e->flags & ENTRY_FOLLOWED;
		if ((e->flags & ENTRY_LIVE) && followed && cfg->every_fault)
			count(COUNT_UNFINISHED);
		fresh.flags |= followed;
		*e = fresh;
	} else {
		bpf_map_update_elem(&entries, &tid, &fresh, BPF_ANY);
	}
	// No sample of the tracepoint: the fault's record carries its facts.
	return 0;
}

SEC("tracepoint/user")
int on_entry_user(struct entry_ctx *ctx)
{
	return on_entry(ctx->address, ctx->error_code, 0);
}

SEC("tracepoint/kernel")
int on_entry_kernel(struct entry_ctx *ctx)
{
	return on_entry(ctx->address, ctx->error_code, 1);
}

SEC("raw_tracepoint/user")
int on_raw_entry_user(struct raw_entry_ctx *ctx)
{
	return on_entry(ctx->address, ctx->error_code, 0);
}

SEC("raw_tracepoint/kernel")
int on_raw_entry_kernel(struct raw_entry_ctx *ctx)
{
	return on_entry(ctx->address, ctx->error_code, 1);
}

// Copies the user stack from sp + `from` up to sp + `to` bytes into the
// scratch data at `at`, a page at a time; stops at the first page that
// cannot be read (not mapped, or not in memory), as the kernel's own copy
// does. Returns how far it got.
INLINE __u32 copy_stack(struct scratch *s, __u32 at, __u64 sp, __u32 from, __u32 to)
{
	__u32 len = from;
	for (int i = 0; i < MAX_STACK / PAGE + 2; i++) {
		if (len >= to)
			break;
		__u64 chunk = PAGE - ((sp + len) & (PAGE - 1));
		if (chunk > to - len)
			chunk = to - len;
		__u32 where = at + len;
		if (chunk == 0 || where > MAX_FRAMES * 8 + MAX_STACK)
			break;
		if (bpf_probe_read_user(s->data + (where & OFFSET_MASK), chunk & SIZE_MASK,
					(void *)(sp + len)))
			break;
		len += chunk;
	}
	return len;
}

// Where a stack copy from sp starts: at sp, or above the pages from sp up
// that are not in memory, when the page at sp is one. Those are a frame
// reserved (`sub rsp`, `alloca`) and not written yet: ld.so's `_dl_start`
// on a fresh stack in some runs, a large local array. What an unwinding
// reads (return addresses, saved registers) was written, so lies above
// them. Their bits in `holes` (page 0 holds sp) tell pfprof that their
// words are unknown (their bytes in the copy are whatever the scratch
// held). At most MAX_HOLE_PAGES are passed: a stack pointer into nothing
// gets an empty copy.
INLINE __u32 copy_start(struct scratch *s, __u64 sp, __u32 to)
{
	__u8 byte;
	if (bpf_probe_read_user(&byte, 1, (void *)sp) == 0)
		return 0;
	__u32 skip = PAGE - (sp & (PAGE - 1));
	for (int i = 0; i < MAX_HOLE_PAGES; i++) {
		if (skip >= to)
			break;
		s->f.holes |= 1U << i;
		if (bpf_probe_read_user(&byte, 1, (void *)(sp + skip)) == 0)
			return skip;
		skip += PAGE;
	}
	s->f.holes = 0;
	return 0;
}

// The user chain by frame pointers, into the scratch data at `at`: the
// instruction pointer, then each frame's return address, as the kernel's
// walk for perf (`perf_callchain_user`) finds it, up to MAX_FRAMES in all.
// Unlike the kernel's, it does not read the frame at `bp` 0 that ends every
// chain from `_start` (and nothing can be mapped below mmap_min_addr): that
// read fails by a page fault in the kernel, which the exception table
// fixes, at a cost (0.5 us here) larger than the rest of the record's.
INLINE __u32 fp_chain(struct scratch *s, __u32 at, __u64 ip, __u64 bp)
{
	*(__u64 *)(s->data + (at & OFFSET_MASK)) = ip;
	__u32 n = 1;
	for (int i = 1; i < MAX_FRAMES; i++) {
		// The kernel's `valid_user_frame`, and the low addresses.
		if (bp < LOWEST_FRAME || bp > USER_TOP - 16)
			break;
		__u64 frame[2];
		if (bpf_probe_read_user(frame, sizeof(frame), (void *)bp))
			break;
		*(__u64 *)(s->data + ((at + i * 8) & OFFSET_MASK)) = frame[1];
		n = i + 1;
		bp = frame[0];
	}
	return n;
}

// Whether the words an earlier unwinding read are the same in the stack
// copied at `at` (`copied` bytes).
INLINE int same_words(struct scratch *s, __u32 at, __u32 copied, struct uvalue *v)
{
	for (int i = 0; i < CACHE_WORDS; i++) {
		if (i >= v->nwords)
			return 1;
		__u32 off = (__u32)(v->woff[i] & 0x1fff) * 8;
		if (off + 8 > copied)
			return 0;
		__u64 word = *(__u64 *)(s->data + ((at + off) & OFFSET_MASK));
		if (word != v->words[i])
			return 0;
	}
	return 1;
}

// The user part of a dwarf record at `at`: the chain from `unwound` when
// the words it depends on are unchanged, else the stack copy (up to the
// thread's `stack_tops` entry, when it has one below the size asked for;
// `tid` as pfprof's pid namespace sees it, as pfprof keys the map).
INLINE void dwarf_user_part(struct scratch *s, struct config *cfg, struct ukey *key, __u32 at,
			    __u32 tid, __u32 cpu)
{
	__u64 want = cfg->stack_bytes;
	if (want > MAX_STACK)
		want = MAX_STACK;
	// Through memory: one unknown size, not one state for the limit and
	// one below it (its uses compare it, and the copy's limit is bounded
	// again below).
	s->f.stack_len = want;
	want = *(volatile __u32 *)&s->f.stack_len;
	__u32 copied = 0;
	struct uvalue *v = bpf_map_lookup_elem(&unwound, key);
	if (v && v->span <= want && v->nframes <= CACHE_FRAMES) {
		__u32 span = v->span;
		// Read back from memory: the verifier then sees one unknown length
		// instead of one per page the copy may stop at, and checks the
		// comparison once instead of once for each.
		s->f.stack_len = copy_stack(s, at, key->sp, 0, span);
		copied = *(volatile __u32 *)&s->f.stack_len;
		if (copied > MAX_STACK)
			copied = 0;
		if (copied >= span && same_words(s, at, copied, v)) {
			__u32 nframes = v->nframes;
			if (bpf_probe_read_kernel(s->data + (at & OFFSET_MASK),
						  (nframes * 8) & SIZE_MASK, v->frames) == 0) {
				s->f.flags |= FLAG_CHAIN | FLAG_CACHED;
				s->f.user_frames = nframes;
				s->f.span = span;
				count(COUNT_CACHE_HITS);
				return;
			}
		}
		count(COUNT_CACHE_STALE);
		// Through memory: the checks above leave `copied` a range of
		// their own on each way out, and the verifier would walk the
		// copy below once for each.
		s->f.stack_len = copied;
		copied = *(volatile __u32 *)&s->f.stack_len;
		if (copied > MAX_STACK)
			copied = 0;
	}
	// The limit goes through memory, the flag too: the verifier then walks
	// the copy once, not once with the thread's top and once without.
	__u64 *top = bpf_map_lookup_elem(&stack_tops, &tid);
	if (top && *top > key->sp && *top - key->sp < want) {
		s->f.stack_len = (*top - key->sp + 7) & ~7ULL;
		s->f.flags |= FLAG_BOUNDED;
	} else {
		s->f.stack_len = want;
	}
	// Asked here, not before the cached chain above: a flag known
	// earlier splits every state the verifier walks through it in two.
	void *ring = bpf_map_lookup_elem(&rings, &cpu);
	int pressed = ring && bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) >
				      bpf_ringbuf_query(ring, BPF_RB_RING_SIZE) / 2;
	if (pressed && s->f.stack_len > PRESSED_STACK) {
		s->f.stack_len = PRESSED_STACK;
		s->f.flags = (s->f.flags & ~FLAG_BOUNDED) | FLAG_PRESSED;
	}
	__u32 limit = *(volatile __u32 *)&s->f.stack_len;
	if (limit > MAX_STACK)
		limit = MAX_STACK;
	if (copied == 0) {
		// Through memory: one unknown start for the copy's loop, not one
		// per page passed.
		s->f.stack_len = copy_start(s, key->sp, limit);
		copied = *(volatile __u32 *)&s->f.stack_len;
		if (copied > MAX_STACK)
			copied = 0;
	}
	s->f.stack_len = copy_stack(s, at, key->sp, copied, limit);
	// Only a copy that reached the top ended there (not at a page that
	// could not be read).
	if (s->f.stack_len < limit)
		s->f.flags &= ~FLAG_BOUNDED;
}

// `pid_tgid` as pfprof's pid namespace sees it, when it is not the
// initial one (the ids of tasks outside it stay the initial namespace's).
INLINE __u64 seen_pid_tgid(struct config *cfg, __u64 pid_tgid)
{
	if (cfg->pidns_ino) {
		struct { __u32 pid; __u32 tgid; } ns = {};
		if (bpf_get_ns_current_pid_tgid(cfg->pidns_dev, cfg->pidns_ino, &ns, sizeof(ns)) == 0)
			return ((__u64)ns.tgid << 32) | ns.pid;
	}
	return pid_tgid;
}

// A task exec'd (`sched_process_exec`): its thread's `stack_tops` entry was
// the old program's. pfprof forgets it too when its drain reaches the
// exec's record, but the new program faults at once: where its stack lies
// where the old one's did (no ASLR), its first copies were cut at the old
// top and its chains counted truncated.
SEC("raw_tracepoint/exec")
int on_exec(void *ctx)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return 0;
	__u32 tid = (__u32)seen_pid_tgid(cfg, bpf_get_current_pid_tgid());
	bpf_map_delete_elem(&stack_tops, &tid);
	return 0;
}

// The perf sample header of the record in `s` (`size` bytes from `type`);
// `seen` is the task's pid_tgid in pfprof's pid namespace.
INLINE void write_head(struct scratch *s, __u64 seen, __u32 cpu, __u32 size, __u32 raw_size)
{
	__u32 pid = seen >> 32, tid = (__u32)seen;
	__u64 time = bpf_ktime_get_ns();
	__u64 id = COLLECTOR_ID;
	__u32 misc = (s->f.flags & FLAG_KERNEL_MODE) ? PERF_RECORD_MISC_KERNEL : PERF_RECORD_MISC_USER;
	s->h.type = PERF_RECORD_SAMPLE;
	s->h.misc_size = misc | (size << 16);
	s->h.id[0] = (__u32)id;
	s->h.id[1] = id >> 32;
	s->h.pid = pid;
	s->h.tid = tid;
	s->h.time[0] = (__u32)time;
	s->h.time[1] = time >> 32;
	s->h.cpu = cpu;
	s->h.res = 0;
	s->h.raw_size = raw_size;
}

INLINE void write_fault(struct perf_ctx *ctx, __u32 flags, const __u32 mode, const __u32 kernel_frames)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return;
	__u32 cpu = bpf_get_smp_processor_id();
	struct scratch *s = bpf_map_lookup_elem(&scratch, &cpu);
	if (!s)
		return;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)pid_tgid;
	// own_tgid is pfprof's pid in its own namespace.
	__u64 seen = seen_pid_tgid(cfg, pid_tgid);
	int own = cfg->own_tgid && (__u32)(seen >> 32) == cfg->own_tgid;
	struct rss_config *rss = bpf_map_lookup_elem(&rss_config, &zero);
	if (rss && rss->on && !own) {
		__u32 tgid = pid_tgid >> 32;
		if (!bpf_map_lookup_elem(&followed, &tgid))
			bpf_map_update_elem(&followed, &tgid, &zero, BPF_ANY);
	}

	// The user registers: the faulting ones for a fault in user mode,
	// those saved at the kernel's entry for one taken in kernel mode
	// (`read()` into a fresh buffer).
	struct regs user;
	if (bpf_probe_read_kernel(&user, sizeof(user), bpf_task_pt_regs(bpf_get_current_task_btf())))
		return;
	if ((ctx->regs.cs & 3) == 0)
		flags |= FLAG_KERNEL_MODE;
	s->f.magic = MAGIC;
	s->f.ip = ctx->regs.ip;
	s->f.addr = ctx->addr;
	s->f.error_code = 0;
	s->f.latency_ns = 0;
	s->f.user[0] = user.ip;
	s->f.user[1] = user.sp;
	s->f.user[2] = user.bp;
	s->f.user[3] = user.bx;
	s->f.user[4] = user.r12;
	s->f.user[5] = user.r13;
	s->f.user[6] = user.r14;
	s->f.user[7] = user.r15;
	s->f.user_frames = 0;
	s->f.stack_len = 0;
	s->f.span = 0;
	s->f.holes = 0;
	s->f.pad = 0;

	// The entry this completion ends: the thread's last, on the same page.
	if (cfg->entries) {
		struct entry *e = bpf_map_lookup_elem(&entries, &tid);
		if (e && (e->flags & ENTRY_LIVE)) {
			if ((e->addr >> 12) == (ctx->addr >> 12)) {
				flags |= FLAG_ENTRY | ((e->flags & ENTRY_KERNEL) ? FLAG_ENTRY_KERNEL : 0);
				s->f.error_code = e->error_code;
				s->f.latency_ns = bpf_ktime_get_ns() - e->time;
			} else if (cfg->every_fault) {
				count(COUNT_UNFINISHED);
			}
			e->flags = ENTRY_FOLLOWED;
		} else if (e) {
			e->flags |= ENTRY_FOLLOWED;
		}
	}
	s->f.flags = flags;
	// From here the flags are read back from the record: a register that
	// holds them keeps each combination (major, kernel mode, entry) a
	// state of its own through the stack copy, which the verifier then
	// walks once per combination.
	flags = *(volatile __u32 *)&s->f.flags;

	__u32 kernel_bytes = 0;
	if (kernel_frames && (flags & FLAG_KERNEL_MODE) && !own) {
		long n = bpf_get_stack(ctx, s->data, MAX_FRAMES * 8, 0);
		if (n > 0 && n <= MAX_FRAMES * 8)
			kernel_bytes = n & ~7;
	}
	// Opaque to the compiler, which would otherwise drop the masks the
	// verifier needs where it is 0; the verifier still knows its value.
	asm volatile("" : "+r"(kernel_bytes));
	s->f.kernel_frames = kernel_bytes / 8;

	if (mode == MODE_FP && !own) {
		__u32 n = 0;
		if (user.cs == USER_CS_64) {
			n = fp_chain(s, kernel_bytes, user.ip, user.bp);
		} else {
			// A 32-bit task's frames are 8 bytes: the kernel walks them.
			long got = bpf_get_stack(ctx, s->data + (kernel_bytes & OFFSET_MASK),
						 MAX_FRAMES * 8, BPF_F_USER_STACK);
			if (got > 0 && got <= MAX_FRAMES * 8)
				n = (got & ~7) / 8;
		}
		if (n > 0) {
			s->f.flags |= FLAG_CHAIN;
			s->f.user_frames = n;
		}
	} else if (mode == MODE_DWARF && !own) {
		// pfprof keys `unwound` by the pids its records carry (`seen`).
		struct ukey key = { .tgid = seen >> 32, .ip = user.ip, .sp = user.sp, .bp = user.bp };
		dwarf_user_part(s, cfg, &key, kernel_bytes, (__u32)seen, cpu);
	}

	__u32 lost = (flags & FLAG_MAJOR) ? COUNT_LOST_MAJOR : COUNT_LOST;
	__u64 fault_bytes = sizeof(struct fault) + kernel_bytes + s->f.user_frames * 8 + s->f.stack_len;
	// The kernel pads raw data so that the record is whole u64s.
	__u64 raw_size = ((fault_bytes + 4 + 7) & ~7ULL) - 4;
	__u64 size = HEAD_OUT + raw_size;
	// (Cannot happen: the largest record is 62 KiB. Counted, not dropped.)
	if (size > sizeof(struct scratch) - 4 || size > 0xffff) {
		count(lost);
		return;
	}
	write_head(s, seen, cpu, (__u32)size, (__u32)raw_size);
	void *ring = bpf_map_lookup_elem(&rings, &cpu);
	if (!ring) {
		count(lost);
		return;
	}
	// No wake-up (it would cost the faulting thread an interrupt): pfprof
	// drains the rings every few milliseconds.
	if (bpf_ringbuf_output(ring, (__u8 *)s + 4, size, BPF_RB_NO_WAKEUP))
		count(lost);
}

INLINE int on_fault(struct perf_ctx *ctx, const __u32 mode, const __u32 kernel_frames)
{
	__u32 zero = 0;
	struct inside *in = bpf_map_lookup_elem(&inside, &zero);
	if (!in)
		return 0;
	__u32 flags = in->major ? FLAG_MAJOR : 0;
	// A major fault is counted by `on_major`, before its jump here (a
	// failed jump is a lost record, not a skip).
	if (!in->major)
		count(COUNT_SEEN);
	in->major = 0;
	in->busy = 1;
	write_fault(ctx, flags, mode, kernel_frames);
	in->busy = 0;
	return 0;
}

// `rss_stat(mm, member)`: a process's count of resident pages of a kind
// changed. The tracepoint's own record sums the per-CPU counter under its
// lock and builds a sample: +19% CPU for a program that faults in a loop,
// though only a followed process's own file and shared-memory counts are
// wanted. This program sums the counter where it is wanted only, and
// writes what pfprof writes in the recording as that tracepoint's record.
struct rss_ctx {
	__u64 mm;
	__u64 member;
};

// The program comes in three builds that sum up to 8, 64 or 256 CPUs
// (beyond, the counter's central count only): the verifier walks each
// turn of the loop, 40 ms of the kernel's CPU for 256, and the loader
// takes the smallest that covers the machine's CPU ids.
#define RSS_MAGIC 0x70667231 /* "pfr1" */
#define MM_ANONPAGES 1
#define MM_SWAPENTS 2
#define MADV_HUGEPAGE 14

// The perf sample head of the memory events' records (`struct
// sample_head` without its pad), up to the raw data's size.
struct out_head {
	__u32 type;
	__u32 misc_size;
	__u32 id[2];
	__u32 pid;
	__u32 tid;
	__u32 time[2];
	__u32 cpu;
	__u32 res;
	__u32 raw_size;
};

// Fills `h` for a record of `size` bytes of task `pid_tgid`: the current
// task as the kernel's initial namespace has it (`current`), else one as
// pfprof's namespace has it already. 0 when the config is missing.
INLINE int fill_out_head(struct out_head *h, __u64 pid_tgid, int current, __u32 size, __u32 misc,
			 __u32 *cpu)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return 0;
	__u64 seen = current ? seen_pid_tgid(cfg, pid_tgid) : pid_tgid;
	__u64 time = bpf_ktime_get_ns();
	__u64 id = COLLECTOR_ID;
	*cpu = bpf_get_smp_processor_id();
	h->type = PERF_RECORD_SAMPLE;
	h->misc_size = misc | (size << 16);
	h->id[0] = (__u32)id;
	h->id[1] = id >> 32;
	h->pid = seen >> 32;
	h->tid = (__u32)seen;
	h->time[0] = (__u32)time;
	h->time[1] = time >> 32;
	h->cpu = *cpu;
	h->res = 0;
	h->raw_size = size - sizeof(struct out_head);
	return 1;
}

// Writes a memory event's record to the CPU's ring (counted when full).
INLINE void output_memory_record(void *record, __u32 size, __u32 cpu)
{
	void *ring = bpf_map_lookup_elem(&rings, &cpu);
	if (!ring || bpf_ringbuf_output(ring, record, size, BPF_RB_NO_WAKEUP))
		count(COUNT_LOST_RSS);
}

// A perf sample head, then the raw data: magic, member, pages, and
// whether the change was the owner's own (the tracepoint's `curr`).
struct rss_record {
	struct out_head h;
	__u32 magic;
	__u32 member;
	__u32 pages[2];
	__u32 curr;
};

// The count of counter `member` of `mm`, as `percpu_counter_sum` makes it
// (without its lock: a change racing the sum is the next record's).
INLINE __s64 rss_count(struct rss_config *rss, __u64 mm, __u32 member, __u32 max_cpus)
{
	__u64 counter = mm + rss->mm_rss_stat + member * rss->counter_size;
	__s64 count = 0;
	__u64 counters = 0;
	if (bpf_probe_read_kernel(&count, 8, (void *)(counter + rss->counter_count)) ||
	    bpf_probe_read_kernel(&counters, 8, (void *)(counter + rss->counter_counters)))
		return -1;
	// The map's address, and each CPU's copy of its value, as numbers:
	// stored and read back (root's programs may keep addresses) in this
	// CPU's own copy of the value, which no other CPU writes.
	__u32 zero = 0;
	__u64 *number = bpf_map_lookup_elem(&cpu_areas, &zero);
	if (!number)
		return -1;
	*number = (__u64)&cpu_areas;
	__u64 base = 0;
	if (bpf_probe_read_kernel(&base, 8, (void *)(*(volatile __u64 *)number + rss->array_pptrs)))
		return -1;
	for (__u32 cpu = 0; cpu < max_cpus; cpu++) {
		if (cpu >= rss->cpus)
			break;
		void *area = bpf_map_lookup_percpu_elem(&cpu_areas, &zero, cpu);
		if (!area)
			continue;
		*number = (__u64)area;
		__u64 offset = *(volatile __u64 *)number - base;
		__s32 part = 0;
		if (bpf_probe_read_kernel(&part, 4, (void *)(counters + offset)))
			return -1;
		count += part;
	}
	return count < 0 ? 0 : count;
}

INLINE int on_rss_stat(struct rss_ctx *ctx, __u32 max_cpus)
{
	__u32 zero = 0;
	struct rss_config *rss = bpf_map_lookup_elem(&rss_config, &zero);
	__u32 member = (__u32)ctx->member;
	if (!rss || !rss->on || member == MM_SWAPENTS || member > 3 ||
	    (member == MM_ANONPAGES && !rss->anon))
		return 0;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	__u64 target = ctx->mm;
	__u64 mm = 0;
	__u32 curr = 0;
	if (bpf_map_lookup_elem(&followed, &tgid)) {
		// Its own address space (`curr`), or one another task changes.
		if (bpf_probe_read_kernel(&mm, 8, (void *)(bpf_get_current_task() + rss->task_mm)))
			return 0;
		curr = mm == target;
	}
	if (curr) {
		// Its owner now (an mm's address is reused once it is freed: an
		// entry of an earlier owner left is replaced).
		struct mm_owner *known = bpf_map_lookup_elem(&mm_owners, &target);
		struct config *cfg;
		if ((!known || known->tgid != tgid) &&
		    (cfg = bpf_map_lookup_elem(&config, &zero))) {
			struct mm_owner o = {
				.tgid = tgid,
				.seen = seen_pid_tgid(cfg, pid_tgid) >> 32,
			};
			bpf_map_update_elem(&mm_owners, &target, &o, BPF_ANY);
		}
	} else {
		// Another task's change to a followed process's address space:
		// the owner's record. Not its own teardown at exit or exec (its
		// task no longer has that mm), nor a fork's copy into a child's
		// (not seen yet).
		// A task with a passing reference (a /proc reader's) may drop
		// the last one after the owner exited: teardown, not reclaim.
		struct mm_owner *owner = bpf_map_lookup_elem(&mm_owners, &target);
		__s32 users = 0;
		if (!owner)
			return 0;
		if (owner->tgid == tgid ||
		    bpf_probe_read_kernel(&users, 4, (void *)(target + rss->mm_users)) || users <= 0) {
			// A teardown: the mm is freed next, and its address may be
			// the next fork's or exec's new mm, whose changes the entry
			// would name this process's (chromium: a zygote's fork
			// reported as a child's file pages dropping to one).
			bpf_map_delete_elem(&mm_owners, &target);
			return 0;
		}
		pid_tgid = ((__u64)owner->seen << 32) | owner->seen;
	}
	__s64 pages = rss_count(rss, target, member, max_cpus);
	if (pages < 0)
		return 0;
	struct rss_record r = {
		.magic = RSS_MAGIC,
		.member = member,
		.pages = { (__u32)pages, (__u64)pages >> 32 },
		.curr = curr,
	};
	__u32 cpu;
	if (fill_out_head(&r.h, pid_tgid, curr, sizeof(r), PERF_RECORD_MISC_KERNEL, &cpu))
		output_memory_record(&r, sizeof(r), cpu);
	return 0;
}

#define RSS_STAT_PROGRAM(n)                                    \
	SEC("raw_tracepoint/rss_stat/" #n)                     \
	int on_rss_stat_##n(struct rss_ctx *ctx)               \
	{                                                      \
		return on_rss_stat(ctx, n);                    \
	}
RSS_STAT_PROGRAM(8)
RSS_STAT_PROGRAM(64)
RSS_STAT_PROGRAM(256)

// The syscalls that give memory back, for the followed processes: what
// the `syscalls:sys_enter_*`/`sys_exit_*` tracepoints would record, written
// as `rss_stat`'s is (not those tracepoints' events per task and CPU, whose
// closing waits for an RCU grace period each: python's imports waited
// 0.1 s more at exit). Two ways, the same records:
// - raw tracepoints on every syscall's entry and exit: every syscall on
//   the machine runs the program (150 ns each here, an empty program as
//   much), but closing them costs nothing;
// - a program on each of the five syscalls' tracepoints, each attached to
//   one event of the machine (a tracepoint's programs run for all its
//   hits): other syscalls pay only the kernel's syscall-tracing path
//   (50 ns), but closing each event waits for RCU grace periods (0.3 s
//   for the five).
// A recording starts with the first and moves to the second once it has
// run a few seconds (`by_events`; record/bpf.rs's `MemoryWatch`).
// x86-64 numbers; a 32-bit task's syscalls are neither's.

#define SYSCALL_MAGIC 0x70667331 /* "pfs1" */
#define NR_MUNMAP 11
#define NR_BRK 12
#define NR_MREMAP 25
#define NR_MADVISE 28

// A perf sample head, then the raw data: magic, which call (the order of
// `MEMORY_CALLS` in format/records.rs), its number, five words.
struct syscall_record {
	struct out_head h;
	__u32 magic;
	__u32 call;
	__u32 nr;
	// At 56 in the record (12 in the raw data): aligned.
	__u64 args[5];
};

// The config when the followed process's syscall is for the programs of
// kind `by_events` to write, else 0.
INLINE struct rss_config *syscall_config(__u32 by_events)
{
	__u32 zero = 0;
	struct rss_config *rss = bpf_map_lookup_elem(&rss_config, &zero);
	__u32 *mode = bpf_map_lookup_elem(&rss_mode, &zero);
	if (!rss || !rss->on || !mode || *mode != by_events)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	return bpf_map_lookup_elem(&followed, &tgid) ? rss : 0;
}

// Writes `r` (its call, number and words filled) for the current task.
INLINE void write_syscall(struct rss_config *rss, struct syscall_record *r)
{
	// A process that asks for huge pages: from then on the anonymous
	// counts are written too, where a huge page's other 511 pages show
	// (they are otherwise left out: `rss_stat` fires at every anonymous
	// fault, and only huge pages need them).
	if (r->call == 1 && r->args[2] == MADV_HUGEPAGE)
		rss->anon = 1;
	r->magic = SYSCALL_MAGIC;
	__u32 cpu;
	if (fill_out_head(&r->h, bpf_get_current_pid_tgid(), 1, sizeof(*r), PERF_RECORD_MISC_USER,
			  &cpu))
		output_memory_record(r, sizeof(*r), cpu);
}

// The raw tracepoints' arguments: the syscall's registers, and its number
// (entry) or result (exit).
struct sys_ctx {
	__u64 regs;
	__u64 id_or_ret;
};

// pt_regs: the arguments' registers, the syscall's number, cs.
#define REGS_DI 112
#define REGS_SI 104
#define REGS_DX 96
#define REGS_R10 56
#define REGS_R8 72
#define REGS_ORIG_AX 120
#define REGS_CS 136

INLINE __u64 reg(__u64 regs, __u32 offset)
{
	__u64 value = 0;
	bpf_probe_read_kernel(&value, 8, (void *)(regs + offset));
	return value;
}

// Call `call` (syscall `nr`) from the raw tracepoints: `nargs` arguments
// from `regs`, or (`nargs` 0) the result `ret`.
INLINE int write_raw_syscall(__u64 regs, __u32 call, __u32 nr, __u32 nargs, __u64 ret)
{
	struct rss_config *rss = syscall_config(0);
	if (!rss || reg(regs, REGS_CS) != USER_CS_64)
		return 0;
	struct syscall_record r = {
		.call = call,
		.nr = nr,
	};
	if (nargs == 0) {
		r.args[0] = ret;
	} else {
		r.args[0] = reg(regs, REGS_DI);
		r.args[1] = reg(regs, REGS_SI);
		if (nargs > 2) {
			r.args[2] = reg(regs, REGS_DX);
			r.args[3] = reg(regs, REGS_R10);
			r.args[4] = reg(regs, REGS_R8);
		}
	}
	write_syscall(rss, &r);
	return 0;
}

SEC("raw_tracepoint/sys_enter")
int on_sys_enter(struct sys_ctx *ctx)
{
	switch (ctx->id_or_ret) {
	case NR_MUNMAP:
		return write_raw_syscall(ctx->regs, 0, NR_MUNMAP, 2, 0);
	case NR_MADVISE:
		return write_raw_syscall(ctx->regs, 1, NR_MADVISE, 3, 0);
	case NR_MREMAP:
		return write_raw_syscall(ctx->regs, 2, NR_MREMAP, 5, 0);
	}
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int on_sys_exit(struct sys_ctx *ctx)
{
	__u64 nr = reg(ctx->regs, REGS_ORIG_AX);
	if (nr == NR_MREMAP)
		return write_raw_syscall(ctx->regs, 3, NR_MREMAP, 0, ctx->id_or_ret);
	if (nr == NR_BRK)
		return write_raw_syscall(ctx->regs, 4, NR_BRK, 0, ctx->id_or_ret);
	return 0;
}

// What the kernel hands a syscall tracepoint's program: its registers'
// address where the tracepoint's record has its common fields, the
// syscall's number, then its arguments (at exit: its result).
struct syscall_ctx {
	__u64 regs;
	__s32 nr;
	__u32 pad;
	__u64 args[5];
};

// Call `call` from its tracepoint: its first `nargs` arguments, or (exit,
// `nargs` 1) its result. Returns 1: a tracepoint program's 0 drops the
// hit for every perf event on that tracepoint, other tools' and other
// recordings' too (`perf trace`, `record --no-bpf`: a test lost its
// madvise and mremap records beside a recording that had moved here);
// pfprof's own event only counts.
INLINE int write_tp_syscall(struct syscall_ctx *ctx, __u32 call, __u32 nargs)
{
	struct rss_config *rss = syscall_config(1);
	if (!rss)
		return 1;
	struct syscall_record r = {
		.call = call,
		.nr = ctx->nr,
	};
	// No word beyond the tracepoint's record: the kernel refuses to attach
	// a program that reads past it.
	r.args[0] = ctx->args[0];
	if (nargs > 1)
		r.args[1] = ctx->args[1];
	if (nargs > 2)
		r.args[2] = ctx->args[2];
	if (nargs > 3) {
		r.args[3] = ctx->args[3];
		r.args[4] = ctx->args[4];
	}
	write_syscall(rss, &r);
	return 1;
}

SEC("tracepoint/munmap")
int on_munmap(struct syscall_ctx *ctx)
{
	return write_tp_syscall(ctx, 0, 2);
}

SEC("tracepoint/madvise")
int on_madvise(struct syscall_ctx *ctx)
{
	return write_tp_syscall(ctx, 1, 3);
}

SEC("tracepoint/mremap")
int on_mremap(struct syscall_ctx *ctx)
{
	return write_tp_syscall(ctx, 2, 5);
}

SEC("tracepoint/mremap_exit")
int on_mremap_exit(struct syscall_ctx *ctx)
{
	return write_tp_syscall(ctx, 3, 1);
}

SEC("tracepoint/brk_exit")
int on_brk_exit(struct syscall_ctx *ctx)
{
	return write_tp_syscall(ctx, 4, 1);
}

// The minor-faults events run the completion program, the major-faults
// events `on_major`, which marks the fault major and jumps to it. Not one
// program told the events apart by its attachment's cookie: the kernel
// gives an inherited event (a child process's, a new thread's) its
// parent's program but not its cookie, so a child's major faults read
// as minor. Not two completion programs: the verifier's time (0.1 s for
// dwarf's) would be spent twice.
// One completion program per call-graph mode, with and without kernel
// frames: the verifier walks only the paths of the mode it gets (one
// program for every mode took it 0.38 s on this machine). Dwarf's walks
// 16,600 instructions (20 ms; with kernel frames 33,000), fp's 4,600 and
// none's 600: each value that reaches the stack copy's loops in ranges
// of its own (a flag, a bound, each way out of the check before) has
// the loops walked again, hence the values read back from memory.
#define COMPLETION(section, name, mode, kernel_frames)                          \
	SEC("perf_event/" section)                                              \
	int name(struct perf_ctx *ctx)                                          \
	{                                                                       \
		return on_fault(ctx, mode, kernel_frames);                      \
	}

COMPLETION("none", on_none, MODE_NONE, 0)
COMPLETION("none+kernel", on_none_kernel, MODE_NONE, 1)
COMPLETION("fp", on_fp, MODE_FP, 0)
COMPLETION("fp+kernel", on_fp_kernel, MODE_FP, 1)
COMPLETION("dwarf", on_dwarf, MODE_DWARF, 0)
COMPLETION("dwarf+kernel", on_dwarf_kernel, MODE_DWARF, 1)

SEC("perf_event/major")
int on_major(struct perf_ctx *ctx)
{
	__u32 zero = 0;
	struct inside *in = bpf_map_lookup_elem(&inside, &zero);
	if (!in)
		return 0;
	count(COUNT_SEEN_MAJOR);
	in->major = 1;
	bpf_tail_call(ctx, &completion, 0);
	// Only when the jump failed (the array not yet filled).
	in->major = 0;
	count(COUNT_LOST_MAJOR);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
