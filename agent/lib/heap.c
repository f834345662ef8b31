// SPDX-License-Identifier: MIT
/*
 * agent/lib/heap.c — see heap.h. The allocator's entry points, interposed.
 *
 * Fast path (every call): one TLS countdown of bytes (allocation) or one relaxed load of a
 * counting filter (free). Only sampled allocations, and frees of blocks the filter may know,
 * take the lock. Our own allocations (the unwinder never allocates; the profile writer does)
 * are not sampled: a per-thread flag.
 *
 * Bootstrap: the next malloc is found with dlsym(RTLD_NEXT), and glibc's dlsym may call calloc
 * for its error buffer: while resolving, allocations come from a small static arena (never
 * freed). fork(): the child stops sampling (its lock may have been held by a thread that does
 * not exist there) and frees go straight through.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/lib/heap.h"
#include "agent/core/heapfile.h"
#include "port/hash.h"

#define EP_API __attribute__((visibility("default")))
#define EP_TLS __thread __attribute__((tls_model("initial-exec")))
#define ADD(x, d) __atomic_fetch_add(&(x), (d), __ATOMIC_RELAXED)
/*
 * Counting filter of live sampled blocks, by address hash: a free() whose slot is 0 is not one
 * of ours (the common case: one load). 16 KiB, so a few live blocks do not spread its touched
 * pages over much RAM; a slot that reached 255 stays there (its frees always look up).
 */
#define FILTER_SLOTS 16384
#define FILTER_STUCK 255

struct live {
	uintptr_t ptr; /* 0: empty */
	uint64_t size;
	uint32_t stack;
};

static struct {
	volatile int on;
	enum unwind_mode unwind;
	unsigned int max_depth;
	pid_t pid;
	pthread_mutex_t lock;
	/* the stack table (agent/core/heapfile.h): CONFIG_HEAP_STACKS * 2 slots, open addressing;
	 * in <registry>/<pid>.heap with an agent, anonymous memory standalone */
	struct heapfile_view v;
	void *table;
	size_t table_bytes;
	struct live *live; /* CONFIG_HEAP_LIVE_ENTRIES * 2 slots (linear probing) */
	size_t n_live, live_slots;
	uint8_t filter[FILTER_SLOTS];
	uintptr_t self_lo, self_hi; /* our own text: frames there are not the program's */
	char shared_path[4096];
} heap = {.lock = PTHREAD_MUTEX_INITIALIZER};

struct heap_thread {
	int64_t left; /* bytes until the next sample */
	uint64_t rng;
	bool drawn, busy;
	ucontext_t uc; /* the walk's starting registers: off the caller's stack */
	uint64_t frames[CONFIG_MAX_STACK_DEPTH];
	struct unwind_cache cache;
};

static EP_TLS struct heap_thread ht;

/* ---- the next allocator ------------------------------------------------------------------ */

static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
} real;

static char arena[16384] __attribute__((aligned(16)));
static size_t arena_used;
static volatile int resolving;

static bool in_arena(const void *p)
{
	return (const char *)p >= arena && (const char *)p < arena + sizeof(arena);
}

/* dlsym's own allocations while we look the allocator up: bump, never freed. */
static void *arena_alloc(size_t n)
{
	size_t off = __atomic_fetch_add(&arena_used, (n + 15) & ~(size_t)15, __ATOMIC_RELAXED);

	if (off + n > sizeof(arena))
		return NULL;
	return arena + off;
}

static void resolve(void)
{
	if (real.malloc)
		return;
	resolving = 1;
	*(void **)&real.free = dlsym(RTLD_NEXT, "free");
	*(void **)&real.calloc = dlsym(RTLD_NEXT, "calloc");
	*(void **)&real.realloc = dlsym(RTLD_NEXT, "realloc");
	*(void **)&real.reallocarray = dlsym(RTLD_NEXT, "reallocarray");
	*(void **)&real.posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
	*(void **)&real.aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
	*(void **)&real.memalign = dlsym(RTLD_NEXT, "memalign");
	*(void **)&real.valloc = dlsym(RTLD_NEXT, "valloc");
	*(void **)&real.pvalloc = dlsym(RTLD_NEXT, "pvalloc");
	/* last: it is what says "resolved" to other threads */
	__atomic_store_n((void **)&real.malloc, dlsym(RTLD_NEXT, "malloc"), __ATOMIC_RELEASE);
	resolving = 0;
}

/* ---- sampling ---------------------------------------------------------------------------- */

