/* SPDX-License-Identifier: MIT */
/*
 * pprof/folded.h — folded (collapsed) stacks as a profile: Brendan Gregg's stackcollapse format,
 * one "root;caller;leaf COUNT" line per stack, as `edgeprof folded`, flamegraph.pl's
 * stackcollapse-*.pl, async-profiler's collapsed output and Pyroscope's "folded" write.
 *
 * Linked by the CLI and the collector (not by the agent, which never reads profiles).
 */
#ifndef EDGEPROF_PPROF_FOLDED_H
#define EDGEPROF_PPROF_FOLDED_H

#include <stdbool.h>
#include <stddef.h>

#include "pprof/pprof.h"

/*
 * Whether data looks like folded text rather than pprof: no gzip magic, text without control
 * bytes in its first 4 KiB, and a first line that ends in " DIGITS". Raw pprof starts with a
 * field key and a length byte, which no text has.
 */
bool pprof_is_folded(const void *data, size_t len);

/*
 * Folded text as a profile of one sample type, samples/count (folded text has no units): one
 * function and location per distinct frame name, one sample per line (lines of one stack are
 * not summed here: every consumer merges). Empty lines and lines starting with '#' are skipped.
 * limits as pprof_read()'s (max_input bounds the text, max_samples the lines, max_stack_depth
 * the frames of a line). Returns 0, or -EINVAL with err naming the line ("line 3: expected
 * 'frame;frame;... COUNT'"), -EFBIG, -ENOMEM.
 */
int pprof_read_folded(const void *data, size_t len, const struct pprof_read_limits *limits,
		      struct pprof_profile **out, char *err, size_t errlen);

/* pprof (gzip or raw) or folded text, by pprof_is_folded(). */
int pprof_read_any(const void *data, size_t len, const struct pprof_read_limits *limits,
		   struct pprof_profile **out, char *err, size_t errlen);

#endif /* EDGEPROF_PPROF_FOLDED_H */
