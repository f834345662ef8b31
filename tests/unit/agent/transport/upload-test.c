// SPDX-License-Identifier: MIT
/*
 * agent/transport/upload.c against a scripted mTLS peer on loopback (tests/lib/upload-peer.h): what goes
 * on the wire (target, labels, key, body), keep-alive within a batch, session resumption across
 * batches, result classification, and every refusal (foreign CA, expired device certificate,
 * server certificate for another name) classified as retryable with a clear state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/transport/upload.h"
#include "tests/lib/upload-peer.h"

static char url[64];
static const char body[] = "\x1f\x8b not really gzip, the peer does not care";

static struct uploader *new_uploader(const char *port, const char *ca, const char *dev)
{
	struct upload_opts o = { .url = url, .timeout_ms = 5000 };
	char crt[256], key[256], cacrt[256], err[256] = "";
	struct uploader *u;

	snprintf(url, sizeof(url), "https://localhost:%s", port);
	snprintf(crt, sizeof(crt), "%s/%s.crt", peer_dir, dev);
	snprintf(key, sizeof(key), "%s/%s.key", peer_dir, dev);
	snprintf(cacrt, sizeof(cacrt), "%s/%s.crt", peer_dir, ca);
	o.ca_file = cacrt;
	o.cert_file = crt;
	o.key_file = key;
	u = upload__new(&o, err, sizeof(err));
	if (!u)
		fail_msg("upload__new: %s", err);
	return u;
}

static const struct upload_label labels[] = { { "region", "eu west" }, { "version", "1.4.2" } };

static enum upload_result post(struct uploader *u, const char *key)
{
	struct upload_req r = {
		.service = "gw/router", .type = "cpu", .key = key, .labels = labels,
		.n_labels = 2, .data = body, .len = sizeof(body) - 1,
	};

	return upload__post(u, &r);
}

static void wire_format_keepalive_and_resumption(void **state)
{
	struct peer *p = peer_start("ca", "server");
	struct uploader *u = new_uploader(p->port, "ca", "dev-1");
	struct upload_stats st;

	assert_int_equal(post(u, "dev-1-100-0"), UPLOAD_OK);
	assert_int_equal(post(u, "dev-1-100-1"), UPLOAD_OK);
	assert_int_equal(post(u, "dev-1-100-2"), UPLOAD_OK);
	assert_int_equal(upload__state(u), UPLOAD_STATE_CONNECTED);
	upload__close(u);
	assert_int_equal(post(u, "dev-1-160-0"), UPLOAD_OK);	/* next batch */
	upload__stats(u, &st);
	peer_stop(p);

	assert_int_equal(p->n_reqs, 4);
	assert_string_equal(p->reqs[0].target,
			    "/api/0/profiles?service=gw%2Frouter&type=cpu"
			    "&labels=region%3Deu%20west%2Cversion%3D1.4.2");
	assert_string_equal(p->reqs[0].key, "dev-1-100-0");
	assert_string_equal(p->reqs[2].key, "dev-1-100-2");
	assert_string_equal(p->reqs[0].cn, "dev-1");
	assert_int_equal(p->reqs[0].body_len, sizeof(body) - 1);
	/* one connection for the batch, a resumed one for the next */
	assert_int_equal(p->reqs[0].conn, p->reqs[2].conn);
	assert_int_not_equal(p->reqs[3].conn, p->reqs[0].conn);
	assert_false(p->reqs[0].resumed);
	assert_true(p->reqs[3].resumed);
	assert_int_equal(st.connects, 2);
	assert_int_equal(st.handshakes, 2);
	assert_int_equal(st.resumed, 1);
	assert_int_equal(st.reused, 2);
	assert_int_equal(st.ok, 4);
	upload__free(u);
	peer_free(p);
}

static void statuses_are_classified(void **state)
{
	static const int script[] = { 503, 429, 408, 400, 413, 201 };
	struct peer *p = peer_start("ca", "server");
	struct uploader *u = new_uploader(p->port, "ca", "dev-1");
	struct upload_stats st;

	peer_script(p, script, 6);
	p->retry_after = 7;	/* the collector's queue is full: come back in 7 s */
	assert_int_equal(post(u, "k1"), UPLOAD_RETRY);
	assert_int_equal(upload__state(u), UPLOAD_STATE_UNREACHABLE);
	assert_non_null(strstr(upload__error(u), "503"));
	assert_int_equal(upload__retry_after(u), 7);
	assert_int_equal(post(u, "k1"), UPLOAD_RETRY);
	assert_int_equal(upload__retry_after(u), 0);	/* the 429 had none */
	assert_int_equal(post(u, "k1"), UPLOAD_RETRY);
	assert_int_equal(post(u, "k1"), UPLOAD_PERMANENT);
	assert_int_equal(upload__state(u), UPLOAD_STATE_CONNECTED);
	assert_int_equal(post(u, "k2"), UPLOAD_PERMANENT);
	assert_int_equal(post(u, "k3"), UPLOAD_OK);
	upload__stats(u, &st);
	assert_int_equal(st.retry, 3);
	assert_int_equal(st.permanent, 2);
	assert_int_equal(st.ok, 1);
	assert_int_equal(st.last_status, 201);
	upload__free(u);
	peer_stop(p);
	peer_free(p);
}