static uint64_t rng_next(void)
{
	uint64_t x = ht.rng;

	if (!x) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = ((uint64_t)syscall(SYS_gettid) << 32) ^ (uint64_t)ts.tv_nsec ^ (uintptr_t)&ht;
		x |= 1;
	}
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	ht.rng = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* Bytes until the next sample: exponential with mean rate (a Poisson process over bytes). */
static int64_t draw(void)
{
	double u = ((double)(rng_next() >> 11) + 1.0) / 9007199254740993.0; /* (0, 1] */

	return (int64_t)(-log(u) * (double)heap.v.h->rate) + 1;
}

static uint32_t hash_ptr(uintptr_t p)
{
	uint64_t x = (uint64_t)p * 0x9E3779B97F4A7C15ull;

	return (uint32_t)(x >> 32);
}

static uint32_t hash_frames(const uint64_t *f, unsigned int n)
{
	uint64_t h = HASH_FNV64_BASIS;

	for (unsigned int i = 0; i < n; i++) /* FNV-1a over whole words: frames are addresses */
		h = (h ^ f[i]) * HASH_FNV64_PRIME;
	return (uint32_t)(h ^ (h >> 32));
}

/* The stack's slot, added if new: -1 when the table is full (counted by the caller). */
static long stack_slot(const uint64_t *f, unsigned int n)
{
	uint32_t h = hash_frames(f, n);
	size_t mask = heap.v.h->stack_slots - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct heapfile_stack *s = &heap.v.stacks[i];
		uint64_t *sf = heap.v.frames + i * heap.v.h->max_depth;

		if (!s->n_frames) {
			if (heap.v.h->n_stacks * 2 >= heap.v.h->stack_slots)
				return -1;
			ADD(heap.v.h->n_stacks, 1);
			s->hash = h;
			memcpy(sf, f, n * sizeof(*f));
			/* last: a reader sees the slot whole or not at all */
			__atomic_store_n(&s->n_frames, (uint16_t)n, __ATOMIC_RELEASE);
			return (long)i;
		}
		if (s->hash == h && s->n_frames == n && !memcmp(sf, f, n * sizeof(*f)))
			return (long)i;
	}
}

/*
 * The unbiased weight of one sampled block of size bytes (Go's and gperftools' unbiasing):
 * sampled with probability 1 - exp(-size/rate), it stands for 1/that blocks. In thousandths of
 * objects and in bytes, computed the same way at malloc and at free so that they cancel.
 */
static void weight(uint64_t size, int64_t *mobjects, int64_t *bytes)
{
	double scale = 1.0 / (1.0 - exp(-(double)size / (double)heap.v.h->rate));

	*mobjects = llround(1000.0 * scale);
	*bytes = llround(scale * (double)size);
}

static void inuse_add(uint32_t stack, uint64_t size, int sign)
{
	struct heapfile_stack *s = &heap.v.stacks[stack];
	int64_t mo, b;

	weight(size, &mo, &b);
	ADD(s->inuse_mobjects, sign * mo);
	ADD(s->inuse_bytes, sign * b);
}

static void live_add(uintptr_t p, uint64_t size, uint32_t stack)
{
	size_t mask = heap.live_slots - 1, i;

	if (heap.n_live * 2 >= heap.live_slots) {
		ADD(heap.v.h->live_overflow, 1);
		return;
	}
	for (i = hash_ptr(p) & mask; heap.live[i].ptr && heap.live[i].ptr != p; i = (i + 1) & mask)
		;
	if (heap.live[i].ptr) /* a block freed behind our back (not interposed): replaced */
		inuse_add(heap.live[i].stack, heap.live[i].size, -1);
	else {
		uint8_t *f = &heap.filter[hash_ptr(p) % FILTER_SLOTS];

		heap.n_live++;
		ADD(heap.v.h->n_live, 1);
		if (*f != FILTER_STUCK)
			__atomic_store_n(f, (uint8_t)(*f + 1), __ATOMIC_RELAXED);
	}
	heap.live[i] = (struct live){p, size, stack};
	inuse_add(stack, size, 1);
}

