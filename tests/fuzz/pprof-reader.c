// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for pprof_read(). Beyond "never crash, never read out of bounds": whatever
 * the reader accepts must be a profile the rest of the library can use — written back, read
 * again with the same shape, and merged with itself. Read with merge_samples, the same answer
 * (the same error, or no more samples with the same totals of each value and the same tables).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pprof/pprof.h"

static void check(int cond)
{
	if (!cond)
		abort();
}

/* The sum of value j over the samples, wrapping around as merged samples sum. */
static uint64_t total(const struct pprof_profile *p, size_t j)
{
	uint64_t t = 0;

	for (size_t i = 0; i < p->n_samples; i++)
		t += (uint64_t)p->samples[i].values[j];
	return t;
}

/* Read with merge_samples: the same result as p (NULL: the error e of the plain read). */
static void check_merged(const uint8_t *data, size_t size, struct pprof_read_limits lim,
			 const struct pprof_profile *p, const char *e)
{
	struct pprof_profile *m;
	char err[256];
	int ret;

	lim.merge_samples = true;
	ret = pprof_read(data, size, &lim, &m, err, sizeof(err));
	if (!p) {
		check(ret != 0 && m == NULL && !strcmp(err, e));
		return;
	}
	check(ret == 0);
	check(m->n_samples <= p->n_samples && m->n_locations == p->n_locations &&
	      m->n_sample_type == p->n_sample_type && m->n_strings == p->n_strings &&
	      m->n_functions == p->n_functions && m->n_mappings == p->n_mappings);
	check(!m->n_samples == !p->n_samples);
	for (size_t j = 0; j < p->n_sample_type; j++)
		check(total(m, j) == total(p, j));
	pprof_profile__free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pprof_read_limits lim = { .max_decoded = 4 << 20, .max_samples = 100000 };
	struct pprof_profile *p, *q, *m;
	struct pprof_buf buf = { 0 };
	struct pprof_merger *mg;
	char err[256];
	size_t i;

	if (pprof_read(data, size, &lim, &p, err, sizeof(err))) {
		check(p == NULL && err[0] != '\0');
		check_merged(data, size, lim, NULL, err);
		return 0;
	}
	check_merged(data, size, lim, p, NULL);
	for (i = 0; i < p->n_samples; i++)
		check(p->samples[i].n_locations <= 4096);
	check(pprof_write_profile(p, NULL, pprof_buf_write, &buf) == 0);
	check(pprof_read(buf.data, buf.len, NULL, &q, err, sizeof(err)) == 0);
	check(q->n_samples == p->n_samples && q->n_locations == p->n_locations &&
	      q->n_sample_type == p->n_sample_type && q->n_strings >= 1);
	mg = pprof_merger__new();
	check(mg != NULL);
	if (pprof_merger__add(mg, p, err, sizeof(err)) == 0 &&
	    pprof_merger__add(mg, q, err, sizeof(err)) == 0 &&
	    pprof_merger__finish(mg, &m, err, sizeof(err)) == 0) {
		check(m->n_samples <= p->n_samples);
		pprof_profile__free(m);
	}
	pprof_merger__free(mg);
	pprof_profile__free(q);
	pprof_profile__free(p);
	free(buf.data);
	return 0;
}
