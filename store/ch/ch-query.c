// SPDX-License-Identifier: MIT
/*
 * store/ch/ch-query.c — the ClickHouse backend's reads (ch-schema.c for the tables, ch-ingest.c
 * and ch-writer.c for the writes): the selector runs here on one row per (series, sig);
 * ClickHouse aggregates the matching series' samples (sumForEach(v) GROUP BY stack); the
 * pprof is built here from the aggregate and the dictionary rows of its stacks, locations,
 * functions and mappings.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port/clock.h"
#include "port/log.h"
#include "store/ch/ch-daily.h"
#include "store/ch/ch-query.h"
#include "store/ch/ch-store.h"

int ch__select(struct ch_store *c, const char *sql, struct rb *out, char *err, size_t errlen)
{
	struct ch_conn *conn = ch_conn__new(&c->o);
	int e = conn ? ch_conn__run(conn, sql, CH_QUERY_SETTINGS, NULL, 0, out, err, errlen)
		     : -ENOMEM;

	ch_conn__free(conn);
	return e;
}

/* ch__select with an external table (ch_conn__run_ext). */
static int ch__select_ext(struct ch_store *c, const char *sql, const struct ch_ext *x,
			  struct rb *out, char *err, size_t errlen)
{
	struct ch_conn *conn = ch_conn__new(&c->o);
	int e = conn ? ch_conn__run_ext(conn, sql, CH_QUERY_SETTINGS, x, out, err, errlen)
		     : -ENOMEM;

	ch_conn__free(conn);
	return e;
}

static void sql_str(struct rb *b, const char *s)
{
	rb_put(b, "'", 1);
	for (; *s; s++) {
		if (*s == '\'' || *s == '\\')
			rb_put(b, "\\", 1);
		rb_put(b, s, 1);
	}
	rb_put(b, "'", 1);
}

/* " WHERE" over the day partitions of [from, to] (ns; 18.16 compares a Date with a string). */
static void sql_days(struct rb *b, uint64_t from, uint64_t to)
{
	time_t d0 = (time_t)(from / NSEC_PER_SEC), d1 = (time_t)(to / NSEC_PER_SEC);
	struct tm t0, t1;

	if (d1 > (time_t)4102444800) /* Date ends in 2105; past 2099 means no bound */
		d1 = (time_t)4102444800;
	gmtime_r(&d0, &t0);
	gmtime_r(&d1, &t1);
	rb_printf(b, " WHERE day >= '%04d-%02d-%02d' AND day <= '%04d-%02d-%02d'",
		  t0.tm_year + 1900, t0.tm_mon + 1, t0.tm_mday, t1.tm_year + 1900, t1.tm_mon + 1,
		  t1.tm_mday);
}

/* WHERE over time and type (profiles and samples share day and ts). */
void sql_where(struct rb *b, const struct store_query *q)
{
	uint64_t to = q->to_ns ? q->to_ns : UINT64_MAX / 2;

	sql_days(b, q->from_ns, to);
	rb_printf(b, " AND ts >= %" PRIu64 " AND ts <= %" PRIu64, q->from_ns, to);
}

void sql_where_samples(struct rb *b, const struct store_query *q, bool hour)
{
	uint64_t to = q->to_ns ? q->to_ns : UINT64_MAX / 2;

	sql_where(b, q);
	if (hour)
		rb_printf(b, " AND hour >= %" PRIu64 " AND hour <= %" PRIu64, q->from_ns / CH_ROLLUP_NS,
			  to / CH_ROLLUP_NS < UINT32_MAX ? to / CH_ROLLUP_NS : UINT32_MAX);
}

void sql_where_type(struct rb *b, const struct store_query *q)
{
	sql_where(b, q);
	if (q->type && *q->type) {
		rb_printf(b, " AND type = ");
		sql_str(b, q->type);
	}
}


void rd_labels(struct rb_rd *r, struct row_labels *rl)
{
	size_t nk = rd_varint(r), used = 0;
	const char *k[STORE_MAX_LABELS];
	size_t kl[STORE_MAX_LABELS], nv;

	rl->n = 0;
	for (size_t i = 0; i < nk && !r->bad; i++) {
		size_t len;
		const char *s = rd_str(r, &len);

		if (i < STORE_MAX_LABELS)
			k[i] = s, kl[i] = len;
	}
	nv = rd_varint(r);
	for (size_t i = 0; i < nv && !r->bad; i++) {
		size_t len;
		const char *s = rd_str(r, &len);

		if (i >= nk || i >= STORE_MAX_LABELS ||
		    used + kl[i] + len + 2 > sizeof(rl->buf))
			continue;
		memcpy(rl->buf + used, k[i], kl[i]);
		rl->buf[used + kl[i]] = '\0';
		rl->l[rl->n].key = rl->buf + used;
		used += kl[i] + 1;
		memcpy(rl->buf + used, s, len);
		rl->buf[used + len] = '\0';
		rl->l[rl->n].value = rl->buf + used;
		used += len + 1;
		rl->n++;
	}
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorts and deduplicates v[0..n): the new n. */
static size_t u64_uniq(uint64_t *v, size_t n)
{
	size_t m = 0;

	qsort(v, n, sizeof(*v), u64_cmp);
	for (size_t i = 0; i < n; i++)
		if (!m || v[m - 1] != v[i])
			v[m++] = v[i];
	return m;
}



static int series_cmp(const void *pa, const void *pb)
{
	const struct series_row *a = pa, *b = pb;

	if (a->series != b->series)
		return a->series < b->series ? -1 : 1;
	return a->sig < b->sig ? -1 : a->sig > b->sig;
}

/* Appends r to s: -ENOMEM. */
static int series_add(struct series_sel *s, const struct series_row *r)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 256;
		struct series_row *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = *r;
	return 0;
}

/*
 * Every (series, sig) in q's time range with its sums over its profiles (count, first time,
 * duration, ...), sorted by (series, sig): numbers only, so ClickHouse reads no string column
 * of the range's profiles (their labels, sample types, ... cost most of the old one query).
 */
static int series_sums(struct ch_store *c, const struct store_query *q, struct series_sel *all,
		       char *err, size_t errlen)
{
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	int e;

	rb_printf(&sql, "SELECT series, sig, count(), min(ts), max(period), sum(duration), "
		  "min(time_nanos), arrayStringConcat(arraySlice(groupUniqArrayArray(comments), 1, "
		  "16), '\\n') FROM profiles");
	sql_where(&sql, q);
	rb_printf(&sql, " GROUP BY series, sig LIMIT %d FORMAT RowBinary", CH_MAX_SERIES + 1);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch__select(c, (char *)sql.p, &res, err, errlen);
	rb_free(&sql);
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (!e && rd_more(&r)) {
		struct series_row sr = { 0 };

		sr.series = rd_u64(&r);
		sr.sig = rd_u64(&r);
		sr.count = rd_u64(&r);
		sr.first_ts = rd_u64(&r);
		sr.period = (int64_t)rd_u64(&r);
		sr.duration = (int64_t)rd_u64(&r);
		sr.time_nanos = (int64_t)rd_u64(&r);
		rd_strcpy(&r, sr.comments, sizeof(sr.comments));
		if (!r.bad)
			e = series_add(all, &sr);
	}
	if (!e && r.bad) {
		snprintf(err, errlen, "clickhouse: malformed answer to the series query");
		e = -EIO;
	}
	if (!e && all->n > CH_MAX_SERIES) {
		snprintf(err, errlen, "the time range holds more than %d series: narrow it",
			 CH_MAX_SERIES);
		e = -E2BIG;
	}
	rb_free(&res);
	if (!e)
		qsort(all->v, all->n, sizeof(*all->v), series_cmp);
	return e;
}

/*
 * The group (ch__group_of) of a profile row's series from its service, type, device and
 * labels at r (not moved on): the strings as stored, the hash the collector made of them
 * at ingest. 0 when the row is not one a collector writes (more labels than it keeps).
 */
static uint64_t row_group(const struct ch_store *c, struct rb_rd r)
{
	struct ch_str service, type, l[2 * STORE_MAX_LABELS];
	size_t nk, nv, dev;

	service.p = rd_str(&r, &service.n);
	type.p = rd_str(&r, &type.n);
	rd_str(&r, &dev);
	nk = rd_varint(&r);
	if (r.bad || nk > STORE_MAX_LABELS)
		return 0;
	for (size_t i = 0; i < nk; i++)
		l[2 * i].p = rd_str(&r, &l[2 * i].n);
	nv = rd_varint(&r);
	if (r.bad || nv != nk)
		return 0;
	for (size_t i = 0; i < nv; i++)
		l[2 * i + 1].p = rd_str(&r, &l[2 * i + 1].n);
	return r.bad ? 0 : ch__group_of(c->group_without, service, type, l, nk);
}