/* Removes p if it is a live sampled block (backward-shift deletion keeps probes short). */
static void live_remove(uintptr_t p)
{
	size_t mask = heap.live_slots - 1, i, j, k;
	uint8_t *f = &heap.filter[hash_ptr(p) % FILTER_SLOTS];

	for (i = hash_ptr(p) & mask; heap.live[i].ptr != p; i = (i + 1) & mask)
		if (!heap.live[i].ptr)
			return;
	heap.n_live--;
	ADD(heap.v.h->n_live, -1);
	if (*f != FILTER_STUCK)
		__atomic_store_n(f, (uint8_t)(*f - 1), __ATOMIC_RELAXED);
	inuse_add(heap.live[i].stack, heap.live[i].size, -1);
	for (j = (i + 1) & mask; heap.live[j].ptr; j = (j + 1) & mask) {
		k = hash_ptr(heap.live[j].ptr) & mask;
		/* j's entry may move to the hole at i when its home k is not in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			heap.live[i] = heap.live[j];
			i = j;
		}
	}
	heap.live[i].ptr = 0;
}

/*
 * The walk starts here, as if a signal had interrupted this function: pc and stack pointer
 * read together by one asm statement (the .eh_frame rule at that pc describes that stack
 * pointer: aarch64's CFA is sp-based), the frame pointer of this frame.
 */
static __attribute__((noinline)) unsigned int walk_here(bool *truncated)
{
	uintptr_t lo, hi, pc = 0, sp = 0, fp = (uintptr_t)__builtin_frame_address(0);
	unsigned int n;

	sigprof__stack_bounds(&lo, &hi);
#if defined(__x86_64__)
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1" : "=r"(pc), "=r"(sp));
	ht.uc.uc_mcontext.gregs[REG_RIP] = (greg_t)pc;
	ht.uc.uc_mcontext.gregs[REG_RSP] = (greg_t)sp;
	ht.uc.uc_mcontext.gregs[REG_RBP] = (greg_t)fp;
#elif defined(__aarch64__)
	__asm__ volatile("adr %0, .\n\tmov %1, sp" : "=r"(pc), "=r"(sp));
	ht.uc.uc_mcontext.pc = pc;
	ht.uc.uc_mcontext.sp = sp;
	ht.uc.uc_mcontext.regs[29] = fp;
	ht.uc.uc_mcontext.regs[30] = 0;
#elif defined(__arm__)
	/* 32-bit ARM: the unwinder records pc and lr only, so the walk starts in the caller of
	 * malloc: its return address as pc (nothing beyond it) */
	ht.uc.uc_mcontext.arm_pc = (uintptr_t)__builtin_return_address(0);
	ht.uc.uc_mcontext.arm_sp = (uintptr_t)&lo;
	ht.uc.uc_mcontext.arm_fp = fp;
	ht.uc.uc_mcontext.arm_lr = 0;
	(void)pc;
	(void)sp;
#endif
	n = unwind__stack(&ht.uc, lo, hi, heap.unwind, &ht.cache, ht.frames, heap.max_depth,
			  truncated);
	/* no tail call: this frame, where the walk starts, must stay until it is done */
	__asm__ volatile("" ::: "memory");
	return n;
}

/*
 * One sampled allocation: its stack (leaf first, from the program's call site), its weight,
 * and the block among the live ones. caller is the entry point's return address: the whole
 * stack on 32-bit ARM (whose unwinder yields pc and lr only), and where a walk found nothing
 * beyond our own frames.
 */
static __attribute__((noinline)) void sample(void *p, size_t size, uintptr_t caller)
{
	struct heapfile_stack *hs;
	bool truncated = false;
	int64_t mo, b;
	unsigned int n = walk_here(&truncated), skip = 0;
	long s;

	/* our own frames (this file, the interposed entry point) are not the program's */
	while (skip < n && ht.frames[skip] >= heap.self_lo && ht.frames[skip] < heap.self_hi)
		skip++;
	if (IS_ENABLED(__arm__) || skip == n) {
		ht.frames[0] = caller;
		n = 1;
		skip = 0;
	}
	pthread_mutex_lock(&heap.lock);
	if (!heap.on)
		goto out;
	ADD(heap.v.h->samples, 1);
	ADD(heap.v.h->truncated, truncated);
	s = stack_slot(ht.frames + skip, n - skip);
	if (s < 0) {
		ADD(heap.v.h->stacks_dropped, 1);
		goto out;
	}
	hs = &heap.v.stacks[s];
	weight(size, &mo, &b);
	ADD(hs->samples, 1);
	ADD(hs->alloc_mobjects, mo);
	ADD(hs->alloc_bytes, b);
	live_add((uintptr_t)p, size, (uint32_t)s);
out:
	pthread_mutex_unlock(&heap.lock);
}

/* Every allocation: counts its bytes down; a sample when the countdown crosses zero. */
static inline void note_alloc(void *p, size_t size, uintptr_t caller)
{
	if (!p || !heap.on || ht.busy)
		return;
	ht.left -= (int64_t)size;
	if (__builtin_expect(ht.left > 0, 1))
		return;
	ht.busy = true;
	if (!ht.drawn) { /* the thread's first interval starts with its first allocation */
		ht.drawn = true;
		ht.left += draw();
	}
	if (ht.left <= 0) {
		sample(p, size, caller);
		/* memoryless: the bytes beyond this sample do not carry over */
		ht.left = draw();
	}
	ht.busy = false;
}

static inline void note_free(void *p)
{
	/* busy: inside our own sampling on this thread (a program's signal handler that frees):
	 * the lock may be ours already; the block then stays in the table (a stale inuse) */
	if (!p || !heap.on || ht.busy)
		return;
	if (!__atomic_load_n(&heap.filter[hash_ptr((uintptr_t)p) % FILTER_SLOTS], __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&heap.lock);
	live_remove((uintptr_t)p);
	pthread_mutex_unlock(&heap.lock);
}

/* The program's call site: where an entry point returns to. */
#define CALLER ((uintptr_t)__builtin_return_address(0))

/* ---- the interposed entry points ---------------------------------------------------------- */

EP_API void *malloc(size_t n)
{
	void *p;

	if (__builtin_expect(!real.malloc, 0)) {
		if (resolving)
			return arena_alloc(n);
		resolve();
	}
	p = real.malloc(n);
	note_alloc(p, n, CALLER);
	return p;
}

EP_API void free(void *p)
{
	if (!p || in_arena(p))
		return;
	note_free(p);
	if (!real.free)
		resolve();
	real.free(p);
}

EP_API void *calloc(size_t n, size_t size)
{
	void *p;

	if (__builtin_expect(!real.malloc, 0)) {
		if (resolving)
			return arena_alloc(n * size); /* static: already zero */
		resolve();
	}
	p = real.calloc(n, size);
	note_alloc(p, n * size, CALLER);
	return p;
}

EP_API void *realloc(void *old, size_t n)
{
	void *p;

	if (__builtin_expect(!real.malloc, 0))
		resolve();
	if (in_arena(old)) { /* dlsym's block: its size is unknown, the arena's rest is bounded */
		p = real.malloc(n);
		if (p)
			memcpy(p, old,
			       n < (size_t)(arena + sizeof(arena) - (char *)old)
				   ? n
				   : (size_t)(arena + sizeof(arena) - (char *)old));
		note_alloc(p, n, CALLER);
		return p;
	}
	note_free(old); /* the old block goes (or moves): a new allocation of n bytes */
	p = real.realloc(old, n);
	if (n)
		note_alloc(p, n, CALLER);
	return p;
}

EP_API void *reallocarray(void *old, size_t n, size_t size)
{
	if (size && n > (size_t)-1 / size) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(old, n * size);
}

EP_API int posix_memalign(void **out, size_t align, size_t n)
{
	int rc;

	if (!real.malloc)
		resolve();
	rc = real.posix_memalign(out, align, n);
	if (!rc)
		note_alloc(*out, n, CALLER);
	return rc;
}

EP_API void *aligned_alloc(size_t align, size_t n)
{
	void *p;

	if (!real.malloc)
		resolve();
	p = real.aligned_alloc ? real.aligned_alloc(align, n) : real.memalign(align, n);
	note_alloc(p, n, CALLER);
	return p;
}

EP_API void *memalign(size_t align, size_t n)
{
	void *p;

	if (!real.malloc)
		resolve();
	p = real.memalign(align, n);
	note_alloc(p, n, CALLER);
	return p;
}

EP_API void *valloc(size_t n)
{
	void *p;

	if (!real.malloc)
		resolve();
	p = real.valloc ? real.valloc(n) : real.memalign((size_t)sysconf(_SC_PAGESIZE), n);
	note_alloc(p, n, CALLER);
	return p;
}

EP_API void *pvalloc(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	void *p;

	if (!real.malloc)
		resolve();
	p = real.pvalloc ? real.pvalloc(n) : real.memalign(pg, (n + pg - 1) & ~(pg - 1));
	note_alloc(p, n, CALLER);
	return p;
}

/* ---- start, stop, profile ---------------------------------------------------------------- */

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
	uintptr_t me = (uintptr_t)&find_self;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && me >= a &&
		    me < a + ph->p_memsz) {
			heap.self_lo = a;
			heap.self_hi = a + ph->p_memsz;
			return 1;
		}
	}
	return 0;
}

