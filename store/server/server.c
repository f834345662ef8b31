// SPDX-License-Identifier: MIT
/*
 * store/server/server.c — listeners, the connection cap, one thread per connection, TLS handshake and
 * device identity, HTTP keep-alive with per-request deadlines, plain-HTTP token check, clean
 * shutdown. Requests read whole go to the handler (struct server_handler: the API's, store/api/,
 * set by store/main.c); the server answers only its own refusals.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/base64.h>

#include "port/clock.h"
#include "port/log.h"
#include "port/net.h"
#include "port/tls.h"
#include "store/server/server.h"

#define CONN_STACK_SIZE (512u * 1024)

const char *const reject_reason_names[REJ__N] = {
	"bad_request", "bad_profile", "too_large", "header_too_large", "timeout",
	"unauthorized", "not_found", "method", "store", "busy", "forbidden",
};
const char *const tls_fail_names[TLSF__N] = { "no_cert", "bad_cert", "timeout", "other" };
const char *const scrape_fail_names[SCRAPE_FAIL__N] = {
	"bad_url", "connect", "tls", "io", "too_large", "status",
};

struct conn;

/*
 * Each listener has its own budgets, so a flood on one never starves the other: max_conns
 * authenticated connections (a valid certificate, or a plain-HTTP request head that passed the
 * token check), and max_handshakes connections not yet authenticated (in their TLS handshake, or
 * before their first request head). When a new connection needs an unauthenticated slot and
 * none is free, the one that has been silent longest is closed (evicted): an idle flood, even
 * from one address (a NAT), only ever evicts itself while clients that talk get through.
 */
struct listener {
	int fd;
	bool tls;
	const char *name;
	unsigned conns;			/* authenticated */
	unsigned preauth;		/* on the list below */
	struct conn *pre_first;		/* unauthenticated, oldest first */
};

struct server {
	struct server_opts o;
	struct server_handler h;	/* answers the requests (server__set_handler) */
	struct tls_config *tls;
	struct listener lis[2];		/* [0] mutual TLS, [1] plain HTTP */
	int stop_pipe[2];
	atomic_bool stopping;
	pthread_mutex_t lock;		/* the listeners' counts and lists, active */
	pthread_cond_t idle;
	unsigned active;		/* connection threads */
	struct pollfd *pfd;		/* the accept loop's: stop pipe, listeners, waiting conns */
	struct conn **waiting;		/* pfd[3 + i] belongs to waiting[i] */
	struct port_ratelimit rl_refused, rl_evicted, rl_tls;
	struct server_metrics m;
};

struct conn {
	struct server *srv;
	struct listener *l;
	struct conn *pre_prev, *pre_next; /* on l's unauthenticated list (under srv->lock) */
	bool in_preauth, authed, evicted; /* under srv->lock */
	bool started;			/* has its thread; before, only the accept loop owns it */
	atomic_uint_fast64_t last_rx;	/* plain HTTP: when the peer last sent a byte */
	uint64_t accepted;		/* CLOCK_MONOTONIC ns */
	uint64_t seen_rx;		/* when an eviction found bytes it had not read yet */
	int fd;
	bool tls;		/* from the mTLS listener */
	bool operator;		/* may read: OU=operator certificate, or plain HTTP (token) */
	bool linger;		/* answered before reading all the client sent */
	struct tls_conn *tc;	/* NULL on the plain-HTTP listener */
	uint64_t deadline;
	char peer[64];
	char device[256];
	struct http_stream stream;
	struct http_message msg;
};

/*
 * What a started connection holds, from the budget (mem_budget__hold()): its struct (two
 * 16 KiB head buffers), the TLS record buffers (2 x ~17 KiB), its thread's stack pages and
 * the allocator's share.
 * Measured: 200 authenticated connections, each waiting for the rest of its request head,
 * took 96 KiB each of RSS (sizeof(struct conn) is ~33 KiB of it).
 */
#define CONN_MEM_COST (sizeof(struct conn) + 64u * 1024)

static ssize_t conn_read_plain(void *ctx, void *buf, size_t len)
{
	struct conn *c = ctx;
	ssize_t n = net_read(c->fd, buf, len, c->deadline);

	if (n > 0)
		atomic_store_explicit(&c->last_rx, port_clock_mono_ns(), memory_order_relaxed);
	return n;
}

static int conn_write_plain(void *ctx, const void *buf, size_t len)
{
	struct conn *c = ctx;

	return net_write(c->fd, buf, len, c->deadline);
}

