// SPDX-License-Identifier: MIT
/*
 * agent/lib/sigprof.c — libedgeprof.so: per-thread CPU-time timers deliver SIGPROF to the thread
 * that used the CPU; the handler unwinds (agent/lib/unwind.c) and writes one record into the ring
 * (shared with the agent, or private in standalone mode, where a drain thread aggregates and
 * the profile is written at exit). See agent/edgeprof.h for the interface.
 *
 * The handler is async-signal-safe: no allocation, no locks, no stdio; errno is preserved;
 * everything it touches is preallocated (the ring, initial-exec TLS).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent/core/aggregate.h"
#include "agent/edgeprof.h"
#include "agent/core/luaname.h"
#include "agent/core/pyname.h"
#include "agent/lib/env.h"
#include "agent/lib/heap.h"
#include "agent/lib/modules.h"
#include "agent/lib/ljframes.h"
#include "agent/lib/luaframes.h"
#include "agent/lib/pyframes.h"
#include "agent/core/output.h"
#include "agent/core/procmaps.h"
#include "agent/core/ring.h"
#include "agent/lib/selfread.h"
#include "agent/lib/sigctl.h"
#include "agent/lib/snapshot.h"
#include "agent/core/symbolize.h"
#include "agent/lib/unwind.h"
#include "agent/lib/wall.h"
#include "port/file.h"

#define EP_API __attribute__((visibility("default")))
#define EP_MAX_THREADS 1024
#define EP_LABEL_DEPTH 8
#define EP_TLS __thread __attribute__((tls_model("initial-exec")))
/*
 * Stack the handler needs below its own frame: measured 987 B beyond the kernel's signal
 * frame on x86_64 with .eh_frame unwinding (343 B with frame pointers only; `harm stackuse`,
 * checked by tests/integration/sigprof-harm.test.sh), plus room for what the kernel's frame
 * does not count. A thread with less left is not sampled (counted: stack_margin).
 */
#define EP_HANDLER_STACK 1536

struct ep_thread {
	pid_t tid;
	uintptr_t stack_lo, stack_hi;
	uint32_t labels_id;
	uint8_t depth;
	uint16_t blob_len;
	uint16_t off[EP_LABEL_DEPTH];
	uint32_t ids[EP_LABEL_DEPTH];
	char blob[RING_LABEL_SET_BYTES - 8];
	volatile sig_atomic_t in_handler;
	struct unwind_cache cache;
	unsigned int snap_countdown; /* samples until the next snapshot (agent/lib/snapshot.h) */
	uint64_t frames[CONFIG_MAX_STACK_DEPTH]; /* the walk's output: off the interrupted stack */
};

static EP_TLS struct ep_thread self;

struct ep_timer {
	pid_t tid;
	timer_t timer;
};

static struct {
	struct ring *ring;
	volatile sig_atomic_t running;
	volatile sig_atomic_t stepped_aside; /* the program claimed our signal: no more timers */
	int signo;			     /* the sampler's signal (agent/lib/sigctl.h) */
	pid_t pid;
	unsigned int hz, max_depth;
	uint64_t interval_ns;
	enum unwind_mode unwind;
	bool standalone;
	bool cpu, heap, wall; /* EDGEPROF_PROFILES: what this process records */
	char output[4096], ring_path[4096];
	/* timers, owned by the threads they sample; the table is only touched outside the handler
	 */
	pthread_mutex_t lock;
	struct ep_timer timers[EP_MAX_THREADS];
	unsigned int n_timers;
	uint64_t untimed_threads;
	pthread_key_t key;
	/* standalone: drain thread and aggregate */
	pthread_t drainer;
	pthread_mutex_t drain_lock;
	pthread_cond_t drain_wake; /* signalled by edgeprof_stop(): exit does not wait a pass */
	bool drain_stop;
	struct aggregate *agg;
	struct aggregate *wall_agg; /* standalone wall profile: CPU samples + blocked time */
	pthread_t ticker;	    /* wall: agent/lib/wall.h */
	uint64_t start_real_ns, start_mono_ns;
	/* wall time inside the handler (vDSO clock), quarter-octave buckets (four per power
	 * of two, so the median is within ~12 %): a median that preemption on a loaded machine
	 * does not drag */
	uint64_t handler_hist[24 * 4];
	uint64_t sampled_ns; /* standalone: CPU time the drained samples stand for */
	uint64_t skip_margin;	/* samples skipped: the thread was too close to its stack end */
	uint64_t skip_altstack; /* samples skipped: they landed on an alternate signal stack */
	/* the program's threads, counted up before pthread_create and down as one ends: never
	 * fewer than run (agent/lib/selfread.h reads the brk heap directly only at 1) */
	unsigned int program_threads;
} ep = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static __attribute__((noinline)) uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The calling thread's stack as thread_begin() found it (agent/lib/heap.h). */
void sigprof__stack_bounds(uintptr_t *lo, uintptr_t *hi)
{
	*lo = self.stack_lo;
	*hi = self.stack_hi;
}

/* ---- the handler -------------------------------------------------------------------------- */