static void peer_closing_each_connection_is_fine(void **state)
{
	struct peer *p = peer_start("ca", "server");
	struct uploader *u = new_uploader(p->port, "ca", "dev-1");
	struct upload_stats st;

	p->close_after_each = true;
	for (int i = 0; i < 5; i++)
		assert_int_equal(post(u, "k"), UPLOAD_OK);
	upload__stats(u, &st);
	assert_int_equal(st.connects, 5);
	assert_int_equal(st.resumed, 4);
	upload__free(u);
	peer_stop(p);
	assert_int_equal(p->n_reqs, 5);
	peer_free(p);
}

static void unreachable_is_retryable(void **state)
{
	char port[16];
	struct uploader *u;

	peer_dead_port(port, sizeof(port));
	u = new_uploader(port, "ca", "dev-1");
	assert_int_equal(post(u, "k"), UPLOAD_RETRY);
	assert_int_equal(upload__state(u), UPLOAD_STATE_UNREACHABLE);
	assert_int_equal(post(u, "k"), UPLOAD_RETRY);
	upload__free(u);
}

/* A collector that accepts the connection and then says nothing costs one timeout, no more. */
static void silent_collector_times_out(void **state)
{
	char err[128], port[16];
	int lfd = net_listen("127.0.0.1:0", 4, err, sizeof(err));	/* never accepted */
	struct upload_opts o = { .url = url, .ca_file = peer_path("ca.crt"),
				 .cert_file = peer_path("dev-1.crt"),
				 .key_file = peer_path("dev-1.key"), .timeout_ms = 300 };
	struct uploader *u;
	uint64_t t0;

	assert_true(lfd >= 0);
	snprintf(port, sizeof(port), "%d", net_local_port(lfd));
	snprintf(url, sizeof(url), "https://127.0.0.1:%s", port);
	u = upload__new(&o, err, sizeof(err));
	assert_non_null(u);
	t0 = port_clock_mono_ns();
	assert_int_equal(post(u, "k"), UPLOAD_RETRY);
	assert_true(port_clock_mono_ns() - t0 < 5 * NSEC_PER_SEC);
	assert_true(port_clock_mono_ns() - t0 >= 250 * NSEC_PER_MSEC);
	assert_non_null(strstr(upload__error(u), "timed out"));
	assert_int_equal(upload__state(u), UPLOAD_STATE_UNREACHABLE);
	upload__free(u);
	close(lfd);
}

static void refused(const char *ca, const char *server, const char *dev, const char *why)
{
	struct peer *p = peer_start("ca", server);
	struct uploader *u = new_uploader(p->port, ca, dev);

	assert_int_equal(post(u, "k"), UPLOAD_RETRY);
	fprintf(stderr, "refused as expected: %s\n", upload__error(u));
	assert_int_equal(upload__state(u), UPLOAD_STATE_CERT_REFUSED);
	if (why)
		assert_non_null(strstr(upload__error(u), why));
	upload__free(u);
	peer_stop(p);
	assert_int_equal(p->n_reqs, 0);
	peer_free(p);
}

static void foreign_ca_refused(void **state)
{
	refused("otherca", "server", "dev-1", "certificate refused");
}

static void server_for_another_name_refused(void **state)
{
	refused("ca", "wrongname", "dev-1", "certificate refused");
}

static void expired_device_cert_refused(void **state)
{
	refused("ca", "server", "expired", "device certificate");
}

static void bad_urls_and_labels(void **state)
{
	static const char *const bad[] = { "http://x:1", "https://", "https://x:1/api", "x:1" };
	struct upload_opts o = { .ca_file = peer_path("ca.crt"),
				 .cert_file = peer_path("dev-1.crt"),
				 .key_file = peer_path("dev-1.key") };
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.url = bad[i];
		assert_null(upload__new(&o, err, sizeof(err)));
		assert_non_null(strstr(err, "bad collector URL"));
	}
	o.url = "https://[::1]:8443/";
	upload__free(upload__new(&o, err, sizeof(err)));
	assert_int_equal(upload_label__check("region", "eu"), 0);
	assert_int_equal(upload_label__check("re gion", "eu"), -EINVAL);
	assert_int_equal(upload_label__check("a", "x,y"), -EINVAL);
	assert_int_equal(upload_label__check("a", "x=y"), -EINVAL);
	assert_int_equal(upload_label__check("", "x"), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(wire_format_keepalive_and_resumption),
		cmocka_unit_test(statuses_are_classified),
		cmocka_unit_test(peer_closing_each_connection_is_fine),
		cmocka_unit_test(unreachable_is_retryable),
		cmocka_unit_test(silent_collector_times_out),
		cmocka_unit_test(foreign_ca_refused),
		cmocka_unit_test(server_for_another_name_refused),
		cmocka_unit_test(expired_device_cert_refused),
		cmocka_unit_test(bad_urls_and_labels),
	};

	return cmocka_run_group_tests(tests, peer_make_certs, peer_remove_certs);
}
