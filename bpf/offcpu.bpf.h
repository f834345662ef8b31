/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * bpf/offcpu.bpf.h — the off-CPU programs of bpf/profile.bpf.c (sched_switch, process exit,
 * sys_exit and its table walk), in a file of their own: a BPF object is one compilation unit,
 * so profile.bpf.c includes this where the section stood, after the maps, the scratch space,
 * the table walk and the output it uses.
 */
#ifndef EDGEPROF_BPF_OFFCPU_BPF_H
#define EDGEPROF_BPF_OFFCPU_BPF_H

/* ---- off-CPU time (bpf/README.md; struct offcpu_state in profile.h) ------------------------- */

#ifdef CONFIG_BPF_OFFCPU
/* blocked time under this is counted, not sent */
const volatile __u64 offcpu_min_ns = 1000000;

/*
 * Not an LRU: the entry it would evict first is the one of the thread blocked longest, whose
 * time is the point. Entries go when their thread exits (sched_process_exit).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1); /* CONFIG_BPF_OFFCPU_THREADS, set before load */
	__type(key, __u32);
	__type(value, struct offcpu_state);
} offcpu SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, OFFCPU_C_N);
	__type(key, __u32);
	__type(value, __u64);
} offcpu_counts SEC(".maps");

/*
 * The off-CPU record's own scratch: a CPU sample (an NMI) may come in the middle of a system
 * call's exit on the same CPU, and would overwrite a shared one.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} offcpu_scratch SEC(".maps");

/* The off-CPU walker by tables: a raw tracepoint program, so its own program array. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} offcpu_cfi_progs SEC(".maps");

static __always_inline void offcpu_count(__u32 which, __u64 v)
{
	__u64 *n = bpf_map_lookup_elem(&offcpu_counts, &which);

	if (n)
		*n += v;
}

/* An off-CPU record: counted apart (its drops carry time). */
static __always_inline void offcpu_send(struct scratch *s, __u32 size)
{
	barrier_var(size);
	if (size > sizeof(s->e))
		return;
	if (bpf_ringbuf_output(&events, &s->e, size, 0)) {
		offcpu_count(OFFCPU_C_DROPPED, 1);
		offcpu_count(OFFCPU_C_DROPPED_NS, s->e.period);
	} else {
		offcpu_count(OFFCPU_C_SENT, 1);
	}
}

/*
 * The sched_switch tracepoint's record (include/trace/events/sched.h: stable since 4.x;
 * tracefs' events/sched/sched_switch/format). prev_state: the TASK_REPORT bits; 0 (or
 * TASK_REPORT_MAX alone) is a preempted task, still runnable: not blocked.
 */
struct sched_switch_args {
	__u64 common;
	char prev_comm[16];
	__s32 prev_pid, prev_prio;
	long prev_state;
	char next_comm[16];
	__s32 next_pid, next_prio;
};

SEC("tracepoint/sched/sched_switch")
int offcpu_switch(struct sched_switch_args *ctx)
{
	__u64 now = bpf_ktime_get_ns(), id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, next = (__u32)ctx->next_pid;
	struct offcpu_state *st, fresh = {};
	char comm[PROFILE_COMM_LEN];

	if (tid && (ctx->prev_state & 0xff) && wanted(tgid, tid, comm)) {
		st = bpf_map_lookup_elem(&offcpu, &tid);
		if (!st) {
			fresh.start_ns = now;
			if (bpf_map_update_elem(&offcpu, &tid, &fresh, BPF_NOEXIST) == -7 /* E2BIG */)
				offcpu_count(OFFCPU_C_UNTRACKED, 1);
		} else {
			st->start_ns = now;
		}
	}
	st = next ? bpf_map_lookup_elem(&offcpu, &next) : 0;
	if (st && st->start_ns) {
		st->blocked_ns += now - st->start_ns;
		st->start_ns = 0;
	}
	return 0;
}

/* A thread exits (in its own context): its entry goes. */
SEC("tracepoint/sched/sched_process_exit")
int offcpu_task_exit(void *ctx)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	bpf_map_delete_elem(&offcpu, &tid);
	return 0;
}

/*
 * The user registers at the system call's entry: sys_exit's first argument (struct pt_regs *,
 * whose layout is the uapi one's first fields on x86_64 and arm64).
 */
#if defined(__TARGET_ARCH_x86)
static __always_inline int offcpu_regs(struct bpf_raw_tracepoint_args *ctx, struct cfi_state *u)
{
	const struct pt_regs *r = (const struct pt_regs *)ctx->args[0];

	u->lr = 0;
	return bpf_probe_read_kernel(&u->pc, 8, &r->rip) || bpf_probe_read_kernel(&u->sp, 8, &r->rsp) ||
	       bpf_probe_read_kernel(&u->fp, 8, &r->rbp);
}
#elif defined(__TARGET_ARCH_arm64)
static __always_inline int offcpu_regs(struct bpf_raw_tracepoint_args *ctx, struct cfi_state *u)
{
	const struct user_pt_regs *r = (const struct user_pt_regs *)ctx->args[0];

	return bpf_probe_read_kernel(&u->pc, 8, &r->pc) || bpf_probe_read_kernel(&u->sp, 8, &r->sp) ||
	       bpf_probe_read_kernel(&u->fp, 8, &r->regs[29]) ||
	       bpf_probe_read_kernel(&u->lr, 8, &r->regs[30]);
}
#else
static __always_inline int offcpu_regs(struct bpf_raw_tracepoint_args *ctx, struct cfi_state *u)
{
	return -1;
}
#endif

