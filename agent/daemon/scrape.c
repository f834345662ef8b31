// SPDX-License-Identifier: MIT
/*
 * agent/daemon/scrape.c — the scrape thread (agent/daemon/scrape.h): fetches with port/fetch, deltas with
 * pprof/delta, a small queue of finished profiles for the main loop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agent/daemon/scrape.h"
#include "port/clock.h"
#include "port/fetch.h"
#include "port/log.h"
#include "port/tls.h"
#include "pprof/delta.h"
#include "pprof/pprof.h"
#include "pprof/scrape.h"

struct target {
	struct scrape_target st;	/* its name is the service's */
	char base[256];			/* URL without a trailing '/' */
};

struct scraper {
	struct target t[SCRAPE_MAX_TARGETS];
	size_t n;
	unsigned types;			/* bit per enum pprof_kind */
	struct tls_config *tls;
	unsigned timeout_s;
	size_t max_body;
	pthread_t th;
	bool started;

	pthread_mutex_t lock;		/* everything below */
	pthread_cond_t cond;
	bool stopping, round_pending, busy;
	unsigned round_s, period_s;
	int fd;				/* the socket of the fetch in progress, or -1 */
	struct scrape_result q[SCRAPE_QUEUE];
	size_t q_head, q_n;
	struct scrape_stats st;
};

static void add_stat(struct scraper *s, uint64_t *counter, uint64_t n)
{
	pthread_mutex_lock(&s->lock);
	*counter += n;
	pthread_mutex_unlock(&s->lock);
}

static void on_fd(void *ctx, int fd)
{
	struct scraper *s = ctx;

	pthread_mutex_lock(&s->lock);
	s->fd = fd;
	if (fd >= 0 && s->stopping)
		shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&s->lock);
}

static void queue_push(struct scraper *s, const struct target *t, int type, uint64_t time_ns,
		       struct pprof_buf *buf)
{
	struct scrape_result *r;

	pthread_mutex_lock(&s->lock);
	if (s->q_n == SCRAPE_QUEUE) {
		s->st.queue_dropped++;
		pthread_mutex_unlock(&s->lock);
		free(buf->data);
		buf->data = NULL; /* the caller frees what is left to it */
		return;
	}
	r = &s->q[(s->q_head + s->q_n++) % SCRAPE_QUEUE];
	snprintf(r->service, sizeof(r->service), "%s", t->st.name);
	snprintf(r->type, sizeof(r->type), "%s", pprof_kind_names[type]);
	r->time_ns = time_ns;
	r->data = buf->data;
	r->len = buf->len;
	pthread_mutex_unlock(&s->lock);
	buf->data = NULL;
}

static void count_failure(struct scraper *s, enum fetch_fail f)
{
	uint64_t *c = f == FETCH_CONNECT ? &s->st.failed_connect
		    : f == FETCH_TLS	 ? &s->st.failed_tls
		    : f == FETCH_STATUS	 ? &s->st.failed_status
		    : f == FETCH_TOO_BIG ? &s->st.failed_too_big
					 : &s->st.failed_io;

	add_stat(s, c, 1);
}

static bool is_stopping(void *ctx)
{
	struct scraper *s = ctx;
	bool stopping;

	pthread_mutex_lock(&s->lock);
	stopping = s->stopping;
	pthread_mutex_unlock(&s->lock);
	return stopping;
}

/* The delta's counters moved by one fetch, added to the scraper's. */
static void count_delta(struct scraper *s, const struct pprof_delta *d,
			const struct pprof_delta_stats *before)
{
	struct pprof_delta_stats after = {0};

	if (!d)
		return;
	pprof_delta__stats(d, &after);
	add_stat(s, &s->st.delta_resets, after.resets - before->resets);
	add_stat(s, &s->st.delta_over_bound, after.over_bound - before->over_bound);
}