static size_t pow2_at_least(size_t n)
{
	size_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static void at_fork_child(void)
{
	heap.on = 0; /* the child is not profiled; its frees go straight through */
	pthread_mutex_init(&heap.lock, NULL);
}

/* The stack table: in the shared file the agent reads, or anonymous memory. */
static int map_table(const char *path, uint64_t rate)
{
	uint64_t slots = pow2_at_least(2 * CONFIG_HEAP_STACKS);
	size_t len = heapfile__size(slots, CONFIG_MAX_STACK_DEPTH);
	void *m;
	int fd = -1;

	if (path) {
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		if (ftruncate(fd, (off_t)len) < 0) {
			int err = -errno;

			close(fd);
			unlink(path);
			return err;
		}
	}
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, path ? MAP_SHARED : MAP_PRIVATE | MAP_ANONYMOUS,
		 fd, 0);
	if (fd >= 0)
		close(fd);
	if (m == MAP_FAILED) {
		if (path)
			unlink(path);
		return -ENOMEM;
	}
	*(struct heapfile_hdr *)m = (struct heapfile_hdr){
	    .magic = HEAPFILE_MAGIC,
	    .version = HEAPFILE_VERSION,
	    .pid = (uint32_t)getpid(),
	    .max_depth = CONFIG_MAX_STACK_DEPTH,
	    .rate = rate,
	    .stack_slots = slots,
	};
	heap.table = m;
	heap.table_bytes = len;
	return heapfile__view(m, len, &heap.v);
}

