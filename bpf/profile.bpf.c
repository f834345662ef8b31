// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * bpf/profile.bpf.c — the system-wide CPU sampler, run on every CPU-clock perf event.
 *
 * No vmlinux.h, no BTF, no CO-RE: only uapi headers and libbpf's helper declarations, so the
 * object loads on old vendor kernels without BTF (bpf_get_stack needs 4.18, the ring buffer
 * 5.8). Filters run here so filtered samples never cost ring space or a wake-up.
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#include "bpf/profile.h"

/* Run-time knobs, set by sampler.c between open and load: constants to the verifier. */
const volatile __u32 user_depth = PROFILE_MAX_DEPTH;
const volatile __u32 kernel_depth = PROFILE_MAX_DEPTH; /* 0: no kernel stacks */
const volatile __u8 include_idle;
const volatile __u8 leaf_context = 1; /* copy the user registers and leaf_words */
const volatile __u8 filter_pids;
const volatile __u64 filter_cgroup; /* 0: any */
const volatile __u32 comm_prefix_len;
const volatile char comm_prefix[PROFILE_COMM_LEN];
/*
 * Wake the reader only once this much waits in the ring: a batch per wake-up instead of one
 * wake-up per sample (the reader also polls on its own timeout). 0: wake on every sample.
 */
const volatile __u64 wakeup_bytes;
/* New processes wake the reader at most once per this many ns (0: each one at once). */
const volatile __u64 new_proc_wake_ns;
/* 0: the reader has the new processes' maps without reading /proc (mmap records): no wake-up */
const volatile __u8 wake_new_procs = 1;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024); /* resized from CONFIG_BPF_RINGBUF_KB before load */
} events SEC(".maps");

/* Samples the ring had no room for, per CPU (summed by user space). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* The perf-buffer fallback's output (one buffer per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} pb_events SEC(".maps");

/*
 * Where each record is built before it is sent (per CPU: no two programs share one), and how
 * deep this CPU's stacks have been lately (see stack_into()).
 */
struct scratch {
	struct profile_event e;
	__u32 depth_hint[2]; /* [0]: kernel stacks, [1]: user stacks */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROFILE_MAX_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

/*
 * Processes seen lately. The first sample of a new process wakes the reader soon (see
 * wake_for_new_process()), so the agent can read its /proc/<pid>/maps while it still lives
 * (short-lived processes).
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, PROFILE_SEEN_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} seen SEC(".maps");

static __always_inline int first_sample_of(__u32 tgid)
{
	__u8 one = 1;

	if (bpf_map_lookup_elem(&seen, &tgid))
		return 0;
	bpf_map_update_elem(&seen, &tgid, &one, BPF_ANY);
	return 1;
}

/* When new processes last woke the reader, and whether one has waited since (all CPUs). */
struct new_proc_wake {
	__u64 last_ns;
	__u64 pending;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct new_proc_wake);
} wake SEC(".maps");

/*
 * Whether this sample wakes the reader for a new process. A machine that starts many processes
 * (a build) would wake it for each; instead a new process within new_proc_wake_ns of the last
 * such wake-up is left pending, and the first sample on any CPU once that time is over wakes the
 * reader for all that started meanwhile, while they still live. Unlocked: two CPUs at once may
 * both wake it, which costs one spare wake-up, never a lost one.
 */
static __always_inline int wake_for_new_process(__u32 tgid, __u64 now)
{
	__u32 zero = 0;
	int first = first_sample_of(tgid);
	struct new_proc_wake *w = bpf_map_lookup_elem(&wake, &zero);

	if (!w)
		return first;
	if (!first && !w->pending)
		return 0;
	if (now - w->last_ns < new_proc_wake_ns) {
		w->pending = 1;
		return 0;
	}
	w->last_ns = now;
	w->pending = 0;
	return 1;
}

