// SPDX-License-Identifier: MIT
/*
 * agent/lib/sigctl.c — see sigctl.h. The interposed calls run in the program's threads, maybe in
 * its signal handlers (sigaction is async-signal-safe): no locks, no allocation here either.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/lib/sigctl.h"

#define EP_API __attribute__((visibility("default")))

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef void (*handler_fn)(int);

typedef int (*sigmask_fn)(int, const sigset_t *, sigset_t *);

static sigaction_fn real_sigaction;
static sigmask_fn real_pthread_sigmask, real_sigprocmask;
static handler_fn (*real_signal)(int, handler_fn), (*real_bsd_signal)(int, handler_fn);
static handler_fn (*real_sysv_signal)(int, handler_fn), (*real_sigset)(int, handler_fn);
static int owned_sig;		     /* the sampler's signal while we own it, else 0 */
static struct sigaction prog_act;    /* the program's disposition of it (SIG_DFL or SIG_IGN) */
static void (*step_aside_fn)(void);
static uint64_t masked_sigs;	     /* handlers we added owned_sig to the sa_mask of */
static struct sigctl_stats sstats;
static char cookie;
static __thread __attribute__((tls_model("initial-exec"))) bool blocking_counted;

/*
 * glibc's own functions behind ours, all looked up at once (dlsym takes the loader's lock: not
 * something to do first inside a program's signal handler).
 */
static bool resolve(void)
{
	if (real_sigaction)
		return true;
	*(void **)&real_pthread_sigmask = dlsym(RTLD_NEXT, "pthread_sigmask");
	*(void **)&real_sigprocmask = dlsym(RTLD_NEXT, "sigprocmask");
	*(void **)&real_signal = dlsym(RTLD_NEXT, "signal");
	*(void **)&real_bsd_signal = dlsym(RTLD_NEXT, "bsd_signal");
	*(void **)&real_sysv_signal = dlsym(RTLD_NEXT, "sysv_signal");
	*(void **)&real_sigset = dlsym(RTLD_NEXT, "sigset");
	*(void **)&real_sigaction = dlsym(RTLD_NEXT, "sigaction");
	return real_sigaction != NULL;
}

void *sigctl__cookie(void)
{
	return &cookie;
}

int sigctl__choose(void)
{
	const char *v = getenv("EDGEPROF_SIGNAL");
#ifdef CONFIG_SAMPLER_RT_SIGNAL_FROM_MAX
	int rt = SIGRTMAX - CONFIG_SAMPLER_RT_SIGNAL_FROM_MAX;
#else
	int rt = SIGRTMAX - 2;
#endif /* CONFIG_SAMPLER_RT_SIGNAL_FROM_MAX */

	if (v && !strcmp(v, "prof"))
		return SIGPROF;
	if (v && !strcmp(v, "rt"))
		return rt;
	if (v && atoi(v) > 0 && atoi(v) < NSIG && atoi(v) != SIGKILL && atoi(v) != SIGSTOP)
		return atoi(v);
	return IS_ENABLED(CONFIG_SAMPLER_SIGNAL_RT) ? rt : SIGPROF;
}

static bool is_handler(const struct sigaction *sa)
{
	return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

static bool wants_onstack(const struct sigaction *sa)
{
	return is_handler(sa) && (sa->sa_flags & SA_ONSTACK);
}

/* Handlers installed before us on the alternate stack: block the sampler's signal in them. */
static void mask_existing_onstack(int signo)
{
	struct sigaction cur;

	for (int s = 1; s < NSIG && s < 64; s++) {
		if (s == signo || s == SIGKILL || s == SIGSTOP || real_sigaction(s, NULL, &cur))
			continue;
		if (!wants_onstack(&cur) || sigismember(&cur.sa_mask, signo))
			continue;
		sigaddset(&cur.sa_mask, signo);
		if (real_sigaction(s, &cur, NULL) == 0) {
			masked_sigs |= 1ull << s;
			sstats.onstack_masked++;
		}
	}
}

int sigctl__install(int signo, void (*handler)(int, siginfo_t *, void *),
		    void (*step_aside)(void))
{
	struct sigaction sa, cur;

	if (!resolve())
		return -ENOSYS;
	if (real_sigaction(signo, NULL, &cur))
		return -errno;
	if (owned_sig != signo && is_handler(&cur))
		return -EBUSY; /* the program's already: not ours to take */
	if (owned_sig != signo)
		prog_act = cur;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART; /* never SA_ONSTACK: off alternate stacks */
	sigemptyset(&sa.sa_mask);
	if (real_sigaction(signo, &sa, NULL))
		return -errno;
	step_aside_fn = step_aside;
	sstats.signo = signo;
	__atomic_store_n(&owned_sig, signo, __ATOMIC_SEQ_CST);
	mask_existing_onstack(signo);
	return 0;
}

void sigctl__forward(int signo, siginfo_t *si, void *uctx)
{
	sigset_t set;

	__atomic_fetch_add(&sstats.forwarded, 1, __ATOMIC_RELAXED);
	if (prog_act.sa_handler == SIG_IGN)
		return;
	/*
	 * SIG_DFL: the default action of SIGPROF and of the real-time signals is to terminate.
	 * Do exactly that, by the signal itself, so the parent sees the same status.
	 */
	real_sigaction(signo, &prog_act, NULL);
	sigemptyset(&set);
	sigaddset(&set, signo);
	real_sigprocmask(SIG_UNBLOCK, &set, NULL);
	syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), signo);
}

