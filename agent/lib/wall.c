// SPDX-License-Identifier: MIT
/*
 * agent/lib/wall.c — wall-clock profiles without a signal of their own (agent/lib/wall.h).
 *
 * Why no signal: a thread blocked in nanosleep, poll, select, epoll_wait, sem_timedwait,
 * a socket read with a timeout... returns EINTR when a handler runs, SA_RESTART or not
 * (signal(7)). A sampler that signals every thread on a wall-clock timer (async-profiler's
 * wall mode, which the JVM's own EINTR loops absorb) would make a program that does not retry
 * on EINTR sleep short or fail. So blocked threads are never interrupted: their time is charged
 * by the ticker from outside, to the stack of the blocking call they are in, which an interposed
 * entry point leaves behind (pc, sp, fp of its frame, which stays put until the call returns).
 * Running time comes from the CPU sampler's timers, which the kernel only fires in a running
 * thread and (x86_64, arm64 since Linux 5.11: POSIX_CPU_TIMERS_TASK_WORK) only on its way
 * back to user space.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "agent/core/ring.h"
#include "agent/core/sample.h"
#include "agent/lib/wall.h"

#define EP_API __attribute__((visibility("default")))
#define EP_TLS __thread __attribute__((tls_model("initial-exec")))
#define DEPTH CONFIG_MAX_STACK_DEPTH
#define CLAIMING UINT32_MAX /* a slot being filled by the thread that took it */

/*
 * One tracked thread. call_seq is odd while the thread is inside an interposed blocking call
 * (pc, sp, fp: the registers of that call's frame); last_seq is odd while the CPU handler
 * writes last[] (a seqlock: the ticker retries or gives up). The rest is the ticker's.
 */
struct wall_slot {
	uint32_t tid; /* 0: free */
	uint32_t labels_id;
	uint32_t call_seq, last_seq;
	uintptr_t pc, sp, fp, caller;
	uint64_t call_ns; /* when the call began (CLOCK_MONOTONIC) */
	uint16_t n_last, n_cached;
	uint32_t cached_seq, seen_tid;
	uint64_t sampled_ns;		/* CPU time its CPU samples stood for (its handler adds) */
	uint64_t sampled_seen, tick_ns; /* the ticker's last look at sampled_ns, and when */
	int64_t owed_ns; /* wall time not yet in the profile: charged with the next stack known */
	uint64_t last[DEPTH], cached[DEPTH];
};

static struct {
	volatile int on, stop;
	struct ring *ring;
	uint64_t period_ns;
	enum unwind_mode unwind;
	unsigned int max_depth;
	pid_t pid;
	struct wall_slot *slots;
	struct wall_stats st;
	struct unwind_cache cache; /* the ticker's walks */
	uint64_t frames[DEPTH];
} wall;

static EP_TLS struct wall_slot *me;
static EP_TLS int looked; /* a thread that existed before us: found by tid once */

static uint64_t ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_ns(&ts);
}

static clockid_t thread_cpu_clock(pid_t tid)
{
	return (clockid_t)((~(unsigned int)tid << 3) | 6);
}

static struct wall_slot *find(pid_t tid)
{
	for (unsigned int i = 0; i < CONFIG_WALL_THREADS; i++)
		if (__atomic_load_n(&wall.slots[i].tid, __ATOMIC_RELAXED) == (uint32_t)tid)
			return &wall.slots[i];
	return NULL;
}

/* The calling thread's slot; async-signal-safe (a tid lookup once per thread). */
static inline struct wall_slot *slot_self(void)
{
	if (!me && !looked) {
		looked = 1;
		me = find((pid_t)syscall(SYS_gettid));
	}
	return me;
}

/*
 * A thread tracking itself sets its clocks now, so that the ticker charges its first tick from
 * here (another thread's are set by the ticker's first look at it).
 */
