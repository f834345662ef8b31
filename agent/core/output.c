// SPDX-License-Identifier: MIT
/* agent/core/output.c — see output.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/core/luaname.h"
#include "agent/core/output.h"
#include "agent/core/perfmap.h"
#include "agent/core/pyname.h"
#include "agent/core/v8name.h"
#include "port/file.h"
#include "pprof/snapshot.h"
#ifdef CONFIG_SAMPLER_BPF
#include "agent/core/ksyms.h"
#endif

/* each runtime's frames are told apart by their top byte: one tag each */
_Static_assert(PYFRAME_TAG != LUAFRAME_TAG && PYFRAME_TAG != LUA51FRAME_TAG &&
	       PYFRAME_TAG != LJFRAME_TAG && PYFRAME_TAG != V8FRAME_TAG &&
	       LUAFRAME_TAG != LUA51FRAME_TAG && LUAFRAME_TAG != LJFRAME_TAG &&
	       LUAFRAME_TAG != V8FRAME_TAG && LUA51FRAME_TAG != LJFRAME_TAG &&
	       LUA51FRAME_TAG != V8FRAME_TAG && LJFRAME_TAG != V8FRAME_TAG,
	       "two runtimes share a frame tag");

#define KERNEL_MAPPING "[kernel.kallsyms]"

struct out_ctx {
	const struct output_opts *o;
	const struct aggregate *a;
	struct pprof_builder *b;
	uint64_t kmap; /* made on the first kernel frame: pprof takes mapping 1 as the program */
	struct pprof_mapping_desc km;
	struct perfmap_sym jit; /* the last perf-map entry found (too big for the stack walk) */
	bool jit_used;		/* a frame was named from a perf map: its counters as a comment */
	struct framename py;	/* the last Python frame named */
	bool py_used;		/* a Python frame was seen: the naming's counters as a comment */
	struct framename lua;	/* the last Lua frame named */
	bool lua_used;		/* a Lua frame was seen: the naming's counters as a comment */
	struct framename js;	/* the last JavaScript frame named */
	bool js_used;		/* a JavaScript frame was seen: the naming's counters as a comment */
	bool file_mapped;	/* a file's mapping was made (the first one is the program's) */
	const char *snapshot;	/* the sample's snapshot label text (pprof/snapshot.h), or NULL */
};

#ifdef CONFIG_SAMPLER_BPF
/*
 * Weak: libedgeprof.so writes profiles too but has no kernel frames and no agent/core/ksyms.o; it
 * is linked -z now, so a strong reference would keep it from loading.
 */
extern __typeof__(ksyms__resolve) ksyms__resolve __attribute__((weak));
#endif /* CONFIG_SAMPLER_BPF */
#ifdef CONFIG_BPF_V8
/* Weak as ksyms__resolve: only the agent links agent/core/v8name.o (the BPF sampler's). */
extern __typeof__(v8name__resolve) v8name__resolve __attribute__((weak));
extern __typeof__(v8name__stats) v8name__stats __attribute__((weak));
#endif /* CONFIG_BPF_V8 */

static const char *kernel_name(const struct output_opts *o, uint64_t addr)
{
#ifdef CONFIG_SAMPLER_BPF
	if (o->ksyms && ksyms__resolve)
		return ksyms__resolve(o->ksyms, addr, NULL);
#endif
	return NULL;
}

static uint64_t location(struct out_ctx *c, uint64_t map_id, uint64_t addr, const char *name)
{
	struct pprof_line_desc line = {0, 0};

	if (name) {
		line.function_id = pprof_builder__function(c->b, name, name, NULL, 0);
		if (!line.function_id)
			return 0;
	}
	return pprof_builder__location(c->b, map_id, addr, &line, name ? 1 : 0);
}

