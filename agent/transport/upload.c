// SPDX-License-Identifier: MIT
/*
 * agent/transport/upload.c — one mTLS connection at a time to the collector, kept alive across a batch,
 * resumed across batches. See upload.h for the contract.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mbedtls/oid.h>
#include <mbedtls/x509_crt.h>

#include "agent/transport/upload.h"
#include "port/clock.h"
#include "port/http.h"
#include "port/log.h"
#include "port/net.h"
#include "port/tls.h"

#define UPLOAD_DEFAULT_TIMEOUT_MS 15000u
#define UPLOAD_TARGET_MAX	  4096u

struct uploader {
	struct tls_config *tls;
	char device[128];	/* our certificate's CN */
	char host[280];		/* as in the URL, brackets removed */
	char port[16];
	char host_header[280];
	unsigned timeout_ms;
	/* the open connection, or fd < 0 */
	int fd;
	struct tls_conn *conn;
	enum upload_state state;
	struct upload_stats stats;
	char err[256];
	struct http_stream stream;	/* 16 KiB head buffer, reused by every request */
	struct http_message resp;	/* the response (its own 16 KiB head): off the stack */
	char target[UPLOAD_TARGET_MAX];
	struct upload_schedule sched;	/* the last one the collector answered with */
	uint64_t told[UPLOAD_TOLD];	/* windows it told us to sample in (start, unix s) */
	uint64_t told_window_s;
	unsigned retry_after_s;		/* the last answer's Retry-After (0: none) */
};

/*
 * The subject CN of the PEM certificate in path: the collector's "device" label for us, and the
 * prefix of our idempotency keys (the collector's key space is fleet-wide). port/tls exposes the
 * peer's CN only; this one small read of our own certificate uses mbedtls' parser directly.
 */
int upload_cert_cn(const char *path, char *buf, size_t len)
{
	const mbedtls_x509_name *n;
	mbedtls_x509_crt crt;
	int ret = -ENOENT;

	mbedtls_x509_crt_init(&crt);
	if (mbedtls_x509_crt_parse_file(&crt, path)) {
		ret = -EINVAL;
		goto out;
	}
	for (n = &crt.subject; n; n = n->next) {
		if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid))
			continue;
		if (n->val.len >= len) {
			ret = -ENAMETOOLONG;
			break;
		}
		memcpy(buf, n->val.p, n->val.len);
		buf[n->val.len] = '\0';
		ret = 0;
		break;
	}
out:
	mbedtls_x509_crt_free(&crt);
	return ret;
}

const char *upload__device(const struct uploader *u)
{
	return u->device;
}

/* Splits https://HOST[:PORT][/] into host and port (443 by default). 0 or -EINVAL. */
static int upload_parse_url(struct uploader *u, const char *url)
{
	const char *p = url, *end;
	size_t n;

	if (strncmp(p, "https://", 8))
		return -EINVAL;
	p += 8;
	end = p + strcspn(p, "/");
	if (*end && strcmp(end, "/"))
		return -EINVAL;	/* a path prefix is not supported: the API lives at the root */
	n = (size_t)(end - p);
	if (!n || n >= sizeof(u->host_header))
		return -EINVAL;
	memcpy(u->host_header, p, n);
	u->host_header[n] = '\0';
	if (strchr(u->host_header, ':')) {
		if (net_split_hostport(u->host_header, u->host, sizeof(u->host), u->port,
				       sizeof(u->port)))
			return -EINVAL;
		if (!u->host[0] || !u->port[0])
			return -EINVAL;
		if (u->host_header[0] == '[' && !strchr(u->host_header, ']'))
			return -EINVAL;
	} else {
		snprintf(u->host, sizeof(u->host), "%s", u->host_header);
		snprintf(u->port, sizeof(u->port), "443");
	}
	return 0;
}

struct uploader *upload__new(const struct upload_opts *opts, char *err, size_t errlen)
{
	struct uploader *u = calloc(1, sizeof(*u));