void wall__thread_add(pid_t tid, int self)
{
	struct wall_slot *s;
	struct timespec ts;

	if (!wall.on)
		return;
	s = find(tid);
	for (unsigned int i = 0; !s && i < CONFIG_WALL_THREADS; i++) {
		uint32_t zero = 0;

		if (__atomic_compare_exchange_n(&wall.slots[i].tid, &zero, CLAIMING, false,
						__ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			s = &wall.slots[i];
		else
			continue;
		s->seen_tid = 0;
		if (self) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			s->tick_ns = ts_ns(&ts);
			s->sampled_seen = s->sampled_ns;
			s->owed_ns = 0;
			s->n_cached = 0;
			s->seen_tid = (uint32_t)tid;
		}
		__atomic_store_n(&s->tid, (uint32_t)tid, __ATOMIC_RELEASE);
	}
	if (!s)
		__atomic_fetch_add(&wall.st.untracked, 1, __ATOMIC_RELAXED);
	if (self) {
		me = s;
		looked = 1;
	}
}

void wall__thread_end(void)
{
	if (me)
		__atomic_store_n(&me->tid, 0, __ATOMIC_RELEASE);
	me = NULL;
}

void wall__note(const uint64_t *frames, unsigned int n, uint32_t labels_id, uint64_t weight_ns)
{
	struct wall_slot *s = wall.on ? slot_self() : NULL;

	if (!s)
		return;
	__atomic_store_n(&s->sampled_ns, s->sampled_ns + weight_ns, __ATOMIC_RELAXED);
	n = n < DEPTH ? n : DEPTH;
	__atomic_store_n(&s->last_seq, s->last_seq + 1, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(s->last, frames, n * sizeof(*frames));
	s->n_last = (uint16_t)n;
	s->labels_id = labels_id;
	__atomic_store_n(&s->last_seq, s->last_seq + 1, __ATOMIC_RELEASE);
}

/* ---- the blocking calls ------------------------------------------------------------------ */

/*
 * Entry: this frame's registers, then call_seq odd. Inlined into each entry point (a macro),
 * so that pc and sp are those of the frame that lives until the call returns; the .eh_frame
 * rule at that pc describes that sp. A nested call (a handler's) is not tracked.
 */
#if defined(__x86_64__)
#define CAPTURE(pc, sp) __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1" : "=r"(pc), "=r"(sp))
#elif defined(__aarch64__)
#define CAPTURE(pc, sp) __asm__ volatile("adr %0, .\n\tmov %1, sp" : "=r"(pc), "=r"(sp))
#else /* 32-bit ARM: its unwinder gives pc and lr only; the call site will do */
#define CAPTURE(pc, sp) ((pc) = 0, (sp) = 0)
#endif

#define WALL_ENTER(s)                                                                              \
	do {                                                                                       \
		uintptr_t pc_, sp_;                                                                \
		s = wall.on ? slot_self() : NULL;                                                  \
		if (!s || (s->call_seq & 1)) {                                                     \
			s = NULL;                                                                  \
			break;                                                                     \
		}                                                                                  \
		CAPTURE(pc_, sp_);                                                                 \
		s->pc = pc_;                                                                       \
		s->sp = sp_;                                                                       \
		s->fp = (uintptr_t)__builtin_frame_address(0);                                     \
		s->caller = (uintptr_t)__builtin_return_address(0);                                \
		s->call_ns = mono_ns();                                                            \
		__atomic_store_n(&s->call_seq, s->call_seq + 1, __ATOMIC_RELEASE);                 \
	} while (0)

#define WALL_LEAVE(s)                                                                              \
	do {                                                                                       \
		if (s)                                                                             \
			__atomic_store_n(&s->call_seq, s->call_seq + 1, __ATOMIC_RELEASE);         \
	} while (0)

/* An entry point forwarding to the next definition, tracked; errno is the real call's. */
#define BLOCKING(ret, name, params, args)                                                          \
	EP_API ret name params                                                                     \
	{                                                                                          \
		static ret(*real_) params;                                                         \
		struct wall_slot *ws_;                                                             \
		ret rv_;                                                                           \
		if (!real_)                                                                        \
			*(void **)&real_ = dlsym(RTLD_NEXT, #name);                                \
		if (!real_) {                                                                      \
			errno = ENOSYS;                                                            \
			return (ret)-1;                                                            \
		}                                                                                  \
		WALL_ENTER(ws_);                                                                   \
		rv_ = real_ args;                                                                  \
		WALL_LEAVE(ws_);                                                                   \
		return rv_;                                                                        \
	}

BLOCKING(int, nanosleep, (const struct timespec *a, struct timespec *b), (a, b))
BLOCKING(int, clock_nanosleep, (clockid_t c, int f, const struct timespec *a, struct timespec *b),
	 (c, f, a, b))
BLOCKING(int, usleep, (useconds_t u), (u))
BLOCKING(unsigned int, sleep, (unsigned int u), (u))
BLOCKING(int, pause, (void), ())
BLOCKING(int, poll, (struct pollfd * p, nfds_t n, int t), (p, n, t))
BLOCKING(int, ppoll, (struct pollfd * p, nfds_t n, const struct timespec *t, const sigset_t *m),
	 (p, n, t, m))
BLOCKING(int, select, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t), (n, r, w, e, t))
BLOCKING(int, pselect,
	 (int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *m),
	 (n, r, w, e, t, m))
BLOCKING(int, epoll_wait, (int e, struct epoll_event *v, int n, int t), (e, v, n, t))
BLOCKING(int, epoll_pwait, (int e, struct epoll_event *v, int n, int t, const sigset_t *m),
	 (e, v, n, t, m))
BLOCKING(ssize_t, read, (int fd, void *b, size_t n), (fd, b, n))
BLOCKING(ssize_t, readv, (int fd, const struct iovec *v, int n), (fd, v, n))
BLOCKING(ssize_t, write, (int fd, const void *b, size_t n), (fd, b, n))
BLOCKING(ssize_t, recv, (int fd, void *b, size_t n, int f), (fd, b, n, f))
BLOCKING(ssize_t, recvfrom, (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l),
	 (fd, b, n, f, a, l))
BLOCKING(ssize_t, recvmsg, (int fd, struct msghdr *m, int f), (fd, m, f))
BLOCKING(int, accept, (int fd, struct sockaddr *a, socklen_t *l), (fd, a, l))
BLOCKING(int, accept4, (int fd, struct sockaddr *a, socklen_t *l, int f), (fd, a, l, f))
BLOCKING(int, connect, (int fd, const struct sockaddr *a, socklen_t l), (fd, a, l))
BLOCKING(pid_t, waitpid, (pid_t p, int *st, int o), (p, st, o))
BLOCKING(pid_t, wait, (int *st), (st))
BLOCKING(int, fsync, (int fd), (fd))
BLOCKING(int, fdatasync, (int fd), (fd))
BLOCKING(int, flock, (int fd, int op), (fd, op))
BLOCKING(int, sigwaitinfo, (const sigset_t *m, siginfo_t *i), (m, i))
BLOCKING(int, sigtimedwait, (const sigset_t *m, siginfo_t *i, const struct timespec *t), (m, i, t))
BLOCKING(int, pthread_join, (pthread_t t, void **r), (t, r))

/* ---- the ticker -------------------------------------------------------------------------- */

/* The stack of the blocking call s is in (call_seq seq): n frames in wall.frames, or 0. */
static unsigned int walk_call(struct wall_slot *s, uint32_t seq)
{
	ucontext_t uc;
	bool truncated;
	unsigned int n = 0;
	uintptr_t caller = s->caller;

	memset(&uc, 0, sizeof(uc));
#if defined(__x86_64__)
	uc.uc_mcontext.gregs[REG_RIP] = (greg_t)s->pc;
	uc.uc_mcontext.gregs[REG_RSP] = (greg_t)s->sp;
	uc.uc_mcontext.gregs[REG_RBP] = (greg_t)s->fp;
#elif defined(__aarch64__)
	uc.uc_mcontext.pc = s->pc;
	uc.uc_mcontext.sp = s->sp;
	uc.uc_mcontext.regs[29] = s->fp;
#endif
	if (s->pc) /* stack bounds 0/0: every read checked by process_vm_readv */
		n = unwind__stack(&uc, 0, 0, wall.unwind, &wall.cache, wall.frames, wall.max_depth,
				  &truncated);
	if (n > 1) { /* frame 0 is the entry point, frame 1 its caller */
		memmove(wall.frames, wall.frames + 1, (n - 1) * sizeof(wall.frames[0]));
		n--;
	} else {
		wall.frames[0] = caller;
		n = caller != 0;
	}
	/* the leaf is a return address: step back into the call (symbolized as the call) */
	if (n)
		wall.frames[0]--;
	if (__atomic_load_n(&s->call_seq, __ATOMIC_ACQUIRE) != seq) {
		wall.st.torn++;
		return 0;
	}
	return n;
}

/* The thread's last CPU sample, or 0 when it had none (or it is being written twice over). */
static unsigned int read_last(struct wall_slot *s)
{
	for (int tries = 0; tries < 3; tries++) {
		uint32_t q = __atomic_load_n(&s->last_seq, __ATOMIC_ACQUIRE);
		unsigned int n = s->n_last;

		if (q & 1)
			continue;
		n = n < DEPTH ? n : DEPTH;
		memcpy(wall.frames, s->last, n * sizeof(wall.frames[0]));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&s->last_seq, __ATOMIC_RELAXED) == q)
			return n;
	}
	return 0;
}

