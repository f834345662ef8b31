/* SPDX-License-Identifier: MIT */
/*
 * port/http.h — HTTP/1.1 framing of our own: a bounded request/response parser, chunked
 * transfer decoding, and writers for both sides. The transport is a pair of callbacks (plain
 * socket or TLS), so the same code serves the collector, the agent's uploader and the CLI, and a
 * fuzzer drives it from memory.
 *
 * Bounds: the head (request/status line + headers) fits in HTTP_HEAD_MAX bytes and at most
 * HTTP_MAX_HEADERS headers; bodies are read whole into memory up to the caller's max_body.
 */
#ifndef EDGEPROF_PORT_HTTP_H
#define EDGEPROF_PORT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HTTP_HEAD_MAX	 16384
#define HTTP_MAX_HEADERS 48

/* > 0 bytes, 0 at end of stream, -errno (-ETIMEDOUT) */
typedef ssize_t (*http_read_fn)(void *ctx, void *buf, size_t len);
/* everything written: 0 or -errno */
typedef int (*http_write_fn)(void *ctx, const void *buf, size_t len);

struct http_header {
	const char *name; /* NUL-terminated, inside the stream's buffer */
	const char *value;
};

struct http_message {
	/* request */
	char method[16];
	char *path;   /* the target without the query (not decoded) */
	char *query;  /* after '?', "" when none */
	/* response */
	int status;
	/* both */
	int minor; /* HTTP/1.<minor> */
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t n_headers;
	int64_t content_length; /* -1 when absent */
	bool chunked;
	bool keep_alive;
	bool expect_continue;
	/* body, read whole (malloc'd, NUL-terminated, freed by http_message__reset) */
	unsigned char *body;
	size_t body_len;
	char head[HTTP_HEAD_MAX]; /* the parsed head: the pointers above point here */
};

struct http_stream {
	http_read_fn read;
	http_write_fn write;
	void *ctx;
	size_t len;	 /* bytes in buf */
	size_t consumed; /* bytes of buf that belong to the current message */
	char buf[HTTP_HEAD_MAX];
};

void http_stream__init(struct http_stream *s, http_read_fn rd, http_write_fn wr, void *ctx);
void http_message__reset(struct http_message *m); /* frees the body */

/*
 * Parsers of a head held in buf[0..len). They NUL-terminate fields in place. Return the head's
 * length when complete, 0 when more bytes are needed, -EINVAL when malformed, -E2BIG for too many
 * headers, -ENOSYS for a transfer-encoding other than chunked.
 */
int http_parse_request(char *buf, size_t len, struct http_message *m);
int http_parse_response(char *buf, size_t len, struct http_message *m);

/* Incremental chunked-body decoder. */
struct http_chunked {
	int state;
	uint64_t remaining;
	size_t line_len;
};
/*
 * Decodes in[0..len), appending data to out (capacity cap, *out_len updated). Returns the bytes
 * consumed (stops after the final chunk's trailer and sets *done), -EINVAL when malformed,
 * -EFBIG when the data would exceed cap.
 */
ssize_t http_chunked_decode(struct http_chunked *st, const char *in, size_t len,
			    unsigned char *out, size_t *out_len, size_t cap, bool *done);

/*
 * Reads the next request (head and whole body, at most max_body bytes). Returns 0 or:
 * -ENODATA the peer closed before a new request; -EMSGSIZE head too large (431); -EINVAL
 * malformed (400); -EFBIG body too large (413, m->content_length says how large when known);
 * -ENOSYS unsupported transfer coding (501); -ETIMEDOUT (408); other -errno from the transport.
 * Answers "Expect: 100-continue" itself when the body will be accepted.
 */
int http_read_request(struct http_stream *s, struct http_message *m, size_t max_body);
/* The same with the body bound chosen once the head is read (by method and path, say). */
typedef size_t (*http_body_limit_fn)(void *ctx, const struct http_message *m);
int http_read_request_limit(struct http_stream *s, struct http_message *m,
			    http_body_limit_fn limit, void *ctx);
/*
 * The two halves of it, for a server that decides on the head alone (authentication, the body
 * bound) before it reads or acknowledges any body: the head (errors as above), then the body,
 * with "100 Continue" sent only here.
 */
int http_read_request_head(struct http_stream *s, struct http_message *m);
int http_read_request_body(struct http_stream *s, struct http_message *m, size_t max_body);
/* The same for a response; a body with neither length nor chunking runs to end of stream. */
int http_read_response(struct http_stream *s, struct http_message *m, size_t max_body);

/* Case-insensitive header lookup: the value or NULL. */
const char *http_header(const struct http_message *m, const char *name);

/*
 * Writes a response: status line, Content-Type (NULL = none), Content-Length, Connection,
 * extra (already "\r\n"-terminated header lines, or NULL), then the body. 0 or -errno.
 */
int http_write_response(struct http_stream *s, int status, const char *content_type,
			const char *extra, const void *body, size_t len, bool keep_alive);
/* Writes a request with Host, Content-Length (when body or a method that carries one), extra. */
int http_write_request(struct http_stream *s, const char *method, const char *host,
		       const char *target, const char *extra, const void *body, size_t len);

const char *http_reason(int status);

/*
 * Percent-decoding. plus_space turns '+' into ' ' (query strings). Returns the decoded length
 * or -EINVAL (bad escape, embedded NUL), -ENAMETOOLONG (out too small; out is NUL-terminated).
 */
int http_url_decode(const char *in, size_t len, char *out, size_t outlen, bool plus_space);
/* Percent-encodes everything but unreserved characters. Returns length or -ENAMETOOLONG. */
int http_url_encode(const char *in, char *out, size_t outlen);
/* The decoded value of query parameter name: its length, -ENOENT, or as http_url_decode. */
int http_query_get(const char *query, const char *name, char *out, size_t outlen);

#endif /* EDGEPROF_PORT_HTTP_H */