	if (!u) {
		snprintf(err, errlen, "upload: out of memory");
		return NULL;
	}
	u->fd = -1;
	u->timeout_ms = opts->timeout_ms ? opts->timeout_ms : UPLOAD_DEFAULT_TIMEOUT_MS;
	if (!opts->url || upload_parse_url(u, opts->url)) {
		snprintf(err, errlen, "upload: bad collector URL '%s' (want https://HOST:PORT)",
			 opts->url ? opts->url : "");
		goto out_free;
	}
	if (!opts->ca_file || !opts->cert_file || !opts->key_file) {
		snprintf(err, errlen,
			 "upload: --tls-ca, --tls-cert and --tls-key are all required");
		goto out_free;
	}
	u->tls = tls_config__new_client(opts->ca_file, opts->cert_file, opts->key_file, err,
					errlen);
	if (!u->tls)
		goto out_free;
	if (upload_cert_cn(opts->cert_file, u->device, sizeof(u->device))) {
		snprintf(err, errlen, "upload: %s: no usable subject CN", opts->cert_file);
		tls_config__free(u->tls);
		goto out_free;
	}
	return u;

out_free:
	free(u);
	return NULL;
}

void upload__close(struct uploader *u)
{
	if (!u || u->fd < 0)
		return;
	if (u->conn) {
		tls_conn__set_deadline(u->conn, port_clock_mono_ns() + 100 * NSEC_PER_MSEC);
		tls_conn__close(u->conn);
		tls_conn__free(u->conn);
		u->conn = NULL;
	}
	close(u->fd);
	u->fd = -1;
}

void upload__free(struct uploader *u)
{
	if (!u)
		return;
	upload__close(u);
	tls_config__free(u->tls);
	free(u);
}

void upload__forget_session(struct uploader *u)
{
	tls_config__forget_session(u->tls);
}

const char *upload__error(const struct uploader *u)
{
	return u->err;
}

unsigned upload__retry_after(const struct uploader *u)
{
	return u->retry_after_s;
}

enum upload_state upload__state(const struct uploader *u)
{
	return u->state;
}

void upload__stats(const struct uploader *u, struct upload_stats *st)
{
	*st = u->stats;
}

/* Logs a state change once; repeated failures of the same kind stay quiet. */
static void upload_set_state(struct uploader *u, enum upload_state s)
{
	if (s == u->state)
		return;
	switch (s) {
	case UPLOAD_STATE_CONNECTED:
		pr_info("upload: connected to collector %s:%s", u->host, u->port);
		break;
	case UPLOAD_STATE_UNREACHABLE:
		pr_warn("upload: collector %s:%s unreachable (%s); is edgeprof-collector listening "
			"there? retrying; profiles wait in the --spool, if any", u->host, u->port,
			u->err);
		break;
	case UPLOAD_STATE_CERT_REFUSED:
		pr_err("upload: collector %s:%s: %s; profiles wait in the spool", u->host, u->port,
		       u->err);
		break;
	default:
		break;
	}
	u->state = s;
}

static ssize_t upload_bio_read(void *ctx, void *buf, size_t len)
{
	struct uploader *u = ctx;

	return tls_conn__read(u->conn, buf, len);
}

static int upload_bio_write(void *ctx, const void *buf, size_t len)
{
	struct uploader *u = ctx;
	int ret = tls_conn__write(u->conn, buf, len);

	if (!ret)
		u->stats.bytes_out += len;
	return ret;
}