static __always_inline int comm_matches(const char *comm)
{
	/* Bounded loop the verifier can unroll: comm_prefix_len is a load-time constant. */
#pragma unroll
	for (int i = 0; i < PROFILE_COMM_LEN; i++) {
		if (i >= comm_prefix_len)
			return 1;
		if (comm[i] != comm_prefix[i])
			return 0;
	}
	return 1;
}

static __always_inline void count_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&drops, &zero);

	if (n)
		*n += 1; /* per-CPU value: no atomics needed */
}

/* The in-kernel filters: 1 if this task is to be sampled; its comm in comm. */
static __always_inline int wanted(__u32 tgid, __u32 tid, char *comm)
{
	if (tid == 0 && !include_idle)
		return 0;
	if (filter_pids && !bpf_map_lookup_elem(&pids, &tgid))
		return 0;
	if (filter_cgroup && bpf_get_current_cgroup_id() != filter_cgroup)
		return 0;
	if (bpf_get_current_comm(comm, PROFILE_COMM_LEN))
		comm[0] = 0;
	if (comm_prefix_len && !comm_matches(comm))
		return 0;
	return 1;
}

/*
 * Memory reads: the ring-buffer program runs on 5.8+ and has the split helpers (5.5); the
 * perf-buffer one is for older kernels, where bpf_probe_read reads both (legacy is a
 * constant per program, so each keeps only its own call).
 */
static __always_inline long read_user(void *dst, __u32 n, __u64 src, int legacy)
{
	return legacy ? bpf_probe_read(dst, n, (const void *)src)
		      : bpf_probe_read_user(dst, n, (const void *)src);
}

#if defined(__TARGET_ARCH_x86)
/*
 * x86_64 keeps a task's user registers at the top of its kernel stack (task_pt_regs(), below
 * TOP_OF_KERNEL_STACK_PADDING: 0, or 16 with FRED, 6.9+), and that stack is THREAD_SIZE-aligned.
 * Found without BTF from the interrupted kernel stack pointer, and trusted only if they hold
 * the user pc the kernel's own stack walk started from (a sample taken on the IRQ stack, or a
 * kernel built with another THREAD_SIZE, fails that check and gets no user context).
 */
#define X86_THREAD_SIZE 16384

static __always_inline int interrupted_user(struct bpf_perf_event_data *ctx)
{
	return (ctx->regs.cs & 3) == 3;
}

static __always_inline int user_context(struct bpf_perf_event_data *ctx, __u64 pc0,
					__u64 *sp, __u64 *lr, __u64 *fp, int legacy)
{
	__u64 u[4]; /* rip, cs, eflags, rsp: only these (reading all 168 bytes cost 1.3 us) */
	__u64 top = (ctx->regs.rsp | (X86_THREAD_SIZE - 1)) + 1, at;
	long err;

	*lr = *fp = 0; /* the agent has stack words here: no frame pointer needed */
	if (interrupted_user(ctx)) {
		*sp = ctx->regs.rsp;
		return ctx->regs.rip == pc0;
	}
#pragma unroll
	for (int pad = 0; pad <= 16; pad += 16) {
		at = top - pad - sizeof(struct pt_regs) + __builtin_offsetof(struct pt_regs, rip);
		err = legacy ? bpf_probe_read(u, sizeof(u), (const void *)at)
			     : bpf_probe_read_kernel(u, sizeof(u), (const void *)at);
		if (!err && (u[1] & 3) == 3 && u[0] == pc0) {
			*sp = u[3];
			return 1;
		}
	}
	return 0;
}
#elif defined(__TARGET_ARCH_arm64)
static __always_inline int interrupted_user(struct bpf_perf_event_data *ctx)
{
	return (ctx->regs.pstate & 0xf) == 0; /* EL0, as the kernel's user_mode() */
}

/*
 * aarch64: user mode only, 64-bit (PSTATE.nRW, bit 4, clear); in a system call the registers
 * are not looked for.
 */