/*
 * The handler runs on the interrupted stack (never SA_ONSTACK). Room for it: enough left
 * below us on the thread's own stack; and not an alternate signal stack (blocked in handlers
 * installed through sigaction, agent/lib/sigctl.c: this is the net for those installed another
 * way). Off the thread's stack and not on the alternate one (a coroutine's stack): no bound
 * known, sampled.
 */
static __attribute__((noinline)) bool stack_room(void)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	stack_t ss;

	if (!self.stack_hi)
		return true; /* a thread that existed before us: bounds unknown */
	if (sp >= self.stack_lo && sp < self.stack_hi) {
		if (sp - self.stack_lo >= EP_HANDLER_STACK)
			return true;
		__atomic_fetch_add(&ep.skip_margin, 1, __ATOMIC_RELAXED);
		goto skipped;
	}
	if (sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK)) {
		__atomic_fetch_add(&ep.skip_altstack, 1, __ATOMIC_RELAXED);
		goto skipped;
	}
	return true;
skipped: /* for the agent's comments too */
	__atomic_fetch_add(&ring__shared(ep.ring)->miss_skipped, 1, __ATOMIC_RELAXED);
	return false;
}

/* The thread's stack end when the handler runs on that stack (not a coroutine's), else 0. */
static __attribute__((noinline)) uintptr_t live_stack_hi(void)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);

	return sp >= self.stack_lo && sp < self.stack_hi ? self.stack_hi : 0;
}

/*
 * The ring record of a sample of n frames, with a snapshot after them when one is due and fits
 * (n_frames then counts its words too; the frames are the caller's to copy), else without.
 */
static struct ring_rec *reserve_record(unsigned int n, const void *uctx)
{
	size_t max = snapshot__due(&self.snap_countdown) ? snapshot__max_bytes() : 0;
	struct ring_rec *rec;

	if (!max)
		goto plain;
	rec = ring__try_reserve(ep.ring, n + (unsigned int)RING_SNAP_WORDS(max));
	if (!rec) {
		snapshot__count_no_room();
		goto plain;
	}
	size_t len = snapshot__take(uctx, self.stack_lo, self.stack_hi, (uint8_t *)&rec->frames[n]);

	rec->n_frames = (uint16_t)(n + RING_SNAP_WORDS(len));
	rec->frames[rec->n_frames - 1] = RING_SNAP_DESC(n, len);
	return rec;
plain:
	rec = ring__reserve(ep.ring, n);
	if (rec)
		rec->n_frames = (uint16_t)n;
	return rec;
}

static void on_sigprof(int sig, siginfo_t *si, void *uctx)
{
	int saved_errno = errno;
	struct ring_rec *rec;
	bool truncated;
	unsigned int n;

	if (!sigctl__is_ours(si)) {
		sigctl__forward(sig, si, uctx); /* the program's own: its disposition */
		goto out;
	}
	if (!ep.running || self.in_handler ||
	    __atomic_load_n(&ring__shared(ep.ring)->paused, __ATOMIC_RELAXED) || !stack_room())
		goto out;
	self.in_handler = 1;
	uint64_t t0 = mono_ns();

	if (!self.tid)
		self.tid = (pid_t)syscall(SYS_gettid);
	n = unwind__stack(uctx, self.stack_lo, self.stack_hi, ep.unwind, &self.cache, self.frames,
			  ep.max_depth, &truncated);
	selfread__begin(self.frames, n,
			__atomic_load_n(&ep.program_threads, __ATOMIC_RELAXED) == 1, live_stack_hi());
	n = pyframes__splice(self.frames, n, ep.max_depth, &truncated);
	n = luaframes__splice(self.frames, n, ep.max_depth, self.stack_hi, &truncated);
	n = ljframes__splice(self.frames, n, ep.max_depth, uctx,
			     &(struct ljframes_walk){self.stack_lo, self.stack_hi, ep.unwind, &self.cache},
			     &truncated);
	rec = reserve_record(n, uctx);
	if (rec) {
		rec->time_ns = t0;
		/* the timer's period on the thread's own CPU clock, times the expiries it stands
		 * for: CPU time actually used, whatever the kernel's tick let through */
		rec->weight_ns =
		    ep.interval_ns * (1 + (uint64_t)(si->si_overrun > 0 ? si->si_overrun : 0));
		rec->pid = (uint32_t)ep.pid;
		rec->tid = (uint32_t)self.tid;
		rec->labels_id = self.labels_id;
		if (rec->n_frames != n) /* reserve_record() wrote a snapshot after the frames */
			rec->flags = SAMPLE_F_SNAPSHOT;
		else
			rec->flags = 0;
		/* the CPU time also counts in the wall profile (only there without cpu) */
		rec->flags |= (uint16_t)((truncated ? SAMPLE_F_TRUNCATED : 0) |
					(self.cache.inferred ? SAMPLE_F_INFERRED : 0) |
					(ep.wall ? SAMPLE_F_WALL : 0) | (ep.cpu ? 0 : SAMPLE_F_NOCPU));
		memcpy(rec->frames, self.frames, n * sizeof(self.frames[0]));
		ring__commit(ep.ring, rec);
		if (ep.wall) /* where the thread was: its waiting is charged there when unknown */
			wall__note(self.frames, n, self.labels_id, rec->weight_ns);
		uint64_t d = mono_ns() - t0;
		unsigned int e = 0;

		while ((d >> e) > 7 && e < 21)
			e++;
		/* d in [2^(e+2), 2^(e+3)) (or below 8 ns): its top three bits pick the bucket */
		__atomic_fetch_add(&ep.handler_hist[4 * e + (unsigned int)((d >> e) & 3)], 1,
				   __ATOMIC_RELAXED);
	}
	self.in_handler = 0;
out:
	errno = saved_errno;
}

