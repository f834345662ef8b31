/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/selfread.h — reads of this process's own memory that fail instead of faulting, for
 * the interpreter walkers in the SIGPROF handler (agent/lib/pyframes.h, agent/lib/luaframes.h).
 *
 * An interpreter's frame chain is read while the interrupted thread may be half-way through
 * linking a frame, and a coroutine or code object may have been freed by another thread: a
 * plain load of a torn pointer would fault inside the handler. process_vm_readv() on the process
 * itself is a system call (async-signal-safe) and returns EFAULT instead. A window keeps the
 * last read of up to 4 KiB, so neighbouring objects (frames pushed one after another, a
 * thread's CallInfo list, the Lua stack) cost one system call for many; reset it at each
 * sample, the memory moves between samples.
 *
 * The direct path. A handler's first process_vm_readv costs ~12-20 us here (its pinning of
 * pages walks cold kernel structures; tests/bench/selfread-bench.sh), two to four times the
 * whole native walk. Memory that is proven mapped and readable for the length of the handler is
 * read with a plain load instead. Proven: the brk heap, [start_brk, __curbrk) (glibc's main
 * arena: where a single-threaded interpreter's small objects live), when
 *   - the program has one thread (selfread__begin's alone: counted by sigprof.c's interposed
 *     pthread_create, so no other program thread can shrink the heap while the handler runs),
 *   - the interrupted pc is not in glibc's brk() (between the system call and its store of
 *     __curbrk, the kernel's break is already lower than __curbrk says),
 *   - the library's own threads allocate in their own arenas (glibc's default: a new arena per
 *     thread up to 8 x CPUs); MALLOC_ARENA_MAX or a GLIBC_TUNABLES arena_max turns the path off,
 *   - the address is below the kernel's break too, as brk(0) gives it at each sample (~0.3 us):
 *     a program that lowered its break by the raw system call left __curbrk above it.
 * A program that mprotects its brk heap would break the proof: glibc's malloc does not. Everything else (mmap'd chunks, thread arenas,
 * Python's data stack unless its walker vouches for it) goes through process_vm_readv. The
 * thread's own live stack, from the handler's frame up to its known end, is read directly too.
 */
#ifndef EDGEPROF_AGENT_SELFREAD_H
#define EDGEPROF_AGENT_SELFREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SELFREAD_WINDOW 4096
#define SELFREAD_VOUCHED 8

struct selfread_window {
	unsigned char buf[SELFREAD_WINDOW];
	uintptr_t base, lo, hi; /* buf[0] is at base; [lo, hi) read; hi 0: empty */
};

struct selfread_stats {
	bool direct_on;	    /* the brk heap's bounds and brk() were found at start */
	bool emulated;	    /* no process_vm_readv (qemu-user): only direct reads succeed */
	uint64_t direct;    /* reads served by a plain load (proven inside the brk heap) */
	uint64_t syscalls;  /* process_vm_readv calls */
	uint64_t not_alone; /* samples where other program threads ran: no direct reads */
	uint64_t in_brk;    /* samples interrupted inside brk(): no direct reads */
};

/* len bytes at addr into buf; false (and *errors counted) when any of them is unreadable. */
bool selfread__peek(uintptr_t addr, void *buf, size_t len, uint64_t *errors);
/* The same through w: the 4 KiB below addr + len, in one system call, the object's own page
 * first (an unreadable page below still gives the object). len <= SELFREAD_WINDOW. */
bool selfread__fetch(struct selfread_window *w, uintptr_t addr, void *out, size_t len,
		     uint64_t *errors);
/* n ranges at once, as process_vm_readv(2) on ourselves: the bytes read, whole ranges in order
 * up to the first that failed (a partial one may follow); -1 when the first failed. */
long selfread__readv(const struct iovec *local, const struct iovec *remote, unsigned long n);

static inline void selfread__reset(struct selfread_window *w)
{
	w->hi = 0;
}

#if defined(CONFIG_PYFRAMES) || defined(CONFIG_LUAFRAMES)
/* Finds the brk heap's start, __curbrk and brk()'s code (not async-signal-safe: at start). */
void selfread__init(void);
/* Handler, before any read of a sample: frames[0..n) its native walk (the interrupted pc
 * first), alone: the program has one thread; stack_hi: this thread's stack end (0: unknown),
 * everything from the handler's frame up to it is the live stack, read directly. */
void selfread__begin(const uint64_t *frames, unsigned int n, bool alone, uintptr_t stack_hi);
/* Handler: a walker proves [lo, hi) mapped until the sample ends (a live object of the
 * interrupted thread's that only this thread unmaps, linked before it is mapped... see the
 * caller): it is read directly. At most SELFREAD_VOUCHED per sample; false when full or odd. */
bool selfread__vouch(uintptr_t lo, uintptr_t hi);
void selfread__stats(struct selfread_stats *st);
/* process_vm_readv is missing (ENOSYS): an emulator's kernel (qemu-user), whose own host
 * threads are listed in /proc/self/task beside the program's. */
bool selfread__emulated(void);
#else
static inline void selfread__init(void)
{
}
static inline void selfread__begin(const uint64_t *frames, unsigned int n, bool alone,
				   uintptr_t stack_hi)
{
}
static inline bool selfread__vouch(uintptr_t lo, uintptr_t hi)
{
	return false;
}
static inline void selfread__stats(struct selfread_stats *st)
{
	*st = (struct selfread_stats){0};
}
static inline bool selfread__emulated(void)
{
	return false;
}
#endif

#endif /* EDGEPROF_AGENT_SELFREAD_H */