/*
 * Whether the groups of out's series hold no series of the range that the query leaves out
 * (others: their groups, n of them): then the rollup by group (samples_1g) sums exactly the
 * selected series. false for a group not known (0).
 */
static bool groups_whole(const struct series_sel *out, uint64_t *others, size_t n)
{
	n = n ? u64_uniq(others, n) : 0;
	for (size_t i = 0; i < out->n; i++)
		if (!out->v[i].grp ||
		    (n && bsearch(&out->v[i].grp, others, n, sizeof(*others), u64_cmp)))
			return false;
	return true;
}

/*
 * The labels and sample types of each (series, sig) of all, from its first profile in the
 * range: those rows go as the external table firsts (series, sig, ts), whose ts (first in the
 * profiles key) lets ClickHouse read only the granules that hold them. The rows whose series
 * matches q's selector (and type) go to out.
 */
static int series_heads(struct ch_store *c, const struct store_query *q,
			const struct series_sel *all, struct series_sel *out, char *err,
			size_t errlen)
{
	struct rb sql = { 0 }, res = { 0 }, firsts = { 0 }, others = { 0 };
	struct ch_ext x = { .name = "firsts", .structure = "series UInt64, sig UInt64, ts UInt64" };
	struct rb_rd r;
	size_t rows = 0;
	int e;

	for (size_t i = 0; i < all->n; i++)
		rb_printf(&firsts, "%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n", all->v[i].series,
			  all->v[i].sig, all->v[i].first_ts);
	rb_printf(&sql, "SELECT series, sig, service, type, device, label_keys, label_values, "
		  "arrayStringConcat(sample_type, ','), arrayStringConcat(sample_unit, ','), "
		  "default_type, period_type, period_unit, main_mapping FROM profiles");
	sql_where(&sql, q);
	rb_printf(&sql, " AND (series, sig, ts) IN firsts ORDER BY id LIMIT 1 BY series, sig "
		  "FORMAT RowBinary");
	rb_put(&sql, "", 1);
	x.rows = firsts.p;
	x.len = firsts.len;
	e = sql.oom || firsts.oom ? -ENOMEM : ch__select_ext(c, (char *)sql.p, &x, &res, err,
							     errlen);
	rb_free(&sql);
	rb_free(&firsts);
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (!e && rd_more(&r)) {
		struct series_row key, *sr;
		char service[256], type[64], device[256], st[512], su[512], dt[64], pt[64], pu[64];
		struct row_labels rl;
		uint64_t main_mapping, grp;

		key.series = rd_u64(&r);
		key.sig = rd_u64(&r);
		grp = row_group(c, r);
		rd_strcpy(&r, service, sizeof(service));
		rd_strcpy(&r, type, sizeof(type));
		rd_strcpy(&r, device, sizeof(device));
		rd_labels(&r, &rl);
		rd_strcpy(&r, st, sizeof(st));
		rd_strcpy(&r, su, sizeof(su));
		rd_strcpy(&r, dt, sizeof(dt));
		rd_strcpy(&r, pt, sizeof(pt));
		rd_strcpy(&r, pu, sizeof(pu));
		main_mapping = rd_u64(&r);
		sr = r.bad ? NULL : bsearch(&key, all->v, all->n, sizeof(key), series_cmp);
		if (!sr)
			continue;
		rows++;
		if ((q->type && *q->type && strcmp(type, q->type)) ||
		    !selector__match(q->sel, service, device, rl.l, rl.n)) {
			rb_put(&others, &grp, sizeof(grp));
			continue;
		}
		sr->grp = grp;
		snprintf(sr->st, sizeof(sr->st), "%s", st);
		snprintf(sr->su, sizeof(sr->su), "%s", su);
		snprintf(sr->default_type, sizeof(sr->default_type), "%s", dt);
		snprintf(sr->period_type, sizeof(sr->period_type), "%s", pt);
		snprintf(sr->period_unit, sizeof(sr->period_unit), "%s", pu);
		sr->main_mapping = main_mapping;
		snprintf(sr->device, sizeof(sr->device), "%s", device);
		e = series_add(out, sr);
	}
	if (!e && r.bad) {
		snprintf(err, errlen, "clickhouse: malformed answer to the series heads query");
		e = -EIO;
	}
	out->every = !e && rows == all->n && out->n == rows;
	out->whole_groups = out->every || (!e && !others.oom && rows == all->n &&
					   groups_whole(out, (uint64_t *)others.p,
							others.len / sizeof(uint64_t)));
	rb_free(&res);
	rb_free(&others);
	return e;
}

/*
 * The (series, sig) pairs in q's time range whose series matches q's selector: the selector
 * runs here, in our own code (Pyroscope's operators, POSIX regexes, the CPU budget), on one
 * row per series, and only the matching series' ids go back to ClickHouse.
 */
int ch__series(struct ch_store *c, const struct store_query *q, struct series_sel *out,
	       char *err, size_t errlen)
{
	struct series_sel all = { 0 };
	int e = series_sums(c, q, &all, err, errlen);

	if (!e && all.n)
		e = series_heads(c, q, &all, out, err, errlen);
	free(all.v);
	return e;
}

/*
 * " AND series IN (a,b,...)" (listings and timelines: one branch, so a literal list; merges
 * send theirs as an external table, below); nothing when every series in the range matched (a
 * fleet-wide query: a set of 10,000 series cost more than the rows' sum).
 */
void sql_series_in(struct rb *b, const struct series_sel *s)
{
	if (s->every)
		return;
	rb_printf(b, " AND series IN (");
	for (size_t i = 0; i < s->n; i++)
		rb_printf(b, "%s%" PRIu64, i ? "," : "", s->v[i].series);
	rb_printf(b, ")");
}

/*
 * A merge's series set, sent once as the external table sel_series (one id a line) and read
 * by every branch of its UNION through " AND series IN sel_series": a literal list of the
 * thousands of ids a label selects was parsed, and made into a set, once per branch.
 */
#define SEL_EXT_NAME "sel_series"

static void sel_ext_rows(struct rb *rows, const struct series_sel *s, uint64_t sig)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].sig == sig)
			rb_printf(rows, "%" PRIu64 "\n", s->v[i].series);
}

/* ---- building a pprof from aggregated samples ---------------------------------------------- */

struct agg_sample {
	uint64_t stack;
	int64_t *v;
};

struct dict_row {
	uint64_t id;
	uint64_t bid;			/* the builder's id */
	uint64_t a, b, c;		/* mapping: start, limit, offset; location: mapping, address */
	char *s1, *s2, *s3;		/* strings (function: name, system name, file; mapping:
					 * file, build id) */
	int64_t n1;			/* function: start line */
	uint64_t *ids;			/* location: fns; stack: locs */
	int64_t *lines;			/* location: lines */
	size_t n_ids;
	char **lk, **lv;		/* stack: labels */
	size_t n_labels;
};

struct dict {
	struct dict_row *v;
	size_t n;
};

static int dict_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct dict_row *)a)->id, y = ((const struct dict_row *)b)->id;

	return x < y ? -1 : x > y;
}

static struct dict_row *dict__find(const struct dict *d, uint64_t id)
{
	struct dict_row key = { .id = id };

	return d->n ? bsearch(&key, d->v, d->n, sizeof(key), dict_cmp) : NULL;
}

static void dict__free(struct dict *d)
{
	for (size_t i = 0; i < d->n; i++) {
		struct dict_row *r = &d->v[i];

		free(r->s1), free(r->s2), free(r->s3);
		free(r->ids), free(r->lines);
		for (size_t j = 0; j < r->n_labels; j++)
			free(r->lk[j]), free(r->lv[j]);
		free(r->lk), free(r->lv);
	}
	free(d->v);
	memset(d, 0, sizeof(*d));
}

static char *rd_strdup(struct rb_rd *r)
{
	size_t n;
	const char *s = rd_str(r, &n);

	return strndup(s, n);
}

static uint64_t *rd_u64s(struct rb_rd *r, size_t *n)
{
	uint64_t *v;

	*n = rd_varint(r);
	if (r->bad || *n > (size_t)(r->end - r->p) / 8) {
		r->bad = true;
		*n = 0;
		return NULL;
	}
	v = malloc((*n ? *n : 1) * sizeof(*v));
	for (size_t i = 0; v && i < *n; i++)
		v[i] = rd_u64(r);
	return v;
}

static char **rd_strs(struct rb_rd *r, size_t *n)
{
	char **v;

	*n = rd_varint(r);
	if (r->bad || *n > (size_t)(r->end - r->p)) {
		r->bad = true;
		*n = 0;
		return NULL;
	}
	v = calloc(*n ? *n : 1, sizeof(*v));
	for (size_t i = 0; v && i < *n; i++)
		v[i] = rd_strdup(r);
	return v;
}

enum dict_kind { D_STACKS, D_LOCATIONS, D_FUNCTIONS, D_MAPPINGS };

