// SPDX-License-Identifier: MIT
/*
 * tests/workloads/torture.c — a workload that stresses a signal-based sampler: threads that
 * malloc/free, lock a shared mutex, fork (children exit at once or after a little work), write
 * and read files, load and unload a shared library (dlopen/dlclose of libzstd), and burn CPU, all
 * at once.
 *
 *   torture --seconds N [--threads T]
 *
 * Prints "cpu_ns=<getrusage of the process> forks=<n> ops=<n> dlopens=<n>" at exit; exits 1 if a
 * check of its own (malloc'd data intact, file read back equal) fails.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double seconds = 3;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t shared_counter, forks, ops, dls;
static volatile int failed;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void do_malloc(unsigned int *seed)
{
	void *p[64];

	for (int i = 0; i < 64; i++) {
		size_t n = 16 + rand_r(seed) % 4096;

		p[i] = malloc(n);
		if (!p[i])
			continue;
		memset(p[i], i, n);
		if (((unsigned char *)p[i])[n - 1] != (unsigned char)i)
			failed = 1;
	}
	for (int i = 0; i < 64; i++)
		free(p[i]);
}

__attribute__((noinline)) static void do_lock(void)
{
	for (int i = 0; i < 1000; i++) {
		pthread_mutex_lock(&lock);
		shared_counter++;
		pthread_mutex_unlock(&lock);
	}
}

__attribute__((noinline)) static void do_io(int id)
{
	char path[64], buf[4096], back[4096];
	int fd;

	snprintf(path, sizeof(path), "/tmp/edgeprof-torture-%d-%d", getpid(), id);
	memset(buf, 'a' + id % 26, sizeof(buf));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return;
	for (int i = 0; i < 16; i++)
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf))
			failed = 1;
	if (pread(fd, back, sizeof(back), 4096) != (ssize_t)sizeof(back) ||
	    memcmp(buf, back, sizeof(buf)))
		failed = 1;
	close(fd);
	unlink(path);
}

__attribute__((noinline)) static void do_fork(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		/* the child mallocs and prints (locks inherited in whatever state) then leaves */
		void *p = malloc(100);

		free(p);
		_exit(0);
	}
	if (pid > 0) {
		int st;

		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed = 1;
		__atomic_fetch_add(&forks, 1, __ATOMIC_RELAXED);
	}
}

__attribute__((noinline)) static uint64_t do_cpu(uint64_t x)
{
	for (int i = 0; i < 200000; i++) {
		x = x * 6364136223846793005ull + 1;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

__attribute__((noinline)) static void do_dl(void)
{
	/* a library nobody else here loads, so dlclose really unmaps it */
	void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
	unsigned int (*version)(void);

	if (!h)
		return; /* no zstd here: nothing to load */
	*(void **)&version = dlsym(h, "ZSTD_versionNumber");
	if (!version || !version())
		failed = 1;
	__atomic_fetch_add(&dls, 1, __ATOMIC_RELAXED);
	dlclose(h);
}

static void *worker(void *arg)
{
	unsigned int seed = (unsigned int)(uintptr_t)arg;
	int id = (int)(uintptr_t)arg;
	double end = now() + seconds;
	uint64_t x = 1;

	for (int i = 0; now() < end; i++) {
		do_malloc(&seed);
		do_lock();
		x = do_cpu(x);
		if (i % 8 == 0)
			do_io(id);
		if (i % 16 == id % 16)
			do_dl();
		if (i % 64 == id % 64)
			do_fork();
		__atomic_fetch_add(&ops, 1, __ATOMIC_RELAXED);
	}
	return (void *)(uintptr_t)(x & 1);
}

int main(int argc, char **argv)
{
	int threads = 4;
	pthread_t t[32];
	struct rusage ru;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			threads = atoi(argv[++i]);
	}
	if (threads < 1 || threads > 32)
		threads = 4;
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	if (shared_counter != ops * 1000)
		failed = 1;
	getrusage(RUSAGE_SELF, &ru);
	printf("cpu_ns=%lld forks=%llu ops=%llu dlopens=%llu\n",
	       (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
		   (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL,
	       (unsigned long long)forks, (unsigned long long)ops, (unsigned long long)dls);
	return failed;
}
