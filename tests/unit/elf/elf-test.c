// SPDX-License-Identifier: MIT
/* Unit tests of elf/elf.c and agent/core/procmaps.c against this test binary itself. */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "elf/elf.h"
#include "agent/core/procmaps.h"
#include "agent/core/ring.h"

__attribute__((noinline)) int elf_test_marker_function(int x)
{
	return x * 3 + 1;
}

/* The build-id as the loader mapped it: what the file must say too. */
static int note_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	char *hex = data;

	if (info->dlpi_name && info->dlpi_name[0])
		return 0; /* the main program comes first, with an empty name */
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const unsigned char *p = (const void *)(info->dlpi_addr + ph->p_vaddr);
		size_t off = 0;

		if (ph->p_type != PT_NOTE)
			continue;
		while (off + 12 <= ph->p_filesz) {
			const ElfW(Nhdr) *n = (const void *)(p + off);
			size_t desc = off + 12 + ((n->n_namesz + 3) & ~3u);

			if (n->n_type == NT_GNU_BUILD_ID) {
				for (unsigned int k = 0; k < n->n_descsz && k < 20; k++)
					sprintf(hex + 2 * k, "%02x", p[desc + k]);
				return 1;
			}
			off = desc + ((n->n_descsz + 3) & ~3u);
		}
	}
	return 1;
}

static void build_id_matches_the_loaded_note(void **state)
{
	char want[64] = "", got[ELF_BUILD_ID_HEX];

	dl_iterate_phdr(note_cb, want);
	assert_true(strlen(want) == 40);
	assert_int_equal(elf__build_id("/proc/self/exe", got, sizeof(got)), 0);
	assert_string_equal(got, want);
}

static void function_address_resolves_to_its_name(void **state)
{
	struct procmaps *pm;
	struct elf_syms *syms;
	uintptr_t addr = (uintptr_t)elf_test_marker_function + 2;
	const struct procmap *m;
	uint64_t start;

	assert_int_equal(procmaps__read(0, 256, &pm), 0);
	m = procmaps__find(pm, addr);
	assert_non_null(m);
	assert_true(m->build_id[0] != 0);
	assert_int_equal(elf_syms__load(m->path, 1 << 24, &syms), 0);
	assert_true(elf_syms__count(syms) > 10);
	assert_string_equal(elf_syms__lookup(syms, addr - m->start + m->offset, &start),
			    "elf_test_marker_function");
	assert_int_equal(elf_syms__lookup(syms, addr - m->start + m->offset, NULL) != NULL, 1);
	/* a budget too small is refused, not overrun */
	struct elf_syms *tiny;

	assert_int_equal(elf_syms__load(m->path, 64, &tiny), -EFBIG);
	assert_null(tiny);
	/*
	 * libc's table, too big to hold with its names: an 8-byte index, names read from the
	 * file, the same functions at every address
	 */
	const struct procmap *lc = NULL;
	struct elf_syms *whole, *idx;

	for (unsigned int i = 0; i < pm->n && !lc; i++)
		if (strstr(pm->maps[i].path, "/libc.so"))
			lc = &pm->maps[i];
	assert_non_null(lc);
	assert_int_equal(elf_syms__load(lc->path, 1 << 24, &whole), 0);
	assert_true(elf_syms__names_stable(whole));
	assert_int_equal(elf_syms__load(lc->path, elf_syms__bytes(whole) - 1, &idx), 0);
	assert_false(elf_syms__names_stable(idx));
	assert_int_equal(elf_syms__count(idx), elf_syms__count(whole));
	assert_true(elf_syms__bytes(idx) < elf_syms__count(idx) * 8 + ELF_SYM_NAME_MAX + 512);
	size_t named = 0;

	for (uint64_t off = lc->offset; off < lc->offset + (lc->limit - lc->start); off += 61) {
		uint64_t sa = 0, sb = 0;
		const char *a = elf_syms__lookup(whole, off, &sa), *b = elf_syms__lookup(idx, off, &sb);

		assert_true(!a == !b);
		assert_int_equal(sa, sb); /* the same symbol, or an alias at its address */
		named += a != NULL;
	}
	assert_true(named > 1000);
	elf_syms__free(whole);
	elf_syms__free(idx);
	elf_syms__free(syms);
	procmaps__free(pm);
	assert_int_equal(elf_test_marker_function(1), 4);
}

