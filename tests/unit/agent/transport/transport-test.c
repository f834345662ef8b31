// SPDX-License-Identifier: MIT
/*
 * agent/transport/transport.c with a real spool (ring file in a temporary directory) and the scripted
 * mTLS peer of upload-peer.h on loopback: direct upload when the link is up; offline, then up:
 * everything arrives once, in order; a new profile never overtakes spooled ones; backoff is
 * honoured; a 4xx is dropped and counted; spool overflow is reported in the next upload's
 * labels; clock-less items carry clock=unset; without a spool a failure is a counted drop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/transport/transport.h"
#include "tests/lib/upload-peer.h"

static char url[64], spool_path[128], cacrt[128], devcrt[128], devkey[128];

static int setup(void **state)
{
	if (peer_make_certs(state))
		return -1;
	snprintf(cacrt, sizeof(cacrt), "%s/ca.crt", peer_dir);
	snprintf(devcrt, sizeof(devcrt), "%s/dev-1.crt", peer_dir);
	snprintf(devkey, sizeof(devkey), "%s/dev-1.key", peer_dir);
	snprintf(spool_path, sizeof(spool_path), "%s/spool", peer_dir);
	return 0;
}

static int fresh(void **state)
{
	unlink(spool_path);
	return 0;
}

static struct transport *new_transport(const char *port, bool spool, uint64_t spool_size)
{
	struct transport_opts o = {
		.upload = { .url = url, .ca_file = cacrt, .cert_file = devcrt, .key_file = devkey,
			    .timeout_ms = 5000 },
		.spool_path = spool ? spool_path : NULL,
		.spool_size = spool_size,
		.backoff_min_ns = 10 * NSEC_PER_MSEC,
		.backoff_max_ns = 80 * NSEC_PER_MSEC,
	};
	char err[256] = "";
	struct transport *t;

	snprintf(url, sizeof(url), "https://127.0.0.1:%s", port);
	t = transport__new(&o, err, sizeof(err));
	if (!t)
		fail_msg("transport__new: %s", err);
	return t;
}

static int submit(struct transport *t, unsigned i, size_t len, bool clock_unset)
{
	static const struct upload_label l[] = { { "region", "eu" } };
	char key[32], *buf = calloc(1, len);
	struct transport_item it = {
		.service = "svc", .type = "cpu", .labels = l, .n_labels = 1, .key = key,
		.data = buf, .len = len,
	};
	int ret;

	snprintf(key, sizeof(key), "dev-1-100-%04u", i);
	transport_item__stamp(&it);
	if (clock_unset) {
		it.clock_unset = true;
		it.time_ns = port_clock_mono_ns();
	}
	ret = transport__submit(t, &it);
	free(buf);
	return ret;
}

/* Polls until the spool is empty (or 20 s). */
static void drain(struct transport *t)
{
	uint64_t end = port_clock_mono_ns() + 20 * NSEC_PER_SEC;

	while (!transport__idle(t) && port_clock_mono_ns() < end) {
		transport__poll(t, port_clock_mono_ns());
		port_sleep_ns(5 * NSEC_PER_MSEC);
	}
	assert_true(transport__idle(t));
}

static void backoff_grows_with_jitter_and_caps(void **state)
{
	const uint64_t min = 1000, max = 64000;

	assert_int_equal(transport_backoff_ns(0, min, max), 0);
	for (unsigned n = 1; n < 40; n++) {
		uint64_t d = n >= 7 ? max : min << (n - 1);

		for (int k = 0; k < 50; k++) {
			uint64_t b = transport_backoff_ns(n, min, max);

			assert_true(b >= d / 2 && b <= d);
		}
	}
}

static void uploads_directly_when_up(void **state)
{
	struct peer *p = peer_start("ca", "server");
	struct transport *t = new_transport(p->port, true, 0);
	struct transport_stats st;

	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(submit(t, i, 100, false), 0);
	transport__stats(t, &st);
	assert_int_equal(st.uploaded, 3);
	assert_int_equal(st.spooled, 0);
	assert_int_equal(st.upload.resumed, 2);	/* one full handshake, then resumed */
	assert_true(transport__idle(t));
	transport__free(t);
	peer_stop(p);
	assert_int_equal(p->n_reqs, 3);
	assert_null(strstr(p->reqs[0].target, "clock"));
	peer_free(p);
}

