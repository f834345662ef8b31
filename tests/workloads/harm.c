// SPDX-License-Identifier: MIT
/*
 * tests/workloads/harm.c — programs a signal sampler must not harm, one per mode; each behaves
 * the same with and without the profiler, prints a deterministic result line (compared by the
 * harm suite, tests/integration/sigprof-harm.test.sh) and exits 0 when its own checks pass.
 *
 *   harm iconv SECONDS       charset conversions (glibc loads/unloads gconv modules itself)
 *                            while another thread dlopen()s and dlclose()s libz
 *   harm sigreset            resets every signal to SIG_DFL (a daemon's start), then works
 *   harm itimer              profiles itself with setitimer(ITIMER_PROF): ticks match its CPU
 *   harm altstack BYTES      a SA_ONSTACK handler using most of a BYTES alternate stack
 *                            (guard page below it), raised again and again
 *   harm stackmargin BYTES   a thread that works with only BYTES of its stack left
 *   harm stackuse            the sampler's stack use beyond the kernel's signal frame
 *   harm dlloop SECONDS      dlopen/dlclose of libz in 2 threads, with work between
 *   harm cancel SECONDS      pthread_cancel of working threads (forced unwinding via libgcc)
 *   harm backtrace SECONDS   glibc backtrace() in 2 threads
 *   harm threads N           N short threads created and joined, 4 at a time
 *   harm forkexec N          N fork+exec of /bin/true
 *   harm execchain N         execve()s itself N times, working 2 ms in each image
 *   harm eintr SECONDS [naive]  6 threads sleep, poll, select, epoll_wait, usleep and
 *                            clock_nanosleep 1 ms at a time between bits of work, and fail on
 *                            EINTR or a sleep cut short (they do not retry: many programs do
 *                            not). "naive": the control, a wall sampler that signals every
 *                            thread (SA_RESTART handler, a 1 kHz CLOCK_MONOTONIC timer per
 *                            thread): it must fail
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <iconv.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;
static volatile uint64_t sink;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

__attribute__((noinline)) static uint64_t burn(uint64_t n)
{
	uint64_t x = n;

	for (uint64_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ull + i;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

static void burn_for(double secs)
{
	double end = now() + secs;

	while (now() < end)
		sink += burn(20000);
}

/* ---- iconv: gconv modules come and go while another thread dlopens ---------------------- */

static void *dl_loop(void *arg)
{
	uint64_t *n = arg;

	while (!stop) {
		void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);

		if (h) {
			usleep(5000);
			dlclose(h);
			(*n)++;
		}
		usleep(5000);
	}
	return NULL;
}

static int mode_iconv(double secs)
{
	static const char *const sets[] = {"ISO-8859-2", "KOI8-R",   "CP1251", "EUC-JP",
					   "SHIFT_JIS",  "BIG5",     "GB18030", "IBM037",
					   "ISO-8859-7", "UTF-16LE", "CP1252",  "EUC-KR"};
	static char text[8192], out[65536];
	uint64_t dls = 0, conv = 0;
	pthread_t th;
	double end = now() + secs;
	int bad = 0;

	/* text every charset above can hold: time goes to the modules' conversion loops */
	for (size_t i = 0; i + 1 < sizeof(text); i++)
		text[i] = (char)('a' + i % 26);
	pthread_create(&th, NULL, dl_loop, &dls);
	for (unsigned int i = 0; now() < end; i++) {
		iconv_t cd = iconv_open(sets[i % 12], "UTF-8");
		char *in = text, *o = out;
		size_t il = sizeof(text) - 1, ol = sizeof(out);

		if (cd == (iconv_t)-1)
			continue;
		for (int r = 0; r < 4; r++) {
			in = text, il = sizeof(text) - 1, o = out, ol = sizeof(out);
			bad |= iconv(cd, &in, &il, &o, &ol) == (size_t)-1;
		}
		iconv_close(cd);
		conv++;
	}
	stop = 1;
	pthread_join(th, NULL);
	printf("iconv ok=%d\n", !bad && conv > 0 && dls > 0);
	return bad || !conv || !dls;
}

/* ---- signals: the program's own SIGPROF and dispositions --------------------------------- */

static int mode_sigreset(void)
{
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	burn_for(1.0);
	printf("sigreset ok\n");
	return 0;
}

