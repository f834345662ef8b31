// SPDX-License-Identifier: MIT
#include <errno.h>
#include <time.h>

#include "port/clock.h"

#define REAL_CLOCK_SANE_NS (1577836800ULL * NSEC_PER_SEC) /* 2020-01-01T00:00:00Z */

static uint64_t read_clock(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t port_clock_mono_ns(void)
{
	return read_clock(CLOCK_MONOTONIC);
}

uint64_t port_clock_real_ns(void)
{
	return read_clock(CLOCK_REALTIME);
}

uint64_t port_clock_cputime_ns(void)
{
	return read_clock(CLOCK_PROCESS_CPUTIME_ID);
}

uint64_t port_clock_thread_cputime_ns(void)
{
	return read_clock(CLOCK_THREAD_CPUTIME_ID);
}

bool port_clock_real_is_set(uint64_t real_ns)
{
	return real_ns >= REAL_CLOCK_SANE_NS;
}

void port_sleep_ns(uint64_t ns)
{
	struct timespec req = { .tv_sec = ns / NSEC_PER_SEC, .tv_nsec = ns % NSEC_PER_SEC };

	while (nanosleep(&req, &req) && errno == EINTR)
		;
}
