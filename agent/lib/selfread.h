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
 */
#ifndef EDGEPROF_AGENT_SELFREAD_H
#define EDGEPROF_AGENT_SELFREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SELFREAD_WINDOW 4096

struct selfread_window {
	unsigned char buf[SELFREAD_WINDOW];
	uintptr_t base, lo, hi; /* buf[0] is at base; [lo, hi) read; hi 0: empty */
};

/* len bytes at addr into buf; false (and *errors counted) when any of them is unreadable. */
bool selfread__peek(uintptr_t addr, void *buf, size_t len, uint64_t *errors);
/* The same through w: the 4 KiB below addr + len, in one system call, the object's own page
 * first (an unreadable page below still gives the object). len <= SELFREAD_WINDOW. */
bool selfread__fetch(struct selfread_window *w, uintptr_t addr, void *out, size_t len,
		     uint64_t *errors);

static inline void selfread__reset(struct selfread_window *w)
{
	w->hi = 0;
}

#endif /* EDGEPROF_AGENT_SELFREAD_H */
