// SPDX-License-Identifier: MIT
/*
 * store/api/api.c — the profefe-compatible API (/api/0/...), the common ingest path every API ends
 * in (validate with the pprof reader, device from the certificate, store durably, then answer),
 * and the routing table.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "port/clock.h"
#include "pprof/folded.h"
#include "port/log.h"
#include "port/text.h"
#include "store/query/selector.h"
#include "store/api/api.h"
#include "store/query/timeparse.h"
#include "store/symbols/snapunwind.h"
#include "store/ui/ui.h"

#define API_MAX_OUTPUT	 (256u << 20)	/* merged profile answer */
#define API_LIST_DEFAULT 1000
#define API_LIST_MAX	 100000
#define API_MAX_IDS	 1000
#define API_PARAM_MAX	 8192
#define API_FUTURE_S	 3600		/* a device's clock may be this far ahead */
#define API_RETRY_AFTER_S 5		/* a full store queue: about a batch's time to go in */

/* ---- output helpers ------------------------------------------------------------------------ */

void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->oom = true;
			return;
		}
		if ((size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		{
			size_t cap = (b->cap ? b->cap * 2 : 1024) + (size_t)n;
			char *p = cap > API_MAX_OUTPUT ? NULL : realloc(b->p, cap);

			if (!p) {
				b->oom = true;
				return;
			}
			b->p = p;
			b->cap = cap;
		}
	}
}

static void sbuf_put(void *ctx, const char *p, size_t n)
{
	sbuf_printf(ctx, "%.*s", (int)n, p);
}

/* Labels and names come from devices: invalid UTF-8 becomes U+FFFD (the pprof keeps bytes). */
void sbuf_json_str(struct sbuf *b, const char *s)
{
	json_str_write(s, sbuf_put, b);
}

void sbuf_free(struct sbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

void api_reset(struct api_ctx *a)
{
	mem_charge__release(&a->mem);
	server_answer__reset(&a->ans);
}

void api_set_body(struct api_ctx *a, int status, const char *ctype, void *body,
		  size_t len, bool is_static)
{
	server_answer__set(&a->ans, status, ctype, body, len, is_static);
}

void api_error(struct api_ctx *a, int status, enum reject_reason r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	server_answer__verror(&a->ans, a->metrics, a->peer, a->device, a->req->path, status, r,
			      fmt, ap);
	va_end(ap);
}

void api_json(struct api_ctx *a, struct sbuf *b)
{
	if (b->oom) {
		sbuf_free(b);
		api_error(a, 500, REJ_STORE, "out of memory building the answer");
		return;
	}
	api_set_body(a, 200, "application/json", b->p, b->len, false);
	memset(b, 0, sizeof(*b));
}

static void json_time(struct sbuf *b, uint64_t ns)
{
	time_t t = (time_t)(ns / NSEC_PER_SEC);
	struct tm tm;
	char s[32];

	gmtime_r(&t, &tm);
	strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
	sbuf_printf(b, "\"%s.%03uZ\"", s, (unsigned)(ns % NSEC_PER_SEC / NSEC_PER_MSEC));
}

static void json_labels(struct sbuf *b, const struct record_label *l, size_t n)
{
	sbuf_printf(b, "[");
	for (size_t i = 0; i < n; i++) {
		sbuf_printf(b, "%s{\"key\":", i ? "," : "");
		sbuf_json_str(b, l[i].key);
		sbuf_printf(b, ",\"value\":");
		sbuf_json_str(b, l[i].value);
		sbuf_printf(b, "}");
	}
	sbuf_printf(b, "]");
}

/* ---- parameters ---------------------------------------------------------------------------- */

/* Query parameter name into out: 1 present, 0 absent, -1 bad (answer set). */
int api_param(struct api_ctx *a, const char *name, char *out, size_t outlen)
{
	int ret = http_query_get(a->req->query, name, out, outlen);

	if (ret == -ENOENT) {
		out[0] = '\0';
		return 0;
	}
	if (ret < 0) {
		api_error(a, 400, REJ_BAD_REQUEST, "parameter %s: %s", name,
			  ret == -ENAMETOOLONG ? "too long" : "bad percent-encoding");
		return -1;
	}
	return 1;
}

/*
 * profefe's labels=k=v,k2=v2. Sent with literal separators, it is split on ',' and '=' first and
 * each part decoded after (*raw = true, see label_decode), so %2C and %3D stay inside a value.
 * Sent wholly encoded (labels=k%3Dv%2Ck2%3Dv2, as Go's url.Values and our agent do) the
 * separators cannot be told from the text: decoded first, then split (*raw = false).
 */
static int api_param_labels(struct api_ctx *a, char *out, size_t outlen, bool *raw)
{
	const char *q = a->req->query;

	out[0] = '\0';
	*raw = false;
	while (q && *q) {
		size_t n = strcspn(q, "&");

		if (n > 7 && !strncmp(q, "labels=", 7) && memchr(q + 7, '=', n - 7)) {
			if (n - 7 >= outlen) {
				api_error(a, 400, REJ_BAD_REQUEST, "parameter labels: too long");
				return -1;
			}
			memcpy(out, q + 7, n - 7);
			out[n - 7] = '\0';
			*raw = true;
			return 1;
		}
		q += n + (q[n] == '&');
	}
	return api_param(a, "labels", out, outlen);
}

/* Percent-decodes one part of a label list in place: 0 or -EINVAL. */
static int label_decode(char *s)
{
	char tmp[API_PARAM_MAX];
	int n = http_url_decode(s, strlen(s), tmp, sizeof(tmp), true);

	if (n < 0)
		return -EINVAL;
	memcpy(s, tmp, (size_t)n + 1);
	return 0;
}

static bool label_key_ok(const char *k)
{
	if (!*k)
		return false;
	for (; *k; k++)
		if (!isalnum((unsigned char)*k) && *k != '_' && *k != '.' && *k != '-')
			return false;
	return true;
}

/* Adds key=value to in; drops "device" (the certificate says who the device is). */
static int ingest_add_label(struct api_ctx *a, struct ingest *in, const char *k, const char *v)
{
	if (!label_key_ok(k)) {
		api_error(a, 400, REJ_BAD_REQUEST, "label key '%s': use letters, digits, _ . -", k);
		return -EINVAL;
	}
	if (!strcmp(k, "device"))
		return 0;
	for (size_t i = 0; i < in->n_labels; i++) {
		if (!strcmp(in->labels[i].key, k)) {
			api_error(a, 400, REJ_BAD_REQUEST, "label '%s' given twice", k);
			return -EINVAL;
		}
	}
	if (in->n_labels >= STORE_MAX_LABELS - 1) {
		api_error(a, 400, REJ_BAD_REQUEST, "more than %u labels", STORE_MAX_LABELS - 1);
		return -E2BIG;
	}
	in->labels[in->n_labels].key = k;
	in->labels[in->n_labels++].value = v;
	return 0;
}

/* Sets k=v, replacing the client's own k: every parser leaves room for one more label. */
static void ingest_set_label(struct ingest *in, const char *k, const char *v)
{
	for (size_t i = 0; i < in->n_labels; i++) {
		if (!strcmp(in->labels[i].key, k)) {
			in->labels[i].value = v;
			return;
		}
	}
	if (in->n_labels < STORE_MAX_LABELS) {
		in->labels[in->n_labels].key = k;
		in->labels[in->n_labels++].value = v;
	}
}

/* profefe's labels=k=v,k2=v2 (see api_param_labels), split and decoded in place. */
static int parse_label_list(struct api_ctx *a, char *s, bool raw, struct ingest *in)
{
	char *save = NULL;

	for (char *kv = strtok_r(s, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');

		if (!eq) {
			api_error(a, 400, REJ_BAD_REQUEST, "label '%s' is not key=value", kv);
			return -EINVAL;
		}
		*eq = '\0';
		if (raw && (label_decode(kv) || label_decode(eq + 1))) {
			api_error(a, 400, REJ_BAD_REQUEST, "labels: bad percent-encoding");
			return -EINVAL;
		}
		if (ingest_add_label(a, in, kv, eq + 1))
			return -EINVAL;
	}
	return 0;
}

static bool name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("_.-/:", *s))
			return false;
	return true;
}