static ssize_t conn_read_tls(void *ctx, void *buf, size_t len)
{
	struct conn *c = ctx;

	return tls_conn__read(c->tc, buf, len);
}

static int conn_write_tls(void *ctx, const void *buf, size_t len)
{
	struct conn *c = ctx;

	return tls_conn__write(c->tc, buf, len);
}

static void conn_set_deadline(struct conn *c, uint64_t ms)
{
	c->deadline = port_clock_mono_ns() + ms * NSEC_PER_MSEC;
	if (c->tc)
		tls_conn__set_deadline(c->tc, c->deadline);
}

/*
 * A warning a client can cause at will: a few lines a second (one for floods of refusals and
 * evictions, ten for refused handshakes, each saying why), with a count of the rest.
 */
static void __attribute__((format(printf, 3, 4)))
log_limited(struct port_ratelimit *rl, unsigned burst, const char *fmt, ...)
{
	char line[400];
	uint64_t missed;
	va_list ap;

	if (!port_ratelimit(rl, burst, &missed))
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (missed)
		pr_warn("%s (and %llu more like it in the last second)", line,
			(unsigned long long)missed);
	else
		pr_warn("%s", line);
}

static uint64_t conn_last_rx(const struct conn *c)
{
	uint64_t t = c->tc ? tls_conn__last_rx(c->tc)
			   : atomic_load_explicit(&c->last_rx, memory_order_relaxed);

	if (t < c->seen_rx)
		t = c->seen_rx;
	return t > c->accepted ? t : c->accepted;
}

/* Bytes the peer sent that its thread has not read yet (it is not idle, just not scheduled). */
static bool conn_has_unread(const struct conn *c)
{
	int n = 0;

	return !ioctl(c->fd, FIONREAD, &n) && n > 0;
}

/* Under s->lock. */
static void preauth_unlink(struct server *s, struct conn *c)
{
	struct listener *l = c->l;

	if (!c->in_preauth)
		return;
	if (c->pre_prev)
		c->pre_prev->pre_next = c->pre_next;
	else
		l->pre_first = c->pre_next;
	if (c->pre_next)
		c->pre_next->pre_prev = c->pre_prev;
	c->pre_prev = c->pre_next = NULL;
	c->in_preauth = false;
	l->preauth--;
	s->m.conns_preauth--;
}

/* Under s->lock: adds c to its listener's unauthenticated list. */
static void preauth_link(struct server *s, struct conn *c)
{
	struct listener *l = c->l;

	c->pre_prev = NULL;
	c->pre_next = l->pre_first;
	if (l->pre_first)
		l->pre_first->pre_prev = c;
	l->pre_first = c;
	c->in_preauth = true;
	l->preauth++;
	s->m.conns_preauth++;
}

/*
 * Under s->lock: closes the unauthenticated connection of l that has been silent longest.
 * shutdown() wakes its thread (which still owns the fd: it leaves the list before closing).
 */
static void preauth_evict(struct server *s, struct listener *l)
{
	struct conn *victim = NULL;
	uint64_t oldest = UINT64_MAX;

	for (int tries = 0; tries < 4; tries++) {
		uint64_t best = UINT64_MAX;

		victim = NULL;
		for (struct conn *c = l->pre_first; c; c = c->pre_next) {
			uint64_t t = conn_last_rx(c);
			/* Those that never sent a byte go first (oldest first), then the silent. */
			uint64_t rank = (t > c->accepted ? 1ull << 63 : 0) | (t >> 1);

			if (rank < best) {
				best = rank;
				oldest = t;
				victim = c;
			}
		}
		if (!victim || !conn_has_unread(victim))
			break;
		victim->seen_rx = port_clock_mono_ns(); /* it talks: look for another */
	}
	if (!victim)
		return;
	preauth_unlink(s, victim);
	victim->evicted = true;
	s->m.conns_evicted++;
	log_limited(&s->rl_evicted, 1, "closed unauthenticated %s, silent for %llu ms: %u "
		    "unauthenticated connections on the %s listener (--max-handshakes)",
		    victim->peer,
		    (unsigned long long)((port_clock_mono_ns() - oldest) / NSEC_PER_MSEC),
		    s->o.max_handshakes, l->name);
	if (victim->started) {
		shutdown(victim->fd, SHUT_RDWR); /* its thread closes and frees */
	} else {
		close(victim->fd);
		free(victim);
	}
}

/*
 * c has authenticated: it moves to its listener's authenticated budget. False when it was
 * evicted meanwhile or that budget is full (then counted and logged as refused).
 */