/* ---- timers ------------------------------------------------------------------------------- */

/* The CPU clock of any thread of this process (the kernel's MAKE_THREAD_CPUCLOCK). */
static clockid_t thread_cpu_clock(pid_t tid)
{
	return (clockid_t)((~(unsigned int)tid << 3) | 6);
}

static int arm_thread(pid_t tid)
{
	struct sigevent sev;
	struct itimerspec its;
	struct ep_timer *t;
	timer_t timer;
	int err = 0;

	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = ep.signo;
	sev.sigev_value.sival_ptr = sigctl__cookie();
	sev._sigev_un._tid = tid;
	if (!ep.cpu && !ep.wall)
		return 0; /* no CPU nor wall profile asked for: no timers */
	pthread_mutex_lock(&ep.lock);
	if (ep.stepped_aside)
		goto out;
	for (unsigned int i = 0; i < ep.n_timers; i++)
		if (ep.timers[i].tid == tid)
			goto out; /* already sampled */
	if (ep.n_timers == EP_MAX_THREADS) {
		ep.untimed_threads++;
		err = -ENOSPC;
		goto out;
	}
	if (timer_create(thread_cpu_clock(tid), &sev, &timer) < 0) {
		err = -errno;
		goto out;
	}
	its.it_interval.tv_sec = (time_t)(ep.interval_ns / 1000000000ull);
	its.it_interval.tv_nsec = (long)(ep.interval_ns % 1000000000ull);
	its.it_value = its.it_interval;
	if (timer_settime(timer, 0, &its, NULL) < 0) {
		err = -errno;
		timer_delete(timer);
		goto out;
	}
	t = &ep.timers[ep.n_timers++];
	t->tid = tid;
	t->timer = timer;
out:
	pthread_mutex_unlock(&ep.lock);
	return err;
}

static void disarm_thread(pid_t tid)
{
	pthread_mutex_lock(&ep.lock);
	for (unsigned int i = 0; i < ep.n_timers; i++) {
		if (ep.timers[i].tid != tid)
			continue;
		timer_delete(ep.timers[i].timer);
		ep.timers[i] = ep.timers[--ep.n_timers];
		break;
	}
	pthread_mutex_unlock(&ep.lock);
}

/* Records this thread's stack bounds (so the unwinder reads no further) and arms its timer. */
static void thread_begin(void)
{
	pthread_attr_t attr;
	void *addr;
	size_t size;

	self.tid = (pid_t)syscall(SYS_gettid);
	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
			self.stack_lo = (uintptr_t)addr;
			self.stack_hi = (uintptr_t)addr + size;
		}
		pthread_attr_destroy(&attr);
	}
	pthread_setspecific(ep.key, (void *)1);
	if (ep.wall)
		wall__thread_add(self.tid, 1);
	arm_thread(self.tid);
}

static void thread_end(void *unused)
{
	__atomic_fetch_sub(&ep.program_threads, 1, __ATOMIC_RELAXED);
	wall__thread_end();
	disarm_thread((pid_t)syscall(SYS_gettid));
}

/* Threads that blocked the sampler's signal so far, where the agent reads it. */
static void publish_misses(void)
{
	struct sigctl_stats ss;

	sigctl__stats(&ss);
	__atomic_store_n(&ring__shared(ep.ring)->miss_threads_blocking,
			 (uint32_t)ss.threads_blocking, __ATOMIC_RELAXED);
}

struct start_arg {
	void *(*fn)(void *);
	void *arg;
};

static void *thread_start(void *p)
{
	struct start_arg sa = *(struct start_arg *)p;
	sigset_t mask;

	free(p);
	if (ep.running) {
		/* a thread started with the signal blocked (liblzma's workers) is not sampled */
		if (pthread_sigmask(SIG_BLOCK, NULL, &mask) == 0)
			sigctl__note_mask(&mask);
		publish_misses();
		thread_begin();
	}
	return sa.fn(sa.arg);
}

static int call_real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
				    void *arg)
{
	if (!real_pthread_create)
		*(void **)&real_pthread_create = dlsym(RTLD_NEXT, "pthread_create");
	if (!real_pthread_create)
		return EAGAIN;
	return real_pthread_create(th, attr, fn, arg);
}

/* Threads created while sampling get their own timer from their first instruction. */
EP_API int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	struct start_arg *sa;
	int rc;

	/* before the thread runs; only those that began sampling count down (thread_end) */
	__atomic_fetch_add(&ep.program_threads, 1, __ATOMIC_RELAXED);
	if (!ep.running)
		return call_real_pthread_create(th, attr, fn, arg);
	sa = malloc(sizeof(*sa));
	if (!sa)
		return call_real_pthread_create(th, attr, fn, arg);
	sa->fn = fn;
	sa->arg = arg;
	rc = call_real_pthread_create(th, attr, thread_start, sa);
	if (rc) {
		free(sa);
		__atomic_fetch_sub(&ep.program_threads, 1, __ATOMIC_RELAXED);
	}
	return rc;
}