/* Opens and handshakes a connection: 0, or the failure's state (reason in u->err). */
static int upload_connect(struct uploader *u, uint64_t deadline)
{
	char neterr[160];
	uint64_t cpu0, cpu;
	int fd, ret;

	fd = net_connect(u->host, u->port, deadline, neterr, sizeof(neterr));
	if (fd < 0) {
		snprintf(u->err, sizeof(u->err), "%s", neterr);
		return UPLOAD_STATE_UNREACHABLE;
	}
	u->stats.connects++;
	u->conn = tls_conn__new(u->tls, fd, u->host);
	if (!u->conn) {
		close(fd);
		snprintf(u->err, sizeof(u->err), "TLS: out of memory");
		return UPLOAD_STATE_UNREACHABLE;
	}
	u->fd = fd;
	tls_conn__set_deadline(u->conn, deadline);
	cpu0 = port_clock_cputime_ns();
	ret = tls_conn__handshake(u->conn);
	cpu = port_clock_cputime_ns() - cpu0;
	u->stats.handshake_cpu_ns += cpu;
	if (ret) {
		/*
		 * A collector that refuses our certificate (expired, other CA, wrong usage) just
		 * ends the handshake with an alert or by closing: it says no more than that.
		 */
		if (ret == -EACCES) {
			snprintf(u->err, sizeof(u->err), "%s", tls_conn__error(u->conn));
			ret = UPLOAD_STATE_CERT_REFUSED;
		} else if (ret == -ECONNRESET || strstr(tls_conn__error(u->conn), "alert")) {
			snprintf(u->err, sizeof(u->err),
				 "%s: the collector ended the handshake, most likely refusing our "
				 "device certificate (expired? signed by its CA?)",
				 tls_conn__error(u->conn));
			ret = UPLOAD_STATE_CERT_REFUSED;
		} else {
			snprintf(u->err, sizeof(u->err), "%s", tls_conn__error(u->conn));
			ret = UPLOAD_STATE_UNREACHABLE;
		}
		upload__close(u);
		return ret;
	}
	/* one stream per connection: bytes read past a response stay for the next one */
	http_stream__init(&u->stream, upload_bio_read, upload_bio_write, u);
	u->stats.handshakes++;
	if (tls_conn__resumed(u->conn)) {
		u->stats.resumed++;
		u->stats.resumed_cpu_ns += cpu;
	} else {
		u->stats.full_cpu_ns += cpu;
	}
	return 0;
}

/* Appends s to the target at *pos, percent-encoded. 0 or -ENAMETOOLONG. */
static int upload_target_add(struct uploader *u, size_t *pos, const char *s)
{
	int n = http_url_encode(s, u->target + *pos, sizeof(u->target) - *pos);

	if (n < 0)
		return n;
	*pos += (size_t)n;
	return 0;
}

static int upload_target_lit(struct uploader *u, size_t *pos, const char *s)
{
	size_t n = strlen(s);

	if (*pos + n >= sizeof(u->target))
		return -ENAMETOOLONG;
	memcpy(u->target + *pos, s, n + 1);
	*pos += n;
	return 0;
}

/* /api/0/profiles?service=..&type=..&labels=<encoded "k=v,k=v">. 0 or -ENAMETOOLONG. */
static int upload_build_target(struct uploader *u, const struct upload_req *req)
{
	char labels[2048];
	size_t pos = 0, lpos = 0;
	int ret = 0;

	labels[0] = '\0';
	for (size_t i = 0; i < req->n_labels; i++) {
		int n = snprintf(labels + lpos, sizeof(labels) - lpos, "%s%s=%s", i ? "," : "",
				 req->labels[i].key, req->labels[i].value);

		if (n < 0 || (size_t)n >= sizeof(labels) - lpos)
			return -ENAMETOOLONG;
		lpos += (size_t)n;
	}
	ret = ret ?: upload_target_lit(u, &pos, "/api/0/profiles?service=");
	ret = ret ?: upload_target_add(u, &pos, req->service);
	ret = ret ?: upload_target_lit(u, &pos, "&type=");
	ret = ret ?: upload_target_add(u, &pos, req->type ? req->type : "cpu");
	if (lpos) {
		ret = ret ?: upload_target_lit(u, &pos, "&labels=");
		ret = ret ?: upload_target_add(u, &pos, labels);
	}
	return ret;
}

