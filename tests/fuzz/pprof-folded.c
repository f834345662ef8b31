// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for folded text (pprof/folded.c), through pprof_read_any() as the CLI and the
 * collector's POST /api/0/render call it: never crash, never read out of bounds; text taken as
 * folded has one sample type and at most a line's worth of frames per sample, and whatever is
 * accepted is written back and read again with the same shape.
 */
#include <stdint.h>
#include <stdlib.h>

#include "pprof/folded.h"

static void check(int cond)
{
	if (!cond)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pprof_read_limits lim = { .max_decoded = 4 << 20, .max_samples = 100000 };
	struct pprof_profile *p, *q;
	struct pprof_buf buf = { 0 };
	bool folded = pprof_is_folded(data, size);
	char err[256];

	if (pprof_read_any(data, size, &lim, &p, err, sizeof(err))) {
		check(p == NULL && err[0] != '\0');
		return 0;
	}
	if (folded) {
		check(p->n_sample_type == 1 && p->n_samples >= 1);
		for (size_t i = 0; i < p->n_samples; i++)
			check(p->samples[i].n_locations >= 1 && p->samples[i].n_locations <= size);
	}
	check(pprof_write_profile(p, NULL, pprof_buf_write, &buf) == 0);
	check(pprof_read(buf.data, buf.len, NULL, &q, err, sizeof(err)) == 0);
	check(q->n_samples == p->n_samples && q->n_locations == p->n_locations);
	pprof_profile__free(q);
	pprof_profile__free(p);
	free(buf.data);
	return 0;
}