static const char *const profile_types[] = {
	"cpu", "heap", "wall", "offcpu", "block", "mutex", "goroutine", "threadcreate", "trace",
	"other", NULL,
};

static bool type_ok(const char *t)
{
	for (int i = 0; profile_types[i]; i++)
		if (!strcmp(t, profile_types[i]))
			return true;
	return false;
}

/* A type for profiles that do not say (Pyroscope, Alloy): from the first sample type. */
static const char *type_from_profile(const struct pprof_profile *p)
{
	const char *t = p->n_sample_type ? pprof_str(p, p->sample_type[0].type) : "";

	if (!strcmp(t, "cpu") || !strcmp(t, "samples"))
		return "cpu";
	if (!strcmp(t, "wall") || !strcmp(t, "offcpu")) /* libedgeprof.so's, the BPF sampler's */
		return t;
	if (!strncmp(t, "alloc_", 6) || !strncmp(t, "inuse_", 6) || !strcmp(t, "space"))
		return "heap";
	if (!strcmp(t, "contentions") || !strcmp(t, "delay"))
		return "mutex";
	if (!strncmp(t, "goroutine", 9))
		return "goroutine";
	return "other";
}

/* ---- the common ingest path ------------------------------------------------------------- */

int api_read_profile(struct api_ctx *a, const void *body, size_t len, bool folded_ok,
		     bool merge, struct pprof_profile **p)
{
	struct pprof_read_limits lim = { .max_input = a->max_body,
					 .max_decoded = API_MAX_DECODED,
					 .merge_samples = merge,
					 .reserve = mem_charge__reserve,
					 .reserve_ctx = &a->mem };
	char err[256] = "";
	int ret;

	mem_charge__mark(&a->mem);
	if (!len) {
		api_error(a, 400, REJ_BAD_PROFILE, "empty body: expected a pprof profile%s",
			  folded_ok ? " or folded text" : "");
		return -EINVAL;
	}
	if (folded_ok)
		ret = pprof_read_any(body, len, &lim, p, err, sizeof(err));
	else
		ret = pprof_read(body, len, &lim, p, err, sizeof(err));
	if (ret == -EFBIG) {
		api_error(a, 413, REJ_TOO_LARGE, "profile refused: %s", err);
		return ret;
	}
	if (ret == -EAGAIN) {
		api_error(a, 503, REJ_BUSY, "profile not decoded now: %s", err);
		snprintf(a->ans.extra, sizeof(a->ans.extra), "Retry-After: %u\r\n",
			 API_RETRY_AFTER_S);
		return ret;
	}
	if (ret) {
		api_error(a, ret == -ENOMEM ? 503 : 400,
			  ret == -ENOMEM ? REJ_STORE : REJ_BAD_PROFILE, "invalid %s: %s",
			  folded_ok ? "profile" : "pprof",
			  err[0] ? err : strerror(-ret));
		return ret;
	}
	if (!(*p)->n_samples) {
		api_error(a, 400, REJ_BAD_PROFILE, "profile has no samples");
		pprof_profile__free(*p);
		*p = NULL;
		return -EINVAL;
	}
	return 0;
}

