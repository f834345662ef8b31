// SPDX-License-Identifier: MIT
/*
 * pprof/merge-parallel.c — merging many inputs is mostly decoding (gunzip + wire decode), and
 * each input decodes on its own: workers decode ahead while the caller's thread merges in input
 * order (and decodes too whenever the input it needs is not ready), so the result is the same as
 * the sequential merge. At most 2 × threads decoded inputs wait at once, so memory stays the
 * merged tables plus a bounded window of inputs.
 *
 * Under a budget (pprof_merger__set_budget()) a decode ahead that the budget refuses is not
 * the merge's failure: decoding ahead stops, the inputs decoded ahead are given back (once
 * those in flight are done), and each input is decoded in turn by the merging thread, as the
 * sequential merge would. Only a refusal then ends the merge: memory that is tight makes a
 * merge serial before it makes it fail.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprof/internal.h"

#define MAX_THREADS 16

struct slot {
	bool ready;
	bool again;	/* decoded ahead, refused by the budget: decode again in turn */
	int ret;
	struct pprof_profile *p;
	char err[256];
};

struct pool {
	pprof_load_fn load;
	void *ctx;
	const struct pprof_budget *budget; /* the merger's: decoded inputs are charged to it */
	size_t n, next_load, merged, window;
	bool stop;
	bool tight;	/* the budget refused a decode ahead: no more of them */
	struct slot *slots;
	pthread_mutex_t lock;
	pthread_cond_t ready, space;
};

/* Under pl->lock: the next input to decode, if the window has room for it; else pl->n. */
static size_t claim(struct pool *pl)
{
	if (pl->stop || pl->next_load >= pl->n || pl->next_load - pl->merged >= pl->window ||
	    (pl->tight && pl->next_load > pl->merged))
		return pl->n;
	return pl->next_load++;
}

/* Whether ret is a budget's refusal (that a serial merge may not meet). */
static bool refused(const struct pool *pl, int ret)
{
	return pl->budget && (ret == -EFBIG || ret == -EAGAIN);
}

/* Decodes claimed input i into its slot (without the lock), then marks it ready (with it). */
static void decode(struct pool *pl, size_t i)
{
	struct slot *s = &pl->slots[i % pl->window];

	pthread_mutex_unlock(&pl->lock);
	s->err[0] = '\0';
	s->ret = pl->load(pl->ctx, i, pl->budget, &s->p, s->err, sizeof(s->err));
	pthread_mutex_lock(&pl->lock);
	s->again = refused(pl, s->ret) && i != pl->merged;
	pl->tight = pl->tight || s->again;
	s->ready = true;
	pthread_cond_broadcast(&pl->ready);
}

static void *worker(void *arg)
{
	struct pool *pl = arg;
	size_t i;

	pthread_mutex_lock(&pl->lock);
	for (;;) {
		while ((i = claim(pl)) == pl->n && !pl->stop && pl->next_load < pl->n)
			pthread_cond_wait(&pl->space, &pl->lock);
		if (i == pl->n)
			break;
		decode(pl, i);
	}
	pthread_mutex_unlock(&pl->lock);
	return NULL;
}

/*
 * Decoding ahead stops; the inputs after i decoded ahead are freed, their charges given back,
 * and marked to be decoded again in turn. Returns how many inputs after i had been claimed:
 * each held charges at some point, if only while it decoded and was then refused, so a
 * refusal of i beside any of them may not be the serial merge's.
 */
static size_t make_serial(struct pool *pl, size_t i)
{
	size_t ahead = 0;

	pthread_mutex_lock(&pl->lock);
	pl->tight = true;
	for (size_t k = i + 1; k < pl->next_load; k++) {
		struct slot *s = &pl->slots[k % pl->window];

		while (!s->ready)
			pthread_cond_wait(&pl->ready, &pl->lock);
		if (!s->again) {
			pprof_profile__free_budget(s->p, pl->budget);
			s->p = NULL;
			s->again = true;
		}
		ahead++;
	}
	pthread_mutex_unlock(&pl->lock);
	return ahead;
}