static bool conn_promote(struct conn *c)
{
	struct server *s = c->srv;
	struct listener *l = c->l;
	bool ok, evicted;

	if (c->authed)
		return true;
	pthread_mutex_lock(&s->lock);
	evicted = c->evicted;
	ok = !evicted && l->conns < s->o.max_conns;
	preauth_unlink(s, c);
	if (ok) {
		l->conns++;
		c->authed = true;
	}
	pthread_mutex_unlock(&s->lock);
	if (!ok && !evicted) {
		s->m.conns_refused++;
		s->m.rejected[REJ_BUSY]++;
		log_limited(&s->rl_refused, 1, "refused %s: %u authenticated connections open on the "
			    "%s listener (--max-conns)", c->peer, s->o.max_conns, l->name);
	}
	return ok;
}

static enum tls_fail_reason tls_fail_reason(int ret, const char *msg)
{
	if (ret == -ETIMEDOUT)
		return TLSF_TIMEOUT;
	if (ret == -EACCES)
		return strstr(msg, "no certificate") ? TLSF_NO_CERT : TLSF_BAD_CERT;
	return TLSF_OTHER;
}

/* The CN becomes a label value: refuse what a label value cannot hold. */
static bool device_name_ok(const char *cn)
{
	if (!*cn)
		return false;
	for (const char *p = cn; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return true;
}

static int conn_handshake(struct conn *c)
{
	struct server *s = c->srv;
	int ret;

	conn_set_deadline(c, s->o.handshake_timeout_ms);
	tls_conn__set_cancel_fd(c->tc, s->stop_pipe[0]); /* shutdown does not wait for hellos */
	ret = tls_conn__handshake(c->tc);
	tls_conn__set_cancel_fd(c->tc, -1); /* a request in progress is finished */
	if (ret) {
		const char *msg = tls_conn__error(c->tc);

		s->m.tls_failures[tls_fail_reason(ret, msg)]++;
		/* let the alert reach the client before the close resets what it still sends */
		c->linger = ret == -EACCES;
		/* A peer that connects and leaves (port scan, health check) is not news. */
		if (ret == -ECONNRESET || ret == -ECANCELED)
			pr_debug("%s: %s", c->peer, msg);
		else
			log_limited(&s->rl_tls, 10, "refused TLS client %s: %s", c->peer, msg);
		return ret;
	}
	s->m.tls_handshakes++;
	if (tls_conn__resumed(c->tc))
		s->m.tls_resumed++;
	if (tls_conn__peer_cn(c->tc, c->device, sizeof(c->device)) ||
	    !device_name_ok(c->device)) {
		s->m.tls_failures[TLSF_BAD_CERT]++;
		log_limited(&s->rl_tls, 10, "refused TLS client %s: its certificate has no usable CN",
			    c->peer);
		return -EACCES;
	}
	c->operator = tls_conn__peer_has_ou(c->tc, "operator");
	pr_debug("%s: %s %s (%s%s)", c->peer, c->operator ? "operator" : "device", c->device,
		 tls_conn__cipher(c->tc), tls_conn__resumed(c->tc) ? ", resumed" : "");
	return 0;
}

/* Waits for the next request's first byte, the idle timeout, or shutdown: true to go on. */
static bool conn_wait_request(struct conn *c)
{
	struct server *s = c->srv;
	struct pollfd pfd[2] = {
		{ .fd = c->fd, .events = POLLIN },
		{ .fd = s->stop_pipe[0], .events = POLLIN },
	};
	int n;

	if (c->stream.len > c->stream.consumed || (c->tc && tls_conn__pending(c->tc)))
		return true;
	do {
		n = poll(pfd, 2, (int)s->o.idle_timeout_ms);
	} while (n < 0 && errno == EINTR);
	return n > 0 && !(pfd[1].revents & POLLIN) && (pfd[0].revents & (POLLIN | POLLHUP));
}

static bool token_ok(const char *want, const char *got, size_t len)
{
	size_t wl = strlen(want);
	unsigned char diff = (unsigned char)(wl != len);

	for (size_t i = 0; i < len; i++)
		diff |= (unsigned char)(got[i] ^ want[i % (wl ? wl : 1)]);
	return !diff;
}

/* The web UI's cookie (see ui_login): "edgeprof_token=TOKEN" among the request's cookies. */
static bool cookie_token_ok(struct conn *c, const char *want)
{
	const char *cookie = http_header(&c->msg, "cookie"), *v;

	for (v = cookie; v && (v = strstr(v, "edgeprof_token=")); v++) {
		if (v != cookie && v[-1] != ' ' && v[-1] != ';')
			continue;
		v += strlen("edgeprof_token=");
		return token_ok(want, v, strcspn(v, "; "));
	}
	return false;
}

/* Plain HTTP with a token: "Bearer TOKEN", "Basic base64(user:TOKEN)", or the UI's cookie. */
static bool conn_authorized(struct conn *c)
{
	const char *want = c->srv->o.http_token;
	const char *auth = http_header(&c->msg, "authorization");
	unsigned char dec[512];
	size_t n = 0;

	if (c->tc || !want || !strcmp(c->msg.path, "/healthz"))
		return true;
	if (cookie_token_ok(c, want))
		return true;
	if (!auth)
		return false;
	if (!strncasecmp(auth, "Bearer ", 7))
		return token_ok(want, auth + 7, strlen(auth + 7));
	if (strncasecmp(auth, "Basic ", 6) ||
	    mbedtls_base64_decode(dec, sizeof(dec) - 1, &n, (const unsigned char *)auth + 6,
				  strlen(auth + 6)))
		return false;
	dec[n] = '\0';
	{
		char *colon = strchr((char *)dec, ':');

		return colon && token_ok(want, colon + 1, strlen(colon + 1));
	}
}

static const char login_form[] =
	"<!doctype html><html><head><meta charset=\"utf-8\"><title>edgeprof</title></head>"
	"<body style=\"font:14px sans-serif;margin:40px\"><h2>edgeprof</h2>"
	"<form method=\"get\" action=\"/\"><label>access token "
	"<input name=\"token\" type=\"password\" autofocus></label> "
	"<button>open</button></form></body></html>";

/*
 * Browsers hold no bearer tokens: a page of the web UI asked without one takes it once, from
 * /?token=TOKEN or the login form, and keeps it in an HttpOnly cookie. True when it answered.
 */
static bool ui_login(struct conn *c, struct server_answer *an)
{
	const char *want = c->srv->o.http_token;
	char token[129]; /* main.c refuses longer tokens */

	if (strcmp(c->msg.method, "GET") ||
	    (strcmp(c->msg.path, "/") && strncmp(c->msg.path, "/ui/", 4)))
		return false;
	if (http_query_get(c->msg.query, "token", token, sizeof(token)) >= 0 &&
	    token_ok(want, token, strlen(token))) {
		server_answer__set(an, 303, "text/plain", "ok\n", 3, true);
		/* The token is the cookie's value; Strict keeps other sites from sending it. */
		snprintf(an->extra, sizeof(an->extra),
			 "Location: /\r\nSet-Cookie: edgeprof_token=%s; HttpOnly; SameSite=Strict; "
			 "Path=/\r\n", token);
		return true;
	}
	server_answer__set(an, 401, "text/html; charset=utf-8", (void *)login_form,
			   sizeof(login_form) - 1, true);
	return true;
}

/* One of the server's own refusals, counted under r and logged as the API's are. */
static void conn_error(struct conn *c, struct server_answer *an, int status,
		       enum reject_reason r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	server_answer__verror(an, &c->srv->m, c->peer, c->device, c->msg.path, status, r, fmt,
			      ap);
	va_end(ap);
}

/* The answer to a request without the token: the UI's login, or a 401. */
static void conn_unauthorized(struct conn *c, struct server_answer *an)
{
	if (ui_login(c, an)) {
		c->srv->m.rejected[REJ_UNAUTHORIZED] += an->status == 401;
		return;
	}
	conn_error(c, an, 401, REJ_UNAUTHORIZED, "this listener needs a token: "
		   "Authorization: Bearer TOKEN");
	snprintf(an->extra, sizeof(an->extra), "WWW-Authenticate: Bearer realm=\"edgeprof\"\r\n");
}

/*
 * Defence in depth for the UI (names in profiles come from devices): no content sniffing on
 * any answer; pages run only this origin's scripts and are never framed.
 */
#define HDR_NOSNIFF "X-Content-Type-Options: nosniff\r\n"
#define HDR_CSP	"Content-Security-Policy: default-src 'self'; img-src 'self' data:; " \
		"style-src 'self' 'unsafe-inline'; base-uri 'none'; form-action 'self'; " \
		"frame-ancestors 'none'\r\nX-Frame-Options: DENY\r\n"

static void conn_answer(struct conn *c, struct server_answer *an, bool keep_alive)
{
	char extra[sizeof(an->extra) + sizeof(HDR_NOSNIFF HDR_CSP)];
	bool html = an->content_type && !strncmp(an->content_type, "text/html", 9);
	int ret;

	snprintf(extra, sizeof(extra), "%s" HDR_NOSNIFF "%s", an->extra, html ? HDR_CSP : "");
	ret = http_write_response(&c->stream, an->status, an->content_type, extra, an->body,
				  an->body_len, keep_alive);

	if (ret)
		pr_debug("%s: writing the answer: %s", c->peer, strerror(-ret));
}

/*
 * The body bound of a request: debug files (unstripped ELF, often far larger than a profile)
 * have their own; every other request keeps --max-body.
 */
static size_t request_body_limit(void *ctx, const struct http_message *m)
{
	const struct server *s = ctx;

	if (!strcmp(m->method, "POST") && m->path && !strncmp(m->path, "/api/0/debuginfo/", 17))
		return s->o.max_debuginfo_body;
	return s->o.max_body;
}

/*
 * Charges the body before it is read: its Content-Length, or the bound when chunked. Debug
 * files are not charged (their own bound; build hosts). Refused: 413 over the request's budget,
 * 503 with Retry-After while all requests' is full; the body is not read, the connection closes.
 */
static bool conn_charge_body(struct conn *c, struct mem_charge *mc, struct server_answer *an)
{
	struct server *s = c->srv;
	size_t limit = request_body_limit(s, &c->msg), len;
	char err[200];
	int ret;

	if (limit != s->o.max_body || (!c->msg.chunked && c->msg.content_length <= 0))
		return true;
	len = c->msg.chunked || (uint64_t)c->msg.content_length > limit
		? limit : (size_t)c->msg.content_length;
	ret = mem_charge__reserve(mc, len, err, sizeof(err));
	if (!ret)
		return true;
	if (ret == -EFBIG)
		conn_error(c, an, 413, REJ_TOO_LARGE, "body refused: %s", err);
	else
		conn_error(c, an, 503, REJ_BUSY, "body not read now: %s", err);
	if (ret != -EFBIG)
		snprintf(an->extra, sizeof(an->extra), "Retry-After: 1\r\n");
	c->linger = true;
	conn_set_deadline(c, 2000);
	conn_answer(c, an, false);
	return false;
}

/* A request that could not be read whole: answer (best effort) and close. */
static void conn_read_failed(struct conn *c, struct server_answer *an, int ret)
{
	struct server *s = c->srv;

	switch (ret) {
	case -EMSGSIZE:
	case -E2BIG:
		conn_error(c, an, 431, REJ_HEADER_TOO_LARGE,
			   "request head larger than %d bytes or more than %d headers",
			   HTTP_HEAD_MAX, HTTP_MAX_HEADERS);
		break;
	case -EINVAL:
		conn_error(c, an, 400, REJ_BAD_REQUEST, "malformed HTTP request");
		break;
	case -EFBIG:
		conn_error(c, an, 413, REJ_TOO_LARGE, "body larger than the limit of %zu bytes",
			   request_body_limit(s, &c->msg));
		break;
	case -ENOSYS:
		conn_error(c, an, 501, REJ_BAD_REQUEST,
			   "only chunked transfer coding is supported");
		break;
	case -ETIMEDOUT:
		conn_error(c, an, 408, REJ_TIMEOUT, "request not complete within %u ms",
			   s->o.request_timeout_ms);
		break;
	default:
		return; /* the peer went away */
	}
	c->linger = ret != -ETIMEDOUT;
	conn_set_deadline(c, 2000);
	conn_answer(c, an, false);
}

/* Authenticated, but its listener's budget is full: a 503 (retry later), and close. */
static void conn_busy(struct conn *c, struct server_answer *an)
{
	if (c->evicted)
		return;
	conn_error(c, an, 503, REJ_BUSY, "too many connections, retry later");
	c->srv->m.rejected[REJ_BUSY]--; /* conn_promote counted it */
	snprintf(an->extra, sizeof(an->extra), "Retry-After: 1\r\n");
	conn_set_deadline(c, 1000);
	conn_answer(c, an, false);
	server_answer__reset(an);
}

static void conn_serve(struct conn *c)
{
	struct server *s = c->srv;
	struct mem_charge mc = { .b = &s->m.mem };
	struct server_request req = { .msg = &c->msg, .device = c->device, .peer = c->peer,
				      .mem = &mc };
	struct server_answer an;

	for (;;) {
		bool keep;
		int ret;

		if (!conn_wait_request(c))
			return;
		memset(&an, 0, sizeof(an));
		conn_set_deadline(c, s->o.request_timeout_ms);
		ret = http_read_request_head(&c->stream, &c->msg);
		if (ret) {
			conn_read_failed(c, &an, ret);
			server_answer__reset(&an);
			return;
		}
		s->m.requests++;
		/*
		 * Who asks is settled on the head alone: a refused request's body is never read
		 * (no 100 Continue either), and the connection closes after the answer.
		 */
		if (!conn_authorized(c)) {
			conn_unauthorized(c, &an);
			conn_answer(c, &an, false);
			server_answer__reset(&an);
			return;
		}
		if (!conn_promote(c)) {
			conn_busy(c, &an);
			return;
		}
		if (!c->operator && !s->h.device_may(c->msg.method, c->msg.path)) {
			conn_error(c, &an, 403, REJ_FORBIDDEN, "%s is a device certificate: it "
				   "may upload, not read; reading needs an operator certificate "
				   "(edgeprof certs operator DIR NAME) or the HTTP token",
				   c->device);
			conn_answer(c, &an, false);
			server_answer__reset(&an);
			return;
		}
		if (!conn_charge_body(c, &mc, &an)) {
			server_answer__reset(&an);
			return;
		}
		ret = http_read_request_body(&c->stream, &c->msg, request_body_limit(s, &c->msg));
		if (ret) {
			mem_charge__release(&mc);
			conn_read_failed(c, &an, ret);
			server_answer__reset(&an);
			return;
		}
		s->h.handle(s->h.ctx, &req, &an);
		mem_charge__release(&mc);
		keep = c->msg.keep_alive && !s->stopping;
		conn_answer(c, &an, keep);
		server_answer__reset(&an);
		if (!keep)
			return;
	}
}

/*
 * After an early answer (413, 431, 400) the client may still be sending: closing now would reset
 * the connection and the client could lose the answer. Stop writing, then read and drop what
 * still comes, for a bounded time and amount (what nginx calls a lingering close).
 */
static void conn_linger(struct conn *c)
{
	uint64_t deadline = port_clock_mono_ns() + 2 * NSEC_PER_SEC;
	size_t total = 0;
	char buf[4096];

	shutdown(c->fd, SHUT_WR);
	while (total < (64u << 20)) {
		ssize_t n = net_read(c->fd, buf, sizeof(buf), deadline);

		if (n <= 0)
			break;
		total += (size_t)n;
	}
}

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	struct server *s = c->srv;

	if (!c->tls || !conn_handshake(c)) {
		http_stream__init(&c->stream, c->tls ? conn_read_tls : conn_read_plain,
				  c->tls ? conn_write_tls : conn_write_plain, c);
		if (c->tls && !conn_promote(c)) {
			struct server_answer an = { 0 };

			conn_busy(c, &an);
		} else {
			conn_serve(c);
		}
		if (c->tls) {
			conn_set_deadline(c, 1000);
			tls_conn__close(c->tc);
		}
	}
	if (c->linger)
		conn_linger(c);
	http_message__reset(&c->msg);
	mem_budget__unhold(&s->m.mem, CONN_MEM_COST); /* before active drops: s may go after */
	pthread_mutex_lock(&s->lock);
	preauth_unlink(s, c); /* before close: an eviction may shutdown() the fd until here */
	if (c->authed)
		c->l->conns--;
	if (--s->active == 0)
		pthread_cond_broadcast(&s->idle);
	s->m.conns_active = (int)s->active;
	pthread_mutex_unlock(&s->lock);
	tls_conn__free(c->tc);
	close(c->fd);
	free(c);
	return NULL;
}

