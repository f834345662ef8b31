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
