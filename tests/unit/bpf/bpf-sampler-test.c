// SPDX-License-Identifier: MIT
/*
 * The BPF sampler against this machine's real kernel (root; no mocks): it loads, samples this
 * process, filters by pid and comm, records kernel stacks only when asked, and counts what it
 * drops. Without bpf() (qemu-user, no privilege) open fails with one line and the rest skips.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/core/ksyms.h"
#include "bpf/sampler.h"

struct seen {
	unsigned n, mine, others, with_kernel, with_user, labelled;
	unsigned deep, truncated; /* samples with >= DEEP user frames; cut short */
	int refuse; /* sink returns -ENOSPC */
};

static char self_exe[256];

#define DEEP 40 /* frames of nest_then_burn() */

static int sink(void *ctx, const struct agent_sample *s)
{
	struct seen *v = ctx;
	bool comm = s->comm && s->comm[0], exe = false;

	if (v->refuse)
		return -ENOSPC;
	v->n++;
	if (s->pid == (uint32_t)getpid())
		v->mine++;
	else
		v->others++;
	v->with_kernel += s->n_kernel > 0;
	v->with_user += s->n_user > 0;
	v->deep += s->n_user >= DEEP;
	v->truncated += !!(s->flags & SAMPLE_F_TRUNCATED);
	for (int i = 0; i < s->n_labels; i++) {
		/* pid and comm have their own fields: never repeated as labels */
		assert_string_not_equal(s->labels[i].key, "pid");
		assert_string_not_equal(s->labels[i].key, "comm");
		exe |= !strcmp(s->labels[i].key, "exe") && !strcmp(s->labels[i].value, self_exe);
	}
	v->labelled += comm && exe;
	return 0;
}

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void burn_user(double secs)
{
	double end = cpu_seconds() + secs;
	volatile unsigned long x = 0;

	while (cpu_seconds() < end)
		for (int i = 0; i < 100000; i++)
			x += i;
}

/* DEEP + 1 frames of itself, then burns at the bottom (the volatile read keeps the calls). */
static __attribute__((noinline)) unsigned nest_then_burn(int n, double secs)
{
	volatile unsigned char frame = (unsigned char)n;
	unsigned r = 0;

	if (n > 0)
		r = nest_then_burn(n - 1, secs);
	else
		burn_user(secs);
	return r + frame;
}

/* Reads /dev/zero: most of the time is spent in the kernel. */
static void burn_syscalls(double secs)
{
	static char buf[65536];
	double end = cpu_seconds() + secs;
	int fd = open("/dev/zero", O_RDONLY);

	assert_true(fd >= 0);
	while (cpu_seconds() < end)
		assert_true(read(fd, buf, sizeof(buf)) > 0);
	close(fd);
}

static bool bpf_missing;

static struct bpf_sampler *open_or_skip(struct bpf_sampler_opts *o, struct seen *v)
{
	struct bpf_sampler *s = NULL;
	char err[256];
	int ret;

	if (bpf_missing)
		skip();
	ret = bpf_sampler__open(o, sink, v, &s, err, sizeof(err));
	if (ret == -ENOSYS || ret == -EPERM) {
		/* The one-line reason the agent prints; then nothing else can run here. */
		assert_true(strlen(err) > 10);
		assert_null(strchr(err, '\n'));
		assert_null(s);
		print_message("bpf sampler unavailable here: %s\n", err);
		bpf_missing = true;
		skip();
	}
	if (ret)
		fail_msg("bpf_sampler__open: %d: %s", ret, err);
	return s;
}

static void drain(struct bpf_sampler *s)
{
	int n;

	while ((n = bpf_sampler__poll(s, 0)) > 0)
		;
	assert_true(n >= 0);
}

static void samples_this_process_with_labels(void **state)
{
	uint32_t me = getpid();
	struct bpf_sampler_opts o = { .hz = 499, .ringbuf_kb = 1024, .pids = &me, .n_pids = 1 };
	struct seen v = { 0 };
	struct bpf_sampler_stats st;
	struct bpf_sampler *s = open_or_skip(&o, &v);

	burn_user(0.5); /* ~250 samples at 499 Hz */
	drain(s);
	bpf_sampler__stats(s, &st);
	print_message("samples %u (with user stack %u), dropped %llu, cpus %u\n", v.n,
		      v.with_user, (unsigned long long)st.dropped_ringbuf, st.cpus);
	assert_true(st.cpus >= 1);
	assert_int_equal(st.perf_buffer, getenv("EDGEPROF_BPF_PERFBUF") != NULL);
	assert_true(v.mine >= 50);
	assert_int_equal(v.others, 0);
	assert_true(v.with_user >= v.n * 9 / 10);
	assert_true(v.labelled >= v.n * 9 / 10);
	assert_int_equal(st.samples, v.n);
	assert_int_equal(st.dropped_ringbuf, 0);
	bpf_sampler__free(s);
}

