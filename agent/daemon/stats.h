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

/*
 * 28 bytes, and no relocation: a pointer to the name would cost a pointer and a relocation
 * entry (24 bytes) more per counter in a PIE agent, more than the format strings it replaces.
 */
struct stat_field {
	char name[24];		/* not NUL-terminated when 24 long */
	uint16_t off;		/* in the struct the table describes */
	uint8_t size;		/* of the counter: 1, 2, 4 or 8 bytes, unsigned */
	uint8_t ns_to_ms;	/* a time in ns, printed in ms */
};

/* Counter member of type, printed as name (member may be nested: st.cfi.rows). */
#define STAT(type, member, name) { name, offsetof(type, member), sizeof(((type *)0)->member), 0 }
#define STAT_MS(type, member, name)                                                        \
	{ name, offsetof(type, member), sizeof(((type *)0)->member), 1 }

#define STATS_N(table) (sizeof(table) / sizeof((table)[0]))

/*
 * Appends head, then " name=value" for each of the n counters of table in st, to the string
 * in buf, truncated to len like snprintf. table may be NULL (n 0): head alone.
 */
void stats__append(char *buf, size_t len, const char *head, const struct stat_field *table,
		   size_t n, const void *st);

/* A loss counter said in words: "<n> <what>; <remedy>" when it is not 0. */
struct stat_loss {
	const char *name;	/* the counter's name in its table */
	const char *what;	/* "samples lost: the stack table was full" */
	const char *remedy;	/* "raise --stack-entries", or NULL */
};

/*
 * Warns, one line each, of the counters of table in st that losses names and that are not 0:
 * "<where>: <n> <what>; <remedy>". Returns how many it said.
 */
unsigned stats__say_losses(const char *where, const struct stat_field *table, size_t n,
			   const void *st, const struct stat_loss *losses, size_t n_losses);

#endif /* EDGEPROF_AGENT_DAEMON_STATS_H */