static void non_elf_is_rejected(void **state)
{
	char path[] = "/tmp/edgeprof-elf-test.XXXXXX", hex[ELF_BUILD_ID_HEX];
	int fd = mkstemp(path);
	struct elf_syms *s;

	assert_true(fd >= 0);
	assert_int_equal(write(fd,
			       "\177ELFgarbage-garbage-garbage-garbage-garbage-garbage-garbage"
			       "-garbage-garbage",
			       75),
			 75);
	close(fd);
	assert_int_equal(elf__build_id(path, hex, sizeof(hex)), -EINVAL);
	assert_int_equal(elf_syms__load(path, 1 << 20, &s), -EINVAL);
	/* a name beside the file just made and removed: no tool's /nonexistent home can exist */
	unlink(path);
	assert_int_equal(elf__build_id(path, hex, sizeof(hex)), -ENOENT);
}

static void maps_parsing_keeps_executable_mappings(void **state)
{
	char path[] = "/tmp/edgeprof-maps-test.XXXXXX";
	int fd = mkstemp(path);
	struct procmaps *pm;
	FILE *f = fdopen(fd, "w");

	fprintf(f, "55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /usr/bin/x\n"
		   "55d0c0001000-55d0c0005000 r-xp 00001000 08:01 123 /usr/bin/x\n"
		   "7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n"
		   "7ffd1000000-7ffd1002000 r-xp 00000000 00:00 0 [vdso]\n"
		   "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n");
	fclose(f);
	assert_int_equal(procmaps__parse_file(path, 1, 16, &pm), 0);
	assert_int_equal(pm->n, 2);
	assert_string_equal(pm->maps[0].path, "/usr/bin/x");
	assert_int_equal(pm->maps[0].offset, 0x1000);
	assert_string_equal(pm->maps[1].path, "[vdso]");
	assert_ptr_equal(procmaps__find(pm, 0x55d0c0002000), &pm->maps[0]);
	assert_null(procmaps__find(pm, 0x55d0c0000800));
	procmaps__free(pm);
	/* bounded: at most max_maps kept */
	assert_int_equal(procmaps__parse_file(path, 1, 1, &pm), 0);
	assert_int_equal(pm->n, 1);
	procmaps__free(pm);
	unlink(path);
}

/* Reading our own maps twice opens no ELF file the second time: build-ids come from the cache. */
static void build_ids_are_cached_per_file(void **state)
{
	struct procmaps_stats a, b;
	struct procmaps *pm1, *pm2;
	unsigned files = 0;

	assert_int_equal(procmaps__read(0, 256, &pm1), 0);
	procmaps__stats(&a);
	assert_int_equal(procmaps__read(0, 256, &pm2), 0);
	procmaps__stats(&b);
	for (unsigned i = 0; i < pm2->n; i++) {
		files += pm2->maps[i].path[0] == '/';
		assert_string_equal(pm2->maps[i].build_id, pm1->maps[i].build_id);
	}
	assert_true(files > 0);
	assert_true(pm2->start_time > 0);
	assert_true(b.build_id_reads == a.build_id_reads);
	assert_true(b.build_id_hits >= a.build_id_hits + files);
	procmaps__free(pm1);
	procmaps__free(pm2);
}

static struct procmaps *maps_of(const char *path)
{
	char line[300];
	struct procmaps *pm;

	snprintf(line, sizeof(line), "1000-2000 r-xp 00000000 08:01 1 %s\n", path);
	assert_int_equal(procmaps__parse_text(line, (uint32_t)getpid(), 4, &pm), 0);
	assert_int_equal(pm->n, 1);
	return pm;
}