static void comm_prefix_filters(void **state)
{
	char comm[32] = "", prefix[8];
	FILE *f = fopen("/proc/self/comm", "re");
	struct seen v = { 0 }, none = { 0 };
	struct bpf_sampler_opts o = { .hz = 499, .ringbuf_kb = 1024, .comm_prefix = prefix };
	struct bpf_sampler *s;

	assert_non_null(f);
	assert_non_null(fgets(comm, sizeof(comm), f));
	fclose(f);
	snprintf(prefix, sizeof(prefix), "%.5s", comm);
	s = open_or_skip(&o, &v);
	burn_user(0.3);
	drain(s);
	bpf_sampler__free(s);
	assert_true(v.mine >= 20);

	o.comm_prefix = "zz-no-such-comm";
	s = open_or_skip(&o, &none);
	burn_user(0.3);
	drain(s);
	bpf_sampler__free(s);
	assert_int_equal(none.n, 0);
}

static void kernel_stacks_only_when_asked(void **state)
{
	uint32_t me = getpid();
	struct bpf_sampler_opts o = { .hz = 499, .ringbuf_kb = 1024, .pids = &me, .n_pids = 1,
				      .kernel_stacks = true };
	struct seen with = { 0 }, without = { 0 };
	struct bpf_sampler *s = open_or_skip(&o, &with);

	burn_syscalls(0.4);
	drain(s);
	bpf_sampler__free(s);
	print_message("kernel stacks in %u of %u samples\n", with.with_kernel, with.n);
	assert_true(with.n >= 40);
	assert_true(with.with_kernel >= with.n / 4);

	o.kernel_stacks = false;
	s = open_or_skip(&o, &without);
	burn_syscalls(0.4);
	drain(s);
	bpf_sampler__free(s);
	assert_true(without.n >= 40);
	assert_int_equal(without.with_kernel, 0);
}

/*
 * The BPF program asks for as many frames as this CPU's stacks had lately, plus a margin, and
 * walks again at full depth when they fill that: stacks much deeper than the ones before come
 * whole all the same.
 */
static void deep_stacks_after_shallow_ones_are_whole(void **state)
{
	uint32_t me = getpid();
	struct bpf_sampler_opts o = { .hz = 499, .ringbuf_kb = 1024, .pids = &me, .n_pids = 1 };
	struct seen v = { 0 };
	struct bpf_sampler *s = open_or_skip(&o, &v);

	burn_user(0.3);
	nest_then_burn(DEEP, 0.4); /* ~200 samples, each DEEP + 1 frames deeper than before */
	burn_user(0.1);
	nest_then_burn(DEEP, 0.2);
	drain(s);
	bpf_sampler__free(s);
	print_message("%u samples, %u with >= %d user frames, %u truncated\n", v.n, v.deep, DEEP,
		      v.truncated);
	assert_true(v.deep >= 150);
	assert_int_equal(v.truncated, 0);
}

/* One page of ring at 4999 Hz, read only afterwards: most samples cannot fit and are counted. */
static void full_ring_is_counted(void **state)
{
	uint32_t me = getpid();
	struct bpf_sampler_opts o = { .hz = 4999, .ringbuf_kb = 4, .pids = &me, .n_pids = 1 };
	struct seen v = { 0 };
	struct bpf_sampler_stats st;
	struct bpf_sampler *s = open_or_skip(&o, &v);

	burn_user(0.3);
	drain(s);
	bpf_sampler__stats(s, &st);
	print_message("delivered %u, dropped in the ring %llu\n", v.n,
		      (unsigned long long)st.dropped_ringbuf);
	assert_true(v.n >= 1);
	assert_true(st.dropped_ringbuf >= 50);
	assert_true(v.n < st.dropped_ringbuf);
	bpf_sampler__free(s);
}

static void refused_by_sink_is_counted(void **state)
{
	uint32_t me = getpid();
	struct bpf_sampler_opts o = { .hz = 499, .ringbuf_kb = 1024, .pids = &me, .n_pids = 1 };
	struct seen v = { .refuse = 1 };
	struct bpf_sampler_stats st;
	struct bpf_sampler *s = open_or_skip(&o, &v);

	burn_user(0.2);
	drain(s);
	bpf_sampler__stats(s, &st);
	assert_int_equal(st.samples, 0);
	assert_true(st.dropped_sink >= 20);
	bpf_sampler__free(s);
}

/* The fallback for kernels before 5.8 (per-CPU perf buffers), forced here. */
static void perf_buffer_fallback_samples(void **state)
{
	setenv("EDGEPROF_BPF_PERFBUF", "1", 1);
	samples_this_process_with_labels(state);
	unsetenv("EDGEPROF_BPF_PERFBUF");
}

static void perf_buffer_full_is_counted(void **state)
{
	setenv("EDGEPROF_BPF_PERFBUF", "1", 1);
	full_ring_is_counted(state);
	unsetenv("EDGEPROF_BPF_PERFBUF");
}