static uint64_t file_mapping(struct out_ctx *c, const struct procmap *m)
{
	struct pprof_mapping_desc md = {
	    .memory_start = m->start,
	    .memory_limit = m->limit,
	    .file_offset = m->offset,
	    .filename = m->path,
	    .build_id = m->build_id[0] ? m->build_id : NULL,
	    /* false: desktop pprof then symbolizes what the device could not (stripped files) */
	    .has_functions = false,
	};

	c->file_mapped = true;
	return pprof_builder__mapping(c->b, &md);
}

/* pprof takes mapping 1 as the program: before a pseudo-file (a perf map, [python3.x]), the
 * process's executable. false: the builder is full. */
static bool exe_first(struct out_ctx *c, uint32_t pid)
{
	const struct procmaps *pm = c->o->procs && !c->file_mapped ? proctab__maps(c->o->procs, pid)
								   : NULL;

	return !pm || pm->exe < 0 || file_mapping(c, &pm->maps[pm->exe]);
}

/*
 * Anonymous code (a JIT's) of a process with a perf map: the mapping is named after the map, as
 * perf does, and the frame gets the map's function (V8's JS ones with file and line). 0: the
 * process has no perf map; else the location, or 0 on a full builder (ENOSPC upstream). Done
 * with --no-symbolize too: a perf map lives and dies with its process on the device, and no
 * debug file at the collector can ever name that code.
 */
static uint64_t jit_location(struct out_ctx *c, uint32_t pid, const struct procmap *m,
			     uint64_t addr, bool *handled)
{
	struct perfmap_sym *sym = &c->jit;
	struct pprof_line_desc line = {0, 0};
	char path[48];
	uint64_t map_id;
	int r = perfmaps__lookup(perfmaps__shared(), pid, addr, sym);

	*handled = r >= 0;
	if (r < 0)
		return 0;
	if (!exe_first(c, pid))
		return 0;
	snprintf(path, sizeof(path), "/tmp/perf-%u.map", pid);
	map_id = pprof_builder__mapping(c->b, &(struct pprof_mapping_desc){
		.memory_start = m->start, .memory_limit = m->limit, .filename = path,
		.has_functions = true, .has_filenames = true, .has_line_numbers = true});
	if (!map_id)
		return 0;
	c->jit_used = true;
	if (r == 0)
		return pprof_builder__location(c->b, map_id, addr, &line, 0);
	line.function_id = pprof_builder__function(c->b, sym->name, sym->raw,
						   sym->file[0] ? sym->file : NULL, sym->line);
	line.line = sym->line;
	return line.function_id ? pprof_builder__location(c->b, map_id, addr, &line, 1) : 0;
}

/* A Python frame (agent/core/pyname.h): its function and line, or an unnamed location
 * (counted). */
static uint64_t py_location(struct out_ctx *c, uint32_t pid, uint64_t v)
{
	struct pprof_line_desc line = {0, 0};
	uint64_t map_id;

	if (!exe_first(c, pid))
		return 0;
	map_id = pprof_builder__mapping(c->b, &(struct pprof_mapping_desc){
		.memory_start = PYFRAME_TAG << 56, .memory_limit = (PYFRAME_TAG + 1) << 56,
		.filename = "[python]", .has_functions = true, .has_filenames = true,
		.has_line_numbers = true});
	if (!map_id)
		return 0;
	c->py_used = true;
	if (pyname__resolve(pid, v, &c->py))
		return pprof_builder__location(c->b, map_id, v, &line, 0);
	line.function_id = pprof_builder__function(c->b, c->py.name, c->py.name,
						   c->py.file[0] ? c->py.file : NULL, c->py.start_line);
	line.line = c->py.line ? c->py.line : c->py.start_line;
	return line.function_id ? pprof_builder__location(c->b, map_id, v, &line, 1) : 0;
}

/* A Lua frame (agent/core/luaname.h): its function with file and line, or an unnamed
 * location (counted). */
