// SPDX-License-Identifier: MIT
/*
 * The HTTP/1.1 parser and stream reader, driven from memory with reads of every size (1 byte at a
 * time catches state carried across reads), plus the writers and URL helpers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "port/http.h"

struct mem_io {
	const char *data;
	size_t len, pos, step;
	char out[4096];
	size_t out_len;
};

static ssize_t mem_read(void *ctx, void *buf, size_t len)
{
	struct mem_io *io = ctx;
	size_t n = io->len - io->pos;

	if (n > len)
		n = len;
	if (n > io->step)
		n = io->step;
	memcpy(buf, io->data + io->pos, n);
	io->pos += n;
	return (ssize_t)n;
}

static int mem_write(void *ctx, const void *buf, size_t len)
{
	struct mem_io *io = ctx;

	if (io->out_len + len > sizeof(io->out))
		return -ENOSPC;
	memcpy(io->out + io->out_len, buf, len);
	io->out_len += len;
	return 0;
}

static struct http_stream *stream(struct mem_io *io, const char *data, size_t step)
{
	struct http_stream *s = malloc(sizeof(*s));

	memset(io, 0, sizeof(*io));
	io->data = data;
	io->len = strlen(data);
	io->step = step;
	http_stream__init(s, mem_read, mem_write, io);
	return s;
}

static const size_t steps[] = { 1, 2, 3, 7, 64, 100000 };

static void get_with_query_and_headers(void **state)
{
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct mem_io io;
		struct http_stream *s = stream(&io,
			"GET /api/0/profiles?service=a%20b&labels=k%3Dv,x=y HTTP/1.1\r\n"
			"Host: x\r\nX-Thing:   spaced value  \r\n\r\n", steps[i]);
		struct http_message *m = calloc(1, sizeof(*m));
		char v[64];

		assert_int_equal(http_read_request(s, m, 1024), 0);
		assert_string_equal(m->method, "GET");
		assert_string_equal(m->path, "/api/0/profiles");
		assert_string_equal(m->query, "service=a%20b&labels=k%3Dv,x=y");
		assert_true(m->keep_alive);
		assert_int_equal(m->minor, 1);
		assert_string_equal(http_header(m, "x-thing"), "spaced value");
		assert_null(http_header(m, "missing"));
		assert_int_equal(http_query_get(m->query, "service", v, sizeof(v)), 3);
		assert_string_equal(v, "a b");
		assert_int_equal(http_query_get(m->query, "labels", v, sizeof(v)), 7);
		assert_string_equal(v, "k=v,x=y");
		assert_int_equal(http_query_get(m->query, "serv", v, sizeof(v)), -ENOENT);
		assert_int_equal(m->body_len, 0);
		assert_int_equal(http_read_request(s, m, 1024), -ENODATA);
		http_message__reset(m);
		free(m);
		free(s);
	}
}

static int read_one(const char *text, size_t step, size_t max_body, struct http_message *m)
{
	struct mem_io io;
	struct http_stream *s = stream(&io, text, step);
	int ret = http_read_request(s, m, max_body);

	free(s);
	return ret;
}

static void malformed_requests_refused(void **state)
{
	static const struct {
		const char *text;
		int want;
	} cases[] = {
		{ "GET / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
		  -EINVAL },
		{ "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
		  -EINVAL },
		{ "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", -EINVAL },
		{ "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", -EINVAL },
		{ "GET / HTTP/2.0\r\n\r\n", -EINVAL },
		{ "get / HTTP/1.1\r\n\r\n", -EINVAL },
		{ "GET http://x/ HTTP/1.1\r\n\r\n", -EINVAL },
		{ "GET /  HTTP/1.1\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", -ENOSYS },
		{ "GET / HTTP/1.1\r\nHost: a", -ECONNRESET },
		{ "", -ENODATA },
		{ "POST / HTTP/1.1\r\nContent-Length: 2000\r\n\r\n", -EFBIG },
		{ "POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort", -ECONNRESET },
		{ "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", -EINVAL },
		{ "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcdeX", -EINVAL },
		{ "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		  "fffffffffffffffffff\r\n", -EINVAL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (size_t j = 0; j < sizeof(steps) / sizeof(steps[0]); j++) {
			struct http_message *m = calloc(1, sizeof(*m));
			int ret = read_one(cases[i].text, steps[j], 1024, m);

			if (ret != cases[i].want)
				fail_msg("case %zu step %zu: %d, want %d", i, steps[j], ret,
					 cases[i].want);
			http_message__reset(m);
			free(m);
		}
	}
}

static void head_and_header_count_bounded(void **state)
{
	struct http_message *m = calloc(1, sizeof(*m));
	char *big = malloc(HTTP_HEAD_MAX * 2);
	size_t n = 0;

	n += (size_t)sprintf(big, "GET / HTTP/1.1\r\n");
	while (n < HTTP_HEAD_MAX + 100)
		n += (size_t)sprintf(big + n, "X-Pad: %0100d\r\n", 0);
	strcpy(big + n, "\r\n");
	assert_int_equal(read_one(big, 4096, 1024, m), -EMSGSIZE);

	n = (size_t)sprintf(big, "GET / HTTP/1.1\r\n");
	for (int i = 0; i <= HTTP_MAX_HEADERS; i++)
		n += (size_t)sprintf(big + n, "X-%d: v\r\n", i);
	strcpy(big + n, "\r\n");
	assert_int_equal(read_one(big, 4096, 1024, m), -E2BIG);
	http_message__reset(m);
	free(m);
	free(big);
}

static void chunked_body_with_extensions_and_trailers(void **state)
{
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct mem_io io;
		struct http_stream *s = stream(&io,
			"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
			"5;name=val\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n"
			"0\r\nTrailer: t\r\n\r\n"
			"\r\nGET /next HTTP/1.0\r\n\r\n", steps[i]);
		struct http_message *m = calloc(1, sizeof(*m));

		assert_int_equal(http_read_request(s, m, 1024), 0);
		assert_int_equal(m->body_len, 16);
		assert_memory_equal(m->body, "hello 0123456789", 16);
		/* the pipelined request after it is intact */
		assert_int_equal(http_read_request(s, m, 1024), 0);
		assert_string_equal(m->path, "/next");
		assert_false(m->keep_alive);
		http_message__reset(m);
		free(m);
		free(s);
	}
}

