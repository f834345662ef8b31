// SPDX-License-Identifier: MIT
/* agent/lib/selfread.c — see selfread.h. */
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/lib/selfread.h"

static void count(uint64_t *errors)
{
	__atomic_fetch_add(errors, 1, __ATOMIC_RELAXED);
}

bool selfread__peek(uintptr_t addr, void *buf, size_t len, uint64_t *errors)
{
	struct iovec local = {buf, len}, remote = {(void *)addr, len};

	if (addr < 4096 || syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL,
				   0UL) != (long)len) {
		count(errors);
		return false;
	}
	return true;
}

bool selfread__fetch(struct selfread_window *w, uintptr_t addr, void *out, size_t len,
		     uint64_t *errors)
{
	uintptr_t hi = addr + len, lo = hi > SELFREAD_WINDOW ? hi - SELFREAD_WINDOW : 0;
	uintptr_t page = (hi - 1) & ~(uintptr_t)(SELFREAD_WINDOW - 1);
	struct iovec local[2], remote[2];
	unsigned long n = 1;
	long r;

	if (w->hi && addr >= w->lo && hi <= w->hi) {
		memcpy(out, w->buf + (addr - w->base), len);
		return true;
	}
	if (len > SELFREAD_WINDOW || hi < addr) {
		count(errors);
		return false;
	}
	if (page < lo)
		page = lo;
	local[0] = (struct iovec){w->buf + (page - lo), hi - page};
	remote[0] = (struct iovec){(void *)page, hi - page};
	if (page > lo) {
		local[1] = (struct iovec){w->buf, page - lo};
		remote[1] = (struct iovec){(void *)lo, page - lo};
		n = 2;
	}
	w->hi = 0;
	r = addr < 4096 ? -1 : syscall(SYS_process_vm_readv, getpid(), local, n, remote, n, 0UL);
	if (r < (long)(hi - page)) {
		count(errors);
		return false;
	}
	w->base = lo;
	w->lo = r == (long)(hi - lo) ? lo : page;
	w->hi = hi;
	if (addr < w->lo) { /* the object begins on the page below, which did not read */
		w->hi = 0;
		count(errors);
		return false;
	}
	memcpy(out, w->buf + (addr - w->base), len);
	return true;
}