/*
 * A new connection waits in the accept loop's poll, without a thread or TLS buffers, until it
 * sends its first byte; it takes an unauthenticated slot of its listener, evicting the idlest
 * holder when none is free. Called from the accept loop only, as are conn_start and
 * server_sweep: nothing else touches a connection before it has started.
 */
static void server_accept(struct server *s, struct listener *l)
{
	struct conn *c;
	char peer[64];
	int fd = net_accept(l->fd, peer, sizeof(peer));

	if (fd < 0) {
		if (fd != -EAGAIN && fd != -ECONNABORTED)
			log_limited(&s->rl_refused, 1, "accept: %s", strerror(-fd));
		return;
	}
	s->m.conns_total++;
	c = calloc(1, sizeof(*c));
	if (!c) {
		log_limited(&s->rl_refused, 1, "no memory for %s", peer);
		close(fd);
		return;
	}
	c->srv = s;
	c->l = l;
	c->fd = fd;
	c->tls = l->tls;
	c->operator = !l->tls; /* plain HTTP: the token (or loopback without one) reads */
	c->accepted = c->last_rx = port_clock_mono_ns();
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	pthread_mutex_lock(&s->lock);
	if (l->preauth >= s->o.max_handshakes)
		preauth_evict(s, l);
	preauth_link(s, c);
	pthread_mutex_unlock(&s->lock);
}