/*
 * dlopen/dlclose: the unwinder reads the unwind tables of loaded modules, so its table follows
 * the process's: rebuilt after a load, emptied before an unload (no read of unmapped tables).
 */
EP_API void *dlopen(const char *file, int mode)
{
	static void *(*real)(const char *, int);
	void *h;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "dlopen");
	if (!real)
		return NULL;
	h = real(file, mode);
	if (h && ep.running)
		modules__refresh();
	return h;
}

EP_API int dlclose(void *handle)
{
	static int (*real)(void *);
	int rc;

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "dlclose");
	if (!real)
		return -1;
	if (ep.running)
		unwind__suspend();
	rc = real(handle);
	if (ep.running)
		modules__rebuild();
	return rc;
}

/*
 * The program installed a handler for our signal (agent/lib/sigctl.h): from now on every instance
 * is its own. Timers go (a last expiry may already be pending on a thread), samples so far stay.
 */
static void step_aside(void)
{
	__atomic_store_n(&ring__shared(ep.ring)->miss_stepped_aside, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&ep.lock);
	ep.stepped_aside = 1;
	for (unsigned int i = 0; i < ep.n_timers; i++)
		timer_delete(ep.timers[i].timer);
	ep.n_timers = 0;
	pthread_mutex_unlock(&ep.lock);
}

/* Threads that existed before edgeprof_start(): timers on their CPU clocks, by tid. */
static void arm_existing_threads(void)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", ep.pid);
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.' || atoi(d->d_name) == self.tid)
			continue;
		/* under qemu-user the emulator's own threads are listed: not the program's (one
		 * that existed before the library started is missed there, only there) */
		if (!selfread__emulated())
			__atomic_fetch_add(&ep.program_threads, 1, __ATOMIC_RELAXED);
		if (ep.wall)
			wall__thread_add((pid_t)atoi(d->d_name), 0);
		arm_thread((pid_t)atoi(d->d_name));
	}
	closedir(dir);
}

/* ---- labels ------------------------------------------------------------------------------- */

EP_API int edgeprof_labels_push(const char *key, const char *value)
{
	size_t kl = strlen(key) + 1, vl = strlen(value) + 1;
	uint32_t id;

	if (self.depth == EP_LABEL_DEPTH || self.blob_len + kl + vl > sizeof(self.blob))
		return -ENOSPC;
	self.off[self.depth] = self.blob_len;
	self.ids[self.depth] = self.labels_id;
	memcpy(self.blob + self.blob_len, key, kl);
	memcpy(self.blob + self.blob_len + kl, value, vl);
	id = ep.ring ? ring__labels_intern(ep.ring, self.blob, self.blob_len + kl + vl) : 0;
	self.depth++;
	self.blob_len = (uint16_t)(self.blob_len + kl + vl);
	/* one store: the handler sees the old set or the new one */
	__atomic_store_n(&self.labels_id, id, __ATOMIC_RELAXED);
	return id || !ep.ring ? 0 : -ENOSPC;
}

EP_API void edgeprof_labels_pop(void)
{
	if (!self.depth)
		return;
	self.depth--;
	__atomic_store_n(&self.labels_id, self.ids[self.depth], __ATOMIC_RELAXED);
	self.blob_len = self.off[self.depth];
}

/* ---- standalone mode: drain into an aggregate, write a pprof at the end ------------------- */

static int drain_one(void *ctx, const struct ring_rec *rec)
{
	struct agent_sample s;

	ring__rec_to_sample(ep.ring, rec, &s);
	pyname__warm(rec->pid, rec->frames, s.n_user); /* not the snapshot's words */
	luaname__warm(rec->pid, rec->frames, s.n_user);
	if (ep.wall_agg && (rec->flags & SAMPLE_F_WALL)) {
		struct agent_sample w = s; /* the snapshot goes with the CPU profile only */

		w.snapshot = NULL;
		w.flags &= (uint16_t)~SAMPLE_F_SNAPSHOT;
		aggregate__add(ep.wall_agg, &w);
	}
	if (rec->flags & SAMPLE_F_NOCPU)
		return 0;
	aggregate__add(ep.agg, &s);
	ep.sampled_ns += rec->weight_ns;
	return 0;
}

static void *drain_main(void *unused)
{
	sigset_t set;
	struct timespec ts;

	/* this thread has no timer; also keep stray sampler signals off it */
	sigemptyset(&set);
	sigaddset(&set, ep.signo);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	pthread_mutex_lock(&ep.drain_lock);
	while (!ep.drain_stop) {
		pthread_mutex_unlock(&ep.drain_lock);
		/* modules glibc loaded or unloaded itself (iconv, NSS) since the last pass */
		modules__refresh();
		while (ring__drain(ep.ring, 512, mono_ns(), drain_one, NULL) > 0)
			;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 20000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&ep.drain_lock);
		if (!ep.drain_stop)
			pthread_cond_timedwait(&ep.drain_wake, &ep.drain_lock, &ts);
	}
	pthread_mutex_unlock(&ep.drain_lock);
	return NULL;
}

