// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for pprof_read(). Beyond "never crash, never read out of bounds": whatever
 * the reader accepts must be a profile the rest of the library can use — written back, read
 * again with the same shape, and merged with itself.
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
		return 0;
	}
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