/* A copy is read; a changed mtime is read again at the first use in the next round. */
static void build_id_cache_follows_the_file(void **state)
{
	char path[] = "/tmp/edgeprof-bid-test.XXXXXX", cmd[160], id[ELF_BUILD_ID_HEX];
	struct procmaps_stats a, b, c, d;
	struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};
	struct procmaps *pm;
	int fd = mkstemp(path);

	close(fd);
	snprintf(cmd, sizeof(cmd), "cp /proc/%d/exe %s", getpid(), path);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(elf__build_id(path, id, sizeof(id)), 0);
	procmaps__stats(&a);
	pm = maps_of(path);
	assert_string_equal(pm->maps[0].build_id, id);
	procmaps__free(pm);
	procmaps__stats(&b);
	assert_true(b.build_id_reads == a.build_id_reads + 1);
	procmaps__free(maps_of(path));
	procmaps__stats(&c);
	assert_true(c.build_id_reads == b.build_id_reads);
	assert_true(c.file_stats == b.file_stats); /* checked once a round, not per process */
	assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
	procmaps__free(maps_of(path)); /* this round: not stat'ed again, not noticed */
	procmaps__stats(&c);
	assert_true(c.build_id_reads == b.build_id_reads);
	procmaps__revalidate(); /* a new round */
	pm = maps_of(path);
	assert_string_equal(pm->maps[0].build_id, id);
	procmaps__free(pm);
	procmaps__stats(&d);
	assert_true(d.build_id_reads == c.build_id_reads + 1);
	unlink(path);
}

/* A process that exited is not re-read again and again within a round (each a failed open). */
static void exited_pid_is_not_retried(void **state)
{
	struct proctab *t = proctab__new(4, 64);
	struct proctab_stats st;
	pid_t child = fork();

	if (child == 0)
		_exit(0);
	assert_true(child > 0);
	waitpid(child, NULL, 0);
	assert_int_equal(proctab__touch(t, (uint32_t)child), -ENOENT);
	assert_int_equal(proctab__touch(t, (uint32_t)child), -ESRCH); /* remembered */
	assert_null(proctab__resolve(t, (uint32_t)child, 0x1000));
	proctab__new_round(t);
	assert_int_equal(proctab__touch(t, (uint32_t)child), -ENOENT); /* a new round looks again */
	/* ourselves: read once, then served from the table */
	assert_int_equal(proctab__touch(t, (uint32_t)getpid()), 0);
	assert_int_equal(proctab__touch(t, (uint32_t)getpid()), 0);
	assert_non_null(proctab__resolve(t, (uint32_t)getpid(),
					 (uint64_t)(uintptr_t)elf_test_marker_function));
	proctab__stats(t, &st);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.procs, 1);
	proctab__free(t);
}

/* A fresh executable mapping of this test's own binary (a library mapped after a read). */
static void *map_code(void)
{
	int fd = open("/proc/self/exe", O_RDONLY);
	void *p;

	assert_true(fd >= 0);
	p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	close(fd);
	assert_true(p != MAP_FAILED);
	return p;
}

/*
 * Maps read at a process's first sample, while its loader still maps its libraries, miss
 * their addresses: they are read again once in the round, when at least 100 ms old (a
 * --once round of the whole run named no library frame of such a process: 0 % for xz in
 * tests/bench/stacks-bench.sh bpf), and not again in that round.
 */
static void maps_read_early_are_read_again_once(void **state)
{
	struct proctab *t = proctab__new(4, 64);
	struct proctab_stats st;
	uint32_t me = (uint32_t)getpid();
	void *a, *b;

	assert_int_equal(proctab__touch(t, me), 0);
	a = map_code();
	usleep(150 * 1000);
	assert_non_null(proctab__resolve(t, me, (uint64_t)(uintptr_t)a + 16));
	b = map_code();
	usleep(150 * 1000);
	assert_null(proctab__resolve(t, me, (uint64_t)(uintptr_t)b + 16)); /* once a round */
	proctab__new_round(t);
	assert_non_null(proctab__resolve(t, me, (uint64_t)(uintptr_t)b + 16));
	proctab__stats(t, &st);
	assert_int_equal(st.reads, 3);
	munmap(a, 4096);
	munmap(b, 4096);
	proctab__free(t);
}

/*
 * Maps read at a first sample, while the loader maps the libraries, are read once more at its
 * 8th sample, while the process lives: xz's libc and liblzma frames were unnamed at
 * the round's end, xz gone (tests/bench/stacks-bench.sh bpf, 0 % in 2 reps of 5).
 */