static const char *const dict_sql[] = {
	"SELECT stack, any(locs), any(label_keys), any(label_values) FROM stacks "
	"WHERE stack IN (",
	"SELECT loc, any(mapping), any(address), any(fns), any(lines) FROM locations "
	"WHERE loc IN (",
	"SELECT fn, any(name), any(system_name), any(filename), any(start_line) FROM functions "
	"WHERE fn IN (",
	"SELECT mapping, any(start), any(limit), any(offset), any(filename), any(build_id) "
	"FROM mappings WHERE mapping IN (",
};
static const char *const dict_key[] = { "stack", "loc", "fn", "mapping" };

static void dict__read_row(struct rb_rd *r, enum dict_kind k, struct dict_row *d)
{
	size_t nk, n2;

	d->id = rd_u64(r);
	switch (k) {
	case D_STACKS:
		d->ids = rd_u64s(r, &d->n_ids);
		d->lk = rd_strs(r, &nk);
		d->lv = rd_strs(r, &d->n_labels);
		if (nk < d->n_labels)
			d->n_labels = nk; /* the rest leaks nothing: freed by count below */
		break;
	case D_LOCATIONS:
		d->a = rd_u64(r);
		d->b = rd_u64(r);
		d->ids = rd_u64s(r, &d->n_ids);
		d->lines = (int64_t *)rd_u64s(r, &n2);
		if (n2 != d->n_ids)
			r->bad = true;
		break;
	case D_FUNCTIONS:
		d->s1 = rd_strdup(r);
		d->s2 = rd_strdup(r);
		d->s3 = rd_strdup(r);
		d->n1 = (int64_t)rd_u64(r);
		break;
	case D_MAPPINGS:
		d->a = rd_u64(r);
		d->b = rd_u64(r);
		d->c = rd_u64(r);
		d->s1 = rd_strdup(r);
		d->s2 = rd_strdup(r);
		break;
	}
}

/* Fetches the dictionary rows of ids[0..n) (sorted, unique). */
static int dict__fetch(struct ch_store *c, enum dict_kind k, const uint64_t *ids, size_t n,
		       struct dict *d, char *err, size_t errlen)
{
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	int e;

	memset(d, 0, sizeof(*d));
	if (!n)
		return 0;
	rb_printf(&sql, "%s", dict_sql[k]);
	for (size_t i = 0; i < n; i++)
		rb_printf(&sql, "%s%" PRIu64, i ? "," : "", ids[i]);
	rb_printf(&sql, ") GROUP BY %s FORMAT RowBinary", dict_key[k]);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch__select(c, (char *)sql.p, &res, err, errlen);
	rb_free(&sql);
	if (e)
		return e;
	d->v = calloc(n, sizeof(*d->v));
	if (!d->v) {
		rb_free(&res);
		return -ENOMEM;
	}
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (rd_more(&r) && d->n < n)
		dict__read_row(&r, k, &d->v[d->n++]);
	rb_free(&res);
	if (r.bad) {
		snprintf(err, errlen, "clickhouse: malformed %s rows", dict_key[k]);
		return -EIO;
	}
	qsort(d->v, d->n, sizeof(*d->v), dict_cmp);
	return 0;
}

/* The header of the pprof to build (from a series row of the chosen sig). */
struct pprof_head {
	const struct series_row *row;
	int64_t duration, time_nanos, period;
	char comment[320];		/* ours: what was skipped */
	char comments[4096];		/* the profiles' own, '\n'-separated, deduplicated */
};

/* Whether the '\n'-separated list has the line s[0..n). */
static bool has_line(const char *list, const char *s, size_t n)
{
	while (*list) {
		size_t m = strcspn(list, "\n");

		if (m == n && !strncmp(list, s, n))
			return true;
		list += m + !!list[m];
	}
	return false;
}

/* Adds the lines of more to h's comments that it does not hold yet. */
static void head_add_comments(struct pprof_head *h, const char *more)
{
	while (*more) {
		size_t n = strcspn(more, "\n"), used = strlen(h->comments);

		if (n && !has_line(h->comments, more, n) && used + n + 2 < sizeof(h->comments))
			snprintf(h->comments + used, sizeof(h->comments) - used, "%s%.*s",
				 used ? "\n" : "", (int)n, more);
		more += n + !!more[n];
	}
}

/* Splits "a,b,c" in place into at most max parts. */
static size_t split_commas(char *s, char **parts, size_t max)
{
	size_t n = 0;

	if (!*s)
		return 0;
	while (n < max) {
		parts[n++] = s;
		s = strchr(s, ',');
		if (!s)
			break;
		*s++ = '\0';
	}
	return n;
}

struct dicts {
	struct dict stacks, locs, fns, maps;
};

static void dicts__free(struct dicts *d)
{
	dict__free(&d->stacks);
	dict__free(&d->locs);
	dict__free(&d->fns);
	dict__free(&d->maps);
}

/* Stacks, then their locations, then those's functions and mappings. */
static int dicts__fetch(struct ch_store *c, const struct agg_sample *s, size_t n,
			struct dicts *d, char *err, size_t errlen)
{
	uint64_t *ids = malloc((n ? n : 1) * sizeof(*ids)), *fns = NULL, *maps = NULL;
	size_t m = 0, nf = 0, nm = 0;
	int e;

