// SPDX-License-Identifier: MIT
/*
 * agent/transport/transport.c — upload now, or spool and retry later with backoff; see transport.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/transport/spool.h"
#include "agent/transport/transport.h"
#include "port/clock.h"
#include "port/log.h"
#include "port/rand.h"

#define TRANSPORT_BACKOFF_MIN_NS (2 * NSEC_PER_SEC)
#define TRANSPORT_BACKOFF_MAX_NS (600 * NSEC_PER_SEC)
#define TRANSPORT_BATCH_MAX	 64u

struct transport {
	struct uploader *up;
	struct spool *spool;	/* NULL without a spool */
	uint64_t backoff_min, backoff_max;
	unsigned batch_max;
	unsigned failures;	/* consecutive */
	uint64_t backoff_ns;	/* current delay; 0 = link fine */
	uint64_t retry_at;	/* CLOCK_MONOTONIC ns of the next attempt */
	struct transport_stats st;
};

uint64_t transport_backoff_ns(unsigned failures, uint64_t min_ns, uint64_t max_ns)
{
	uint64_t d = min_ns;

	if (!failures)
		return 0;
	for (unsigned i = 1; i < failures && d < max_ns; i++)
		d *= 2;
	if (d > max_ns)
		d = max_ns;
	return d / 2 + port_rand_below(d / 2 + 1);
}

void transport_opts__init(struct transport_opts *o)
{
	*o = (struct transport_opts){
		.upload.url = CONFIG_UPLOAD_URL,
#ifdef CONFIG_SPOOL
		.spool_size = (uint64_t)CONFIG_SPOOL_KB * 1024,
#endif
	};
}

int transport_parse_size(const char *s, uint64_t *out)
{
	unsigned shift = 0;
	uint64_t v = 0;
	const char *p = s;

	if (!*p)
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == s)
		return -EINVAL;
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	default: break;
	}
	if (*p == 'i' && shift)	/* "KiB" style */
		p++;
	if (*p == 'B' && shift)
		p++;
	if (*p || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = v << shift;
	return 0;
}

int transport_opts__set(struct transport_opts *o, const char *name, const char *value)
{
	if (!strcmp(name, "upload"))
		o->upload.url = value;
	else if (!strcmp(name, "tls-ca"))
		o->upload.ca_file = value;
	else if (!strcmp(name, "tls-cert"))
		o->upload.cert_file = value;
	else if (!strcmp(name, "tls-key"))
		o->upload.key_file = value;
	else if (!strcmp(name, "spool"))
		o->spool_path = value;
	else if (!strcmp(name, "spool-size"))
		return transport_parse_size(value, &o->spool_size);
	else
		return -ENOENT;
	return 0;
}

void transport_item__stamp(struct transport_item *item)
{
	uint64_t real = port_clock_real_ns();

	item->clock_unset = !port_clock_real_is_set(real);
	item->time_ns = item->clock_unset ? port_clock_mono_ns() : real;
}

struct transport *transport__new(const struct transport_opts *o, char *err, size_t errlen)
{
	struct transport *t = calloc(1, sizeof(*t));

	if (!t) {
		snprintf(err, errlen, "transport: out of memory");
		return NULL;
	}
	t->backoff_min = o->backoff_min_ns ? o->backoff_min_ns : TRANSPORT_BACKOFF_MIN_NS;
	t->backoff_max = o->backoff_max_ns ? o->backoff_max_ns : TRANSPORT_BACKOFF_MAX_NS;
	if (t->backoff_max < t->backoff_min)
		t->backoff_max = t->backoff_min;
	t->batch_max = o->batch_max ? o->batch_max : TRANSPORT_BATCH_MAX;
	t->up = upload__new(&o->upload, err, errlen);
	if (!t->up)
		goto out_free;
	if (o->spool_path && IS_ENABLED(CONFIG_SPOOL)) {
		t->spool = spool__open(o->spool_path, o->spool_size, err, errlen);
		if (!t->spool)
			goto out_free;
		if (!spool__is_empty(t->spool))
			t->retry_at = port_clock_mono_ns();	/* drain at the first poll */
	} else if (o->spool_path) {
		pr_warn("transport: built without CONFIG_SPOOL; --spool %s ignored", o->spool_path);
	}
	return t;

out_free:
	upload__free(t->up);
	free(t);
	return NULL;
}

