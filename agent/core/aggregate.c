// SPDX-License-Identifier: MIT
/* agent/core/aggregate.c — open-addressing stack table over preallocated pools; see aggregate.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "agent/core/aggregate.h"
#include "port/hash.h"
#include "pprof/snapshot.h"

struct agg_ent {
	uint64_t hash;
	uint32_t pid, tid, labels, frame_off;
	uint16_t n_kernel, n_user, flags;
	uint32_t snap_len; /* bytes of snapshot in the frame pool after the frames */
	uint64_t count, weight_ns;
};

struct agg_lset {
	uint64_t hash;
	uint32_t off, len;
};

struct aggregate {
	struct agg_opts o;
	struct agg_ent *ents;
	uint32_t *index; /* entry number + 1, 0 = empty */
	size_t index_mask, n_ents;
	uint64_t *frames;
	size_t n_frames;
	struct agg_lset *lsets;
	size_t n_lsets;
	char *lblob;
	size_t lblob_used;
	struct agg_stats st;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

size_t aggregate__entries_for(unsigned long hz, unsigned long cpus, unsigned long seconds)
{
	uint64_t n = (uint64_t)hz * (cpus ? cpus : 1) * seconds;

	if (n < CONFIG_STACK_TABLE_ENTRIES)
		return CONFIG_STACK_TABLE_ENTRIES;
	return n > (1u << 20) ? 1u << 20 : (size_t)n;
}

struct aggregate *aggregate__new(const struct agg_opts *opts)
{
	struct aggregate *a = calloc(1, sizeof(*a));
	size_t cap = 16;

