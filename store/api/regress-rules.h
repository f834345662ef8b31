/* SPDX-License-Identifier: MIT */
/*
 * store/api/regress-rules.h — standing regression rules (--regression-rule 'NAME=SELECTOR by
 * LABEL'): every interval the collector compares, within SELECTOR, the newest value of LABEL
 * (by the first time a profile carried it) against the previous one, over the time both ran
 * (from the newest value's first profile to now: a staged roll-out's same days), with the
 * comparison of GET /api/0/regressions (pprof/view/regress.h), and keeps the findings for
 * GET /metrics (edgeprof_regression{rule,function,...}, for Prometheus/Alertmanager) and for
 * GET /api/0/regressions/rules (the web UI's list).
 */
#ifndef EDGEPROF_STORE_API_REGRESS_RULES_H
#define EDGEPROF_STORE_API_REGRESS_RULES_H

#include <stddef.h>

#include "store/store.h"

#define REGRESS_RULES_MAX 16		/* --regression-rule flags */
#define REGRESS_RULE_MAX_FINDINGS 200	/* kept per rule (more counted as dropped) */
#define REGRESS_RULE_MAX_VALUES 256	/* distinct LABEL values looked at per run (more: counted) */
#define REGRESS_RULES_DEFAULT_INTERVAL_S 3600

struct regress_rules_opts {
	const char *rules[REGRESS_RULES_MAX + 1];	/* texts; one more than allowed: refused */
	size_t n;
	unsigned interval_s;	/* 0: REGRESS_RULES_DEFAULT_INTERVAL_S */
};

struct regress_rules;
struct sbuf;

/* Parses the rules and starts their thread (first run at once). NULL + err, or NULL + no error
 * (err "") when there are no rules. */
struct regress_rules *regress_rules__new(struct store *s, const struct regress_rules_opts *o,
					 char *err, size_t errlen);
void regress_rules__free(struct regress_rules *rr);	/* stops the thread; NULL-safe */

/* The latest findings as Prometheus text (gauges), and as JSON (an array of rules). */
void regress_rules__metrics(struct regress_rules *rr, struct sbuf *b);
void regress_rules__json(struct regress_rules *rr, struct sbuf *b);

#endif /* EDGEPROF_STORE_API_REGRESS_RULES_H */