	if (!ids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		ids[i] = s[i].stack;
	e = dict__fetch(c, D_STACKS, ids, u64_uniq(ids, n), &d->stacks, err, errlen);
	free(ids);
	ids = NULL;
	for (size_t i = 0; !e && i < d->stacks.n; i++)
		m += d->stacks.v[i].n_ids;
	ids = e ? NULL : malloc((m ? m : 1) * sizeof(*ids));
	if (!e && !ids)
		e = -ENOMEM;
	m = 0;
	for (size_t i = 0; !e && i < d->stacks.n; i++)
		for (size_t j = 0; j < d->stacks.v[i].n_ids; j++)
			ids[m++] = d->stacks.v[i].ids[j];
	if (!e)
		e = dict__fetch(c, D_LOCATIONS, ids, u64_uniq(ids, m), &d->locs, err, errlen);
	free(ids);
	for (size_t i = 0; !e && i < d->locs.n; i++)
		nf += d->locs.v[i].n_ids;
	fns = e ? NULL : malloc((nf ? nf : 1) * sizeof(*fns));
	maps = e ? NULL : malloc((d->locs.n ? d->locs.n : 1) * sizeof(*maps));
	if (!e && (!fns || !maps))
		e = -ENOMEM;
	nf = 0;
	for (size_t i = 0; !e && i < d->locs.n; i++) {
		for (size_t j = 0; j < d->locs.v[i].n_ids; j++)
			fns[nf++] = d->locs.v[i].ids[j];
		if (d->locs.v[i].a)
			maps[nm++] = d->locs.v[i].a;
	}
	if (!e)
		e = dict__fetch(c, D_FUNCTIONS, fns, u64_uniq(fns, nf), &d->fns, err, errlen);
	if (!e)
		e = dict__fetch(c, D_MAPPINGS, maps, u64_uniq(maps, nm), &d->maps, err, errlen);
	free(fns);
	free(maps);
	return e;
}

static int build_header(struct pprof_builder *b, const struct pprof_head *h)
{
	char st[512], su[512], *t[64], *u[64];
	size_t nt, nu;
	int e = 0;

	snprintf(st, sizeof(st), "%s", h->row->st);
	snprintf(su, sizeof(su), "%s", h->row->su);
	nt = split_commas(st, t, 64);
	nu = split_commas(su, u, 64);
	for (size_t i = 0; !e && i < nt; i++)
		e = pprof_builder__add_sample_type(b, t[i], i < nu ? u[i] : "");
	if (!e && h->row->default_type[0])
		e = pprof_builder__set_default_sample_type(b, h->row->default_type);
	if (!e)
		e = pprof_builder__set_period(b, h->row->period_type, h->row->period_unit,
					      h->period);
	pprof_builder__set_time(b, h->time_nanos, h->duration);
	for (const char *c = h->comments; !e && *c; ) {
		size_t n = strcspn(c, "\n");
		char line[1024];

		snprintf(line, sizeof(line), "%.*s", (int)n, c);
		e = pprof_builder__add_comment(b, line);
		c += n + !!c[n];
	}
	if (!e && h->comment[0])
		e = pprof_builder__add_comment(b, h->comment);
	return e;
}

static uint64_t build_mapping(struct pprof_builder *b, struct dict_row *m, bool has_functions)
{
	struct pprof_mapping_desc md = {
		.memory_start = m->a, .memory_limit = m->b, .file_offset = m->c,
		.filename = m->s1, .build_id = m->s2[0] ? m->s2 : NULL,
		.has_functions = has_functions,
	};

	if (!m->bid)
		m->bid = pprof_builder__mapping(b, &md);
	return m->bid;
}

static uint64_t build_location(struct pprof_builder *b, struct dicts *d, struct dict_row *l)
{
	struct pprof_line_desc lines[64];
	size_t n = l->n_ids < 64 ? l->n_ids : 64;
	uint64_t map = 0;

	if (l->bid)
		return l->bid;
	for (size_t i = 0; i < n; i++) {
		struct dict_row *f = dict__find(&d->fns, l->ids[i]);

		if (f && !f->bid)
			f->bid = pprof_builder__function(b, f->s1, f->s2, f->s3, f->n1);
		lines[i] = (struct pprof_line_desc){ f ? f->bid : 0, l->lines[i] };
		if (!lines[i].function_id)
			return 0;
	}
	if (l->a) {
		struct dict_row *m = dict__find(&d->maps, l->a);

		map = m ? build_mapping(b, m, n > 0) : 0;
	}
	l->bid = pprof_builder__location(b, map, l->b, lines, n);
	return l->bid;
}

/*
 * Builds the pprof of aggregated samples s[0..n) (raw protobuf, or gzip when gz): a stack,
 * location, function or mapping that ClickHouse does not hold (never: they are sent before
 * the samples that use them) drops that sample, counted in *lost. sample_of (NULL: not
 * wanted) gets each s[i]'s sample index in the profile, SIZE_MAX for those left out.
 */
static int build_from(const struct pprof_head *h, const struct agg_sample *s, size_t n,
		      size_t n_values, bool gz, struct dicts *dp, struct pprof_buf *out,
		      size_t *lost, size_t *sample_of, char *err, size_t errlen)
{
	struct pprof_builder_opts bo = { .gzip_level = gz ? 0 : -1 };
	struct pprof_builder *b = NULL;
	struct dicts d = *dp;	/* rows shared with *dp: their builder ids are set */
	uint64_t *locs = NULL;
	struct pprof_label_desc *labels = NULL;
	size_t max_depth = 0, added = 0;
	int e = 0;

	*lost = 0;
	for (size_t i = 0; !e && i < d.stacks.n; i++)
		if (d.stacks.v[i].n_ids > max_depth)
			max_depth = d.stacks.v[i].n_ids;
	if (!e) {
		b = pprof_builder__new(&bo, pprof_buf_write, out);
		locs = malloc((max_depth + 1) * sizeof(*locs));
		labels = calloc(STORE_MAX_LABELS, sizeof(*labels));
		if (!b || !locs || !labels)
			e = -ENOMEM;
	}
	if (!e)
		e = build_header(b, h);
	if (!e && h->row->main_mapping) {
		/* pprof takes the first mapping for the main binary: keep the profiles' own */
		struct dict_row *m = dict__find(&d.maps, h->row->main_mapping);

		if (m)
			build_mapping(b, m, true);
	}
	for (size_t i = 0; !e && i < n; i++) {
		struct dict_row *st = dict__find(&d.stacks, s[i].stack);
		size_t k = 0, nl;
		bool zero = true;

		if (sample_of)
			sample_of[i] = SIZE_MAX;
		for (size_t j = 0; j < n_values; j++)
			zero = zero && !s[i].v[j];
		if (zero)
			continue;
		for (size_t j = 0; st && j < st->n_ids; j++) {
			struct dict_row *l = dict__find(&d.locs, st->ids[j]);

			locs[k] = l ? build_location(b, &d, l) : 0;
			if (!locs[k++])
				st = NULL;
		}
		if (!st) {
			(*lost)++;
			continue;
		}
		nl = st->n_labels < STORE_MAX_LABELS ? st->n_labels : STORE_MAX_LABELS;
		for (size_t j = 0; j < nl; j++)
			labels[j] = (struct pprof_label_desc){ .key = st->lk[j], .str = st->lv[j] };
		e = pprof_builder__add_sample(b, locs, k, s[i].v, labels, nl);
		if (sample_of)
			sample_of[i] = added++;
	}
	if (!e)
		e = pprof_builder__finish(b);
	if (e && !err[0])
		snprintf(err, errlen, "building the profile: %s", strerror(-e));
	pprof_builder__free(b);
	free(locs);
	free(labels);
	return e;
}

static int ch__build(struct ch_store *c, const struct pprof_head *h, const struct agg_sample *s,
		     size_t n, size_t n_values, bool gz, struct pprof_buf *out, size_t *lost,
		     char *err, size_t errlen)
{
	struct dicts d = { 0 };
	int e = dicts__fetch(c, s, n, &d, err, errlen);

	*lost = 0;
	if (!e)
		e = build_from(h, s, n, n_values, gz, &d, out, lost, NULL, err, errlen);
	dicts__free(&d);
	return e;
}

/* Reads "stack, v" rows (sumForEach(v) or v) into s; n_values from the first row. */
static int rd_agg(struct rb *res, struct agg_sample **out, size_t *n, size_t *n_values)
{
	struct rb_rd r = { res->p, res->p + res->len, false };
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	while (rd_more(&r)) {
		struct agg_sample a;
		size_t nv;

		a.stack = rd_u64(&r);
		a.v = (int64_t *)rd_u64s(&r, &nv);
		if (r.bad || !a.v) {
			free(a.v);
			return r.bad ? -EIO : -ENOMEM;
		}
		if (!*n)
			*n_values = nv;
		if (nv != *n_values) {
			free(a.v);
			return -EIO;
		}
		if (*n == cap) {
			struct agg_sample *v;

			cap = cap ? 2 * cap : 1024;
			v = realloc(*out, cap * sizeof(*v));
			if (!v) {
				free(a.v);
				return -ENOMEM;
			}
			*out = v;
		}
		(*out)[(*n)++] = a;
	}
	return 0;
}

static void agg_free(struct agg_sample *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(s[i].v);
	free(s);
}

/* ---- merge ---------------------------------------------------------------------------------- */

/* The number of sample types of a series row ("a,b,c": 3). */
static size_t n_types(const struct series_row *r)
{
	size_t n = r->st[0] != '\0';

	for (const char *p = r->st; *p; p++)
		n += *p == ',';
	return n;
}

/*
 * The hours of [h0, h1) in rollup_dirty (ch-writer.c's batch__mark_dirty: the rollup may be
 * short of their rows), and on one server those of a batch in rollup_pending not done (its
 * collector may have died between its samples and its rollup rows: batch__intent), as
 * "h,h,..." in list; -1 when they cannot be read or are more than CH_DIRTY_MAX: the merge reads
 * raw rows only.
 */
#define CH_DIRTY_MAX 1000
static long dirty_hours(struct ch_store *c, uint64_t h0, uint64_t h1, struct rb *list)
{
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	char err[300];
	long n = 0;
	int e;

	for (int t = 0; t < 1 + c->own_rollup; t++) {
		rb_printf(&sql, t ? " UNION ALL SELECT hour FROM rollup_pending" :
			  "SELECT DISTINCT toUInt64(hour) FROM (SELECT hour FROM rollup_dirty");
		sql_days(&sql, h0 * CH_ROLLUP_NS, h1 * CH_ROLLUP_NS - 1);
		rb_printf(&sql, " AND hour >= %" PRIu64 " AND hour < %" PRIu64 "%s", h0, h1,
			  t ? " GROUP BY hour, batch HAVING sum(sign) > 0" : "");
	}
	rb_printf(&sql, ") LIMIT %d FORMAT RowBinary", CH_DIRTY_MAX + 1);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch__select(c, (char *)sql.p, &res, err, sizeof(err));
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	while (!e && rd_more(&r))
		rb_printf(list, "%s%" PRIu64, n++ ? "," : "", rd_u64(&r));
	rb_put(list, "", 1);
	if (e)
		pr_warn("clickhouse: rollup_dirty/rollup_pending: %s: merges read raw rows", err);
	if (e || r.bad || list->oom || n > CH_DIRTY_MAX)
		n = -1;
	rb_free(&sql);
	rb_free(&res);
	return n;
}

/*
 * FROM samples as rows of (profile, stack) with columns stack and v (a row per profile taken
 * apart by ARRAY JOIN, in the SELECT itself: with --ch-cluster each shard
 * takes apart and sums its own). Picking the rows in a subquery first measured the same on the
 * synthetic day (4.2 GB read, 3.7 s of CPU for a top-50 with a selector; an explicit PREWHERE
 * on series read 1.1 GB for the same CPU: the sums are the cost, not the reads).
 */
static void sql_samples_from(struct rb *b)
{
	rb_printf(b, " FROM samples " CH_SAMPLES_JOIN);
}

/*
 * One branch of the UNION: the raw rows in [from, to] as nt scalar columns v0..., of the hours
 * in the list hours when not NULL.
 */
static void sql_raw_rows(struct ch_store *c, struct rb *b, uint64_t from, uint64_t to,
			 size_t nt, const char *in, uint64_t sig, const char *hours)
{
	rb_printf(b, "SELECT stack");
	for (size_t i = 0; i < nt; i++)
		rb_printf(b, ", v[%zu] AS v%zu", i + 1, i);
	sql_samples_from(b);
	sql_where_samples(b, &(struct store_query){ .from_ns = from, .to_ns = to },
			  c->samples_hour);
	rb_printf(b, " AND sig = %" PRIu64 "%s", sig, in);
	if (hours)
		rb_printf(b, " AND %s IN (%s)", c->samples_hour ? "hour" :
			  "intDiv(ts, 3600000000000)", hours);
}

/*
 * One rollup branch of the UNION: table's rows of the hours [h0, h1) but those in dirty (nd of
 * them), of kind sig, filtered by filter (" AND series IN ...", " AND grp IN (...)" or "").
 */
static void sql_rollup_rows(struct rb *b, const char *table, uint64_t h0, uint64_t h1,
			    uint64_t sig, const char *filter, size_t nt, const struct rb *dirty,
			    long nd)
{
	rb_printf(b, "SELECT stack");
	for (size_t i = 0; i < nt; i++)
		rb_printf(b, ", v%zu", i);
	rb_printf(b, " FROM %s", table);
	sql_days(b, h0 * CH_ROLLUP_NS, h1 * CH_ROLLUP_NS - 1);
	rb_printf(b, " AND hour >= %" PRIu64 " AND hour < %" PRIu64 " AND sig = %" PRIu64 "%s", h0,
		  h1, sig, filter);
	if (nd)
		rb_printf(b, " AND hour NOT IN (%s)", (char *)dirty->p);
}

/*
 * The aggregate of q's samples of kind sig: the whole hours of [from, to] from the hourly
 * rollups, the partial hours at its edges from the raw rows, summed by stack in one query.
 * The same sums as the raw rows' (the rollups are their sums, made at insert): on one server
 * samples_1g, by group, filtered by ginf, which is NULL when the selection is not whole
 * groups: then the merge reads raw rows only, since samples_1g may hold rows of any hour
 * (uploads that come late); with --ch-cluster samples_1h, by series, filtered by in like the
 * raw rows. false when no rollup serves the query (no whole hour, more than
 * CH_ROLLUP_VALUES sample types, --rollup-seconds 0, or not whole groups): raw only.
 */
static bool sql_merge(struct ch_store *c, struct rb *b, const struct store_query *q,
		      const char *in, const char *ginf, uint64_t sig, size_t nt)
{
	uint64_t to = q->to_ns ? q->to_ns : UINT64_MAX / 2;
	uint64_t h0 = (q->from_ns + CH_ROLLUP_NS - 1) / CH_ROLLUP_NS, h1 = (to + 1) / CH_ROLLUP_NS;
	struct rb dirty = { 0 };
	long nd = -1;

	if (!c->no_rollup && nt && nt <= CH_ROLLUP_VALUES && h0 < h1 && (!c->own_rollup || ginf))
		nd = dirty_hours(c, h0, h1, &dirty);
	if (nd < 0) {
		rb_printf(b, "SELECT stack, sumForEach(v)");
		sql_samples_from(b);
		sql_where_samples(b, q, c->samples_hour);
		rb_printf(b, " AND sig = %" PRIu64 "%s", sig, in);
		rb_free(&dirty);
		return false;
	}
	rb_printf(b, "SELECT stack, [");
	for (size_t i = 0; i < nt; i++)
		rb_printf(b, "%ssum(v%zu)", i ? ", " : "", i);
	rb_printf(b, "] FROM (");
	if (c->own_rollup)
		sql_rollup_rows(b, "samples_1g", h0, h1, sig, ginf, nt, &dirty, nd);
	else
		sql_rollup_rows(b, "samples_1h", h0, h1, sig, in, nt, &dirty, nd);
	if (nd) { /* the hours the rollup may be short of: raw */
		rb_printf(b, " UNION ALL ");
		sql_raw_rows(c, b, h0 * CH_ROLLUP_NS, h1 * CH_ROLLUP_NS - 1, nt, in, sig,
			     (char *)dirty.p);
	}
	if (q->from_ns < h0 * CH_ROLLUP_NS) {
		rb_printf(b, " UNION ALL ");
		sql_raw_rows(c, b, q->from_ns, h0 * CH_ROLLUP_NS - 1, nt, in, sig, NULL);
	}
	if (h1 * CH_ROLLUP_NS <= to) {
		rb_printf(b, " UNION ALL ");
		sql_raw_rows(c, b, h1 * CH_ROLLUP_NS, to, nt, in, sig, NULL);
	}
	rb_printf(b, ")");
	rb_free(&dirty);
	return true;
}

/*
 * samples_1g's filter for sel's series of kind sig, into g: "" when every series matched,
 * " AND grp IN (...)" when the selection is whole groups; false when it is not (or no room).
 */
static bool sql_groups_in(struct rb *g, const struct series_sel *sel, uint64_t sig)
{
	uint64_t *v;
	size_t n = 0;

	if (sel->every || !sel->whole_groups)
		return sel->every;
	v = malloc((sel->n + 1) * sizeof(*v));
	if (!v)
		return false;
	for (size_t i = 0; i < sel->n; i++)
		if (sel->v[i].sig == sig)
			v[n++] = sel->v[i].grp;
	n = n ? u64_uniq(v, n) : 0;
	rb_printf(g, " AND grp IN (");
	for (size_t i = 0; i < n; i++)
		rb_printf(g, "%s%" PRIu64, i ? "," : "", v[i]);
	rb_printf(g, ")");
	free(v);
	return !g->oom;
}

/* The kind to merge: the sig with the most profiles (ties: the earliest), as the ring does. */
static uint64_t choose_sig(const struct series_sel *s, uint64_t *count, uint64_t *total)
{
	uint64_t best = 0, best_n = 0, best_ts = 0;

	*total = 0;
	for (size_t i = 0; i < s->n; i++) {
		uint64_t n = 0, ts = UINT64_MAX;

		*total += s->v[i].count;
		for (size_t j = 0; j < s->n; j++) {
			if (s->v[j].sig != s->v[i].sig)
				continue;
			n += s->v[j].count;
			if (s->v[j].first_ts < ts)
				ts = s->v[j].first_ts;
		}
		if (n > best_n || (n == best_n && ts < best_ts)) {
			best = s->v[i].sig;
			best_n = n;
			best_ts = ts;
		}
	}
	*count = best_n;
	return best;
}

/*
 * A merge's time bound (store_query.budget) also bounds ClickHouse's part of it: the query
 * stops there (max_execution_time, whole seconds, at least 1) instead of running on after
 * the answer was given up.
 */
static void sql_time_bound(struct rb *sql, const struct pprof_budget *b)
{
	uint64_t now = port_clock_mono_ns();

	if (!b || !b->deadline_ns)
		return;
	rb_printf(sql, ", max_execution_time = %" PRIu64,
		  (uint64_t)(b->deadline_ns > now ? (b->deadline_ns - now + NSEC_PER_SEC - 1) /
							NSEC_PER_SEC : 1));
}

/*
 * The aggregated answer is in memory when its size is known (ClickHouse streams it; its rows
 * are bounded by CONFIG_COLLECTOR_CH_MAX_STACKS): charged then, three times (the answer, the
 * rows read from it, the pprof built from them), before those copies are made.
 */
static int charge_answer(const struct pprof_budget *b, size_t len, size_t *held, char *err,
			 size_t errlen)
{
	size_t want = len > SIZE_MAX / 3 ? SIZE_MAX : 3 * len;
	int e;

	if (!b)
		return 0;
	e = b->take(b->ctx, want, err, errlen);
	if (!e)
		*held = want;
	return e;
}

int ch__merge(struct store *base, const struct store_query *q, struct pprof_profile **out,
	      size_t *n_merged, size_t *skipped, char *err, size_t errlen)
{
	struct ch_store *c = ch_of(base);
	struct series_sel sel = { 0 };
	struct pprof_head h = { .time_nanos = 0 };
	struct rb sql = { 0 }, res = { 0 }, ids = { 0 }, gin = { 0 };
	struct pprof_buf pb = { 0 };
	struct agg_sample *agg = NULL;
	size_t n_agg = 0, n_values = 0, lost = 0;
	bool rolled = false, whole;
	struct ch_ext x = { .name = SEL_EXT_NAME, .structure = "series UInt64" };
	uint64_t sig, count = 0, total = 0;
	size_t answer_held = 0;
	int e;

	*out = NULL;
	err[0] = '\0';
	e = ch__series(c, q, &sel, err, errlen);
	if (!e && !sel.n) {
		snprintf(err, errlen, "no profiles match");
		e = -ENOENT;
	}
	if (e)
		goto out;
	sig = choose_sig(&sel, &count, &total);
	for (size_t i = 0; i < sel.n; i++) {
		if (sel.v[i].sig != sig)
			continue;
		if (!h.row)
			h.row = &sel.v[i];
		h.duration += sel.v[i].duration;
		if (sel.v[i].period > h.period)
			h.period = sel.v[i].period;
		if (sel.v[i].time_nanos && (!h.time_nanos || sel.v[i].time_nanos < h.time_nanos))
			h.time_nanos = sel.v[i].time_nanos;
		head_add_comments(&h, sel.v[i].comments);
	}
	if (total > count)
		snprintf(h.comment, sizeof(h.comment), "edgeprof: %" PRIu64 " profile%s skipped: "
			 "sample or period types that cannot merge with the rest",
			 total - count, total - count > 1 ? "s" : "");
	if (!sel.every)
		sel_ext_rows(&ids, &sel, sig);
	whole = sql_groups_in(&gin, &sel, sig);
	rb_put(&gin, "", 1);
	rolled = sql_merge(c, &sql, q, sel.every ? "" : " AND series IN " SEL_EXT_NAME,
			   whole && !gin.oom ? (char *)gin.p : NULL, sig, n_types(h.row));
	rb_printf(&sql, " GROUP BY stack SETTINGS max_rows_to_group_by = %d, "
		  "group_by_overflow_mode = 'throw'", CONFIG_COLLECTOR_CH_MAX_STACKS);
	sql_time_bound(&sql, q->budget);
	rb_printf(&sql, " FORMAT RowBinary");
	rb_put(&sql, "", 1);
	x.rows = ids.p;
	x.len = ids.len;
	if (sql.oom || ids.oom)
		e = -ENOMEM;
	else if (sel.every)
		e = ch__select(c, (char *)sql.p, &res, err, errlen);
	else
		e = ch__select_ext(c, (char *)sql.p, &x, &res, err, errlen);
	if (e && q->budget && strstr(err, "TIMEOUT_EXCEEDED")) /* max_execution_time above */
		e = -ETIMEDOUT;
	if (!e)
		e = charge_answer(q->budget, res.len, &answer_held, err, errlen);
	if (!e)
		e = rd_agg(&res, &agg, &n_agg, &n_values);
	if (!e)
		e = ch__build(c, &h, agg, n_agg, n_values, false, &pb, &lost, err, errlen);
	if (!e)
		e = pprof_budget__check(q->budget, err, errlen);
	if (!e)
		e = pprof_read_budget(pb.data, pb.len, q->budget, out, err, errlen);

	if (!e && lost)
		pr_warn("clickhouse: merge: %zu stacks not found (dictionary rows missing)", lost);
out:
	pthread_mutex_lock(&c->lock);
	c->merges++;
	c->merge_skipped += total - count;
	if (!e)
		c->rollup_merges += rolled;
	pthread_mutex_unlock(&c->lock);
	if (n_merged)
		*n_merged = count;
	if (skipped)
		*skipped = total - count;
	free(pb.data);
	agg_free(agg, n_agg);
	if (answer_held)
		q->budget->give(q->budget->ctx, answer_held);
	rb_free(&sql);
	rb_free(&res);
	rb_free(&ids);
	rb_free(&gin);
	free(sel.v);
	return e;
}

/* ---- sums by device ------------------------------------------------------------------------- */

/*
 * A side of a regression comparison: q's samples of kind sig summed by (series, stack) in one
 * GROUP BY, so the collector receives sums, not profiles. Row i: key[2i] the series,
 * key[2i + 1] the stack, v[i * nt ...] its nt values.
 */
struct dev_rows {
	uint64_t *key;
	int64_t *v;
	size_t n, cap, nt;
};

static int dev_rows_read(struct rb *res, struct dev_rows *d)
{
	struct rb_rd r = { res->p, res->p + res->len, false };

	while (rd_more(&r)) {
		if (d->n == d->cap) {
			size_t cap = d->cap ? 2 * d->cap : 4096;
			uint64_t *k = realloc(d->key, 2 * cap * sizeof(*k));
			int64_t *v;

			if (!k)
				return -ENOMEM;
			d->key = k;
			v = realloc(d->v, cap * (d->nt ? d->nt : 1) * sizeof(*v));
			if (!v)
				return -ENOMEM;
			d->v = v;
			d->cap = cap;
		}
		d->key[2 * d->n] = rd_u64(&r);
		d->key[2 * d->n + 1] = rd_u64(&r);
		for (size_t j = 0; j < d->nt; j++)
			d->v[d->n * d->nt + j] = (int64_t)rd_u64(&r);
		if (r.bad)
			return -EIO;
		d->n++;
	}
	return 0;
}

/*
 * What a side's answer of len bytes costs the query's budget before it is read: its peak,
 * the answer with the rows read from it (keys and values), or, once the answer is freed, the
 * rows with their order by device, each one's sample and their stacks' ids sorted. What is
 * built a distinct stack and a device is charged once known (side_charge()).
 */
static size_t dev_rows_cost(size_t len, size_t nt)
{
	size_t row = 16 + 8 * nt, rows = len / (row ? row : 1) + 1;
	size_t read = len + rows * row;
	size_t built = rows * (row + 2 * sizeof(size_t) + sizeof(uint64_t));

	return read > built ? read : built;
}

/*
 * A side's (series, stack) sums: from the per-device daily rollup for the whole days it
 * serves (ch-daily.c), raw rows for the rest; charged to q's budget (*held: given back by the
 * caller) before they are read.
 */
static int dev_rows_fetch(struct ch_store *c, const struct store_query *q,
			  const struct series_sel *sel, uint64_t sig, struct dev_rows *d,
			  size_t *held, char *err, size_t errlen)
{
	struct ch_ext x = { .name = SEL_EXT_NAME, .structure = "series UInt64" };
	struct rb sql = { 0 }, res = { 0 }, ids = { 0 }, from = { 0 };
	const char *in = sel->every ? "" : " AND series IN " SEL_EXT_NAME;
	bool daily = ch_daily__from(c, &from, q, in, sig, d->nt);
	int e;

	rb_printf(&sql, "SELECT series, stack");
	for (size_t i = 0; i < d->nt; i++)
		rb_printf(&sql, daily ? ", sum(v%zu)" : ", sum(v[%zu])", i + !daily);
	if (daily) {
		rb_put(&sql, from.p, from.len);
	} else {
		sql_samples_from(&sql);
		sql_where_samples(&sql, q, c->samples_hour);
		rb_printf(&sql, " AND sig = %" PRIu64 "%s", sig, in);
	}
	rb_printf(&sql, " GROUP BY series, stack SETTINGS max_rows_to_group_by = %d, "
		  "group_by_overflow_mode = 'throw'", CONFIG_COLLECTOR_CH_MAX_DEVICE_STACKS);
	sql_time_bound(&sql, q->budget);
	rb_printf(&sql, " FORMAT RowBinary");
	rb_put(&sql, "", 1);
	if (!sel->every)
		sel_ext_rows(&ids, sel, sig);
	x.rows = ids.p;
	x.len = ids.len;
	if (sql.oom || ids.oom)
		e = -ENOMEM;
	else if (sel->every)
		e = ch__select(c, (char *)sql.p, &res, err, errlen);
	else
		e = ch__select_ext(c, (char *)sql.p, &x, &res, err, errlen);
	if (e && strstr(err, "Limit for rows to GROUP BY")) {
		snprintf(err, errlen, "the selection holds more than %d (device, stack) sums "
			 "(CONFIG_COLLECTOR_CH_MAX_DEVICE_STACKS): narrow it",
			 CONFIG_COLLECTOR_CH_MAX_DEVICE_STACKS);
		e = -E2BIG;
	}
	if (e && q->budget && strstr(err, "TIMEOUT_EXCEEDED")) /* max_execution_time above */
		e = -ETIMEDOUT;
	if (!e && q->budget) {
		e = q->budget->take(q->budget->ctx, dev_rows_cost(res.len, d->nt), err, errlen);
		*held = e ? 0 : dev_rows_cost(res.len, d->nt);
	}
	if (!e)
		e = dev_rows_read(&res, d);
	if (!e && daily) {
		pthread_mutex_lock(&c->lock);
		c->daily_sides++;
		pthread_mutex_unlock(&c->lock);
	}
	if (e == -EIO)
		snprintf(err, errlen, "clickhouse: malformed answer to the per-device query");
	rb_free(&sql);
	rb_free(&res);
	rb_free(&ids);
	rb_free(&from);
	return e;
}

/* The selected series of kind sig, sorted by device (the rows' order for by_device()). */
static int dev_order_cmp(const void *a, const void *b)
{
	const struct series_row *x = *(const struct series_row *const *)a;
	const struct series_row *y = *(const struct series_row *const *)b;
	int k = strcmp(x->device, y->device);

	return k ? k : series_cmp(x, y);
}

struct by_device {
	struct series_row **rows;	/* the sig's series, by device */
	size_t n_rows;
	size_t n_dev;
	size_t *start;			/* rows of device k: order[start[k] .. start[k + 1]) */
	size_t *order;			/* dev_rows indices grouped by device */
};

/*
 * Groups d's rows by their series' device (a counting sort): 0 or -ENOMEM. A row's device is
 * looked up once, among the sig's series by id, 16 bytes each (a bsearch of sel's 2.5 KiB
 * rows, twice a row, was a third of the collector's CPU in a comparison: perf record).
 */
static int by_device(struct series_sel *sel, uint64_t sig, const struct dev_rows *d,
		     struct by_device *g)
{
	struct sdev { uint64_t series, dev; } *sd = malloc((sel->n + 1) * sizeof(*sd));
	size_t *dev = malloc((d->n + 1) * sizeof(*dev)), *pos;

