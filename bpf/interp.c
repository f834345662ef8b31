// SPDX-License-Identifier: MIT
/* bpf/interp.c — see interp.h. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>

#include <bpf/bpf.h>

#include "bpf/interp.h"

uint64_t bpfinterp__sweep(int procs_fd, uint32_t *keys, unsigned int max)
{
	uint32_t key, next, n = 0;
	uint64_t gone = 0;
	bool first = true;

	while (n < max && !bpf_map_get_next_key(procs_fd, first ? NULL : &key, &next)) {
		keys[n++] = next;
		key = next;
		first = false;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (kill((pid_t)keys[i], 0) == 0 || errno != ESRCH)
			continue;
		bpf_map_delete_elem(procs_fd, &keys[i]);
		gone++;
	}
	return gone;
}

uint64_t bpfinterp__count(int procs_fd, unsigned int max)
{
	uint32_t key, next;
	uint64_t n = 0;
	bool first = true;

	while (n < max && !bpf_map_get_next_key(procs_fd, first ? NULL : &key, &next)) {
		n++;
		key = next;
		first = false;
	}
	return n;
}

uint64_t bpfinterp__percpu_sum(int counts_fd, int ncpus, uint32_t k)
{
	uint64_t *vals = calloc((size_t)ncpus, sizeof(*vals)), sum = 0;

	if (vals && !bpf_map_lookup_elem(counts_fd, &k, vals))
		for (int i = 0; i < ncpus; i++)
			sum += vals[i];
	free(vals);
	return sum;
}

int bpfinterp__init(struct bpfinterp *m, int procs_fd, int counts_fd, unsigned int max_procs,
		    int ncpus)
{
	*m = (struct bpfinterp){.procs_fd = procs_fd, .counts_fd = counts_fd,
				.ncpus = ncpus > 0 ? ncpus : 1, .max_procs = max_procs,
				.n_slots = 4 * max_procs};
	m->keys = calloc(max_procs ? max_procs : 1, sizeof(*m->keys));
	return m->keys ? 0 : -ENOMEM;
}

void bpfinterp__release(struct bpfinterp *m)
{
	free(m->keys);
	m->keys = NULL;
}

uint64_t bpfinterp__sweep_every(struct bpfinterp *m, uint64_t now, uint64_t period_ns)
{
	if (now - m->last_sweep_ns < period_ns)
		return 0;
	m->last_sweep_ns = now;
	return bpfinterp__sweep(m->procs_fd, m->keys, m->max_procs);
}
