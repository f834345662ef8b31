// SPDX-License-Identifier: MIT
/*
 * store/api/api-ingest.c — what Pyroscope's SDKs and Grafana Alloy push:
 *   POST /ingest?name=app{k=v}&from=&until=&format=pprof    raw or multipart/form-data body
 *   POST /push.v1.PusherService/Push                        Connect unary, application/proto
 * Both end in api_store_profile(): same validation, same device rule, same durability.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <pb_decode.h>

#include "port/clock.h"
#include "store/api/push.pb.h"
#include "store/query/selector.h"
#include "store/api/api.h"

#define PUSH_MAX_SAMPLES 256	/* raw profiles per series */
#define PUSH_ARENA	 16384	/* label bytes per series */

/*
 * Pyroscope reads from/until by digit count: 8 = YYYYMMDD, 13 = ms, 16 = µs, 19 = ns, otherwise
 * seconds. Returns 0 and ns, or -EINVAL.
 */
static int pyro_time(const char *s, int64_t *ns)
{
	size_t n = strlen(s);
	int64_t v = 0;

	if (!n || n > 19)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	switch (n) {
	case 8: {
		struct tm tm = { .tm_year = (int)(v / 10000) - 1900,
				 .tm_mon = (int)(v / 100 % 100) - 1,
				 .tm_mday = (int)(v % 100) };

		if (tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31)
			return -EINVAL;
		*ns = (int64_t)timegm(&tm) * (int64_t)NSEC_PER_SEC;
		return 0;
	}
	case 13: *ns = v * 1000000; return 0;
	case 16: *ns = v * 1000; return 0;
	case 19: *ns = v; return 0;
	default:
		if (v > INT64_MAX / (int64_t)NSEC_PER_SEC)
			return -EINVAL;
		*ns = v * (int64_t)NSEC_PER_SEC;
		return 0;
	}
}

/* The "profile" part of a multipart/form-data body: 0 and its bytes, or -EINVAL. */
static int multipart_profile(const char *ctype, const unsigned char *body, size_t len,
			     const unsigned char **part, size_t *part_len)
{
	const char *b = strcasestr(ctype, "boundary=");
	char delim[128];
	const unsigned char *p = body, *end = body + len;
	size_t dl, bl;

	if (!b)
		return -EINVAL;
	b += 9;
	bl = *b == '"' ? strcspn(b + 1, "\"") : strcspn(b, "; \t");
	if (*b == '"')
		b++;
	if (!bl || bl > 70)
		return -EINVAL;
	dl = (size_t)snprintf(delim, sizeof(delim), "--%.*s", (int)bl, b);
	while ((p = memmem(p, (size_t)(end - p), delim, dl))) {
		const unsigned char *hdr = p + dl, *data, *next;

		if (hdr + 2 > end || !memcmp(hdr, "--", 2))
			return -EINVAL; /* the closing delimiter: no profile part */
		data = memmem(hdr, (size_t)(end - hdr), "\r\n\r\n", 4);
		if (!data)
			return -EINVAL;
		data += 4;
		next = memmem(data, (size_t)(end - data), delim, dl);
		if (!next || next - data < 2)
			return -EINVAL;
		{
			char h[1024];
			size_t hl = (size_t)(data - hdr) < sizeof(h) ? (size_t)(data - hdr)
								      : sizeof(h) - 1;

			memcpy(h, hdr, hl);
			h[hl] = '\0';
			if (strcasestr(h, "name=\"profile\"")) {
				*part = data;
				*part_len = (size_t)(next - 2 - data); /* minus the CRLF */
				return 0;
			}
		}
		p = next;
	}
	return -EINVAL;
}

/* Labels from a parsed name=app{k=v,...}: __name__ and __*__ are Pyroscope's own. */
static int pyro_labels(struct api_ctx *a, const struct selector *sel, struct ingest *in)
{
	for (size_t i = 0; i < selector__n_matchers(sel); i++) {
		const char *k, *v;
		enum selector_op op;

		selector__matcher(sel, i, &k, &op, &v);
		if (!strncmp(k, "__", 2) || !strcmp(k, "device"))
			continue;
		if (in->n_labels >= STORE_MAX_LABELS - 1) {
			api_error(a, 400, REJ_BAD_REQUEST, "more than %u labels",
				  STORE_MAX_LABELS - 1);
			return -E2BIG;
		}
		in->labels[in->n_labels].key = k;
		in->labels[in->n_labels++].value = v;
	}
	return 0;
}

