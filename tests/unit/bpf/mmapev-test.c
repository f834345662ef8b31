// SPDX-License-Identifier: MIT
/*
 * bpf/mmapev against this machine's real kernel (root; no mocks): the mappings it stages for a
 * program exec'd after it opened are the ones /proc/<pid>/maps shows, build-ids included; a
 * fork that has not exec'd gets its parent's; records newer than the time asked for are not
 * taken; an exec makes the process table forget the program the pid ran before. Where the
 * kernel refuses the event (qemu-user, no privilege) the tests skip.
 */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/core/procmaps.h"
#include "bpf/mmapev.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct mmapev *open_or_skip(struct proctab *t)
{
	char err[256] = "";
	struct mmapev *ev = mmapev__open(t, err, sizeof(err));

	if (!ev) {
		print_message("mmap records unavailable here (%s): skipped\n", err);
		skip();
	}
	return ev;
}

/*
 * A child that waits for a byte on go[0], then execs argv (NULL: stays this program), then
 * sleeps until killed.
 */
static pid_t start_child(int go[2], char *const argv[])
{
	pid_t pid;
	char c;

	assert_int_equal(pipe(go), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		if (read(go[0], &c, 1) != 1)
			_exit(1);
		if (argv)
			execv(argv[0], argv);
		for (;;)
			pause();
	}
	close(go[0]);
	return pid;
}

static void release(int go[2])
{
	assert_int_equal(write(go[1], "x", 1), 1);
	close(go[1]);
}

static void stop_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/*
 * Takes records as the agent does while pid gets to sleep in a program named comm (all its
 * libraries mapped); skips the test when the kernel lost records meanwhile (a machine starting
 * programs faster than the rings hold: the /proc fallback's case, not this test's).
 */
static void settle(struct mmapev *ev, pid_t pid, const char *comm)
{
	char path[64], line[512], *p;
	struct mmapev_stats st;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	for (int i = 0; i < 500; i++) {
		FILE *f = fopen(path, "r");
		bool ready = false;

		if (f && fgets(line, sizeof(line), f) && (p = strrchr(line, ')')) && p[1] == ' ')
			ready = p[2] == 'S' && !strncmp(strchr(line, '(') + 1, comm, strlen(comm));
		if (f)
			fclose(f);
		mmapev__advance(ev, now_ns(), true);
		if (ready)
			break;
		usleep(10 * 1000);
	}
	mmapev__advance(ev, now_ns(), true);
	mmapev__stats(ev, &st);
	if (st.lost) {
		print_message("%llu records lost under load: skipped\n", (unsigned long long)st.lost);
		skip();
	}
}

/* Every mapping /proc shows for pid is in got, with the same file, offset and build-id. */
static void assert_same_maps(uint32_t pid, const struct procmaps *got)
{
	struct procmaps *want;

	assert_int_equal(procmaps__read(pid, 256, &want), 0);
	assert_true(want->n > 0);
	assert_int_equal(got->n, want->n);
	for (unsigned i = 0; i < want->n; i++) {
		const struct procmap *w = &want->maps[i];
		const struct procmap *g = procmaps__find(got, w->start);

		assert_non_null(g);
		assert_int_equal(g->start, w->start);
		assert_int_equal(g->limit, w->limit);
		assert_int_equal(g->offset, w->offset);
		assert_string_equal(g->path, w->path);
		assert_string_equal(g->build_id, w->build_id);
	}
	procmaps__free(want);
}

/*
 * The unwind tables list a new process from the maps its samples took from the records
 * (proctab__loaded_maps), with no /proc read; maps read from /proc are not offered, and a
 * refresh re-reads only maps old enough.
 */
static void loaded_maps_serve_tables(void **state)
{
	char *argv[] = {"/bin/sleep", "30", NULL};
	struct proctab *t = proctab__new(16, 256);
	struct mmapev *ev = open_or_skip(t);
	struct procmaps_stats before, after;
	const struct procmaps *pm;
	int go[2];
	pid_t pid;

	(void)state;
	proctab__set_loader(t, mmapev__take, ev);
	pid = start_child(go, argv);
	release(go);
	settle(ev, pid, "sleep");
	procmaps__stats(&before);
	assert_int_equal(proctab__touch(t, (uint32_t)pid), 0); /* its first sample */
	pm = proctab__loaded_maps(t, (uint32_t)pid);
	procmaps__stats(&after);
	assert_non_null(pm);
	assert_int_equal(after.maps_reads, before.maps_reads);
	assert_same_maps((uint32_t)pid, pm); /* itself a read of /proc */
	procmaps__stats(&before);
	assert_int_equal(proctab__refresh(t, (uint32_t)pid, 60ull * 1000000000), -EAGAIN);
	assert_int_equal(proctab__refresh(t, (uint32_t)pid, 0), 0); /* nothing new: /proc */
	procmaps__stats(&after);
	assert_int_equal(after.maps_reads, before.maps_reads + 1);
	assert_null(proctab__loaded_maps(t, (uint32_t)pid));
	assert_same_maps((uint32_t)pid, proctab__maps(t, (uint32_t)pid));
	assert_null(proctab__loaded_maps(t, 1)); /* not known */
	stop_child(pid);
	mmapev__free(ev);
	proctab__free(t);
}

