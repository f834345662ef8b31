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
/* 1: processes listed in cfi_procs are unwound by their CFI tables (CONFIG_BPF_CFI) */
const volatile __u8 cfi_enabled;
/* threads per CPU whose last walk is kept (CONFIG_BPF_CFI_WALK_CACHE; 0: none) */
const volatile __u32 cfi_cache_threads;

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
 * The walk reads the user stack a window at a time: one read of up to CFI_WIN_WORDS words (to
 * the end of its page at most, so that it never runs past the stack's top) serves the saved
 * registers of the next frames, instead of a read per register (the fixed cost of each read is
 * ~200 instructions: tests/bench/bpf-icount.sh).
 */
#define CFI_WIN_WORDS 256
#define CFI_WIN_MASK ((CFI_WIN_WORDS - 1) * 8) /* a byte offset into the window, 8-aligned */
/*
 * The walker reads 512 bytes at most (a read costs ~1 instruction a byte beyond its fixed
 * cost: short stacks would pay for more), to the end of the page; where the thread's last walk
 * is in the walk cache, up to that walk's top (win_top) in one read, pages crossed, as the
 * cached frames go (their pages were read by that walk): the follower then needs no read.
 */
#define CFI_WIN_WALK 512

/* The walk by CFI tables between tail calls: the registers of the frame to push next. */
struct cfi_state {
	__u64 pc, sp, fp, lr;
	__u32 nk, nu;   /* kernel frames in the record, user frames pushed */
	__u32 runs;     /* tail calls so far */
	__u32 slot;     /* the process's slot in cfi_procs */
	__u32 last_m;   /* the mapping of the last frame: the next one is likely there too */
	__u32 gen;      /* the listing's generation (cfi_proc.gen) */
	__u32 c_cur;    /* cfi_cache: this thread's last walk */
	__u32 c_new;    /* cfi_cache: this walk, written as it goes */
	__u32 c_j;      /* the frame of c_cur the walk's next frame is compared with */
	__u32 c_seq;    /* c_cur's seq */
	__u32 c_mode;   /* the follower: 0 before it runs, CFI_COPY, CFI_IN_PLACE */
	__u32 c_k;      /* the follower: frames its run's checks passed */
	__u32 by_fp;    /* the last step was by the frame-pointer record, without rules */
	__u64 win_at, win_len; /* win holds the user stack's [win_at, win_at + win_len) */
	__u64 win_top;  /* the last walk's stack read up to here (0: none): mapped below it */
	__u64 win[CFI_WIN_WORDS];
};

/*
 * Where each record is built before it is sent (per CPU: no two programs share one), and how
 * deep this CPU's stacks have been lately (see stack_into()).
 */
struct scratch {
	struct profile_event e;
	__u32 depth_hint[2]; /* [0]: kernel stacks, [1]: user stacks */
	struct cfi_state u;
};

/*
 * The walk cache (struct cfi_cwalk in profile.h) lives beside the CPU samples' scratch slot:
 * entries 2k and 2k + 1 are the last walks of the threads with tid % cfi_cache_threads == k,
 * the last one a spare that no walk is taken from. In the same map value as the slot, its
 * entries are found from the slot's pointer: no lookup, and no pointer more for the verifier
 * to follow through the walk (two lookups held across it cost 60 000 of its instructions).
 */
/* 2 * threads and the spare, rounded up to a power of two (a mask bounds the index) */
#define CFI_CACHE_ENTRIES                                                                        \
	(PROFILE_CFI_CACHE_THREADS < 1 ? 2 : PROFILE_CFI_CACHE_THREADS < 2 ? 4 : 8)
_Static_assert(PROFILE_CFI_CACHE_THREADS <= 3, "CONFIG_BPF_CFI_WALK_CACHE: at most 3");
#define CFI_CACHE_ON (PROFILE_CFI_CACHE_THREADS > 0) /* the CPU samples' walker uses it */
/* frames the follower checks a run (cfi_tail_run) */
#define CFI_TAIL_FAST 32
struct sample_scratch {
	struct scratch s;
	struct cfi_cwalk c[CFI_CACHE_ENTRIES];
	/*
	 * Never used: the follower steps through an entry's frames by pointer, up to
	 * CFI_TAIL_FAST of them from an index the verifier only knows to be under
	 * PROFILE_CFI_CACHE_FRAMES; its bound on n keeps it in the entry, this room keeps the
	 * verifier's bound in the value.
	 */
	struct cfi_cframe pad[CFI_TAIL_FAST];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sample_scratch);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, PROFILE_MAX_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} pids SEC(".maps");

/* The rows of every file with a table (sized from CONFIG_BPF_CFI_ROWS before load). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfi_rule_ent); /* or struct cfi_page, cfi_rows2: 8 bytes too */
} cfi_rows SEC(".maps");

/*
 * The processes unwound by tables: their code mappings in slots (CONFIG_BPF_CFI_PROCS), the
 * slot of a tgid by cfi_slots: one hash lookup a sample, array lookups (inlined) after it.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfi_proc);
} cfi_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} cfi_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfi_maybe);
} cfi_maybe SEC(".maps");

/*
 * Samples walked by frame pointers per tgid bucket (tgid % PROFILE_CFI_MAYBE_BITS), cleared by
 * the reader every few seconds: the one that makes PROFILE_CFI_WANT_SAMPLES wakes the reader,
 * which lists the process then (rate-limited with the new-process wake-ups). An inlined array
 * lookup, where the new-process wake-up (seen) costs a hash lookup a sample.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cfi_counts);
} cfi_counts SEC(".maps");

/*
 * Counts a sample of tgid walked by frame pointers in its bucket: the count after it, which
 * stops at PROFILE_CFI_SNAP_SAMPLES + 1 (0: no count). PROFILE_CFI_WANT_SAMPLES wakes the
 * reader to list the process; up to PROFILE_CFI_SNAP_SAMPLES the sample carries a copy of the
 * user stack (snap_fill()).
 */
static __always_inline __u32 cfi_count(__u32 tgid)
{
	__u32 zero = 0;
	struct cfi_counts *c = bpf_map_lookup_elem(&cfi_counts, &zero);
	__u8 *n;

	if (!c)
		return 0;
	n = &c->n[tgid % PROFILE_CFI_MAYBE_BITS];
	if (*n > PROFILE_CFI_SNAP_SAMPLES)
		return *n;
	*n += 1; /* racy between CPUs: at worst a wake-up or a copy more or less */
	return *n;
}

/*
 * A record with a copy of the user stack (PROFILE_F_STACK): the sample's header and frames
 * copied from the scratch slot, the stack words after them. Its own per-CPU value: the scratch
 * slot with the walk cache is near the 32 KiB a per-CPU value may have.
 */