void api_pyroscope_ingest(struct api_ctx *a)
{
	char name[4096], from[32], until[32], format[32], err[256];
	const char *ctype = http_header(a->req, "content-type");
	const unsigned char *body = a->req->body;
	size_t len = a->req->body_len;
	struct selector *sel = NULL;
	struct ingest in = { 0 };
	uint64_t seq;
	bool dup = false;

	if (http_query_get(a->req->query, "name", name, sizeof(name)) <= 0)
		return api_error(a, 400, REJ_BAD_REQUEST, "name is required: app{key=value,...}");
	if (http_query_get(a->req->query, "from", from, sizeof(from)) < 0)
		from[0] = '\0';
	if (http_query_get(a->req->query, "until", until, sizeof(until)) < 0)
		until[0] = '\0';
	if (http_query_get(a->req->query, "format", format, sizeof(format)) < 0)
		format[0] = '\0';
	if (ctype && !strncasecmp(ctype, "multipart/form-data", 19)) {
		if (multipart_profile(ctype, a->req->body, a->req->body_len, &body, &len))
			return api_error(a, 400, REJ_BAD_REQUEST,
					 "multipart body without a 'profile' part");
	} else if (format[0] && strcmp(format, "pprof")) {
		return api_error(a, 422, REJ_BAD_REQUEST,
				 "format '%s' is not supported: send pprof", format);
	}
	if (from[0] && pyro_time(from, &in.created_ns))
		return api_error(a, 400, REJ_BAD_REQUEST, "from '%s' is not a time", from);
	if (until[0]) {
		int64_t u;

		if (pyro_time(until, &u))
			return api_error(a, 400, REJ_BAD_REQUEST, "until '%s' is not a time",
					 until);
	}
	if (selector__parse(name, SELECTOR_F_INGEST, &sel, err, sizeof(err)))
		return api_error(a, 400, REJ_BAD_REQUEST, "name '%s': %s", name, err);
	in.service = selector__service(sel);
	if (!in.service[0]) {
		selector__free(sel);
		return api_error(a, 400, REJ_BAD_REQUEST, "name '%s' has no application name",
				 name);
	}
	in.key = http_header(a->req, "x-edgeprof-key");
	if (!pyro_labels(a, sel, &in) &&
	    !api_store_profile(a, &in, body, len, &seq, &dup, NULL)) {
		a->ans.status = 200;
		a->ans.content_type = NULL;
		snprintf(a->ans.extra, sizeof(a->ans.extra), "X-Edgeprof-Id: %" PRIu64 "\r\n",
			 seq);
	}
	selector__free(sel);
}

/* ---- Alloy: push.v1.PusherService/Push ------------------------------------------------------ */

struct push_series {
	struct ingest in;
	char arena[PUSH_ARENA];
	size_t arena_len;
	struct { const unsigned char *p; size_t len; } samples[PUSH_MAX_SAMPLES];
	size_t n_samples;
	const char *err;
};

struct push_ctx {
	struct api_ctx *a;
	struct push_series *s;
	size_t stored, series;
	bool failed; /* the answer is set */
};

/* A string field into the series' arena. */
static bool push_str(pb_istream_t *stream, struct push_series *s, const char **out)
{
	size_t n = stream->bytes_left;

	if (s->arena_len + n + 1 > sizeof(s->arena)) {
		s->err = "labels of one series exceed 16 KiB";
		return false;
	}
	if (!pb_read(stream, (pb_byte_t *)s->arena + s->arena_len, n))
		return false;
	s->arena[s->arena_len + n] = '\0';
	*out = s->arena + s->arena_len;
	s->arena_len += n + 1;
	return true;
}

struct push_label {
	struct push_series *s;
	const char *name, *value;
};

static bool push_label_name(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
	struct push_label *l = *arg;

	return push_str(stream, l->s, &l->name);
}

static bool push_label_value(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
	struct push_label *l = *arg;

	return push_str(stream, l->s, &l->value);
}

static const char *push_type(const char *name)
{
	if (!strcmp(name, "process_cpu"))
		return "cpu";
	if (!strcmp(name, "memory"))
		return "heap";
	if (!strcmp(name, "mutex") || !strcmp(name, "block") || !strcmp(name, "goroutine"))
		return name;
	return NULL; /* from the profile */
}