/* The stack of the call s is in (call_seq seq) in wall.frames, walked once per call. */
static unsigned int call_stack(struct wall_slot *s, uint32_t seq)
{
	unsigned int n;

	if (seq == s->cached_seq && s->n_cached) {
		n = s->n_cached;
		memcpy(wall.frames, s->cached, n * sizeof(wall.frames[0]));
		return n;
	}
	n = walk_call(s, seq);
	s->cached_seq = seq;
	s->n_cached = (uint16_t)n;
	memcpy(s->cached, wall.frames, n * sizeof(wall.frames[0]));
	return n;
}

static void emit(struct wall_slot *s, pid_t tid, uint64_t now, unsigned int n, uint64_t ns)
{
	struct ring_rec *rec = ring__reserve(wall.ring, n);

	if (!rec) {
		wall.st.dropped++;
		return;
	}
	rec->time_ns = now;
	rec->weight_ns = ns;
	rec->pid = (uint32_t)wall.pid;
	rec->tid = (uint32_t)tid;
	rec->labels_id = s->labels_id;
	rec->n_frames = (uint16_t)n;
	rec->flags = SAMPLE_F_WALL | SAMPLE_F_NOCPU;
	memcpy(rec->frames, wall.frames, n * sizeof(wall.frames[0]));
	ring__commit(wall.ring, rec);
}