struct snap_buf {
	struct profile_event e;
	__u64 stack[PROFILE_STACK_BYTES / 8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct snap_buf);
} snaps SEC(".maps");

/*
 * The walker, which tail-calls itself every PROFILE_CFI_FRAMES frames (slot 0), and the
 * follower of a cached walk (slot 1).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 2);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} cfi_progs SEC(".maps");


#define CFI_NO_ENTRY 0xffffffffu /* in c_j: no frame of c_cur is compared */
_Static_assert(!(PROFILE_CFI_CACHE_FRAMES & (PROFILE_CFI_CACHE_FRAMES - 1)),
	       "PROFILE_CFI_CACHE_FRAMES: a power of two");

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
static __always_inline int wake_rate(int want, __u64 now)
{
	__u32 zero = 0;
	struct new_proc_wake *w = bpf_map_lookup_elem(&wake, &zero);

	if (!w)
		return want;
	if (!want && !w->pending)
		return 0;
	if (now - w->last_ns < new_proc_wake_ns) {
		w->pending = 1;
		return 0;
	}
	w->last_ns = now;
	w->pending = 0;
	return 1;
}

static __always_inline int wake_for_new_process(__u32 tgid, __u64 now)
{
	return wake_rate(first_sample_of(tgid), now);
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
/*
 * The user registers a walk by tables starts from: from ctx in user mode; in the kernel from
 * the top of the task's kernel stack, as user_context() finds them, trusted when they hold
 * the user code and stack segments (0x33, 0x2b) since no frame of the kernel's walk is there
 * to compare with.
 */
static __always_inline int cfi_regs(struct bpf_perf_event_data *ctx, struct cfi_state *u,
				    int legacy)
{
	__u64 r[5]; /* rip, cs, eflags, rsp, ss */
	__u64 top = (ctx->regs.rsp | (X86_THREAD_SIZE - 1)) + 1, at;
	long err;

	u->lr = 0;
	if (interrupted_user(ctx)) {
		u->pc = ctx->regs.rip;
		u->sp = ctx->regs.rsp;
		u->fp = ctx->regs.rbp;
		return 1;
	}
#pragma unroll
	for (int pad = 0; pad <= 16; pad += 16) {
		at = top - pad - sizeof(struct pt_regs);
		err = legacy ? bpf_probe_read(r, sizeof(r),
					      (const void *)(at + __builtin_offsetof(struct pt_regs, rip)))
			     : bpf_probe_read_kernel(r, sizeof(r),
						     (const void *)(at + __builtin_offsetof(struct pt_regs, rip)));
		if (err || r[1] != 0x33 || r[4] != 0x2b)
			continue;
		u->pc = r[0];
		u->sp = r[3];
		at += __builtin_offsetof(struct pt_regs, rbp);
		err = legacy ? bpf_probe_read(&u->fp, sizeof(u->fp), (const void *)at)
			     : bpf_probe_read_kernel(&u->fp, sizeof(u->fp), (const void *)at);
		return !err;
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
/* aarch64: 64-bit user mode only (a sample in a system call is walked by frame pointers). */
static __always_inline int cfi_regs(struct bpf_perf_event_data *ctx, struct cfi_state *u,
				    int legacy)
{
	if (!interrupted_user(ctx) || (ctx->regs.pstate & 0x10))
		return 0;
	u->pc = ctx->regs.pc;
	u->sp = ctx->regs.sp;
	u->fp = ctx->regs.regs[29];
	u->lr = ctx->regs.regs[30];
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
static __always_inline int cfi_regs(struct bpf_perf_event_data *ctx, struct cfi_state *u,
				    int legacy)
{
	return 0;
}
#endif

/*
 * The user context of the leaf frame: stack pointer, link register and the words at the
 * stack pointer, where the agent finds the return address of a leaf that has not linked its
 * frame into the frame-pointer chain (see bpf/leaf.h).
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
static __always_inline long stack_into(void *ctx, __u64 *buf,
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

/* Fills e's header and kernel stack; returns the kernel frames. */
static __always_inline __u32 fill_head(struct bpf_perf_event_data *ctx, struct scratch *s,
				       __u32 tgid, __u32 tid, const char *comm)
{
	struct profile_event *e = &s->e;
	__u32 nk = 0;
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
	e->cfi_end = 0;
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
	e->n_kernel = nk;
	return nk;
}

/* The user stack by frame pointers (the kernel's walk); returns the bytes of e to send. */
static __always_inline __u32 fill_user(struct bpf_perf_event_data *ctx, struct scratch *s,
				       __u32 nk, int legacy)
{
	struct profile_event *e = &s->e;
	__u32 nu = 0;
	long n;

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
	e->n_user = nu;
	return PROFILE_EVENT_HDR + (nk + nu) * sizeof(__u64);
}

/* ---- the walk by CFI tables (CONFIG_BPF_CFI) ---------------------------------------------- */

/*
 * The mapping holding pc in p (sorted by start), or NULL: the last frame's, else a fixed
 * 6-step search.
 */
static __always_inline const struct cfi_mapping *cfi_mapping_of(const struct cfi_proc *p,
								__u64 pc, __u32 *last)
{
	const struct cfi_mapping *m = &p->m[*last & (PROFILE_CFI_MAPS - 1)];
	__u32 n = p->n, lo = 0;

	if (n == 0 || n > PROFILE_CFI_MAPS)
		return 0;
	if (pc - m->start < m->len)
		return m;
#pragma unroll
	for (int b = PROFILE_CFI_MAPS / 2; b > 0; b >>= 1) {
		__u32 i = lo + b;

		if (i < n && p->m[i & (PROFILE_CFI_MAPS - 1)].start <= pc)
			lo = i;
	}
	m = &p->m[lo & (PROFILE_CFI_MAPS - 1)];
	if (pc - m->start >= m->len)
		return 0;
	*last = lo;
	return m;
}

/*
 * Row r's offset into its page (half 0) or its rule's index (half 1) from the entry that
 * holds it (struct cfi_rows2, read as one word): by shifts, not by an index into the entry,
 * which would make the verifier track each step's row exactly (and the walker's paths
 * multiply past its limit).
 */
static __always_inline __u32 cfi_row_field(const struct cfi_rows2 *at, __u32 r, int half)
{
	__u64 v = *(const __u64 *)at;

	return (v >> (32 * half + 16 * (r & 1))) & 0xffff;
}

/*
 * The rule in effect at pc in m's rows, or NULL: its page's own when no row starts in the page
 * after it (most pages), else a fixed PROFILE_CFI_PAGE_STEPS-step search among those that do
 * (steps beyond them are skipped) by their offsets into the page, and the rule of the row
 * found by its index, among the array's first entries.
 */
static __always_inline const struct cfi_rule *cfi_rule_of(const struct cfi_mapping *m, __u64 pc)
{
	__u64 rel = pc - m->base, page;
	__u32 key, row, more, in, r, lo = 0;
	const struct cfi_page *pg;
	const struct cfi_rows2 *at;

	if (rel >> 32)
		return 0; /* below the first row, or far beyond */
	page = rel >> (m->shift & 31);
	if (page >= m->pages)
		return 0; /* beyond the last row, which ends the last FDE: no rule */
	key = m->first + (__u32)page;
	pg = bpf_map_lookup_elem(&cfi_rows, &key);
	if (!pg)
		return 0;
	more = pg->row_n >> CFI_PAGE_ROW_BITS;
	if (!more)
		return &pg->rule;
	in = (__u32)rel & ((1u << (m->shift & 31)) - 1); /* pc's offset into its page */
	row = pg->row_n & ((1u << CFI_PAGE_ROW_BITS) - 1);
#pragma unroll
	for (int b = PROFILE_CFI_PAGE_STEPS - 1; b >= 0; b--) {
		__u32 i = lo + (1u << b);

		if (i <= more) {
			r = row + i;
			key = m->first + m->pages + (r >> 1);
			at = bpf_map_lookup_elem(&cfi_rows, &key);
			if (at && cfi_row_field(at, r, 0) <= in)
				lo = i;
		}
	}
	/*
	 * the row found (the page's first when none after it is at or before pc): no branch on
	 * lo, whose every value would then be a path of its own to the verifier
	 */
	r = row + lo;
	key = m->first + m->pages + (r >> 1);
	at = bpf_map_lookup_elem(&cfi_rows, &key);
	if (!at)
		return 0;
	key = cfi_row_field(at, r, 1);
	return bpf_map_lookup_elem(&cfi_rows, &key);
}

/* The window: len bytes of the user stack at addr (at most the window's); -1: none. */
static __always_inline long cfi_win_read(struct cfi_state *u, __u64 addr, __u64 len, int legacy)
{
	if (len > sizeof(u->win))
		len = sizeof(u->win);
	barrier_var(len);
	if (len < 8 || len > sizeof(u->win))
		return -1;
	u->win_len = 0;
	if (read_user(u->win, len, addr, legacy))
		return -1;
	u->win_at = addr;
	u->win_len = len;
	return 0;
}

/*
 * The user stack word at addr (8-aligned): from the window, read anew there when outside it
 * (at most max bytes).
 */
static __always_inline long stack_word(struct cfi_state *u, __u64 addr, __u64 *val, int legacy,
				       __u64 max)
{
	__u64 off = addr - u->win_at, len;

	if (addr & 7)
		return read_user(val, 8, addr, legacy);
	if (off >= u->win_len || u->win_len - off < 8) {
		len = 4096 - (addr & 4095); /* this page is mapped: the word is in it */
		if (len > max)
			len = max;
		if (u->win_top > addr && u->win_top - addr > len)
			len = u->win_top - addr; /* the last walk read that far: mapped */
		if (cfi_win_read(u, addr, len, legacy)) {
			u->win_top = 0; /* not so any more: page by page from here */
			return read_user(val, 8, addr, legacy); /* a page not in memory... */
		}
		off = 0;
	}
	*val = u->win[(off >> 3) & (CFI_WIN_WORDS - 1)];
	return 0;
}

/* Tail calls a walk may take: the kernel allows 32 a sample, one is do_sample's. */
#define CFI_MAX_RUNS 30

/*
 * The walk cache (struct cfi_cwalk in profile.h). A walk is a function of the registers it
 * starts from, the tables and the stack words it reads: a frame after the leaf whose pc and sp
 * are those of a frame of the thread's last walk (under the same listing) has the same callers
 * as long as each of their steps reads the same words. So the follower (cfi_tail) checks each
 * step's return address (and, where the CFA is on the frame pointer, that register) instead
 * of looking up the mapping and the rule: a few instructions a frame against ~300. A word that
 * changed (a function returned and was called again from elsewhere with the same sp) hands the
 * walk back to the tables from that frame (counted).
 */
/* Entry k of the walk cache beside s (the CPU samples' slot only). */
static __always_inline struct cfi_cwalk *cfi_cache_entry(struct scratch *s, __u32 k)
{
	return &((struct sample_scratch *)s)->c[k & (CFI_CACHE_ENTRIES - 1)];
}

static __always_inline int cfi_cache_valid(const struct cfi_cwalk *c, const struct scratch *s,
					   __u32 gen)
{
	return c->n && c->tid == s->e.tid && c->tgid == s->e.tgid && c->gen == gen;
}

/*
 * At a sample's start: which entry holds the thread's last walk, which one this walk writes
 * (p: the process's entry, looked up again by the walker, which checks it).
 */
static __always_inline void cfi_cache_begin(struct scratch *s, const struct cfi_proc *p)
{
	struct cfi_cwalk *a, *b, *nw, *cw;
	const struct cfi_cframe *top;
	__u32 base, other;
	int va, vb;

	s->u.c_cur = s->u.c_new = CFI_CACHE_ENTRIES - 1; /* the spare */
	s->u.win_top = 0;
	s->u.c_j = CFI_NO_ENTRY;
	s->u.c_seq = 0;
	s->u.c_mode = 0;
	s->u.gen = p ? p->gen : 0;
	if (!cfi_cache_threads || cfi_cache_threads > PROFILE_CFI_CACHE_THREADS || !p)
		return;
	base = (s->e.tid % cfi_cache_threads) * 2;
	other = base + 1;
	a = cfi_cache_entry(s, base);
	b = cfi_cache_entry(s, other);
	va = cfi_cache_valid(a, s, p->gen);
	vb = cfi_cache_valid(b, s, p->gen);
	if (va && (!vb || (__s32)(a->seq - b->seq) > 0)) {
		s->u.c_cur = base;
		s->u.c_new = other;
		s->u.c_seq = a->seq;
		s->u.c_j = 1; /* the leaf is walked from registers, not by the rules: never matched */
		nw = b;
	} else {
		if (vb) {
			s->u.c_cur = other;
			s->u.c_seq = b->seq;
			s->u.c_j = 1;
		}
		s->u.c_new = base;
		nw = a;
	}
	nw->n = 0; /* written from now on: not a walk until it ends */
	if (s->u.c_j == CFI_NO_ENTRY)
		return;
	/*
	 * The top of the stack the last walk read: its frames' slots lie below the last frame's
	 * stack pointer (each below its CFA), that frame's own return address (if it read one)
	 * above it
	 */
	cw = cfi_cache_entry(s, s->u.c_cur);
	top = &cw->f[(cw->n - 1) & (PROFILE_CFI_CACHE_FRAMES - 1)];
	s->u.win_top = top->ra_at > top->sp ? top->ra_at + 8 : top->sp;
}

/*
 * Whether the frame the walk just stepped to (u) is one of the last walk's: the next frame of
 * cw at or above its sp (a few frames skipped at most: the stack may have grown).
 */
#define CFI_CACHE_SKIPS 3
static __always_inline int cfi_cache_match(struct cfi_state *u, const struct cfi_cwalk *cw)
{
	const struct cfi_cframe *f;
	__u32 j = u->c_j, n = cw->n;

	if (n > PROFILE_CFI_CACHE_FRAMES || u->runs + 1 >= CFI_MAX_RUNS)
		return 0;
#pragma unroll
	for (int a = 0; a < CFI_CACHE_SKIPS; a++) {
		if (j >= n)
			return 0;
		if (cw->f[j & (PROFILE_CFI_CACHE_FRAMES - 1)].sp >= u->sp)
			break;
		j++;
	}
	if (j >= n)
		return 0;
	u->c_j = j;
	f = &cw->f[j & (PROFILE_CFI_CACHE_FRAMES - 1)];
	return f->sp == u->sp && f->pc == u->pc;
}

/* internal to the walk: the frame in u is the last walk's frame c_j (cfi_cache_match) */
#define CFI_TAIL    (CFI_END_MAX + 1)
/* internal to the follower: a step of the last walk reads other words now */
#define CFI_CHANGED (CFI_END_MAX + 2)

/*
 * Pushes the frame at u->pc and steps to its caller: 0, or why the walk ends (CFI_END_*), or
 * CFI_TAIL. Frames after the first are looked up at pc - 1: a return address may be the first
 * byte of the next function. nw: the walk cache's entry this walk writes, cw: the thread's
 * last walk (either NULL).
 */
static __always_inline int cfi_frame(struct scratch *s, const struct cfi_proc *p, int legacy,
				     int cache)
{
	struct cfi_cwalk *nw = cache ? cfi_cache_entry(s, s->u.c_new) : 0;
	const struct cfi_cwalk *cw = cache ? cfi_cache_entry(s, s->u.c_cur) : 0;
	struct cfi_state *u = &s->u;
	__u32 at = u->nk + u->nu;
	const struct cfi_mapping *m;
	const struct cfi_rule *r;
	struct cfi_cframe *cf = 0;
	__u64 look, cfa, w[2];
	int first = u->nu == 0, type, off8, fp8, ra8;

	if (u->nu >= user_depth || at >= 2 * PROFILE_MAX_DEPTH)
		return CFI_END_DEPTH;
	s->e.frames[at] = u->pc;
	if (nw) {
		cf = &nw->f[u->nu & (PROFILE_CFI_CACHE_FRAMES - 1)];
		cf->pc = u->pc;
		cf->sp = u->sp;
		cf->fp = u->fp;
		cf->ra_at = 0;
		cf->fp_at = 0;
	}
	u->nu++;
	look = first ? u->pc : u->pc - 1;
	m = cfi_mapping_of(p, look, &u->last_m);
	if (!m) /* a pc a frame-pointer step found is no sign of a new mapping */
		return u->by_fp ? CFI_END_NO_RULE : CFI_END_NO_MAPPING;
	r = m->pages && !(m->shift & CFI_MAP_NO_ROWS) ? cfi_rule_of(m, look) : 0;
	type = r ? r->cfa & 3 : CFI_CFA_NONE;
	u->by_fp = type == CFI_CFA_NONE;
	if (u->by_fp) {
		/* no rows here (see struct cfi_mapping): the frame-pointer record */
		type = CFI_CFA_FP;
		off8 = 2;
		fp8 = -2;
		ra8 = -1;
	} else {
		off8 = r->cfa >> 2;
		fp8 = r->fp_off8;
		ra8 = r->ra_off8;
	}
	if (type == CFI_CFA_SPECIAL) {
		if (off8 != CFI_SPECIAL_PLT)
			return CFI_END_OUTERMOST;
		/* x86_64 PLT: the stub pushes an index from its 11th byte on */
		cfa = u->sp + 8 + ((u->pc & 15) >= 11 ? 8 : 0);
		fp8 = 0;
		ra8 = -1;
	} else {
		cfa = (type == CFI_CFA_SP ? u->sp : u->fp) + ((__u64)off8 << 3);
	}
	if (cf && (cfa & 7))
		cf->ra_at = 1; /* a CFA off the word grid (no compiler's): never reused */
	else if (cf)
		cf->fp_at = (fp8 ? cfa + (__s64)fp8 * 8 : 0) | (type == CFI_CFA_FP ? CFI_CF_FP : 0);
	if (cfa < u->sp || (cfa == u->sp && !first))
		return u->by_fp ? CFI_END_NO_RULE : CFI_END_BAD;
	if (cf && ra8 && !(cfa & 7))
		cf->ra_at = cfa + (__s64)ra8 * 8;
	/* the lower slot first: a window read for it holds the other one too */
	if (fp8 && fp8 < ra8 && stack_word(u, cfa + (__s64)fp8 * 8, &w[0], legacy, CFI_WIN_WALK))
		return CFI_END_READ;
	if (ra8 == 0) { /* still in the link register: the leaf only (aarch64) */
		if (!first || !u->lr)
			return CFI_END_BAD;
		w[1] = u->lr;
	} else if (stack_word(u, cfa + (__s64)ra8 * 8, &w[1], legacy, CFI_WIN_WALK)) {
		return CFI_END_READ;
	}
	if (fp8 && fp8 > ra8 && stack_word(u, cfa + (__s64)fp8 * 8, &w[0], legacy, CFI_WIN_WALK))
		return CFI_END_READ;
	if (fp8)
		u->fp = w[0];
	if (!w[1])
		return CFI_END_OUTERMOST;
	u->pc = w[1];
	u->sp = cfa;
	if (cw && cfi_cache_match(u, cw))
		return CFI_TAIL;
	return 0;
}

/*
 * Whether this sample is walked by tables: the process has them, and its user registers are
 * known. Sets up the walk in s->u.
 */
static __always_inline int cfi_begin(struct bpf_perf_event_data *ctx, struct scratch *s,
				     __u32 tgid, __u32 nk, int legacy)
{
	__u32 *slot, zero = 0, bit = tgid % PROFILE_CFI_MAYBE_BITS;
	struct cfi_maybe *maybe;

	if (!cfi_enabled || !(maybe = bpf_map_lookup_elem(&cfi_maybe, &zero)) ||
	    !((maybe->bits[(bit / 64) & (PROFILE_CFI_MAYBE_BITS / 64 - 1)] >> (bit % 64)) & 1) ||
	    !(slot = bpf_map_lookup_elem(&cfi_slots, &tgid)))
		return 0;
	s->u.slot = *slot;
	if (!cfi_regs(ctx, &s->u, legacy))
		return 0;
	cfi_cache_begin(s, bpf_map_lookup_elem(&cfi_procs, slot));
	s->u.nk = nk;
	s->u.nu = 0;
	s->u.runs = 0;
	s->u.win_len = 0;
	s->u.last_m = 0;
	s->u.by_fp = 0;
	return 1;
}

/* Ends the walk: the record's user stack is what was pushed. Returns the bytes to send. */
static __always_inline __u32 cfi_end(struct scratch *s, int end)
{
	struct profile_event *e = &s->e;
	__u32 nk = s->u.nk, nu = s->u.nu;

	if (nk > PROFILE_MAX_DEPTH)
		nk = PROFILE_MAX_DEPTH;
	if (nu > PROFILE_MAX_DEPTH)
		nu = PROFILE_MAX_DEPTH;
	e->flags |= PROFILE_F_CFI;
	if (end == CFI_END_DEPTH)
		e->flags |= PROFILE_F_TRUNCATED;
	e->cfi_end = end;
	e->n_user = nu;
	return PROFILE_EVENT_HDR + (nk + nu) * sizeof(__u64);
}

/*
 * cfi_end(), and the walk becomes the thread's last one in the cache (nw) unless it ended
 * where another walk from the same frames may not: a read that failed, the depth.
 */
static __always_inline __u32 cfi_finish(struct scratch *s, struct cfi_cwalk *nw, int end)
{
	/* without branches: each would multiply the walker's paths for the verifier */
	__u32 nu = s->u.nu, keep = (end != CFI_END_READ) & (end != CFI_END_DEPTH) &
				 (nu - 1 < PROFILE_CFI_CACHE_FRAMES - 1);

	if (nw) {
		nw->tid = s->e.tid;
		nw->tgid = s->e.tgid;
		nw->gen = s->u.gen;
		nw->seq = s->u.c_seq + 1;
		nw->end = end;
		nu &= -keep;
		nw->n = nu;
		barrier_var(nu); /* clang knows keep bounds it; the verifier must see the mask */
		/* after the last: pc 0, and no window holds its return address */
		nw->f[nu & (PROFILE_CFI_CACHE_FRAMES - 1)].pc = 0;
		nw->f[nu & (PROFILE_CFI_CACHE_FRAMES - 1)].ra_at = 1;
	}
	return cfi_end(s, end);
}

/*
 * PROFILE_CFI_FRAMES frames, then itself again (or the follower, once a frame is the last
 * walk's); 0 and the bytes to send once the walk ends. cache: whether this walker uses the
 * walk cache (a constant).
 */
static __always_inline __u32 cfi_walk_some(void *ctx, struct scratch *s, int legacy,
					   void *progs, int cache)
{
	const struct cfi_proc *p = bpf_map_lookup_elem(&cfi_procs, &s->u.slot);
	int end = CFI_END_NO_MAPPING;

	if (!p || p->tgid != s->e.tgid) /* the slot changed hands meanwhile */
		return cfi_end(s, end);
#pragma unroll
	for (int i = 0; i < PROFILE_CFI_FRAMES; i++) {
		end = cfi_frame(s, p, legacy, cache);
		if (cache && end == CFI_TAIL) {
			s->u.runs++;
			bpf_tail_call(ctx, progs, 1);
			return cfi_finish(s, cfi_cache_entry(s, s->u.c_new), CFI_END_DEPTH);
		}
		if (end)
			return cfi_finish(s, cache ? cfi_cache_entry(s, s->u.c_new) : 0, end);
	}
	if (++s->u.runs < CFI_MAX_RUNS)
		bpf_tail_call(ctx, progs, 0);
	return cfi_finish(s, cache ? cfi_cache_entry(s, s->u.c_new) : 0, CFI_END_DEPTH);
}

/*
 * The follower's checks of one run (cfi_tail_run): up to CFI_TAIL_FAST of the last walk's
 * frames from c_j on, each by the words its step read, from the window alone: no helper call
 * and no bookkeeping per frame but its pc into the record (and, copying, the frame into this
 * walk's entry), so its state stays in registers (~15 instructions a frame where no frame
 * pointer was saved). Besides the walk's end: CFI_CHANGED (a step reads other words now: the
 * walker goes on from that frame), or
 */
#define CFI_WINDOW (CFI_END_MAX + 3) /* a word outside the window, or CFI_TAIL_FAST frames */

/*
 * Why frame m (of cw) did not pass cfi_tail_run's loop: the walk's end once all passed, 0
 * where none was left to check (the depth, or CFI_TAIL_FAST frames), CFI_CHANGED,
 * CFI_WINDOW, or CFI_TAIL_LAST for the last frame whose step read nothing (it passes).
 */
#define CFI_TAIL_LAST (CFI_END_MAX + 4)
static __always_inline int cfi_tail_next(const struct cfi_state *u, const struct cfi_cwalk *cw,
					 __u32 m, __u64 fp, __u64 win_at, __u64 wmax)
{
	const struct cfi_cframe *f = &cw->f[m & (PROFILE_CFI_CACHE_FRAMES - 1)];
	__u64 off;

	if (m >= cw->n)
		return cw->end; /* every frame of the last walk checked */
	if ((f->fp_at & CFI_CF_FP) && f->fp != fp)
		return CFI_CHANGED;
	if (!f->ra_at)
		return m + 1 == cw->n ? CFI_TAIL_LAST : CFI_CHANGED;
	off = f->ra_at - win_at;
	if (off > wmax)
		return CFI_WINDOW; /* (or ra_at 1: then never in a window, and the walker takes it) */
	if (u->win[(off >> 3) & (CFI_WIN_WORDS - 1)] !=
	    cw->f[(m + 1) & (PROFILE_CFI_CACHE_FRAMES - 1)].pc)
		return CFI_CHANGED;
	off = (f->fp_at & ~(__u64)7) - win_at;
	if ((f->fp_at & ~(__u64)7) && off > wmax)
		return CFI_WINDOW;
	return 0; /* it passes: the loop stopped before it */
}

/*
 * The k frames checked from f: their pcs into the record (base: its first), and with copy
 * the frames as cached into this walk's entry (their fp is this walk's where the CFA is on
 * it: checked), field by field (a struct copy is a memcpy to clang: its loop would not unroll).
 */
static __always_inline void cfi_tail_push(struct scratch *s, struct cfi_cwalk *nw,
					  const struct cfi_cframe *f, __u32 base, __u32 nu,
					  __u32 k, int copy)
{
	struct cfi_cframe *cf;
	__u64 *out;

	barrier_var(nu); /* clang knows the bounds; the verifier must see the masks */
	barrier_var(base);
	cf = &nw->f[nu & (PROFILE_CFI_CACHE_FRAMES - 1)];
	out = &s->e.frames[base & (2 * PROFILE_MAX_DEPTH - 1)];
#pragma unroll
	for (int i = 0; i < CFI_TAIL_FAST; i++) {
		barrier_var(k);
		if (i >= k)
			break;
		out[i] = f[i].pc;
		if (copy) {
			cf[i].pc = f[i].pc;
			cf[i].sp = f[i].sp;
			cf[i].fp = f[i].fp;
			cf[i].ra_at = f[i].ra_at;
			cf[i].fp_at = f[i].fp_at;
		}
	}
}

/*
 * The follower's modes: the last walk's frames copied into this walk's entry as they are
 * checked, or, where the walk met the last one at the same depth (the frame it matched is at
 * the index it had: a hot loop's leaf under the same callers), within CFI_IN_PLACE_MAX frames
 * of the leaf, this walk's own frames moved into the last walk's entry, which becomes this
 * walk's, the checked frames left where they are.
 */
#define CFI_COPY 1
#define CFI_IN_PLACE 2
#define CFI_IN_PLACE_MAX 3

/*
 * After cfi_tail_run's checks (k frames passed, fp the frame pointer after them, in u): why
 * the next one did not, the pcs into the record, the frames copied, u at the frame not pushed.
 */
static __always_inline int cfi_tail_done(struct scratch *s, struct cfi_cwalk *nw,
					 const struct cfi_cwalk *cw)
{
	struct cfi_state *u = &s->u;
	__u32 j = u->c_j, nu = u->nu, base = u->nk + u->nu, cnt;
	__u32 k = *(volatile __u32 *)&u->c_k; /* from memory: see cfi_tail_run */
	int copy = *(volatile __u32 *)&u->c_mode == CFI_COPY; /* from memory too */
	__u64 fp = *(volatile __u64 *)&u->fp;
	__u64 wmax = u->win_len < 8 ? 0 : u->win_len - 8, win_at = u->win_len < 8 ? 4 : u->win_at;
	const struct cfi_cframe *f;
	int end;

	if (k > CFI_TAIL_FAST || j >= PROFILE_CFI_CACHE_FRAMES || nu >= user_depth ||
	    base >= 2 * PROFILE_MAX_DEPTH)
		return CFI_END_DEPTH; /* cannot happen */
	cnt = user_depth - nu;
	if (cnt > 2 * PROFILE_MAX_DEPTH - base)
		cnt = 2 * PROFILE_MAX_DEPTH - base;
	if (k >= cnt) {
		k = cnt; /* the loop checked frames beyond the depth left: not pushed */
		end = CFI_END_DEPTH;
	} else {
		end = cfi_tail_next(u, cw, j + k, fp, win_at, wmax);
		if (end == CFI_TAIL_LAST) {
			end = 0;
			if (k < CFI_TAIL_FAST) /* else the next run */
				end = cw->end, k++;
		}
		if (!end)
			end = k >= cnt ? CFI_END_DEPTH : CFI_WINDOW; /* or CFI_TAIL_FAST frames */
	}
	barrier_var(j); /* clang knows the bound above; the verifier must see the mask */
	f = &cw->f[j & (PROFILE_CFI_CACHE_FRAMES - 1)];
	if (copy)
		cfi_tail_push(s, nw, f, base, nu, k, 1);
	else
		cfi_tail_push(s, nw, f, base, nu, k, 0);
	/* the frame not pushed, where the walker or the next run goes on */
	f = &cw->f[(j + k) & (PROFILE_CFI_CACHE_FRAMES - 1)];
	u->pc = f->pc;
	u->sp = f->sp;
	u->nu = nu + k;
	u->c_j = j + k;
	return end;
}

/*
 * The checks of one run: 0, their count and the frame pointer after them in u (for
 * cfi_tail_done), or why none ran.
 */
static __always_inline int cfi_tail_run(struct scratch *s, const struct cfi_cwalk *cw)
{
	struct cfi_state *u = &s->u;
	__u32 j = u->c_j, n = cw->n, nu = u->nu, base = u->nk + u->nu, k = 0;
	__u64 fp = u->fp, win_at = u->win_at, wmax = u->win_len - 8, off, fa;
	const struct cfi_cframe *f;

	if (n > PROFILE_CFI_CACHE_FRAMES || j >= n)
		return CFI_WINDOW; /* cannot happen */
	if (u->win_len < 8) { /* no window: only a last frame that read nothing passes */
		win_at = 4; /* ra_at - 4 is never 0: 0, 1 or a multiple of 8 */
		wmax = 0;
	}
	if (nu >= user_depth || base >= 2 * PROFILE_MAX_DEPTH)
		return CFI_END_DEPTH;
	barrier_var(j); /* clang knows the bound above; the verifier must see the mask */
	f = &cw->f[j & (PROFILE_CFI_CACHE_FRAMES - 1)];
	/*
	 * How many frames pass, frame i at constant offsets from f: only the checks, so the
	 * state stays in registers; why the next one did not is sorted out once, after it. The
	 * entry after the last walk's last frame stops it; the depth left is applied after it
	 * (cfi_tail_done): one loop for both modes, which the verifier checks once.
	 */
#pragma unroll
	for (int i = 0; i < CFI_TAIL_FAST; i++) {
		/* ra_at is 8-aligned, or 1 (never reused; after the last frame), or 0: not in it */
		off = f[i].ra_at - win_at;
		if (off > wmax)
			break;
		/* f[i + 1].pc: the next frame's, or 0 after the last (cfi_finish) */
		if (*(__u64 *)((void *)u->win + (off & CFI_WIN_MASK)) != f[i + 1].pc)
			break;
		fa = f[i].fp_at;
		if (fa) { /* one test where the frame pointer plays no part (most frames) */
			/* u->fp is this walk's own: it matters only where the CFA is on it */
			if ((fa & CFI_CF_FP) && f[i].fp != fp)
				break;
			fa &= ~(__u64)7;
			if (fa) {
				off = fa - win_at;
				if (off > wmax)
					break;
				fp = *(__u64 *)((void *)u->win + (off & CFI_WIN_MASK));
			}
		}
		k = i + 1;
	}
	/*
	 * Through memory: the verifier, which does not follow map values, then checks what
	 * follows (cfi_tail_done) once, not once for each way out of the loop.
	 */
	*(volatile __u32 *)&u->c_k = k;
	*(volatile __u64 *)&u->fp = fp;
	return 0;
}

/*
 * Makes the window hold frame c_j's slots, read from the lower one up to the last walk's top
 * (its pages were read by that walk) in one read, pages crossed, or the rest of the page where
 * that is not known: -1 where the read failed (the walker goes on from that frame).
 */
static __always_inline int cfi_tail_window(struct cfi_state *u, const struct cfi_cwalk *cw,
					   int legacy)
{
	const struct cfi_cframe *f = &cw->f[u->c_j & (PROFILE_CFI_CACHE_FRAMES - 1)];
	__u64 lo = f->ra_at, fpa = f->fp_at & ~(__u64)7, wmax = u->win_len - 8, len;

	if (!lo || (lo & 7))
		return 0; /* no word to read (cfi_tail_run decides) */
	if (u->win_len >= 8 && lo - u->win_at <= wmax && (!fpa || fpa - u->win_at <= wmax))
		return 0; /* in the window */
	if (fpa && fpa < lo)
		lo = fpa;
	len = 4096 - (lo & 4095);
	if (u->win_top > lo + 8)
		len = u->win_top - lo;
	return cfi_win_read(u, lo, len, legacy);
}

/* Chooses the follower's mode (cfi_tail_some's first run). */
static __always_inline void cfi_tail_mode(struct scratch *s)
{
	struct cfi_cwalk *nw = cfi_cache_entry(s, s->u.c_new), *cw = cfi_cache_entry(s, s->u.c_cur);
	__u32 k = s->u.nu;

	s->u.c_mode = CFI_COPY;
	if (k != s->u.c_j || k > CFI_IN_PLACE_MAX)
		return;
#pragma unroll
	for (int i = 0; i < CFI_IN_PLACE_MAX; i++)
		if (i < k)
			cw->f[i] = nw->f[i];
	s->u.c_new = s->u.c_cur;
	s->u.c_mode = CFI_IN_PLACE;
}

/*
 * The follower (slot 1 of the walker's program array): the last walk's frames from c_j on,
 * CFI_TAIL_FAST a run; back to the walker (slot 0) from a frame whose step changed, or whose
 * words could not be read here.
 */
static __always_inline __u32 cfi_tail_some(void *ctx, struct scratch *s, int legacy,
					   void *progs)
{
	struct cfi_cwalk *nw, *cw;
	__u32 j;
	int end;

	if (!s->u.c_mode)
		cfi_tail_mode(s);
	nw = cfi_cache_entry(s, s->u.c_new);
	cw = cfi_cache_entry(s, s->u.c_cur);
	j = s->u.c_j;
	end = cfi_tail_window(&s->u, cw, legacy) ? CFI_WINDOW
		: cfi_tail_run(s, cw);
	if (!end) /* the loop ran: its outcome */
		end = cfi_tail_done(s, nw, cw);
	if (end == CFI_WINDOW && s->u.c_j == j)
		end = CFI_CHANGED; /* not even its first frame from a fresh window: by the tables */
	if (end == CFI_CHANGED) {
		s->e.flags |= PROFILE_F_CFI_UNCACHED;
		s->u.c_j = CFI_NO_ENTRY;
		if (++s->u.runs < CFI_MAX_RUNS)
			bpf_tail_call(ctx, progs, 0);
		return cfi_finish(s, nw, CFI_END_DEPTH);
	}
	if (end != CFI_WINDOW) {
		if (end != CFI_END_DEPTH)
			s->e.flags |= PROFILE_F_CFI_CACHED;
		return cfi_finish(s, nw, end);
	}
	if (++s->u.runs < CFI_MAX_RUNS)
		bpf_tail_call(ctx, progs, 1);
	return cfi_finish(s, nw, CFI_END_DEPTH);
}

/* ---- CPython frames after the native ones (py_append): bpf/python.bpf.h ------------------- */
#include "bpf/python.bpf.h"
#include "bpf/lua.bpf.h"
/* ---- V8 JavaScript frames after the native ones (v8_append): bpf/v8.bpf.h ---------------- */
#include "bpf/v8.bpf.h"

/* The interpreters' frames after the native ones: CPython's, else Lua's, else V8's. */
static __always_inline __u32 interp_append(struct bpf_perf_event_data *ctx, struct scratch *s,
					   __u32 size, int legacy)
{
	return v8_append(ctx, s, lua_append(s, py_append(s, size, legacy), legacy), legacy);
}

/* ---- output -------------------------------------------------------------------------------- */

/*
 * wake_new: the first sample of a new process wakes the reader (rate-limited), for its maps
 * (wake_new_procs); wake: this one does (the first sample of a process walked by frame
 * pointers while CFI is on: each sample that waits in the ring meanwhile, before its tables
 * are loaded, has only its frame-pointer stack).
 */
static __always_inline void send_rb_rec(const void *rec, __u32 size, __u32 max, __u32 tgid,
					__u64 now, int wake_new, int wake)
{
	__u64 flags = BPF_RB_FORCE_WAKEUP;

	barrier_var(size); /* clang may know the bound below; the verifier must see it */
	if (size > max)
		return; /* cannot happen; tells the verifier the bound */
	if (cfi_enabled)
		wake = wake_rate(wake, now); /* a wake-up for tables, rate-limited too */
	if (wakeup_bytes && !wake && !(wake_new && wake_for_new_process(tgid, now)) &&
	    bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) + size < wakeup_bytes)
		flags = BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&events, (void *)rec, size, flags))
		count_drop();
}

static __always_inline void send_rb(struct scratch *s, __u32 size, int wake_new, int wake)
{
	send_rb_rec(&s->e, size, sizeof(s->e), s->e.tgid, s->e.time_ns, wake_new, wake);
}

static __always_inline void send_pb_rec(struct bpf_perf_event_data *ctx, const void *rec,
					__u32 size, __u32 max)
{
	barrier_var(size);
	if (size > max)
		return;
	if (bpf_perf_event_output(ctx, &pb_events, BPF_F_CURRENT_CPU, (void *)rec, size))
		count_drop();
}

static __always_inline void send_pb(struct bpf_perf_event_data *ctx, struct scratch *s,
				    __u32 size)
{
	send_pb_rec(ctx, &s->e, size, sizeof(s->e));
}

/*
 * s's record (size bytes, its user stack walked by frame pointers) with a copy of the user
 * stack, in this CPU's snaps buffer (*out): from the stack pointer to its page's end, and the
 * next pages where they are mapped, PROFILE_STACK_BYTES at most (a read past the stack's top
 * fails: the copy ends there).
 * Returns the record's bytes, or 0: no user registers, or not those the kernel's walk started
 * from (the record goes as it is).
 */
static __always_inline __u32 snap_fill(struct bpf_perf_event_data *ctx, struct scratch *s,
				       __u32 size, int legacy, struct snap_buf **out)
{
	__u32 zero = 0, nk = s->e.n_kernel;
	struct snap_buf *b = bpf_map_lookup_elem(&snaps, &zero);
	struct cfi_state *u = &s->u;
	__u64 len, got;
	char *dst;

	if (!b || !s->e.n_user || nk >= PROFILE_MAX_DEPTH || !cfi_regs(ctx, u, legacy))
		return 0;
	if (s->e.frames[nk] != u->pc || (u->sp & 7))
		return 0;
	barrier_var(size);
	if (size < PROFILE_EVENT_HDR || size > sizeof(b->e))
		return 0;
	if (legacy ? bpf_probe_read(&b->e, size, &s->e) : bpf_probe_read_kernel(&b->e, size, &s->e))
		return 0;
	dst = (char *)&b->e + size;
	len = 4096 - (u->sp & 4095);
	barrier_var(len);
	if (len < 8 || len > 4096 || read_user(dst, len, u->sp, legacy))
		return 0;
	got = len;
	/* page by page: a read past the stack's top fails (short programs: a page or two) */
#pragma unroll
	for (int i = 0; i < PROFILE_STACK_BYTES / 4096 - 1; i++) {
		if (got != len + 4096 * i || read_user(dst + len + 4096 * i, 4096, u->sp + got, legacy))
			break;
		got += 4096;
	}
	b->e.flags |= PROFILE_F_STACK;
	b->e.user_sp = u->sp;
	b->e.user_fp = u->fp;
	b->e.user_lr = u->lr;
	b->e.n_leaf_words = got / 8;
	*out = b;
	return size + got;
}

/*
 * A sample of a process not walked by tables: counted for its listing, and sent with a copy
 * of its user stack while it is among its first ones (whole from the first sample: the agent
 * walks the copy), else as the kernel's walk left it.
 */
static __always_inline void send_unlisted(struct bpf_perf_event_data *ctx, struct scratch *s,
					  __u32 size, int legacy)
{
	__u32 n = cfi_enabled && s->e.n_user ? cfi_count(s->e.tgid) : 0, snap = 0;
	struct snap_buf *b = 0;

	if (n && n <= PROFILE_CFI_SNAP_SAMPLES)
		snap = snap_fill(ctx, s, size, legacy, &b);
	if (legacy) {
		if (snap && b)
			send_pb_rec(ctx, b, snap, sizeof(*b));
		else
			send_pb(ctx, s, size);
	} else if (snap && b) {
		send_rb_rec(b, snap, sizeof(*b), s->e.tgid, s->e.time_ns, wake_new_procs,
			    n == PROFILE_CFI_WANT_SAMPLES);
	} else {
		send_rb(s, size, wake_new_procs, n == PROFILE_CFI_WANT_SAMPLES);
	}
}

/* The sample up to its user stack: the scratch slot, or NULL when it is not wanted. */
static __always_inline struct scratch *begin(struct bpf_perf_event_data *ctx, __u32 *nk,
					     int legacy, int *by_cfi)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, zero = 0;
	struct scratch *s;
	char comm[PROFILE_COMM_LEN];

	if (!wanted(tgid, tid, comm))
		return 0;
	s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s)
		return 0;
	*nk = fill_head(ctx, s, tgid, tid, comm);
	*by_cfi = cfi_begin(ctx, s, tgid, *nk, legacy);
	return s;
}