/* Under s->lock: a waiting connection that is closed without ever starting. */
static void conn_drop_waiting(struct server *s, struct conn *c)
{
	preauth_unlink(s, c);
	close(c->fd);
	free(c);
}

/* A waiting connection has sent something (or hung up): its thread takes over. */
static void conn_start(struct server *s, struct conn *c)
{
	pthread_attr_t attr;
	pthread_t th;
	int ret = 0;

	if (c->tls) {
		c->tc = tls_conn__new(s->tls, c->fd, NULL);
		ret = !c->tc;
	}
	pthread_mutex_lock(&s->lock);
	if (!ret) {
		c->started = true;
		mem_budget__hold(&s->m.mem, CONN_MEM_COST);
		s->active++;
		s->m.conns_active = (int)s->active;
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, CONN_STACK_SIZE);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		ret = pthread_create(&th, &attr, conn_thread, c);
		pthread_attr_destroy(&attr);
		if (ret) {
			c->started = false;
			mem_budget__unhold(&s->m.mem, CONN_MEM_COST);
			s->active--;
			s->m.conns_active = (int)s->active;
		}
	}
	if (ret) {
		log_limited(&s->rl_refused, 1, "no memory or thread for %s", c->peer);
		tls_conn__free(c->tc);
		conn_drop_waiting(s, c);
	}
	pthread_mutex_unlock(&s->lock);
}