/* The previous blocking call's stack (the last one walked), or 0. */
static unsigned int prev_call_stack(struct wall_slot *s)
{
	memcpy(wall.frames, s->cached, s->n_cached * sizeof(wall.frames[0]));
	return s->n_cached;
}

/*
 * s->owed_ns of wall time, not in its CPU samples: to the stack of the blocking call it is in,
 * since that call began; what came before it in the tick to the previous call's stack (a loop
 * of short calls; a ticker that ran late); outside interposed calls, to its last CPU sample.
 * What finds no stack stays owed.
 */
static void charge(struct wall_slot *s, pid_t tid, uint64_t now)
{
	uint32_t seq = __atomic_load_n(&s->call_seq, __ATOMIC_ACQUIRE);
	uint64_t rest = (uint64_t)s->owed_ns;
	unsigned int n;

	if (seq & 1) {
		uint64_t start = s->call_ns, in_call = now > start ? now - start : 0;

		in_call = in_call < rest ? in_call : rest;
		if (rest > in_call && seq != s->cached_seq && (n = prev_call_stack(s))) {
			emit(s, tid, now, n, rest - in_call);
			wall.st.call_ns += rest - in_call;
			rest = in_call;
		}
		n = call_stack(s, seq);
		if (n && in_call) {
			emit(s, tid, now, n, in_call);
			wall.st.call_ns += in_call;
			rest -= in_call;
		}
	}
	if (rest && ((n = read_last(s)) || (n = prev_call_stack(s)))) {
		emit(s, tid, now, n, rest);
		wall.st.last_ns += rest;
		rest = 0;
	}
	s->owed_ns = (int64_t)rest;
}