	g->rows = malloc((sel->n + 1) * sizeof(*g->rows));
	g->order = malloc((d->n + 1) * sizeof(*g->order));
	for (size_t i = 0; g->rows && i < sel->n; i++)
		if (sel->v[i].sig == sig)
			g->rows[g->n_rows++] = &sel->v[i];
	qsort(g->rows, g->n_rows, sizeof(*g->rows), dev_order_cmp);
	for (size_t i = 0; i < g->n_rows; i++) {
		if (i && strcmp(g->rows[i]->device, g->rows[i - 1]->device))
			g->n_dev++;
		g->rows[i]->dev = (uint32_t)g->n_dev;
	}
	g->n_dev += g->n_rows > 0;
	g->start = calloc(2 * (g->n_dev + 1), sizeof(*g->start));
	if (!sd || !dev || !g->rows || !g->order || !g->start) {
		free(sd);
		free(dev);
		return -ENOMEM;
	}
	for (size_t i = 0; i < g->n_rows; i++)
		sd[i] = (struct sdev){ g->rows[i]->series, g->rows[i]->dev };
	qsort(sd, g->n_rows, sizeof(*sd), u64_cmp); /* by series, its first member */
	for (size_t i = 0; i < d->n; i++) {
		const struct sdev *x = bsearch(&d->key[2 * i], sd, g->n_rows, sizeof(*sd), u64_cmp);

		dev[i] = x ? x->dev : SIZE_MAX; /* none: ClickHouse filtered by the same set */
		if (x)
			g->start[x->dev + 1]++;
	}
	pos = g->start + g->n_dev + 1;
	for (size_t k = 0; k < g->n_dev; k++) {
		g->start[k + 1] += g->start[k];
		pos[k] = g->start[k];
	}
	for (size_t i = 0; i < d->n; i++)
		if (dev[i] != SIZE_MAX)
			g->order[pos[dev[i]]++] = i;
	free(sd);
	free(dev);
	return 0;
}

/*
 * The side's stacks: each distinct stack of its rows once (values 1) in one profile, built
 * from the dictionary rows (fetched into dc) and decoded under b into *p, and each row's sample
 * in it (sample[i]; SIZE_MAX: a stack ClickHouse does not hold, counted in *lost). One build and
 * decode a side, where a profile a device was (5,000 a comparison of the synthetic day: 65 % of
 * the collector's CPU). Charged to b (*held) once known: a distinct stack's sample to build and
 * the statistics' input (regress.c's grouping, names and sums: 52 bytes), a device's rows.
 */
static int side_stacks(struct ch_store *c, const struct pprof_head *h, const struct dev_rows *d,
		       struct dicts *dc, const struct pprof_budget *b, size_t devmax,
		       size_t *held, struct pprof_profile **p, size_t *sample, size_t *lost,
		       char *err, size_t errlen)
{
	uint64_t *ids = malloc((d->n + 1) * sizeof(*ids));
	int64_t *one = malloc((d->nt + 1) * sizeof(*one));
	struct agg_sample *u = NULL;
	struct pprof_buf pb = { 0 };
	size_t *built = NULL, m = 0, want;
	int e = ids && one ? 0 : -ENOMEM;

	for (size_t i = 0; !e && i < d->n; i++)
		ids[i] = d->key[2 * i + 1];
	for (size_t j = 0; !e && j < d->nt; j++)
		one[j] = 1;
	m = e ? 0 : u64_uniq(ids, d->n);
	want = m * (sizeof(*u) + sizeof(*built) + 52) + devmax * 2 * sizeof(struct store_stack_sum);
	if (!e && b && !(e = b->take(b->ctx, want, err, errlen)))
		*held += want;
	u = e ? NULL : malloc((m + 1) * sizeof(*u));
	built = e ? NULL : malloc((m + 1) * sizeof(*built));
	if (!e && (!u || !built))
		e = -ENOMEM;
	for (size_t k = 0; !e && k < m; k++)
		u[k] = (struct agg_sample){ .stack = ids[k], .v = one };
	if (!e)
		e = dicts__fetch(c, u, m, dc, err, errlen);
	if (!e)
		e = build_from(h, u, m, d->nt, false, dc, &pb, lost, built, err, errlen);
	if (!e)
		e = pprof_read_budget(pb.data, pb.len, b, p, err, errlen);
	for (size_t i = 0; !e && i < d->n; i++) {
		const uint64_t *x = bsearch(&d->key[2 * i + 1], ids, m, sizeof(*ids), u64_cmp);

		sample[i] = built[x - ids];
	}
	free(pb.data);
	free(ids);
	free(one);
	free(u);
	free(built);
	return e;
}

/*
 * Device k's rows (g->order[start[k] ..]), those of a stack in the side's profile with a
 * nonzero value (what a merged profile of the device would hold), handed to fn.
 */
static int device_sums(const struct by_device *g, size_t k, const struct series_row *first,
		       const struct dev_rows *d, const size_t *sample,
		       struct store_stack_sum *rows, const struct store_sums_fns *fn, void *ctx)
{
	size_t n = 0;