/* Merges slot s's input, or says why it has none: 0 or the error (err filled). */
static int merge_one(struct pprof_merger *m, struct slot *s, char *err, size_t errlen)
{
	if (s->ret) {
		snprintf(err, errlen, "%s", s->err[0] ? s->err : strerror(-s->ret));
		return s->ret;
	}
	return pprof_merger__add(m, s->p, err, errlen);
}

/*
 * Waits for input i, merges it, frees it: 0 or the error (err filled). Rather than sleep while
 * i decodes, this thread decodes the next unclaimed input itself: on a busy machine a sleeping
 * thread waits for a CPU to wake up on, and with no worker at all it decodes everything.
 */
static int merge_next(struct pool *pl, struct pprof_merger *m, size_t i, char *err, size_t errlen)
{
	struct slot *s = &pl->slots[i % pl->window];
	size_t j;
	int ret;

	pthread_mutex_lock(&pl->lock);
	while (!s->ready) {
		if ((j = claim(pl)) < pl->n)
			decode(pl, j);
		else
			pthread_cond_wait(&pl->ready, &pl->lock);
	}
	pthread_mutex_unlock(&pl->lock);
	if (s->again) { /* every input before i is merged and given back now */
		make_serial(pl, i);
		s->err[0] = '\0';
		s->ret = pl->load(pl->ctx, i, pl->budget, &s->p, s->err, sizeof(s->err));
		s->again = false;
	}
	ret = merge_one(m, s, err, errlen);
	/*
	 * Refused (its decode, or the merger's growth) beside inputs decoded ahead, or in flight
	 * (their partial charges are given back when they are refused in turn): once more without
	 * them. A refusal then is the serial merge's own.
	 */
	if (refused(pl, ret) && make_serial(pl, i)) {
		if (!s->p) {
			s->err[0] = '\0';
			s->ret = pl->load(pl->ctx, i, pl->budget, &s->p, s->err, sizeof(s->err));
		}
		ret = merge_one(m, s, err, errlen);
	}
	pprof_profile__free_budget(s->p, pl->budget);
	pthread_mutex_lock(&pl->lock);
	s->p = NULL;
	s->ready = false;
	pl->merged++;
	pthread_cond_broadcast(&pl->space);
	pthread_mutex_unlock(&pl->lock);
	return ret;
}

static unsigned pick_threads(unsigned threads, size_t n)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (!threads)
		threads = cpus > 0 ? (unsigned)cpus : 1;
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	return threads > n ? (unsigned)n : threads;
}

int pprof_merger__add_all(struct pprof_merger *m, size_t n, unsigned threads,
			  pprof_load_fn load, void *ctx, size_t *failed, char *err, size_t errlen)
{
	pthread_t tids[MAX_THREADS];
	struct pool pl = { .load = load, .ctx = ctx, .n = n, .budget = pp_merger_budget(m) };
	unsigned started = 0;
	size_t i;
	int ret = 0;

	threads = pick_threads(threads, n);
	pl.window = 2 * (size_t)(threads ? threads : 1);
	pl.slots = calloc(pl.window, sizeof(*pl.slots));
	if (!pl.slots)
		return -ENOMEM;
	pthread_mutex_init(&pl.lock, NULL);
	pthread_cond_init(&pl.ready, NULL);
	pthread_cond_init(&pl.space, NULL);
	/* If threads cannot be made (a tight rlimit), merge_next() decodes every input. */
	for (; started < threads; started++)
		if (pthread_create(&tids[started], NULL, worker, &pl))
			break;
	for (i = 0; i < n && !ret; i++)
		ret = merge_next(&pl, m, i, err, errlen);
	if (failed)
		*failed = ret ? i - 1 : n;
	pthread_mutex_lock(&pl.lock);
	pl.stop = true;
	pthread_cond_broadcast(&pl.space);
	pthread_mutex_unlock(&pl.lock);
	for (unsigned t = 0; t < started; t++)
		pthread_join(tids[t], NULL);
	for (i = 0; i < pl.window; i++)
		pprof_profile__free_budget(pl.slots[i].p, pl.budget);
	free(pl.slots);
	pthread_cond_destroy(&pl.space);
	pthread_cond_destroy(&pl.ready);
	pthread_mutex_destroy(&pl.lock);
	return ret;
}
