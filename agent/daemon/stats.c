// SPDX-License-Identifier: MIT
/* agent/daemon/stats.c — one printer for every stats table (agent/daemon/stats.h). */
#include <stdio.h>
#include <string.h>

#include "agent/daemon/stats.h"
#include "port/clock.h"
#include "port/log.h"

static uint64_t stat_value(const void *st, const struct stat_field *f)
{
	const unsigned char *p = (const unsigned char *)st + f->off;
	uint64_t v = 0;

	switch (f->size) {
	case 1: {
		uint8_t x;

		memcpy(&x, p, sizeof(x));
		v = x;
		break;
	}
	case 2: {
		uint16_t x;

		memcpy(&x, p, sizeof(x));
		v = x;
		break;
	}
	case 4: {
		uint32_t x;

		memcpy(&x, p, sizeof(x));
		v = x;
		break;
	}
	default:
		memcpy(&v, p, sizeof(v));
		break;
	}
	return f->ns_to_ms ? v / NSEC_PER_MSEC : v;
}

void stats__append(char *buf, size_t len, const char *head, const struct stat_field *table,
		   size_t n, const void *st)
{
	size_t used = strlen(buf);

	if (used + 1 >= len)
		return;
	snprintf(buf + used, len - used, "%s", head);
	for (size_t i = 0; i < n; i++) {
		used += strlen(buf + used);
		if (used + 1 >= len)
			return;
		snprintf(buf + used, len - used, " %.*s=%llu", (int)sizeof(table[i].name),
			 table[i].name, (unsigned long long)stat_value(st, &table[i]));
	}
}

unsigned stats__say_losses(const char *where, const struct stat_field *table, size_t n,
			   const void *st, const struct stat_loss *losses, size_t n_losses)
{
	unsigned said = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t v = stat_value(st, &table[i]);

		for (size_t j = 0; v && j < n_losses; j++) {
			if (strncmp(table[i].name, losses[j].name, sizeof(table[i].name)))
				continue;
			pr_warn("%s: %llu %s%s%s", where, (unsigned long long)v, losses[j].what,
				losses[j].remedy ? "; " : "", losses[j].remedy ? losses[j].remedy : "");
			said++;
		}
	}
	return said;
}
