// SPDX-License-Identifier: MIT
/*
 * port/http.c — a strict, bounded HTTP/1.1 parser and writer. Strict where leniency invites
 * request smuggling (Content-Length together with Transfer-Encoding, conflicting lengths,
 * obs-fold, bare CR, NUL bytes), tolerant where real clients differ (bare LF line ends, an
 * empty line before a request).
 */
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "port/http.h"

#define HTTP_MAX_LINE_EXT 1024	/* chunk extension / trailer line bound */
#define HTTP_BODY_CHUNK	  65536 /* first allocation of a body of unknown length */

void http_stream__init(struct http_stream *s, http_read_fn rd, http_write_fn wr, void *ctx)
{
	s->read = rd;
	s->write = wr;
	s->ctx = ctx;
	s->len = 0;
	s->consumed = 0;
}

void http_message__reset(struct http_message *m)
{
	free(m->body);
	memset(m, 0, offsetof(struct http_message, head));
	m->content_length = -1;
}

/* Length of a complete head in buf (through the empty line), or 0. */
static size_t http_head_end(const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;

	while ((p = memchr(p, '\n', (size_t)(end - p)))) {
		p++;
		if (p < end && *p == '\n')
			return (size_t)(p + 1 - buf);
		if (p + 1 < end && p[0] == '\r' && p[1] == '\n')
			return (size_t)(p + 2 - buf);
	}
	return 0;
}

static bool http_is_tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Splits the next line off *p (ending at end): returns it NUL-terminated, or NULL if bad. */
static char *http_next_line(char **p, char *end)
{
	char *line = *p, *nl = memchr(line, '\n', (size_t)(end - line));
	char *e;

	if (!nl)
		return NULL;
	*p = nl + 1;
	e = nl;
	if (e > line && e[-1] == '\r')
		e--;
	*e = '\0';
	for (char *q = line; q < e; q++) {
		unsigned char c = (unsigned char)*q;

		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return NULL; /* NUL, bare CR, other controls */
	}
	return line;
}

static int http_set_length(struct http_message *m, const char *v)
{
	int64_t n = 0;

	if (!*v)
		return -EINVAL;
	for (; *v; v++) {
		if (!isdigit((unsigned char)*v) || n > (INT64_MAX - 9) / 10)
			return -EINVAL;
		n = n * 10 + (*v - '0');
	}
	if (m->content_length >= 0 && m->content_length != n)
		return -EINVAL;
	m->content_length = n;
	return 0;
}

static int http_apply_header(struct http_message *m, const char *name, const char *value)
{
	if (!strcasecmp(name, "content-length"))
		return http_set_length(m, value);
	if (!strcasecmp(name, "transfer-encoding")) {
		if (strcasecmp(value, "chunked"))
			return -ENOSYS;
		m->chunked = true;
	} else if (!strcasecmp(name, "connection")) {
		if (strcasestr(value, "close"))
			m->keep_alive = false;
		else if (strcasestr(value, "keep-alive"))
			m->keep_alive = true;
	} else if (!strcasecmp(name, "expect")) {
		m->expect_continue = !strcasecmp(value, "100-continue");
	}
	return 0;
}

