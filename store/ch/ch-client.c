// SPDX-License-Identifier: MIT
/* store/ch/ch-client.c — ClickHouse over HTTP and RowBinary (store/ch/ch-client.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/http.h"
#include "port/net.h"
#include "store/ch/ch-client.h"

/* ---- RowBinary writer ------------------------------------------------------------------------ */

/*
 * A larger buffer for b: realloc while it holds bytes, else a fresh one (an emptied buffer kept
 * for reuse is not copied: realloc would copy all of its old capacity). b->p is freed only once
 * the new one is had, as realloc does.
 */
static unsigned char *rb_grow(struct rb *b, size_t cap)
{
	unsigned char *p;

	if (b->len)
		return realloc(b->p, cap);
	p = malloc(cap);
	if (p)
		free(b->p);
	return p;
}

bool rb_reserve(struct rb *b, size_t more)
{
	size_t cap;
	unsigned char *p;

	if (b->oom)
		return false;
	if (b->len + more <= b->cap)
		return true;
	cap = b->cap ? b->cap : 4096;
	while (cap < b->len + more)
		cap *= 2;
	p = rb_grow(b, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

/*
 * rb_reserve without rounding the capacity up to a power of two: for a buffer whose size is
 * known at once (a Native block of a batch), where rounding would cost up to twice its size.
 */
bool rb_reserve_exact(struct rb *b, size_t more)
{
	unsigned char *p;

	if (b->oom)
		return false;
	if (b->len + more <= b->cap)
		return true;
	p = rb_grow(b, b->len + more);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = b->len + more;
	return true;
}

void rb_put(struct rb *b, const void *data, size_t len)
{
	if (!len || !rb_reserve(b, len))
		return;
	memcpy(b->p + b->len, data, len);
	b->len += len;
}

void rb_u8(struct rb *b, uint8_t v)
{
	rb_put(b, &v, 1);
}

void rb_u16(struct rb *b, uint16_t v)
{
	unsigned char x[2] = { (unsigned char)v, (unsigned char)(v >> 8) };

	rb_put(b, x, 2);
}

void rb_u64(struct rb *b, uint64_t v)
{
	unsigned char x[8];

	for (int i = 0; i < 8; i++)
		x[i] = (unsigned char)(v >> (8 * i));
	rb_put(b, x, 8);
}

void rb_varint(struct rb *b, uint64_t v)
{
	unsigned char x[10];
	size_t n = 0;

	do {
		x[n] = v & 0x7f;
		v >>= 7;
		x[n++] |= v ? 0x80 : 0;
	} while (v);
	rb_put(b, x, n);
}

void rb_str(struct rb *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;

	rb_varint(b, n);
	rb_put(b, s, n);
}

void rb_printf(struct rb *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !rb_reserve(b, (size_t)n + 1))
		return;
	va_start(ap, fmt);
	vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void rb_free(struct rb *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void *rb_room(struct rb *b, size_t size)
{
	b->len = 0;
	b->oom = false;
	if (size <= b->cap && b->p)
		return b->p;
	/* a quarter more: the next batch is often a little larger (pages never touched
	 * cost no memory) */
	if (!rb_reserve_exact(b, size + size / 4 + 1))
		return NULL;
	return b->p;
}

size_t rb_keep_within(struct rb *const *v, size_t n, size_t max)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += v[i]->cap;
	while (total > max) {
		struct rb *big = v[0];

		for (size_t i = 1; i < n; i++)
			if (v[i]->cap > big->cap)
				big = v[i];
		total -= big->cap;
		rb_free(big);
	}
	return total;
}

/* ---- RowBinary reader ------------------------------------------------------------------------ */

static const unsigned char *rd_take(struct rb_rd *r, size_t n)
{
	const unsigned char *p = r->p;

	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	return p;
}

uint8_t rd_u8(struct rb_rd *r)
{
	const unsigned char *p = rd_take(r, 1);

	return p ? p[0] : 0;
}

uint16_t rd_u16(struct rb_rd *r)
{
	const unsigned char *p = rd_take(r, 2);

	return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint64_t rd_u64(struct rb_rd *r)
{
	const unsigned char *p = rd_take(r, 8);
	uint64_t v = 0;

	for (int i = 7; p && i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

uint64_t rd_varint(struct rb_rd *r)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		const unsigned char *p = rd_take(r, 1);

		if (!p)
			return 0;
		v |= (uint64_t)(*p & 0x7f) << shift;
		if (!(*p & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

const char *rd_str(struct rb_rd *r, size_t *len)
{
	uint64_t n = rd_varint(r);
	const unsigned char *p = r->bad ? NULL : rd_take(r, n);

	*len = p ? n : 0;
	return p ? (const char *)p : "";
}

void rd_strcpy(struct rb_rd *r, char *out, size_t outlen)
{
	size_t n;
	const char *s = rd_str(r, &n);

	if (n >= outlen)
		n = outlen - 1;
	memcpy(out, s, n);
	out[n] = '\0';
}

/* ---- the connection ------------------------------------------------------------------------- */

#define CH_STALE_NS (2 * NSEC_PER_SEC) /* ClickHouse closes idle keep-alives after 3 s */

struct ch_conn {
	struct ch_opts o;
	int fd;
	uint64_t deadline, last_used;
	struct http_stream s;
	struct http_message m;
};

int ch_opts__parse(const char *url, struct ch_opts *o, char *err, size_t errlen)
{
	char hostport[96];
	const char *p = url, *slash;

	memset(o, 0, sizeof(*o));
	if (!strncmp(p, "http://", 7))
		p += 7;
	slash = strchr(p, '/');
	snprintf(hostport, sizeof(hostport), "%.*s", slash ? (int)(slash - p) : (int)strlen(p), p);
	snprintf(o->database, sizeof(o->database), "%s",
		 slash && slash[1] ? slash + 1 : "edgeprof");
	if (net_split_hostport(hostport, o->host, sizeof(o->host), o->port, sizeof(o->port)) ||
	    !o->host[0] || !o->port[0]) {
		snprintf(err, errlen, "clickhouse: '%s' is not http://HOST:PORT/DATABASE", url);
		return -EINVAL;
	}
	for (const char *d = o->database; *d; d++) {
		if (!(*d == '_' || (*d >= '0' && *d <= '9') || (*d >= 'a' && *d <= 'z') ||
		      (*d >= 'A' && *d <= 'Z'))) {
			snprintf(err, errlen, "clickhouse: database name '%s': letters, digits "
				 "and _ only", o->database);
			return -EINVAL;
		}
	}
	o->timeout_ms = 30000;
	o->max_result = 256u << 20;
	return 0;
}

static ssize_t ch_read(void *ctx, void *buf, size_t len)
{
	struct ch_conn *c = ctx;

	return net_read(c->fd, buf, len, c->deadline);
}

static int ch_write(void *ctx, const void *buf, size_t len)
{
	struct ch_conn *c = ctx;

	return net_write(c->fd, buf, len, c->deadline);
}

struct ch_conn *ch_conn__new(const struct ch_opts *o)
{
	struct ch_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->o = *o;
	c->fd = -1;
	return c;
}

static void ch_conn__close(struct ch_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

void ch_conn__free(struct ch_conn *c)
{
	if (!c)
		return;
	ch_conn__close(c);
	http_message__reset(&c->m);
	free(c);
}

static int ch_conn__open(struct ch_conn *c, char *err, size_t errlen)
{
	uint64_t now = port_clock_mono_ns();

	if (c->fd >= 0 && now - c->last_used < CH_STALE_NS)
		return 0;
	ch_conn__close(c);
	c->fd = net_connect(c->o.host, c->o.port, c->deadline, err, errlen);
	if (c->fd < 0)
		return c->fd;
	http_stream__init(&c->s, ch_read, ch_write, c);
	return 0;
}

/* The first line of ClickHouse's error text ("Code: 60, e.displayText() = DB::Exception: ..."). */
static void ch_error(const struct http_message *m, char *err, size_t errlen)
{
	const char *b = m->body ? (const char *)m->body : "";
	size_t n = strcspn(b, "\n");

	snprintf(err, errlen, "clickhouse: HTTP %d: %.*s", m->status, (int)(n > 400 ? 400 : n), b);
}

/* Sends one request (target: the URL's path and query) and reads its answer, as ch_conn__run. */
static int ch_conn__send(struct ch_conn *c, const char *target, const char *extra,
			 const void *body, size_t len, struct rb *out, char *err, size_t errlen)
{
	int ret = http_write_request(&c->s, "POST", c->o.host, target, extra, body, len);

	if (!ret)
		ret = http_read_response(&c->s, &c->m, c->o.max_result);
	if (ret) {
		snprintf(err, errlen, "clickhouse %s:%s: %s", c->o.host, c->o.port,
			 strerror(-ret));
		ch_conn__close(c);
		http_message__reset(&c->m);
		return ret;
	}
	c->last_used = port_clock_mono_ns();
	if (!c->m.keep_alive)
		ch_conn__close(c);
	if (c->m.status != 200) {
		ch_error(&c->m, err, errlen);
		http_message__reset(&c->m);
		return -EIO;
	}
	if (out) {
		memset(out, 0, sizeof(*out));
		out->p = c->m.body;
		out->len = out->cap = c->m.body_len;
		c->m.body = NULL;
	}
	http_message__reset(&c->m);
	return 0;
}

int ch_conn__run(struct ch_conn *c, const char *sql, const char *settings, const void *data,
		 size_t len, struct rb *out, char *err, size_t errlen)
{
	char *target = NULL;
	size_t tlen = 64 + strlen(c->o.database) + (settings ? strlen(settings) : 0) +
		      (data ? 3 * strlen(sql) : 0);
	int ret;

	c->deadline = port_clock_mono_ns() + (uint64_t)c->o.timeout_ms * 1000000;
	ret = ch_conn__open(c, err, errlen);
	if (ret)
		return ret;
	target = malloc(tlen);
	if (!target)
		return -ENOMEM;
	ret = snprintf(target, tlen, "/?database=%s%s%s%s", c->o.database, settings ? "&" : "",
		       settings ? settings : "", data ? "&query=" : "");
	if (data && http_url_encode(sql, target + ret, tlen - (size_t)ret) < 0)
		ret = -ENAMETOOLONG;
	else
		ret = ch_conn__send(c, target, NULL, data ? data : sql, data ? len : strlen(sql),
				    out, err, errlen);
	free(target);
	return ret;
}

/* Not in our statements (no user text goes into them) nor in TabSeparated numbers. */
#define CH_BOUNDARY "edgeprof-7d1c5a0e93b24f68"

/* The form: the statement, the table's structure, then its rows as a file (HTTP's multipart). */
static void ext_form(struct rb *b, const char *sql, const struct ch_ext *x)
{
	rb_printf(b, "--" CH_BOUNDARY "\r\nContent-Disposition: form-data; name=\"query\"\r\n\r\n"
		  "%s\r\n--" CH_BOUNDARY "\r\nContent-Disposition: form-data; "
		  "name=\"%s_structure\"\r\n\r\n%s\r\n--" CH_BOUNDARY "\r\n"
		  "Content-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
		  "Content-Type: text/tab-separated-values\r\n\r\n", sql, x->name,
		  x->structure, x->name, x->name);
	rb_put(b, x->rows, x->len);
	rb_printf(b, "\r\n--" CH_BOUNDARY "--\r\n");
}

int ch_conn__run_ext(struct ch_conn *c, const char *sql, const char *settings,
		     const struct ch_ext *x, struct rb *out, char *err, size_t errlen)
{
	struct rb body = { 0 };
	char *target = NULL;
	size_t tlen = 64 + strlen(c->o.database) + (settings ? strlen(settings) : 0) +
		      strlen(x->name);
	int ret;

	if (strstr(sql, CH_BOUNDARY) || memmem(x->rows, x->len, CH_BOUNDARY, strlen(CH_BOUNDARY)))
		return -EINVAL;
	c->deadline = port_clock_mono_ns() + (uint64_t)c->o.timeout_ms * 1000000;
	ret = ch_conn__open(c, err, errlen);
	if (ret)
		return ret;
	target = malloc(tlen);
	ext_form(&body, sql, x);
	if (!target || body.oom) {
		free(target);
		rb_free(&body);
		return -ENOMEM;
	}
	snprintf(target, tlen, "/?database=%s&%s_format=TabSeparated%s%s", c->o.database,
		 x->name, settings ? "&" : "", settings ? settings : "");
	ret = ch_conn__send(c, target, "Content-Type: multipart/form-data; boundary="
			    CH_BOUNDARY "\r\n", body.p, body.len, out, err, errlen);
	free(target);
	rb_free(&body);
	return ret;
}
