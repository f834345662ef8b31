// SPDX-License-Identifier: MIT
/*
 * xoshiro256** seeded from getrandom(): the kernel's entropy once, then a cheap generator, so
 * that jitter and backoff never block on an embedded board whose entropy pool is still empty.
 */
#include <stdbool.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/rand.h"

static uint64_t state[4];
static bool seeded;

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void seed(void)
{
	uint64_t s;

	/* GRND_NONBLOCK: an early-boot device must not hang here; fall back to clock and pid. */
	if (getrandom(&s, sizeof(s), GRND_NONBLOCK) != (ssize_t)sizeof(s))
		s = port_clock_real_ns() ^ (port_clock_mono_ns() << 17) ^ (uint64_t)getpid();
	for (int i = 0; i < 4; i++)
		state[i] = splitmix64(&s);
	seeded = true;
}

uint64_t port_rand_u64(void)
{
	uint64_t result, t;

	if (!seeded)
		seed();
	result = rotl(state[1] * 5, 7) * 9;
	t = state[1] << 17;
	state[2] ^= state[0];
	state[3] ^= state[1];
	state[1] ^= state[2];
	state[0] ^= state[3];
	state[2] ^= t;
	state[3] = rotl(state[3], 45);
	return result;
}

uint64_t port_rand_below(uint64_t bound)
{
	uint64_t limit, r;

	if (!bound)
		return 0;
	/* Reject the top sliver that would make small values more likely. */
	limit = UINT64_MAX - UINT64_MAX % bound;
	do
		r = port_rand_u64();
	while (r >= limit);
	return r % bound;
}