/*
 * Fills the poll set: the stop pipe, the listeners, and every connection still waiting for its
 * first byte (closing those that waited longer than the handshake timeout). Returns its size.
 */
static nfds_t server_poll_set(struct server *s)
{
	uint64_t too_old = port_clock_mono_ns() - (uint64_t)s->o.handshake_timeout_ms * NSEC_PER_MSEC;
	nfds_t n = 3;

	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < 2; i++) {
		struct conn *c = s->lis[i].pre_first, *next;

		for (; c; c = next) {
			next = c->pre_next;
			if (c->started)
				continue;
			if (c->accepted < too_old) {
				s->m.tls_failures[TLSF_TIMEOUT] += c->tls;
				if (c->tls)
					log_limited(&s->rl_tls, 10, "refused TLS client %s: TLS handshake: "
						    "timed out (nothing sent in %u ms)", c->peer,
						    s->o.handshake_timeout_ms);
				conn_drop_waiting(s, c);
				continue;
			}
			s->waiting[n - 3] = c;
			s->pfd[n++] = (struct pollfd){ .fd = c->fd, .events = POLLIN };
		}
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

static int server_listen(const char *what, const char *hostport, char *err, size_t errlen)
{
	char msg[256];
	int fd = net_listen(hostport, 128, msg, sizeof(msg));

	if (fd < 0)
		snprintf(err, errlen, "%s: %s", what, msg);
	return fd;
}

static bool is_loopback(const char *hostport)
{
	return !strncmp(hostport, "127.", 4) || !strncmp(hostport, "localhost:", 10) ||
	       !strncmp(hostport, "[::1]:", 6);
}

struct server *server__new(const struct server_opts *o, char *err, size_t errlen)
{
	struct server *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->o = *o;
	mem_budget__init(&s->m.mem, o->mem_total, o->mem_request, o->mem_query,
			 o->query_timeout_ms);
	if (!s->o.max_debuginfo_body)
		s->o.max_debuginfo_body = (size_t)CONFIG_COLLECTOR_DEBUGINFO_MAX_MB << 20;
	if (s->o.max_debuginfo_body < s->o.max_body)
		s->o.max_debuginfo_body = s->o.max_body; /* never below what a profile may be */
	if (!s->o.max_handshakes)
		s->o.max_handshakes = CONFIG_COLLECTOR_MAX_HANDSHAKES;
	s->lis[0] = (struct listener){ .fd = -1, .tls = true, .name = "mutual TLS" };
	s->lis[1] = (struct listener){ .fd = -1, .tls = false, .name = "plain HTTP" };
	s->stop_pipe[0] = s->stop_pipe[1] = -1;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->idle, NULL);
	if (o->http_listen && !o->http_token && !is_loopback(o->http_listen)) {
		snprintf(err, errlen, "--http-listen %s is not a loopback address: it needs "
			 "--http-token", o->http_listen);
		goto out_free;
	}
	s->pfd = calloc(3 + 2 * (size_t)s->o.max_handshakes, sizeof(*s->pfd));
	s->waiting = calloc(2 * (size_t)s->o.max_handshakes, sizeof(*s->waiting));
	if (!s->pfd || !s->waiting) {
		snprintf(err, errlen, "out of memory");
		goto out_free;
	}
	if (pipe2(s->stop_pipe, O_CLOEXEC | O_NONBLOCK)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		goto out_free;
	}
	if (o->listen) {
		s->tls = tls_config__new_server(o->tls_ca, o->tls_cert, o->tls_key, err, errlen);
		if (!s->tls)
			goto out_free;
		tls_config__set_readahead(s->tls, (size_t)CONFIG_COLLECTOR_TLS_READAHEAD_KB << 10);
		s->lis[0].fd = server_listen("--listen", o->listen, err, errlen);
		if (s->lis[0].fd < 0)
			goto out_free;
	}
	if (o->http_listen) {
		s->lis[1].fd = server_listen("--http-listen", o->http_listen, err, errlen);
		if (s->lis[1].fd < 0)
			goto out_free;
	}
	return s;

out_free:
	server__free(s);
	return NULL;
}

