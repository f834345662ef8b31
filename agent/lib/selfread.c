// SPDX-License-Identifier: MIT
/* agent/lib/selfread.c — see selfread.h. */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/lib/selfread.h"

#define EP_TLS __thread __attribute__((tls_model("initial-exec")))

static struct {
	bool on;
	uintptr_t heap_lo;	  /* the kernel's start_brk */
	void *const *curbrk;	  /* glibc's __curbrk: the break as glibc last set it */
	uintptr_t brk_lo, brk_hi; /* glibc's brk(), which sets it after the system call */
	struct selfread_stats st;
} sr;

/* This sample's break: [heap_lo, direct_hi) is read with plain loads; 0: nothing is. So are
 * the live stack (from the reading frame up to live_hi) and the ranges walkers vouched for. */
static EP_TLS uintptr_t direct_hi, live_hi;
static EP_TLS struct {
	uintptr_t lo, hi;
} vouched[SELFREAD_VOUCHED];
static EP_TLS unsigned int n_vouched;
/* Counted per thread and added to sr.st once per sample: one atomic add, not one per read. */
static EP_TLS uint64_t n_direct, n_syscalls;

static void count(uint64_t *errors)
{
	__atomic_fetch_add(errors, 1, __ATOMIC_RELAXED);
}

static __attribute__((noinline)) bool direct(uintptr_t addr, size_t len)
{
	uintptr_t end = addr + len, sp = (uintptr_t)__builtin_frame_address(0);

	if (end < addr)
		return false;
	/* the live stack: from this frame (the lowest of the handler's now) up */
	if ((addr >= sr.heap_lo && end <= direct_hi) || (addr >= sp && end <= live_hi))
		return true;
	for (unsigned int i = 0; i < n_vouched; i++)
		if (addr >= vouched[i].lo && end <= vouched[i].hi)
			return true;
	return false;
}

bool selfread__vouch(uintptr_t lo, uintptr_t hi)
{
	if (n_vouched == SELFREAD_VOUCHED || lo < 4096 || hi <= lo)
		return false;
	vouched[n_vouched].lo = lo;
	vouched[n_vouched++].hi = hi;
	return true;
}

static long self_readv(const struct iovec *local, const struct iovec *remote, unsigned long n)
{
	n_syscalls++;
	return syscall(SYS_process_vm_readv, getpid(), local, n, remote, n, 0UL);
}

