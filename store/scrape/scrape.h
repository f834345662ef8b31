/* SPDX-License-Identifier: MIT */
/*
 * store/scrape/scrape.h — the collector scrapes pprof endpoints, data-centre style (Pyroscope's
 * scrape-configs): the targets of a Prometheus file_sd file (store/scrape/scrape-sd.h), reread when it
 * changes (checked every second) or on SIGHUP, each every --scrape-interval seconds: its CPU
 * profile for --scrape-seconds, then its heap (and the other --scrape-types). Plain HTTP, or
 * mutual TLS (__scheme__ https) to a device in pull mode (agent/daemon/pull.h) with an operator
 * certificate; the device label of those profiles is then the device certificate's CN.
 * Cumulative profiles become deltas between scrapes (pprof/delta.h); each profile is stored
 * through the common ingest path (api_store_profile) as service service_name, with the group's
 * labels and instance=HOST:PORT.
 *
 * Bounded: one thread, one fetch at a time (a body at most --max-body), every fetch within its
 * seconds + 10 s; a down target costs one failed connect per scrape. Counters in /metrics
 * (edgeprof_scrape_*).
 */
#ifndef EDGEPROF_STORE_SCRAPE_H
#define EDGEPROF_STORE_SCRAPE_H

#include <stddef.h>
#include <stdio.h>

struct api;

struct coll_scrape_opts {
	const char *file;		/* --scrape-targets */
	const char *ca_file;		/* --tls-ca: the devices' CA */
	const char *cert_file;		/* --scrape-tls-cert: an operator certificate */
	const char *key_file;
	unsigned interval_s;		/* 0 = 60 */
	unsigned seconds;		/* CPU profile length; 0 = 10 */
	const char *types;		/* NULL = "cpu,heap" */
	size_t max_body;
};

struct coll_scraper;

#ifdef CONFIG_COLLECTOR_SCRAPE
/* Reads the targets and starts the thread: NULL with the reason in err. */
struct coll_scraper *coll_scrape__new(const struct coll_scrape_opts *o, struct api *api,
				      char *err, size_t errlen);
void coll_scrape__free(struct coll_scraper *s);	/* NULL-safe: ends a fetch at once */
/* Rereads the targets file now: async-signal-safe (SIGHUP). */
void coll_scrape__reload(struct coll_scraper *s);
#else
static inline struct coll_scraper *coll_scrape__new(const struct coll_scrape_opts *o,
						    struct api *api, char *err, size_t errlen)
{
	snprintf(err, errlen, "built without CONFIG_COLLECTOR_SCRAPE");
	return NULL;
}
static inline void coll_scrape__free(struct coll_scraper *s)
{
}
static inline void coll_scrape__reload(struct coll_scraper *s)
{
}
#endif /* CONFIG_COLLECTOR_SCRAPE */

#endif /* EDGEPROF_STORE_SCRAPE_H */