static __always_inline int user_context(struct bpf_perf_event_data *ctx, __u64 pc0,
					__u64 *sp, __u64 *lr, __u64 *fp, int legacy)
{
	if (!interrupted_user(ctx) || (ctx->regs.pstate & 0x10) || ctx->regs.pc != pc0)
		return 0;
	*sp = ctx->regs.sp;
	*lr = ctx->regs.regs[30];
	*fp = ctx->regs.regs[29];
	return 1;
}
#else
static __always_inline int interrupted_user(struct bpf_perf_event_data *ctx)
{
	return 0; /* not known here: always ask for the kernel stack */
}

static __always_inline int user_context(struct bpf_perf_event_data *ctx, __u64 pc0,
					__u64 *sp, __u64 *lr, __u64 *fp, int legacy)
{
	return 0;
}
#endif

/*
 * The user context of the leaf frame: stack pointer, link register and the words at the
 * stack pointer, where the agent finds the return address of a leaf that has not linked its
 * frame into the frame-pointer chain (see agent/leaf.h).
 */
static __always_inline void fill_leaf(struct bpf_perf_event_data *ctx, struct profile_event *e,
				      __u64 pc0, int legacy)
{
	__u64 sp = 0, lr = 0, fp = 0;
	/*
	 * Read into the BPF stack, then copied: hardened usercopy checks the destination of a
	 * user read, and a buffer on the task's stack passes sooner than map memory (~60
	 * instructions a sample on x86_64, where user-mode samples run on the task's stack).
	 */
	__u64 words[PROFILE_LEAF_WORDS ? PROFILE_LEAF_WORDS : 1];

	if (!leaf_context || !user_context(ctx, pc0, &sp, &lr, &fp, legacy))
		return;
	e->flags |= PROFILE_F_USER_REGS;
	e->user_sp = sp;
	e->user_lr = lr;
	e->user_fp = fp;
	if (PROFILE_LEAF_WORDS && !read_user(words, sizeof(words), sp, legacy)) {
		__builtin_memcpy(e->leaf_words, words, sizeof(words));
		e->n_leaf_words = PROFILE_LEAF_WORDS;
	}
}

/*
 * Frames asked of bpf_get_stack beyond the depth of the last stacks (hint): the helper zeroes
 * what of the buffer it does not fill, which cost more than the walk of a shallow stack
 * (0.08 us a sample of 3.3 on x86_64, tests/bench/bpf-icount.sh). A stack deeper than
 * hint + margin fills the short buffer and is walked again at full depth.
 */
#define STACK_MARGIN 8

/* One stack into buf, at most depth frames; returns the helper's result. */
static __always_inline long stack_into(struct bpf_perf_event_data *ctx, __u64 *buf,
				       __u32 *hint, __u32 depth, __u64 flags)
{
	__u64 want = (__u64)*hint + STACK_MARGIN; /* 64 bits: the bound below is on this register */
	long n = -1;

	if (want < depth) {
		n = bpf_get_stack(ctx, buf, want * sizeof(__u64), flags);
		if (n == (long)(want * sizeof(__u64)))
			n = -1; /* may be cut short */
	}
	if (n < 0)
		n = bpf_get_stack(ctx, buf, depth * sizeof(__u64), flags);
	/*
	 * The hint follows deeper stacks at once and shallower ones a frame a sample: a CPU
	 * that runs a deep and a shallow task in turn keeps the deep one's depth.
	 */
	if (n >= 0 && n / sizeof(__u64) > *hint)
		*hint = n / sizeof(__u64);
	else if (*hint)
		*hint -= 1;
	return n;
}