void transport__free(struct transport *t)
{
	if (!t)
		return;
	upload__free(t->up);
	spool__free(t->spool);
	free(t);
}

static void transport_failed(struct transport *t)
{
	uint64_t now = port_clock_mono_ns();
	uint64_t after = (uint64_t)upload__retry_after(t->up) * NSEC_PER_SEC;

	t->failures++;
	t->backoff_ns = transport_backoff_ns(t->failures, t->backoff_min, t->backoff_max);
	/* the collector's Retry-After (its queue full) is a floor, within our own cap */
	if (after > t->backoff_max)
		after = t->backoff_max;
	if (t->backoff_ns < after)
		t->backoff_ns = after;
	t->retry_at = now + t->backoff_ns;
	upload__close(t->up);
	pr_debug("transport: attempt %u failed (%s); next in %" PRIu64 " ms", t->failures,
		 upload__error(t->up), (uint64_t)(t->backoff_ns / NSEC_PER_MSEC));
}

static void transport_succeeded(struct transport *t)
{
	if (t->failures)
		pr_info("transport: collector back after %u failed attempts", t->failures);
	t->failures = 0;
	t->backoff_ns = 0;
}

/*
 * Uploads item with the transport's own labels added: clock=unset and age_s for clock-less
 * devices, edgeprof_spool_dropped=N when the spool lost profiles before this one.
 */
static enum upload_result transport_send(struct transport *t, const struct transport_item *it,
					 uint64_t dropped_before, bool mono_comparable)
{
	struct upload_label labels[UPLOAD_MAX_LABELS];
	char dropped[24], age[24];
	size_t n = 0;
	struct upload_req req = {
		.service = it->service,
		.type = it->type ? it->type : "cpu",
		.key = it->key,
		.labels = labels,
		.data = it->data,
		.len = it->len,
	};

	for (size_t i = 0; i < it->n_labels && n < UPLOAD_MAX_LABELS - 3; i++)
		labels[n++] = it->labels[i];
	if (it->clock_unset) {
		uint64_t now = port_clock_mono_ns();

		labels[n++] = (struct upload_label){ TRANSPORT_LABEL_CLOCK, "unset" };
		if (mono_comparable && now >= it->time_ns) {
			snprintf(age, sizeof(age), "%" PRIu64,
				 (uint64_t)((now - it->time_ns) / NSEC_PER_SEC));
			labels[n++] = (struct upload_label){ TRANSPORT_LABEL_AGE, age };
		}
	}
	if (dropped_before) {
		snprintf(dropped, sizeof(dropped), "%" PRIu64, dropped_before);
		labels[n++] = (struct upload_label){ TRANSPORT_LABEL_DROPPED, dropped };
	}
	req.n_labels = n;
	return upload__post(t->up, &req);
}

static int transport_check_item(const struct transport_item *it)
{
	if (!it->service || !*it->service || !it->data || !it->len ||
	    it->n_labels > UPLOAD_MAX_LABELS - 3)
		return -EINVAL;
	for (size_t i = 0; i < it->n_labels; i++) {
		const char *k = it->labels[i].key;

		if (upload_label__check(k, it->labels[i].value) || k[0] == '_' ||
		    !strcmp(k, TRANSPORT_LABEL_DROPPED) || !strcmp(k, TRANSPORT_LABEL_CLOCK) ||
		    !strcmp(k, TRANSPORT_LABEL_AGE))
			return -EINVAL;
	}
	return 0;
}

