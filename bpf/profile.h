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

#define PROFILE_COMM_LEN  16
#define PROFILE_MAX_PIDS  1024 /* entries of the pid filter map */
#define PROFILE_SEEN_PIDS 4096 /* processes remembered to wake the reader on a new one */

/* flags */
#define PROFILE_F_KSTACK_ERR 0x1 /* bpf_get_stack failed for the kernel stack */
#define PROFILE_F_USTACK_ERR 0x2 /* ... for the user stack (e.g. a kernel thread) */
#define PROFILE_F_TRUNCATED  0x4 /* a stack filled its whole array: probably deeper */

struct profile_event {
	__u64 time_ns;       /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 period;        /* sample period of the perf event (ns of CPU clock) */
	__u64 cgroup_id;     /* cgroup v2 id of the task */
	__u32 tgid, tid;
	__u32 cpu;
	__u16 n_kernel;      /* frames in kstack[] */
	__u16 n_user;        /* frames in ustack[] */
	__u32 flags;         /* PROFILE_F_* */
	char comm[PROFILE_COMM_LEN];
	__u64 kstack[PROFILE_MAX_DEPTH];
	__u64 ustack[PROFILE_MAX_DEPTH];
};

#endif /* EDGEPROF_BPF_PROFILE_H */