/*
 * Linux 5.8+: the record is built in a per-CPU scratch slot (too big for the 512-byte BPF
 * stack) and only its used part is copied into the shared ring buffer.
 */
SEC("perf_event")
int do_sample(struct bpf_perf_event_data *ctx)
{
	struct scratch *s;
	__u32 nk = 0;
	int by_cfi = 0;

	s = begin(ctx, &nk, 0, &by_cfi);
	if (!s)
		return 0;
	if (by_cfi)
		bpf_tail_call(ctx, &cfi_progs, 0); /* returns only if it failed */
	send_unlisted(ctx, s, interp_append(ctx, s, fill_user(ctx, s, nk, 0), 0), 0);
	return 0;
}

/* The walk by tables for do_sample (slot 0 of cfi_progs); sends the record. */
SEC("perf_event")
int cfi_walk(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (s)
		send_rb(s, interp_append(ctx, s, cfi_walk_some(ctx, s, 0, &cfi_progs, CFI_CACHE_ON), 0),
			wake_new_procs, 0);
	return 0;
}

/* The follower of a cached walk for do_sample (slot 1 of cfi_progs); sends the record. */
SEC("perf_event")
int cfi_tail(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (s)
		send_rb(s, interp_append(ctx, s, cfi_tail_some(ctx, s, 0, &cfi_progs), 0), wake_new_procs, 0);
	return 0;
}

