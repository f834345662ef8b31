// SPDX-License-Identifier: MIT
/*
 * pprof/read-scratch.c — what one pprof_read needs only while it runs, kept between reads.
 *
 * The collector decodes profile after profile of about the same shape (~3,400 samples, ~715
 * distinct, ~80 KB inflated). Each read grew the merge pass's tables from nothing (a hash table
 * rehashed three times, two arrays reallocated eight times), allocated the inflated input and a
 * libdeflate decompressor, and freed all of it: 3% of the reader's instructions and page faults
 * on the fresh memory. Reads now take a scratch from a small pool and give it back.
 *
 * Bounded: at most CONFIG_PPROF_READ_SCRATCH_KEEP scratches wait in the pool, each of at most
 * CONFIG_PPROF_READ_SCRATCH_KB (a larger one, left by an unusual profile, is freed rather than
 * kept), and one that waits unused for SCRATCH_IDLE_S is freed at the next take or give. The
 * pool is a stack: the busy ones stay on top, the idle ones sink and go.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pprof/internal.h"

#define SCRATCH_IDLE_S 10

static struct {
	pthread_mutex_t lock;
	size_t n;
	struct pp_scratch s[CONFIG_PPROF_READ_SCRATCH_KEEP ? CONFIG_PPROF_READ_SCRATCH_KEEP : 1];
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

static size_t scratch_bytes(const struct pp_scratch *s)
{
	return s->ht.cap * sizeof(*s->ht.e) + s->cap_keys * sizeof(*s->keys) +
	       s->cap_of * sizeof(*s->of) + s->cap_vals * sizeof(*s->vals) + s->cap_buf;
}

static void scratch_free(struct pp_scratch *s)
{
	pp_htab__free(&s->ht);
	free(s->keys);
	free(s->of);
	free(s->vals);
	free(s->buf);
	pp_inflater_free(s->inflater);
	memset(s, 0, sizeof(*s));
}

/* Called locked: frees those at the bottom of the stack unused for SCRATCH_IDLE_S. */
static void pool_trim_idle(uint64_t now)
{
	size_t idle = 0;

	while (idle < pool.n && now - pool.s[idle].idle_since_s >= SCRATCH_IDLE_S)
		scratch_free(&pool.s[idle++]);
	if (!idle)
		return;
	memmove(pool.s, pool.s + idle, (pool.n - idle) * sizeof(*pool.s));
	pool.n -= idle;
}

void pp_scratch__take(struct pp_scratch *s)
{
	memset(s, 0, sizeof(*s));
	if (!CONFIG_PPROF_READ_SCRATCH_KEEP)
		return;
	pthread_mutex_lock(&pool.lock);
	pool_trim_idle(mono_s());
	if (pool.n)
		*s = pool.s[--pool.n];
	pthread_mutex_unlock(&pool.lock);
}

void pp_scratch__give(struct pp_scratch *s)
{
	uint64_t now;

	if (!CONFIG_PPROF_READ_SCRATCH_KEEP ||
	    scratch_bytes(s) > (size_t)CONFIG_PPROF_READ_SCRATCH_KB * 1024) {
		scratch_free(s);
		return;
	}
	/* the next read finds the table empty (cleared once here, not calloc'd per read) */
	if (s->ht.n)
		memset(s->ht.e, 0, s->ht.cap * sizeof(*s->ht.e));
	s->ht.n = 0;
	now = mono_s();
	s->idle_since_s = now;
	pthread_mutex_lock(&pool.lock);
	pool_trim_idle(now);
	if (pool.n < CONFIG_PPROF_READ_SCRATCH_KEEP) {
		pool.s[pool.n++] = *s;
		memset(s, 0, sizeof(*s));
	}
	pthread_mutex_unlock(&pool.lock);
	scratch_free(s); /* no-op when it went into the pool */
}