static int http_parse_headers(char *p, char *end, struct http_message *m)
{
	char *line;

	while ((line = http_next_line(&p, end))) {
		char *colon, *v, *ve;
		int ret;

		if (!*line)
			return (m->chunked && m->content_length >= 0) ? -EINVAL : 0;
		if (m->n_headers == HTTP_MAX_HEADERS)
			return -E2BIG;
		colon = strchr(line, ':');
		if (!colon || colon == line)
			return -EINVAL;
		*colon = '\0';
		for (char *q = line; *q; q++)
			if (!http_is_tchar((unsigned char)*q))
				return -EINVAL; /* also refuses obs-fold and "Name :" */
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		for (ve = v + strlen(v); ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
			;
		*ve = '\0';
		m->headers[m->n_headers].name = line;
		m->headers[m->n_headers++].value = v;
		ret = http_apply_header(m, line, v);
		if (ret)
			return ret;
	}
	return -EINVAL;
}

static int http_parse_version(const char *v, struct http_message *m)
{
	if (strncmp(v, "HTTP/1.", 7) || (v[7] != '0' && v[7] != '1'))
		return -EINVAL;
	m->minor = v[7] - '0';
	m->keep_alive = m->minor >= 1;
	return 8;
}

int http_parse_request(char *buf, size_t len, struct http_message *m)
{
	size_t head = http_head_end(buf, len);
	char *p = buf, *end = buf + head, *line, *sp1, *sp2;
	int ret;

	if (!head)
		return 0;
	m->content_length = -1;
	while (p < end && (*p == '\r' || *p == '\n'))
		p++;
	line = http_next_line(&p, end);
	if (!line)
		return -EINVAL;
	sp1 = strchr(line, ' ');
	if (!sp1 || sp1 == line || (size_t)(sp1 - line) >= sizeof(m->method))
		return -EINVAL;
	sp2 = strchr(sp1 + 1, ' ');
	if (!sp2 || sp2 == sp1 + 1 || sp1[1] != '/')
		return -EINVAL;
	for (char *q = line; q < sp1; q++)
		if (!isupper((unsigned char)*q))
			return -EINVAL;
	for (char *q = sp1 + 1; q < sp2; q++)
		if (*q <= 0x20 || *q == 0x7f)
			return -EINVAL;
	memcpy(m->method, line, (size_t)(sp1 - line));
	m->method[sp1 - line] = '\0';
	*sp2 = '\0';
	if (http_parse_version(sp2 + 1, m) < 0 || sp2[9])
		return -EINVAL;
	m->path = sp1 + 1;
	m->query = strchr(m->path, '?');
	if (m->query)
		*m->query++ = '\0';
	else
		m->query = sp2; /* "" */
	ret = http_parse_headers(p, end, m);
	return ret ? ret : (int)head;
}

int http_parse_response(char *buf, size_t len, struct http_message *m)
{
	size_t head = http_head_end(buf, len);
	char *p = buf, *end = buf + head, *line;
	int ret, status = 0;

	if (!head)
		return 0;
	m->content_length = -1;
	line = http_next_line(&p, end);
	if (!line || http_parse_version(line, m) < 0 || line[8] != ' ')
		return -EINVAL;
	for (int i = 9; i < 12; i++) {
		if (!isdigit((unsigned char)line[i]))
			return -EINVAL;
		status = status * 10 + line[i] - '0';
	}
	if (line[12] && line[12] != ' ')
		return -EINVAL;
	m->status = status;
	ret = http_parse_headers(p, end, m);
	return ret ? ret : (int)head;
}

enum {
	CH_SIZE,
	CH_SIZE_DIGITS,
	CH_EXT,
	CH_SIZE_LF,
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_TRAILER_START,
	CH_TRAILER_LINE,
	CH_TRAILER_LF,
	CH_END_LF,
	CH_DONE,
};

static int http_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)tolower((unsigned char)c);
	return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* One byte of everything but chunk data: 0 or -EINVAL. */
static int http_chunked_byte(struct http_chunked *st, char c)
{
	int h;

	switch (st->state) {
	case CH_SIZE:
	case CH_SIZE_DIGITS:
		h = http_hex(c);
		if (h >= 0) {
			if (st->remaining >> 56)
				return -EINVAL; /* more than 2^60 */
			st->remaining = st->remaining * 16 + (uint64_t)h;
			st->state = CH_SIZE_DIGITS;
			return 0;
		}
		if (st->state == CH_SIZE)
			return -EINVAL;
		if (c == ';' || c == ' ' || c == '\t') {
			st->state = CH_EXT;
			st->line_len = 0;
			return 0;
		}
		/* fall through: the line ends */
		__attribute__((fallthrough));
	case CH_EXT:
		if (c == '\r') {
			st->state = CH_SIZE_LF;
			return 0;
		}
		if (c == '\n')
			break;
		if (st->state != CH_EXT || ++st->line_len > HTTP_MAX_LINE_EXT)
			return -EINVAL;
		return 0;
	case CH_SIZE_LF:
		if (c != '\n')
			return -EINVAL;
		break;
	case CH_DATA_CR:
		if (c == '\n') {
			st->state = CH_SIZE;
			return 0;
		}
		if (c != '\r')
			return -EINVAL;
		st->state = CH_DATA_LF;
		return 0;
	case CH_DATA_LF:
		if (c != '\n')
			return -EINVAL;
		st->state = CH_SIZE;
		return 0;
	case CH_TRAILER_START:
		st->line_len = 0;
		if (c == '\n')
			st->state = CH_DONE;
		else if (c == '\r')
			st->state = CH_END_LF;
		else
			st->state = CH_TRAILER_LINE;
		return 0;
	case CH_TRAILER_LINE:
		if (c == '\n')
			st->state = CH_TRAILER_START;
		else if (++st->line_len > HTTP_MAX_LINE_EXT)
			return -EINVAL;
		return 0;
	case CH_END_LF:
		if (c != '\n')
			return -EINVAL;
		st->state = CH_DONE;
		return 0;
	default:
		return -EINVAL;
	}
	/* end of a size line */
	st->state = st->remaining ? CH_DATA : CH_TRAILER_START;
	return 0;
}