bool selfread__peek(uintptr_t addr, void *buf, size_t len, uint64_t *errors)
{
	struct iovec local = {buf, len}, remote = {(void *)addr, len};

	if (addr >= 4096 && direct(addr, len)) {
		memcpy(buf, (const void *)addr, len);
		n_direct++;
		return true;
	}
	if (addr < 4096 || self_readv(&local, &remote, 1UL) != (long)len) {
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
	if (addr >= 4096 && direct(addr, len)) { /* the window is for system calls only */
		memcpy(out, (const void *)addr, len);
		n_direct++;
		return true;
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
	r = addr < 4096 ? -1 : self_readv(local, remote, n);
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

long selfread__readv(const struct iovec *local, const struct iovec *remote, unsigned long n)
{
	long done = 0, r;
	unsigned long i;

	for (i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)remote[i].iov_base;

		if (a < 4096 || !direct(a, remote[i].iov_len))
			break;
		memcpy(local[i].iov_base, remote[i].iov_base, remote[i].iov_len);
		n_direct++;
		done += (long)remote[i].iov_len;
	}
	if (i == n)
		return done;
	r = self_readv(local + i, remote + i, n - i);
	if (r < 0)
		return done ? done : -1;
	return done + r;
}

/* ---- start and per sample ------------------------------------------------------------------ */

/* The kernel's start_brk: /proc/self/stat's 47th field (Linux 3.5+). 0: unknown. */
static uintptr_t start_brk(void)
{
	char buf[1024], *p;
	ssize_t len;
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), field = 2;

	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	while (p && field < 47) {
		p = strchr(p + 1, ' ');
		field++;
	}
	return p ? (uintptr_t)strtoull(p + 1, NULL, 10) : 0;
}

/* The start of the mapping that holds addr, from /proc/self/maps (qemu-user leaves start_brk
 * 0 in its /proc/self/stat, but lists the guest's mappings). 0: none. */
static uintptr_t mapping_start(uintptr_t addr)
{
	char buf[4096];
	size_t have = 0;
	ssize_t len;
	uintptr_t found = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	while (!found && (len = read(fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		char *line = buf, *nl;

		have += (size_t)len;
		buf[have] = '\0';
		while (!found && (nl = strchr(line, '\n'))) {
			char *end;
			uintptr_t lo = (uintptr_t)strtoull(line, &end, 16), hi = 0;

			if (*end == '-')
				hi = (uintptr_t)strtoull(end + 1, NULL, 16);
			if (addr >= lo && addr < hi)
				found = lo;
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1) /* a line longer than the buffer: not ours to parse */
			break;
	}
	close(fd);
	return found;
}

/* Another arena policy may put the library's own threads in the main arena, where their frees
 * would move the break under a sample. */
static bool arenas_shared(void)
{
	const char *t = getenv("GLIBC_TUNABLES");

	return getenv("MALLOC_ARENA_MAX") || (t && strstr(t, "arena_max"));
}

bool selfread__emulated(void)
{
	return sr.st.emulated;
}

void selfread__init(void)
{
	const ElfW(Sym) *sym = NULL;
	char a = 1, b = 0;
	struct iovec l = {&b, 1}, r = {&a, 1};
	Dl_info info;
	void *libc, *fn;

	sr.on = false;
	sr.st.emulated = syscall(SYS_process_vm_readv, getpid(), &l, 1UL, &r, 1UL, 0UL) < 0 &&
			 errno == ENOSYS;
	sr.curbrk = dlsym(RTLD_DEFAULT, "__curbrk");
	if (!sr.curbrk || arenas_shared() || !dladdr(sr.curbrk, &info) || !info.dli_fname)
		return;
	/* brk() of the libc that holds __curbrk, not one the program interposed */
	libc = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
	fn = libc ? dlsym(libc, "brk") : NULL;
	if (libc)
		dlclose(libc);
	if (!fn || !dladdr1(fn, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || !sym->st_size)
		return;
	sr.brk_lo = (uintptr_t)fn;
	sr.brk_hi = sr.brk_lo + sym->st_size;
	sr.heap_lo = start_brk();
	if (!sr.heap_lo && *sr.curbrk) /* the break's mapping: its first page is start_brk's */
		sr.heap_lo = mapping_start((uintptr_t)*sr.curbrk - 1);
	sr.on = sr.heap_lo >= 4096;
	sr.st.direct_on = sr.on;
}

void selfread__begin(const uint64_t *frames, unsigned int n, bool alone, uintptr_t stack_hi)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0), kernel_brk;

	if (n_direct || n_syscalls) { /* the last sample's */
		__atomic_fetch_add(&sr.st.direct, n_direct, __ATOMIC_RELAXED);
		__atomic_fetch_add(&sr.st.syscalls, n_syscalls, __ATOMIC_RELAXED);
		n_direct = n_syscalls = 0;
	}
	n_vouched = 0;
	/* the stack above a frame of ours is mapped: callers' frames, up to the thread's end */
	live_hi = stack_hi > sp ? stack_hi : 0;
	direct_hi = 0;
	if (!sr.on)
		return;
	if (!alone) {
		__atomic_fetch_add(&sr.st.not_alone, 1, __ATOMIC_RELAXED);
		return;
	}
	/* every context of the walk: a handler of the program's may have interrupted brk() */
	for (unsigned int i = 0; i < n; i++)
		if (frames[i] >= sr.brk_lo && frames[i] <= sr.brk_hi) {
			__atomic_fetch_add(&sr.st.in_brk, 1, __ATOMIC_RELAXED);
			return;
		}
	direct_hi = (uintptr_t)__atomic_load_n(sr.curbrk, __ATOMIC_RELAXED);
	/*
	 * The kernel's break, as it is now (brk(0) moves nothing; ~0.3 us here): below __curbrk when
	 * the program lowered it by the raw system call, which glibc never sees.
	 */
	kernel_brk = (uintptr_t)syscall(SYS_brk, 0);
	if (kernel_brk < direct_hi)
		direct_hi = kernel_brk;
}

void selfread__stats(struct selfread_stats *st)
{
	*st = sr.st;
	st->direct += n_direct;
	st->syscalls += n_syscalls;
}
