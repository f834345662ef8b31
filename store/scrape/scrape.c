// SPDX-License-Identifier: MIT
/*
 * store/scrape/scrape.c — the collector's scrape thread (store/scrape/scrape.h): targets from a file_sd file,
 * fetches with port/fetch, deltas with pprof/delta, stored through api_store_profile.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "port/clock.h"
#include "port/fetch.h"
#include "port/file.h"
#include "port/log.h"
#include "port/tls.h"
#include "pprof/delta.h"
#include "pprof/scrape.h"
#include "store/scrape/scrape-sd.h"
#include "store/scrape/scrape.h"
#include "store/api/api.h"

#define SCRAPE_SLACK_S 10	/* a fetch's time beyond its profile's seconds */


struct coll_scraper;

struct ctarget {
	struct sd_target sd;
	struct scrape_target st;	/* named by its address */
	/* the scraper's lock: */
	struct coll_scraper *s;
	uint64_t next;			/* mono ns its next scrape is due */
	bool busy;			/* a worker scrapes it now */
	int fd;				/* the socket of its fetch in progress, or -1 */
};

struct coll_scraper {
	struct coll_scrape_opts o;
	struct api *api;
	struct server_metrics *m;
	struct tls_config *tls;
	unsigned types;
	struct ctarget *t;
	size_t n;
	struct timespec mtime;		/* of the targets file when last read */
	off_t size;
	int wake[2];			/* SIGHUP and shutdown write here */
	pthread_t th;
	bool started;
	/*
	 * Workers: each scrapes one due target at a time (all its types), so that a target that
	 * answers slowly or never holds one worker for its own scrapes, and the others keep
	 * their interval (CONFIG_COLLECTOR_SCRAPE_WORKERS).
	 */
	pthread_t workers[CONFIG_COLLECTOR_SCRAPE_WORKERS];
	unsigned n_workers;
	pthread_mutex_t lock;		/* stopping, targets' schedule, busy */
	pthread_cond_t cond;		/* a target done, a reload waiting, stopping */
	bool stopping, reloading;
	unsigned busy;			/* targets being scraped */
	struct http_message req;	/* what the ingest path's messages name: "(scrape)" */
};

static bool stopping(void *ctx)
{
	struct coll_scraper *s = ((struct ctarget *)ctx)->s;
	bool st;

	pthread_mutex_lock(&s->lock);
	st = s->stopping;
	pthread_mutex_unlock(&s->lock);
	return st;
}

static bool scraper_stopping(struct coll_scraper *s)
{
	bool st;

	pthread_mutex_lock(&s->lock);
	st = s->stopping;
	pthread_mutex_unlock(&s->lock);
	return st;
}

static void on_fd(void *ctx, int fd)
{
	struct ctarget *t = ctx;
	struct coll_scraper *s = t->s;

	pthread_mutex_lock(&s->lock);
	t->fd = fd;
	if (fd >= 0 && s->stopping)
		shutdown(fd, SHUT_RDWR);
	pthread_mutex_unlock(&s->lock);
}

static bool same_target(const struct sd_target *a, const struct sd_target *b)
{
	return !strcmp(a->addr, b->addr) && a->https == b->https && !strcmp(a->service, b->service);
}

static void free_targets(struct ctarget *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		scrape_target__fini(&t[i].st);
	free(t);
}

/*
 * New targets from sd; a target kept from before keeps its delta baselines and its schedule.
 * Called with no target busy (reload() waits for that).
 */
static int set_targets(struct coll_scraper *s, const struct sd_target *sd, size_t n)
{
	struct ctarget *t = calloc(n ? n : 1, sizeof(*t));
	uint64_t now = port_clock_mono_ns();

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		t[i].sd = sd[i];
		t[i].s = s;
		t[i].fd = -1;
		t[i].next = now;
		snprintf(t[i].st.name, sizeof(t[i].st.name), "%s", sd[i].addr);
		for (size_t j = 0; j < s->n; j++) {
			if (!same_target(&sd[i], &s->t[j].sd))
				continue;
			memcpy(t[i].st.delta, s->t[j].st.delta, sizeof(t[i].st.delta));
			memset(s->t[j].st.delta, 0, sizeof(s->t[j].st.delta));
			t[i].next = s->t[j].next;
			break;
		}
		if (scrape_target__init(&t[i].st, s->types, 0)) {
			free_targets(t, n);
			return -ENOMEM;
		}
	}
	free_targets(s->t, s->n);
	s->t = t;
	s->n = n;
	s->m->scrape_targets = (int)n;
	return 0;
}

/* (Re)reads the targets file; on error the targets of before stay. */
static int load_targets(struct coll_scraper *s, char *err, size_t errlen)
{
	struct sd_target *sd = calloc(SD_MAX_TARGETS, sizeof(*sd));
	void *text = NULL;
	size_t len = 0;
	struct stat st;
	int n = -ENOMEM;

	if (stat(s->o.file, &st) == 0) {
		s->mtime = st.st_mtim;
		s->size = st.st_size;
	}
	if (sd) {
		n = port_file_read_all(s->o.file, SD_MAX_FILE, &text, &len);
		if (n)
			snprintf(err, errlen, "%s: %s", s->o.file, strerror(-n));
		else
			n = sd_parse(text, len, sd, SD_MAX_TARGETS, err, errlen);
	}
	if (n >= 0 && (n = set_targets(s, sd, (size_t)n)) == 0)
		n = (int)s->n;
	s->m->scrape_reload_errors = n < 0;
	free(text);
	free(sd);
	return n < 0 ? n : 0;
}

