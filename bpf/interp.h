/* SPDX-License-Identifier: MIT */
/*
 * bpf/interp.h — what the agent's sides of the interpreters' frames (bpf/python.h, bpf/lua.h)
 * share: their per-process BPF hash maps swept of exited processes, counted, and their per-CPU
 * counters summed.
 */
#ifndef EDGEPROF_BPF_INTERP_H
#define EDGEPROF_BPF_INTERP_H

#include <stdint.h>

/* Removes the entries of exited processes from procs_fd (keys: room for max); how many. */
uint64_t bpfinterp__sweep(int procs_fd, uint32_t *keys, unsigned int max);
/* Entries in procs_fd (max at most). */
uint64_t bpfinterp__count(int procs_fd, unsigned int max);
/* Counter k of the per-CPU array counts_fd, summed over ncpus CPUs. */
uint64_t bpfinterp__percpu_sum(int counts_fd, int ncpus, uint32_t k);

#endif /* EDGEPROF_BPF_INTERP_H */
