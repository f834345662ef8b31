// SPDX-License-Identifier: MIT
/*
 * tests/workloads/wallsplit.c — threads that wait in known stacks for known times, for the
 * wall-clock profile (tests/integration/sigprof-wall.test.sh). SECONDS (default 1.2) is each
 * thread's life:
 *   main      work_main burns the CPU for a third of it, then waits in pthread_join
 *   thread 1  sleep_a: nanosleep in 20 ms steps for half of it, then poll_b: poll(NULL, 0, 20)
 *   thread 2  select_d: select() with a 50 ms timeout, the whole time
 *   thread 3  read_e: read() of a pipe that thread 2 writes to when it ends
 * Prints "<function> <nanoseconds>" for each, measured around the calls, and "tid <function>
 * <tid>" for the thread that called it; on stderr "poll_from <ns>", CLOCK_MONOTONIC when
 * thread 1 went from sleep_a to poll_b.
 */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double secs = 1.2;
static int pipefd[2];
static volatile uint64_t sink;
static uint64_t t_sleep, t_poll, t_select, t_read, t_work, t_join;
static uint64_t poll_from; /* CLOCK_MONOTONIC when thread 1 went from sleep_a to poll_b */
static long tid1, tid2, tid3;

static uint64_t now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static void sleep_a(uint64_t end)
{
	struct timespec ts = {0, 20000000};

	while (now() < end)
		nanosleep(&ts, NULL);
}

__attribute__((noinline)) static void poll_b(uint64_t end)
{
	while (now() < end)
		poll(NULL, 0, 20);
}

static void *thread1(void *arg)
{
	uint64_t t0 = now(), half = t0 + (uint64_t)(secs * 0.5e9), t1;

	tid1 = syscall(SYS_gettid);
	sleep_a(half);
	t1 = now();
	t_sleep = t1 - t0;
	poll_from = t1;
	poll_b(t0 + (uint64_t)(secs * 1e9));
	t_poll = now() - t1;
	return NULL;
}

__attribute__((noinline)) static void select_d(uint64_t end)
{
	while (now() < end) {
		struct timeval tv = {0, 50000};

		select(0, NULL, NULL, NULL, &tv);
	}
}

static void *thread2(void *arg)
{
	uint64_t t0 = now();

	tid2 = syscall(SYS_gettid);
	select_d(t0 + (uint64_t)(secs * 1e9));
	t_select = now() - t0;
	if (write(pipefd[1], "x", 1) != 1)
		abort();
	return NULL;
}

__attribute__((noinline)) static void read_e(void)
{
	char c;

	if (read(pipefd[0], &c, 1) != 1)
		abort();
}

static void *thread3(void *arg)
{
	uint64_t t0 = now();

	tid3 = syscall(SYS_gettid);
	read_e();
	t_read = now() - t0;
	return NULL;
}

__attribute__((noinline)) static void work_main(uint64_t end)
{
	uint64_t x = 1;

	while (now() < end)
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005ull + 1;
	sink = x;
}

__attribute__((noinline, noipa)) static void join_all(pthread_t *t, int n)
{
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
}

int main(int argc, char **argv)
{
	pthread_t t[3];
	uint64_t t0, t1;

	if (argc > 1)
		secs = atof(argv[1]);
	if (pipe(pipefd))
		return 1;
	pthread_create(&t[0], NULL, thread1, NULL);
	pthread_create(&t[1], NULL, thread2, NULL);
	pthread_create(&t[2], NULL, thread3, NULL);
	t0 = now();
	work_main(t0 + (uint64_t)(secs * 1e9 / 3));
	t1 = now();
	t_work = t1 - t0;
	join_all(t, 3);
	t_join = now() - t1;
	printf("sleep_a %llu\npoll_b %llu\nselect_d %llu\nread_e %llu\nwork_main %llu\n"
	       "join_all %llu\n",
	       (unsigned long long)t_sleep, (unsigned long long)t_poll,
	       (unsigned long long)t_select, (unsigned long long)t_read, (unsigned long long)t_work,
	       (unsigned long long)t_join);
	/* on stderr: the readers of stdout take each of its lines for a function */
	fprintf(stderr, "poll_from %llu\n", (unsigned long long)poll_from);
	printf("tid sleep_a %ld\ntid poll_b %ld\ntid select_d %ld\ntid read_e %ld\n"
	       "tid join_all %ld\ntid work_main %ld\n",
	       tid1, tid1, tid2, tid3, (long)syscall(SYS_gettid), (long)syscall(SYS_gettid));
	return 0;
}