static void maps_are_read_once_more_a_little_later(void **state)
{
	struct proctab *t = proctab__new(4, 64);
	struct proctab_stats st;
	uint32_t me = (uint32_t)getpid();
	void *c;

	assert_int_equal(proctab__touch(t, me), 0);
	c = map_code();
	for (int i = 0; i < 7; i++)
		assert_int_equal(proctab__touch(t, me), 0);
	assert_null(procmaps__find(proctab__maps(t, me), (uint64_t)(uintptr_t)c + 16));
	assert_int_equal(proctab__touch(t, me), 0); /* the 8th after the read */
	assert_non_null(procmaps__find(proctab__maps(t, me), (uint64_t)(uintptr_t)c + 16));
	for (int i = 0; i < 20; i++)
		assert_int_equal(proctab__touch(t, me), 0); /* once */
	proctab__stats(t, &st);
	assert_int_equal(st.reads, 2);
	munmap(c, 4096);
	proctab__free(t);
}

/*
 * Without mmap records nothing tells the table of an exec: maps read while the pid was still
 * its parent's copy (perf's child before it exec'd xz) named xz's frames in perf's libraries.
 * A new comm of the main thread forgets them.
 */
/*
 * Has pid's exec of path finished loading it? The exe link names the new program as soon as
 * exec switches the memory, the maps list it once its first segment is mapped, and
 * /proc/PID/stat's startcode (what proctab__exe() goes by) is set only after the last: a read
 * in between finds no exe (this test failed so on a loaded machine, twice at each wait).
 */
static bool exec_loaded(pid_t pid, const char *link)
{
	uint64_t start_time, start_code = 0;
	char exe[256];
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);

	exe[n > 0 ? n : 0] = 0;
	return strstr(exe, "sleep") && !ring_proc_stat((uint32_t)pid, &start_time, &start_code) &&
	       start_code > 1;
}

static void exec_seen_in_the_main_comm_forgets_the_maps(void **state)
{
	struct proctab *t = proctab__new(4, 64);
	struct proctab_stats st;
	char link[64];
	int go[2];
	pid_t child;

	assert_int_equal(pipe(go), 0);
	child = fork();
	if (child == 0) {
		char c;

		close(go[1]);
		if (read(go[0], &c, 1) == 1)
			execl("/bin/sleep", "sleep", "5", (char *)NULL);
		_exit(1);
	}
	assert_true(child > 0);
	close(go[0]);
	assert_int_equal(proctab__touch(t, (uint32_t)child), 0);
	proctab__main_comm(t, (uint32_t)child, "elf-test");
	assert_int_equal(write(go[1], "x", 1), 1);
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)child);
	for (int i = 0; i < 1000 && !exec_loaded(child, link); i++) /* seconds when loaded */
		usleep(10 * 1000);
	proctab__main_comm(t, (uint32_t)child, "elf-test"); /* the same: kept */
	assert_non_null(proctab__maps(t, (uint32_t)child));
	proctab__main_comm(t, (uint32_t)child, "sleep");
	assert_null(proctab__maps(t, (uint32_t)child));
	assert_int_equal(proctab__touch(t, (uint32_t)child), 0);
	assert_non_null(proctab__exe(t, (uint32_t)child));
	assert_non_null(strstr(proctab__exe(t, (uint32_t)child), "sleep"));
	proctab__stats(t, &st);
	assert_int_equal(st.forgotten, 1);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	close(go[1]);
	proctab__free(t);
}

/*
 * A process that is exiting (a zombie here: exited, not reaped) has no memory left and its
 * /proc maps read as empty: that is "gone", not "a process with no mapping", or the table would
 * keep the empty maps and never take the copy the process left in its ring.
 */
static void exiting_process_is_gone_not_empty(void **state)
{
	struct procmaps *pm = (struct procmaps *)1;
	char path[64], st[256];
	pid_t child = fork();

	if (child == 0)
		_exit(0);
	assert_true(child > 0);
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)child);
	for (int i = 0; i < 1000; i++) { /* until the child is a zombie */
		FILE *f = fopen(path, "r");
		char *rp = f && fgets(st, sizeof(st), f) ? strrchr(st, ')') : NULL;

		if (f)
			fclose(f);
		if (rp && rp[1] == ' ' && rp[2] == 'Z')
			break;
		usleep(1000);
	}
	assert_int_equal(procmaps__read((uint32_t)child, 256, &pm), -ESRCH);
	assert_null(pm);
	waitpid(child, NULL, 0);
}