ssize_t http_chunked_decode(struct http_chunked *st, const char *in, size_t len,
			    unsigned char *out, size_t *out_len, size_t cap, bool *done)
{
	size_t i = 0;

	*done = st->state == CH_DONE;
	while (i < len && st->state != CH_DONE) {
		if (st->state == CH_DATA) {
			size_t n = len - i;

			if (n > st->remaining)
				n = (size_t)st->remaining;
			if (n > cap - *out_len)
				n = cap - *out_len;
			if (!n) /* out is full: report progress first, -EFBIG next time */
				return i ? (ssize_t)i : -EFBIG;
			memcpy(out + *out_len, in + i, n);
			*out_len += n;
			i += n;
			st->remaining -= n;
			if (!st->remaining)
				st->state = CH_DATA_CR;
			continue;
		}
		if (http_chunked_byte(st, in[i++]))
			return -EINVAL;
	}
	*done = st->state == CH_DONE;
	return (ssize_t)i;
}

static void http_compact(struct http_stream *s)
{
	if (!s->consumed)
		return;
	memmove(s->buf, s->buf + s->consumed, s->len - s->consumed);
	s->len -= s->consumed;
	s->consumed = 0;
}

static ssize_t http_fill(struct http_stream *s)
{
	ssize_t n;

	http_compact(s);
	if (s->len == sizeof(s->buf))
		return -EMSGSIZE;
	n = s->read(s->ctx, s->buf + s->len, sizeof(s->buf) - s->len);
	if (n > 0)
		s->len += (size_t)n;
	return n;
}

/*
 * Reads a head into s->buf and parses it in the message's own copy, so the stream's buffer can
 * be reused while the body is read.
 */
static int http_read_head(struct http_stream *s, struct http_message *m,
			  int (*parse)(char *, size_t, struct http_message *))
{
	for (;;) {
		size_t head = http_head_end(s->buf + s->consumed, s->len - s->consumed);
		ssize_t n;

		if (head) {
			int ret;

			memcpy(m->head, s->buf + s->consumed, head);
			s->consumed += head;
			ret = parse(m->head, head, m);
			return ret < 0 ? ret : 0;
		}
		n = http_fill(s);
		if (n == 0)
			return s->len ? -ECONNRESET : -ENODATA;
		if (n < 0)
			return (int)n;
	}
}

static int http_body_alloc(struct http_message *m, size_t size)
{
	unsigned char *p = realloc(m->body, size + 1);

	if (!p)
		return -ENOMEM;
	m->body = p;
	return 0;
}

static int http_read_sized(struct http_stream *s, struct http_message *m)
{
	size_t want = (size_t)m->content_length, have = s->len - s->consumed;

	if (http_body_alloc(m, want))
		return -ENOMEM;
	if (have > want)
		have = want;
	memcpy(m->body, s->buf + s->consumed, have);
	s->consumed += have;
	m->body_len = have;
	while (m->body_len < want) {
		ssize_t n = s->read(s->ctx, m->body + m->body_len, want - m->body_len);

		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return (int)n;
		m->body_len += (size_t)n;
	}
	return 0;
}

/* Grows the body toward max_body: 0, or -EFBIG at the bound. */
static int http_body_grow(struct http_message *m, size_t *cap, size_t max_body)
{
	size_t next = *cap ? *cap * 2 : HTTP_BODY_CHUNK;

	if (*cap >= max_body)
		return -EFBIG;
	if (next > max_body)
		next = max_body;
	if (http_body_alloc(m, next))
		return -ENOMEM;
	*cap = next;
	return 0;
}

static int http_read_chunked(struct http_stream *s, struct http_message *m, size_t max_body)
{
	struct http_chunked st = { 0 };
	size_t cap = 0;
	bool done = false;
	int ret = http_body_grow(m, &cap, max_body);

	while (!ret && !done) {
		ssize_t n;

		if (s->consumed == s->len) {
			n = http_fill(s);
			if (n <= 0)
				return n ? (int)n : -ECONNRESET;
		}
		n = http_chunked_decode(&st, s->buf + s->consumed, s->len - s->consumed, m->body,
					&m->body_len, cap, &done);
		if (n == -EFBIG)
			ret = http_body_grow(m, &cap, max_body);
		else if (n < 0)
			ret = (int)n;
		else
			s->consumed += (size_t)n;
	}
	return ret;
}

