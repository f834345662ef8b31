/* SPDX-License-Identifier: MIT */
/*
 * pprof/internal.h — helpers shared by the builder, writer, reader and merger; not a public API.
 */
#ifndef EDGEPROF_PPROF_INTERNAL_H
#define EDGEPROF_PPROF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>
#include <pb_encode.h>

#include "pprof/pprof.h"

/* ---- hashing ------------------------------------------------------------------------------ */

static inline uint64_t pp_mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

static inline uint64_t pp_hash_bytes(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL ^ len;

	for (; len >= 8; p += 8, len -= 8) {
		uint64_t v;

		__builtin_memcpy(&v, p, 8);
		h = pp_mix(h, v);
	}
	if (len) {
		uint64_t v = 0;

		__builtin_memcpy(&v, p, len);
		h = pp_mix(h, v);
	}
	return h;
}

/*
 * An open-addressing index: maps a hash to entries (uint32 indexes) of a table the caller owns.
 * Load factor <= 1/2; 8 bytes per slot. Index and hash side by side: one cache miss per probe.
 */
struct pp_htab_slot {
	uint32_t slot; /* entry index + 1; 0 = empty */
	uint32_t hash;
};

struct pp_htab {
	struct pp_htab_slot *e;
	size_t cap, n;
};

int pp_htab__grow(struct pp_htab *t, size_t more);

/* Room for `more` entries at load <= 1/2: 0 or -ENOMEM. Called per sample: the check is inline. */
static inline int pp_htab__reserve(struct pp_htab *t, size_t more)
{
	if (t->cap && (t->n + more) * 2 <= t->cap)
		return 0;
	return pp_htab__grow(t, more);
}
void pp_htab__free(struct pp_htab *t);

/* Position to start probing; walk with (pos + 1) & (cap - 1) until e[pos].slot == 0. */
static inline size_t pp_htab__pos(const struct pp_htab *t, uint32_t h)
{
	return h & (t->cap - 1);
}

static inline void pp_htab__set(struct pp_htab *t, size_t pos, uint32_t h, uint32_t idx)
{
	t->e[pos].slot = idx + 1;
	t->e[pos].hash = h;
	t->n++;
}

/* ---- growable arrays ---------------------------------------------------------------------- */

/* Makes room for n more elements of size sz in *arr (holding *len, capacity *cap): 0/-ENOMEM. */
int pp_grow_slow(void *arr, size_t *cap, size_t len, size_t n, size_t sz);

static inline int pp_grow(void *arr, size_t *cap, size_t len, size_t n, size_t sz)
{
	/* Always allocated afterwards, even for n == 0: memcpy/qsort never see NULL. */
	if (len + n <= *cap && *(void **)arr)
		return 0;
	return pp_grow_slow(arr, cap, len, n, sz);
}

/* ---- string interning --------------------------------------------------------------------- */

struct pp_strtab {
	char *data; /* NUL-terminated strings back to back */
	size_t data_len, data_cap;
	uint32_t *off, *len;
	size_t n, cap;
	struct pp_htab ht;
	size_t max;
};

/* Returns the index of s[0..len) (adding it), -ENOSPC beyond max or -ENOMEM. */
int64_t pp_strtab__intern(struct pp_strtab *st, const char *s, size_t len);
void pp_strtab__free(struct pp_strtab *st);
static inline const char *pp_strtab__get(const struct pp_strtab *st, size_t i)
{
	return st->data + st->off[i];
}

/* ---- gzip/raw output through nanopb ------------------------------------------------------- */

#define PP_STAGE_SIZE 16384

struct pp_out {
	pprof_write_fn write;
	void *ctx;
	bool gzip, z_ready;
	int err;
	z_stream z;
	size_t stage_len;
	unsigned char stage[PP_STAGE_SIZE]; /* protobuf bytes waiting for deflate */
	unsigned char zbuf[PP_STAGE_SIZE];  /* deflated bytes waiting for write */
	pb_ostream_t os;
};

/* gzip of data[0..len) deflated in parts by up to `threads` threads (pprof/write-parallel.c). */
int pp_gzip_parallel(const unsigned char *data, size_t len, int level, unsigned threads,
		     pprof_write_fn write, void *ctx);

