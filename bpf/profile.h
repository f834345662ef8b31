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
 * function that has not linked its frame keeps its return address (see bpf/leaf.h).
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
#define PROFILE_F_CFI        0x10 /* the user stack was unwound by the process's CFI tables */
#define PROFILE_F_OFFCPU     0x20 /* off-CPU: period is the time the thread was blocked */
#define PROFILE_F_CFI_CACHED 0x40 /* PROFILE_F_CFI: the callers came from the thread's last walk */
#define PROFILE_F_CFI_UNCACHED 0x80 /* ... the last walk matched, a stack word had changed */
#define PROFILE_F_STACK_WORDS 0x100 /* off-CPU: the n_leaf_words stack words follow the frames */

/*
 * Stack words an off-CPU record walked by frame pointers carries after its frames (in place of
 * leaf_words): the blocking call's wrapper and its callers have no frame pointers in Debian's
 * libc, and 8 words do not reach past the wrapper (bpf/leaf.c walks them). A record per
 * blocked call of at least CONFIG_BPF_OFFCPU_MIN_US: 512 bytes more is not a CPU sample's cost.
 */
#define PROFILE_OFFCPU_WORDS (PROFILE_MAX_DEPTH < 64 ? PROFILE_MAX_DEPTH : 64) /* fits after */
/*
 * A process not (yet) walked by tables: n_leaf_words words of its user stack from user_sp
 * follow the frames (not in leaf_words), user_fp is its frame pointer (x86_64 too), and the
 * agent walks them by the files' .eh_frame (bpf/leaf.c): whole from a process's first sample.
 */
#define PROFILE_F_STACK      0x200
/*
 * flags >> PROFILE_PY_SHIFT words after the native frames (before any stack words) are the sampled thread's
 * CPython frames, newest first (bpf/python.bpf.h, struct py_proc in bpf/pyproc.h), in the
 * frames the native ones leave free (a bigger array cost the walker 180 000 verified
 * instructions).
 */
#define PROFILE_F_PYTHON     0x400
#define PROFILE_PY_SHIFT     24 /* flags >> it: how many (the header keeps its layout) */

/* The same place and count for Lua 5.4's frames (bpf/lua.bpf.h, bpf/luaproc.h's LUA_REC_*). */
#define PROFILE_F_LUA        0x800
#ifndef PROFILE_LUA_FRAMES
#define PROFILE_LUA_FRAMES 0
#endif
/*
 * flags >> PROFILE_PY_SHIFT words after the native frames are the sampled thread's V8
 * JavaScript frames, two a frame (bpf/v8.bpf.h, bpf/v8proc.h); never with PROFILE_F_PYTHON
 * or PROFILE_F_LUA (a record holds one runtime's frames).
 */
#define PROFILE_F_V8         0x4000
/* JavaScript frames at most (CONFIG_BPF_V8_FRAMES; 0: none). */
#ifndef PROFILE_V8_FRAMES
#define PROFILE_V8_FRAMES 0
#endif

/* Python frames at most (CONFIG_BPF_PYTHON_FRAMES; 0: none). */
#ifndef PROFILE_PY_FRAMES
#define PROFILE_PY_FRAMES 0
#endif

/*
 * Off-CPU (bpf/README.md): a thread that blocks (sched_switch, prev_state not running) gets its
 * start time in the offcpu map (a hash by tid, CONFIG_BPF_OFFCPU_THREADS, an entry per live
 * thread that ever blocked: removed when it exits); when it runs again its blocked
 * time adds up there; when its system call returns (sys_exit, in its own context: its user
 * stack is the one that blocked) that time is sent with its stack, when at least the
 * threshold. The counters (offcpu_counts, per CPU): time under the threshold, records the ring
 * had no room for.
 */
struct offcpu_state {
	__u64 start_ns;	  /* when it last blocked; 0: running */
	__u64 blocked_ns; /* blocked in this system call so far */
};
#define OFFCPU_C_BELOW_NS  0 /* blocked time under the threshold (not sent) */
#define OFFCPU_C_SENT      1 /* records sent */
#define OFFCPU_C_DROPPED   2 /* records the ring had no room for */
#define OFFCPU_C_DROPPED_NS 3 /* their time */
#define OFFCPU_C_UNTRACKED 4 /* blocks of threads the full table had no entry for */
#define OFFCPU_C_N         5

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
	__u32 cfi_end;       /* PROFILE_F_CFI: why the walk ended (CFI_END_*) */
	__u64 leaf_words[PROFILE_LEAF_WORDS ? PROFILE_LEAF_WORDS : 1]; /* 0: none read */
	__u64 frames[2 * PROFILE_MAX_DEPTH];
};