/* Above kernel.perf_event_max_sample_rate: refused with the limit named, nothing left open. */
static void too_high_frequency_says_why(void **state)
{
	struct bpf_sampler_opts o = { .hz = 10000000 };
	struct bpf_sampler *s = (void *)1;
	struct seen v = { 0 };
	char err[256];
	int ret;

	if (bpf_missing)
		skip();
	ret = bpf_sampler__open(&o, sink, &v, &s, err, sizeof(err));
	if (ret == -ENOSYS || ret == -EPERM)
		skip();
	print_message("%s\n", err);
	assert_int_equal(ret, -EINVAL);
	assert_null(s);
	assert_non_null(strstr(err, "perf_event_max_sample_rate"));
}

/* The id of the cgroup v2 root; a missing directory is an error, not id 0. */
static void cgroup_ids(void **state)
{
	char line[512], root[256] = "";
	struct stat st;
	FILE *f = fopen("/proc/mounts", "re");
	uint64_t id = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char dev[64], dir[256], type[64];

		if (sscanf(line, "%63s %255s %63s", dev, dir, type) == 3 && !strcmp(type, "cgroup2")) {
			snprintf(root, sizeof(root), "%s", dir);
			break;
		}
	}
	fclose(f);
	assert_int_equal(bpf_sampler__cgroup_id("/nonexistent/cgroup", &id), -ENOENT);
	if (!root[0])
		skip(); /* no cgroup v2 mounted here */
	assert_int_equal(bpf_sampler__cgroup_id(root, &id), 0);
	/* kernfs: the id in the file handle is the directory's inode number (1 at the root). */
	assert_int_equal(stat(root, &st), 0);
	assert_true(id == st.st_ino);
	assert_true(id != 0);
}

static void bad_options_say_why(void **state)
{
	struct bpf_sampler_opts o = { .comm_prefix = "a-very-long-comm-prefix" };
	struct bpf_sampler *s = (void *)1;
	struct seen v = { 0 };
	char err[256];
	int ret;

	if (bpf_missing)
		skip();
	ret = bpf_sampler__open(&o, sink, &v, &s, err, sizeof(err));
	if (ret == -ENOSYS || ret == -EPERM)
		skip();
	assert_int_equal(ret, -EINVAL);
	assert_null(s);
	assert_non_null(strstr(err, "comm"));
	bpf_sampler__free(NULL);
}

/*
 * The kernel's own names (BPF %pS) agree with /proc/kallsyms read in full: same function, same
 * start, for addresses inside functions of the core kernel; unknown addresses are -ENOENT.
 */
static void kernel_names_match_kallsyms(void **state)
{
	struct bpf_sampler_opts o = { .hz = 19, .kernel_stacks = true };
	struct seen v = { 0 };
	struct bpf_sampler *s = open_or_skip(&o, &v);
	struct ksyms *ks = ksyms__load();
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512], sym[256], type, name[128];
	unsigned long long addr;
	unsigned checked = 0, line_no = 0;
	uint64_t start;
	int ret;

	ret = bpf_sampler__name_kernel(s, 0xffffffff81000000ull, name, sizeof(name), &start);
	if (ret == -EOPNOTSUPP || !ks || ksyms__hidden(ks) || !f) {
		bpf_sampler__free(s);
		ksyms__free(ks);
		if (f)
			fclose(f);
		skip(); /* kernel before 5.14, or addresses hidden */
	}
	while (fgets(line, sizeof(line), f) && checked < 300) {
		const char *want;
		uint64_t want_start;

		if (line_no++ % 211 || sscanf(line, "%llx %c %255s", &addr, &type, sym) != 3 ||
		    (type != 'T' && type != 't') || strchr(line, '[') || !strncmp(sym, "__pfx_", 6))
			continue; /* (padding before a function is no code a sample lands in) */
		want = ksyms__resolve(ks, addr + 1, &want_start);
		assert_int_equal(bpf_sampler__name_kernel(s, addr + 1, name, sizeof(name), &start),
				 0);
		/* aliases (two names, one address) may differ; the start may not */
		if (start != want_start)
			fail_msg("0x%llx: kernel %s at 0x%llx, kallsyms %s at 0x%llx", addr + 1, name,
				 (unsigned long long)start, want, (unsigned long long)want_start);
		if (strcmp(name, want))
			print_message("alias: kernel says %s, kallsyms lists %s first\n", name, want);
		checked++;
	}
	assert_true(checked > 100);
	assert_int_equal(bpf_sampler__name_kernel(s, 8, name, sizeof(name), &start), -ENOENT);
	fclose(f);
	ksyms__free(ks);
	bpf_sampler__free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(samples_this_process_with_labels),
		cmocka_unit_test(comm_prefix_filters),
		cmocka_unit_test(kernel_stacks_only_when_asked),
		cmocka_unit_test(deep_stacks_after_shallow_ones_are_whole),
		cmocka_unit_test(full_ring_is_counted),
		cmocka_unit_test(refused_by_sink_is_counted),
		cmocka_unit_test(perf_buffer_fallback_samples),
		cmocka_unit_test(perf_buffer_full_is_counted),
		cmocka_unit_test(too_high_frequency_says_why),
		cmocka_unit_test(cgroup_ids),
		cmocka_unit_test(bad_options_say_why),
		cmocka_unit_test(kernel_names_match_kallsyms),
	};
	ssize_t n = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);

	self_exe[n > 0 ? n : 0] = 0;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