int server__port(const struct server *s, bool tls)
{
	int fd = s->lis[tls ? 0 : 1].fd;

	return fd < 0 ? -ENOENT : net_local_port(fd);
}

void server__set_handler(struct server *s, const struct server_handler *h)
{
	s->h = *h;
}

struct server_metrics *server__metrics(struct server *s)
{
	return &s->m;
}

void server__stop(struct server *s)
{
	s->stopping = true;
	(void)!write(s->stop_pipe[1], "x", 1);
}

int server__run(struct server *s)
{
	struct pollfd *pfd = s->pfd;
	struct timespec until;

	pfd[0] = (struct pollfd){ .fd = s->stop_pipe[0], .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = s->lis[0].fd, .events = POLLIN };
	pfd[2] = (struct pollfd){ .fd = s->lis[1].fd, .events = POLLIN };
	while (!s->stopping) {
		nfds_t nfds = server_poll_set(s);
		int n = poll(pfd, nfds, 1000);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		/* First the waiting connections that spoke (accepting may evict some of them). */
		for (nfds_t i = 3; i < nfds; i++)
			if (pfd[i].revents)
				conn_start(s, s->waiting[i - 3]);
		if (pfd[1].revents & POLLIN)
			server_accept(s, &s->lis[0]);
		if (pfd[2].revents & POLLIN)
			server_accept(s, &s->lis[1]);
	}
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < 2; i++) {
		struct conn *c = s->lis[i].pre_first, *next;

		for (; c; c = next) {
			next = c->pre_next;
			if (!c->started)
				conn_drop_waiting(s, c);
		}
	}
	pthread_mutex_unlock(&s->lock);
	/* Stop listening, let every connection finish the request it is in. */
	for (int i = 0; i < 2; i++) {
		if (s->lis[i].fd >= 0)
			close(s->lis[i].fd);
		s->lis[i].fd = -1;
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += s->o.request_timeout_ms / 1000 + 3;
	pthread_mutex_lock(&s->lock);
	while (s->active && pthread_cond_timedwait(&s->idle, &s->lock, &until) != ETIMEDOUT)
		;
	if (s->active)
		pr_warn("%u connections still open at shutdown", s->active);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void server__free(struct server *s)
{
	if (!s)
		return;
	if (s->active) /* threads still use the handler and the TLS config: leak, not crash */
		return;
	if (s->h.free)
		s->h.free(s->h.ctx);
	tls_config__free(s->tls);
	for (int i = 0; i < 2; i++)
		if (s->lis[i].fd >= 0)
			close(s->lis[i].fd);
	if (s->stop_pipe[0] >= 0) {
		close(s->stop_pipe[0]);
		close(s->stop_pipe[1]);
	}
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->idle);
	free(s->pfd);
	free(s->waiting);
	free(s);
}