static int http_read_to_eof(struct http_stream *s, struct http_message *m, size_t max_body)
{
	size_t cap = 0;
	int ret = http_body_grow(m, &cap, max_body);

	while (!ret) {
		size_t have = s->len - s->consumed;
		ssize_t n;

		if (have) {
			if (have > cap - m->body_len)
				have = cap - m->body_len;
			memcpy(m->body + m->body_len, s->buf + s->consumed, have);
			m->body_len += have;
			s->consumed += have;
		}
		if (m->body_len == cap) {
			ret = http_body_grow(m, &cap, max_body);
			continue;
		}
		if (s->consumed != s->len)
			continue;
		n = s->read(s->ctx, m->body + m->body_len, cap - m->body_len);
		if (n == 0)
			return 0;
		if (n < 0)
			return (int)n;
		m->body_len += (size_t)n;
	}
	return ret;
}

static int http_read_body(struct http_stream *s, struct http_message *m, size_t max_body,
			  bool to_eof)
{
	int ret;

	if (m->content_length > 0 && (uint64_t)m->content_length > max_body)
		return -EFBIG;
	if (m->chunked)
		ret = http_read_chunked(s, m, max_body);
	else if (m->content_length >= 0)
		ret = http_read_sized(s, m);
	else if (to_eof)
		ret = http_read_to_eof(s, m, max_body);
	else
		ret = http_body_alloc(m, 0);
	if (!ret && m->body)
		m->body[m->body_len] = '\0';
	return ret;
}

static size_t http_fixed_limit(void *ctx, const struct http_message *m)
{
	return *(const size_t *)ctx;
}

int http_read_request(struct http_stream *s, struct http_message *m, size_t max_body)
{
	return http_read_request_limit(s, m, http_fixed_limit, &max_body);
}

int http_read_request_head(struct http_stream *s, struct http_message *m)
{
	int ret;

	http_message__reset(m);
	/* An empty line or two between requests is allowed (RFC 9112 2.2). */
	for (int i = 0; i < 4; i++) {
		while (s->consumed < s->len &&
		       (s->buf[s->consumed] == '\r' || s->buf[s->consumed] == '\n'))
			s->consumed++;
		if (s->consumed < s->len)
			break;
		ret = (int)http_fill(s);
		if (ret <= 0)
			return ret ? ret : -ENODATA;
	}
	return http_read_head(s, m, http_parse_request);
}

int http_read_request_body(struct http_stream *s, struct http_message *m, size_t max_body)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	int ret;

	if (m->content_length > 0 && (uint64_t)m->content_length > max_body)
		return -EFBIG;
	if (m->expect_continue && m->minor >= 1 && s->consumed == s->len &&
	    (m->chunked || m->content_length > 0)) {
		ret = s->write(s->ctx, cont, sizeof(cont) - 1);
		if (ret)
			return ret;
	}
	return http_read_body(s, m, max_body, false);
}

int http_read_request_limit(struct http_stream *s, struct http_message *m,
			    http_body_limit_fn limit, void *ctx)
{
	int ret = http_read_request_head(s, m);

	return ret ? ret : http_read_request_body(s, m, limit(ctx, m));
}

int http_read_response(struct http_stream *s, struct http_message *m, size_t max_body)
{
	int ret;

	http_message__reset(m);
	do {
		http_message__reset(m);
		ret = http_read_head(s, m, http_parse_response);
	} while (!ret && m->status >= 100 && m->status < 200); /* 100 Continue and friends */
	if (ret)
		return ret;
	if (m->status == 204 || m->status == 304) {
		m->content_length = 0; /* no body, whatever the head says */
		m->chunked = false;
	}
	return http_read_body(s, m, max_body, true);
}

const char *http_header(const struct http_message *m, const char *name)
{
	for (size_t i = 0; i < m->n_headers; i++)
		if (!strcasecmp(m->headers[i].name, name))
			return m->headers[i].value;
	return NULL;
}

const char *http_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 415: return "Unsupported Media Type";
	case 422: return "Unprocessable Content";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 507: return "Insufficient Storage";
	default: return "Status";
	}
}