static void exec_is_staged(void **state)
{
	char *argv[] = {"/bin/sleep", "30", NULL};
	struct proctab *t = proctab__new(16, 256);
	struct mmapev *ev = open_or_skip(t);
	struct procmaps_stats before, after;
	struct mmapev_stats st;
	struct procmaps *pm;
	uint64_t t0;
	int go[2];
	pid_t pid;

	(void)state;
	pid = start_child(go, argv);
	t0 = now_ns();
	release(go);
	usleep(50 * 1000);
	/* records after the time asked for stay in the rings: nothing staged yet */
	mmapev__advance(ev, t0, true);
	assert_null(mmapev__take(ev, (uint32_t)pid, 256));
	settle(ev, pid, "sleep");
	procmaps__stats(&before);
	pm = mmapev__take(ev, (uint32_t)pid, 256);
	procmaps__stats(&after);
	assert_non_null(pm);
	mmapev__stats(ev, &st);
	assert_true(st.execs >= 1);
	if (st.build_ids) /* the kernel gave the build-ids: no file opened for them */
		assert_int_equal(after.build_id_reads + after.file_stats,
				 before.build_id_reads + before.file_stats);
	assert_int_equal(after.maps_reads, before.maps_reads);
	assert_non_null(procmaps__exe(pm));
	assert_non_null(strstr(procmaps__exe(pm), "sleep"));
	assert_same_maps((uint32_t)pid, pm);
	/* handed over once: the stage is gone */
	assert_null(mmapev__take(ev, (uint32_t)pid, 256));
	procmaps__free(pm);
	stop_child(pid);
	mmapev__free(ev);
	proctab__free(t);
}

static void fork_gets_parent_maps(void **state)
{
	struct proctab *t = proctab__new(16, 256);
	struct mmapev *ev = open_or_skip(t);
	struct mmapev_stats st;
	struct procmaps *pm;
	int go[2];
	pid_t pid;

	(void)state;
	/* the parent was sampled: its maps are in the table */
	assert_int_equal(proctab__touch(t, (uint32_t)getpid()), 0);
	pid = start_child(go, NULL);
	settle(ev, pid, "mmapev-test");
	mmapev__stats(ev, &st);
	assert_true(st.forks >= 1);
	pm = mmapev__take(ev, (uint32_t)pid, 256);
	assert_non_null(pm);
	assert_same_maps((uint32_t)pid, pm);
	assert_string_equal(procmaps__exe(pm), procmaps__exe(proctab__maps(t, (uint32_t)getpid())));
	procmaps__free(pm);
	release(go);
	stop_child(pid);
	mmapev__free(ev);
	proctab__free(t);
}

static void exec_forgets_old_program(void **state)
{
	char *argv[] = {"/bin/sleep", "30", NULL};
	struct proctab *t = proctab__new(16, 256);
	struct mmapev *ev = open_or_skip(t);
	struct proctab_stats ps;
	int go[2];
	pid_t pid;

	(void)state;
	pid = start_child(go, argv);
	settle(ev, pid, "mmapev-test");
	/* sampled before its exec: read from /proc, this test program's maps */
	assert_int_equal(proctab__touch(t, (uint32_t)pid), 0);
	assert_non_null(proctab__maps(t, (uint32_t)pid));
	release(go);
	settle(ev, pid, "sleep");
	proctab__stats(t, &ps);
	assert_int_equal(ps.forgotten, 1);
	assert_null(proctab__maps(t, (uint32_t)pid));
	/* its next sample loads the new program's maps from the records */
	proctab__set_loader(t, mmapev__take, ev);
	assert_int_equal(proctab__touch(t, (uint32_t)pid), 0);
	proctab__stats(t, &ps);
	assert_int_equal(ps.loaded, 1);
	assert_non_null(strstr(proctab__exe(t, (uint32_t)pid), "sleep"));
	stop_child(pid);
	mmapev__free(ev);
	proctab__free(t);
}

/* The child of dlopen_reaches_table: waits for a byte on stdin, dlopens zlib, says so. */
static int dlopen_child(void)
{
	char c;

	if (read(0, &c, 1) != 1 || !dlopen("libz.so.1", RTLD_NOW))
		return 1;
	if (write(1, "k", 1) != 1)
		return 1;
	for (;;)
		pause();
}

/*
 * A program sampled before its libraries are all mapped (ld.so runs after the exec; dlopen
 * later): the table's maps come from the stage at the first sample, and a miss in a library
 * mapped since takes the stage again instead of reading /proc.
 */