/* The process least used this round is evicted, not the one in use. */
static void eviction_is_least_recently_used(void **state)
{
	struct proctab *t = proctab__new(2, 64);
	struct proctab_stats st;
	pid_t kids[2];

	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		if (kids[i] == 0) {
			pause();
			_exit(0);
		}
	}
	assert_int_equal(proctab__touch(t, (uint32_t)getpid()), 0);
	assert_int_equal(proctab__touch(t, (uint32_t)kids[0]), 0);
	assert_int_equal(proctab__touch(t, (uint32_t)getpid()), 0); /* used again */
	assert_int_equal(proctab__touch(t, (uint32_t)kids[1]), 0);  /* evicts kids[0] */
	assert_int_equal(proctab__touch(t, (uint32_t)getpid()), 0);
	proctab__stats(t, &st);
	assert_int_equal(st.reads, 3);
	assert_int_equal(st.evicted, 1);
	for (int i = 0; i < 2; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	proctab__free(t);
}

/* Every field of the line, a path with spaces, an anonymous executable mapping; bad lines out. */
static void maps_fields_are_parsed_exactly(void **state)
{
	const char *text = "10000-20000 r-xp 0000a000 fd:01 4242   /opt/a b (deleted)\n"
			   "30000-40000 r-xp 00000000 00:00 0 \n"
			   "5000x-60000 r-xp 00000000 08:01 1 /bad/start\n"
			   "50000-60000 r-x 00000000 08:01 1 /bad/perms\n"
			   "50000-60000 r-xp 0000000g 08:01 1 /bad/offset\n"
			   "50000-60000 r-xp 00000000 0801 1 /bad/dev\n"
			   "70000-80000 r-xp 00001000 08:01 7 /last";
	struct procmaps *pm;

	assert_int_equal(procmaps__parse_text(text, 1, 16, &pm), 0);
	assert_int_equal(pm->n, 3);
	assert_int_equal(pm->maps[0].start, 0x10000);
	assert_int_equal(pm->maps[0].limit, 0x20000);
	assert_int_equal(pm->maps[0].offset, 0xa000);
	assert_string_equal(pm->maps[0].path, "/opt/a b (deleted)");
	assert_string_equal(pm->maps[1].path, "");
	assert_int_equal(pm->maps[1].start, 0x30000);
	assert_string_equal(pm->maps[2].path, "/last");
	assert_int_equal(pm->maps[2].offset, 0x1000);
	procmaps__free(pm);
}

/* libc's entry survives a stream of files seen once (more than the cache holds). */
static void common_file_survives_one_off_files(void **state)
{
	struct procmaps_stats a, b;
	struct procmaps *pm;
	const char *libc = NULL;
	struct procmaps *self;

	assert_int_equal(procmaps__read(0, 256, &self), 0);
	for (unsigned i = 0; i < self->n && !libc; i++)
		if (strstr(self->maps[i].path, "libc"))
			libc = self->maps[i].path;
	assert_non_null(libc);
	procmaps__free(maps_of(libc));
	procmaps__stats(&a);
	for (unsigned i = 0; i < 4 * PROCMAPS_BUILD_ID_CACHE; i++) {
		char one_off[300];

		procmaps__free(maps_of(libc)); /* used all along */
		/* a file that exists (so it is cached), under a new inode each time */
		snprintf(one_off, sizeof(one_off), "1000-2000 r-xp 00000000 fd:77 %u /proc/%d/exe\n",
			 1000 + i, getpid());
		assert_int_equal(procmaps__parse_text(one_off, (uint32_t)getpid(), 4, &pm), 0);
		procmaps__free(pm);
	}
	procmaps__stats(&b);
	/* each one-off file read once, libc never again */
	assert_int_equal(b.build_id_reads - a.build_id_reads, 4 * PROCMAPS_BUILD_ID_CACHE);
	procmaps__free(self);
}