static uint64_t lua_location(struct out_ctx *c, uint32_t pid, uint64_t v)
{
	struct pprof_line_desc line = {0, 0};
	uint64_t map_id;

	if (!exe_first(c, pid))
		return 0;
	map_id = pprof_builder__mapping(c->b, &(struct pprof_mapping_desc){
		.memory_start = v >> 56 << 56, .memory_limit = ((v >> 56) + 1) << 56,
		.filename = luaframe__runtime(v),
		.has_functions = true, .has_filenames = true, .has_line_numbers = true});
	if (!map_id)
		return 0;
	c->lua_used = true;
	if (luaname__resolve(pid, v, &c->lua))
		return pprof_builder__location(c->b, map_id, v, &line, 0);
	line.function_id = pprof_builder__function(c->b, c->lua.name, c->lua.name, c->lua.file,
						   c->lua.start_line);
	line.line = c->lua.line ? c->lua.line : c->lua.start_line;
	return line.function_id ? pprof_builder__location(c->b, map_id, v, &line, 1) : 0;
}

/* A JavaScript frame (agent/core/v8name.h): its function with its script, or an unnamed
 * location (counted). */
static uint64_t js_location(struct out_ctx *c, uint32_t pid, uint64_t v)
{
	struct pprof_line_desc line = {0, 0};
	uint64_t map_id;
	int err = -EOPNOTSUPP;

	if (!exe_first(c, pid))
		return 0;
	map_id = pprof_builder__mapping(c->b, &(struct pprof_mapping_desc){
		.memory_start = V8FRAME_TAG << 56, .memory_limit = (V8FRAME_TAG + 1) << 56,
		.filename = "[javascript]", .has_functions = true, .has_filenames = true});
	if (!map_id)
		return 0;
	c->js_used = true;
#ifdef CONFIG_BPF_V8
	if (v8name__resolve)
		err = v8name__resolve(pid, v, &c->js);
#endif
	if (err)
		return pprof_builder__location(c->b, map_id, v, &line, 0);
	line.function_id = pprof_builder__function(c->b, c->js.name, c->js.name,
						   c->js.file[0] ? c->js.file : NULL, c->js.start_line);
	line.line = c->js.start_line;
	return line.function_id ? pprof_builder__location(c->b, map_id, v, &line, 1) : 0;
}

static uint64_t user_location(struct out_ctx *c, uint32_t pid, uint64_t addr)
{
	const struct procmap *m = c->o->procs ? proctab__resolve(c->o->procs, pid, addr) : NULL;
	uint64_t map_id = 0;
	const char *name = NULL;

	if (m && !m->path[0]) {
		bool handled;
		uint64_t id = jit_location(c, pid, m, addr, &handled);

		if (handled)
			return id;
	}
	if (m) {
		name = symbolizer__name(c->o->sym, pid, m, addr);
		map_id = file_mapping(c, m);
		if (!map_id)
			return 0;
	}
	return location(c, map_id, addr, name);
}

/* One stack's sample: user return addresses are stepped back into their call (all of them
 * when the stack starts at a return address, as a heap sample's does). */