static void offline_then_up_arrives_once_in_order(void **state)
{
	struct transport_stats st;
	struct transport *t;
	struct peer *p;
	char port[16];

	peer_dead_port(port, sizeof(port));
	t = new_transport(port, true, 0);
	for (unsigned i = 0; i < 10; i++)
		assert_int_equal(submit(t, i, 300, false), 0);
	transport__poll(t, port_clock_mono_ns() + NSEC_PER_SEC);	/* still down */
	transport__stats(t, &st);
	assert_int_equal(st.spooled, 10);
	assert_int_equal(st.uploaded, 0);
	assert_int_equal(st.spool_pending, 10);
	assert_true(st.failures >= 1);
	assert_int_not_equal(transport__next_poll_ns(t), UINT64_MAX);

	p = peer_start_on("ca", "server", port);
	/* the link is up, but a new profile still queues behind the spooled ones */
	port_sleep_ns(100 * NSEC_PER_MSEC);
	assert_int_equal(submit(t, 10, 300, false), 0);
	drain(t);
	assert_int_equal(submit(t, 11, 300, false), 0);	/* direct again */
	transport__stats(t, &st);
	assert_int_equal(st.uploaded, 12);
	assert_int_equal(st.from_spool, 11);
	assert_int_equal(st.failures, 0);
	transport__free(t);
	peer_stop(p);
	assert_int_equal(p->n_reqs, 12);
	for (unsigned i = 0; i < 12; i++) {
		char key[32];

		snprintf(key, sizeof(key), "dev-1-100-%04u", i);
		assert_string_equal(p->reqs[i].key, key);
	}
	/* the spool drained on one kept-alive connection */
	assert_int_equal(p->reqs[1].conn, p->reqs[10].conn);
	peer_free(p);
}

static void restart_drains_what_was_spooled(void **state)
{
	struct transport *t;
	struct peer *p;
	char port[16];

	peer_dead_port(port, sizeof(port));
	t = new_transport(port, true, 0);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(submit(t, i, 300, false), 0);
	transport__free(t);	/* agent restart */
	p = peer_start_on("ca", "server", port);
	t = new_transport(port, true, 0);
	assert_false(transport__idle(t));
	assert_true(transport__next_poll_ns(t) <= port_clock_mono_ns());
	drain(t);
	transport__free(t);
	peer_stop(p);
	assert_int_equal(p->n_reqs, 4);
	assert_string_equal(p->reqs[3].key, "dev-1-100-0003");
	peer_free(p);
}

static void backoff_is_honoured_and_4xx_dropped(void **state)
{
	static const int script[] = { 503, 400 };
	struct peer *p = peer_start("ca", "server");
	struct transport *t = new_transport(p->port, true, 0);
	struct transport_stats st;
	uint64_t at;

	peer_script(p, script, 2);
	assert_int_equal(submit(t, 0, 100, false), 0);	/* 503: spooled */
	transport__stats(t, &st);
	assert_int_equal(st.spooled, 1);
	assert_true(st.backoff_ns >= 5 * NSEC_PER_MSEC && st.backoff_ns <= 10 * NSEC_PER_MSEC);
	at = transport__next_poll_ns(t);
	assert_int_equal(transport__poll(t, at - 1), 0);	/* not yet */
	assert_int_equal(p->n_reqs, 1);
	while (port_clock_mono_ns() <= at)	/* (under load it may have passed already) */
		port_sleep_ns(NSEC_PER_MSEC);
	assert_int_equal(submit(t, 1, 100, false), 0);		/* behind: spooled */
	assert_int_equal(transport__poll(t, port_clock_mono_ns()), 1); /* 400 dropped, 1 ok */
	transport__stats(t, &st);
	assert_int_equal(st.dropped_permanent, 1);
	assert_int_equal(st.uploaded, 1);
	assert_true(transport__idle(t));
	transport__free(t);
	peer_stop(p);
	assert_int_equal(p->n_reqs, 3);
	peer_free(p);
}

/* A 503 with Retry-After (the collector's queue full): its floor, within the backoff's cap. */
static void retry_after_is_a_floor(void **state)
{
	static const int script[] = { 503 };
	struct peer *p = peer_start("ca", "server");
	struct transport *t = new_transport(p->port, true, 0);
	struct transport_stats st;

	p->retry_after = 1;
	peer_script(p, script, 1);
	assert_int_equal(submit(t, 0, 100, false), 0);	/* 503: spooled */
	transport__stats(t, &st);
	assert_int_equal(st.spooled, 1);
	assert_int_equal(st.backoff_ns, 80 * NSEC_PER_MSEC);	/* 1 s, capped at 80 ms */
	drain(t);
	transport__stats(t, &st);
	assert_int_equal(st.uploaded, 1);
	transport__free(t);
	peer_stop(p);
	peer_free(p);
}

static void spool_overflow_is_reported_in_labels(void **state)
{
	struct transport_stats st;
	struct transport *t;
	struct peer *p;
	unsigned dropped;
	char port[16], *l;

	peer_dead_port(port, sizeof(port));
	t = new_transport(port, true, 16 * 1024);
	for (unsigned i = 0; i < 20; i++)
		assert_int_equal(submit(t, i, 3000, false), 0);
	p = peer_start_on("ca", "server", port);
	drain(t);
	transport__stats(t, &st);
	transport__free(t);
	peer_stop(p);
	l = strstr(p->reqs[0].target, TRANSPORT_LABEL_DROPPED "%3D");
	assert_non_null(l);
	dropped = (unsigned)strtoul(l + strlen(TRANSPORT_LABEL_DROPPED "%3D"), NULL, 10);
	assert_int_equal(dropped + p->n_reqs, 20);
	assert_int_equal(st.dropped_spool_full, dropped);
	assert_null(strstr(p->reqs[1].target, TRANSPORT_LABEL_DROPPED));
	assert_string_equal(p->reqs[p->n_reqs - 1].key, "dev-1-100-0019");	/* newest kept */
	peer_free(p);
}