/*
 * Kernels without the ring buffer (5.2..5.7; global data needs 5.2): the same record into
 * this CPU's perf buffer. sampler.c loads exactly one of the two programs (and its walker).
 */
SEC("perf_event")
int do_sample_pb(struct bpf_perf_event_data *ctx)
{
	struct scratch *s;
	__u32 nk = 0;
	int by_cfi = 0;

	s = begin(ctx, &nk, 1, &by_cfi);
	if (!s)
		return 0;
	if (by_cfi)
		bpf_tail_call(ctx, &cfi_progs, 0);
	send_unlisted(ctx, s, interp_append(ctx, s, fill_user(ctx, s, nk, 1), 1), 1);
	return 0;
}

SEC("perf_event")
int cfi_walk_pb(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (s)
		send_pb(ctx, s, interp_append(ctx, s, cfi_walk_some(ctx, s, 1, &cfi_progs, CFI_CACHE_ON), 1));
	return 0;
}

SEC("perf_event")
int cfi_tail_pb(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&scratch, &zero);

	if (s)
		send_pb(ctx, s, interp_append(ctx, s, cfi_tail_some(ctx, s, 1, &cfi_progs), 1));
	return 0;
}

/* ---- off-CPU time: bpf/offcpu.bpf.h ----------------------------------------------------- */
#include "bpf/offcpu.bpf.h"

SEC("syscall")
int name_kernel_addr(void *ctx)
{
	static const char fmt[] = "%pS";
	__u64 addr = kname_addr;

	bpf_snprintf(kname, sizeof(kname), fmt, &addr, sizeof(addr));
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