int pp_out__init(struct pp_out *o, int gzip_level, pprof_write_fn write, void *ctx);
int pp_out__finish(struct pp_out *o);
void pp_out__release(struct pp_out *o);

/* Encoders of the profile's messages into o->os (false on error, o->err says why). */
bool pp_enc_varint_field(pb_ostream_t *os, uint32_t tag, uint64_t v);
bool pp_enc_value_type(pb_ostream_t *os, uint32_t tag, const struct pprof_value_type *vt);
bool pp_enc_sample(pb_ostream_t *os, const uint64_t *loc_ids, size_t n_locs, const int64_t *values,
		   size_t n_values, const struct pprof_label *labels, size_t n_labels);
bool pp_enc_mapping(pb_ostream_t *os, const struct pprof_mapping *m);
bool pp_enc_location(pb_ostream_t *os, const struct pprof_location *l);
bool pp_enc_function(pb_ostream_t *os, const struct pprof_function *f);
bool pp_enc_string(pb_ostream_t *os, const char *s, size_t len);
bool pp_enc_packed_i64(pb_ostream_t *os, uint32_t tag, const int64_t *v, size_t n);

/* The budget a merger asks (pprof_merger__set_budget()): NULL when none. */
const struct pprof_budget *pp_merger_budget(const struct pprof_merger *m);

/* ---- the blocks a reader/merger profile owns ---------------------------------------------- */

struct pprof_blocks {
	char *strdata;
	uint64_t *ids;
	int64_t *values;
	struct pprof_label *labels;
	struct pprof_line *lines;
};

/*
 * A sample with one value field, as the reader's merge pass keys it (pprof/reader.c): its bytes
 * but the value field ([voff, vend) of p[0..len)). Encoders write a sample's fields in one order
 * (Go's and ours: location ids, values, labels), so samples that differ only in values differ
 * only there. Here so that the scratch below can hold them.
 */
struct pp_skey {
	const uint8_t *p;
	uint32_t len, voff, vend;
	uint32_t n_ids, n_labels; /* counted in pass 1 */
	uint32_t reps, sum;       /* merged into it: repeats of its values, sums of the others */
	uint32_t hash;            /* as the table's slots hold it */
	uint16_t n_vals;          /* its values (no sums for a key with more) */
	bool plain;               /* packed ids, packed values, nothing else: plain_sample() */
};				  /* 48 bytes: looked up once an input sample */

/*
 * What one pprof_read needs only while it runs, kept between reads in a bounded pool
 * (pprof/read-scratch.c): the merge pass's tables, the inflated input and the inflater. Taken
 * empty (all zero) when the pool has none; arrays are grown by their users as before. The
 * reader works in it directly (no copies in and out).
 */
struct pp_scratch {
	struct pp_htab ht;      /* hash of a key -> keys[]; empty (n 0, slots cleared) when taken */
	struct pp_skey *keys;   /* by distinct sample; len 0: one that merges with none */
	size_t cap_keys;
	uint32_t *of;           /* input sample -> distinct sample */
	size_t cap_of;
	uint64_t *vals;         /* the merged samples' sums by key (pass 1), or one's values */
	size_t cap_vals;
	uint8_t *buf;           /* the inflated input (libdeflate's path) */
	size_t cap_buf;
	void *inflater;         /* pp_inflater_free() frees it */
	uint64_t idle_since_s;
};

void pp_scratch__take(struct pp_scratch *s);
void pp_scratch__give(struct pp_scratch *s); /* s is left empty */

/*
 * A faster whole-buffer gunzip of at most @max output bytes (pprof/inflate-*.c, chosen by
 * CONFIG_PPROF_LIBDEFLATE) into s->buf (grown as needed; s keeps it), *out_len bytes. 0, or
 * -EAGAIN: use zlib's streaming path, which is the reference for every error and limit.
 */
int pp_inflate_fast(const uint8_t *in, size_t len, size_t max, struct pp_scratch *s,
		    size_t *out_len);
void pp_inflater_free(void *inflater); /* NULL-safe */

void pp_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif /* EDGEPROF_PPROF_INTERNAL_H */