/* A condition variable on CLOCK_MONOTONIC: a wall clock step neither stalls nor rushes it. */
static void drain_wake_init(void)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&ep.drain_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&ep.drain_wake, &ca);
	pthread_condattr_destroy(&ca);
}

static void drain_thread_stop(void)
{
	pthread_mutex_lock(&ep.drain_lock);
	ep.drain_stop = true;
	pthread_cond_signal(&ep.drain_wake);
	pthread_mutex_unlock(&ep.drain_lock);
	pthread_join(ep.drainer, NULL);
}

/* Median handler time, from the histogram (middle of the median's bucket). */
static uint64_t handler_median_ns(void)
{
	uint64_t total = 0, seen = 0;

	for (int i = 0; i < 24 * 4; i++)
		total += ep.handler_hist[i];
	for (int i = 0; i < 24 * 4 && total; i++) {
		seen += ep.handler_hist[i];
		if (2 * seen >= total) /* bucket 4e + m holds [(4 + m) << e, (5 + m) << e) */
			return (uint64_t)((2 * (4 + i % 4) + 1) << (i / 4)) / 2;
	}
	return 0;
}

/*
 * Standalone output path of a profile type: "%p" is the pid (processes of one run do not
 * overwrite each other), "%t" the type. Without "%t", the first type recorded of cpu, wall,
 * heap gets the path; the others get ".<type>" before ".pb.gz" (or at the end).
 */
static void output_path(const char *type, char *path, size_t len)
{
	const char *o = ep.output;
	size_t n = 0;
	bool typed = strstr(o, "%t") != NULL;

	for (; *o && n + 1 < len; o++) {
		if (o[0] == '%' && (o[1] == 'p' || o[1] == 't')) {
			if (o[1] == 'p')
				n += (size_t)snprintf(path + n, len - n, "%d", ep.pid);
			else
				n += (size_t)snprintf(path + n, len - n, "%s", type);
			o++;
			n = n < len ? n : len - 1;
			continue;
		}
		path[n++] = *o;
	}
	path[n] = 0;
	if (!typed && strcmp(type, ep.cpu ? "cpu" : ep.wall ? "wall" : "heap")) {
		char *gz = strstr(path, ".pb.gz");
		char tail[16];

		snprintf(tail, sizeof(tail), "%s", gz ? gz : "");
		if (gz)
			*gz = 0;
		n = strlen(path);
		snprintf(path + n, len - n, ".%s%s", type, tail);
	}
}

/* The wall profile: its own comment on what it misses (agent/lib/wall.h). */
static int write_wall(const struct output_opts *cpu)
{
	struct output_opts o = *cpu;
	struct wall_stats ws;
	char c0[384], path[4200];
	const char *comments[] = {c0};
	int err;

	wall__stats(&ws);
	snprintf(c0, sizeof(c0),
		 "edgeprof wall: ticks=%llu late_ticks=%llu untracked_threads=%llu "
		 "blocked_in_call_ns=%llu blocked_at_last_sample_ns=%llu unattributed_ns=%llu "
		 "torn=%llu dropped_ring_full=%llu",
		 (unsigned long long)ws.ticks, (unsigned long long)ws.late_ticks,
		 (unsigned long long)ws.untracked, (unsigned long long)ws.call_ns,
		 (unsigned long long)ws.last_ns, (unsigned long long)ws.unattributed_ns,
		 (unsigned long long)ws.torn, (unsigned long long)ws.dropped);
	o.type = "wall";
	o.comments = comments;
	o.n_comments = 1;
	output_path("wall", path, sizeof(path));
	err = output__write_file(ep.wall_agg, &o, path);
	if (err)
		fprintf(stderr, "edgeprof: cannot write %s: %s\n", path, strerror(-err));
	return err;
}

