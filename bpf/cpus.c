// SPDX-License-Identifier: MIT
/*
 * bpf/cpus.c — CPU hotplug for per-CPU perf events (see cpus.h).
 */
#include <stdio.h>
#include <unistd.h>

#include "bpf/cpus.h"
#include "port/file.h"

bool cpus__online(int cpu)
{
	char path[64], buf[8];

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	return port_file_read_small(path, buf, sizeof(buf)) <= 0 || buf[0] != '0';
}

bool cpus__event_alive(int fd, int cpu, uint64_t *enabled_ns)
{
	uint64_t v[2]; /* count, time enabled */
	bool alive;

	if (!cpus__online(cpu))
		return false;
	if (read(fd, v, sizeof(v)) != (ssize_t)sizeof(v))
		return true; /* cannot tell: keep it */
	alive = v[1] != *enabled_ns;
	*enabled_ns = v[1];
	return alive;
}