static volatile uint64_t prof_ticks;

static void on_prof(int sig)
{
	prof_ticks++;
}

static int mode_itimer(void)
{
	struct itimerval it = {{0, 10000}, {0, 10000}};
	double c0 = cpu_seconds(), cpu;
	uint64_t want;

	signal(SIGPROF, on_prof);
	setitimer(ITIMER_PROF, &it, NULL);
	burn_for(1.0);
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_PROF, &it, NULL);
	cpu = cpu_seconds() - c0;
	want = (uint64_t)(cpu / 0.010);
	/*
	 * The kernel charges ITIMER_PROF by ticks, which on a loaded machine gives up to ~1.4x
	 * the precise CPU time; a sampler's timers delivering SIGPROF too gave 3.5x.
	 */
	int ok = prof_ticks >= want / 2 && prof_ticks <= want * 2 + 3;

	printf("itimer ok=%d\n", ok);
	if (!ok)
		fprintf(stderr, "itimer: %llu ticks for %.3f s of CPU (%llu expected)\n",
			(unsigned long long)prof_ticks, cpu, (unsigned long long)want);
	return !ok;
}

/* A page that faults when touched: stack overruns are a SIGSEGV, not silent corruption. */
static char *guarded(size_t bytes)
{
	long pg = sysconf(_SC_PAGESIZE);
	size_t len = (bytes + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
	char *p = mmap(NULL, len + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		exit(3);
	mprotect(p, (size_t)pg, PROT_NONE);
	/* the usable area ends exactly at the guard page */
	return p + pg;
}

static size_t alt_use;
static volatile uint64_t alt_runs;

__attribute__((noinline)) static uint64_t use_stack(size_t bytes)
{
	volatile char *buf = __builtin_alloca(bytes);

	for (size_t i = 0; i < bytes; i += 64)
		buf[i] = (char)i;
	return burn(200000) + buf[bytes / 2];
}

static void on_usr1(int sig)
{
	sink += use_stack(alt_use);
	alt_runs++;
}

static int mode_altstack(size_t bytes)
{
	stack_t ss = {.ss_sp = guarded(bytes), .ss_size = bytes};
	struct sigaction sa;
	double end = now() + 1.0;

	/* what the handler needs without a profiler: the stack less 2.5 KiB for the kernel's
	 * frame (3.4 KiB with AVX-512 state: AT_MINSIGSTKSZ) and the handler's own frames */
	alt_use = bytes - 4096 - 1024;
	if (sigaltstack(&ss, NULL))
		return 3;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR1, &sa, NULL);
	while (now() < end)
		raise(SIGUSR1);
	printf("altstack ok\n");
	return alt_runs == 0;
}

/* ---- stacks -------------------------------------------------------------------------------- */

struct margin {
	char *lo;
	size_t left;
	double secs;
};

__attribute__((noinline)) static uint64_t spin_leaf(double secs)
{
	uint64_t x = 1;
	double end = now() + secs;

	/* a leaf: no calls but now(), every 2^20 rounds */
	for (;;) {
		for (int i = 0; i < (1 << 20); i++) {
			x = x * 6364136223846793005ull + (uint64_t)i;
			__asm__ volatile("" : "+r"(x));
		}
		if (now() > end)
			break;
	}
	return x;
}

static void *margin_thread(void *arg)
{
	struct margin *m = arg;
	char here;
	size_t use = (size_t)(&here - m->lo) - m->left;
	volatile char *buf = __builtin_alloca(use);

	buf[0] = 0;
	sink += spin_leaf(m->secs) + buf[0];
	return NULL;
}

static void run_on_stack(char *lo, size_t size, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t th;

	pthread_attr_init(&attr);
	pthread_attr_setstack(&attr, lo, size);
	if (pthread_create(&th, &attr, fn, arg))
		exit(3);
	pthread_join(th, NULL);
	pthread_attr_destroy(&attr);
}

static int mode_stackmargin(size_t left)
{
	size_t size = 256 * 1024;
	struct margin m = {guarded(size), left, 1.0};

	run_on_stack(m.lo, size, margin_thread, &m);
	printf("stackmargin ok\n");
	return 0;
}

#define PAINT 0xa5
static uintptr_t probe_low = UINTPTR_MAX;

static void on_probe(int sig)
{
	char here;

	probe_low = (uintptr_t)&here;
}

struct paint {
	char *lo;
	size_t size;
	uintptr_t sp;
};

static void *paint_thread(void *arg)
{
	struct paint *p = arg;
	char here;

	p->sp = (uintptr_t)&here;
	raise(SIGUSR2); /* the kernel's frame and a minimal handler's, for comparison */
	sink += spin_leaf(1.0);
	return NULL;
}

/*
 * Stack use of signal handlers on a painted stack: the lowest byte touched below a working
 * leaf, beside the same for a minimal handler of our own (kernel frame + a few bytes).
 */
static int mode_stackuse(void)
{
	struct paint p = {guarded(256 * 1024), 256 * 1024, 0};
	size_t low;

	signal(SIGUSR2, on_probe);
	memset(p.lo, PAINT, p.size);
	run_on_stack(p.lo, p.size, paint_thread, &p);
	for (low = 0; low < p.size && (unsigned char)p.lo[low] == PAINT; low++)
		;
	uintptr_t lowest = (uintptr_t)p.lo + low;
	long kernel = (long)(p.sp - probe_low), all = (long)(p.sp - lowest);

	printf("stackuse ok\n");
	fprintf(stderr, "stackuse: minimal handler %ld B below the thread's frame, deepest %ld B: "
			"handlers beyond the kernel's frame %ld B\n",
		kernel, all, all - kernel);
	printf("handler_extra_bytes=%ld\n", all - kernel);
	return 0;
}

/* ---- deadlock hunters ---------------------------------------------------------------------- */

static void *dl_worker(void *arg)
{
	double end = now() + *(double *)arg;
	int n = 0;

	while (now() < end) {
		void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);

		sink += burn(3000);
		if (h)
			dlclose(h), n++;
	}
	return (void *)(intptr_t)(n > 0);
}