static void write_standalone(void)
{
	struct ring_stats rs;
	struct agg_stats as;
	struct unwind_stats us;
	struct modules_stats ms;
	struct proctab *procs = proctab__new(1, 512);
	struct symbolizer *sym = IS_ENABLED(CONFIG_SYMBOLIZE) ? symbolizer__new(0) : NULL;
	struct sigctl_stats ss;
	struct rusage ru;
	struct snapshot_stats sn;
	char c0[256], c1[256], c2[384], c3[384], c4[256], c5[320], c6[320], c7[192];
	const char *comments[] = {c0, c1, c2, c3, c4, c5, c6, c7};
	struct pyframes_stats ps;
	struct luaframes_stats ls;
	struct selfread_stats srs;
	struct output_opts o = {
	    .service = ring__shared(ep.ring)->service,
	    .hz = ep.hz,
	    .time_ns = ep.start_real_ns,
	    .duration_ns = mono_ns() - ep.start_mono_ns,
	    .procs = procs,
	    .sym = sym,
	    .comments = comments,
	    .n_comments = 8,
	};
	char path[4200];
	int err;

	while (ring__drain(ep.ring, 4096, mono_ns(), drain_one, NULL) > 0)
		;
	ring__stats(ep.ring, &rs);
	aggregate__stats(ep.agg, &as);
	unwind__stats(&us);
	modules__stats(&ms);
	snprintf(c1, sizeof(c1),
		 "edgeprof sigprof: hz=%u samples=%llu dropped_ring_full=%llu "
		 "torn=%llu labels_dropped=%llu untimed_threads=%llu",
		 ep.hz, (unsigned long long)as.samples, (unsigned long long)rs.dropped_full,
		 (unsigned long long)rs.torn, (unsigned long long)rs.labels_dropped,
		 (unsigned long long)ep.untimed_threads);
	snapshot__stats(&sn);
	snprintf(c2, sizeof(c2),
		 "edgeprof aggregate: stacks=%zu dropped_table=%llu "
		 "dropped_frames=%llu dropped_labels=%llu truncated=%llu snapshots=%llu "
		 "snapshots_taken=%llu snapshots_no_ring_room=%llu snapshots_over_round=%llu "
		 "snapshots_short_stack=%llu",
		 as.entries, (unsigned long long)as.dropped_table,
		 (unsigned long long)as.dropped_frames, (unsigned long long)as.dropped_labels,
		 (unsigned long long)as.truncated, (unsigned long long)as.snapshots,
		 (unsigned long long)sn.taken, (unsigned long long)sn.no_room,
		 (unsigned long long)as.dropped_snapshots, (unsigned long long)sn.short_stack);
	snprintf(c3, sizeof(c3),
		 "edgeprof unwind: leaf_cfi=%llu rescued_cfi=%llu no_fde=%llu fp_steps=%llu "
		 "outermost=%llu signal_frames=%llu inferred=%llu handler_ns_p50=%llu modules=%u/%u "
		 "module_rebuilds=%llu module_stale=%llu",
		 (unsigned long long)us.cfi_leaf, (unsigned long long)us.cfi_rescue,
		 (unsigned long long)us.no_fde, (unsigned long long)us.fp_steps,
		 (unsigned long long)us.outermost, (unsigned long long)us.signal_frames,
		 (unsigned long long)us.inferred, (unsigned long long)handler_median_ns(), ms.n, ms.max,
		 (unsigned long long)ms.rebuilds, (unsigned long long)ms.stale);
	sigctl__stats(&ss);
	/* what the profile misses, first: CPU time the samples do not stand for, and why */
	getrusage(RUSAGE_SELF, &ru);
	uint64_t cpu = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
		       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;

	snprintf(c0, sizeof(c0),
		 "edgeprof misses: unsampled_cpu_ns=%llu of process_cpu_ns=%llu (getrusage minus "
		 "samples); threads_blocking_signal=%llu stepped_aside=%llu skipped=%llu",
		 (unsigned long long)(cpu > ep.sampled_ns ? cpu - ep.sampled_ns : 0),
		 (unsigned long long)cpu, (unsigned long long)ss.threads_blocking,
		 (unsigned long long)ss.stepped_aside,
		 (unsigned long long)(ep.skip_margin + ep.skip_altstack));
	snprintf(c4, sizeof(c4),
		 "edgeprof signals: signal=%d stepped_aside=%llu onstack_handlers_masked=%llu "
		 "forwarded=%llu skipped_stack_margin=%llu skipped_altstack=%llu",
		 ss.signo, (unsigned long long)ss.stepped_aside,
		 (unsigned long long)ss.onstack_masked, (unsigned long long)ss.forwarded,
		 (unsigned long long)ep.skip_margin, (unsigned long long)ep.skip_altstack);
	pyframes__stats(&ps);
	snprintf(c5, sizeof(c5),
		 "edgeprof python: version=3.%u spliced=%d unknown_version=%llu samples=%llu "
		 "frames=%llu no_state=%llu mismatch=%llu tss_searches=%llu read_errors=%llu "
		 "truncated=%llu debug_offsets=%s",
		 ps.minor, ps.on, (unsigned long long)ps.unknown_version,
		 (unsigned long long)ps.samples, (unsigned long long)ps.frames,
		 (unsigned long long)ps.no_state, (unsigned long long)ps.mismatch,
		 (unsigned long long)ps.tss_searches, (unsigned long long)ps.read_errors,
		 (unsigned long long)ps.truncated,
		 ps.debug_offsets > 0 ? "used" : ps.debug_offsets < 0 ? "refused" : "-");
	luaframes__stats(&ls);
	snprintf(c6, sizeof(c6),
		 "edgeprof lua: version=%s spliced=%d unknown_version=%llu samples=%llu frames=%llu "
		 "states=%llu states_full=%llu scans=%llu no_state=%llu mismatch=%llu "
		 "read_errors=%llu truncated=%llu traces=%llu",
		 ls.version[0] ? ls.version : "none", ls.on, (unsigned long long)ls.unknown_version,
		 (unsigned long long)ls.samples, (unsigned long long)ls.frames,
		 (unsigned long long)ls.states, (unsigned long long)ls.states_full,
		 (unsigned long long)ls.scans, (unsigned long long)ls.no_state,
		 (unsigned long long)ls.mismatch, (unsigned long long)ls.read_errors,
		 (unsigned long long)ls.truncated, (unsigned long long)ls.traces);
	selfread__stats(&srs);
	snprintf(c7, sizeof(c7),
		 "edgeprof selfread: direct_on=%d emulated=%d direct=%llu syscalls=%llu "
		 "not_alone=%llu in_brk=%llu",
		 srs.direct_on, srs.emulated, (unsigned long long)srs.direct,
		 (unsigned long long)srs.syscalls,
		 (unsigned long long)srs.not_alone, (unsigned long long)srs.in_brk);
	output_path("cpu", path, sizeof(path));
	err = procs ? proctab__touch(procs, (uint32_t)ep.pid) : -ENOMEM;
	if (!err && ep.cpu)
		err = output__write_file(ep.agg, &o, path);
	if (err)
		fprintf(stderr, "edgeprof: cannot write %s: %s\n", path, strerror(-err));
	if (!err && ep.wall)
		err = write_wall(&o);
	if (!err && ep.heap) {
		output_path("heap", path, sizeof(path));
		err = heap__write_file(&o, path);
		if (err)
			fprintf(stderr, "edgeprof: cannot write %s: %s\n", path, strerror(-err));
	}
	symbolizer__free(sym);
	proctab__free(procs);
}

