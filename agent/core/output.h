/* SPDX-License-Identifier: MIT */
/*
 * agent/core/output.h — one round's aggregate → one pprof (gzip): sample types samples/count and
 * cpu/nanoseconds (or wall, offcpu: output_opts.type), period <type>/nanoseconds = 1e9 / hz, mappings with build-id and file offset,
 * labels (the sample's label set, pid and thread as numeric labels), and every drop counter of
 * the round as a comment. Function names only when a symbolizer is given.
 */
#ifndef EDGEPROF_AGENT_OUTPUT_H
#define EDGEPROF_AGENT_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include "agent/core/aggregate.h"
#include "agent/core/procmaps.h"
#include "agent/core/symbolize.h"
#include "pprof/pprof.h"

struct ksyms;

struct output_opts {
	const char *service;
	uint32_t hz;
	uint64_t time_ns, duration_ns; /* round start (unix ns) and length */
	struct proctab *procs;	       /* mappings per pid */
	struct symbolizer *sym;	       /* NULL: addresses and build-ids only */
	const struct ksyms *ksyms;     /* NULL: kernel frames stay addresses */
	const char *const *comments;   /* drop counters etc., one line each */
	size_t n_comments;
	int gzip_level; /* 0: default */
	const char *type; /* the value's type: "cpu" (NULL), "wall", "offcpu"; unit nanoseconds */
};

/* Encodes the aggregate with w/ctx: 0 or -errno. */
int output__pprof(const struct aggregate *a, const struct output_opts *o, pprof_write_fn w,
		  void *ctx);

/*
 * Writes <dir>/<service>-<type>-<YYYYmmddTHHMMSSZ>-<n>.pb.gz atomically (temporary name, fsync,
 * rename); the path written goes to path_out. 0 or -errno.
 */
int output__write_dir(const struct aggregate *a, const struct output_opts *o, const char *dir,
		      char *path_out, size_t path_len);
/* <dir>/<service>-<type>-<YYYYmmddTHHMMSSZ>-<n>.pb.gz into path_out: 0 or -ENAMETOOLONG. */
int output__path(const struct output_opts *o, const char *dir, const char *type, char *path_out,
		 size_t path_len);
/* Writes exactly to path (standalone mode). */
int output__write_file(const struct aggregate *a, const struct output_opts *o, const char *path);

/* A profile of another kind than CPU (heap): its sample types, period and stacks. */
struct output_kind {
	const char *const *types, *const *units;
	size_t n_types;
	const char *period_type, *period_unit, *default_type;
	int64_t period;
};

struct output_stack {
	uint32_t pid;
	uint16_t n_frames;
	const uint64_t *frames; /* user return addresses, leaf first (the caller of malloc) */
	const int64_t *values;	/* one per type */
};

/* Encodes n stacks as one pprof of kind k with w/ctx; or writes it to path (atomically).
 * 0 or -errno. */
int output__stacks_pprof(const struct output_kind *k, const struct output_opts *o,
			 const struct output_stack *st, size_t n, pprof_write_fn w, void *ctx);
int output__write_stacks_file(const struct output_kind *k, const struct output_opts *o,
			      const struct output_stack *st, size_t n, const char *path);

#endif /* EDGEPROF_AGENT_OUTPUT_H */