/*
 * Fleet-wide duty cycling (--duty-percent): the device's schedule, kept for the answer, and
 * its weight (n / k of its group: this profile stands for that many devices' windows) applied
 * to the decoded profile's values, so that what a backend that stores the decoded rows
 * (ClickHouse) and the metrics rules sum is the fleet's unbiased total. The ring stores the
 * uploaded bytes as they are (weight 1). With a store that merges samples (ClickHouse), the
 * samples of one stack were summed before they are weighed: each sum is rounded down once, not
 * each of its samples (a stack of 7 samples of count 1 at a weight of 1.5: 10, where weighing
 * them one by one gave 7, for 10.5): closer to the unbiased total, never below the old sum.
 */
static uint64_t duty_weigh(struct api_ctx *a, const struct ingest *in, uint64_t window,
			   struct pprof_profile *p)
{
	uint64_t w;

	if (!a->device || !a->device[0])
		return 1000; /* no certificate: no device to schedule (plain HTTP, scrapes) */
	/* the weight first: the schedule below may tell the device a new window */
	w = duty__weight(a->duty, a->device, window);
	duty__schedule(a->duty, a->device, in->labels, in->n_labels,
		       port_clock_real_ns() / NSEC_PER_SEC, &a->sched);
	a->has_sched = true;
	if (w != 1000)
		pprof_profile__weigh(p, w);
	return w;
}

/*
 * The duty window the profile was sampled in (the agent's duty_window label: unix s /
 * window), taken out of the labels wherever it comes from: a label per window would be a new
 * series per window. 0 when absent or not a number.
 */
static uint64_t take_duty_window(struct ingest *in)
{
	for (size_t i = 0; i < in->n_labels; i++) {
		char *end;
		uint64_t w;

		if (strcmp(in->labels[i].key, DUTY_WINDOW_LABEL))
			continue;
		w = strtoull(in->labels[i].value, &end, 10);
		memmove(&in->labels[i], &in->labels[i + 1],
			(in->n_labels - i - 1) * sizeof(in->labels[0]));
		in->n_labels--;
		return *end ? 0 : w;
	}
	return 0;
}

/* The total of the default sample type (pprof's: default_sample_type, else the last). */
static int64_t profile_total(const struct pprof_profile *p)
{
	size_t vi = p->n_sample_type ? p->n_sample_type - 1 : 0;
	int64_t total = 0;

	for (size_t i = 0; i < p->n_sample_type && p->default_sample_type; i++)
		if (p->sample_type[i].type == p->default_sample_type)
			vi = i;
	for (size_t i = 0; i < p->n_samples && p->n_sample_type; i++)
		total += p->samples[i].values[vi];
	return total;
}

/*
 * The store cannot take the upload now (ClickHouse's queue or spool is full: behind, or down):
 * a 503 that says so, and when to try again. The agent keeps the profile in its own spool and
 * retries with its backoff; other clients (Pyroscope, profefe) get a 5xx they may retry.
 * Retry-After is about a batch's time to go in, not a promise.
 */
static void api_full(struct api_ctx *a, int ret)
{
	api_error(a, 503, REJ_STORE, ret == -EBUSY
		  ? "the collector's queue to ClickHouse is full; retry later"
		  : "the collector's spool for ClickHouse is full (ClickHouse is behind or down); "
		    "retry later");
	snprintf(a->ans.extra, sizeof(a->ans.extra), "Retry-After: %u\r\n", API_RETRY_AFTER_S);
}

/*
 * A time from the device (its profile's time_nanos, created_at, Pyroscope's from) more than
 * API_FUTURE_S ahead of the collector's clock is placed at receive time, labelled clock=ahead
 * and counted: a year-2262 profile would sit in a partition no retention ever drops, and in
 * front of every "latest" query. Past times stay (devices spool for days; imports).
 */
static void clamp_future(struct api_ctx *a, struct ingest *in, struct record_meta *meta)
{
	uint64_t now = port_clock_real_ns();

	if (meta->time_ns <= now + (uint64_t)API_FUTURE_S * NSEC_PER_SEC)
		return;
	meta->time_ns = now;
	ingest_set_label(in, "clock", "ahead");
	a->metrics->time_clamped++;
}

/*
 * Samples that came with a stack snapshot get the chain the debug files give
 * (store/symbols/snapunwind.h): *p and the body become the rewritten profile, without the
 * snapshots (*owned: the new body, freed by the caller). 0 or -errno (answered).
 */
