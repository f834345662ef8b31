// SPDX-License-Identifier: MIT
/*
 * bpf/cpus.c — CPU hotplug for per-CPU perf events (see cpus.h).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bpf/cpus.h"

bool cpus__online(int cpu)
{
	char path[64], buf[8] = "";
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/online", cpu);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n <= 0 || buf[0] != '0';
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
