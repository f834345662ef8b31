/* SPDX-License-Identifier: MIT */
/*
 * bpf/profile.h — the contract between profile.bpf.c (kernel side) and sampler.c (user side):
 * one record per sample in the BPF ring buffer. Plain fixed-width types only, so the BPF
 * target and every user-space ABI (x86_64, aarch64) lay it out the same way.
 */
#ifndef EDGEPROF_BPF_PROFILE_H
#define EDGEPROF_BPF_PROFILE_H

/*
 * Compile-time bound of each stack (kernel and user) in a record. The run-time depth (a
 * rodata knob) is at most this. Each frame costs 8 bytes per record in the ring.
 */
#ifndef PROFILE_MAX_DEPTH
#define PROFILE_MAX_DEPTH 64
#endif

/*
 * Words of the user stack copied at the user stack pointer of each sample: where a leaf
 * function that has not linked its frame keeps its return address (see agent/leaf.h).
 */
#ifndef PROFILE_LEAF_WORDS
#define PROFILE_LEAF_WORDS 8
#endif

#define PROFILE_COMM_LEN  16
#define PROFILE_MAX_PIDS  1024 /* entries of the pid filter map */
#define PROFILE_SEEN_PIDS 4096 /* processes remembered to wake the reader on a new one */
#define PROFILE_KNAME_LEN 192  /* "name+0xoff/0xsize [module]" of one kernel address */

/* flags */
#define PROFILE_F_KSTACK_ERR 0x1 /* bpf_get_stack failed for the kernel stack */
#define PROFILE_F_USTACK_ERR 0x2 /* ... for the user stack (e.g. a kernel thread) */
#define PROFILE_F_TRUNCATED  0x4 /* a stack filled its whole array: probably deeper */
#define PROFILE_F_USER_REGS  0x8 /* user_sp, user_lr and leaf_words hold the user context */

/*
 * One sample. Only the header and the frames in use are sent: a record is
 * PROFILE_EVENT_HDR + 8 * (n_kernel + n_user) bytes, so a deep stack bound costs ring space
 * only where stacks are deep.
 */
struct profile_event {
	__u64 time_ns;       /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 period;        /* sample period of the perf event (ns of CPU clock) */
	__u64 cgroup_id;     /* cgroup v2 id of the task */
	__u32 tgid, tid;
	__u32 cpu;
	__u16 n_kernel;      /* frames[0 .. n_kernel): kernel stack, leaf first */
	__u16 n_user;        /* frames[n_kernel .. n_kernel + n_user): user stack, leaf first */
	__u32 flags;         /* PROFILE_F_* */
	char comm[PROFILE_COMM_LEN];
	__u64 user_sp;       /* the user stack pointer at the sample (with PROFILE_F_USER_REGS) */
	__u64 user_lr;       /* aarch64: the link register, a leaf's return address; else 0 */
	__u64 user_fp;       /* aarch64: the frame pointer (x29): where a linked frame's record is */
	__u32 n_leaf_words;  /* leaf_words[0 .. n) are the user stack at user_sp, sp upwards */
	__u32 pad;
	__u64 leaf_words[PROFILE_LEAF_WORDS ? PROFILE_LEAF_WORDS : 1]; /* 0: none read */
	__u64 frames[2 * PROFILE_MAX_DEPTH];
};

#define PROFILE_EVENT_HDR __builtin_offsetof(struct profile_event, frames)

#endif /* EDGEPROF_BPF_PROFILE_H */