static void tick_slot(struct wall_slot *s, bool paused)
{
	uint32_t tid = __atomic_load_n(&s->tid, __ATOMIC_ACQUIRE);
	struct timespec ts;
	uint64_t now, sampled;

	if (!tid || tid == CLAIMING)
		return;
	if (clock_gettime(thread_cpu_clock((pid_t)tid), &ts) < 0) {
		/* gone without telling us (a thread that existed before the library) */
		__atomic_compare_exchange_n(&s->tid, &tid, 0, false, __ATOMIC_ACQ_REL,
					    __ATOMIC_RELAXED);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = ts_ns(&ts);
	sampled = __atomic_load_n(&s->sampled_ns, __ATOMIC_RELAXED);
	if (s->seen_tid != tid) { /* a new thread in this slot: its first tick sets the clocks */
		s->seen_tid = tid;
		s->n_cached = 0;
		s->tick_ns = now;
		s->sampled_seen = sampled;
		s->owed_ns = 0;
		return;
	}
	/*
	 * Its wall time since the last tick, less what its CPU samples stood for meanwhile: the
	 * time it waited (blocked, or runnable and not running), and CPU time no sample stands
	 * for yet, which a later sample's weight pays back (owed goes below zero). So a thread's
	 * samples add up to its wall time, whatever the timers' granularity.
	 */
	s->owed_ns += (int64_t)(now - s->tick_ns) - (int64_t)(sampled - s->sampled_seen);
	s->tick_ns = now;
	s->sampled_seen = sampled;
	wall.st.threads++;
	if (paused) {
		s->owed_ns = 0;
		return;
	}
	if (s->owed_ns > (int64_t)(wall.period_ns / 64))
		charge(s, (pid_t)tid, now);
}

void *wall__main(void *unused)
{
	struct timespec next;
	sigset_t all;

	/* no signal of the program's ever lands on this thread (glibc's own two stay open) */
	sigfillset(&all);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, _NSIG / 8);
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!wall.stop) {
		struct timespec ts;
		uint64_t t = ts_ns(&next) + wall.period_ns;
		bool paused = __atomic_load_n(&ring__shared(wall.ring)->paused, __ATOMIC_RELAXED);

		next.tv_sec = (time_t)(t / 1000000000ull);
		next.tv_nsec = (long)(t % 1000000000ull);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (ts_ns(&ts) > t + wall.period_ns) { /* far behind: on from now, not in a burst */
			wall.st.late_ticks++;
			next = ts;
		}
		wall.st.ticks++;
		wall.st.threads = 0;
		for (unsigned int i = 0; i < CONFIG_WALL_THREADS && !wall.stop; i++)
			tick_slot(&wall.slots[i], paused);
	}
	return NULL;
}

int wall__start(const struct wall_opts *o)
{
	size_t bytes = CONFIG_WALL_THREADS * sizeof(struct wall_slot);

	if (!wall.slots) {
		void *p =
		    mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -errno;
		wall.slots = p;
	}
	wall.ring = o->ring;
	wall.period_ns = o->period_ns;
	wall.unwind = o->unwind;
	wall.max_depth = o->max_depth < DEPTH ? o->max_depth : DEPTH;
	wall.pid = o->pid;
	wall.stop = 0;
	wall.on = 1;
	return 0;
}

void wall__stop(void)
{
	wall.stop = 1;
	wall.on = 0;
}

void wall__stats(struct wall_stats *st)
{
	*st = wall.st;
	/* time still owed: threads that never had a stack, and the last tick's */
	for (unsigned int i = 0; wall.slots && i < CONFIG_WALL_THREADS; i++)
		if (wall.slots[i].seen_tid && wall.slots[i].owed_ns > 0)
			st->unattributed_ns += (uint64_t)wall.slots[i].owed_ns;
}
