/* SPDX-License-Identifier: MIT */
/*
 * port/hash.h — the project's one non-cryptographic hash: FNV-1a (64- and 32-bit) and a
 * 64-bit finalizer for table indexes. Some of its values are persisted (the ClickHouse
 * backend's dictionary and group ids), so they must never change:
 * tests/unit/port/hash-test.c pins them, and an edit here that moves a value fails it.
 */
#ifndef EDGEPROF_PORT_HASH_H
#define EDGEPROF_PORT_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV64_BASIS 0xcbf29ce484222325ull
#define HASH_FNV64_PRIME 0x100000001b3ull
#define HASH_FNV32_BASIS 2166136261u
#define HASH_FNV32_PRIME 16777619u

/* FNV-1a of n bytes, continuing from h (HASH_FNV64_BASIS to start). */
static inline uint64_t hash_fnv64_add(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * HASH_FNV64_PRIME;
	return h;
}

/* FNV-1a of a string's bytes (not its NUL), continuing from h. */
static inline uint64_t hash_fnv64_add_str(uint64_t h, const char *s)
{
	while (*s)
		h = (h ^ (unsigned char)*s++) * HASH_FNV64_PRIME;
	return h;
}

static inline uint64_t hash_fnv64(const void *p, size_t n)
{
	return hash_fnv64_add(HASH_FNV64_BASIS, p, n);
}

static inline uint64_t hash_fnv64_str(const char *s)
{
	return hash_fnv64_add_str(HASH_FNV64_BASIS, s);
}

static inline uint32_t hash_fnv32_str(const char *s)
{
	uint32_t h = HASH_FNV32_BASIS;

	while (*s)
		h = (h ^ (unsigned char)*s++) * HASH_FNV32_PRIME;
	return h;
}

/* splitmix64's finalizer: every input bit moves every output bit (for power-of-two tables). */
static inline uint64_t hash_mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif /* EDGEPROF_PORT_HASH_H */