int upload_label__check(const char *key, const char *value)
{
	if (!key || !*key || !value)
		return -EINVAL;
	for (const char *p = key; *p; p++)
		if (!(*p >= 'a' && *p <= 'z') && !(*p >= 'A' && *p <= 'Z') &&
		    !(*p >= '0' && *p <= '9') && !strchr("_.-", *p))
			return -EINVAL;
	if (strpbrk(value, ",={}\r\n"))
		return -EINVAL;
	return 0;
}

/*
 * A collector that cannot take the profile now (its queue to ClickHouse full) says when to
 * come back: kept, as the floor of the transport's next backoff. Seconds only (not an HTTP
 * date); capped at an hour, so a bad value cannot park the device.
 */
static void upload_retry_after(struct uploader *u, const struct http_message *m)
{
	const char *v = http_header(m, "retry-after");
	char *end;
	unsigned long s;

	if (!v)
		return;
	s = strtoul(v, &end, 10);
	if (end != v)
		u->retry_after_s = s > 3600 ? 3600 : (unsigned)s;
}

/* Remembers the windows a schedule told us to sample in: this one, and the next. */
static void upload_told(struct uploader *u, const struct upload_schedule *s)
{
	uint64_t w[2] = { s->sample ? s->window_start : 0, s->next_start };

	if (s->window_s != u->told_window_s) {
		memset(u->told, 0, sizeof(u->told));
		u->told_window_s = s->window_s;
	}
	for (size_t i = 0; i < 2; i++) {
		size_t old = 0, j;

		for (j = 0; w[i] && j < UPLOAD_TOLD && u->told[j] != w[i]; j++)
			if (u->told[j] < u->told[old])
				old = j;
		if (w[i] && j == UPLOAD_TOLD)
			u->told[old] = w[i];
	}
}

/* One request/response on the open connection: the HTTP status (> 0), or -errno. */
static int upload_exchange(struct uploader *u, const struct upload_req *req, uint64_t deadline)
{
	struct http_message *m = &u->resp;
	char extra[512];
	int ret, n;

	n = snprintf(extra, sizeof(extra),
		     "Content-Type: application/octet-stream\r\n%s%s%s",
		     req->key ? "X-Edgeprof-Key: " : "", req->key ? req->key : "",
		     req->key ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(extra))
		return -ENAMETOOLONG;
	tls_conn__set_deadline(u->conn, deadline);
	ret = http_write_request(&u->stream, "POST", u->host_header, u->target, extra, req->data,
				 req->len);
	if (ret)
		return ret;
	memset(m, 0, sizeof(*m));
	ret = http_read_response(&u->stream, m, UPLOAD_MAX_RESPONSE);
	if (ret) {
		http_message__reset(m);
		return ret;
	}
	ret = m->status;
	if (ret == 429 || ret == 503)
		upload_retry_after(u, m);
	if (ret < 200 || ret > 299) {
		/* Keep the collector's JSON error for the log: it says what was wrong. */
		snprintf(u->err, sizeof(u->err), "collector answered %d: %.180s", ret,
			 m->body ? (const char *)m->body : http_reason(ret));
	}
	else if (m->body && upload_schedule__parse((const char *)m->body, &u->sched))
		upload_told(u, &u->sched);
	if (!m->keep_alive)
		upload__close(u);
	http_message__reset(m);
	return ret;
}