/* One fetch of type from t: false when the target is down (skip the rest of its round). */
static bool scrape_one(struct scraper *s, struct target *t, int type, unsigned seconds)
{
	const struct scrape_fetch f = {.tls = s->tls, .max_body = s->max_body,
				       .slack_s = s->timeout_s, .on_fd = on_fd, .ctx = s,
				       .stopping = is_stopping};
	struct pprof_delta_stats before = {0};
	struct pprof_buf buf = {0};
	uint64_t time_ns = port_clock_real_ns();
	enum fetch_fail fail;
	enum scrape_got got;

	if (t->st.delta[type])
		pprof_delta__stats(t->st.delta[type], &before);
	add_stat(s, &s->st.fetches, 1);
	got = scrape__fetch(&t->st, t->base, type, seconds, &f, &buf, &fail);
	if (got == SCRAPE_GOT_FAILED)
		count_failure(s, fail);
	else if (got != SCRAPE_GOT_STOPPED)
		add_stat(s, &s->st.ok, 1);
	count_delta(s, t->st.delta[type], &before);
	if (got == SCRAPE_GOT_BASELINE)
		add_stat(s, &s->st.baselines, 1);
	else if (got == SCRAPE_GOT_BAD)
		add_stat(s, &s->st.bad_profile, 1);
	else if (got == SCRAPE_GOT_PROFILE)
		queue_push(s, t, type, time_ns, &buf);
	free(buf.data);
	pthread_mutex_lock(&s->lock);
	s->st.cpu_ns = port_clock_thread_cputime_ns();
	pthread_mutex_unlock(&s->lock);
	return fail != FETCH_CONNECT;
}

/* A round: each target in turn, its CPU profile first, then its snapshots. */
static void scrape_round(struct scraper *s, unsigned round_s, unsigned period_s)
{
	unsigned seconds = round_s;

	/* the targets' CPU profiles one after the other must end within the period */
	if ((s->types & (1u << PPROF_KIND_CPU)) && seconds * s->n > period_s)
		seconds = period_s / (unsigned)s->n > 1 ? period_s / (unsigned)s->n - 1 : 1;
	for (size_t i = 0; i < s->n; i++) {
		for (int type = 0; type < PPROF_KIND__N; type++) {
			if (is_stopping(s))
				return;
			if ((s->types & (1u << type)) && !scrape_one(s, &s->t[i], type, seconds))
				break;
		}
	}
}

static void *scrape_thread(void *arg)
{
	struct scraper *s = arg;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		unsigned round_s, period_s;

		while (!s->round_pending && !s->stopping)
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->stopping)
			break;
		s->round_pending = false;
		s->busy = true;
		round_s = s->round_s;
		period_s = s->period_s;
		pthread_mutex_unlock(&s->lock);
		scrape_round(s, round_s, period_s);
		pthread_mutex_lock(&s->lock);
		s->busy = false;
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static bool name_ok(const char *n, size_t len)
{
	if (!len || len >= sizeof(((struct scrape_target *)0)->name))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
		      (n[i] >= '0' && n[i] <= '9') || strchr("_.-", n[i])))
			return false;
	return true;
}

static int add_target(struct scraper *s, const char *spec, bool *https, char *err, size_t errlen)
{
	const char *eq = strchr(spec, '=');
	struct target *t = &s->t[s->n];
	char host[256], port[16], path[256];
	size_t len;

	if (s->n == SCRAPE_MAX_TARGETS) {
		snprintf(err, errlen, "--scrape: at most %d targets", SCRAPE_MAX_TARGETS);
		return -EINVAL;
	}
	if (!eq || !name_ok(spec, (size_t)(eq - spec)) ||
	    fetch_split_url(eq + 1, https, host, sizeof(host), port, sizeof(port), path,
			    sizeof(path)) || strchr(path, '?') ||
	    (size_t)snprintf(t->base, sizeof(t->base), "%s", eq + 1) >= sizeof(t->base)) {
		snprintf(err, errlen, "--scrape %s: expected NAME=http://HOST:PORT (NAME of "
			 "[A-Za-z0-9_.-], the URL without a query)", spec);
		return -EINVAL;
	}
	memcpy(t->st.name, spec, (size_t)(eq - spec));
	t->st.name[eq - spec] = 0;
	for (len = strlen(t->base); len && t->base[len - 1] == '/';)
		t->base[--len] = 0;
	s->n++; /* (freed with the others when its deltas cannot be made) */
	if (scrape_target__init(&t->st, s->types, CONFIG_SCRAPE_DELTA_STACKS)) {
		snprintf(err, errlen, "no memory");
		return -ENOMEM;
	}
	return 0;
}

