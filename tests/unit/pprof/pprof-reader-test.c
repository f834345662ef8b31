// SPDX-License-Identifier: MIT
/* Crafted inputs for pprof_read(): every malformation gets -EINVAL/-EFBIG and a clear message. */
/* 32-bit boards: readdir() fails with EOVERFLOW on 64-bit inode numbers without LFS. */
#define _FILE_OFFSET_BITS 64
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <dirent.h>
#include <cmocka.h>

#include "pprof/pprof.h"

/* ---- a tiny protobuf writer for hand-made messages ---------------------------------------- */

struct pb {
	uint8_t d[8192];
	size_t n;
};

static void pb_varint(struct pb *b, uint64_t v)
{
	while (v >= 0x80) {
		b->d[b->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->d[b->n++] = (uint8_t)v;
}

static void pb_u(struct pb *b, unsigned field, uint64_t v)
{
	pb_varint(b, field << 3);
	pb_varint(b, v);
}

static void pb_bytes(struct pb *b, unsigned field, const void *data, size_t len)
{
	pb_varint(b, field << 3 | 2);
	pb_varint(b, len);
	memcpy(b->d + b->n, data, len);
	b->n += len;
}

static void pb_msg(struct pb *b, unsigned field, const struct pb *m)
{
	pb_bytes(b, field, m->d, m->n);
}

static void pb_str(struct pb *b, const char *s)
{
	pb_bytes(b, 6, s, strlen(s));
}

/* A valid profile: strings "", "cpu", "ns", "main"; 1 function, 1 location, 1 sample. */
static void base_tables(struct pb *b)
{
	struct pb vt = { 0 }, fn = { 0 }, loc = { 0 }, line = { 0 };

	pb_str(b, "");
	pb_str(b, "cpu");
	pb_str(b, "ns");
	pb_str(b, "main");
	pb_u(&vt, 1, 1);
	pb_u(&vt, 2, 2);
	pb_msg(b, 1, &vt);
	pb_u(&fn, 1, 1);
	pb_u(&fn, 2, 3);
	pb_msg(b, 5, &fn);
	pb_u(&line, 1, 1);
	pb_u(&line, 2, 7);
	pb_u(&loc, 1, 1);
	pb_u(&loc, 3, 0x1234);
	pb_msg(&loc, 4, &line);
	pb_msg(b, 4, &loc);
}

static void add_sample(struct pb *b, uint64_t loc_id, int64_t value)
{
	struct pb s = { 0 };

	pb_u(&s, 1, loc_id);
	pb_u(&s, 2, (uint64_t)value);
	pb_msg(b, 2, &s);
}

static int read_pb(const struct pb *b, const struct pprof_read_limits *lim, char *err, size_t len,
		   struct pprof_profile **p)
{
	return pprof_read(b->d, b->n, lim, p, err, len);
}

static void expect_error(const struct pb *b, int want, const char *msg)
{
	struct pprof_profile *p = (void *)1;
	char err[256];

	assert_int_equal(read_pb(b, NULL, err, sizeof(err), &p), want);
	assert_null(p);
	if (!strstr(err, msg))
		fail_msg("error \"%s\" does not contain \"%s\"", err, msg);
}

/* ---- tests -------------------------------------------------------------------------------- */

static void reads_a_valid_profile(void **state)
{
	struct pb b = { 0 };
	struct pprof_profile *p;
	char err[256];

	base_tables(&b);
	add_sample(&b, 1, -3);
	assert_int_equal(read_pb(&b, NULL, err, sizeof(err), &p), 0);
	assert_int_equal(p->n_samples, 1);
	assert_int_equal(p->samples[0].values[0], -3);
	assert_int_equal(p->locations[0].lines[0].line, 7);
	assert_string_equal(pprof_str(p, p->functions[0].name), "main");
	assert_string_equal(pprof_str(p, 99), ""); /* out of range is "" */
	pprof_profile__free(p);
}

static void names_the_missing_location(void **state)
{
	struct pb b = { 0 };

	base_tables(&b);
	add_sample(&b, 1, 1);
	add_sample(&b, 99, 1);
	expect_error(&b, -EINVAL, "sample 1 references location 99, profile has 1");
}

static void value_count_must_match_types(void **state)
{
	struct pb b = { 0 }, s = { 0 };

	base_tables(&b);
	pb_u(&s, 1, 1);
	pb_u(&s, 2, 1);
	pb_u(&s, 2, 2);
	pb_msg(&b, 2, &s);
	expect_error(&b, -EINVAL, "sample 0 has 2 values, profile has 1 sample types");
}

static void string_indexes_are_checked(void **state)
{
	struct pb b = { 0 }, fn = { 0 };

	base_tables(&b);
	pb_u(&fn, 1, 2);
	pb_u(&fn, 2, 40);
	pb_msg(&b, 5, &fn);
	expect_error(&b, -EINVAL, "function 1 name references string 40, profile has 4");

	b.n = 0;
	base_tables(&b);
	pb_u(&b, 14, 17);
	expect_error(&b, -EINVAL, "default_sample_type references string 17");

	b.n = 0;
	base_tables(&b);
	pb_u(&b, 13, 5);
	expect_error(&b, -EINVAL, "comment 0 references string 5");
}

static void string_zero_must_be_empty(void **state)
{
	struct pb b = { 0 };

	pb_str(&b, "x");
	expect_error(&b, -EINVAL, "string_table[0] must be \"\"");
	b.n = 0;
	pb_u(&b, 9, 1); /* no string table at all */
	expect_error(&b, -EINVAL, "string_table[0]");
}

static void ids_must_be_unique_and_nonzero(void **state)
{
	struct pb b = { 0 }, fn = { 0 };

	base_tables(&b);
	pb_u(&fn, 1, 1);
	pb_msg(&b, 5, &fn);
	expect_error(&b, -EINVAL, "duplicate function id 1");

	b.n = 0;
	fn.n = 0;
	base_tables(&b);
	pb_u(&fn, 2, 3);
	pb_msg(&b, 5, &fn);
	expect_error(&b, -EINVAL, "function 1 has id 0");
}

static void location_references_are_checked(void **state)
{
	struct pb b = { 0 }, loc = { 0 }, line = { 0 };

	base_tables(&b);
	pb_u(&loc, 1, 2);
	pb_u(&loc, 2, 5);
	pb_msg(&b, 4, &loc);
	expect_error(&b, -EINVAL, "location 1 references mapping 5, profile has 0");

	b.n = loc.n = 0;
	base_tables(&b);
	pb_u(&line, 1, 8);
	pb_u(&loc, 1, 2);
	pb_msg(&loc, 4, &line);
	pb_msg(&b, 4, &loc);
	expect_error(&b, -EINVAL, "location 1 references function 8, profile has 1");
}

/* Sparse ids (any producer may use them) come out dense, with every reference remapped. */
static void sparse_ids_are_renumbered(void **state)
{
	struct pb b = { 0 }, vt = { 0 }, fn = { 0 }, loc = { 0 }, line = { 0 }, map = { 0 };
	struct pprof_profile *p;
	char err[256];

	pb_str(&b, "");
	pb_str(&b, "f");
	pb_u(&vt, 1, 1);
	pb_msg(&b, 1, &vt);
	pb_u(&map, 1, 1000);
	pb_u(&map, 2, 0x10);
	pb_msg(&b, 3, &map);
	pb_u(&fn, 1, 77);
	pb_u(&fn, 2, 1);
	pb_msg(&b, 5, &fn);
	pb_u(&line, 1, 77);
	pb_u(&loc, 1, 500);
	pb_u(&loc, 2, 1000);
	pb_msg(&loc, 4, &line);
	pb_msg(&b, 4, &loc);
	loc.n = 0;
	pb_u(&loc, 1, 40);
	pb_msg(&b, 4, &loc);
	add_sample(&b, 40, 1);
	add_sample(&b, 500, 2);
	if (read_pb(&b, NULL, err, sizeof(err), &p))
		fail_msg("%s", err);
	assert_int_equal(p->mappings[0].id, 1);
	assert_int_equal(p->functions[0].id, 1);
	assert_int_equal(p->locations[0].id, 1);
	assert_int_equal(p->locations[0].mapping_id, 1);
	assert_int_equal(p->locations[0].lines[0].function_id, 1);
	assert_int_equal(p->locations[1].id, 2);
	assert_int_equal(p->samples[0].location_ids[0], 2);
	assert_int_equal(p->samples[1].location_ids[0], 1);
	pprof_profile__free(p);
}

static void packed_and_unpacked_are_both_read(void **state)
{
	struct pb b = { 0 }, s = { 0 }, packed = { 0 };
	struct pprof_profile *p;
	char err[256];

	base_tables(&b);
	pb_varint(&packed, 1);
	pb_varint(&packed, 1);
	pb_bytes(&s, 1, packed.d, packed.n); /* packed location ids */
	pb_u(&s, 2, 300);                    /* unpacked value */
	pb_msg(&b, 2, &s);
	pb_u(&b, 13, 3); /* unpacked comment */
	pb_u(&b, 100, 5); /* unknown field: skipped */
	assert_int_equal(read_pb(&b, NULL, err, sizeof(err), &p), 0);
	assert_int_equal(p->samples[0].n_locations, 2);
	assert_int_equal(p->samples[0].values[0], 300);
	assert_string_equal(pprof_str(p, p->comments[0]), "main");
	pprof_profile__free(p);
}

static void concatenated_profiles_are_refused(void **state)
{
	struct pb b = { 0 };

	base_tables(&b);
	pb_u(&b, 9, 1000);
	pb_u(&b, 9, 2000);
	expect_error(&b, -EINVAL, "concatenated profiles");
}

static void wrong_wire_types_are_refused(void **state)
{
	struct pb b = { 0 };

	base_tables(&b);
	pb_u(&b, 2, 5); /* sample as a varint */
	expect_error(&b, -EINVAL, "sample has wire type 0");
	b.n = 0;
	base_tables(&b);
	pb_bytes(&b, 9, "x", 1); /* time_nanos as bytes */
	expect_error(&b, -EINVAL, "time_nanos has wire type 2");
}

/* Every prefix of a valid profile is refused cleanly (or, at a field boundary, read). */
static void truncations_never_crash(void **state)
{
	struct pb b = { 0 };
	struct pprof_profile *p;
	char err[256];
	size_t n, full;
	int bad = 0;

	base_tables(&b);
	add_sample(&b, 1, 5);
	full = b.n;
	for (n = 1; n < full; n++) {
		b.n = n;
		if (read_pb(&b, NULL, err, sizeof(err), &p)) {
			assert_null(p);
			assert_true(strlen(err) > 0);
			bad++;
		} else {
			pprof_profile__free(p);
		}
	}
	assert_true(bad > (int)full / 2);
	b.n = full - 1; /* cut inside the last sample's value */
	expect_error(&b, -EINVAL, "truncated");
}

static void limits_are_enforced(void **state)
{
	struct pprof_read_limits lim = { .max_samples = 2, .max_stack_depth = 3 };
	struct pb b = { 0 }, s = { 0 };
	struct pprof_profile *p;
	char err[256];
	int i;

	base_tables(&b);
	for (i = 0; i < 3; i++)
		add_sample(&b, 1, 1);
	assert_int_equal(read_pb(&b, &lim, err, sizeof(err), &p), -EFBIG);
	assert_non_null(strstr(err, "more than 2 samples"));

	b.n = 0;
	base_tables(&b);
	for (i = 0; i < 4; i++)
		pb_u(&s, 1, 1);
	pb_u(&s, 2, 1);
	pb_msg(&b, 2, &s);
	assert_int_equal(read_pb(&b, &lim, err, sizeof(err), &p), -EFBIG);
	assert_non_null(strstr(err, "sample 0 has 4 locations, limit 3"));

	lim = (struct pprof_read_limits){ .max_input = 10 };
	assert_int_equal(read_pb(&b, &lim, err, sizeof(err), &p), -EFBIG);
	assert_int_equal(pprof_read(NULL, 0, NULL, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "empty"));
}

static size_t gzip(const void *in, size_t len, uint8_t *out, size_t cap)
{
	z_stream z = { 0 };
	size_t n;

	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + 15, 9, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (void *)in;
	z.avail_in = len;
	z.next_out = out;
	z.avail_out = cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	n = cap - z.avail_out;
	deflateEnd(&z);
	return n;
}

static void gzip_is_checked(void **state)
{
	static uint8_t big[8 << 20], gz[65536];
	struct pb b = { 0 };
	struct pprof_profile *p;
	char err[256];
	uint8_t two[2 * sizeof(gz)];
	size_t n;

	/* A bomb: 8 MiB of zeros in ~8 KiB is a ratio of ~1000. */
	n = gzip(big, sizeof(big), gz, sizeof(gz));
	assert_int_equal(pprof_read(gz, n, NULL, &p, err, sizeof(err)), -EFBIG);
	assert_non_null(strstr(err, "expands beyond"));

	base_tables(&b);
	add_sample(&b, 1, 9);
	n = gzip(b.d, b.n, gz, sizeof(gz));
	assert_int_equal(pprof_read(gz, n, NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(p->samples[0].values[0], 9);
	pprof_profile__free(p);

	assert_int_equal(pprof_read(gz, n - 5, NULL, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "truncated"));

	memcpy(two, gz, n);
	memcpy(two + n, "junk", 4);
	assert_int_equal(pprof_read(two, n + 4, NULL, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "garbage after the gzip stream"));

	memcpy(two + n, gz, n); /* two members: one stream, as gzip -d reads it */
	assert_int_equal(pprof_read(two, 2 * n, NULL, &p, err, sizeof(err)), -EINVAL);
	/* ...whose content is two profiles concatenated: two sample types now. */
	if (!strstr(err, "sample 0 has 1 values, profile has 2 sample types"))
		fail_msg("%s", err);

	gz[n / 2] ^= 0xff;
	assert_int_equal(pprof_read(gz, n, NULL, &p, err, sizeof(err)), -EINVAL);
}

/*
 * With CONFIG_PPROF_LIBDEFLATE the reader sizes its buffer from the gzip trailer and decodes
 * member by member: one profile split across two members must read as one, and a trailer that
 * lies about the size (retries past the hint) must end in zlib's error, not a short read.
 */
static void gzip_members_and_trailers(void **state)
{
	static uint8_t gz[65536];
	struct pb b = { 0 };
	struct pprof_profile *p;
	char err[256];
	size_t n1, n2, half;

	(void)state;
	base_tables(&b);
	for (int i = 0; i < 500; i++)	/* ~5 KB of the 8 KB buffer */
		add_sample(&b, 1, i);
	half = b.n / 2;
	n1 = gzip(b.d, half, gz, sizeof(gz));
	n2 = gzip(b.d + half, b.n - half, gz + n1, sizeof(gz) - n1);
	assert_int_equal(pprof_read(gz, n1 + n2, NULL, &p, err, sizeof(err)), 0);
	assert_int_equal(p->n_samples, 500);
	assert_int_equal(p->samples[499].values[0], 499);
	pprof_profile__free(p);

	n1 = gzip(b.d, b.n, gz, sizeof(gz));
	memcpy(gz + n1 - 4, "\x01\x00\x00\x00", 4);	/* ISIZE = 1: far too small */
	assert_int_equal(pprof_read(gz, n1, NULL, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "gzip"));
	memcpy(gz + n1 - 4, "\xff\xff\xff\x7f", 4);	/* beyond every bound */
	assert_int_equal(pprof_read(gz, n1, NULL, &p, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "gzip"));
}

/*
 * Inputs that once crashed the fuzz target (tests/fuzz/pprof-reader.regress/): a field read as
 * packed when it was a varint (NULL + 0), and int64 sums overflowing in merge. Read them, write
 * back and merge whatever is accepted. Under SAN=1 any out-of-bounds access or UB fails.
 */
static void fuzz_regressions(void **state)
{
	const char *dir = "tests/fuzz/pprof-reader.regress";
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		static uint8_t data[1 << 20];
		struct pprof_buf out = { 0 };
		struct pprof_profile *p;
		char path[512], err[256];
		size_t len;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "rb");
		assert_non_null(f);
		len = fread(data, 1, sizeof(data), f);
		fclose(f);
		if (!pprof_read(data, len, NULL, &p, err, sizeof(err))) {
			struct pprof_merger *m = pprof_merger__new();
			struct pprof_profile *q = NULL;

			assert_int_equal(pprof_write_profile(p, NULL, pprof_buf_write, &out), 0);
			/* As the fuzz target does: merge it with itself (sums may overflow). */
			if (!pprof_merger__add(m, p, err, sizeof(err)) &&
			    !pprof_merger__add(m, p, err, sizeof(err)))
				assert_int_equal(pprof_merger__finish(m, &q, err, sizeof(err)), 0);
			pprof_profile__free(q);
			pprof_merger__free(m);
			pprof_profile__free(p);
			free(out.data);
		}
		n++;
	}
	closedir(d);
	assert_true(n > 0);
}

/* ---- merge_samples ------------------------------------------------------------------------ */

static const struct pprof_read_limits merged = { .merge_samples = true };

static bool same_labels(const struct pprof_sample *a, const struct pprof_sample *b)
{
	return a->n_labels == b->n_labels &&
	       !memcmp(a->labels, b->labels, a->n_labels * sizeof(*a->labels));
}

static bool same_key(const struct pprof_sample *a, const struct pprof_sample *b)
{
	return a->n_locations == b->n_locations && same_labels(a, b) &&
	       !memcmp(a->location_ids, b->location_ids, a->n_locations * sizeof(uint64_t));
}

/*
 * The samples of p grouped by locations and labels, in the order of their first occurrence:
 * first[g] the first sample of group g, sum its values summed (int64 wrap-around). Returns the
 * number of groups.
 */
static size_t group(const struct pprof_profile *p, size_t *first, uint64_t *sum)
{
	size_t nt = p->n_sample_type, n = 0;

	for (size_t i = 0; i < p->n_samples; i++) {
		size_t k;

		for (k = 0; k < n && !same_key(&p->samples[i], &p->samples[first[k]]); k++)
			;
		if (k == n)
			first[n++] = i;
		for (size_t j = 0; j < nt; j++)
			sum[k * nt + j] += (uint64_t)p->samples[i].values[j];
	}
	return n;
}

/*
 * m is u with samples merged: the same tables, no more samples, and grouped by locations and
 * labels the same groups in the same order with the same sums. (Samples that decode the same
 * but were encoded differently may stay apart in m: merging compares their bytes.)
 */
static void assert_merged_of(const struct pprof_profile *u, const struct pprof_profile *m)
{
	size_t nt = u->n_sample_type, n = u->n_samples + 1, gu, gm;
	size_t *fu = calloc(n, sizeof(*fu)), *fm = calloc(n, sizeof(*fm));
	uint64_t *su = calloc(n * nt + 1, sizeof(*su)), *sm = calloc(n * nt + 1, sizeof(*sm));

	assert_true(fu && fm && su && sm);
	assert_int_equal(u->n_sample_type, m->n_sample_type);
	assert_int_equal(u->n_locations, m->n_locations);
	assert_int_equal(u->n_functions, m->n_functions);
	assert_int_equal(u->n_strings, m->n_strings);
	assert_true(m->n_samples <= u->n_samples);
	gu = group(u, fu, su);
	gm = group(m, fm, sm);
	assert_int_equal(gu, gm);
	for (size_t k = 0; k < gu; k++)
		assert_true(same_key(&u->samples[fu[k]], &m->samples[fm[k]]));
	assert_memory_equal(su, sm, (gu * nt + 1) * sizeof(*su));
	free(fu);
	free(fm);
	free(su);
	free(sm);
}

/* Reads data both ways: the same result, the same error; merged, the sums of the samples. */
static int read_both(const void *data, size_t len, size_t *n_unmerged, size_t *n_merged)
{
	struct pprof_profile *u = NULL, *m = NULL;
	char eu[256], em[256];
	int ru = pprof_read(data, len, NULL, &u, eu, sizeof(eu));
	int rm = pprof_read(data, len, &merged, &m, em, sizeof(em));

	assert_int_equal(ru, rm);
	if (ru) {
		assert_string_equal(eu, em);
		assert_null(m);
		return ru;
	}
	assert_merged_of(u, m);
	if (n_unmerged)
		*n_unmerged = u->n_samples;
	if (n_merged)
		*n_merged = m->n_samples;
	pprof_profile__free(u);
	pprof_profile__free(m);
	return 0;
}

static void add_sample_labels(struct pb *b, uint64_t loc_id, int64_t value, int64_t key,
			      int64_t str, int64_t num)
{
	struct pb s = { 0 }, l = { 0 };

	pb_u(&s, 1, loc_id);
	pb_u(&s, 2, (uint64_t)value);
	pb_u(&l, 1, (uint64_t)key);
	if (str)
		pb_u(&l, 2, (uint64_t)str);
	else
		pb_u(&l, 3, (uint64_t)num);
	pb_msg(&s, 3, &l);
	pb_msg(b, 2, &s);
}

static void merged_samples_sum_their_values(void **state)
{
	struct pb b = { 0 };
	struct pprof_profile *p;
	size_t nu, nm;
	char err[256];

	base_tables(&b);
	add_sample(&b, 1, 5);
	add_sample_labels(&b, 1, 7, 3, 1, 0);	/* main=cpu */
	add_sample(&b, 1, 2);
	add_sample_labels(&b, 1, 1, 3, 2, 0);	/* main=ns: another label */
	add_sample_labels(&b, 1, 10, 3, 1, 0);	/* main=cpu again */
	add_sample_labels(&b, 1, 100, 3, 0, 4);	/* main=4 (numeric) */
	add_sample_labels(&b, 1, 1000, 3, 0, 5);	/* main=5: another number */
	add_sample_labels(&b, 1, 3, 3, 0, 4);
	assert_int_equal(read_pb(&b, &merged, err, sizeof(err), &p), 0);
	assert_int_equal(p->n_samples, 5);
	assert_int_equal(p->samples[0].values[0], 7);
	assert_int_equal(p->samples[0].n_labels, 0);
	assert_int_equal(p->samples[1].values[0], 17);
	assert_int_equal(p->samples[1].labels[0].str, 1);
	assert_int_equal(p->samples[2].values[0], 1);
	assert_int_equal(p->samples[3].values[0], 103);
	assert_int_equal(p->samples[3].labels[0].num, 4);
	assert_int_equal(p->samples[4].values[0], 1000);
	pprof_profile__free(p);
	assert_int_equal(read_both(b.d, b.n, &nu, &nm), 0);
	assert_int_equal(nu, 8);
	assert_int_equal(nm, 5);
}

/* Sums wrap around as int64 (as the store's stacks do); a negative value turns merging off. */
static void merged_sums_wrap_and_negatives_do_not_merge(void **state)
{
	struct pb b = { 0 };
	struct pprof_profile *p;
	char err[256];

	base_tables(&b);
	add_sample(&b, 1, INT64_MAX);
	add_sample(&b, 1, 2);
	assert_int_equal(read_pb(&b, &merged, err, sizeof(err), &p), 0);
	assert_int_equal(p->n_samples, 1);
	assert_int_equal(p->samples[0].values[0], INT64_MIN + 1);
	pprof_profile__free(p);

	add_sample(&b, 1, -1);
	add_sample(&b, 1, 4);
	assert_int_equal(read_pb(&b, &merged, err, sizeof(err), &p), 0);
	assert_int_equal(p->n_samples, 4);
	assert_int_equal(p->samples[2].values[0], -1);
	pprof_profile__free(p);
}

/* Values in other than one field (two unpacked) are read but not merged; sums still right. */
static void merged_samples_of_any_encoding(void **state)
{
	struct pb b = { 0 }, s = { 0 }, vt = { 0 };
	size_t nu, nm;

	base_tables(&b);
	pb_u(&vt, 1, 1);
	pb_u(&vt, 2, 2);
	pb_msg(&b, 1, &vt);	/* two sample types */
	for (int i = 0; i < 3; i++) {
		s.n = 0;
		pb_u(&s, 2, 1);	/* values first, unpacked, in two fields */
		pb_u(&s, 2, 10 + i);
		pb_u(&s, 1, 1);
		pb_msg(&b, 2, &s);
	}
	for (int i = 0; i < 3; i++) {
		uint8_t v[] = { 1, 0x80 | i, 0x80, 0x80, 0x01 };	/* packed, 1 and a 4-byte one */

		s.n = 0;
		pb_bytes(&s, 2, v, sizeof(v));
		pb_u(&s, 1, 1);
		pb_msg(&b, 2, &s);
	}
	assert_int_equal(read_both(b.d, b.n, &nu, &nm), 0);
	assert_int_equal(nu, 6);
	assert_int_equal(nm, 4);
}

/*
 * A profile with fewer than 8 repeats among its first 256 samples (aggregated by its producer)
 * is read as without merging; with 8, merged. (The pb buffer holds ~600 samples.)
 */
static void merging_gives_up_without_repeats(void **state)
{
	static struct pb b;
	struct pprof_profile *p;
	size_t nu, nm;
	char err[256];

	for (int same = 8; same <= 9; same++) {	/* `same` samples alike: same - 1 repeats */
		b.n = 0;
		base_tables(&b);
		for (int i = 0; i < 256; i++)	/* numeric labels: distinct but for those */
			add_sample_labels(&b, 1, 1, 3, 0, i < same ? 0 : i);
		for (int i = 0; i < 300; i++)	/* 0, 9..255 seen: 1..8 and 256..299 new */
			add_sample_labels(&b, 1, 2, 3, 0, i);
		assert_int_equal(read_pb(&b, &merged, err, sizeof(err), &p), 0);
		assert_int_equal(p->n_samples, same == 9 ? 248 + 8 + 44 : 556);
		pprof_profile__free(p);
		assert_int_equal(read_both(b.d, b.n, &nu, &nm), 0);
		assert_int_equal(nu, 556);
	}
}

/*
 * The errors of merged reads are those of plain ones, message and sample index included:
 * on crafted profiles, and on every truncation and many byte changes of a valid one.
 */
static void merged_errors_are_the_same(void **state)
{
	struct pb b = { 0 }, s = { 0 }, l = { 0 };
	size_t full;
	int bad = 0;

	base_tables(&b);
	add_sample(&b, 1, 1);
	add_sample(&b, 1, 2);
	pb_u(&s, 1, 1);		/* sample 2: the same location, two values */
	pb_u(&s, 2, 1);
	pb_u(&s, 2, 2);
	pb_msg(&b, 2, &s);
	assert_int_equal(read_both(b.d, b.n, NULL, NULL), -EINVAL);

	b.n = 0;
	base_tables(&b);
	add_sample(&b, 1, 1);
	add_sample(&b, 2, 1);	/* a missing location, twice */
	add_sample(&b, 2, 5);
	assert_int_equal(read_both(b.d, b.n, NULL, NULL), -EINVAL);

	b.n = 0;
	base_tables(&b);
	add_sample_labels(&b, 1, 1, 3, 1, 0);
	add_sample_labels(&b, 1, 1, 3, 9, 0);	/* a missing string, twice */
	add_sample_labels(&b, 1, 2, 3, 9, 0);
	assert_int_equal(read_both(b.d, b.n, NULL, NULL), -EINVAL);

	b.n = 0;
	base_tables(&b);
	add_sample(&b, 1, 1);
	s.n = 0;
	pb_u(&s, 1, 1);
	pb_bytes(&s, 2, "\x85\x80", 2);	/* a cut packed value after a good one */
	pb_msg(&b, 2, &s);
	assert_int_equal(read_both(b.d, b.n, NULL, NULL), -EINVAL);

	b.n = 0;
	base_tables(&b);
	for (int i = 0; i < 4; i++) {
		add_sample_labels(&b, 1, 3 + i, 3, 1 + (i & 1), 0);
		add_sample(&b, 1, 70000 + i);
	}
	l.n = 0;
	pb_u(&l, 1, 3);
	pb_u(&l, 3, 300);
	s.n = 0;
	pb_msg(&s, 3, &l);	/* a label before the values */
	pb_bytes(&s, 2, "\x01", 1);
	pb_bytes(&s, 1, "\x01", 1);
	pb_msg(&b, 2, &s);
	pb_msg(&b, 2, &s);
	full = b.n;
	assert_int_equal(read_both(b.d, b.n, NULL, NULL), 0);
	for (size_t n = 1; n < full; n++)
		bad += read_both(b.d, n, NULL, NULL) != 0;
	assert_true(bad > (int)full / 2);
	for (size_t i = 0; i < full; i++) {
		static const uint8_t flips[] = { 0x01, 0x02, 0x08, 0x80, 0xff, 0x7f };

		for (size_t f = 0; f < sizeof(flips); f++) {
			b.d[i] ^= flips[f];
			read_both(b.d, full, NULL, NULL);
			b.d[i] ^= flips[f];
		}
	}
}

/* A sample as Go and our agent write them: packed location ids, then packed values. */
static void add_packed(struct pb *b, const void *ids, size_t n_ids, const void *vals,
		       size_t n_vals)
{
	struct pb s = { 0 };

	pb_bytes(&s, 1, ids, n_ids);
	pb_bytes(&s, 2, vals, n_vals);
	pb_msg(b, 2, &s);
}

/*
 * Samples in that encoding take shortcuts when merging (pass 1 reads them from their bytes,
 * pass 2 adds a merged one's values without the general walk): the same results and errors as
 * the plain read, with the other encodings of the same key mixed in, on every truncation and
 * many byte changes.
 */
static void merged_packed_samples(void **state)
{
	static struct pb b, s;
	static uint8_t ids[130];
	size_t full, nu, nm;
	int bad = 0;

	memset(ids, 1, sizeof(ids));
	base_tables(&b);
	add_packed(&b, ids, 1, "\x05", 1);
	add_packed(&b, ids, 1, "\x80\x80\x80\x01", 4);	/* a 4-byte value */
	add_packed(&b, ids, 1, "\x80\x80\x80\x80\x01", 5);	/* 5 bytes: get_varint's */
	add_packed(&b, ids, 2, "\x07", 1);			/* another stack */
	s.n = 0;
	pb_bytes(&s, 1, ids, 1);
	pb_u(&s, 2, 9);				/* the same key, its value unpacked */
	pb_msg(&b, 2, &s);
	add_packed(&b, ids, sizeof(ids), "\x03", 1);	/* a 2-byte length: the general walk */
	add_packed(&b, ids, sizeof(ids), "\x04", 1);
	add_packed(&b, ids, 2, "\x81\x01", 2);
	full = b.n;
	assert_int_equal(read_both(b.d, b.n, &nu, &nm), 0);
	assert_int_equal(nu, 8);
	assert_int_equal(nm, 3);
	for (size_t n = 1; n < full; n++)
		bad += read_both(b.d, n, NULL, NULL) != 0;
	assert_true(bad > 0);
	for (size_t i = 0; i < full; i++) {
		static const uint8_t flips[] = { 0x01, 0x02, 0x08, 0x80, 0xff, 0x7f };

		for (size_t f = 0; f < sizeof(flips); f++) {
			b.d[i] ^= flips[f];
			read_both(b.d, full, NULL, NULL);
			b.d[i] ^= flips[f];
		}
	}
	/* a merged sample with no value, two, or an 11-byte varint: the plain read's errors */
	add_packed(&b, ids, 1, "", 0);
	assert_int_equal(read_both(b.d, b.n, NULL, NULL), -EINVAL);
	b.n = full;
	add_packed(&b, ids, 2, "\x01\x02", 2);
	assert_int_equal(read_both(b.d, b.n, NULL, NULL), -EINVAL);
	b.n = full;
	add_packed(&b, ids, 1, "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 11);
	assert_int_equal(read_both(b.d, b.n, NULL, NULL), -EINVAL);
	b.n = full;
	add_packed(&b, ids, 1, "\x01\x80", 2);		/* a cut last value: pass 1's */
	assert_int_equal(read_both(b.d, b.n, NULL, NULL), -EINVAL);
}

/*
 * Pass 1 counts a merged sample whose value field repeats its first's byte for byte, and sums
 * the others that are packed; pass 2 then skips them. One of another encoding (unpacked) turns
 * that off for the whole read, and pass 2 adds them all: the same sums either way, wrapping.
 */
static void merged_repeats_and_sums(void **state)
{
	static struct pb b, s;
	static const uint8_t ids[2] = { 1, 1 };
	static const char max[] = "\xff\xff\xff\xff\xff\xff\xff\xff\x7f"; /* INT64_MAX */
	struct pprof_profile *p;
	char err[256];
	size_t nu, nm;

	for (int unpacked = 0; unpacked < 2; unpacked++) {
		b.n = 0;
		base_tables(&b);
		add_packed(&b, ids, 1, "\x05", 1);
		add_packed(&b, ids, 2, max, 9);		/* another stack, 11-byte value fields */
		add_packed(&b, ids, 1, "\x05", 1);		/* repeats */
		add_packed(&b, ids, 2, max, 9);
		add_packed(&b, ids, 1, "\x80\x80\x80\x01", 4);	/* another value: summed */
		add_packed(&b, ids, 1, "\x05", 1);
		add_packed(&b, ids, 2, max, 9);
		if (unpacked) {
			s.n = 0;
			pb_bytes(&s, 1, ids, 1);
			pb_u(&s, 2, 9);
			pb_msg(&b, 2, &s);
		}
		add_packed(&b, ids, 1, "\x05", 1);
		assert_int_equal(read_pb(&b, &merged, err, sizeof(err), &p), 0);
		assert_int_equal(p->n_samples, 2);
		assert_int_equal(p->samples[0].values[0], 5 * 4 + (1 << 21) + (unpacked ? 9 : 0));
		assert_int_equal(p->samples[1].values[0], (int64_t)(3 * (uint64_t)INT64_MAX));
		pprof_profile__free(p);
		assert_int_equal(read_both(b.d, b.n, &nu, &nm), 0);
		assert_int_equal(nu, 8 + unpacked);
		assert_int_equal(nm, 2);
	}
}

/* Go's profiles (the fuzz corpus's): the merged read is the plain one, summed. */
static void merged_go_profiles(void **state)
{
	const char *dir = "tests/fuzz/pprof-reader.corpus";
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		static uint8_t data[4 << 20];
		char path[512];
		size_t len, nu, nm;
		FILE *f;

		if (strncmp(e->d_name, "go-", 3) || !strstr(e->d_name, ".gz.seed"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "rb");
		assert_non_null(f);
		len = fread(data, 1, sizeof(data), f);
		fclose(f);
		assert_int_equal(read_both(data, len, &nu, &nm), 0);
		print_message("%s: %zu samples, %zu merged\n", e->d_name, nu, nm);
		n++;
	}
	closedir(d);
	assert_true(n > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_a_valid_profile),
		cmocka_unit_test(names_the_missing_location),
		cmocka_unit_test(value_count_must_match_types),
		cmocka_unit_test(string_indexes_are_checked),
		cmocka_unit_test(string_zero_must_be_empty),
		cmocka_unit_test(ids_must_be_unique_and_nonzero),
		cmocka_unit_test(location_references_are_checked),
		cmocka_unit_test(sparse_ids_are_renumbered),
		cmocka_unit_test(packed_and_unpacked_are_both_read),
		cmocka_unit_test(concatenated_profiles_are_refused),
		cmocka_unit_test(wrong_wire_types_are_refused),
		cmocka_unit_test(truncations_never_crash),
		cmocka_unit_test(limits_are_enforced),
		cmocka_unit_test(gzip_is_checked),
		cmocka_unit_test(gzip_members_and_trailers),
		cmocka_unit_test(fuzz_regressions),
		cmocka_unit_test(merged_samples_sum_their_values),
		cmocka_unit_test(merged_sums_wrap_and_negatives_do_not_merge),
		cmocka_unit_test(merged_samples_of_any_encoding),
		cmocka_unit_test(merging_gives_up_without_repeats),
		cmocka_unit_test(merged_errors_are_the_same),
		cmocka_unit_test(merged_packed_samples),
		cmocka_unit_test(merged_repeats_and_sums),
		cmocka_unit_test(merged_go_profiles),
	};

	return cmocka_run_group_tests_name("pprof-reader", tests, NULL, NULL);
}