	for (size_t j = g->start[k]; j < g->start[k + 1]; j++) {
		size_t i = g->order[j];
		bool zero = true;

		for (size_t t = 0; t < d->nt; t++)
			zero = zero && !d->v[i * d->nt + t];
		if (sample[i] != SIZE_MAX && !zero)
			rows[n++] = (struct store_stack_sum){ sample[i], &d->v[i * d->nt] };
	}
	return fn->device(ctx, first->device, first->default_type, rows, n);
}

/*
 * store__sum_by_device: the selector on the series as a merge, then one GROUP BY series,
 * stack over the selection's sample rows, the dictionary rows of its stacks fetched once, one
 * profile of its distinct stacks (the same builder as a merge: the same frames), and each
 * device's rows as sums of them.
 */
int ch__sum_by_device(struct store *base, const struct store_query *q,
		      const struct store_sums_fns *fn, void *ctx, size_t *n_profiles,
		      size_t *skipped, char *err, size_t errlen)
{
	struct ch_store *c = ch_of(base);
	struct series_sel sel = { 0 };
	struct dev_rows d = { 0 };
	struct by_device g = { 0 };
	struct dicts dc = { 0 };
	struct pprof_profile *sp = NULL;
	struct store_stack_sum *rows = NULL;
	uint64_t sig, count = 0, total = 0;
	size_t lost = 0, r0 = 0, held = 0, devmax = 0, *sample = NULL;
	int e;

	err[0] = '\0';
	e = ch__series(c, q, &sel, err, errlen);
	if (!e && !sel.n) {
		snprintf(err, errlen, "no profiles match");
		e = -ENOENT;
	}
	if (e)
		goto out;
	qsort(sel.v, sel.n, sizeof(*sel.v), series_cmp); /* by_device() looks rows up */
	sig = choose_sig(&sel, &count, &total);
	*n_profiles = count;
	*skipped = total - count;
	for (size_t i = 0; i < sel.n && !d.nt; i++)
		if (sel.v[i].sig == sig)
			d.nt = n_types(&sel.v[i]);
	e = dev_rows_fetch(c, q, &sel, sig, &d, &held, err, errlen);
	if (!e)
		e = by_device(&sel, sig, &d, &g);
	for (size_t k = 0; !e && k < g.n_dev; k++)
		if (g.start[k + 1] - g.start[k] > devmax)
			devmax = g.start[k + 1] - g.start[k];
	sample = e ? NULL : malloc((d.n + 1) * sizeof(*sample));
	rows = e ? NULL : malloc((devmax + 1) * sizeof(*rows));
	if (!e && (!sample || !rows))
		e = -ENOMEM;
	if (!e && g.n_rows) {
		struct pprof_head h = { .row = g.rows[0], .period = g.rows[0]->period };

		e = side_stacks(c, &h, &d, &dc, q->budget, devmax, &held, &sp, sample, &lost,
				err, errlen);
	}
	if (!e && sp)
		e = fn->stacks(ctx, sp);
	for (size_t k = 0; !e && sp && k < g.n_dev; k++) { /* its first series' default type */
		const struct series_row *first = g.rows[r0];

		while (r0 < g.n_rows && g.rows[r0]->dev == k)
			r0++;
		e = pprof_budget__check(q->budget, err, errlen);
		if (!e)
			e = device_sums(&g, k, first, &d, sample, rows, fn, ctx);
	}
	if (e == -ENOMEM && !err[0])
		snprintf(err, errlen, "out of memory");
	if (!e && lost)
		pr_warn("clickhouse: sums by device: %zu stacks not found (dictionary rows "
			"missing)", lost);
out:
	pthread_mutex_lock(&c->lock);
	c->merges++;
	c->merge_skipped += total - count;
	pthread_mutex_unlock(&c->lock);
	pprof_profile__free_budget(sp, q->budget);
	dicts__free(&dc);
	free(g.rows);
	free(g.start);
	free(g.order);
	free(sample);
	free(rows);
	free(d.key);
	free(d.v);
	free(sel.v);
	if (held)
		q->budget->give(q->budget->ctx, held);
	return e;
}

/* ---- by id ---------------------------------------------------------------------------------- */

#define PROFILE_COLS "day, ts, series, sig, service, type, device, label_keys, label_values, " \
		     "key, value, size, flags, arrayStringConcat(sample_type, ','), " \
		     "arrayStringConcat(sample_unit, ','), default_type, period_type, " \
		     "period_unit, period, time_nanos, duration, main_mapping, " \
		     "arrayStringConcat(comments, '\\n')"

struct profile_row {
	uint16_t day;
	uint64_t ts, series, sig;
	char service[256], type[64], device[256], key[256];
	struct row_labels rl;
	int64_t value;
	uint64_t size;
	uint16_t flags;
	struct series_row head;
};

static void rd_profile(struct rb_rd *r, struct profile_row *p)
{
	p->day = rd_u16(r);
	p->ts = rd_u64(r);
	p->series = rd_u64(r);
	p->sig = rd_u64(r);
	rd_strcpy(r, p->service, sizeof(p->service));
	rd_strcpy(r, p->type, sizeof(p->type));
	rd_strcpy(r, p->device, sizeof(p->device));
	rd_labels(r, &p->rl);
	rd_strcpy(r, p->key, sizeof(p->key));
	p->value = (int64_t)rd_u64(r);
	p->size = rd_u64(r);
	p->flags = rd_u16(r);
	rd_strcpy(r, p->head.st, sizeof(p->head.st));
	rd_strcpy(r, p->head.su, sizeof(p->head.su));
	rd_strcpy(r, p->head.default_type, sizeof(p->head.default_type));
	rd_strcpy(r, p->head.period_type, sizeof(p->head.period_type));
	rd_strcpy(r, p->head.period_unit, sizeof(p->head.period_unit));
	p->head.period = (int64_t)rd_u64(r);
	p->head.time_nanos = (int64_t)rd_u64(r);
	p->head.duration = (int64_t)rd_u64(r);
	p->head.main_mapping = rd_u64(r);
	rd_strcpy(r, p->head.comments, sizeof(p->head.comments));
}

/* One stored profile rebuilt from its rows (gzip pprof bytes in out). */
static int ch__fetch(struct ch_store *c, uint64_t id, struct profile_row *p,
		     struct pprof_buf *out, char *err, size_t errlen)
{
	struct rb sql = { 0 }, res = { 0 };
	struct rb_rd r;
	struct agg_sample *agg = NULL;
	size_t n_agg = 0, n_values = 0, lost = 0;
	struct pprof_head h = { 0 };
	int e;

