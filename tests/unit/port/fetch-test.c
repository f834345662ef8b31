// SPDX-License-Identifier: MIT
/* port/fetch.c: URLs, a plain-HTTP peer's answers (200, 404, too large), a refused connect. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "port/clock.h"
#include "port/fetch.h"
#include "port/net.h"

static int lfd;
static char seen[3][256]; /* the targets the peer was asked for */

static ssize_t rd(void *ctx, void *buf, size_t len)
{
	return net_read(*(int *)ctx, buf, len, port_clock_mono_ns() + 5 * NSEC_PER_SEC);
}

static int wr(void *ctx, const void *buf, size_t len)
{
	return net_write(*(int *)ctx, buf, len, port_clock_mono_ns() + 5 * NSEC_PER_SEC);
}

/* Answers three connections: 200 "hello", 404, then 2000 bytes. */
static void *peer(void *arg)
{
	static struct http_stream s;
	static struct http_message m;
	static char big[2000];

	for (int i = 0; i < 3; i++) {
		int fd;

		while ((fd = net_accept(lfd, NULL, 0)) == -EAGAIN)
			net_wait(lfd, POLLIN, 0);
		http_stream__init(&s, rd, wr, &fd);
		if (!http_read_request_head(&s, &m)) {
			snprintf(seen[i], sizeof(seen[i]), "%s%s%s", m.path, m.query[0] ? "?" : "",
				 m.query);
			if (i == 0)
				http_write_response(&s, 200, "text/plain", NULL, "hello", 5, false);
			else if (i == 1)
				http_write_response(&s, 404, "text/plain", NULL, "no such", 7, false);
			else
				http_write_response(&s, 200, NULL, NULL, big, sizeof(big), false);
		}
		http_message__reset(&m);
		close(fd);
	}
	return NULL;
}

static void test_split(void **state)
{
	char host[64], port[16], path[64];
	bool https;

	assert_int_equal(fetch_split_url("http://127.0.0.1:6060", &https, host, sizeof(host), port,
					 sizeof(port), path, sizeof(path)), 0);
	assert_false(https);
	assert_string_equal(host, "127.0.0.1");
	assert_string_equal(port, "6060");
	assert_string_equal(path, "/");
	assert_int_equal(fetch_split_url("https://[::1]:8443/debug/pprof/heap?gc=1", &https, host,
					 sizeof(host), port, sizeof(port), path, sizeof(path)), 0);
	assert_true(https);
	assert_string_equal(host, "::1");
	assert_string_equal(path, "/debug/pprof/heap?gc=1");
	assert_int_equal(fetch_split_url("ftp://a:1/", &https, host, sizeof(host), port,
					 sizeof(port), path, sizeof(path)), -EINVAL);
	assert_int_equal(fetch_split_url("http:///x", &https, host, sizeof(host), port,
					 sizeof(port), path, sizeof(path)), -EINVAL);
}

static void test_peer(void **state)
{
	struct http_message *m = calloc(1, sizeof(*m));
	uint64_t dl = port_clock_mono_ns() + 10 * NSEC_PER_SEC;
	char err[300], url[128];
	pthread_t th;

	lfd = net_listen("127.0.0.1:0", 4, err, sizeof(err));
	assert_true(lfd >= 0);
	pthread_create(&th, NULL, peer, NULL);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/debug/pprof/profile?seconds=2",
		 net_local_port(lfd));
	assert_int_equal(fetch_get(url, NULL, dl, 100, m, err, sizeof(err)), FETCH_OK);
	assert_int_equal(m->body_len, 5);
	assert_memory_equal(m->body, "hello", 5);
	assert_string_equal(seen[0], "/debug/pprof/profile?seconds=2");
	http_message__reset(m);
	assert_int_equal(fetch_get(url, NULL, dl, 100, m, err, sizeof(err)), FETCH_STATUS);
	assert_int_equal(m->status, 404);
	assert_non_null(strstr(err, "answered 404: no such"));
	http_message__reset(m);
	assert_int_equal(fetch_get(url, NULL, dl, 1000, m, err, sizeof(err)), FETCH_TOO_BIG);
	http_message__reset(m);
	pthread_join(th, NULL);
	close(lfd);

	assert_int_equal(fetch_get("http://127.0.0.1:1/", NULL, dl, 100, m, err, sizeof(err)),
			 FETCH_CONNECT);
	assert_int_equal(fetch_get("https://127.0.0.1:1/", NULL, dl, 100, m, err, sizeof(err)),
			 FETCH_BAD_URL);
	assert_non_null(strstr(err, "TLS"));
	free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_peer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