#define PROFILE_EVENT_HDR __builtin_offsetof(struct profile_event, frames)

/*
 * Unwinding by call frame information in the program (CONFIG_BPF_CFI): the agent turns each
 * mapped file's .eh_frame into rows (cfi_rows, one array for all files), and lists each
 * process's code mappings with the rows of their files (cfi_procs, an array: the slot of a
 * tgid is in the cfi_slots hash, looked up once a sample). A process that is not listed is
 * walked by frame pointers (bpf_get_stack), as without the option.
 */
#ifndef PROFILE_CFI_MAPS
#define PROFILE_CFI_MAPS 64    /* code mappings a process's entry holds (power of two) */
#endif
/*
 * A file's rows are found through a page index: a page of its code holds at most
 * 2^PROFILE_CFI_PAGE_STEPS - 1 rows after the one in effect at its start (a search of that many
 * steps); pages are 16 bytes or more (at most 16 rows start in 16 bytes: always fits).
 */
#define PROFILE_CFI_PAGE_STEPS 6
#define PROFILE_CFI_PAGE_SHIFT_MIN 4
#ifndef PROFILE_CFI_FRAMES
#define PROFILE_CFI_FRAMES 3   /* frames per program run (4096 instructions before 5.2) */
#endif

/*
 * A rule: the CFA is the stack pointer or the frame pointer plus 8 * off8 (cfa & 3: CFI_CFA_*,
 * cfa >> 2: off8); the caller's frame pointer and return address were saved at CFA + 8 *
 * fp_off8 / ra_off8 (0: not saved: the frame pointer is unchanged; the return address is in
 * the link register, aarch64).
 */
struct cfi_rule {
	__u16 cfa;
	__s8 fp_off8, ra_off8;
};

/*
 * The array's entries are 8 bytes, of three kinds. The first CONFIG_BPF_CFI_RULES entries are
 * the rules of every file, each once (a system has a few thousand distinct ones: libcrypto
 * 365): struct cfi_rule_ent. Each file then has its page index: a page of its code (1 << shift
 * bytes, from its first row) has an entry (struct cfi_page) with the rule in effect at its
 * start, and in row_n that row's index (the low 24 bits) and how many rows
 * after it start in the page (the high 8): none, and a pc's rule is the page's own, with no
 * search. Its rows follow, two an entry (struct cfi_rows2).
 */
struct cfi_rule_ent {
	struct cfi_rule rule;
	__u32 pad;
};

struct cfi_page {
	struct cfi_rule rule; /* first: a pointer to it is the entry's (no arithmetic on a maybe-NULL) */
	__u32 row_n;
};

/*
 * Rows 2k (in [0]) and 2k + 1 (in [1]) of a file: from the pc at off bytes into its page, up
 * to the next row, rule (an index among the rules) holds. 4 bytes a row (8 before: the pc from
 * the file's first row and the rule itself): libcrypto's rows and index take 83 695 entries
 * (126 659 before), node's 403 573 (589 509).
 */
struct cfi_rows2 {
	__u16 off[2];
	__u16 rule[2];
};
#define CFI_PAGE_ROW_BITS 24

#define CFI_CFA_NONE    0 /* no rules here: the frame-pointer record (see cfi_mapping) */
#define CFI_CFA_SP      1
#define CFI_CFA_FP      2
#define CFI_CFA_SPECIAL 3 /* off8 0: an x86_64 PLT stub; 1: the outermost frame (_start) */
#define CFI_SPECIAL_PLT  0
#define CFI_SPECIAL_STOP 1

/*
 * One code mapping, [start, start + len): pc - base is the offset of pc from its file's first
 * row; the file's page index is cfi_rows[first .. first + pages), its rows follow. pages 0:
 * no table (anonymous code: a JIT; a file without .eh_frame); CFI_MAP_NO_ROWS in shift: its
 * table is too big for the array. Where a mapping has no rows for a pc (those two, or a pc no
 * row covers), the walk steps by the frame-pointer record, as the kernel's walk does, and
 * goes back to the rows at the first frame it reaches in a file that has them (hybrid, as
 * the OpenTelemetry profiler unwinds JIT code). 32 bytes: the program indexes an array of
 * them (a power of two keeps the verifier's bounds exact).
 */