static void *bt_worker(void *arg)
{
	double end = now() + *(double *)arg;
	void *frames[64];
	int ok = 1;

	while (now() < end) {
		ok &= backtrace(frames, 64) > 2;
		sink += burn(3000);
	}
	return (void *)(intptr_t)ok;
}

static int two_threads(void *(*fn)(void *), double secs, const char *name)
{
	pthread_t th[2];
	void *r0, *r1;

	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, fn, &secs);
	pthread_join(th[0], &r0);
	pthread_join(th[1], &r1);
	printf("%s ok=%d\n", name, r0 && r1);
	return !(r0 && r1);
}

static void *cancel_victim(void *arg)
{
	for (;;) {
		sink += burn(2000);
		pthread_testcancel();
	}
	return NULL;
}

static int mode_cancel(double secs)
{
	double end = now() + secs;
	int n = 0, bad = 0;

	while (now() < end) {
		pthread_t th;
		void *r;

		pthread_create(&th, NULL, cancel_victim, NULL);
		usleep(1000);
		pthread_cancel(th);
		pthread_join(th, &r);
		bad |= r != PTHREAD_CANCELED;
		n++;
	}
	printf("cancel ok=%d\n", !bad && n > 0);
	return bad;
}

static void *short_thread(void *arg)
{
	sink += burn(20000);
	return arg;
}

static int mode_threads(int n)
{
	int bad = 0;

	for (int i = 0; i < n; i += 4) {
		pthread_t th[4];
		void *r;

		for (int j = 0; j < 4; j++)
			pthread_create(&th[j], NULL, short_thread, (void *)(intptr_t)(i + j));
		for (int j = 0; j < 4; j++) {
			pthread_join(th[j], &r);
			bad |= r != (void *)(intptr_t)(i + j);
		}
	}
	printf("threads ok=%d\n", !bad);
	return bad;
}

static int mode_forkexec(int n)
{
	int bad = 0;

	for (int i = 0; i < n; i++) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		sink += burn(20000);
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	printf("forkexec ok=%d\n", !bad);
	return bad;
}

static int mode_execchain(char *self, int n)
{
	char num[16];

	burn_for(0.002);
	if (n <= 0) {
		printf("execchain ok\n");
		return 0;
	}
	snprintf(num, sizeof(num), "%d", n - 1);
	char *argv[] = {self, "execchain", num, NULL};

	execv("/proc/self/exe", argv);
	perror("execv");
	return 1;
}