void sigctl__note_mask(const sigset_t *set)
{
	int sig = __atomic_load_n(&owned_sig, __ATOMIC_RELAXED);

	if (!sig || blocking_counted || !sigismember(set, sig))
		return;
	blocking_counted = true;
	__atomic_fetch_add(&sstats.threads_blocking, 1, __ATOMIC_RELAXED);
}

static void noted_mask(int how, const sigset_t *set)
{
	if (set && (how == SIG_BLOCK || how == SIG_SETMASK))
		sigctl__note_mask(set);
}

EP_API int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	int rc;

	if (!resolve() || !real_pthread_sigmask)
		return ENOSYS;
	rc = real_pthread_sigmask(how, set, old);
	if (!rc)
		noted_mask(how, set);
	return rc;
}

EP_API int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	int rc;

	if (!resolve() || !real_sigprocmask) {
		errno = ENOSYS;
		return -1;
	}
	rc = real_sigprocmask(how, set, old);
	if (!rc)
		noted_mask(how, set);
	return rc;
}

void sigctl__stats(struct sigctl_stats *st)
{
	*st = sstats;
}

/* The program sets or asks the disposition of our signal: it gets its own, recorded one. */
static int virtual_action(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction prev = prog_act;

	if (act && is_handler(act)) {
		/* the program claims the signal: stop sampling, then hand it over as given */
		__atomic_store_n(&owned_sig, 0, __ATOMIC_SEQ_CST);
		sstats.stepped_aside++;
		if (step_aside_fn)
			step_aside_fn();
		if (real_sigaction(sig, act, NULL))
			return -1;
	} else if (act) {
		prog_act = *act;
	}
	if (old)
		*old = prev;
	return 0;
}

EP_API int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int owned = __atomic_load_n(&owned_sig, __ATOMIC_SEQ_CST);
	struct sigaction fixed;
	bool was_masked, mask = false;
	int rc;

	if (!resolve()) {
		errno = ENOSYS;
		return -1;
	}
	if (owned && sig == owned)
		return virtual_action(sig, act, old);
	was_masked = sig > 0 && sig < 64 && (masked_sigs >> sig & 1);
	if (owned && act && wants_onstack(act) && !sigismember(&act->sa_mask, owned)) {
		fixed = *act;
		sigaddset(&fixed.sa_mask, owned);
		act = &fixed;
		mask = true;
	}
	rc = real_sigaction(sig, act, old);
	if (rc || sig <= 0 || sig >= 64)
		return rc;
	if (old && was_masked && owned)
		sigdelset(&old->sa_mask, owned); /* the program sees the mask it gave */
	if (act) {
		masked_sigs = mask ? masked_sigs | 1ull << sig : masked_sigs & ~(1ull << sig);
		sstats.onstack_masked += mask;
	}
	return rc;
}

/* signal() and its kin: only the sampler's signal needs us; others go to glibc as they are. */
static handler_fn own_signal(int sig, handler_fn h, handler_fn (*real)(int, handler_fn))
{
	struct sigaction act;
	handler_fn prev = prog_act.sa_handler;

	if (!real) {
		errno = ENOSYS;
		return SIG_ERR;
	}
	if (!sig || __atomic_load_n(&owned_sig, __ATOMIC_SEQ_CST) != sig || h == SIG_ERR ||
	    h == (handler_fn)2 /* SIG_HOLD */)
		return real(sig, h);
	if (h != SIG_DFL && h != SIG_IGN) {
		/* the program claims the signal: step aside, then glibc's call with its flags */
		__atomic_store_n(&owned_sig, 0, __ATOMIC_SEQ_CST);
		sstats.stepped_aside++;
		if (step_aside_fn)
			step_aside_fn();
		return real(sig, h) == SIG_ERR ? SIG_ERR : prev;
	}
	memset(&act, 0, sizeof(act));
	act.sa_handler = h;
	sigemptyset(&act.sa_mask);
	sigaddset(&act.sa_mask, sig);
	act.sa_flags = SA_RESTART;
	prog_act = act;
	return prev;
}

#define OWN_SIGNAL(name)                                                                        \
	EP_API handler_fn name(int sig, handler_fn h)                                           \
	{                                                                                       \
		resolve();                                                                      \
		return own_signal(sig, h, real_##name);                                         \
	}

OWN_SIGNAL(signal)
OWN_SIGNAL(bsd_signal)
OWN_SIGNAL(sysv_signal)
OWN_SIGNAL(sigset)