#define CFI_MAP_NO_ROWS 0x100
struct cfi_mapping {
	__u64 start, base;
	__u32 len, first, pages, shift;
};

/*
 * A process's code mappings, sorted by start; n of them; tgid: whose (0: a free slot); gen:
 * changes with each listing (a walk remembered under another one is not reused).
 */
struct cfi_proc {
	__u32 n, tgid;
	__u32 gen, pad;
	struct cfi_mapping m[PROFILE_CFI_MAPS];
};

/*
 * Which tgids may be listed (bit tgid % PROFILE_CFI_MAYBE_BITS): a sample of any other process
 * costs an inlined array lookup, not a hash lookup (most processes of a system built with
 * frame pointers are never listed).
 */
#define PROFILE_CFI_MAYBE_BITS 4096
struct cfi_maybe {
	__u64 bits[PROFILE_CFI_MAYBE_BITS / 64];
};

/*
 * Samples walked by frame pointers a process has before it is listed (bpf/cfitab.c); the
 * program counts them per tgid bucket (cfi_counts) and wakes the reader at this one.
 */
#define PROFILE_CFI_WANT_SAMPLES 4
/*
 * Samples of a process not walked by tables that carry a copy of the user stack (the same
 * per-tgid-bucket count, which saturates here): its first ones, while its tables are built,
 * and as many again every time the counts are cleared. A copy goes from the stack pointer to
 * the stack's top, PROFILE_STACK_BYTES at most (12-16 KiB: the stack pointer's page and three
 * more; perf's dwarf mode copies 8 KiB by default): a short program's stack is a page or two,
 * a bash subshell's 45 frames need more than 8 KiB.
 */
#define PROFILE_CFI_SNAP_SAMPLES 16
#define PROFILE_STACK_BYTES 16384
struct cfi_counts {
	__u8 n[PROFILE_CFI_MAYBE_BITS];
};

/*
 * The walk cache (CONFIG_BPF_CFI_WALK_CACHE): the last walk of a thread, per CPU (only that
 * CPU's programs write it: no torn entries), two entries a thread (the last walk, and the one
 * being written). A frame: the registers it was walked from and where its step read its
 * caller's return address (ra_at; 0: it read none, the walk ended there) and frame pointer
 * (fp_at, 8-aligned; 0: not saved), with CFI_CF_FP in fp_at when its CFA is on the frame
 * pointer. A new walk that reaches a frame (pc, sp) of the last one takes the callers from
 * it, each step checked by the stack words it read (bpf/README.md).
 */
#define PROFILE_CFI_CACHE_FRAMES PROFILE_MAX_DEPTH /* a power of two */
#ifndef PROFILE_CFI_CACHE_THREADS
#define PROFILE_CFI_CACHE_THREADS 0 /* CONFIG_BPF_CFI_WALK_CACHE */
#endif
#define CFI_CF_FP 1
struct cfi_cframe {
	__u64 pc, sp, fp;
	__u64 ra_at, fp_at;
};

/*
 * A walk is kept with fewer frames than f holds, and f[n].pc is 0: each frame's step read its
 * caller's pc, f[j + 1].pc, and the last step, where it read a return address at all, read 0
 * (the follower compares each frame's word with the next entry's pc, no test for the last).
 */
struct cfi_cwalk {
	__u32 tid, tgid, gen, seq; /* whose, under which listing; seq: the newer of the two */
	__u32 n;                   /* frames; 0: none */
	__u32 end;                 /* CFI_END_* of that walk */
	struct cfi_cframe f[PROFILE_CFI_CACHE_FRAMES]; /* leaf first; f[n].pc 0 */
};

/* Why a walk by the tables ended (profile_event.cfi_end). */
#define CFI_END_OUTERMOST 1 /* the whole stack: the outermost frame, or a zero return address */
#define CFI_END_NO_MAPPING 2 /* a pc in no mapping the entry lists (dlopen, exec): reloaded */
/* a pc without rows, and the frame-pointer record goes nowhere (or to no listed mapping) */
#define CFI_END_NO_RULE   3
#define CFI_END_READ      4 /* the stack could not be read there */
#define CFI_END_BAD       5 /* a frame that goes nowhere (CFA not above the stack pointer...) */
#define CFI_END_DEPTH     6 /* the stack filled max_depth frames */
#define CFI_END_MAX       7

#endif /* EDGEPROF_BPF_PROFILE_H */