static int unwind_snapshots(struct api_ctx *a, struct pprof_profile **p, const void **body,
			    size_t *len, size_t body_held, void **owned)
{
	struct pprof_buf buf = { .max = a->max_body };
	struct snapunwind_stats st = { 0 };
	struct pprof_budget b = { .take = mem_charge__take, .give = mem_charge__give,
				  .ctx = &a->mem };
	struct snapunwind_call call = { .d = a->debuginfo, .b = a->mem.b ? &b : NULL,
					.out = &buf, .st = &st };
	int ret = a->debuginfo ? snapunwind__profile(&call, *p) : 0;

	if (ret < 0) {
		free(buf.data);
		if (call.b)
			b.give(b.ctx, call.out_held);
		if (ret == -EFBIG || ret == -EAGAIN) {
			api_error(a, ret == -EFBIG ? 413 : 503, ret == -EFBIG ? REJ_TOO_LARGE : REJ_BUSY,
				  "its stack snapshots were not unwound: %s", call.err);
			if (ret == -EAGAIN)
				snprintf(a->ans.extra, sizeof(a->ans.extra), "Retry-After: %u\r\n",
					 API_RETRY_AFTER_S);
			return ret;
		}
		api_error(a, 503, REJ_STORE, "could not unwind its stack snapshots: %s",
			  strerror(-ret));
		return ret;
	}
	if (!ret)
		return 0;
	a->metrics->snapshots += st.snapshots;
	a->metrics->snapshots_exact += st.exact;
	pprof_profile__free(*p);
	*p = NULL;
	/* the decoded profile's share goes back; the rewritten body's stays, as the body's did */
	mem_charge__release_to(&a->mem, body_held + call.out_held);
	ret = api_read_profile(a, buf.data, buf.len, false, store__merges_samples(a->store), p);
	if (ret) {
		free(buf.data);
		return ret;
	}
	*body = buf.data;
	*len = buf.len;
	*owned = buf.data;
	return 0;
}

static int store_profile(struct api_ctx *a, struct ingest *in, const void **bodyp, size_t *lenp,
			 uint64_t *seq, bool *dup, int64_t *time_ns, void **owned)
{
	struct record_meta meta = { 0 };
	struct pprof_profile *p = NULL;
	int ret;
	size_t body_held = a->mem.held;
	uint64_t window = take_duty_window(in);

	a->metrics->received++;
	a->metrics->bytes_received += *lenp;
	/* the store's rows and the metrics rules sum samples: merged ones sum alike */
	ret = api_read_profile(a, *bodyp, *lenp, false, store__merges_samples(a->store), &p);
	if (!ret)
		ret = unwind_snapshots(a, &p, bodyp, lenp, body_held, owned);
	if (ret)
		return ret;
	const void *body = *bodyp;
	size_t len = *lenp;

	meta.time_ns = (uint64_t)in->created_ns;
	if (!in->created_ns) {
		if (p->time_nanos > 0 && port_clock_real_is_set((uint64_t)p->time_nanos)) {
			meta.time_ns = (uint64_t)p->time_nanos;
		} else {
			/* The device had no clock (booted in 1970): place it at receive time. */
			meta.time_ns = port_clock_real_ns();
			meta.flags |= STORE_F_CLOCK_UNSET;
			ingest_set_label(in, "clock", "unset");
		}
	}
	clamp_future(a, in, &meta);
	if (!in->type)
		in->type = type_from_profile(p);
	if (a->duty)
		meta.weight_milli = (uint32_t)duty_weigh(a, in, window, p);
	meta.value = profile_total(p);
	meta.service = in->service;
	meta.type = in->type;
	meta.device = a->device;
	meta.key = in->key ? in->key : "";
	meta.labels = in->labels;
	meta.n_labels = in->n_labels;
	ret = store__ingest(a->store, &meta, body, len, p, seq, dup); /* takes p */
	/* p is the store's now (bounded by its own queue): the next of an Alloy push may decode */
	mem_charge__release_to(&a->mem, body_held);
	if (ret == -EFBIG)
		api_error(a, 413, REJ_TOO_LARGE, "profile of %zu bytes cannot fit in the ring",
			  len);
	else if (ret == -EINVAL)
		api_error(a, 400, REJ_BAD_REQUEST, "metadata refused by the store");
	else if (ret == -EBUSY || ret == -ENOSPC)
		api_full(a, ret);
	else if (ret)
		api_error(a, 503, REJ_STORE, "could not store the profile: %s", strerror(-ret));
	if (ret)
		return ret;
	if (*dup)
		a->metrics->duplicates++;
	else
		a->metrics->stored++;
	if (time_ns)
		*time_ns = (int64_t)meta.time_ns;
	return 0;
}

int api_store_profile(struct api_ctx *a, struct ingest *in, const void *body, size_t len,
		      uint64_t *seq, bool *dup, int64_t *time_ns)
{
	void *owned = NULL;
	int ret = store_profile(a, in, &body, &len, seq, dup, time_ns, &owned);

	free(owned);
	return ret;
}

/* ---- POST /api/0/profiles ------------------------------------------------------------------ */

