/* SPDX-License-Identifier: MIT */
/*
 * agent/daemon/stats.h — the counters the agent writes into its profiles' comments
 * ("edgeprof bpf: samples=... dropped_ringbuf=..."), printed from tables instead of by hand:
 * a table lists, per counter, its name and where it is in a stats struct; one function prints
 * any of them. Tools and tests read these lines by name: a table's names are its interface.
 */
#ifndef EDGEPROF_AGENT_DAEMON_STATS_H
#define EDGEPROF_AGENT_DAEMON_STATS_H

#include <stddef.h>
#include <stdint.h>

struct stat_field {
	const char *name;
	size_t off;		/* in the struct the table describes */
	unsigned char size;	/* of the counter: 1, 2, 4 or 8 bytes, unsigned */
	uint32_t div;		/* printed as value / div (a time in ns as ms: NSEC_PER_MSEC) */
};

/* Counter member of type, printed as name (member may be nested: "st.cfi.rows"). */
#define STAT_DIV(type, member, name, div)                                                  \
	{ (name), offsetof(type, member), sizeof(((type *)0)->member), (div) }
#define STAT(type, member, name) STAT_DIV(type, member, name, 1)

#define STATS_N(table) (sizeof(table) / sizeof((table)[0]))

/*
 * Appends head, then " name=value" for each of the n counters of table in st, to the string
 * in buf, truncated to len like snprintf. table may be NULL (n 0): head alone.
 */
void stats__append(char *buf, size_t len, const char *head, const struct stat_field *table,
		   size_t n, const void *st);

#endif /* EDGEPROF_AGENT_DAEMON_STATS_H */
