/* SPDX-License-Identifier: MIT */
/*
 * agent/lib/sigctl.h — the sampler's signal, kept out of the program's way.
 *
 * The sampler's timers deliver a signal the program does not use (CONFIG_SAMPLER_SIGNAL_RT:
 * SIGRTMAX - CONFIG_SAMPLER_RT_SIGNAL_FROM_MAX) or SIGPROF (CONFIG_SAMPLER_SIGNAL_PROF), or
 * what EDGEPROF_SIGNAL names ("prof", "rt", or a number). The library interposes sigaction(),
 * signal(), bsd_signal() and sysv_signal(), so that for the program:
 *
 * - the sampler's signal keeps the disposition the program gave it: SIG_DFL and SIG_IGN are
 *   recorded (a daemon resetting every signal does not kill itself) and honoured for every
 *   instance of the signal that is not one of our timer expiries (identified by si_code
 *   SI_TIMER and our cookie in si_value); queries return the program's disposition;
 * - when the program installs a handler for it, the sampler steps aside: its timers are
 *   deleted, the program's handler installed as given, and that is counted (stepped_aside);
 * - handlers installed with SA_ONSTACK get the sampler's signal added to their sa_mask, so a
 *   sample never lands on the program's alternate stack (counted: onstack_masked); those
 *   installed before the library started are fixed at start.
 *
 * A program that installs handlers by raw syscall bypasses all this.
 */
#ifndef EDGEPROF_AGENT_SIGCTL_H
#define EDGEPROF_AGENT_SIGCTL_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

struct sigctl_stats {
	int signo;		  /* the sampler's signal */
	uint64_t stepped_aside;	  /* 1 when the program claimed the signal: sampling stopped */
	uint64_t onstack_masked;  /* SA_ONSTACK handlers the signal was blocked in */
	uint64_t forwarded;	  /* instances not ours, given the program's disposition */
	uint64_t threads_blocking; /* threads that blocked it (their CPU time goes unsampled) */
};

/* The signal to use (Kconfig, or EDGEPROF_SIGNAL): a number. */
int sigctl__choose(void);

/*
 * Takes over signo with handler (SA_SIGINFO, no SA_ONSTACK); step_aside is called (outside any
 * handler) when the program later installs a handler of its own. -EBUSY when the program
 * already has one: then the sampler must not start.
 */
int sigctl__install(int signo, void (*handler)(int, siginfo_t *, void *),
		    void (*step_aside)(void));

/* The sigev_value our timers carry: compare si_value.sival_ptr to it. */
void *sigctl__cookie(void);

/* In the handler: si is one of our timer expiries. */
static inline bool sigctl__is_ours(const siginfo_t *si)
{
	return si->si_code == SI_TIMER && si->si_value.sival_ptr == sigctl__cookie();
}

/* In the handler, for an instance that is not ours: what the program's disposition says. */
void sigctl__forward(int signo, siginfo_t *si, void *uctx);

/*
 * The calling thread's signal mask is now *set (a thread that started with it, say): counts
 * the thread once if it blocks the sampler's signal. sigprocmask() and pthread_sigmask() are
 * interposed and call it too.
 */
void sigctl__note_mask(const sigset_t *set);

void sigctl__stats(struct sigctl_stats *st);

#endif /* EDGEPROF_AGENT_SIGCTL_H */