static int scraper_setup(struct scraper *s, const struct scrape_opts *o, char *err, size_t errlen)
{
	bool any_https = false;

	if (pprof_kinds_parse(o->types ? o->types : "cpu,heap,goroutine,mutex,block", &s->types,
			      err, errlen))
		return -EINVAL;
	for (size_t i = 0; i < o->n_specs; i++) {
		bool https;

		if (add_target(s, o->specs[i], &https, err, errlen))
			return -EINVAL;
		any_https |= https;
	}
	if (any_https) {
		if (!o->ca_file || !o->cert_file || !o->key_file) {
			snprintf(err, errlen, "an https:// --scrape target needs --tls-ca, --tls-cert "
				 "and --tls-key (an operator certificate to scrape a pull-mode agent)");
			return -EINVAL;
		}
		s->tls = tls_config__new_client(o->ca_file, o->cert_file, o->key_file, err, errlen);
		if (!s->tls)
			return -EINVAL;
	}
	return 0;
}

struct scraper *scrape__new(const struct scrape_opts *o, char *err, size_t errlen)
{
	struct scraper *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, errlen, "no memory");
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->fd = -1;
	s->timeout_s = o->timeout_s ? o->timeout_s : CONFIG_SCRAPE_TIMEOUT_S;
	s->max_body = o->max_body ? o->max_body : (size_t)CONFIG_SCRAPE_MAX_BODY_KB * 1024;
	if (scraper_setup(s, o, err, errlen))
		goto out_free;
	if (pthread_create(&s->th, NULL, scrape_thread, s)) {
		snprintf(err, errlen, "cannot start the scrape thread");
		goto out_free;
	}
	s->started = true;
	return s;
out_free:
	scrape__free(s);
	return NULL;
}

void scrape__free(struct scraper *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		s->stopping = true;
		if (s->fd >= 0)
			shutdown(s->fd, SHUT_RDWR); /* a CPU fetch would wait out its seconds */
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->th, NULL);
	}
	for (size_t i = 0; i < s->n; i++)
		scrape_target__fini(&s->t[i].st);
	for (size_t i = 0; i < s->q_n; i++)
		free(s->q[(s->q_head + i) % SCRAPE_QUEUE].data);
	tls_config__free(s->tls);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void scrape__round(struct scraper *s, unsigned round_s, unsigned period_s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->round_pending = true; /* a round still running takes this one up when it ends */
	s->round_s = round_s;
	s->period_s = period_s;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

bool scrape__idle(struct scraper *s)
{
	bool idle;

	if (!s)
		return true;
	pthread_mutex_lock(&s->lock);
	idle = !s->busy && !s->round_pending;
	pthread_mutex_unlock(&s->lock);
	return idle;
}

int scrape__take(struct scraper *s, struct scrape_result *r)
{
	int ret = -EAGAIN;

	if (!s)
		return ret;
	pthread_mutex_lock(&s->lock);
	if (s->q_n) {
		*r = s->q[s->q_head];
		s->q_head = (s->q_head + 1) % SCRAPE_QUEUE;
		s->q_n--;
		ret = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

void scrape__stats(struct scraper *s, struct scrape_stats *st)
{
	pthread_mutex_lock(&s->lock);
	*st = s->st;
	pthread_mutex_unlock(&s->lock);
}