/* Sends head and body, in one write when small (one TLS record, one TCP segment). */
/*
 * Head and body in as few writes as they fit: over TLS every write is at least one record, and a
 * head written alone cost every 20 KB upload a third record (tests/bench/fleet-bench.sh: one
 * more send and its wakeup for the client, two more reads and a record's decryption for the
 * collector). A small message goes from the stack; a larger one's head goes with the first
 * bytes of its body, composed in the stream's buffer (HTTP_HEAD_MAX: a TLS record's payload)
 * when no bytes already read wait there for the next message, and the rest of it after.
 */
static int http_send(struct http_stream *s, const char *head, size_t hlen, const void *body,
		     size_t len)
{
	char small[4096];
	int ret;

	if (hlen + len <= sizeof(small)) {
		memcpy(small, head, hlen);
		if (len)
			memcpy(small + hlen, body, len);
		return s->write(s->ctx, small, hlen + len);
	}
	if (s->consumed == s->len && hlen < sizeof(s->buf)) {
		size_t first = sizeof(s->buf) - hlen < len ? sizeof(s->buf) - hlen : len;

		s->len = s->consumed = 0;
		memcpy(s->buf, head, hlen);
		memcpy(s->buf + hlen, body, first);
		ret = s->write(s->ctx, s->buf, hlen + first);
		if (!ret && len > first)
			ret = s->write(s->ctx, (const char *)body + first, len - first);
		return ret;
	}
	ret = s->write(s->ctx, head, hlen);
	if (!ret && len)
		ret = s->write(s->ctx, body, len);
	return ret;
}

int http_write_response(struct http_stream *s, int status, const char *content_type,
			const char *extra, const void *body, size_t len, bool keep_alive)
{
	char head[1024];
	int n;

	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 %d %s\r\n%s%s%sContent-Length: %zu\r\nConnection: %s\r\n%s\r\n",
		     status, http_reason(status), content_type ? "Content-Type: " : "",
		     content_type ? content_type : "", content_type ? "\r\n" : "", len,
		     keep_alive ? "keep-alive" : "close", extra ? extra : "");
	if (n < 0 || (size_t)n >= sizeof(head))
		return -ENAMETOOLONG;
	return http_send(s, head, (size_t)n, body, len);
}

int http_write_request(struct http_stream *s, const char *method, const char *host,
		       const char *target, const char *extra, const void *body, size_t len)
{
	char head[4096], cl[48] = "";
	int n;

	if (len || !strcmp(method, "POST") || !strcmp(method, "PUT"))
		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", len);
	n = snprintf(head, sizeof(head), "%s %s HTTP/1.1\r\nHost: %s\r\n%s%s\r\n", method, target,
		     host, cl, extra ? extra : "");
	if (n < 0 || (size_t)n >= sizeof(head))
		return -ENAMETOOLONG;
	return http_send(s, head, (size_t)n, body, len);
}

int http_url_decode(const char *in, size_t len, char *out, size_t outlen, bool plus_space)
{
	size_t o = 0;

	if (!outlen)
		return -ENAMETOOLONG;
	for (size_t i = 0; i < len; i++) {
		char c = in[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -EINVAL;
			hi = http_hex(in[i + 1]);
			lo = http_hex(in[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			c = (char)(hi * 16 + lo);
			i += 2;
			if (!c)
				return -EINVAL;
		} else if (c == '+' && plus_space) {
			c = ' ';
		}
		if (o + 1 >= outlen) {
			out[o] = '\0';
			return -ENAMETOOLONG;
		}
		out[o++] = c;
	}
	out[o] = '\0';
	return (int)o;
}

int http_url_encode(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *in; in++) {
		unsigned char c = (unsigned char)*in;
		bool plain = isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';

		if (o + (plain ? 1 : 3) >= outlen)
			return -ENAMETOOLONG;
		if (plain) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (o >= outlen)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return (int)o;
}

int http_query_get(const char *query, const char *name, char *out, size_t outlen)
{
	size_t nlen = strlen(name);
	const char *p = query;

	while (p && *p) {
		const char *amp = strchr(p, '&');
		size_t plen = amp ? (size_t)(amp - p) : strlen(p);

		if (plen >= nlen && !strncmp(p, name, nlen) && (plen == nlen || p[nlen] == '='))
			return plen == nlen ? http_url_decode("", 0, out, outlen, true) :
					      http_url_decode(p + nlen + 1, plen - nlen - 1, out,
							      outlen, true);
		p = amp ? amp + 1 : NULL;
	}
	return -ENOENT;
}
