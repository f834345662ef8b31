/* SPDX-License-Identifier: MIT */
/*
 * store/query/selector.h — Pyroscope/FlameQL-style selectors:
 *
 *   service{label="v", other!="x", re=~"eu-.*", nre!~"test.*"}     service{}     {}     service
 *
 * Values are double-quoted with \" \\ \n \t \r escapes; regexes are POSIX extended, anchored at both
 * ends (as Prometheus does). The service name is matched exactly ("" or absent = any service);
 * it may also be given as a matcher on the label "service" or "__name__". A matcher on the label
 * "device" matches the record's device (the client certificate's CN). A label that is absent
 * compares as "" (so x!="v" matches records without x, x="" matches them too).
 *
 * For Pyroscope's ingest (name=app.cpu{env=prod,region=eu}) SELECTOR_F_INGEST accepts unquoted
 * values with only '=', and the caller reads the result back with selector__matcher().
 */
#ifndef EDGEPROF_STORE_SELECTOR_H
#define EDGEPROF_STORE_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "port/ringfile.h"

#define SELECTOR_MAX_MATCHERS 64
#define SELECTOR_MAX_LEN 4096
/*
 * glibc's regcomp() takes exponential time and memory on some patterns (r**********...,
 * nested counted repeats); selectors come from anyone who can query, so a regex is refused
 * when longer than this, when a quantifier follows a quantifier (RE2, which Pyroscope and
 * Prometheus use, refuses that too), when a {m,n} bound exceeds SELECTOR_MAX_REPEAT, or with
 * more than SELECTOR_MAX_QUANTIFIERS quantifiers or SELECTOR_MAX_GROUP_DEPTH nested groups.
 */
#define SELECTOR_MAX_REGEX 256
#define SELECTOR_MAX_REPEAT 100
#define SELECTOR_MAX_QUANTIFIERS 16
#define SELECTOR_MAX_GROUP_DEPTH 4
/*
 * What bounds a query whatever its text: the positions of a selector's regexes once counted
 * repeats are written out (compile memory and the time of one match follow it; 500 is about
 * 11 MB and 0.2 ms per 4 KiB value), and the CPU its matching may take over one request.
 */
#define SELECTOR_MAX_EXPANSION 500
#define SELECTOR_MATCH_CPU_MS 1000

enum selector_op { SEL_EQ, SEL_NE, SEL_RE, SEL_NRE };

/*
 * SELECTOR_F_NO_BUDGET: no CPU budget (which is per selector and per request): for selectors the
 * operator configures at start and that live as long as the process, matched from any thread
 * (the metrics rules); the regex size bounds still apply.
 */
enum { SELECTOR_F_INGEST = 1 << 0, SELECTOR_F_NO_BUDGET = 1 << 1 };

struct selector;

/*
 * Parses text; returns 0 or -EINVAL / -E2BIG / -ENOMEM with a message naming the column
 * (1-based), e.g. "selector: expected '=' after label name at column 9".
 */
int selector__parse(const char *text, unsigned flags, struct selector **out, char *err,
		    size_t errlen);

/* The service name, or "" when the selector matches any service. */
const char *selector__service(const struct selector *sel);
size_t selector__n_matchers(const struct selector *sel);
/* The i-th matcher (0-based) in the order written; 0 or -ENOENT. */
int selector__matcher(const struct selector *sel, size_t i, const char **name,
		      enum selector_op *op, const char **value);

bool selector__match(const struct selector *sel, const char *service, const char *device,
		     const struct record_label *labels, size_t n_labels);

void selector__free(struct selector *sel); /* NULL-safe */
/* True once matching spent its CPU budget (SELECTOR_MATCH_CPU_MS): what matched is partial. */
bool selector__over_budget(const struct selector *sel);

#endif /* EDGEPROF_STORE_SELECTOR_H */