static void api_post_profile(struct api_ctx *a)
{
	char service[256], type[64], created[64], key[256], labels[API_PARAM_MAX];
	const char *hkey = http_header(a->req, "x-edgeprof-key");
	struct ingest in = { 0 };
	struct sbuf b = { 0 };
	int64_t time_ns;
	uint64_t seq;
	bool dup = false;
	char err[200];
	bool raw;

	if (api_param(a, "service", service, sizeof(service)) < 0 ||
	    api_param(a, "type", type, sizeof(type)) < 0 ||
	    api_param(a, "created_at", created, sizeof(created)) < 0 ||
	    api_param(a, "key", key, sizeof(key)) < 0 ||
	    api_param_labels(a, labels, sizeof(labels), &raw) < 0)
		return;
	if (!name_ok(service, 200))
		return api_error(a, 400, REJ_BAD_REQUEST,
				 "service is required: letters, digits and _ . - / :");
	if (!type_ok(type))
		return api_error(a, 400, REJ_BAD_REQUEST, "type '%s' is not one of cpu, heap, wall, "
				 "offcpu, block, mutex, goroutine, threadcreate, trace, other", type);
	if (created[0] && timeparse(created, (int64_t)port_clock_real_ns(), &in.created_ns, err,
				    sizeof(err)))
		return api_error(a, 400, REJ_BAD_REQUEST, "created_at: %s", err);
	if (hkey && strlen(hkey) >= sizeof(key))
		return api_error(a, 400, REJ_BAD_REQUEST, "X-Edgeprof-Key is too long");
	in.service = service;
	in.type = type;
	in.key = hkey ? hkey : key;
	if (parse_label_list(a, labels, raw, &in))
		return;
	if (api_store_profile(a, &in, a->req->body, a->req->body_len, &seq, &dup, &time_ns))
		return;
	sbuf_printf(&b, "{\"code\":200,\"body\":{\"id\":\"%" PRIu64 "\",\"external_id\":", seq);
	sbuf_json_str(&b, in.key);
	sbuf_printf(&b, ",\"type\":");
	sbuf_json_str(&b, in.type);
	sbuf_printf(&b, ",\"service\":");
	sbuf_json_str(&b, in.service);
	sbuf_printf(&b, ",\"device\":");
	sbuf_json_str(&b, a->device);
	sbuf_printf(&b, ",\"labels\":");
	json_labels(&b, in.labels, in.n_labels);
	sbuf_printf(&b, ",\"created_at\":");
	json_time(&b, (uint64_t)time_ns);
	sbuf_printf(&b, ",\"duplicate\":%s", dup ? "true" : "false");
	if (a->has_sched) {
		char js[512];

		if (duty__json(&a->sched, js, sizeof(js)) > 0)
			sbuf_printf(&b, ",\"schedule\":%s", js);
	}
	sbuf_printf(&b, "}}\n");
	api_json(a, &b);
}

/* ---- queries ------------------------------------------------------------------------------- */

static void sel_escape(struct sbuf *b, const char *v)
{
	sbuf_printf(b, "\"");
	for (; *v; v++)
		sbuf_printf(b, "%s%c", (*v == '"' || *v == '\\') ? "\\" : "", *v);
	sbuf_printf(b, "\"");
}

/*
 * The query's selector: query= as written, else one built from service= and labels=k=v,...
 * Returns 0 (sel may stay NULL = everything) or -1 with the answer set.
 */
