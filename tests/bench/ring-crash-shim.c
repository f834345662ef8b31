// SPDX-License-Identifier: MIT
/*
 * tests/bench/ring-crash-shim.c — fault injection for tests/bench/ring-crash.sh (LD_PRELOAD).
 *
 * Passes every pwrite/pwritev/fsync/fdatasync through until a process arms it with
 * rf_shim_arm() (store-append crash does so in the writer it forks, found with dlsym, so the
 * driver needs no link-time knowledge of it). Once armed, the k-th write is the crash:
 *
 *   RF_SHIM_KILL   the write is torn as SIGKILL tears it: the kernel copies page by page and
 *                  stops at a page boundary when a fatal signal is pending, so a random prefix
 *                  ending on a page boundary of the file (nothing, part, or all of it) lands in
 *                  the page cache; then the process gets SIGKILL. Nothing else changes: the
 *                  page cache survives a kill.
 *   RF_SHIM_POWER  a power cut: every write since the last successful fsync/fdatasync is an
 *                  undo entry (the bytes it replaced); at the cut each 512-byte sector those
 *                  writes touched independently either reached the disk (keeps its newest
 *                  bytes) or did not (gets back the bytes it had at the last sync), the torn
 *                  write included, then SIGKILL. That is what a disk without a volatile-cache
 *                  flush may leave: any subset of unsynced sectors, in any order.
 *
 * Why an LD_PRELOAD shim rather than a dm-flakey or loop device: it needs no root, no kernel
 * module and no block device, so the bench runs anywhere (CI containers included), and it cuts
 * at an exact write, which is where the races are.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { RF_SHIM_OFF, RF_SHIM_KILL, RF_SHIM_POWER };

#define SECTOR 512u
#define PAGE 4096u
#define UNDO_MAX (64u << 20) /* bytes of undo kept; past it the cut comes at once */

struct undo {
	int fd;
	off_t off;
	size_t len;
	unsigned char *old;
};

static int mode;
static unsigned long left;	/* writes until the crash */
static uint64_t rng;
static struct undo *undo;
static size_t n_undo, cap_undo, undo_bytes;

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);

static void resolve(void)
{
	if (real_pwrite)
		return;
	real_pread = dlsym(RTLD_NEXT, "pread");
	real_pwritev = dlsym(RTLD_NEXT, "pwritev");
	real_fdatasync = dlsym(RTLD_NEXT, "fdatasync");
	real_fsync = dlsym(RTLD_NEXT, "fsync");
	real_pwrite = dlsym(RTLD_NEXT, "pwrite");
}

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Arms the shim in this process: the k-th write from now (k >= 1) is the crash. */
void rf_shim_arm(int m, unsigned long k, uint64_t seed)
{
	resolve();
	mode = m;
	left = k ? k : 1;
	rng = seed | 1;
	n_undo = undo_bytes = 0;
}

/* A successful sync of fd: its writes are on the disk, the other files' are not. */
static void undo_clear(int fd)
{
	size_t k = 0;

	for (size_t i = 0; i < n_undo; i++) {
		if (undo[i].fd == fd) {
			undo_bytes -= undo[i].len;
			free(undo[i].old);
		} else {
			undo[k++] = undo[i];
		}
	}
	n_undo = k;
}

/* Remembers the bytes a write is about to replace (power mode). */
static void undo_push(int fd, off_t off, size_t len)
{
	unsigned char *old = malloc(len ? len : 1);
	ssize_t n;

	if (!old)
		abort();
	n = real_pread(fd, old, len, off);
	if (n < 0)
		n = 0;
	if ((size_t)n < len)
		memset(old + n, 0, len - n); /* past the end: the file had nothing there */
	if (n_undo == cap_undo) {
		cap_undo = cap_undo ? 2 * cap_undo : 64;
		undo = realloc(undo, cap_undo * sizeof(*undo));
		if (!undo)
			abort();
	}
	undo[n_undo++] = (struct undo){ fd, off, len, old };
	undo_bytes += len;
}

/* Whether sector s reached the disk before the cut: fixed per sector, random per trial. */
static int sector_lost(uint64_t s)
{
	uint64_t x = (s + 1) * 0x9e3779b97f4a7c15ull ^ rng;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return x & 1;
}

/* Power cut: lost sectors get back their bytes of the last sync, newest undo first. */
static void power_cut(void)
{
	for (size_t i = n_undo; i-- > 0;) {
		const struct undo *u = &undo[i];
		uint64_t first = u->off / SECTOR, last = (u->off + u->len - 1) / SECTOR;

		for (uint64_t s = first; u->len && s <= last; s++) {
			uint64_t a = s * SECTOR > (uint64_t)u->off ? s * SECTOR : (uint64_t)u->off;
			uint64_t b = (s + 1) * SECTOR < u->off + u->len ? (s + 1) * SECTOR
								      : u->off + u->len;

			if (sector_lost(s))
				real_pwrite(u->fd, u->old + (a - u->off), b - a, a);
		}
	}
}

/*
 * The crash, at a write of len bytes at off (buf flattened): a torn prefix lands (page
 * granular for a kill: where the kernel checks for a fatal signal; any length for a power
 * cut, whose sectors are then sorted out by power_cut), then the process dies.
 */
static void crash(int fd, const unsigned char *buf, size_t len, off_t off)
{
	size_t cut = len ? next_rand() % (len + 1) : 0;

	if (mode == RF_SHIM_KILL) {
		uint64_t end = ((uint64_t)off + cut) / PAGE * PAGE;

		/* a write that ends inside a page ends it whole or stops before it */
		cut = (next_rand() & 1) ? len : end > (uint64_t)off ? end - off : 0;
	} else {
		undo_push(fd, off, len);
	}
	if (cut)
		real_pwrite(fd, buf, cut, off);
	if (mode == RF_SHIM_POWER)
		power_cut();
	raise(SIGKILL);
	_exit(137);
}

/* Called before every write once armed; the crash does not return. */
static void before_write(int fd, const unsigned char *buf, size_t len, off_t off)
{
	if (mode == RF_SHIM_OFF)
		return;
	if (--left == 0 || undo_bytes > UNDO_MAX)
		crash(fd, buf, len, off);
	if (mode == RF_SHIM_POWER)
		undo_push(fd, off, len);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	resolve();
	before_write(fd, buf, len, off);
	return real_pwrite(fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
	return pwrite(fd, buf, len, off);
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
	size_t len = 0;

	resolve();
	if (mode == RF_SHIM_OFF)
		return real_pwritev(fd, iov, n, off);
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	{
		unsigned char *flat = malloc(len ? len : 1), *p = flat;
		ssize_t r;

		if (!flat)
			abort();
		for (int i = 0; i < n; i++) {
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
		before_write(fd, flat, len, off);
		r = real_pwrite(fd, flat, len, off);
		free(flat);
		return r;
	}
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
	return pwritev(fd, iov, n, off);
}

int fdatasync(int fd)
{
	int r;

	resolve();
	r = real_fdatasync(fd);
	if (!r && mode == RF_SHIM_POWER)
		undo_clear(fd);
	return r;
}

int fsync(int fd)
{
	int r;

	resolve();
	r = real_fsync(fd);
	if (!r && mode == RF_SHIM_POWER)
		undo_clear(fd);
	return r;
}
