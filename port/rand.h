/* SPDX-License-Identifier: MIT */
/* port/rand.h — random numbers for jitter, backoff and ids (not for keys: mbedtls has its own). */
#ifndef EDGEPROF_PORT_RAND_H
#define EDGEPROF_PORT_RAND_H

#include <stdint.h>

/* A uniformly random 64-bit value; seeded once from getrandom(), never blocks afterwards. */
uint64_t port_rand_u64(void);

/* Uniform in [0, bound); 0 when bound is 0. No modulo bias. */
uint64_t port_rand_below(uint64_t bound);

#endif /* EDGEPROF_PORT_RAND_H */