/* Checked every second: a changed file (mtime or size) is read again. */
static bool file_changed(struct coll_scraper *s)
{
	struct stat st;

	return !stat(s->o.file, &st) &&
	       (st.st_mtim.tv_sec != s->mtime.tv_sec || st.st_mtim.tv_nsec != s->mtime.tv_nsec ||
		st.st_size != s->size);
}

static void reload(struct coll_scraper *s, const char *why)
{
	char err[300] = "";

	int ret;

	/* the targets' array is replaced: wait for the workers to leave it */
	pthread_mutex_lock(&s->lock);
	s->reloading = true;
	while (s->busy && !s->stopping)
		pthread_cond_wait(&s->cond, &s->lock);
	ret = s->stopping ? 0 : load_targets(s, err, sizeof(err));
	s->reloading = false;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	if (ret)
		pr_warn("scrape: %s: %s; keeping the %zu targets of before", why, err, s->n);
	else
		pr_info("scrape: %s: %zu targets", why, s->n);
}

static void store_one(struct coll_scraper *s, struct ctarget *t, int type, const char *device,
		      struct pprof_buf *buf)
{
	struct ingest in = {.service = t->sd.service[0] ? t->sd.service : "unknown",
			    .type = pprof_kind_names[type]};
	struct api_ctx a;
	uint64_t seq;
	bool dup;

	api__ctx(s->api, &a, t->sd.addr);
	a.device = device;
	a.req = &s->req;
	for (size_t i = 0; i < t->sd.n_labels && in.n_labels < STORE_MAX_LABELS - 2; i++) {
		const char *k = t->sd.labels[i].key;

		/* the certificate says which device, the address which instance */
		if (strcmp(k, "device") && strcmp(k, "instance"))
			in.labels[in.n_labels++] = (struct record_label){k, t->sd.labels[i].value};
	}
	in.labels[in.n_labels++] = (struct record_label){"instance", t->sd.addr};
	if (api_store_profile(&a, &in, buf->data, buf->len, &seq, &dup, NULL)) {
		s->m->scrape_bad_profile++;
		pr_warn("scrape %s %s: not stored: %.*s", t->sd.addr, pprof_kind_names[type],
			(int)a.ans.body_len, a.ans.body ? (char *)a.ans.body : "");
	} else {
		s->m->scrape_stored++;
	}
	api_reset(&a);
}

/* One fetch: false when the target is down (the rest of its scrape is skipped). */
static bool scrape_one(struct coll_scraper *s, struct ctarget *t, int type)
{
	char base[300], device[256] = "";
	const struct scrape_fetch f = {.tls = s->tls, .max_body = s->o.max_body,
				       .slack_s = SCRAPE_SLACK_S, .on_fd = on_fd, .ctx = t,
				       .stopping = stopping, .peer_cn = device,
				       .cnlen = sizeof(device)};
	struct pprof_buf buf = {0};
	enum fetch_fail fail;
	enum scrape_got got;

	snprintf(base, sizeof(base), "%s://%s", t->sd.https ? "https" : "http", t->sd.addr);
	s->m->scrape_fetches++;
	got = scrape__fetch(&t->st, base, type, s->o.seconds, &f, &buf, &fail);
	if (got == SCRAPE_GOT_FAILED)
		s->m->scrape_failed[fail - 1]++;
	else if (got == SCRAPE_GOT_BASELINE)
		s->m->scrape_baselines++;
	else if (got == SCRAPE_GOT_BAD)
		s->m->scrape_bad_profile++;
	else if (got == SCRAPE_GOT_PROFILE)
		store_one(s, t, type, device, &buf);
	free(buf.data);
	return fail != FETCH_CONNECT;
}

/* All the types of one target: a target down (no connection) skips the rest. */
static void scrape_target(struct coll_scraper *s, struct ctarget *t)
{
	for (int k = 0; k < PPROF_KIND__N && !stopping(t); k++)
		if ((s->types & (1u << k)) && !scrape_one(s, t, k))
			break;
}

/* The due target scraped longest ago that no worker has, or NULL; *wait_ns until the next. */
static struct ctarget *due_target(struct coll_scraper *s, uint64_t now, uint64_t *wait_ns)
{
	struct ctarget *best = NULL;

	*wait_ns = NSEC_PER_SEC;
	for (size_t i = 0; i < s->n; i++) {
		struct ctarget *t = &s->t[i];

		if (t->busy)
			continue;
		if (t->next > now) {
			if (t->next - now < *wait_ns)
				*wait_ns = t->next - now;
			continue;
		}
		if (!best || t->next < best->next)
			best = t;
	}
	return best;
}

