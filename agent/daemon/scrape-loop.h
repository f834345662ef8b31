/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/scrape-loop.h — the main loop's side of scraping (agent/daemon/scrape.h): the
 * scraper started from --scrape, told of each round, and what it fetched shipped like the
 * agent's own profiles. Without CONFIG_AGENT_SCRAPE: empty stubs.
 */
#ifndef EDGEPROF_AGENT_DAEMON_SCRAPE_LOOP_H
#define EDGEPROF_AGENT_DAEMON_SCRAPE_LOOP_H

#include <stddef.h>

#include "agent/daemon/agent.h"

#ifdef CONFIG_AGENT_SCRAPE
/* Its options: entries {name, has_arg, help} of the agent's options table (main.c). */
#define AGENT_SCRAPE_OPTS                                                                 \
	{"scrape", 1, "NAME=URL: pull that service's /debug/pprof/ each round (repeatable)"}, \
	{"scrape-types", 1, "what --scrape pulls: cpu,heap,goroutine,mutex,block (default all)"},
/* With --scrape: the scraper's thread, or -EINVAL (said on stderr). */
int agent_scrape__start(struct agent *a);
/* What the scrape thread finished goes where the agent's own profiles go. */
void agent_scrape__ship(struct agent *a);
/* --once: the round's fetches (a CPU profile lasts the round) finish before the agent exits. */
void agent_scrape__finish(struct agent *a);
/* Appends " scrape: fetches=..." (counters since start, failures by kind) to buf's string. */
void agent_scrape__comment(struct agent *a, char *buf, size_t len);
/* At exit: what the scrapes did, said; the thread stopped. */
void agent_scrape__stop(struct agent *a);
#else
#define AGENT_SCRAPE_OPTS
static inline int agent_scrape__start(struct agent *a)
{
	return 0;
}
static inline void agent_scrape__ship(struct agent *a)
{
}
static inline void agent_scrape__finish(struct agent *a)
{
}
static inline void agent_scrape__comment(struct agent *a, char *buf, size_t len)
{
}
static inline void agent_scrape__stop(struct agent *a)
{
}
#endif /* CONFIG_AGENT_SCRAPE */

#endif /* EDGEPROF_AGENT_DAEMON_SCRAPE_LOOP_H */
