/* SPDX-License-Identifier: MIT */
/*
 * store/api/render.h — a merged profile as the web UI and scripts want it, built on the CLI's
 * folded-stack tree (pprof/view/tree.h), so `edgeprof folded` and the collector agree:
 *
 *  json:        {"type","unit","total","profiles","names":[...],"nodes":[[name,parent,self,total],...]}
 *               nodes in pre-order, node 0 the root, children sorted by name.
 *  flamebearer: Pyroscope's shape: {"version":1,"flamebearer":{"names","levels","numTicks",
 *               "maxSelf"},"metadata":{"format":"single","units","name"}}; each level lists
 *               [x-offset delta, total, self, name index] quadruples.
 *  folded:      plain text, one "a;b;c N" line per stack (root first).
 */
#ifndef EDGEPROF_STORE_RENDER_H
#define EDGEPROF_STORE_RENDER_H

#include <stddef.h>

#include "pprof/pprof.h"

enum render_format { RENDER_JSON, RENDER_FLAMEBEARER, RENDER_FOLDED };

/* Parses "json" / "flamebearer" / "folded" (NULL or "" = json): 0 or -EINVAL. */
int render_format_parse(const char *s, enum render_format *out);

/*
 * Renders p (value index: the profile's default sample type) into a malloc'd buffer. At most
 * max_nodes tree nodes (0 = 200,000): deeper detail folds into the last node kept. n_profiles
 * is reported as "profiles". Returns 0 or -errno with err filled.
 */
int render_profile(const struct pprof_profile *p, enum render_format fmt, size_t n_profiles,
		   size_t max_nodes, char **out, size_t *out_len, char *err, size_t errlen);
/*
 * The most a render of p may allocate (max_nodes 0 = the default bound): the frames of its
 * locations, the tree's nodes (at most one per location id of a sample, and max_nodes), their
 * index and order, and the output (~128 bytes a node with its name). Asked of the query's
 * budget before rendering (store/api/api-render.c).
 */
size_t render_mem_bound(const struct pprof_profile *p, size_t max_nodes);

/*
 * The same for the sample type index names ("inuse_space", "alloc_objects", or a number; NULL
 * or "": the profile's default): a heap profile's in-use or allocated view. The JSON tree
 * lists the profile's sample types ("types") for a picker. -EINVAL: no such sample type.
 */
int render_profile_index(const struct pprof_profile *p, const char *index,
			 enum render_format fmt, size_t n_profiles, size_t max_nodes, char **out,
			 size_t *out_len, char *err, size_t errlen);

#endif /* EDGEPROF_STORE_RENDER_H */
