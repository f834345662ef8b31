/* SPDX-License-Identifier: MIT */
/*
 * agent/core/symbolize.h — on-device function names (CONFIG_SYMBOLIZE): .symtab/.dynsym of each
 * mapped file, cached per build-id (per path when the file has none), bounded by max_bytes
 * (CONFIG_SYMBOL_CACHE_KB; least recently used tables evicted, counted). A table too big to
 * hold with its names (node's: 95k functions, 7.5 MB of names) is kept as an index of 8 bytes
 * a function, its names read from the file at each lookup (elf_syms__load). Files whose index
 * does not fit either, or cannot be read, are remembered as such and left to desktop
 * symbolization.
 * Without CONFIG_SYMBOLIZE every lookup returns NULL and no file is read.
 */
#ifndef EDGEPROF_AGENT_SYMBOLIZE_H
#define EDGEPROF_AGENT_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

#include "agent/core/procmaps.h"

struct symbolizer;

struct symbolizer_stats {
	uint64_t loads, evictions, failed, hits, misses;
	size_t bytes;
};

#ifdef CONFIG_SYMBOLIZE
struct symbolizer *symbolizer__new(size_t max_bytes);
void symbolizer__free(struct symbolizer *s);
/* Function name for addr inside mapping m of pid (pid 0 = self), or NULL. */
const char *symbolizer__name(struct symbolizer *s, uint32_t pid, const struct procmap *m,
			     uint64_t addr);
void symbolizer__stats(const struct symbolizer *s, struct symbolizer_stats *st);
#else
static inline struct symbolizer *symbolizer__new(size_t max_bytes)
{
	return NULL;
}
static inline void symbolizer__free(struct symbolizer *s)
{
}
static inline const char *symbolizer__name(struct symbolizer *s, uint32_t pid,
					   const struct procmap *m, uint64_t addr)
{
	return NULL;
}
static inline void symbolizer__stats(const struct symbolizer *s, struct symbolizer_stats *st)
{
	*st = (struct symbolizer_stats){0};
}
#endif /* CONFIG_SYMBOLIZE */

#endif /* EDGEPROF_AGENT_SYMBOLIZE_H */
