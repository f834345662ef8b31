// SPDX-License-Identifier: MIT
/*
 * bpf/cfitab: who gets the unwind tables when there is no room. Two real processes of this
 * machine (Debian's sleep and cat: built without frame pointers, so both want tables; they
 * share libc and ld.so, each has its own program file) compete for a file cache just as big
 * as the first one's files; the BPF maps are stubs (this tests the bookkeeping, not the
 * kernel). The one sampled more must get the room soon, not 10 s later (sqlite3 beside a
 * build was never listed: bpf/README.md), and the one it took it from must not take it back
 * while sampled less. Skips where those programs are missing or built with frame pointers.
 */
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
#include <unistd.h>
#include <cmocka.h>

#include <bpf/bpf.h>

#include "bpf/cfitab.h"

/* The maps, stubbed: cfitab only writes them. */
int bpf_map_update_elem(int fd, const void *key, const void *value, __u64 flags)
{
	return 0;
}

int bpf_map_delete_elem(int fd, const void *key)
{
	return 0;
}

int bpf_map_update_batch(int fd, const void *keys, const void *values, __u32 *count,
			 const struct bpf_map_batch_opts *opts)
{
	return 0;
}

/* A child running argv (its stdin a pipe that stays open: cat waits), settled once its
 * program is mapped (its comm is the program's). */
static pid_t start(char *const argv[], const char *comm)
{
	int in[2];
	pid_t pid;

	assert_int_equal(pipe(in), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(in[0], 0);
		execv(argv[0], argv);
		_exit(127);
	}
	close(in[0]); /* the write end stays open in this process: cat blocks in read */
	for (int i = 0; i < 200; i++) {
		char path[64], got[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		f = fopen(path, "r");
		if (f && fgets(got, sizeof(got), f) && !strncmp(got, comm, strlen(comm))) {
			fclose(f);
			usleep(20 * 1000); /* ld.so maps the libraries after the exec */
			return pid;
		}
		if (f)
			fclose(f);
		usleep(5 * 1000);
	}
	return pid;
}

static pid_t children[2]; /* killed by teardown, also when an assertion failed */

static int stop_children(void **state)
{
	for (int i = 0; i < 2; i++) {
		if (children[i] > 0) {
			kill(children[i], SIGKILL);
			waitpid(children[i], NULL, 0);
		}
		children[i] = 0;
	}
	return 0;
}

static void want(struct cfitab *c, pid_t pid, const char *comm, int samples)
{
	for (int i = 0; i < samples; i++)
		cfitab__want(c, (uint32_t)pid, comm);
}

/* The table's counters: listed now, listings so far, no-room failures, evictions. */
static void expect(const struct cfitab *c, uint64_t procs, uint64_t loads, uint64_t no_room,
		   uint64_t evicted)
{
	struct cfitab_stats st;

	cfitab__stats(c, &st);
	assert_int_equal(st.procs, procs);
	assert_int_equal(st.loads, loads);
	assert_int_equal(st.no_room, no_room);
	assert_int_equal(st.procs_evicted, evicted);
}

static struct cfitab *table(unsigned int files)
{
	struct cfitab *c = cfitab__new(-1, false, -1, -1, -1, 1u << 20, 16, files);

	assert_non_null(c);
	return c;
}

static void busier_process_takes_the_room_soon_and_keeps_it(void **state)
{
	char *sleep_argv[] = {"/bin/sleep", "60", NULL}, *cat_argv[] = {"/bin/cat", NULL};
	struct cfitab_stats st;
	struct cfitab *c;
	unsigned int files;
	pid_t a, b;

	if (access(sleep_argv[0], X_OK) || access(cat_argv[0], X_OK))
		skip();
	a = children[0] = start(sleep_argv, "sleep");
	b = children[1] = start(cat_argv, "cat");
	/* how many files sleep's listing takes, in a roomy table */
	c = table(64);
	want(c, a, "sleep", 4);
	cfitab__stats(c, &st);
	cfitab__free(c);
	if (st.procs != 1 || st.fp_built) {
		print_message("sleep not listed (procs %llu, fp_built %llu): skipped\n",
			      (unsigned long long)st.procs, (unsigned long long)st.fp_built);
		skip();
	}
	files = (unsigned int)(st.files + st.no_table);

	/* sleep holds every file slot; cat needs one more (its program) */
	c = table(files);
	want(c, a, "sleep", 4);
	want(c, b, "cat", 4);
	expect(c, 1, 1, 1, 0);
	/* sampled as often as sleep (8 against 4, within the margin): sleep keeps its room */
	want(c, b, "cat", 4);
	expect(c, 1, 1, 2, 0);
	/* 16 samples against 4: cat is tried again without waiting 10 s, and takes it */
	want(c, b, "cat", 8);
	expect(c, 1, 2, 2, 1);
	/* sleep, sampled less since, does not take it back (nor is it tried within 10 s) */
	want(c, a, "sleep", 8);
	expect(c, 1, 2, 2, 1);
	/* every 5 s samples count half: cat's share decays, its room stays until needed */
	cfitab__sweep(c);
	expect(c, 1, 2, 2, 1);
	cfitab__free(c);
}

/* The ELF machine of path (0: unreadable). */
static unsigned int elf_machine(const char *path)
{
	unsigned char h[20] = {0};
	FILE *f = fopen(path, "rb");

	if (f) {
		if (fread(h, 1, sizeof(h), f) != sizeof(h))
			h[18] = h[19] = 0;
		fclose(f);
	}
	return h[18] | h[19] << 8u;
}

/* Whether pid maps a file whose path holds name. */
static bool maps_file(pid_t pid, const char *name)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, name) != NULL;
	if (f)
		fclose(f);
	return found;
}