static int add_stack(struct out_ctx *c, uint32_t pid, int64_t tid, uint32_t label_set,
		     const uint64_t *frames, size_t n_kernel, size_t n_user, bool leaf_is_ra,
		     uint16_t flags, const int64_t *values)
{
	uint64_t locs[CONFIG_MAX_STACK_DEPTH * 2 + 8];
	size_t n = 0, nf = n_kernel + n_user;
	struct pprof_label_desc labels[SAMPLE_MAX_LABELS + 5];
	const char *keys[SAMPLE_MAX_LABELS + 1], *vals[SAMPLE_MAX_LABELS + 1];
	size_t nl = c->a ? aggregate__labels(c->a, label_set, keys, vals, SAMPLE_MAX_LABELS + 1)
			 : 0;

	for (size_t i = 0; i < nf && n < sizeof(locs) / sizeof(locs[0]); i++) {
		uint64_t addr = frames[i], id;

		if (i < n_kernel) {
			if (!c->kmap)
				c->kmap = pprof_builder__mapping(c->b, &c->km);
			id = c->kmap ? location(c, c->kmap, addr, kernel_name(c->o, addr)) : 0;
		} else if (pyframe__is(addr)) {
			id = py_location(c, pid, addr);
		} else if (luaframe__is(addr)) {
			id = lua_location(c, pid, addr);
		} else if (IS_ENABLED(CONFIG_BPF_V8) && v8frame__is(addr)) {
			id = js_location(c, pid, addr);
		} else {
			/* return addresses point after the call: step back into it */
			if ((i > 0 || leaf_is_ra) && addr)
				addr--;
			id = user_location(c, pid, addr);
		}
		if (!id)
			return -ENOSPC;
		locs[n++] = id;
	}
	for (size_t i = 0; i < nl; i++)
		labels[i] = (struct pprof_label_desc){.key = keys[i], .str = vals[i]};
	labels[nl++] = (struct pprof_label_desc){.key = "pid", .num = pid};
	if (tid >= 0) /* -1: the kind has no thread (heap stacks are per process) */
		labels[nl++] = (struct pprof_label_desc){.key = "thread", .num = tid};
	/* frames found by reading code, not tables (armv7): told apart from exact stacks */
	if (flags & SAMPLE_F_INFERRED)
		labels[nl++] = (struct pprof_label_desc){.key = "unwind", .str = "inferred"};
	if (c->snapshot)
		labels[nl++] = (struct pprof_label_desc){.key = SNAPSHOT_LABEL, .str = c->snapshot};
	return pprof_builder__add_sample(c->b, locs, n, values, labels, nl);
}

static int add_entry(void *ctx, const struct agg_entry *e)
{
	int64_t values[2] = {(int64_t)e->count, (int64_t)e->weight_ns};
	struct out_ctx *c = ctx;
	char text[(SNAPSHOT_ARM_HDR + SNAPSHOT_MAX_STACK + 2) / 3 * 4 + 1];
	int err;

	if (e->snapshot && e->snapshot_len <= SNAPSHOT_ARM_HDR + SNAPSHOT_MAX_STACK) {
		snapshot__to_text(e->snapshot, e->snapshot_len, text);
		c->snapshot = text;
	}
	err = add_stack(ctx, e->pid, e->tid, e->labels, e->frames, e->n_kernel, e->n_user, false,
			e->flags, values);
	c->snapshot = NULL;
	return err;
}

/* The perf maps' counters (since the agent started): what was read, skipped, refused. */
static int jit_comment(struct out_ctx *c)
{
	struct perfmap_stats st;
	char line[320];

	perfmaps__stats(perfmaps__shared(), &st);
	snprintf(line, sizeof(line),
		 "perfmap: files=%llu reads=%llu entries=%llu superseded=%llu dropped=%llu "
		 "bad_lines=%llu long_names=%llu refused=%llu hits=%llu misses=%llu "
		 "evictions=%llu after_exit=%llu bytes=%zu",
		 (unsigned long long)st.files, (unsigned long long)st.reads,
		 (unsigned long long)st.entries, (unsigned long long)st.superseded,
		 (unsigned long long)st.dropped, (unsigned long long)st.bad_lines,
		 (unsigned long long)st.long_names, (unsigned long long)st.refused,
		 (unsigned long long)st.hits, (unsigned long long)st.misses,
		 (unsigned long long)st.evictions, (unsigned long long)st.after_exit, st.bytes);
	return pprof_builder__add_comment(c->b, line);
}