	if (!a)
		return NULL;
	if (opts)
		a->o = *opts;
	if (!a->o.max_entries)
		a->o.max_entries = CONFIG_STACK_TABLE_ENTRIES;
	if (!a->o.max_snapshots)
		a->o.max_snapshots = CONFIG_SNAPSHOTS_PER_ROUND;
	/* snapshots' words too (calloc: pages are touched only by the snapshots taken) */
	if (!a->o.max_frames)
		a->o.max_frames = a->o.max_entries * 32 +
				  a->o.max_snapshots * ((SNAPSHOT_ARM_HDR + SNAPSHOT_MAX_STACK) / 8 + 1);
	if (!a->o.max_label_sets)
		a->o.max_label_sets = 256;
	if (!a->o.label_bytes)
		a->o.label_bytes = 16384;
	while (cap < 2 * a->o.max_entries)
		cap <<= 1;
	a->index_mask = cap - 1;
	/* calloc: pages are touched only as the table fills */
	a->ents = calloc(a->o.max_entries, sizeof(*a->ents));
	a->index = calloc(cap, sizeof(*a->index));
	a->frames = calloc(a->o.max_frames, sizeof(*a->frames));
	a->lsets = calloc(a->o.max_label_sets, sizeof(*a->lsets));
	a->lblob = calloc(1, a->o.label_bytes);
	if (!a->ents || !a->index || !a->frames || !a->lsets || !a->lblob) {
		aggregate__free(a);
		return NULL;
	}
	return a;
}

void aggregate__free(struct aggregate *a)
{
	if (!a)
		return;
	free(a->ents);
	free(a->index);
	free(a->frames);
	free(a->lsets);
	free(a->lblob);
	free(a);
}

void aggregate__reset(struct aggregate *a)
{
	memset(a->index, 0, (a->index_mask + 1) * sizeof(*a->index));
	a->n_ents = a->n_frames = a->n_lsets = a->lblob_used = 0;
	memset(&a->st, 0, sizeof(a->st));
}

/* Interns the sample's labels as one "k\0v\0..." blob; 0 = none, -1 = did not fit. */
static int64_t intern_labels(struct aggregate *a, const struct agent_sample *s)
{
	char blob[1024];
	size_t len = 0;
	unsigned int n = s->n_labels < SAMPLE_MAX_LABELS ? s->n_labels : SAMPLE_MAX_LABELS;

	for (unsigned int i = 0; i <= n; i++) {
		const char *k = i < n ? s->labels[i].key : "comm";
		const char *v = i < n ? s->labels[i].value : s->comm;

		if (!k || !v)
			continue;
		size_t kl = strlen(k) + 1, vl = strlen(v) + 1;

		if (len + kl + vl > sizeof(blob))
			return -1;
		memcpy(blob + len, k, kl);
		memcpy(blob + len + kl, v, vl);
		len += kl + vl;
	}
	if (!len)
		return 0;
	uint64_t h = hash_fnv64(blob, len);

	for (size_t i = 0; i < a->n_lsets; i++)
		if (a->lsets[i].hash == h && a->lsets[i].len == len &&
		    !memcmp(a->lblob + a->lsets[i].off, blob, len))
			return (int64_t)i + 1;
	if (a->n_lsets == a->o.max_label_sets || a->lblob_used + len > a->o.label_bytes)
		return -1;
	memcpy(a->lblob + a->lblob_used, blob, len);
	a->lsets[a->n_lsets] = (struct agg_lset){h, (uint32_t)a->lblob_used, (uint32_t)len};
	a->lblob_used += len;
	return (int64_t)++a->n_lsets;
}

/*
 * A sample with its snapshot: an entry of its own (never merged, never looked up), its frames
 * and then the snapshot's bytes in the frame pool.
 */
static int add_snapshot(struct aggregate *a, const struct agent_sample *s, uint32_t lid)
{
	size_t nf = (size_t)s->n_kernel + s->n_user, nw = nf + (s->snapshot_len + 7) / 8;
	struct agg_ent *e;

	if (a->n_ents == a->o.max_entries) {
		a->st.dropped_table++;
		return -EDQUOT;
	}
	if (a->n_frames + nw > a->o.max_frames)
		return -ENOSPC; /* the caller keeps the sample without its snapshot */
	e = &a->ents[a->n_ents++];
	*e = (struct agg_ent){.pid = s->pid,
			      .tid = s->tid,
			      .labels = lid,
			      .frame_off = (uint32_t)a->n_frames,
			      .n_kernel = s->n_kernel,
			      .n_user = s->n_user,
			      .flags = s->flags,
			      .snap_len = s->snapshot_len,
			      .count = 1,
			      .weight_ns = s->weight_ns};
	memcpy(a->frames + a->n_frames, s->frames, nf * sizeof(uint64_t));
	memcpy(a->frames + a->n_frames + nf, s->snapshot, s->snapshot_len);
	a->n_frames += nw;
	a->st.snapshots++;
	a->st.samples++;
	a->st.weight_ns += s->weight_ns;
	if (s->flags & SAMPLE_F_TRUNCATED)
		a->st.truncated++;
	return 0;
}

int aggregate__add(struct aggregate *a, const struct agent_sample *s)
{
	size_t nf = (size_t)s->n_kernel + s->n_user;
	int64_t lid = intern_labels(a, s);
	uint64_t h;

	if (lid < 0) {
		a->st.dropped_labels++;
		return -ENOSPC;
	}
	if ((s->flags & SAMPLE_F_SNAPSHOT) && s->snapshot) {
		int ret = a->st.snapshots < a->o.max_snapshots ? add_snapshot(a, s, (uint32_t)lid)
							       : -ENOSPC;

		if (ret != -ENOSPC)
			return ret == -EDQUOT ? -ENOSPC : ret;
		a->st.dropped_snapshots++; /* the sample counts, aggregated, without it */
	}
	h = mix(mix(mix(s->pid, s->tid), (uint64_t)lid), (uint64_t)s->n_kernel << 16 | s->n_user);
	for (size_t i = 0; i < nf; i++)
		h = mix(h, s->frames[i]);
	for (size_t slot = h & a->index_mask;; slot = (slot + 1) & a->index_mask) {
		uint32_t idx = a->index[slot];
		struct agg_ent *e;

		if (idx == 0) {
			if (a->n_ents == a->o.max_entries) {
				a->st.dropped_table++;
				return -ENOSPC;
			}
			if (a->n_frames + nf > a->o.max_frames) {
				a->st.dropped_frames++;
				return -ENOSPC;
			}
			e = &a->ents[a->n_ents];
			*e = (struct agg_ent){.hash = h,
					      .pid = s->pid,
					      .tid = s->tid,
					      .labels = (uint32_t)lid,
					      .frame_off = (uint32_t)a->n_frames,
					      .n_kernel = s->n_kernel,
					      .n_user = s->n_user,
					      .flags = s->flags & (uint16_t)~SAMPLE_F_SNAPSHOT};
			memcpy(a->frames + a->n_frames, s->frames, nf * sizeof(uint64_t));
			a->n_frames += nf;
			a->index[slot] = (uint32_t)++a->n_ents;
		} else {
			e = &a->ents[idx - 1];
			if (e->hash != h || e->pid != s->pid || e->tid != s->tid ||
			    e->labels != (uint32_t)lid || e->n_kernel != s->n_kernel ||
			    e->n_user != s->n_user || ((e->flags ^ s->flags) & SAMPLE_F_INFERRED) ||
			    memcmp(a->frames + e->frame_off, s->frames, nf * sizeof(uint64_t)))
				continue;
		}
		e->count++;
		e->weight_ns += s->weight_ns;
		a->st.samples++;
		a->st.weight_ns += s->weight_ns;
		if (s->flags & SAMPLE_F_TRUNCATED)
			a->st.truncated++;
		return 0;
	}
}

int aggregate__sink(void *ctx, const struct agent_sample *s)
{
	return aggregate__add(ctx, s);
}

int aggregate__foreach(const struct aggregate *a, int (*fn)(void *ctx, const struct agg_entry *e),
		       void *ctx)
{
	for (size_t i = 0; i < a->n_ents; i++) {
		const struct agg_ent *e = &a->ents[i];
		const uint64_t *frames = a->frames + e->frame_off;
		struct agg_entry out = {
		    .pid = e->pid,
		    .tid = e->tid,
		    .labels = e->labels,
		    .n_kernel = e->n_kernel,
		    .n_user = e->n_user,
		    .flags = e->flags,
		    .count = e->count,
		    .weight_ns = e->weight_ns,
		    .frames = frames,
		    .snapshot = e->snap_len ? (const uint8_t *)(frames + e->n_kernel + e->n_user)
					    : NULL,
		    .snapshot_len = e->snap_len};
		int rc = fn(ctx, &out);

		if (rc)
			return rc;
	}
	return 0;
}

size_t aggregate__labels(const struct aggregate *a, uint32_t id, const char **keys,
			 const char **values, size_t max)
{
	size_t n = 0;

	if (id == 0 || id > a->n_lsets)
		return 0;
	const char *p = a->lblob + a->lsets[id - 1].off, *end = p + a->lsets[id - 1].len;

	while (p < end && n < max) {
		keys[n] = p;
		p += strlen(p) + 1;
		values[n++] = p;
		p += strlen(p) + 1;
	}
	return n;
}

void aggregate__stats(const struct aggregate *a, struct agg_stats *st)
{
	*st = a->st;
	st->entries = a->n_ents;
}
