/* SPDX-License-Identifier: MIT */
/*
 * bpf/cpus.h — CPU hotplug for the per-CPU perf events of the sampler and of the mmap records.
 *
 * A CPU that goes offline switches its per-CPU events off for good, even once it is back: their
 * time enabled stops. Offline and back between two checks leaves the CPU online with a dead
 * event, so the online flag alone is not enough: the event's time enabled must move.
 */
#ifndef EDGEPROF_BPF_CPUS_H
#define EDGEPROF_BPF_CPUS_H

#include <stdbool.h>
#include <stdint.h>

/* How often the owners of per-CPU events look for dead ones and new CPUs. */
#define CPUS_RESCAN_NS (2 * 1000000000ull) /* a few sysfs reads and one read() per CPU */

/* cpuN/online reads 0 for an offline CPU; CPUs that cannot go offline have no such file. */
bool cpus__online(int cpu);
/*
 * Whether fd, a per-CPU event opened with PERF_FORMAT_TOTAL_TIME_ENABLED as its read format,
 * still runs on cpu. *enabled_ns: its time enabled at the last check (0 when just opened).
 */
bool cpus__event_alive(int fd, int cpu, uint64_t *enabled_ns);

#endif /* EDGEPROF_BPF_CPUS_H */