/*
 * A system call returns: the time its thread was blocked in it, with the stack that blocked
 * (unwound as a CPU sample's user stack: by the tables where the process is listed, else by
 * frame pointers with the leaf's context for the agent's repair). No kernel stack: the one
 * here is the exit path, and the one that blocked was not kept (a walk at every switch is
 * what this design saves).
 */
_Static_assert(PROFILE_OFFCPU_WORDS <= PROFILE_MAX_DEPTH, "the words fit after the frames");

SEC("raw_tracepoint/sys_exit")
int offcpu_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), blocked;
	__u32 tgid = id >> 32, tid = (__u32)id, zero = 0, nu = 0, nw, at;
	struct offcpu_state *st = bpf_map_lookup_elem(&offcpu, &tid);
	struct profile_event *e;
	struct scratch *s;
	long n;

	if (!st || !st->blocked_ns)
		return 0;
	blocked = st->blocked_ns;
	st->blocked_ns = 0;
	if (blocked < offcpu_min_ns) {
		offcpu_count(OFFCPU_C_BELOW_NS, blocked);
		return 0;
	}
	s = bpf_map_lookup_elem(&offcpu_scratch, &zero);
	if (!s)
		return 0;
	e = &s->e;
	e->time_ns = bpf_ktime_get_ns();
	e->period = blocked;
	e->cgroup_id = bpf_get_current_cgroup_id();
	e->tgid = tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->flags = PROFILE_F_OFFCPU;
	e->user_sp = e->user_lr = e->user_fp = 0;
	e->n_leaf_words = 0;
	e->cfi_end = 0;
	e->n_kernel = 0;
	if (bpf_get_current_comm(e->comm, PROFILE_COMM_LEN))
		e->comm[0] = 0;
	if (!offcpu_regs(ctx, &s->u)) {
		__u32 *slot;
		struct cfi_maybe *maybe;
		__u32 bit = tgid % PROFILE_CFI_MAYBE_BITS;

		if (cfi_enabled && (maybe = bpf_map_lookup_elem(&cfi_maybe, &zero)) &&
		    ((maybe->bits[(bit / 64) & (PROFILE_CFI_MAYBE_BITS / 64 - 1)] >> (bit % 64)) & 1) &&
		    (slot = bpf_map_lookup_elem(&cfi_slots, &tgid))) {
			s->u.slot = *slot;
			s->u.nk = 0;
			s->u.nu = 0;
			s->u.runs = 0;
			s->u.win_len = 0;
			s->u.win_top = 0; /* no walk cache: a window read is page-bounded */
			s->u.last_m = 0;
			bpf_tail_call(ctx, &offcpu_cfi_progs, 0); /* returns only if it failed */
		}
		/* the leaf's context, its stack words after the frames (PROFILE_OFFCPU_WORDS) */
		if (leaf_context) {
			e->flags |= PROFILE_F_USER_REGS;
			e->user_sp = s->u.sp;
			e->user_lr = s->u.lr;
			e->user_fp = s->u.fp;
		}
	}
	n = stack_into(ctx, e->frames, &s->depth_hint[1], user_depth, BPF_F_USER_STACK);
	if (n < 0)
		e->flags |= PROFILE_F_USTACK_ERR;
	else
		nu = n / sizeof(__u64);
	if (nu >= user_depth)
		e->flags |= PROFILE_F_TRUNCATED;
	if (nu > PROFILE_MAX_DEPTH)
		nu = PROFILE_MAX_DEPTH;
	e->n_user = nu;
	nw = 0;
	at = nu <= PROFILE_MAX_DEPTH ? nu : PROFILE_MAX_DEPTH; /* bounds the verifier sees */
	if ((e->flags & PROFILE_F_USER_REGS) && at &&
	    !read_user(&e->frames[at], PROFILE_OFFCPU_WORDS * sizeof(__u64), s->u.sp, 0)) {
		e->flags |= PROFILE_F_STACK_WORDS;
		e->n_leaf_words = PROFILE_OFFCPU_WORDS;
		nw = PROFILE_OFFCPU_WORDS;
	}
	offcpu_send(s, PROFILE_EVENT_HDR + (nu + nw) * sizeof(__u64));
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int offcpu_cfi_walk(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&offcpu_scratch, &zero);

	if (s)
		/* no walk cache: a CPU sample may come in the middle of this walk */
		offcpu_send(s, cfi_walk_some(ctx, s, 0, &offcpu_cfi_progs, 0));
	return 0;
}
#endif /* CONFIG_BPF_OFFCPU */

/*
 * Names one kernel address the way %pS prints it ("func+0x1a/0x40 [module]"): the kernel looks
 * it up in its own compressed table, instead of the agent reading all of /proc/kallsyms (whose
 * formatting costs the kernel ~35 ms a read). Run by the agent with BPF_PROG_RUN, one address
 * a run, through .bss; loaded only where the kernel has syscall programs and bpf_snprintf
 * (5.14); elsewhere the agent reads kallsyms.
 */
__u64 kname_addr;
char kname[PROFILE_KNAME_LEN];

#endif /* EDGEPROF_BPF_OFFCPU_BPF_H */