static void chunked_body_bounded(void **state)
{
	struct http_message *m = calloc(1, sizeof(*m));
	static char text[300000];
	size_t n = (size_t)sprintf(text, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");

	for (int i = 0; i < 200; i++) {
		n += (size_t)sprintf(text + n, "400\r\n");
		memset(text + n, 'a', 0x400);
		n += 0x400;
		n += (size_t)sprintf(text + n, "\r\n");
	}
	strcpy(text + n, "0\r\n\r\n");
	assert_int_equal(read_one(text, 5000, 100 * 1024, m), -EFBIG);
	assert_int_equal(read_one(text, 5000, 300 * 1024, m), 0);
	assert_int_equal(m->body_len, 200 * 1024);
	http_message__reset(m);
	free(m);
}

static void sized_body_pipelined_and_expect_continue(void **state)
{
	struct mem_io io;
	struct http_stream *s = stream(&io,
		"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPOST /b HTTP/1.1\r\n"
		"Expect: 100-continue\r\nContent-Length: 4\r\nConnection: close\r\n\r\n", 100000);
	struct http_message *m = calloc(1, sizeof(*m));

	assert_int_equal(http_read_request(s, m, 1024), 0);
	assert_string_equal(m->path, "/a");
	assert_string_equal((char *)m->body, "abc");
	/* the body of /b is not there yet: the reader says 100 Continue, then hits the end */
	assert_int_equal(http_read_request(s, m, 1024), -ECONNRESET);
	assert_int_equal(io.out_len, 25);
	assert_memory_equal(io.out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
	http_message__reset(m);
	free(m);
	free(s);
}

static void responses_read_by_length_chunks_or_eof(void **state)
{
	static const char *texts[] = {
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nhello",
	};

	for (size_t i = 0; i < 3; i++) {
		for (size_t j = 0; j < sizeof(steps) / sizeof(steps[0]); j++) {
			struct mem_io io;
			struct http_stream *s = stream(&io, texts[i], steps[j]);
			struct http_message *m = calloc(1, sizeof(*m));

			assert_int_equal(http_read_response(s, m, 1024), 0);
			assert_int_equal(m->status, 200);
			assert_int_equal(m->body_len, 5);
			assert_string_equal((char *)m->body, "hello");
			http_message__reset(m);
			free(m);
			free(s);
		}
	}
}

static void writers_frame_messages(void **state)
{
	struct mem_io io;
	struct http_stream *s = stream(&io, "", 1);
	struct http_message *m = calloc(1, sizeof(*m));
	struct mem_io io2;
	struct http_stream *s2;

	assert_int_equal(http_write_response(s, 404, "application/json", "X-A: b\r\n",
					     "{}", 2, false), 0);
	io.out[io.out_len] = '\0';
	assert_string_equal(io.out, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
				    "Content-Length: 2\r\nConnection: close\r\nX-A: b\r\n\r\n{}");
	s2 = stream(&io2, io.out, 3);
	assert_int_equal(http_read_response(s2, m, 1024), 0);
	assert_int_equal(m->status, 404);
	assert_false(m->keep_alive);
	assert_string_equal(http_header(m, "X-A"), "b");

	io.out_len = 0;
	assert_int_equal(http_write_request(s, "POST", "h:1", "/p?q=1", NULL, "xyz", 3), 0);
	io.out[io.out_len] = '\0';
	free(s2);
	s2 = stream(&io2, io.out, 2);
	assert_int_equal(http_read_request(s2, m, 1024), 0);
	assert_string_equal(m->method, "POST");
	assert_string_equal(http_header(m, "host"), "h:1");
	assert_string_equal((char *)m->body, "xyz");
	http_message__reset(m);
	free(m);
	free(s);
	free(s2);
}

/* A writer that keeps every write's size, for the records a TLS stream would make of them. */
struct rec_io {
	struct mem_io in;
	char out[65536];
	size_t out_len, n_writes, sizes[8];
};

static int rec_write(void *ctx, const void *buf, size_t len)
{
	struct rec_io *io = ctx;

	if (io->out_len + len > sizeof(io->out) || io->n_writes == 8)
		return -ENOSPC;
	memcpy(io->out + io->out_len, buf, len);
	io->out_len += len;
	io->sizes[io->n_writes++] = len;
	return 0;
}

/*
 * A message larger than 4 KiB: its head goes with the body's first bytes, one write of at most
 * HTTP_HEAD_MAX (a TLS record) then the rest, unless bytes read ahead wait in the stream's buffer
 * (a pipelined request): then head and body apart, those bytes kept for the next read.
 */
static void large_messages_head_with_body(void **state)
{
	static const size_t sizes[] = { 10000, 20000, 40000 };
	static char body[40000];
	struct http_message *m = calloc(1, sizeof(*m));
	struct rec_io *io = calloc(1, sizeof(*io));
	struct http_stream *s = malloc(sizeof(*s)), *s2 = malloc(sizeof(*s2));
	static const char pipelined[] = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
					"GET /b HTTP/1.1\r\nHost: h\r\n\r\n";
	struct mem_io in;

	(void)state;
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (char)('a' + i % 26);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		memset(io, 0, sizeof(*io));
		http_stream__init(s, mem_read, rec_write, io);
		assert_int_equal(http_write_request(s, "POST", "h:1", "/p", NULL, body, sizes[k]),
				 0);
		assert_int_equal(io->n_writes, sizes[k] < HTTP_HEAD_MAX ? 1 : 2);
		assert_true(io->sizes[0] <= HTTP_HEAD_MAX);
		if (io->n_writes == 2)
			assert_int_equal(io->sizes[0], HTTP_HEAD_MAX);
		memset(&in, 0, sizeof(in));
		in.data = io->out, in.len = io->out_len, in.step = 1000;
		http_stream__init(s2, mem_read, mem_write, &in);
		assert_int_equal(http_read_request(s2, m, sizeof(body)), 0);
		assert_int_equal(m->body_len, sizes[k]);
		assert_memory_equal(m->body, body, sizes[k]);
		http_message__reset(m);
	}
	/* a server that read two pipelined requests at once answers the first with 20 KB */
	memset(io, 0, sizeof(*io));
	io->in.data = pipelined, io->in.len = strlen(pipelined), io->in.step = 1000;
	http_stream__init(s, mem_read, rec_write, &io->in);
	s->ctx = io;	/* rec_write's; reads go through io->in (its first member) */
	assert_int_equal(http_read_request(s, m, 1024), 0);
	assert_string_equal(m->path, "/a");
	http_message__reset(m);
	assert_int_equal(http_write_response(s, 200, NULL, NULL, body, 20000, true), 0);
	assert_int_equal(io->n_writes, 2);
	assert_int_equal(io->sizes[1], 20000);
	assert_int_equal(http_read_request(s, m, 1024), 0);
	assert_string_equal(m->path, "/b");
	http_message__reset(m);
	free(m);
	free(io);
	free(s);
	free(s2);
}

static void url_helpers(void **state)
{
	char out[16];

	assert_int_equal(http_url_decode("a%7Bb%3D1%7D+c", 14, out, sizeof(out), true), 8);
	assert_string_equal(out, "a{b=1} c");
	assert_int_equal(http_url_decode("a+b", 3, out, sizeof(out), false), 3);
	assert_string_equal(out, "a+b");
	assert_int_equal(http_url_decode("%4", 2, out, sizeof(out), true), -EINVAL);
	assert_int_equal(http_url_decode("%zz", 3, out, sizeof(out), true), -EINVAL);
	assert_int_equal(http_url_decode("%00", 3, out, sizeof(out), true), -EINVAL);
	assert_int_equal(http_url_decode("0123456789abcdefg", 17, out, sizeof(out), true),
			 -ENAMETOOLONG);
	assert_int_equal(http_url_encode("a{b=1}", out, sizeof(out)), 12);
	assert_string_equal(out, "a%7Bb%3D1%7D");
	assert_int_equal(http_url_encode("{{{{{{", out, sizeof(out)), -ENAMETOOLONG);
	assert_int_equal(http_query_get("a&b=&c=3", "a", out, sizeof(out)), 0);
	assert_int_equal(http_query_get("a&b=&c=3", "b", out, sizeof(out)), 0);
	assert_int_equal(http_query_get("a&b=&c=3", "c", out, sizeof(out)), 1);
	assert_string_equal(out, "3");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(get_with_query_and_headers),
		cmocka_unit_test(malformed_requests_refused),
		cmocka_unit_test(head_and_header_count_bounded),
		cmocka_unit_test(chunked_body_with_extensions_and_trailers),
		cmocka_unit_test(chunked_body_bounded),
		cmocka_unit_test(sized_body_pipelined_and_expect_continue),
		cmocka_unit_test(responses_read_by_length_chunks_or_eof),
		cmocka_unit_test(writers_frame_messages),
		cmocka_unit_test(large_messages_head_with_body),
		cmocka_unit_test(url_helpers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