static int transport_spool(struct transport *t, const struct transport_item *it)
{
	int ret;

	if (!t->spool) {
		t->st.dropped_no_spool++;
		pr_debug("transport: no spool; profile %s dropped", it->key ? it->key : "-");
		return -EAGAIN;
	}
	ret = spool__push(t->spool, it);
	if (ret == -EFBIG) {
		t->st.dropped_too_big++;
		pr_warn("transport: profile %s (%zu bytes) is larger than the spool; dropped",
			it->key ? it->key : "-", it->len);
	} else if (ret) {
		pr_err("transport: spool write failed: %s", strerror(-ret));
	} else {
		t->st.spooled++;
	}
	return ret;
}

int transport__submit(struct transport *t, const struct transport_item *it)
{
	enum upload_result res;
	int ret = transport_check_item(it);

	if (ret)
		return ret;
	t->st.submitted++;
	/* Order: never overtake what already waits; and do not hammer a collector in backoff. */
	if ((t->spool && !spool__is_empty(t->spool)) ||
	    (t->failures && port_clock_mono_ns() < t->retry_at))
		return transport_spool(t, it);
	res = transport_send(t, it, 0, true);
	upload__close(t->up);	/* one profile per round: do not hold a socket for a minute */
	if (res == UPLOAD_OK) {
		transport_succeeded(t);
		t->st.uploaded++;
		return 0;
	}
	if (res == UPLOAD_PERMANENT) {
		t->st.dropped_permanent++;
		return -EPERM;
	}
	transport_failed(t);
	return transport_spool(t, it);
}

int transport__poll(struct transport *t, uint64_t now)
{
	struct spool_entry e;
	unsigned done = 0;
	int ret = 0;

	if (!t->spool || (t->failures && now < t->retry_at))
		return 0;
	while (done < t->batch_max) {
		enum upload_result res;

		ret = spool__peek(t->spool, &e);
		if (ret == -ENOENT) {
			ret = 0;
			break;
		}
		if (ret)
			break;
		res = transport_send(t, &e.item, e.dropped_before, e.this_boot);
		if (res == UPLOAD_RETRY) {
			spool_entry__release(&e);
			transport_failed(t);
			break;
		}
		transport_succeeded(t);
		if (res == UPLOAD_PERMANENT)
			t->st.dropped_permanent++;
		else
			t->st.uploaded++, t->st.from_spool++, done++;
		t->st.dropped_spool_full += e.dropped_before;
		/* Consumed only now: a crash before this line re-sends it, the key dedups it. */
		ret = spool__ack(t->spool, &e);
		spool_entry__release(&e);
		if (ret) {
			pr_err("transport: spool consume failed: %s", strerror(-ret));
			break;
		}
	}
	upload__close(t->up);
	return ret ? ret : (int)done;
}

uint64_t transport__next_poll_ns(const struct transport *t)
{
	if (!t->spool || spool__is_empty(t->spool))
		return UINT64_MAX;
	return t->failures ? t->retry_at : 0;
}

bool transport__idle(const struct transport *t)
{
	return !t->spool || spool__is_empty(t->spool);
}

bool transport__sample_round(const struct transport *t, uint64_t now_s)
{
	struct upload_schedule s;

	upload__schedule(t->up, &s);
	if (!s.valid)
		return true;
	if (now_s >= s.window_start && now_s < s.window_start + s.window_s)
		return s.sample;
	if (now_s < s.next_start)
		return false;
	if (now_s < s.next_start + s.window_s)
		return true;
	return port_rand_below(100) < s.budget_percent;
}

uint64_t transport__told_window(const struct transport *t, uint64_t start_s)
{
	return upload__told_window(t->up, start_s);
}

void transport__stats(const struct transport *t, struct transport_stats *st)
{
	*st = t->st;
	st->backoff_ns = t->backoff_ns;
	st->failures = t->failures;
	if (t->spool) {
		struct spool_stats ss;

		spool__stats(t->spool, &ss);
		st->spool_pending = ss.pending;
		st->spool_bytes = ss.bytes;
		st->dropped_corrupt = ss.corrupt;
	}
	upload__stats(t->up, &st->upload);
}

void transport__forget_session(struct transport *t)
{
	upload__forget_session(t->up);
}

const char *transport__device(const struct transport *t)
{
	return upload__device(t->up);
}