static int api_selector(struct api_ctx *a, struct selector **sel)
{
	char text[API_PARAM_MAX], service[256], labels[API_PARAM_MAX], err[256];
	struct sbuf b = { 0 };
	bool raw;
	int ret;

	*sel = NULL;
	if (api_param(a, "query", text, sizeof(text)) < 0 ||
	    api_param(a, "service", service, sizeof(service)) < 0 ||
	    api_param_labels(a, labels, sizeof(labels), &raw) < 0)
		return -1;
	if (!text[0] && (service[0] || labels[0])) {
		char *save = NULL;
		bool first = true;

		sbuf_printf(&b, "%s{", service);
		for (char *kv = strtok_r(labels, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
			char *eq = strchr(kv, '=');

			if (!eq || (*eq = '\0', raw && (label_decode(kv) || label_decode(eq + 1))) ||
			    !label_key_ok(kv)) {
				sbuf_free(&b);
				api_error(a, 400, REJ_BAD_REQUEST, "labels: expected k=v,k2=v2");
				return -1;
			}
			sbuf_printf(&b, "%s%s=", first ? "" : ",", kv);
			sel_escape(&b, eq + 1);
			first = false;
		}
		sbuf_printf(&b, "}");
		if (b.oom || b.len >= sizeof(text)) {
			sbuf_free(&b);
			api_error(a, 400, REJ_BAD_REQUEST, "selector too long");
			return -1;
		}
		memcpy(text, b.p, b.len + 1);
		sbuf_free(&b);
	}
	if (!text[0])
		return 0;
	ret = selector__parse(text, 0, sel, err, sizeof(err));
	if (ret) {
		api_error(a, 400, REJ_BAD_REQUEST, "bad selector '%s': %s", text, err);
		return -1;
	}
	return 0;
}

static int api_time(struct api_ctx *a, const char *name, uint64_t *out)
{
	char v[128], err[200];
	int64_t ns;
	int ret = api_param(a, name, v, sizeof(v));

	if (ret <= 0)
		return ret;
	if (timeparse(v, (int64_t)port_clock_real_ns(), &ns, err, sizeof(err))) {
		api_error(a, 400, REJ_BAD_REQUEST, "%s: %s", name, err);
		return -1;
	}
	*out = ns > 0 ? (uint64_t)ns : 1;
	return 0;
}

/* Fills q from the request; 0 or -1 with the answer set. q->sel must be freed by the caller. */
int api_query(struct api_ctx *a, struct store_query *q, char *type, size_t typelen)
{
	char limit[32];

	memset(q, 0, sizeof(*q));
	if (api_param(a, "type", type, typelen) < 0 || api_param(a, "limit", limit,
								   sizeof(limit)) < 0)
		return -1;
	if (type[0] && !type_ok(type)) {
		api_error(a, 400, REJ_BAD_REQUEST, "unknown type '%s'", type);
		return -1;
	}
	q->type = type;
	q->limit = API_LIST_DEFAULT;
	if (limit[0]) {
		char *end;
		unsigned long n = strtoul(limit, &end, 10);

		if (*end || !n || n > API_LIST_MAX) {
			api_error(a, 400, REJ_BAD_REQUEST, "limit must be 1..%d", API_LIST_MAX);
			return -1;
		}
		q->limit = n;
	}
	if (api_time(a, "from", &q->from_ns) || api_time(a, "to", &q->to_ns))
		return -1;
	if (q->to_ns && q->from_ns > q->to_ns) {
		api_error(a, 400, REJ_BAD_REQUEST, "from is after to");
		return -1;
	}
	q->newest_first = true;
	return api_selector(a, (struct selector **)&q->sel);
}

struct list_ctx {
	struct sbuf *b;
	size_t n;
};

static int list_one(void *ctx, const struct store_entry *v)
{
	struct list_ctx *l = ctx;
	struct sbuf *b = l->b;

	sbuf_printf(b, "%s{\"id\":\"%" PRIu64 "\",\"service\":", l->n++ ? "," : "", v->seq);
	sbuf_json_str(b, v->service);
	sbuf_printf(b, ",\"type\":");
	sbuf_json_str(b, v->type);
	sbuf_printf(b, ",\"device\":");
	sbuf_json_str(b, v->device);
	sbuf_printf(b, ",\"labels\":");
	json_labels(b, v->labels, v->n_labels);
	sbuf_printf(b, ",\"created_at\":");
	json_time(b, v->time_ns);
	sbuf_printf(b, ",\"size\":%u}", v->size);
	return b->oom ? -ENOMEM : 0;
}

static void api_list(struct api_ctx *a)
{
	struct store_query q;
	struct sbuf b = { 0 };
	struct list_ctx l = { .b = &b };
	char type[64];
	int ret;

	if (api_query(a, &q, type, sizeof(type)))
		return;
	sbuf_printf(&b, "{\"code\":200,\"body\":[");
	ret = store__list(a->store, &q, list_one, &l);
	if (api_over_budget(a, q.sel))
		ret = 0, sbuf_free(&b);
	selector__free((struct selector *)q.sel);
	if (a->ans.status)
		return;
	if (ret < 0) {
		sbuf_free(&b);
		return api_error(a, 500, REJ_STORE, "listing failed: %s", strerror(-ret));
	}
	sbuf_printf(&b, "]}\n");
	api_json(a, &b);
}

static void api_send_profile(struct api_ctx *a, struct pprof_profile *p, size_t n)
{
	struct pprof_buf out = { .max = API_MAX_OUTPUT };
	size_t mem = pprof_profile__mem(p);
	int ret;

	/* the encoding (gzip: below the decoded size) while the profile is held, and its
	 * symbolized copy */
	if (api_query_take(a, (mem < API_MAX_OUTPUT ? mem : API_MAX_OUTPUT) +
			      api_symbolize_mem(a, p))) {
		pprof_profile__free(p);
		return;
	}
	p = api_symbolize(a, p);
	ret = pprof_write_profile(p, NULL, pprof_buf_write, &out);

	pprof_profile__free(p);
	if (ret) {
		free(out.data);
		return api_error(a, 500, REJ_STORE, "encoding the profile: %s", strerror(-ret));
	}
	api_set_body(a, 200, "application/octet-stream", out.data, out.len, false);
	snprintf(a->ans.extra, sizeof(a->ans.extra),
		 "X-Edgeprof-Profiles: %zu\r\nX-Edgeprof-Skipped: %zu\r\n", n, a->skipped);
}

/* After a selection: a 400 when the selector's regexes spent their CPU budget (true). */
bool api_over_budget(struct api_ctx *a, const struct selector *sel)
{
	if (!selector__over_budget(sel))
		return false;
	api_error(a, 400, REJ_BAD_REQUEST, "selector: its regexes took over %d ms of CPU on this "
		  "query: simplify them or narrow the time range", SELECTOR_MATCH_CPU_MS);
	return true;
}

const struct pprof_budget *api_query_budget(struct api_ctx *a)
{
	const struct mem_budget *mb = a->mem.b;

	if (!mb)
		return NULL;
	mem_charge__query(&a->mem);
	a->query = (struct pprof_budget){
		.take = mem_charge__take,
		.give = mem_charge__give,
		.ctx = &a->mem,
		.deadline_ns = mb->query_ms ? port_clock_mono_ns() + mb->query_ms * NSEC_PER_MSEC
					    : 0,
	};
	return &a->query;
}

/*
 * Why 503 for the time bound and not 504: 504 says a gateway's upstream did not answer, and
 * proxies and their monitoring read it so; here the collector itself gave up on its own bound
 * (Prometheus answers its query timeout with 503 too). No Retry-After: the same query will
 * take as long again unless it is narrowed; the message says so.
 */
bool api_query_refused(struct api_ctx *a, int ret, const char *what, const char *err)
{
	struct mem_budget *mb = a->mem.b;

	if (ret == -EFBIG) {
		api_error(a, 413, REJ_TOO_LARGE, "%s: %s", what, err);
	} else if (ret == -EAGAIN) {
		api_error(a, 503, REJ_BUSY, "%s: %s", what, err);
		snprintf(a->ans.extra, sizeof(a->ans.extra), "Retry-After: %u\r\n",
			 API_RETRY_AFTER_S);
	} else if (ret == -ETIMEDOUT) {
		if (mb)
			atomic_fetch_add(&mb->query_timeouts, 1);
		api_error(a, 503, REJ_TIMEOUT, "%s: the query took over %u ms (--query-timeout-ms) "
			  "and was stopped: narrow the time range or the selector (%s)", what,
			  mb ? mb->query_ms : 0, err);
	} else {
		return false;
	}
	return true;
}

int api_query_take(struct api_ctx *a, size_t bytes)
{
	char err[300] = "";
	int ret;

	if (!a->query.take)
		return 0;
	ret = pprof_budget__check(&a->query, err, sizeof(err));
	if (!ret)
		ret = a->query.take(a->query.ctx, bytes, err, sizeof(err));
	if (!ret)
		return 0;
	api_query_refused(a, ret, "render", err);
	return -1;
}

int api_merge_query(struct api_ctx *a, struct pprof_profile **p, size_t *n)
{
	struct store_query q;
	size_t skipped = 0;
	char type[64], err[300] = "";
	int ret;

	*p = NULL;
	*n = 0;
	if (api_query(a, &q, type, sizeof(type)))
		return -1;
	q.limit = 0;
	q.newest_first = false;
	q.budget = api_query_budget(a);
	ret = store__merge(a->store, &q, p, n, &skipped, err, sizeof(err));
	a->skipped = skipped;
	if (api_over_budget(a, q.sel)) {
		selector__free((struct selector *)q.sel);
		pprof_profile__free(*p);
		*p = NULL;
		return -1;
	}
	selector__free((struct selector *)q.sel);
	if (ret == -ENOENT) {
		api_set_body(a, 204, NULL, NULL, 0, true);
		return -1;
	}
	if (ret && !api_query_refused(a, ret, "merge", err))
		api_error(a, ret == -ENOMEM ? 503 : 400, ret == -ENOMEM ? REJ_STORE : REJ_BAD_REQUEST,
			  "merge: %s", err[0] ? err : strerror(-ret));
	return ret ? -1 : 0;
}

static void api_merge(struct api_ctx *a)
{
	struct pprof_profile *p;
	size_t n;

	if (!api_merge_query(a, &p, &n))
		api_send_profile(a, p, n);
}

/* "12+13+20" → seqs; 0 or -1 with the answer set. */
static int parse_ids(struct api_ctx *a, const char *s, uint64_t *ids, size_t *n)
{
	*n = 0;
	while (*s) {
		char *end;
		uint64_t v;

		if (!isdigit((unsigned char)*s))
			break;
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno || !v || *n == API_MAX_IDS)
			break;
		ids[(*n)++] = v;
		s = end;
		if (*s == '+' && s[1])
			s++;
		else if (*s)
			break;
	}
	if (*s || !*n) {
		api_error(a, 400, REJ_BAD_REQUEST, "profile ids are numbers joined by '+' "
			  "(at most %d)", API_MAX_IDS);
		return -1;
	}
	return 0;
}

