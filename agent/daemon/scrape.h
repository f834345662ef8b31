/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/scrape.h — the agent pulls the pprof endpoints of local services (Go's net/http/pprof,
 * Pyroscope's SDKs, another agent's pull mode) the way Alloy's pyroscope.scrape does, and hands
 * each profile to the main loop to ship like its own (output directory, spool, upload) as
 * service NAME, type cpu|heap|goroutine|mutex|block.
 *
 * Each round, for each target in turn: URL/debug/pprof/profile?seconds=S (S: the round's length,
 * shared out when the targets' CPU profiles would not fit one after the other in the period),
 * then once each the snapshot types chosen (heap, goroutine, mutex, block). Cumulative profiles
 * (heap alloc_*, mutex, block) become deltas since the target's previous round (pprof/delta.h):
 * a target's first round only sets their baseline.
 *
 * Bounded: one thread, one fetch at a time, a body limit (CONFIG_SCRAPE_MAX_BODY_KB) and a
 * deadline (S + CONFIG_SCRAPE_TIMEOUT_S) per fetch; at most SCRAPE_MAX_TARGETS targets; at most
 * SCRAPE_QUEUE profiles wait for the main loop (more are dropped, counted). A target that does
 * not answer a connect costs that one failed connect per round; nothing here ever waits on the
 * samplers or they on it.
 */
#ifndef EDGEPROF_AGENT_SCRAPE_H
#define EDGEPROF_AGENT_SCRAPE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCRAPE_MAX_TARGETS 16
#define SCRAPE_QUEUE 32 /* two rounds of 3 targets x 5 types, while the main loop fsyncs */

struct scrape_opts {
	const char *const *specs;	/* "NAME=URL" each, URL http(s)://HOST:PORT[/prefix] */
	size_t n_specs;
	const char *types;		/* "cpu,heap,goroutine,mutex,block" (or a subset) */
	const char *ca_file, *cert_file, *key_file; /* for https targets (mutual TLS) */
	unsigned timeout_s;		/* 0 = CONFIG_SCRAPE_TIMEOUT_S */
	size_t max_body;		/* 0 = CONFIG_SCRAPE_MAX_BODY_KB */
};

/* One scraped profile for the main loop to ship. */
struct scrape_result {
	char service[64];
	char type[16];
	uint64_t time_ns;	/* unix ns: when the fetch began */
	void *data;		/* gzip pprof, malloc'd: the taker frees it */
	size_t len;
};

struct scrape_stats {
	uint64_t fetches, ok;
	uint64_t failed_connect, failed_tls, failed_io, failed_status, failed_too_big;
	uint64_t bad_profile;		/* not a pprof we can read */
	uint64_t baselines;		/* first rounds of cumulative profiles (nothing sent) */
	uint64_t queue_dropped;		/* the main loop did not take them in time */
	uint64_t delta_resets, delta_over_bound;
	uint64_t cpu_ns;		/* the scrape thread's CPU time */
};

struct scraper;

#ifdef CONFIG_AGENT_SCRAPE
/* Checks the specs and types and starts the thread: NULL with the reason in err. */
struct scraper *scrape__new(const struct scrape_opts *o, char *err, size_t errlen);
void scrape__free(struct scraper *s);		/* NULL-safe: stops the fetch in progress */
/* A round starts (main loop): its length and the period, in seconds. */
void scrape__round(struct scraper *s, unsigned round_s, unsigned period_s);
/* The next scraped profile: 0, or -EAGAIN when none waits. */
int scrape__take(struct scraper *s, struct scrape_result *r);
/* No round runs or waits (--once waits for this before it exits). */
bool scrape__idle(struct scraper *s);
void scrape__stats(struct scraper *s, struct scrape_stats *st);
#else
static inline struct scraper *scrape__new(const struct scrape_opts *o, char *err, size_t errlen)
{
	return NULL;
}
static inline void scrape__free(struct scraper *s)
{
}
static inline void scrape__round(struct scraper *s, unsigned round_s, unsigned period_s)
{
}
static inline int scrape__take(struct scraper *s, struct scrape_result *r)
{
	return -EAGAIN;
}
static inline bool scrape__idle(struct scraper *s)
{
	return true;
}
static inline void scrape__stats(struct scraper *s, struct scrape_stats *st)
{
}
#endif /* CONFIG_AGENT_SCRAPE */

#endif /* EDGEPROF_AGENT_SCRAPE_H */
