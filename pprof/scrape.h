/* SPDX-License-Identifier: MIT */
/*
 * pprof/scrape.h — one scrape of a /debug/pprof endpoint: the part the agent's --scrape
 * (agent/daemon/scrape.c) and the collector's --scrape-targets (store/scrape/scrape.c) share.
 * The URL of a type, the bounded fetch (port/fetch.h), the target's state (down: it refused a
 * connect; failing: a type that fails otherwise) with a log line when it changes, and the delta
 * of cumulative types (pprof/delta.h). The callers keep their own threads, targets and counters.
 */
#ifndef EDGEPROF_PPROF_SCRAPE_H
#define EDGEPROF_PPROF_SCRAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port/fetch.h"
#include "pprof/delta.h"
#include "pprof/pprof.h"

struct scrape_target {
	char name[64];				/* in log lines: a service name or host:port */
	struct pprof_delta *delta[PPROF_KIND__N]; /* cumulative types only */
	bool down;				/* refused a connect: one connect a round */
	bool failing[PPROF_KIND__N];		/* logged as failing: logged again once it works */
};

/* Deltas (of at most delta_stacks stacks, 0 = unbounded) for the cumulative types among types
 * (bits of enum pprof_kind) not set up yet: 0 or -ENOMEM. */
int scrape_target__init(struct scrape_target *t, unsigned types, size_t delta_stacks);
void scrape_target__fini(struct scrape_target *t);

/* How one fetch is made. */
struct scrape_fetch {
	struct tls_config *tls;		/* for https:// bases */
	size_t max_body;
	unsigned slack_s;		/* the deadline: the profile's seconds plus this */
	fetch_fd_fn on_fd;		/* the socket, for a stopping caller to shut down */
	void *ctx;
	bool (*stopping)(void *ctx);	/* a fetch cut short because the caller stops is no failure */
	char *peer_cn;			/* the https server certificate's CN (NULL: not wanted) */
	size_t cnlen;
};

enum scrape_got {
	SCRAPE_GOT_PROFILE,	/* *out holds the profile to ship */
	SCRAPE_GOT_BASELINE,	/* a cumulative type's first fetch: nothing to ship */
	SCRAPE_GOT_NOTHING,	/* nothing grew, nothing sampled */
	SCRAPE_GOT_BAD,		/* the body is no profile we read (logged) */
	SCRAPE_GOT_FAILED,	/* the fetch failed: *fail says how (logged when it starts) */
	SCRAPE_GOT_STOPPED,	/* cut short by the caller's stopping */
};

/*
 * Fetches type from base (http(s)://HOST:PORT[/prefix], no trailing '/'), for seconds when it
 * is cpu, and makes what is shipped of it. *out is the caller's to free in every case.
 */
enum scrape_got scrape__fetch(struct scrape_target *t, const char *base, int type,
			      unsigned seconds, const struct scrape_fetch *f, struct pprof_buf *out,
			      enum fetch_fail *fail);

#endif /* EDGEPROF_PPROF_SCRAPE_H */
