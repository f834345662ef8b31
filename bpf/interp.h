/* SPDX-License-Identifier: MIT */
/*
 * bpf/interp.h — what the agent's sides of the interpreters' frames (bpf/python.h, bpf/lua.h,
 * bpf/v8.h) share: their per-process BPF hash maps swept of exited processes, counted, and
 * their per-CPU counters summed.
 */
#ifndef EDGEPROF_BPF_INTERP_H
#define EDGEPROF_BPF_INTERP_H

#include <stdint.h>

/* Each interpreter's maps and the bounds its agent side keeps (the head of its struct). */
struct bpfinterp {
	int procs_fd, counts_fd, ncpus;
	unsigned int max_procs;	/* the map's bound */
	unsigned int n_slots;	/* processes looked at that the side remembers: 4 x max_procs */
	uint64_t last_sweep_ns;
	uint32_t *keys;		/* the sweep's: room for max_procs */
};

/* Sets m up: 0, or -ENOMEM. */
int bpfinterp__init(struct bpfinterp *m, int procs_fd, int counts_fd, unsigned int max_procs,
		    int ncpus);
void bpfinterp__release(struct bpfinterp *m);
/* Exited processes' entries removed, at most every period_ns: how many. */
uint64_t bpfinterp__sweep_every(struct bpfinterp *m, uint64_t now, uint64_t period_ns);

/* Removes the entries of exited processes from procs_fd (keys: room for max); how many. */
uint64_t bpfinterp__sweep(int procs_fd, uint32_t *keys, unsigned int max);
/* Entries in procs_fd (max at most). */
uint64_t bpfinterp__count(int procs_fd, unsigned int max);
/* Counter k of the per-CPU array counts_fd, summed over ncpus CPUs. */
uint64_t bpfinterp__percpu_sum(int counts_fd, int ncpus, uint32_t k);

#endif /* EDGEPROF_BPF_INTERP_H */