int heap__start(const struct heap_opts *o)
{
	static bool once;
	int err;

	resolve();
	if (!real.malloc || !real.free || !real.calloc || !real.realloc || !real.memalign)
		return -ENOSYS;
	heap.unwind = o->unwind;
	heap.max_depth = o->max_depth && o->max_depth < CONFIG_MAX_STACK_DEPTH
			     ? o->max_depth
			     : CONFIG_MAX_STACK_DEPTH;
	heap.pid = getpid();
	if (!heap.table) {
		err = map_table(o->shared_path, o->rate ? o->rate : CONFIG_HEAP_SAMPLE_BYTES);
		if (err)
			return err;
		if (o->shared_path)
			snprintf(heap.shared_path, sizeof(heap.shared_path), "%s", o->shared_path);
		heap.live_slots = pow2_at_least(2 * CONFIG_HEAP_LIVE_ENTRIES);
		heap.live = mmap(NULL, heap.live_slots * sizeof(struct live),
				 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (heap.live == MAP_FAILED) {
			heap.live = NULL;
			return -ENOMEM;
		}
	}
	dl_iterate_phdr(find_self, NULL);
	if (!once) {
		once = true;
		pthread_atfork(NULL, NULL, at_fork_child);
	}
	__atomic_store_n(&heap.on, 1, __ATOMIC_RELEASE);
	return 0;
}

void heap__stop(void)
{
	__atomic_store_n(&heap.on, 0, __ATOMIC_RELEASE);
	/* the state of a process that is gone: nothing for the agent to read any more */
	if (heap.shared_path[0] && getpid() == heap.pid)
		unlink(heap.shared_path);
	heap.shared_path[0] = 0;
}

/* The pprof of what was sampled (standalone: at exit). */
int heap__write_file(struct output_opts *o, const char *path)
{
	struct output_kind k;
	struct output_stack *st = NULL;
	int64_t *vals = NULL;
	size_t n = 0, max;
	char c0[256];
	const char *comments[1] = {c0};
	int err;

	if (!heap.table)
		return -ENOENT;
	ht.busy = true; /* the writer's own allocations are not the program's */
	max = heap.v.h->stack_slots / 2;
	st = calloc(max, sizeof(*st));
	vals = calloc(max * 4, sizeof(*vals));
	pthread_mutex_lock(&heap.lock);
	if (st && vals)
		n = heapfile__collect(&heap.v, st, vals, max);
	heapfile__kind(&heap.v, &k);
	heapfile__comment(&heap.v, c0, sizeof(c0));
	pthread_mutex_unlock(&heap.lock);
	o->comments = comments;
	o->n_comments = 1;
	err = st && vals ? output__write_stacks_file(&k, o, st, n, path) : -ENOMEM;
	free(st);
	free(vals);
	ht.busy = false;
	return err;
}
