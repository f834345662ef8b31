/* SPDX-License-Identifier: MIT */
/*
 * store/ch/ch-client.h — the little of ClickHouse's HTTP interface the ClickHouse backend needs,
 * on our own port/http.c and port/net.c (no client library: Debian has no C one), plus
 * RowBinary, the format both ways (no escaping, no text parsing).
 *
 * A statement goes in the URL (INSERT ... FORMAT RowBinary, its rows in the body) or in the body
 * (SELECT ... FORMAT RowBinary); settings ride in the URL (max_query_size for long IN lists,
 * bounds on time, memory and GROUP BY rows). A 200 means ClickHouse took the statement: for an
 * INSERT, the part is written (ClickHouse 18.16 has no fsync-on-insert; it survives a crash of
 * the server, not of the machine). Anything else is an error whose text is ClickHouse's own.
 *
 * RowBinary (18.16): integers fixed-width little-endian, Date a UInt16 of days, String and
 * Array an unsigned LEB128 length then the bytes or elements.
 */
#ifndef EDGEPROF_STORE_CH_CLIENT_H
#define EDGEPROF_STORE_CH_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- RowBinary writer: a growable buffer; oom sticks ---------------------------------------- */

struct rb {
	unsigned char *p;
	size_t len, cap;
	bool oom;
};

void rb_put(struct rb *b, const void *data, size_t len);
void rb_u8(struct rb *b, uint8_t v);
void rb_u16(struct rb *b, uint16_t v);
void rb_u64(struct rb *b, uint64_t v);
void rb_varint(struct rb *b, uint64_t v);
void rb_str(struct rb *b, const char *s);	/* NULL = "" */
bool rb_reserve(struct rb *b, size_t more);	/* room for more bytes: false when out of memory */
bool rb_reserve_exact(struct rb *b, size_t more);	/* the same, not rounded up */
void rb_printf(struct rb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rb_free(struct rb *b);
/*
 * A buffer kept for reuse: emptied (len 0, oom cleared), with room for size bytes, grown
 * (by a quarter more) without copying its old contents. Its bytes, or NULL when out of memory.
 */
void *rb_room(struct rb *b, size_t size);
/* Frees the largest of v[0..n) until their capacities total at most max: that total. */
size_t rb_keep_within(struct rb *const *v, size_t n, size_t max);

/* ---- RowBinary reader: bounds-checked; bad sticks (a short or malformed answer) ------------- */

struct rb_rd {
	const unsigned char *p, *end;
	bool bad;
};

/* Bytes left and nothing bad so far. Inline: the block writers ask once a row. */
static inline bool rd_more(const struct rb_rd *r)
{
	return !r->bad && r->p < r->end;
}

uint8_t rd_u8(struct rb_rd *r);
uint16_t rd_u16(struct rb_rd *r);
uint64_t rd_u64(struct rb_rd *r);
uint64_t rd_varint(struct rb_rd *r);

/*
 * rd_varint() with a one-byte varint read inline: a sample row's count of values (below 128
 * but for unusual profiles), read once a row by the block writers and the rollup.
 */
static inline uint64_t rd_varint1(struct rb_rd *r)
{
	if (rd_more(r) && *r->p < 0x80)
		return *r->p++;
	return rd_varint(r);
}
/* A String: its bytes (not NUL-terminated) and length. */
const char *rd_str(struct rb_rd *r, size_t *len);
/* A String copied into out (truncated to outlen - 1, NUL-terminated). */
void rd_strcpy(struct rb_rd *r, char *out, size_t outlen);

/* ---- the connection ----------------------------------------------------------------------- */

struct ch_opts {
	char host[64], port[8];
	char database[64];
	unsigned timeout_ms;	/* one statement, connect to answer */
	size_t max_result;	/* bytes of an answer */
};

/* Parses http://HOST:PORT/DATABASE (the database defaults to "edgeprof"): 0 or -EINVAL. */
int ch_opts__parse(const char *url, struct ch_opts *o, char *err, size_t errlen);

struct ch_conn;

struct ch_conn *ch_conn__new(const struct ch_opts *o);	/* NULL on ENOMEM; connects lazily */
void ch_conn__free(struct ch_conn *c);			/* NULL-safe */

/*
 * Runs one statement. sql in the URL with data as the body (an INSERT's rows), or, with data
 * NULL, sql as the body. settings: extra URL parameters ("max_execution_time=30&...") or NULL.
 * On 200: 0, and *out (may be NULL) the answer (malloc'd, the caller frees out->p). Else
 * -EIO with ClickHouse's message in err (first line), or -errno of the connection (the
 * connection is then closed and reopened by the next statement).
 */
int ch_conn__run(struct ch_conn *c, const char *sql, const char *settings, const void *data,
		 size_t len, struct rb *out, char *err, size_t errlen);

/* An external table for one SELECT (ClickHouse's "external data"): its rows in TabSeparated. */
struct ch_ext {
	const char *name;		/* e.g. "sel_series" */
	const char *structure;		/* e.g. "series UInt64" */
	const void *rows;
	size_t len;
};

/*
 * Runs one SELECT with the external table x, which the statement reads by its name (e.g.
 * "series IN sel_series"): the set goes once, as data, instead of a literal list in every
 * place of the SQL text that needs it. Sent as multipart/form-data; answers as ch_conn__run.
 */
int ch_conn__run_ext(struct ch_conn *c, const char *sql, const char *settings,
		     const struct ch_ext *x, struct rb *out, char *err, size_t errlen);

#endif /* EDGEPROF_STORE_CH_CLIENT_H */