/* The unsigned number after "name": in the object at obj (0 when absent). */
static uint64_t json_u64(const char *obj, const char *name)
{
	char pat[40];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", name);
	p = strstr(obj, pat);
	return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

bool upload_schedule__parse(const char *body, struct upload_schedule *s)
{
	const char *o = strstr(body, "\"schedule\":{");
	char obj[512];

	if (!o)
		return false;
	snprintf(obj, sizeof(obj), "%.*s", (int)strcspn(o, "}"), o);
	*s = (struct upload_schedule){
		.valid = true,
		.sample = strstr(obj, "\"sample\":true") != NULL,
		.window_s = json_u64(obj, "window_s"),
		.window_start = json_u64(obj, "window_start"),
		.next_start = json_u64(obj, "next_start"),
		.budget_percent = (unsigned)json_u64(obj, "budget_percent"),
	};
	s->valid = s->window_s > 0 && s->budget_percent > 0 && s->budget_percent <= 100;
	return s->valid;
}

uint64_t upload__told_window(const struct uploader *u, uint64_t t_s)
{
	uint64_t start;

	if (!u->told_window_s)
		return 0;
	start = t_s / u->told_window_s * u->told_window_s;
	for (size_t i = 0; i < UPLOAD_TOLD; i++)
		if (u->told[i] && u->told[i] == start)
			return t_s / u->told_window_s;
	return 0;
}

void upload__schedule(const struct uploader *u, struct upload_schedule *s)
{
	*s = u->sched;
}

static enum upload_result upload_classify(int status)
{
	if (status >= 200 && status <= 299)
		return UPLOAD_OK;
	if (status == 408 || status == 429 || status >= 500)
		return UPLOAD_RETRY;
	return UPLOAD_PERMANENT;
}

enum upload_result upload__post(struct uploader *u, const struct upload_req *req)
{
	uint64_t deadline = port_clock_mono_ns() + (uint64_t)u->timeout_ms * NSEC_PER_MSEC;
	enum upload_result res;
	int status = 0, attempt;

	u->err[0] = '\0';
	u->retry_after_s = 0;
	u->stats.requests++;
	for (size_t i = 0; i < req->n_labels; i++) {
		if (upload_label__check(req->labels[i].key, req->labels[i].value)) {
			snprintf(u->err, sizeof(u->err), "bad label '%s'", req->labels[i].key);
			u->stats.permanent++;
			return UPLOAD_PERMANENT;
		}
	}
	if (!req->service || !*req->service || upload_build_target(u, req)) {
		snprintf(u->err, sizeof(u->err), "service, type or labels too long or missing");
		u->stats.permanent++;
		return UPLOAD_PERMANENT;
	}
	/*
	 * A kept-alive connection may have been closed by the collector while idle; the first
	 * failure on a reused connection is retried once on a fresh one (the key makes a
	 * duplicate harmless).
	 */
	for (attempt = 0; attempt < 2; attempt++) {
		bool reused = u->fd >= 0;

		if (!reused) {
			int st = upload_connect(u, deadline);

			if (st) {
				upload_set_state(u, (enum upload_state)st);
				u->stats.retry++;
				return UPLOAD_RETRY;
			}
		} else {
			u->stats.reused++;
		}
		status = upload_exchange(u, req, deadline);
		if (status > 0)
			break;
		snprintf(u->err, sizeof(u->err), "%s",
			 status == -ETIMEDOUT ? "request timed out" :
			 u->conn ? tls_conn__error(u->conn) : strerror(-status));
		if (!u->err[0])
			snprintf(u->err, sizeof(u->err), "%s", strerror(-status));
		upload__close(u);
		if (!reused || status == -ETIMEDOUT)
			break;
	}
	u->stats.last_status = status > 0 ? status : 0;
	if (status <= 0) {
		upload_set_state(u, UPLOAD_STATE_UNREACHABLE);
		u->stats.retry++;
		return UPLOAD_RETRY;
	}
	res = upload_classify(status);
	if (status >= 500)
		upload_set_state(u, UPLOAD_STATE_UNREACHABLE);
	else
		upload_set_state(u, UPLOAD_STATE_CONNECTED);
	if (res == UPLOAD_OK)
		u->stats.ok++;
	else if (res == UPLOAD_RETRY)
		u->stats.retry++;
	else
		u->stats.permanent++;
	if (res == UPLOAD_PERMANENT)
		pr_warn("upload: %s/%s key %s refused for good: %s", req->service,
			req->type ? req->type : "cpu", req->key ? req->key : "-", u->err);
	return res;
}