static void later_mappings_reach_table(void **state)
{
	struct proctab *t = proctab__new(16, 256);
	struct mmapev *ev = open_or_skip(t);
	struct procmaps_stats before, after;
	const struct procmap *m = NULL;
	struct proctab_stats ps;
	struct procmaps *now;
	int in[2], out[2];
	char self[512] = "";
	uint64_t libz = 0;
	pid_t pid;
	char c;

	(void)state;
	/* exec'd by its real name, so that its comm stays mmapev-test */
	assert_true(readlink("/proc/self/exe", self, sizeof(self) - 1) > 0);
	proctab__set_loader(t, mmapev__take, ev);
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(self, "mmapev-test", "--dlopen-child", (char *)NULL);
		_exit(1);
	}
	close(in[0]);
	close(out[1]);
	settle(ev, pid, "mmapev-test");
	assert_int_equal(proctab__touch(t, (uint32_t)pid), 0); /* its first sample */
	assert_int_equal(write(in[1], "x", 1), 1);
	assert_int_equal(read(out[0], &c, 1), 1); /* zlib is mapped */
	assert_int_equal(procmaps__read((uint32_t)pid, 256, &now), 0);
	for (unsigned i = 0; i < now->n && !libz; i++)
		if (strstr(now->maps[i].path, "libz.so"))
			libz = now->maps[i].start;
	procmaps__free(now);
	assert_true(libz != 0);
	settle(ev, pid, "mmapev-test");
	procmaps__stats(&before);
	m = proctab__resolve(t, (uint32_t)pid, libz);
	procmaps__stats(&after);
	assert_non_null(m);
	assert_non_null(strstr(m->path, "libz.so"));
	proctab__stats(t, &ps);
	assert_int_equal(ps.loaded, 2); /* the first sample, and the miss */
	assert_int_equal(ps.reads, 0);
	assert_int_equal(after.maps_reads, before.maps_reads);
	close(in[1]);
	close(out[0]);
	stop_child(pid);
	mmapev__free(ev);
	proctab__free(t);
}

/* A loader whose stage is gone after the first sample: its maps, then nothing. */
static struct procmaps *stage_lost_loader(void *ctx, uint32_t pid, unsigned int max_maps)
{
	int *calls = ctx;
	struct procmaps *pm = NULL;

	if ((*calls)++ == 0 && procmaps__read(pid, max_maps, &pm))
		return NULL;
	return pm;
}

/*
 * The stage of a program sampled before its libraries were mapped is gone (given to another
 * program, or overflowed) when a miss in a library comes: its maps are read from /proc in the
 * same round, not left unknown until the next (lua5.4: libc never named for a whole run).
 */
static void lost_stage_reads_proc(void **state)
{
	struct proctab *t = proctab__new(16, 256);
	const struct procmap *m;
	struct proctab_stats ps;
	struct procmaps *now;
	int in[2], out[2], calls = 0;
	char self[512] = "";
	uint64_t libz = 0;
	pid_t pid;
	char c;

	(void)state;
	assert_true(readlink("/proc/self/exe", self, sizeof(self) - 1) > 0);
	proctab__set_loader(t, stage_lost_loader, &calls);
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execl(self, "mmapev-test", "--dlopen-child", (char *)NULL);
		_exit(1);
	}
	close(in[0]);
	close(out[1]);
	usleep(100 * 1000); /* exec'd, waiting on stdin: zlib not mapped yet */
	if (waitpid(pid, NULL, WNOHANG) == pid) { /* qemu-user: no exec of a foreign binary */
		print_message("cannot run a copy of this test here: skipped\n");
		proctab__free(t);
		skip();
	}
	assert_int_equal(proctab__touch(t, (uint32_t)pid), 0); /* its first sample */
	assert_int_equal(write(in[1], "x", 1), 1);
	assert_int_equal(read(out[0], &c, 1), 1); /* zlib is mapped */
	assert_int_equal(procmaps__read((uint32_t)pid, 256, &now), 0);
	for (unsigned i = 0; i < now->n && !libz; i++)
		if (strstr(now->maps[i].path, "libz.so"))
			libz = now->maps[i].start;
	procmaps__free(now);
	assert_true(libz != 0);
	usleep(150 * 1000); /* past PROCTAB_REREAD_NS since the first read */
	m = proctab__resolve(t, (uint32_t)pid, libz);
	assert_non_null(m);
	assert_non_null(strstr(m->path, "libz.so"));
	proctab__stats(t, &ps);
	assert_int_equal(ps.loaded, 1);
	assert_int_equal(ps.reads, 1); /* the miss, from /proc */
	assert_int_equal(ps.lost, 0);
	close(in[1]);
	close(out[0]);
	stop_child(pid);
	/* gone, never read: counted as lost once */
	assert_null(proctab__resolve(t, (uint32_t)pid + 1000000, 0x1000));
	proctab__stats(t, &ps);
	assert_int_equal(ps.lost, 1);
	proctab__free(t);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(exec_is_staged),
	    cmocka_unit_test(fork_gets_parent_maps),
	    cmocka_unit_test(exec_forgets_old_program),
	    cmocka_unit_test(later_mappings_reach_table),
	    cmocka_unit_test(lost_stage_reads_proc),
	    cmocka_unit_test(loaded_maps_serve_tables),
	};

	if (argc > 1 && !strcmp(argv[1], "--dlopen-child"))
		return dlopen_child();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