	rb_printf(&sql, "SELECT " PROFILE_COLS " FROM profiles WHERE id = %" PRIu64
		  " LIMIT 1 FORMAT RowBinary", id);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch__select(c, (char *)sql.p, &res, err, errlen);
	rb_free(&sql);
	if (e)
		return e;
	r = (struct rb_rd){ res.p, res.p + res.len, false };
	if (!rd_more(&r)) {
		rb_free(&res);
		snprintf(err, errlen, "profile %" PRIu64 " is not stored", id);
		return -ENOENT;
	}
	rd_profile(&r, p);
	rb_free(&res);
	if (r.bad) {
		snprintf(err, errlen, "clickhouse: malformed profile row");
		return -EIO;
	}
	/* 18.16 compares a Date with a string, not with its day number */
	rb_printf(&sql, "SELECT stack, sumForEach(v)");
	sql_samples_from(&sql);
	sql_where_samples(&sql, &(struct store_query){ .from_ns = p->ts, .to_ns = p->ts },
			  c->samples_hour);
	rb_printf(&sql, " AND series = %" PRIu64 " AND profile = %" PRIu64
		  " GROUP BY stack FORMAT RowBinary", p->series, id);
	rb_put(&sql, "", 1);
	e = sql.oom ? -ENOMEM : ch__select(c, (char *)sql.p, &res, err, errlen);
	rb_free(&sql);
	if (!e)
		e = rd_agg(&res, &agg, &n_agg, &n_values);
	rb_free(&res);
	h.row = &p->head;
	h.period = p->head.period;
	h.time_nanos = p->head.time_nanos;
	h.duration = p->head.duration;
	head_add_comments(&h, p->head.comments);
	if (!e)
		e = ch__build(c, &h, agg, n_agg, n_values, true, out, &lost, err, errlen);
	agg_free(agg, n_agg);
	return e;
}

int ch__get(struct store *base, uint64_t seq, struct record_meta *meta, void **payload,
	    size_t *len)
{
	struct ch_store *c = ch_of(base);
	struct profile_row *p = calloc(1, sizeof(*p));
	struct pprof_buf pb = { 0 };
	struct profile_row *q;
	char err[300] = "", *blk;
	size_t need, off;
	int e;

	if (!p)
		return -ENOMEM;
	e = ch__fetch(c, seq, p, &pb, err, sizeof(err));
	if (e) {
		if (e != -ENOENT)
			pr_warn("clickhouse: profile %" PRIu64 ": %s", seq, err);
		free(p);
		free(pb.data);
		return e == -ENOENT ? e : -EIO;
	}
	/*
	 * One allocation, the payload first (the API frees it as the body), then the row:
	 * meta's strings point into it.
	 */
	off = (pb.len + 15) & ~(size_t)15;
	need = off + sizeof(*p);
	blk = malloc(need);
	if (!blk) {
		free(p);
		free(pb.data);
		return -ENOMEM;
	}
	memcpy(blk, pb.data, pb.len);
	q = (struct profile_row *)(blk + off);
	memcpy(q, p, sizeof(*p));
	for (size_t i = 0; i < p->rl.n; i++) { /* the label pointers move with the row */
		q->rl.l[i].key = q->rl.buf + (p->rl.l[i].key - p->rl.buf);
		q->rl.l[i].value = q->rl.buf + (p->rl.l[i].value - p->rl.buf);
	}
	free(pb.data);
	free(p);
	p = q;
	*meta = (struct record_meta){ .time_ns = p->ts, .flags = p->flags,
				      .service = p->service, .type = p->type,
				      .device = p->device, .key = p->key, .value = p->value,
				      .labels = p->rl.l, .n_labels = p->rl.n };
	*payload = blk;
	if (len)
		*len = pb.len;
	return 0;
}

int ch__read_profile(struct store *base, uint64_t seq, const struct pprof_budget *b,
		     struct pprof_profile **out, char *err, size_t errlen)
{
	struct ch_store *c = ch_of(base);
	struct profile_row *p = calloc(1, sizeof(*p));
	struct pprof_buf pb = { 0 };
	int e;

	*out = NULL;
	err[0] = '\0';
	e = p ? ch__fetch(c, seq, p, &pb, err, errlen) : -ENOMEM;
	if (!e)
		e = pprof_budget__check(b, err, errlen);
	if (!e) {
		e = pprof_read_budget(pb.data, pb.len, b, out, err, errlen);
		e = e == -EFBIG || e == -EAGAIN || !e ? e : -EIO;
	}
	free(pb.data);
	free(p);
	return e;
}

int ch__merge_seqs(struct store *base, const uint64_t *seqs, size_t n,
		   const struct pprof_budget *b, struct pprof_profile **out, char *err,
		   size_t errlen)
{
	struct pprof_merger *m = pprof_merger__new();
	int e = m ? 0 : -ENOMEM;

	*out = NULL;
	if (m)
		pprof_merger__set_budget(m, b);
	for (size_t i = 0; !e && i < n; i++) {
		struct pprof_profile *p;

		e = ch__read_profile(base, seqs[i], b, &p, err, errlen);
		if (!e)
			e = pprof_merger__add(m, p, err, errlen);
		pprof_profile__free_budget(p, b);
	}
	if (!e)
		e = pprof_merger__finish(m, out, err, errlen);
	pprof_merger__free(m);
	return e;
}