/* Leaves our executable mappings in the ring: the agent symbolizes us even after we exit. */
static void publish_maps(void)
{
	static char lines[RING_MAPS_BYTES];
	void *text;
	size_t len;

	if (ep.standalone || port_file_read_all("/proc/self/maps", 1 << 20, &text, &len))
		return;
	len = procmaps__exec_lines(text, lines, sizeof(lines));
	ring__set_maps(ep.ring, lines, len);
	free(text);
}

/* ---- start / stop ------------------------------------------------------------------------- */

static int open_ring(void)
{
	const char *reg = getenv("EDGEPROF_REGISTRY");
	const char *svc = getenv("EDGEPROF_SERVICE");
	size_t kb = env__ulong("EDGEPROF_RING_KB", CONFIG_RING_KB, 16, 65536);
	int err;

	if (!svc || !*svc)
		svc = program_invocation_short_name;
	if (ep.standalone)
		return ring__create(NULL, kb * 1024, svc, ep.hz, &ep.ring);
	if (!reg || !*reg)
		reg = "/dev/shm/edgeprof";
	mkdir(reg, 01777);
	/* rings of exited processes no agent came for: bounded (CONFIG_REGISTRY_MAX_DEAD_RINGS) */
	ring__registry_trim(reg, CONFIG_REGISTRY_MAX_DEAD_RINGS);
	snprintf(ep.ring_path, sizeof(ep.ring_path), "%s/%d.ring", reg, ep.pid);
	err = ring__create(ep.ring_path, kb * 1024, svc, ep.hz, &ep.ring);
	if (err)
		fprintf(stderr, "edgeprof: cannot create the ring %s: %s; not sampling\n",
			ep.ring_path, strerror(-err));
	return err;
}

/* EDGEPROF_PROFILES=cpu,heap,wall: what to record (default cpu). */
static void parse_profiles(void)
{
	const char *v = getenv("EDGEPROF_PROFILES");
	char buf[64], *save, *t;

	ep.cpu = !v || !*v;
	ep.heap = ep.wall = false;
	if (!v || !*v)
		return;
	snprintf(buf, sizeof(buf), "%s", v);
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "cpu"))
			ep.cpu = true;
		else if (!strcmp(t, "heap") && IS_ENABLED(CONFIG_PROFILE_HEAP))
			ep.heap = true;
		else if (!strcmp(t, "wall") && IS_ENABLED(CONFIG_PROFILE_WALL))
			ep.wall = true;
		else
			fprintf(stderr, "edgeprof: EDGEPROF_PROFILES: '%s' is not a profile this "
					"build records (cpu%s%s); ignored\n",
				t, IS_ENABLED(CONFIG_PROFILE_HEAP) ? ", heap" : "",
				IS_ENABLED(CONFIG_PROFILE_WALL) ? ", wall" : "");
	}
}

static void start_heap(void)
{
	struct heap_opts ho = {
	    .rate = env__ulong("EDGEPROF_HEAP_RATE", HEAP_DEFAULT_RATE, 1, 1ul << 30),
	    .unwind = ep.unwind,
	    .max_depth = ep.max_depth,
	};
	char path[4200];
	int err;

	if (!ep.standalone) { /* beside the ring, where the agent looks: <registry>/<pid>.heap */
		snprintf(path, sizeof(path), "%.*s.heap", (int)(strlen(ep.ring_path) - 5),
			 ep.ring_path);
		ho.shared_path = path;
	}
	err = heap__start(&ho);
	if (err) {
		fprintf(stderr, "edgeprof: heap profiler not started: %s\n", strerror(-err));
		ep.heap = false;
	}
}

/* Wall: the slots and the ticker, which starts once every thread is tracked. */
static void start_wall(void)
{
	struct wall_opts wo = {.ring = ep.ring,
			       .period_ns = ep.interval_ns,
			       .unwind = ep.unwind,
			       .max_depth = ep.max_depth,
			       .pid = ep.pid};
	int err = wall__start(&wo);

	if (!err && ep.standalone && !ep.wall_agg && !(ep.wall_agg = aggregate__new(NULL)))
		err = -ENOMEM;
	if (err) {
		fprintf(stderr, "edgeprof: wall profiler not started: %s\n", strerror(-err));
		ep.wall = false;
		wall__stop();
	}
}

