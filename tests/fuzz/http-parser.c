// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for port/http.c: the input is a byte stream a client might send, delivered in
 * reads whose size comes from the first byte (so state carried across reads is exercised).
 * Requests are read until the stream ends or errs; every accepted request must respect the bounds
 * (body <= max_body, at most HTTP_MAX_HEADERS headers, path starting with '/'), and its query goes
 * through the URL decoder. The same bytes also go through the response reader.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "port/http.h"

#define FUZZ_MAX_BODY 4096

struct mem {
	const uint8_t *data;
	size_t len, pos, step;
};

static ssize_t mem_read(void *ctx, void *buf, size_t len)
{
	struct mem *m = ctx;
	size_t n = m->len - m->pos;

	if (n > len)
		n = len;
	if (n > m->step)
		n = m->step;
	memcpy(buf, m->data + m->pos, n);
	m->pos += n;
	return (ssize_t)n;
}

static int mem_write(void *ctx, const void *buf, size_t len)
{
	return 0;
}

static void check(int cond)
{
	if (!cond)
		abort();
}

static void run(const uint8_t *data, size_t size, size_t step, bool response)
{
	static struct http_stream s;
	static struct http_message msg;
	struct mem m = { .data = data, .len = size, .step = step };
	char out[256];

	http_stream__init(&s, mem_read, mem_write, &m);
	for (int i = 0; i < 64; i++) {
		int ret = response ? http_read_response(&s, &msg, FUZZ_MAX_BODY)
				   : http_read_request(&s, &msg, FUZZ_MAX_BODY);

		if (ret)
			break;
		check(msg.body_len <= FUZZ_MAX_BODY);
		check(msg.n_headers <= HTTP_MAX_HEADERS);
		check(!msg.body || msg.body[msg.body_len] == '\0');
		if (!response) {
			check(msg.path[0] == '/');
			http_query_get(msg.query, "name", out, sizeof(out));
			http_url_decode(msg.path, strlen(msg.path), out, sizeof(out), false);
		} else {
			check(msg.status >= 0 && msg.status <= 999);
		}
		for (size_t h = 0; h < msg.n_headers; h++)
			check(msg.headers[h].name[0] != '\0');
	}
	http_message__reset(&msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t step;

	if (!size)
		return 0;
	step = (size_t)(data[0] % 17) + 1;
	if (data[0] >= 0xf0)
		step = HTTP_HEAD_MAX;
	run(data + 1, size - 1, step, false);
	run(data + 1, size - 1, step, true);
	return 0;
}