static void clock_unset_is_labelled(void **state)
{
	struct peer *p = peer_start("ca", "server");
	struct transport *t = new_transport(p->port, true, 0);

	assert_int_equal(submit(t, 0, 100, true), 0);
	transport__free(t);
	peer_stop(p);
	assert_non_null(strstr(p->reqs[0].target, "clock%3Dunset"));
	assert_non_null(strstr(p->reqs[0].target, "age_s%3D0"));
	peer_free(p);
}

static void no_spool_drops_and_counts(void **state)
{
	struct transport_stats st;
	struct transport *t;
	char port[16];

	peer_dead_port(port, sizeof(port));
	t = new_transport(port, false, 0);
	assert_int_equal(submit(t, 0, 100, false), -EAGAIN);
	assert_int_equal(submit(t, 1, 100, false), -EAGAIN);
	transport__stats(t, &st);
	assert_int_equal(st.dropped_no_spool, 2);
	assert_true(transport__idle(t));
	transport__free(t);
}

static void bad_items_are_refused(void **state)
{
	static const struct upload_label ours[] = { { "clock", "set" } };
	static const struct upload_label priv[] = { { "_n", "1" } };
	struct peer *p = peer_start("ca", "server");
	struct transport *t = new_transport(p->port, true, 0);
	struct transport_item it = { .service = "svc", .key = "k", .data = "x", .len = 1 };

	it.labels = ours;
	it.n_labels = 1;
	assert_int_equal(transport__submit(t, &it), -EINVAL);
	it.labels = priv;
	assert_int_equal(transport__submit(t, &it), -EINVAL);
	it.n_labels = 0;
	it.len = 0;
	assert_int_equal(transport__submit(t, &it), -EINVAL);
	transport__free(t);
	peer_stop(p);
	assert_int_equal(p->n_reqs, 0);
	peer_free(p);
}

static void opts_from_flags(void **state)
{
	struct transport_opts o;
	uint64_t v;

	transport_opts__init(&o);
	assert_string_equal(o.upload.url, CONFIG_UPLOAD_URL);
	assert_int_equal(o.spool_size, (uint64_t)CONFIG_SPOOL_KB * 1024);
	assert_int_equal(transport_opts__set(&o, "upload", "https://c:1"), 0);
	assert_int_equal(transport_opts__set(&o, "tls-ca", "ca"), 0);
	assert_int_equal(transport_opts__set(&o, "tls-cert", "crt"), 0);
	assert_int_equal(transport_opts__set(&o, "tls-key", "key"), 0);
	assert_int_equal(transport_opts__set(&o, "spool", "/var/lib/x"), 0);
	assert_int_equal(transport_opts__set(&o, "spool-size", "2M"), 0);
	assert_int_equal(transport_opts__set(&o, "period", "1"), -ENOENT);
	assert_int_equal(transport_opts__set(&o, "spool-size", "2X"), -EINVAL);
	assert_string_equal(o.upload.url, "https://c:1");
	assert_string_equal(o.upload.key_file, "key");
	assert_string_equal(o.spool_path, "/var/lib/x");
	assert_int_equal(o.spool_size, 2u << 20);
	assert_int_equal(transport_parse_size("16384", &v), 0);
	assert_int_equal(v, 16384);
	assert_int_equal(transport_parse_size("64KiB", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(transport_parse_size("1g", &v), 0);
	assert_int_equal(v, 1u << 30);
	assert_int_equal(transport_parse_size("", &v), -EINVAL);
	assert_int_equal(transport_parse_size("K", &v), -EINVAL);
	assert_int_equal(transport_parse_size("99999999999999999999", &v), -EINVAL);
	assert_int_equal(transport_parse_size("17179869184G", &v), -EINVAL);
}

static void device_is_the_certificate_cn(void **state)
{
	struct transport *t = new_transport("1", false, 0);

	assert_string_equal(transport__device(t), "dev-1");
	transport__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(backoff_grows_with_jitter_and_caps),
		cmocka_unit_test_setup(uploads_directly_when_up, fresh),
		cmocka_unit_test_setup(offline_then_up_arrives_once_in_order, fresh),
		cmocka_unit_test_setup(restart_drains_what_was_spooled, fresh),
		cmocka_unit_test_setup(backoff_is_honoured_and_4xx_dropped, fresh),
		cmocka_unit_test_setup(retry_after_is_a_floor, fresh),
		cmocka_unit_test_setup(spool_overflow_is_reported_in_labels, fresh),
		cmocka_unit_test_setup(clock_unset_is_labelled, fresh),
		cmocka_unit_test_setup(no_spool_drops_and_counts, fresh),
		cmocka_unit_test_setup(bad_items_are_refused, fresh),
		cmocka_unit_test(opts_from_flags),
		cmocka_unit_test(device_is_the_certificate_cn),
	};

	return cmocka_run_group_tests(tests, setup, peer_remove_certs);
}