static bool push_on_label(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
	struct push_series *s = *arg;
	struct push_label l = { .s = s, .name = "", .value = "" };
	push_v1_LabelPair lp = {
		.name = { .funcs.decode = push_label_name, .arg = &l },
		.value = { .funcs.decode = push_label_value, .arg = &l },
	};

	if (!pb_decode(stream, push_v1_LabelPair_fields, &lp))
		return false;
	if (!strcmp(l.name, "service_name")) {
		s->in.service = l.value;
	} else if (!strcmp(l.name, "__name__")) {
		s->in.type = push_type(l.value);
	} else if (strncmp(l.name, "__", 2) && strcmp(l.name, "device") && *l.name) {
		if (s->in.n_labels >= STORE_MAX_LABELS - 1) {
			s->err = "too many labels in a series";
			return false;
		}
		for (size_t i = 0; i < s->in.n_labels; i++)
			if (!strcmp(s->in.labels[i].key, l.name))
				return true; /* first one wins */
		s->in.labels[s->in.n_labels].key = l.name;
		s->in.labels[s->in.n_labels++].value = l.value;
	}
	return true;
}

/* raw_profile: keep a pointer into the request body instead of copying it. */
static bool push_raw_profile(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
	struct push_series *s = *arg;
	size_t n = stream->bytes_left;

	if (s->n_samples == PUSH_MAX_SAMPLES) {
		s->err = "more than 256 profiles in a series";
		return false;
	}
	s->samples[s->n_samples].p = stream->state;
	s->samples[s->n_samples++].len = n;
	return pb_read(stream, NULL, n);
}

static bool push_on_sample(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
	push_v1_RawSample rs = { .raw_profile = { .funcs.decode = push_raw_profile, .arg = *arg } };

	return pb_decode(stream, push_v1_RawSample_fields, &rs);
}

static bool push_on_series(pb_istream_t *stream, const pb_field_t *field, void **arg)
{
	struct push_ctx *p = *arg;
	struct push_series *s = p->s;
	push_v1_RawProfileSeries rps = {
		.labels = { .funcs.decode = push_on_label, .arg = s },
		.samples = { .funcs.decode = push_on_sample, .arg = s },
	};

	memset(&s->in, 0, sizeof(s->in));
	s->arena_len = 0;
	s->n_samples = 0;
	if (!pb_decode(stream, push_v1_RawProfileSeries_fields, &rps))
		return false;
	if (!s->in.service)
		s->in.service = "unknown";
	p->series++;
	for (size_t i = 0; i < s->n_samples; i++) {
		uint64_t seq;
		bool dup = false;
		struct ingest in = s->in; /* api_store_profile may add a label */

		if (api_store_profile(p->a, &in, s->samples[i].p, s->samples[i].len, &seq, &dup,
				      NULL)) {
			p->failed = true;
			return false;
		}
		p->stored++;
	}
	return true;
}

void api_alloy_push(struct api_ctx *a)
{
	const char *ctype = http_header(a->req, "content-type");
	struct push_ctx p = { .a = a };
	push_v1_PushRequest req = { .series = { .funcs.decode = push_on_series, .arg = &p } };
	pb_istream_t stream;
	size_t n;

	if (!ctype || (strncasecmp(ctype, "application/proto", 17) &&
		       strncasecmp(ctype, "application/x-protobuf", 22)))
		return api_error(a, 415, REJ_BAD_REQUEST,
				 "send Content-Type: application/proto (Connect unary)");
	p.s = malloc(sizeof(*p.s));
	if (!p.s)
		return api_error(a, 503, REJ_STORE, "out of memory");
	p.s->err = NULL;
	stream = pb_istream_from_buffer(a->req->body, a->req->body_len);
	if (!pb_decode(&stream, push_v1_PushRequest_fields, &req) && !p.failed)
		api_error(a, 400, REJ_BAD_REQUEST, "PushRequest does not decode: %s",
			  p.s->err ? p.s->err : PB_GET_ERROR(&stream));
	else if (!p.failed)
		a->ans.status = 200; /* an empty PushResponse */
	a->ans.content_type = a->ans.status == 200 ? "application/proto" : a->ans.content_type;
	/* On a failure mid-request, say how many were stored before it (keyed retries dedup) */
	/* after a Retry-After api_store_profile may have set */
	n = strlen(a->ans.extra);
	snprintf(a->ans.extra + n, sizeof(a->ans.extra) - n, "X-Edgeprof-Stored: %zu\r\n",
		 p.stored);
	free(p.s);
}