static void api_get_ids(struct api_ctx *a, const char *ids_text)
{
	uint64_t *ids = calloc(API_MAX_IDS, sizeof(*ids));
	struct pprof_profile *p = NULL;
	char err[300] = "";
	size_t n;
	int ret;

	if (!ids)
		return api_error(a, 503, REJ_STORE, "out of memory");
	if (parse_ids(a, ids_text, ids, &n))
		goto out;
	if (n == 1) {
		struct record_meta meta;
		void *payload;
		size_t len;

		ret = store__get(a->store, ids[0], &meta, &payload, &len);
		if (ret == -ENOENT || ret == -EIO)
			api_error(a, 404, REJ_NOT_FOUND, "profile %" PRIu64 " %s", ids[0],
				  ret == -EIO ? "is damaged on disk" : "is not stored (or was "
				  "overwritten)");
		else if (ret)
			api_error(a, 500, REJ_STORE, "reading %" PRIu64 ": %s", ids[0],
				  strerror(-ret));
		else
			/* byte-identical to what was uploaded: payload is the allocation start */
			api_set_body(a, 200, "application/octet-stream", payload, len, false);
		goto out;
	}
	ret = store__merge_seqs(a->store, ids, n, api_query_budget(a), &p, err, sizeof(err));
	if (ret && api_query_refused(a, ret, "merge", err))
		;
	else if (ret)
		api_error(a, ret == -ENOENT ? 404 : 400,
			  ret == -ENOENT ? REJ_NOT_FOUND : REJ_BAD_REQUEST, "%s",
			  err[0] ? err : strerror(-ret));
	else
		api_send_profile(a, p, n);
out:
	free(ids);
}