/* ---- eintr: blocking calls that do not retry ---------------------------------------------- */

static int naive;
static double naive_secs;
static volatile int eintr_fail;

static void on_naive(int sig)
{
}

/* The control: what a wall sampler signalling every thread on a wall-clock timer does. */
static void naive_timer(void)
{
	struct sigevent sev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGRTMIN + 1};
	struct itimerspec its = {{0, 1000000}, {0, 1000000}};
	timer_t t;

	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	if (naive && !timer_create(CLOCK_MONOTONIC, &sev, &t))
		timer_settime(t, 0, &its, NULL);
}

/* One blocking call of about 1 ms by kind: 0 when it returned as a call without signals does. */
static int block_1ms(int kind, int ep)
{
	struct timespec ts = {0, 1000000}, t0, t1;
	struct timeval tv = {0, 1000};
	struct epoll_event ev;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	switch (kind) {
	case 0:
		rc = nanosleep(&ts, NULL);
		break;
	case 1:
		rc = poll(NULL, 0, 1);
		break;
	case 2:
		rc = select(0, NULL, NULL, NULL, &tv);
		break;
	case 3:
		rc = epoll_wait(ep, &ev, 1, 1);
		break;
	case 4:
		rc = usleep(1000);
		break;
	default:
		rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
		break;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* a timeout returns 0 (clock_nanosleep: 0, not -1), after the whole millisecond */
	if (rc != 0)
		return -1;
	return (t1.tv_sec - t0.tv_sec) * 1000000000l + (t1.tv_nsec - t0.tv_nsec) < 999000 ? -1 : 0;
}

static void *eintr_worker(void *arg)
{
	int kind = (int)(intptr_t)arg, ep = epoll_create1(0);
	double end = now() + naive_secs;

	naive_timer();
	while (now() < end && !eintr_fail) {
		if (block_1ms(kind, ep)) {
			eintr_fail = 1;
			fprintf(stderr, "eintr: kind %d: errno %d (%s)\n", kind, errno,
				strerror(errno));
		}
		sink += burn(20000); /* some work: CPU samples land between the calls */
	}
	close(ep);
	return NULL;
}

static int mode_eintr(double secs, int naive_mode)
{
	struct sigaction sa = {.sa_handler = on_naive, .sa_flags = SA_RESTART};
	pthread_t th[6];

	naive = naive_mode;
	naive_secs = secs;
	if (naive)
		sigaction(SIGRTMIN + 1, &sa, NULL);
	for (int i = 0; i < 6; i++)
		pthread_create(&th[i], NULL, eintr_worker, (void *)(intptr_t)i);
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	printf("eintr %s\n", eintr_fail ? "FAILED" : "ok");
	return eintr_fail;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	double secs = argc > 2 ? atof(argv[2]) : 1.0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(m, "iconv"))
		return mode_iconv(secs);
	if (!strcmp(m, "sigreset"))
		return mode_sigreset();
	if (!strcmp(m, "itimer"))
		return mode_itimer();
	if (!strcmp(m, "altstack"))
		return mode_altstack(argc > 2 ? (size_t)atol(argv[2]) : 10240);
	if (!strcmp(m, "stackmargin"))
		return mode_stackmargin(argc > 2 ? (size_t)atol(argv[2]) : 4096);
	if (!strcmp(m, "stackuse"))
		return mode_stackuse();
	if (!strcmp(m, "dlloop"))
		return two_threads(dl_worker, secs, "dlloop");
	if (!strcmp(m, "backtrace"))
		return two_threads(bt_worker, secs, "backtrace");
	if (!strcmp(m, "cancel"))
		return mode_cancel(secs);
	if (!strcmp(m, "threads"))
		return mode_threads(argc > 2 ? atoi(argv[2]) : 400);
	if (!strcmp(m, "forkexec"))
		return mode_forkexec(argc > 2 ? atoi(argv[2]) : 100);
	if (!strcmp(m, "eintr"))
		return mode_eintr(secs, argc > 3 && !strcmp(argv[3], "naive"));
	if (!strcmp(m, "execchain"))
		return mode_execchain(argv[0], argc > 2 ? atoi(argv[2]) : 50);
	fprintf(stderr, "usage: harm MODE [ARG] (see tests/workloads/harm.c)\n");
	return 2;
}
