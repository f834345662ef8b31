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


struct ctarget {
	struct sd_target sd;
	struct scrape_target st;	/* named by its address */
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
	pthread_mutex_t lock;		/* stopping, fd */
	bool stopping;
	int fd;				/* the socket of the fetch in progress, or -1 */
	struct http_message req;	/* what the ingest path's messages name: "(scrape)" */
};

static bool stopping(void *ctx)
{
	struct coll_scraper *s = ctx;
	bool st;

	pthread_mutex_lock(&s->lock);
	st = s->stopping;
	pthread_mutex_unlock(&s->lock);
	return st;
}

static void on_fd(void *ctx, int fd)
{
	struct coll_scraper *s = ctx;

	pthread_mutex_lock(&s->lock);
	s->fd = fd;
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

/* New targets from sd; a target kept from before keeps its delta baselines. */
static int set_targets(struct coll_scraper *s, const struct sd_target *sd, size_t n)
{
	struct ctarget *t = calloc(n ? n : 1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		t[i].sd = sd[i];
		snprintf(t[i].st.name, sizeof(t[i].st.name), "%s", sd[i].addr);
		for (size_t j = 0; j < s->n; j++) {
			if (!same_target(&sd[i], &s->t[j].sd))
				continue;
			memcpy(t[i].st.delta, s->t[j].st.delta, sizeof(t[i].st.delta));
			memset(s->t[j].st.delta, 0, sizeof(s->t[j].st.delta));
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

	if (load_targets(s, err, sizeof(err)))
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
				       .slack_s = SCRAPE_SLACK_S, .on_fd = on_fd, .ctx = s,
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

static void scrape_all(struct coll_scraper *s)
{
	for (size_t i = 0; i < s->n && !stopping(s); i++)
		for (int k = 0; k < PPROF_KIND__N && !stopping(s); k++)
			if ((s->types & (1u << k)) && !scrape_one(s, &s->t[i], k))
				break;
}

static void *coll_scrape_thread(void *arg)
{
	struct coll_scraper *s = arg;
	uint64_t next = port_clock_mono_ns();

	while (!stopping(s)) {
		struct pollfd pfd = {.fd = s->wake[0], .events = POLLIN};
		char junk[16];

		if (port_clock_mono_ns() >= next) {
			next = port_clock_mono_ns() + (uint64_t)s->o.interval_s * NSEC_PER_SEC;
			scrape_all(s);
		}
		if (poll(&pfd, 1, 1000) > 0 && read(s->wake[0], junk, sizeof(junk)) > 0 &&
		    !stopping(s))
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
	s->fd = -1;
	s->req.path = (char *)"(scrape)";
	s->req.query = (char *)"";
	s->wake[0] = s->wake[1] = -1;
	pthread_mutex_init(&s->lock, NULL);
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
	pr_info("scrape: %zu targets from %s, every %u s", s->n, s->o.file, s->o.interval_s);
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
		if (s->fd >= 0)
			shutdown(s->fd, SHUT_RDWR);
		pthread_mutex_unlock(&s->lock);
		coll_scrape__reload(s);
		pthread_join(s->th, NULL);
	}
	if (s->wake[0] >= 0) {
		close(s->wake[0]);
		close(s->wake[1]);
	}
	free_targets(s->t, s->n);
	tls_config__free(s->tls);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