static int service_one(void *ctx, const char *service)
{
	struct list_ctx *l = ctx;

	sbuf_printf(l->b, "%s", l->n++ ? "," : "");
	sbuf_json_str(l->b, service);
	return l->b->oom ? -ENOMEM : 0;
}

static void api_services(struct api_ctx *a)
{
	struct sbuf b = { 0 };
	struct list_ctx l = { .b = &b };

	sbuf_printf(&b, "{\"code\":200,\"body\":[");
	if (store__services(a->store, service_one, &l) < 0) {
		sbuf_free(&b);
		return api_error(a, 500, REJ_STORE, "listing services failed");
	}
	sbuf_printf(&b, "]}\n");
	api_json(a, &b);
}

static void api_version(struct api_ctx *a)
{
	struct sbuf b = { 0 };

	sbuf_printf(&b, "{\"code\":200,\"body\":{\"version\":\"%s\",\"service\":"
		    "\"edgeprof-collector\"}}\n", EDGEPROF_VERSION);
	api_json(a, &b);
}

/* 200 "ok" while uploads are taken (with the backend's state when it has one), else 503. */
static void api_healthz(struct api_ctx *a)
{
	char line[512];
	bool up = store__health(a->store, line, sizeof(line));
	struct sbuf b = { 0 };

	if (!line[0])
		return api_set_body(a, 200, "text/plain", "ok\n", 3, true);
	sbuf_printf(&b, "%s\n%s\n", up ? "ok" : "unavailable", line);
	if (b.oom)
		return api_error(a, 500, REJ_STORE, "out of memory");
	api_set_body(a, up ? 200 : 503, "text/plain", b.p, b.len, false);
}

static void api_ui(struct api_ctx *a)
{
	const struct ui_asset *u = ui_asset_find(a->req->path);

	if (!u)
		return api_error(a, 404, REJ_NOT_FOUND, "no such page: %s", a->req->path);
	api_set_body(a, 200, u->content_type, (void *)u->data, u->len, true);
}

/* ---- routing ------------------------------------------------------------------------------- */

struct route {
	const char *method;
	const char *path;	/* exact, or a prefix when it ends in '/' */
	void (*fn)(struct api_ctx *a);
	bool device_ok;		/* open to a device certificate (else operators only) */
};

static void api_get_one(struct api_ctx *a)
{
	api_get_ids(a, a->req->path + strlen("/api/0/profiles/"));
}

static const struct route routes[] = {
	{ "POST", "/api/0/profiles", api_post_profile, true },
	{ "GET", "/api/0/profiles", api_list, false },
	{ "GET", "/api/0/profiles/merge", api_merge, false },
	{ "GET", "/api/0/profiles/", api_get_one, false },
	{ "GET", "/api/0/services", api_services, false },
	{ "GET", "/api/0/version", api_version, true },
	{ "GET", "/api/0/render", api_render, false },
	{ "POST", "/api/0/render", api_render_file, false },
	{ "POST", "/api/0/debuginfo/", api_debuginfo_put, false },
	{ "GET", "/api/0/debuginfo", api_debuginfo_list, false },
	{ "GET", "/api/0/timeline", api_timeline, false },
	{ "GET", "/api/0/regressions", api_regressions, false },
	{ "GET", "/api/0/regressions/rules", api_regression_rules, false },
	{ "POST", "/ingest", api_pyroscope_ingest, true },
	{ "POST", "/push.v1.PusherService/Push", api_alloy_push, true },
	{ "GET", "/metrics", api_metrics, false },
	{ "GET", "/healthz", api_healthz, true },
	{ "GET", "/", api_ui, false },
	{ "GET", "/ui/", api_ui, false },
};

static bool route_match(const struct route *r, const char *path)
{
	size_t n = strlen(r->path);

	if (!strcmp(r->path, path))
		return true;
	return n > 1 && r->path[n - 1] == '/' && !strncmp(r->path, path, n) && path[n];
}

bool api_device_may(const char *method, const char *path)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (route_match(&routes[i], path) && !strcmp(routes[i].method, method))
			return routes[i].device_ok;
	return true; /* unknown: the 404 or 405 tells */
}

void api_handle(struct api_ctx *a)
{
	const char *path = a->req->path;
	bool path_known = false;

	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (!route_match(&routes[i], path))
			continue;
		path_known = true;
		if (!strcmp(routes[i].method, a->req->method)) {
			routes[i].fn(a);
			return;
		}
	}
	if (path_known)
		api_error(a, 405, REJ_METHOD, "%s is not allowed on %s", a->req->method, path);
	else
		api_error(a, 404, REJ_NOT_FOUND, "no such endpoint: %s", path);
}