/* The Python frames' naming counters (since start). */
static int py_comment(struct out_ctx *c)
{
	struct pyname_stats st;
	char line[448];

	pyname__stats(&st);
	snprintf(line, sizeof(line),
		 "python names: held_texts=%llu held_functions=%llu held_lines=%llu "
		 "resolved=%llu cached=%llu evicted=%llu dropped=%llu lines_lost=%llu "
		 "unreadable=%llu not_code=%llu "
		 "bad_string=%llu unknown_version=%llu lines=%llu line_far=%llu line_none=%llu "
		 "line_cut=%llu line_bad=%llu",
		 (unsigned long long)st.names.texts, (unsigned long long)st.names.fns,
		 (unsigned long long)st.names.lines, (unsigned long long)st.resolved,
		 (unsigned long long)st.names.cached,
		 (unsigned long long)st.names.evicted, (unsigned long long)st.names.dropped,
		 (unsigned long long)st.names.lines_lost,
		 (unsigned long long)st.unreadable, (unsigned long long)st.not_code,
		 (unsigned long long)st.bad_string, (unsigned long long)st.unknown_version,
		 (unsigned long long)st.lines, (unsigned long long)st.line_far,
		 (unsigned long long)st.line_none, (unsigned long long)st.line_cut,
		 (unsigned long long)st.line_bad);
	return pprof_builder__add_comment(c->b, line);
}

/* The Lua frames' naming counters (since start). */
static int lua_comment(struct out_ctx *c)
{
	struct luaname_stats st;
	char line[384];

	luaname__stats(&st);
	snprintf(line, sizeof(line),
		 "lua names: held_texts=%llu held_functions=%llu held_lines=%llu "
		 "resolved=%llu cached=%llu evicted=%llu dropped=%llu lines_lost=%llu "
		 "unreadable=%llu "
		 "not_proto=%llu bad_string=%llu",
		 (unsigned long long)st.names.texts, (unsigned long long)st.names.fns,
		 (unsigned long long)st.names.lines, (unsigned long long)st.resolved,
		 (unsigned long long)st.names.cached,
		 (unsigned long long)st.names.evicted, (unsigned long long)st.names.dropped,
		 (unsigned long long)st.names.lines_lost,
		 (unsigned long long)st.unreadable, (unsigned long long)st.not_proto,
		 (unsigned long long)st.bad_string);
	return pprof_builder__add_comment(c->b, line);
}

/* The JavaScript frames' naming counters (since start). */
static int js_comment(struct out_ctx *c)
{
	struct v8name_stats st = {0};
	char line[384];

#ifdef CONFIG_BPF_V8
	if (v8name__stats)
		v8name__stats(&st);
#endif
	snprintf(line, sizeof(line),
		 "javascript names: held_texts=%llu held_functions=%llu "
		 "resolved=%llu cached=%llu evicted=%llu dropped=%llu "
		 "unreadable=%llu not_sfi=%llu bad_layout=%llu no_name=%llu no_file=%llu lines=%llu",
		 (unsigned long long)st.names.texts, (unsigned long long)st.names.fns,
		 (unsigned long long)st.resolved, (unsigned long long)st.names.cached,
		 (unsigned long long)st.names.evicted, (unsigned long long)st.names.dropped,
		 (unsigned long long)st.unreadable, (unsigned long long)st.not_sfi,
		 (unsigned long long)st.bad_layout, (unsigned long long)st.no_name,
		 (unsigned long long)st.no_file, (unsigned long long)st.lines);
	return pprof_builder__add_comment(c->b, line);
}

int output__pprof(const struct aggregate *a, const struct output_opts *o, pprof_write_fn w,
		  void *ctx)
{
	struct pprof_builder_opts bo = {.gzip_level = o->gzip_level};
	const char *type = o->type ? o->type : "cpu";
	struct out_ctx c = {.o = o,
			    .a = a,
			    .km = {.memory_start = 0x8000000000000000ull,
				   .memory_limit = UINT64_MAX,
				   .filename = KERNEL_MAPPING,
				   .has_functions = o->ksyms != NULL}};
	int err;

	c.b = pprof_builder__new(&bo, w, ctx);
	if (!c.b)
		return -ENOMEM;
	err = pprof_builder__add_sample_type(c.b, "samples", "count");
	if (!err)
		err = pprof_builder__add_sample_type(c.b, type, "nanoseconds");
	if (!err)
		err = pprof_builder__set_period(c.b, type, "nanoseconds",
						(int64_t)(1000000000ull / (o->hz ? o->hz : 1)));
	if (!err)
		err = pprof_builder__set_default_sample_type(c.b, type);
	pprof_builder__set_time(c.b, (int64_t)o->time_ns, (int64_t)o->duration_ns);
	for (size_t i = 0; !err && i < o->n_comments; i++)
		err = pprof_builder__add_comment(c.b, o->comments[i]);
	if (!err)
		err = aggregate__foreach(a, add_entry, &c);
	if (!err && c.jit_used)
		err = jit_comment(&c);
	if (!err && c.py_used)
		err = py_comment(&c);
	if (!err && c.lua_used)
		err = lua_comment(&c);
	if (!err && c.js_used)
		err = js_comment(&c);
	if (!err)
		err = pprof_builder__finish(c.b);
	pprof_builder__free(c.b);
	return err;
}