static void *scrape_worker(void *arg)
{
	struct coll_scraper *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->stopping) {
		uint64_t now = port_clock_mono_ns(), wait_ns;
		struct ctarget *t = s->reloading ? NULL : due_target(s, now, &wait_ns);
		struct timespec ts;

		if (!t) {
			if (s->reloading)
				wait_ns = 100 * NSEC_PER_MSEC;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += (time_t)(wait_ns / NSEC_PER_SEC);
			ts.tv_nsec += (long)(wait_ns % NSEC_PER_SEC);
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
			continue;
		}
		t->busy = true;
		s->busy++;
		/* its interval from this start: a slow scrape delays only its own next one */
		t->next = now + (uint64_t)s->o.interval_s * NSEC_PER_SEC;
		pthread_mutex_unlock(&s->lock);
		scrape_target(s, t);
		pthread_mutex_lock(&s->lock);
		t->busy = false;
		t->fd = -1;
		s->busy--;
		pthread_cond_broadcast(&s->cond);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Reloads the targets on SIGHUP or a changed file; the workers scrape. */
static void *coll_scrape_thread(void *arg)
{
	struct coll_scraper *s = arg;

	while (!scraper_stopping(s)) {
		struct pollfd pfd = {.fd = s->wake[0], .events = POLLIN};
		char junk[16];

		if (poll(&pfd, 1, 1000) > 0 && read(s->wake[0], junk, sizeof(junk)) > 0 &&
		    !scraper_stopping(s))
			reload(s, "SIGHUP");
		else if (file_changed(s))
			reload(s, "the targets file changed");
	}
	return NULL;
}

static int coll_scrape_setup(struct coll_scraper *s, char *err, size_t errlen)
{
	if (pprof_kinds_parse(s->o.types ? s->o.types : "cpu,heap", &s->types, err, errlen))
		return -EINVAL;
	if (s->o.cert_file || s->o.key_file) {
		if (!s->o.ca_file || !s->o.cert_file || !s->o.key_file) {
			snprintf(err, errlen, "--scrape-tls-cert and --scrape-tls-key go together "
				 "(with --tls-ca)");
			return -EINVAL;
		}
		s->tls = tls_config__new_client(s->o.ca_file, s->o.cert_file, s->o.key_file, err,
						errlen);
		if (!s->tls)
			return -EINVAL;
	}
	if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK)) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -errno;
	}
	return load_targets(s, err, errlen);
}

struct coll_scraper *coll_scrape__new(const struct coll_scrape_opts *o, struct api *api,
				      char *err, size_t errlen)
{
	struct coll_scraper *s = calloc(1, sizeof(*s));
	struct api_ctx a;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	s->o = *o;
	s->o.interval_s = o->interval_s ? o->interval_s : 60;
	s->o.seconds = o->seconds ? o->seconds : 10;
	s->api = api;
	api__ctx(api, &a, "scrape");
	s->m = a.metrics;
	if (!s->o.max_body)
		s->o.max_body = a.max_body;
	s->req.path = (char *)"(scrape)";
	s->req.query = (char *)"";
	s->wake[0] = s->wake[1] = -1;
	pthread_mutex_init(&s->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (coll_scrape_setup(s, err, errlen))
		goto out_free;
	for (size_t i = 0; i < s->n; i++)
		if (s->t[i].sd.https && !s->tls)
			pr_warn("scrape %s: https needs --scrape-tls-cert and --scrape-tls-key (an "
				"operator certificate): it will fail", s->t[i].sd.addr);
	if (pthread_create(&s->th, NULL, coll_scrape_thread, s)) {
		snprintf(err, errlen, "cannot start the scrape thread");
		goto out_free;
	}
	s->started = true;
	for (; s->n_workers < CONFIG_COLLECTOR_SCRAPE_WORKERS; s->n_workers++)
		if (pthread_create(&s->workers[s->n_workers], NULL, scrape_worker, s))
			break;
	if (!s->n_workers) {
		snprintf(err, errlen, "cannot start a scrape worker");
		goto out_free;
	}
	pr_info("scrape: %zu targets from %s, every %u s (%u workers)", s->n, s->o.file,
		s->o.interval_s, s->n_workers);
	return s;
out_free:
	coll_scrape__free(s);
	return NULL;
}

void coll_scrape__reload(struct coll_scraper *s)
{
	if (s)
		(void)!write(s->wake[1], "h", 1);
}

void coll_scrape__free(struct coll_scraper *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		s->stopping = true;
		for (size_t i = 0; i < s->n; i++)
			if (s->t[i].fd >= 0)
				shutdown(s->t[i].fd, SHUT_RDWR);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->lock);
		coll_scrape__reload(s);
		pthread_join(s->th, NULL);
		for (unsigned i = 0; i < s->n_workers; i++)
			pthread_join(s->workers[i], NULL);
	}
	if (s->wake[0] >= 0) {
		close(s->wake[0]);
		close(s->wake[1]);
	}
	free_targets(s->t, s->n);
	tls_config__free(s->tls);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s);
}
