// SPDX-License-Identifier: MIT OR GPL-2.0-only
//
// pfprof's in-kernel collector for `--call-graph dwarf` (see record/bpf.rs).
//
// Attached to the `minor-faults` and `major-faults` software events, it
// runs at each fault's completion in the faulting thread and writes one
// compact record into that CPU's ring buffer (a bpf-output event whose
// output goes to the ring pfprof already drains): the fault's IP and data
// address, the user registers unwinding needs, the kernel's call chain when
// asked, and a copy of the user stack from the stack pointer up, page by
// page, only as far as it is readable (at most the bytes asked for). The
// event's own sample, whose stack copy would reserve the whole size asked
// for in the ring whatever it holds, is suppressed (return 0).
//
// Built by `src/record/build-bpf.sh` into fault.bpf.o, which is committed
// (cargo needs no clang); a test checks that the object matches this source.
// No BTF, no global data, no BPF-to-BPF calls: pfprof's loader is small.

#include <linux/types.h>
#include <linux/bpf.h>

#define SEC(name) __attribute__((section(name), used))
#define INLINE static inline __attribute__((always_inline))

// Helpers, by number (include/uapi/linux/bpf.h).
static long (*bpf_perf_event_output)(void *ctx, void *map, __u64 flags, void *data,
				     __u64 size) = (void *)25;
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_probe_read_user)(void *dst, __u32 size, const void *src) = (void *)112;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *src) = (void *)113;
static long (*bpf_get_stack)(void *ctx, void *buf, __u32 size, __u64 flags) = (void *)67;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)8;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static void *(*bpf_get_current_task_btf)(void) = (void *)158;
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

#define PAGE 4096
// The most stack a record carries (the largest `dwarf,N`), and the kernel
// frames at most (perf's default kernel.perf_event_max_stack).
#define MAX_STACK 61440
#define MAX_KERNEL_FRAMES 127

#define FLAG_MAJOR 1
#define FLAG_KERNEL_MODE 2

// The record's fixed part; then `kernel_frames` u64 IPs, then `stack_len`
// bytes of stack (the loader's Rust side parses the same layout).
struct fault {
	__u32 magic;
	__u32 flags;
	__u64 ip;
	__u64 addr;
	// rip, rsp, rbp, rbx, r12, r13, r14, r15 of user mode.
	__u64 user[8];
	__u32 kernel_frames;
	__u32 stack_len;
};

#define MAGIC 0x70666231 /* "pfb1" */

// The verifier bounds a copy's offset and size by these masks (it tracks
// masks reliably, comparisons of a register's copies not always): every
// offset below OFFSET_MASK + 1 plus every size below SIZE_MASK + 1 fits.
#define OFFSET_MASK 0xffff
#define SIZE_MASK 0x1fff

struct scratch {
	struct fault f;
	__u8 data[OFFSET_MASK + 1 + SIZE_MASK + 1];
};

struct config {
	// Bytes of user stack to copy at most (a multiple of 8).
	__u32 stack_bytes;
	// Nonzero: add the kernel's call chain.
	__u32 kernel_frames;
	// pfprof's own process (system-wide): its faults are only counted, so
	// they get no stack (unwinding them would make pfprof fault more).
	__u32 own_tgid;
	__u32 pad;
};

struct map_def SEC("maps") events = {
	.type = BPF_MAP_TYPE_PERF_EVENT_ARRAY,
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

INLINE int on_fault(struct perf_ctx *ctx, __u32 flags)
{
	__u32 zero = 0;
	struct config *cfg = bpf_map_lookup_elem(&config, &zero);
	if (!cfg)
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	struct scratch *s = bpf_map_lookup_elem(&scratch, &cpu);
	if (!s)
		return 0;

	// The user registers: the faulting ones for a fault in user mode,
	// those saved at the kernel's entry for one taken in kernel mode
	// (`read()` into a fresh buffer).
	struct regs user;
	if (bpf_probe_read_kernel(&user, sizeof(user), bpf_task_pt_regs(bpf_get_current_task_btf())))
		return 0;
	if ((ctx->regs.cs & 3) == 0)
		flags |= FLAG_KERNEL_MODE;
	s->f.magic = MAGIC;
	s->f.flags = flags;
	s->f.ip = ctx->regs.ip;
	s->f.addr = ctx->addr;
	s->f.user[0] = user.ip;
	s->f.user[1] = user.sp;
	s->f.user[2] = user.bp;
	s->f.user[3] = user.bx;
	s->f.user[4] = user.r12;
	s->f.user[5] = user.r13;
	s->f.user[6] = user.r14;
	s->f.user[7] = user.r15;

	__u32 kernel_bytes = 0;
	if (cfg->kernel_frames && (flags & FLAG_KERNEL_MODE) &&
	    (bpf_get_current_pid_tgid() >> 32) != cfg->own_tgid) {
		long n = bpf_get_stack(ctx, s->data, MAX_KERNEL_FRAMES * 8, 0);
		if (n > 0 && n <= MAX_KERNEL_FRAMES * 8)
			kernel_bytes = n & ~7;
	}
	s->f.kernel_frames = kernel_bytes / 8;

	// The stack, a page at a time from the stack pointer up: the copy stops
	// at the first page that cannot be read (not mapped, or not in memory),
	// as the kernel's own copy does.
	__u64 want = cfg->stack_bytes;
	if (want > MAX_STACK)
		want = MAX_STACK;
	if (cfg->own_tgid && (bpf_get_current_pid_tgid() >> 32) == cfg->own_tgid)
		want = 0;
	__u64 sp = user.sp;
	__u32 len = 0;
	for (int i = 0; i < MAX_STACK / PAGE + 2; i++) {
		if (len >= want)
			break;
		__u64 chunk = PAGE - ((sp + len) & (PAGE - 1));
		if (chunk > want - len)
			chunk = want - len;
		__u32 at = kernel_bytes + len;
		if (chunk == 0 || at > MAX_KERNEL_FRAMES * 8 + MAX_STACK)
			break;
		if (bpf_probe_read_user(s->data + (at & OFFSET_MASK), chunk & SIZE_MASK,
					(void *)(sp + len)))
			break;
		len += chunk;
	}
	s->f.stack_len = len;

	__u64 size = sizeof(struct fault) + kernel_bytes + len;
	if (size > sizeof(struct scratch))
		return 0;
	bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, s, size);
	return 0;
}

SEC("perf_event/minor")
int on_minor(struct perf_ctx *ctx)
{
	return on_fault(ctx, 0);
}

SEC("perf_event/major")
int on_major(struct perf_ctx *ctx)
{
	return on_fault(ctx, FLAG_MAJOR);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