static int write_buf(const struct aggregate *a, const struct output_opts *o, const char *path)
{
	struct pprof_buf buf = {0};
	int err = output__pprof(a, o, pprof_buf_write, &buf);

	if (!err)
		err = port_file_write_atomic(path, buf.data, buf.len, 0644);
	free(buf.data);
	return err;
}

int output__write_file(const struct aggregate *a, const struct output_opts *o, const char *path)
{
	int err = port_mkdir_parent(path, 0750);	/* EDGEPROF_OUTPUT=dir/that/is/new/cpu.pb.gz */

	return err ? err : write_buf(a, o, path);
}

int output__path(const struct output_opts *o, const char *dir, const char *type, char *path_out,
		 size_t path_len)
{
	static unsigned int seq;
	time_t t = (time_t)(o->time_ns / 1000000000ull);
	char stamp[32];
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if ((size_t)snprintf(path_out, path_len, "%s/%s-%s-%s-%u.pb.gz", dir,
			     o->service ? o->service : "unknown", type, stamp, seq++) >= path_len)
		return -ENAMETOOLONG;
	return 0;
}

int output__write_dir(const struct aggregate *a, const struct output_opts *o, const char *dir,
		      char *path_out, size_t path_len)
{
	int err = output__path(o, dir, o->type ? o->type : "cpu", path_out, path_len);

	return err ? err : write_buf(a, o, path_out);
}

/* Another kind of profile (heap): the stacks and values heap.c hands over, one sample each. */
int output__stacks_pprof(const struct output_kind *k, const struct output_opts *o,
			 const struct output_stack *st, size_t n, pprof_write_fn w, void *ctx)
{
	struct pprof_builder_opts bo = {.gzip_level = o->gzip_level};
	struct out_ctx c = {.o = o};
	int err = 0;

	c.b = pprof_builder__new(&bo, w, ctx);
	if (!c.b)
		return -ENOMEM;
	for (size_t i = 0; !err && i < k->n_types; i++)
		err = pprof_builder__add_sample_type(c.b, k->types[i], k->units[i]);
	if (!err)
		err = pprof_builder__set_period(c.b, k->period_type, k->period_unit, k->period);
	if (!err && k->default_type)
		err = pprof_builder__set_default_sample_type(c.b, k->default_type);
	pprof_builder__set_time(c.b, (int64_t)o->time_ns, (int64_t)o->duration_ns);
	for (size_t i = 0; !err && i < o->n_comments; i++)
		err = pprof_builder__add_comment(c.b, o->comments[i]);
	for (size_t i = 0; !err && i < n; i++)
		err = add_stack(&c, st[i].pid, -1, 0, st[i].frames, 0, st[i].n_frames, true, 0,
				st[i].values);
	if (!err)
		err = pprof_builder__finish(c.b);
	pprof_builder__free(c.b);
	return err;
}

int output__write_stacks_file(const struct output_kind *k, const struct output_opts *o,
			      const struct output_stack *st, size_t n, const char *path)
{
	struct pprof_buf buf = {0};
	int err = output__stacks_pprof(k, o, st, n, pprof_buf_write, &buf);

	if (!err)
		err = port_file_write_atomic(path, buf.data, buf.len, 0644);
	free(buf.data);
	return err;
}
