/* SPDX-License-Identifier: MIT */
/* port/clock.h — the clocks everything above the port layer reads. */
#ifndef EDGEPROF_PORT_CLOCK_H
#define EDGEPROF_PORT_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#define NSEC_PER_SEC  1000000000ULL
#define NSEC_PER_MSEC 1000000ULL

uint64_t port_clock_mono_ns(void);   /* CLOCK_MONOTONIC: intervals, deadlines, schedules */
uint64_t port_clock_real_ns(void);   /* CLOCK_REALTIME: profile timestamps */
uint64_t port_clock_cputime_ns(void); /* this process's CPU time */
uint64_t port_clock_thread_cputime_ns(void); /* the calling thread's CPU time */

/*
 * Devices without an RTC boot in 1970 until NTP runs. A wall clock before 2020-01-01 is taken
 * as "not set": the agent then sends monotonic-relative times and lets the collector stamp them.
 */
bool port_clock_real_is_set(uint64_t real_ns);

/* Sleeps for ns, resuming after signals (sampling signals interrupt sleeps all the time). */
void port_sleep_ns(uint64_t ns);

#endif /* EDGEPROF_PORT_CLOCK_H */