/* Fills e; returns the bytes of it to send (header and the frames in use). */
static __always_inline __u32 fill(struct bpf_perf_event_data *ctx, struct scratch *s,
				  __u32 tgid, __u32 tid, const char *comm, int legacy)
{
	struct profile_event *e = &s->e;
	__u32 nk = 0, nu = 0;
	long n;

	e->time_ns = bpf_ktime_get_ns();
	e->period = ctx->sample_period;
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->tgid = tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->flags = 0;
	e->user_sp = e->user_lr = e->user_fp = 0;
	e->n_leaf_words = 0;
	__builtin_memcpy(e->comm, comm, PROFILE_COMM_LEN);

	/*
	 * A sample taken in user mode has no kernel stack: the helper would return none after
	 * zeroing the whole buffer, which costs more instructions than the rest of the sample
	 * (tests/bench/bpf-icount.sh).
	 */
	if (kernel_depth && !interrupted_user(ctx)) {
		n = stack_into(ctx, e->frames, &s->depth_hint[0], kernel_depth, 0);
		if (n < 0)
			e->flags |= PROFILE_F_KSTACK_ERR;
		else
			nk = n / sizeof(__u64);
		if (nk >= kernel_depth)
			e->flags |= PROFILE_F_TRUNCATED;
	}
	/* The verifier must see the user stack start inside the array. */
	if (nk > PROFILE_MAX_DEPTH)
		nk = PROFILE_MAX_DEPTH;
	n = stack_into(ctx, &e->frames[nk], &s->depth_hint[1], user_depth,
		       BPF_F_USER_STACK);
	if (n < 0)
		e->flags |= PROFILE_F_USTACK_ERR;
	else
		nu = n / sizeof(__u64);
	if (nu >= user_depth)
		e->flags |= PROFILE_F_TRUNCATED;
	if (nu > PROFILE_MAX_DEPTH)
		nu = PROFILE_MAX_DEPTH;
	if (nu)
		fill_leaf(ctx, e, e->frames[nk], legacy);
	e->n_kernel = nk;
	e->n_user = nu;
	return PROFILE_EVENT_HDR + (nk + nu) * sizeof(__u64);
}

/*
 * Linux 5.8+: the record is built in a per-CPU scratch slot (too big for the 512-byte BPF
 * stack) and only its used part is copied into the shared ring buffer.
 */
SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, zero = 0, size;
	struct scratch *s;
	char comm[PROFILE_COMM_LEN];
	__u64 flags = BPF_RB_FORCE_WAKEUP;

	if (!wanted(tgid, tid, comm))
		return 0;
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	size = fill(ctx, s, tgid, tid, comm, 0);
	if (size > sizeof(s->e))
		return 0; /* cannot happen; tells the verifier the bound */
	if (wakeup_bytes && !(wake_new_procs && wake_for_new_process(tgid, s->e.time_ns)) &&
	    bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) + size < wakeup_bytes)
		flags = BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&events, &s->e, size, flags))
		count_drop();
	return 0;
}

/*
 * Kernels without the ring buffer (5.2..5.7; global data needs 5.2): the same record into
 * this CPU's perf buffer. sampler.c loads exactly one of the two programs.
 */
SEC("perf_event")
int do_sample_pb(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, zero = 0, size;
	struct scratch *s;
	char comm[PROFILE_COMM_LEN];

	if (!wanted(tgid, tid, comm))
		return 0;
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	size = fill(ctx, s, tgid, tid, comm, 1);
	if (size > sizeof(s->e))
		return 0;
	if (bpf_perf_event_output(ctx, &pb_events, BPF_F_CURRENT_CPU, &s->e, size))
		count_drop();
	return 0;
}

/*
 * Names one kernel address the way %pS prints it ("func+0x1a/0x40 [module]"): the kernel looks
 * it up in its own compressed table, instead of the agent reading all of /proc/kallsyms (whose
 * formatting costs the kernel ~35 ms a read). Run by the agent with BPF_PROG_RUN, one address
 * a run, through .bss; loaded only where the kernel has syscall programs and bpf_snprintf
 * (5.14); elsewhere the agent reads kallsyms.
 */
__u64 kname_addr;
char kname[PROFILE_KNAME_LEN];

SEC("syscall")
int name_kernel_addr(void *ctx)
{
	static const char fmt[] = "%pS";
	__u64 addr = kname_addr;

	bpf_snprintf(kname, sizeof(kname), fmt, &addr, sizeof(addr));
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