static void at_fork_child(void)
{
	wall__stop(); /* the ticker is not in the child */
	/* timers are not inherited: the child is not sampled and owns nothing of the parent's */
	ep.running = 0;
	ep.n_timers = 0;
	ep.program_threads = 0; /* the child's one thread counts when it starts sampling */
	pthread_mutex_init(&ep.lock, NULL);
}

EP_API int edgeprof_start(void)
{
	static bool once;
	const char *out = getenv("EDGEPROF_OUTPUT"), *uw = getenv("EDGEPROF_UNWIND");
	int err;

	if (ep.running)
		return -EALREADY;
	if (getenv("EDGEPROF_DISABLE") && strcmp(getenv("EDGEPROF_DISABLE"), "0"))
		return -ECANCELED;
	ep.pid = getpid();
	ep.hz = (unsigned int)env__ulong("EDGEPROF_HZ", CONFIG_SAMPLE_HZ, 1, 10000);
	ep.interval_ns = 1000000000ull / ep.hz;
	ep.max_depth = (unsigned int)env__ulong("EDGEPROF_MAX_DEPTH", CONFIG_MAX_STACK_DEPTH, 1,
						CONFIG_MAX_STACK_DEPTH);
	ep.unwind = uw && !strcmp(uw, "fp")	  ? UNWIND_FP
		    : uw && !strcmp(uw, "tables") ? UNWIND_TABLES
						  : UNWIND_CFI;
	ep.standalone = out && *out;
	if (ep.standalone)
		snprintf(ep.output, sizeof(ep.output), "%s", out);
	parse_profiles();
	if (!ep.ring) {
		err = open_ring();
		if (err)
			return err;
	}
	if (ep.standalone && !ep.agg) {
		/* standalone: one round for the whole run; its snapshots' bound can be raised */
		struct agg_opts ao = {.max_snapshots = env__ulong("EDGEPROF_SNAPSHOTS_MAX",
								  CONFIG_SNAPSHOTS_PER_ROUND, 1, 65536)};

		ep.agg = aggregate__new(&ao);
		if (!ep.agg)
			return -ENOMEM;
	}
	if (!once) {
		once = true;
		pthread_key_create(&ep.key, thread_end);
		drain_wake_init();
		pthread_atfork(NULL, NULL, at_fork_child);
	}
	unwind__init();
	selfread__init();
	snapshot__init();
	pyframes__init();
	luaframes__init();
	ep.start_mono_ns = mono_ns();
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ep.start_real_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	}
	ring__shared(ep.ring)->start_real_ns = ep.start_real_ns;
	ring__shared(ep.ring)->max_depth = ep.max_depth;
	ep.signo = sigctl__choose();
	err = ep.cpu || ep.wall ? sigctl__install(ep.signo, on_sigprof, step_aside) : 0;
	if (err)
		return err; /* the program handles that signal itself */
	if (ep.heap)
		start_heap();
	if (ep.wall)
		start_wall();
	publish_maps();
	ep.running = 1;
	/* this thread (thread_begin counts it down at its end) */
	__atomic_fetch_add(&ep.program_threads, 1, __ATOMIC_RELAXED);
	thread_begin();
	arm_existing_threads();
	/* after the threads were listed: the drain thread and the ticker are not the program's */
	if (ep.standalone) {
		ep.drain_stop = false;
		err = call_real_pthread_create(&ep.drainer, NULL, drain_main, NULL);
		if (err)
			return -err;
	}
	if (ep.wall && call_real_pthread_create(&ep.ticker, NULL, wall__main, NULL)) {
		wall__stop();
		ep.wall = false;
	}
	return 0;
}

EP_API void edgeprof_stop(void)
{
	if (!ep.running || getpid() != ep.pid)
		return;
	ep.running = 0;
	pthread_mutex_lock(&ep.lock);
	for (unsigned int i = 0; i < ep.n_timers; i++)
		timer_delete(ep.timers[i].timer);
	ep.n_timers = 0;
	pthread_mutex_unlock(&ep.lock);
	publish_misses();
	if (ep.wall) {
		wall__stop();
		pthread_join(ep.ticker, NULL);
	}
	if (ep.heap)
		heap__stop();
	if (ring__shared(ep.ring)->written)
		publish_maps(); /* libraries dlopen'ed since the start */
	if (ep.standalone) {
		drain_thread_stop();
		write_standalone();
		aggregate__reset(ep.agg);
		if (ep.wall_agg)
			aggregate__reset(ep.wall_agg);
	}
}

/* Preloaded (or linked with EDGEPROF_OUTPUT set), the library starts by itself. */
__attribute__((constructor)) static void edgeprof_init(void)
{
	const char *pre = getenv("LD_PRELOAD");

	if ((pre && strstr(pre, "libedgeprof")) || getenv("EDGEPROF_OUTPUT"))
		edgeprof_start();
}

__attribute__((destructor)) static void edgeprof_fini(void)
{
	bool ours = ep.running && getpid() == ep.pid;

	edgeprof_stop();
	/* the ring file goes with us unless it holds samples for an agent yet to come */
	if (ours && !ep.standalone && ring__release(ep.ring, ep.ring_path))
		ep.ring_path[0] = 0;
}