/*
 * Debian's openssl at its 4th sample against a rows array of max_rows, once it has mapped
 * libcrypto (on a loaded machine, the loader may not have yet when the test lists it); skips
 * without it, or where it is not this build's architecture (an ARM build's tests under
 * qemu-user).
 */
static struct cfitab *openssl_listed(unsigned int max_rows, struct cfitab_stats *st)
{
	char *argv[] = {"/usr/bin/openssl", "dgst", "-sha256", NULL}; /* waits on stdin */
	struct cfitab *c;

	if (access(argv[0], X_OK) || elf_machine(argv[0]) != elf_machine("/proc/self/exe"))
		skip();
	children[0] = start(argv, "openssl");
	for (int i = 0; i < 500 && !maps_file(children[0], "libcrypto.so"); i++)
		usleep(10 * 1000);
	assert_true(maps_file(children[0], "libcrypto.so"));
	c = cfitab__new(-1, false, -1, -1, -1, max_rows, 16, 64);
	assert_non_null(c);
	want(c, children[0], "openssl", 4);
	cfitab__stats(c, st);
	if (st->fp_built) {
		cfitab__free(c);
		skip();
	}
	return c;
}

/*
 * libcrypto.so.3 (85 929 rows) in the default array: its 126 659 entries were over a file's
 * quarter (98 304), and openssl, or any program linked to it, was never listed (issue 35).
 */
static void libcrypto_fits_the_default_array(void **state)
{
	struct cfitab_stats st;
	struct cfitab *c = openssl_listed(CONFIG_BPF_CFI_ROWS, &st);

	assert_int_equal(st.procs, 1);
	assert_int_equal(st.partial, 0);
	assert_int_equal(st.files_unfit, 0);
	cfitab__free(c);
}

/* A file too big for the array costs its own frames: the process is listed without it. */
static void too_big_a_file_costs_its_frames_only(void **state)
{
	struct cfitab_stats st;
	struct cfitab *c = openssl_listed(1u << 16, &st); /* a file may take 32 Ki entries */

	assert_int_equal(st.procs, 1);
	assert_int_equal(st.partial, 1);
	assert_true(st.files_unfit >= 1);
	cfitab__free(c);
}

/* Whether pid maps anonymous code (node's JIT, once V8 has set up). */
static bool maps_anon_code(pid_t pid)
{
	char path[64], line[512], perm[8];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	while (f && !found && fgets(line, sizeof(line), f)) {
		unsigned long inode = 1;

		found = sscanf(line, "%*x-%*x %7s %*x %*s %lu", perm, &inode) == 2 &&
			perm[2] == 'x' && inode == 0 && !strchr(line, '[');
	}
	if (f)
		fclose(f);
	return found;
}

/*
 * node: anonymous code (its JIT) and a program too big for the array. Both used to leave the
 * whole process to frame pointers; now it is listed, the JIT and node's own frames without
 * rows (the BPF walk steps by frame pointers there), libc's and libstdc++'s with theirs.
 */
static void jit_and_too_big_a_program_are_listed(void **state)
{
	char *argv[] = {"/usr/bin/node", "-e", "setInterval(() => {}, 1000)", NULL};
	struct cfitab_stats st;
	struct cfitab *c;

	if (access(argv[0], X_OK) || elf_machine(argv[0]) != elf_machine("/proc/self/exe"))
		skip();
	children[0] = start(argv, "node");
	for (int i = 0; i < 200 && !maps_anon_code(children[0]); i++)
		usleep(10 * 1000);
	assert_true(maps_anon_code(children[0]));
	c = cfitab__new(-1, false, -1, -1, -1, CONFIG_BPF_CFI_ROWS, 16, 64);
	assert_non_null(c);
	want(c, children[0], "node", 4);
	cfitab__stats(c, &st);
	assert_int_equal(st.procs, 1);
	assert_int_equal(st.fp_built, 0);
	assert_int_equal(st.partial, 1); /* node itself: over a file's share */
	cfitab__free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(busier_process_takes_the_room_soon_and_keeps_it, stop_children),
	    cmocka_unit_test_teardown(libcrypto_fits_the_default_array, stop_children),
	    cmocka_unit_test_teardown(too_big_a_file_costs_its_frames_only, stop_children),
	    cmocka_unit_test_teardown(jit_and_too_big_a_program_are_listed, stop_children),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
