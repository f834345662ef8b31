// SPDX-License-Identifier: MIT
/* pprof/scrape.c — one scrape of a /debug/pprof endpoint (pprof/scrape.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/clock.h"
#include "port/log.h"
#include "pprof/scrape.h"

int scrape_target__init(struct scrape_target *t, unsigned types, size_t delta_stacks)
{
	for (int k = PPROF_KIND_HEAP; k < PPROF_KIND__N; k++) {
		if (k == PPROF_KIND_GOROUTINE || !(types & (1u << k)) || t->delta[k])
			continue;
		t->delta[k] = pprof_delta__new(delta_stacks);
		if (!t->delta[k])
			return -ENOMEM;
	}
	return 0;
}

void scrape_target__fini(struct scrape_target *t)
{
	for (int k = 0; k < PPROF_KIND__N; k++) {
		pprof_delta__free(t->delta[k]);
		t->delta[k] = NULL;
	}
}

/* Logged when the target or this type starts failing, counted by the caller every time. */
static void note_failure(struct scrape_target *t, int type, enum fetch_fail f, const char *err)
{
	if (f == FETCH_CONNECT ? !t->down : !t->failing[type])
		pr_warn("scrape %s %s: %s%s", t->name, pprof_kind_names[type], err,
			f == FETCH_CONNECT ? " (one connect a round until it answers)"
					   : " (logged again when it works)");
	t->down = f == FETCH_CONNECT;
	t->failing[type] = f != FETCH_CONNECT;
}

static enum scrape_got ship(struct scrape_target *t, int type, const struct http_message *m,
			    size_t max_body, struct pprof_buf *out)
{
	char err[256] = "";
	int ret;

	if (t->down || t->failing[type])
		pr_info("scrape %s %s: works again", t->name, pprof_kind_names[type]);
	t->down = t->failing[type] = false;
	ret = pprof_delta_scraped(t->delta[type], pprof_kind_names[type], m->body, m->body_len,
				  max_body, out, err, sizeof(err));
	if (ret < 0) {
		pr_warn("scrape %s %s: not a profile: %s", t->name, pprof_kind_names[type],
			err[0] ? err : strerror(-ret));
		return SCRAPE_GOT_BAD;
	}
	return ret == 1 ? SCRAPE_GOT_BASELINE : ret == 2 ? SCRAPE_GOT_NOTHING : SCRAPE_GOT_PROFILE;
}

enum scrape_got scrape__fetch(struct scrape_target *t, const char *base, int type,
			      unsigned seconds, const struct scrape_fetch *f, struct pprof_buf *out,
			      enum fetch_fail *fail)
{
	struct http_message *m = calloc(1, sizeof(*m));
	unsigned s = type == PPROF_KIND_CPU ? seconds : 0;
	uint64_t deadline = port_clock_mono_ns() + (uint64_t)(s + f->slack_s) * NSEC_PER_SEC;
	char url[400], err[400] = "";
	enum scrape_got got;

	*fail = FETCH_OK;
	if (!m)
		return SCRAPE_GOT_FAILED;
	snprintf(url, sizeof(url), "%s/debug/pprof/%s", base, pprof_kind_paths[type]);
	if (type == PPROF_KIND_CPU)
		snprintf(url + strlen(url), sizeof(url) - strlen(url), "?seconds=%u", s);
	if (f->peer_cn)
		*fail = fetch_get_peer(url, f->tls, deadline, f->max_body, m, f->on_fd, f->ctx,
				       f->peer_cn, f->cnlen, err, sizeof(err));
	else
		*fail = fetch_get_fd(url, f->tls, deadline, f->max_body, m, f->on_fd, f->ctx, err,
				     sizeof(err));
	if (*fail && f->stopping && f->stopping(f->ctx)) {
		got = SCRAPE_GOT_STOPPED;
	} else if (*fail) {
		note_failure(t, type, *fail, err);
		got = SCRAPE_GOT_FAILED;
	} else {
		got = ship(t, type, m, f->max_body, out);
	}
	http_message__reset(m);
	free(m);
	return got;
}