/*
 * Names are given from the table at the round's end: the process with most of the round's
 * samples stays while a stream of one-sample programs (a shell loop) passes through the table,
 * even though it was used least recently.
 */
static void busy_process_outlives_one_sample_programs(void **state)
{
	struct proctab *t = proctab__new(3, 64);
	char text[] = "1000-2000 r-xp 00000000 00:00 0 [vdso]\n";
	struct proctab_stats st;
	struct procmaps *pm;

	assert_int_equal(procmaps__parse_text(text, 4100000, 4, &pm), 0);
	proctab__adopt(t, pm);
	for (int i = 0; i < 10; i++)
		assert_non_null(proctab__resolve(t, 4100000, 0x1800));
	for (uint32_t pid = 4100001; pid <= 4100020; pid++) {
		assert_int_equal(procmaps__parse_text(text, pid, 4, &pm), 0);
		proctab__adopt(t, pm);
		assert_non_null(proctab__resolve(t, pid, 0x1800));
	}
	proctab__stats(t, &st);
	assert_int_equal(st.evicted, 18);
	assert_non_null(proctab__resolve(t, 4100000, 0x1800)); /* exited: only the table has it */
	/* a new round: last round's uses count no more */
	proctab__new_round(t);
	for (uint32_t pid = 4100021; pid <= 4100023; pid++) {
		assert_int_equal(procmaps__parse_text(text, pid, 4, &pm), 0);
		proctab__adopt(t, pm);
		assert_non_null(proctab__resolve(t, pid, 0x1800));
	}
	assert_null(proctab__resolve(t, 4100000, 0x1800));
	proctab__free(t);
}

/* Many processes through the hashed table: each found again, evicted ones read again. */
static void many_processes_are_found_again(void **state)
{
	struct proctab *t = proctab__new(3, 64);
	struct proctab_stats st;
	struct procmaps *pm;
	char text[] = "1000-2000 r-xp 00000000 00:00 0 [vdso]\n";

	/* exited processes adopted from rings: 40 pids, bucket chains of several */
	for (uint32_t pid = 4000000; pid < 4000040; pid++) {
		assert_int_equal(procmaps__parse_text(text, pid, 4, &pm), 0);
		proctab__adopt(t, pm);
		assert_non_null(proctab__resolve(t, pid, 0x1800));
	}
	proctab__stats(t, &st);
	assert_int_equal(st.procs, 3);
	assert_int_equal(st.evicted, 37);
	assert_non_null(proctab__resolve(t, 4000039, 0x1800));
	assert_non_null(proctab__resolve(t, 4000037, 0x1800));
	assert_null(proctab__resolve(t, 4000000, 0x1800)); /* evicted, and gone */
	assert_int_equal(proctab__touch(t, (uint32_t)getpid()), 0);
	assert_non_null(proctab__resolve(t, (uint32_t)getpid(),
					 (uint64_t)(uintptr_t)elf_test_marker_function));
	proctab__stats(t, &st);
	assert_int_equal(st.procs, 3);
	proctab__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(build_id_matches_the_loaded_note),
	    cmocka_unit_test(function_address_resolves_to_its_name),
	    cmocka_unit_test(non_elf_is_rejected),
	    cmocka_unit_test(maps_parsing_keeps_executable_mappings),
	    cmocka_unit_test(build_ids_are_cached_per_file),
	    cmocka_unit_test(build_id_cache_follows_the_file),
	    cmocka_unit_test(exited_pid_is_not_retried),
	    cmocka_unit_test(maps_read_early_are_read_again_once),
	    cmocka_unit_test(maps_are_read_once_more_a_little_later),
	    cmocka_unit_test(exec_seen_in_the_main_comm_forgets_the_maps),
	    cmocka_unit_test(exiting_process_is_gone_not_empty),
	    cmocka_unit_test(eviction_is_least_recently_used),
	    cmocka_unit_test(maps_fields_are_parsed_exactly),
	    cmocka_unit_test(common_file_survives_one_off_files),
	    cmocka_unit_test(many_processes_are_found_again),
	    cmocka_unit_test(busy_process_outlives_one_sample_programs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
