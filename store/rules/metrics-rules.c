// SPDX-License-Identifier: MIT
/*
 * store/rules/metrics-rules.c — counters from profiles at ingest (store/rules/metrics-rules.h): the rules'
 * parser, their evaluation on a decoded profile, the bounded table of series, and its text.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/rules/metrics-rules.h"
#include "store/query/selector.h"
#include "port/clock.h"
#include "port/hash.h"

#define MR_NAME_MAX 128 /* metric name */
#define MR_BY_MAX 8	/* labels of by () */
#define MR_KEY_MAX 4096 /* a series' label values, NUL-separated */

enum mr_unit { MR_SECONDS, MR_BYTES, MR_COUNT, MR__N };
static const char *const mr_suffix[MR__N] = {"_seconds_total", "_bytes_total", "_total"};
static const char *const mr_what[MR__N] = {"seconds", "bytes", "count"};

struct mr_rule {
	char name[MR_NAME_MAX];
	char *text;		  /* as given, for # HELP */
	struct selector *sel;	  /* profiles */
	struct selector *fn;	  /* NULL, or {function op "v"} on function names */
	enum selector_op fn_op;	  /* fn's matcher, matched directly (a profile has thousands) */
	const char *fn_value;	  /* (in fn) */
	regex_t fn_re;		  /* fn_value anchored, for =~ and !~ */
	size_t fn_prefix;	  /* a literal start every match has (regex_prefix()) */
	char *by[MR_BY_MAX];	  /* label names as matched */
	char *by_prom[MR_BY_MAX]; /* the same as Prometheus label names */
	size_t n_by;
	size_t n_series;	  /* its series in the table */
	uint64_t dropped;	  /* its profiles whose series did not fit its share */
};

struct mr_series {
	uint64_t hash;
	uint64_t value; /* ns for seconds, else bytes or count */
	uint64_t touched_ns; /* port_clock_mono_ns() of its last profile */
	char *key;	/* label values, each NUL-terminated */
	uint16_t key_len;
	uint16_t rule;
	uint8_t unit;
};

struct metrics_rules {
	pthread_mutex_t lock;
	struct mr_rule rules[METRICS_RULES_MAX];
	size_t n_rules;
	struct mr_series *series;
	size_t n_series, max_series;
	uint32_t *slots;    /* open addressing: series index + 1, 0 = empty */
	size_t n_slots;	    /* a power of two, >= 2 x max_series */
	uint64_t dropped;   /* profiles whose series did not fit */
	uint64_t snapshots; /* matching profiles without a counter sample type */
	uint64_t idle_ns;   /* a series without a profile for this long is freed (0 = never) */
	uint64_t swept_ns;  /* the last sweep for idle series */
	uint64_t freed;	    /* series freed idle */
};

struct metrics_rules *metrics_rules__new(size_t max_series)
{
	struct metrics_rules *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->max_series = max_series ? max_series : CONFIG_COLLECTOR_METRICS_SERIES;
	for (r->n_slots = 16; r->n_slots < 2 * r->max_series; r->n_slots *= 2)
		;
	r->series = calloc(r->max_series, sizeof(*r->series));
	r->slots = calloc(r->n_slots, sizeof(*r->slots));
	if (!r->series || !r->slots) {
		free(r->series);
		free(r->slots);
		free(r);
		return NULL;
	}
	r->idle_ns = (uint64_t)CONFIG_COLLECTOR_METRICS_SERIES_IDLE_S * NSEC_PER_SEC;
	pthread_mutex_init(&r->lock, NULL);
	return r;
}

void metrics_rules__set_idle_ms(struct metrics_rules *r, uint64_t ms)
{
	r->idle_ns = ms * NSEC_PER_MSEC;
}

static void rule_free(struct mr_rule *ru)
{
	free(ru->text);
	selector__free(ru->sel);
	if (ru->fn && (ru->fn_op == SEL_RE || ru->fn_op == SEL_NRE))
		regfree(&ru->fn_re);
	selector__free(ru->fn);
	for (size_t i = 0; i < ru->n_by; i++) {
		free(ru->by[i]);
		free(ru->by_prom[i]);
	}
}

void metrics_rules__free(struct metrics_rules *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_rules; i++)
		rule_free(&r->rules[i]);
	for (size_t i = 0; i < r->n_series; i++)
		free(r->series[i].key);
	free(r->series);
	free(r->slots);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

size_t metrics_rules__count(const struct metrics_rules *r)
{
	return r ? r->n_rules : 0;
}

/* ---- parsing ------------------------------------------------------------------------------ */

static const char *skip_ws(const char *p)
{
	while (isspace((unsigned char)*p))
		p++;
	return p;
}

/* End of a double-quoted string starting at p (on the '"'): just past it, or NULL. */
static const char *quoted_end(const char *p)
{
	for (p++; *p && *p != '"'; p++)
		if (*p == '\\' && p[1])
			p++;
	return *p ? p + 1 : NULL;
}

/* End of the selector at p: service, service{...} or {...} (quotes may hold braces). */
static const char *selector_end(const char *p)
{
	while (*p && !isspace((unsigned char)*p) && *p != '{')
		p++;
	if (*p != '{')
		return p;
	while (*p && *p != '}') {
		if (*p == '"') {
			p = quoted_end(p);
			if (!p)
				return NULL;
		} else {
			p++;
		}
	}
	return *p ? p + 1 : NULL;
}

static bool prom_name_ok(const char *s, size_t n)
{
	if (!n || isdigit((unsigned char)s[0]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != ':')
			return false;
	return true;
}

/*
 * How many leading characters of an (anchored) regex every match starts with: letters, digits,
 * '_' and ':' up to the first other character, less the last one when a quantifier follows it;
 * 0 when the regex has an alternation anywhere. Names without that start need no regexec (a
 * profile has thousands of names, and "func_1.*" must look at few of them).
 */
static size_t regex_prefix(const char *re)
{
	size_t n = 0;

	if (strchr(re, '|'))
		return 0;
	while (isalnum((unsigned char)re[n]) || re[n] == '_' || re[n] == ':')
		n++;
	if (n && (re[n] == '*' || re[n] == '?' || re[n] == '{' || re[n] == '+'))
		n--;
	return n;
}

/* function="F" (=, !=, =~, !~): parsed as the selector {function op "F"}. */
static const char *parse_function(struct mr_rule *ru, const char *p, char *err, size_t errlen)
{
	const char *q = p + strlen("function"), *end;
	char text[SELECTOR_MAX_LEN], serr[200];

	q = skip_ws(q);
	if (*q == '!' || (*q == '=' && q[1] == '~'))
		q += 2;
	else if (*q == '=')
		q++;
	else
		q = NULL;
	end = q ? skip_ws(q) : NULL;
	if (!end || *end != '"' || !(end = quoted_end(end))) {
		snprintf(err, errlen,
			 "expected function=\"NAME\" (or !=, =~, !~ with a quoted value)");
		return NULL;
	}
	if (ru->fn) {
		snprintf(err, errlen, "more than one function filter");
		return NULL;
	}
	if ((size_t)(end - p) + 3 > sizeof(text)) {
		snprintf(err, errlen, "function filter too long");
		return NULL;
	}
	snprintf(text, sizeof(text), "{%.*s}", (int)(end - p), p);
	if (selector__parse(text, SELECTOR_F_NO_BUDGET, &ru->fn, serr, sizeof(serr))) {
		snprintf(err, errlen, "function filter: %s", serr);
		return NULL;
	}
	/* the selector checked the regex (size bounds); compile it as it does, to match names */
	selector__matcher(ru->fn, 0, &(const char *){NULL}, &ru->fn_op, &ru->fn_value);
	if (ru->fn_op == SEL_RE || ru->fn_op == SEL_NRE) {
		snprintf(text, sizeof(text), "^(%s)$", ru->fn_value);
		if (regcomp(&ru->fn_re, text, REG_EXTENDED | REG_NOSUB)) {
			ru->fn_op = SEL_EQ; /* nothing to regfree */
			snprintf(err, errlen, "function filter: bad regex");
			return NULL;
		}
		ru->fn_prefix = regex_prefix(ru->fn_value);
	}
	return end;
}

/* by (label, ...): names as in selectors; Prometheus' name has '_' for other characters. */
static const char *parse_by(struct mr_rule *ru, const char *p, char *err, size_t errlen)
{
	p = skip_ws(p + 2);
	if (*p != '(') {
		snprintf(err, errlen, "expected '(' after by");
		return NULL;
	}
	if (ru->n_by) {
		snprintf(err, errlen, "more than one by ()");
		return NULL;
	}
	for (p = skip_ws(p + 1); *p != ')'; p = skip_ws(p)) {
		size_t n = 0;

		while (isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '.' || p[n] == '-')
			n++;
		if (!n) {
			snprintf(err, errlen, "expected a label name in by () at '%.20s'", p);
			return NULL;
		}
		if (ru->n_by == MR_BY_MAX) {
			snprintf(err, errlen, "more than %d labels in by ()", MR_BY_MAX);
			return NULL;
		}
		ru->by[ru->n_by] = strndup(p, n);
		ru->by_prom[ru->n_by] = strndup(p, n);
		if (!ru->by[ru->n_by] || !ru->by_prom[ru->n_by]) {
			ru->n_by++; /* rule_free() frees what was made */
			snprintf(err, errlen, "out of memory");
			return NULL;
		}
		for (char *c = ru->by_prom[ru->n_by]; *c; c++)
			if (!isalnum((unsigned char)*c))
				*c = '_';
		if (isdigit((unsigned char)ru->by_prom[ru->n_by][0]) ||
		    !strncmp(ru->by_prom[ru->n_by], "__", 2)) {
			snprintf(err, errlen, "label '%s' cannot be a Prometheus label name",
				 ru->by[ru->n_by]);
			ru->n_by++;
			return NULL;
		}
		for (size_t i = 0; i < ru->n_by; i++)
			if (!strcmp(ru->by_prom[i], ru->by_prom[ru->n_by])) {
				snprintf(err, errlen, "label '%s' twice in by ()",
					 ru->by[ru->n_by]);
				ru->n_by++;
				return NULL;
			}
		ru->n_by++;
		p = skip_ws(p + n);
		if (*p == ',')
			p++;
		else if (*p != ')') {
			snprintf(err, errlen, "expected ',' or ')' in by () at '%.20s'", p);
			return NULL;
		}
	}
	return p + 1;
}

static const char *unexpected(const char *p, char *err, size_t errlen)
{
	snprintf(err, errlen, "expected function=\"NAME\" or by (label, ...) at '%.20s'", p);
	return NULL;
}

static int parse_rule(struct mr_rule *ru, const char *text, char *err, size_t errlen)
{
	const char *eq = strchr(text, '='), *p, *end;
	char sel[SELECTOR_MAX_LEN], serr[200];
	int ret;

	if (!eq || !prom_name_ok(text, (size_t)(eq - text)) ||
	    (size_t)(eq - text) >= MR_NAME_MAX - 16) {
		snprintf(err, errlen,
			 "expected NAME=SELECTOR with NAME a Prometheus metric name "
			 "([a-zA-Z_:][a-zA-Z0-9_:]*, under %d characters)",
			 MR_NAME_MAX - 16);
		return -EINVAL;
	}
	snprintf(ru->name, sizeof(ru->name), "%.*s", (int)(eq - text), text);
	p = skip_ws(eq + 1);
	end = selector_end(p);
	if (!end || (size_t)(end - p) >= sizeof(sel)) {
		snprintf(err, errlen, "selector: unterminated or too long");
		return -EINVAL;
	}
	snprintf(sel, sizeof(sel), "%.*s", (int)(end - p), p);
	ret = selector__parse(sel, SELECTOR_F_NO_BUDGET, &ru->sel, serr, sizeof(serr));
	if (ret) {
		snprintf(err, errlen, "%s", serr);
		return ret;
	}
	for (p = skip_ws(end); *p; p = skip_ws(p)) {
		if (!strncmp(p, "function", 8) && !isalnum((unsigned char)p[8]))
			p = parse_function(ru, p, err, errlen);
		else if (!strncmp(p, "by", 2) && (isspace((unsigned char)p[2]) || p[2] == '('))
			p = parse_by(ru, p, err, errlen);
		else
			p = unexpected(p, err, errlen);
		if (!p)
			return -EINVAL;
	}
	ru->text = strdup(text);
	return ru->text ? 0 : -ENOMEM;
}

int metrics_rules__add(struct metrics_rules *r, const char *text, char *err, size_t errlen)
{
	struct mr_rule *ru;
	char perr[256] = "";
	int ret;

	if (r->n_rules == METRICS_RULES_MAX) {
		snprintf(err, errlen,
			 "more than %d metrics rules (CONFIG_COLLECTOR_METRICS_RULES_MAX)",
			 METRICS_RULES_MAX);
		return -E2BIG;
	}
	ru = &r->rules[r->n_rules];
	memset(ru, 0, sizeof(*ru));
	ret = parse_rule(ru, text, perr, sizeof(perr));
	for (size_t i = 0; !ret && i < r->n_rules; i++)
		if (!strcmp(r->rules[i].name, ru->name)) {
			snprintf(perr, sizeof(perr), "a rule named %s already exists", ru->name);
			ret = -EINVAL;
		}
	if (ret) {
		snprintf(err, errlen, "--metrics-rule '%s': %s", text, perr);
		rule_free(ru);
		memset(ru, 0, sizeof(*ru));
		return ret;
	}
	r->n_rules++;
	return 0;
}

/* ---- evaluation --------------------------------------------------------------------------- */

/* A label's value for matching and by (): the labels, then service, device and type. */
static const char *meta_value(const struct record_meta *m, const char *name)
{
	for (size_t i = 0; i < m->n_labels; i++)
		if (!strcmp(m->labels[i].key, name))
			return m->labels[i].value ? m->labels[i].value : "";
	if (!strcmp(name, "service"))
		return m->service ? m->service : "";
	if (!strcmp(name, "device"))
		return m->device ? m->device : "";
	if (!strcmp(name, "type"))
		return m->type ? m->type : "";
	return "";
}

/*
 * The sample type a counter is made of, its unit and the factor to our base unit (ns, bytes,
 * count): -1 when the profile has only snapshots (inuse_*, goroutine).
 */
static int counter_index(const struct pprof_profile *p, enum mr_unit *unit, int64_t *scale)
{
	static const struct {
		const char *name;
		int64_t scale;
	} times[] = {
	    {"nanoseconds", 1},
	    {"microseconds", 1000},
	    {"milliseconds", 1000000},
	    {"seconds", 1000000000},
	};
	int best = -1;

	for (size_t i = 0; i < p->n_sample_type; i++) {
		const char *t = pprof_str(p, p->sample_type[i].type);
		const char *u = pprof_str(p, p->sample_type[i].unit);
		enum mr_unit k = MR_COUNT;

		if (!strncmp(t, "inuse_", 6) || !strcmp(t, "goroutine"))
			continue;
		for (size_t j = 0; j < sizeof(times) / sizeof(times[0]); j++)
			if (!strcmp(u, times[j].name)) {
				k = MR_SECONDS;
				*scale = times[j].scale;
			}
		if (k == MR_COUNT && !strcmp(u, "bytes"))
			k = MR_BYTES;
		if (best < 0 || k < *unit) {
			best = (int)i;
			*unit = k;
			if (k != MR_SECONDS)
				*scale = 1;
		}
	}
	return best;
}

/*
 * Marks the locations whose frames (inlined ones too) hold a function fn matches: lhit[id] for
 * location id (ids are dense after pprof_read: locations[id - 1]; lhit[0] stays 0). Returns
 * whether any does.
 */
static bool mark_locations(const struct pprof_profile *p, const struct mr_rule *ru,
			   unsigned char *fhit, unsigned char *lhit)
{
	bool any = false;

	for (size_t i = 0; i < p->n_functions; i++) {
		const char *name = pprof_str(p, p->functions[i].name);
		bool hit;

		if (!*name)
			name = pprof_str(p, p->functions[i].system_name);
		if (ru->fn_op == SEL_RE || ru->fn_op == SEL_NRE)
			hit = !strncmp(name, ru->fn_value, ru->fn_prefix) &&
			      !regexec(&ru->fn_re, name, 0, NULL, 0);
		else
			hit = !strcmp(name, ru->fn_value);
		fhit[i] = hit;
	}
	lhit[0] = 0;
	for (size_t i = 0; i < p->n_locations; i++) {
		const struct pprof_location *loc = &p->locations[i];
		unsigned char hit = 0;

		for (size_t j = 0; j < loc->n_lines; j++) {
			uint64_t f = loc->lines[j].function_id;

			hit |= f >= 1 && f <= p->n_functions && fhit[f - 1];
		}
		lhit[i + 1] = hit;
		any |= hit;
	}
	return any;
}

/*
 * The sum of value vi over the samples: all (lhit NULL), those with a marked location, or
 * (negate) those without one. The hot loop of a function filter: every frame is looked at.
 */
static int64_t sum_samples(const struct pprof_profile *p, int vi, const unsigned char *lhit,
			   bool negate)
{
	const uint64_t n = p->n_locations;
	int64_t sum = 0;

	for (size_t i = 0; i < p->n_samples; i++) {
		const struct pprof_sample *s = &p->samples[i];
		const uint64_t *ids = s->location_ids;
		unsigned char in = 0;

		if (s->values[vi] <= 0)
			continue;
		for (size_t j = 0, k = lhit ? s->n_locations : 0; !in && j < k; j++)
			in = lhit[ids[j] <= n ? ids[j] : 0];
		if (!lhit || in != negate)
			sum += s->values[vi];
	}
	return sum;
}

void metrics_rules__eval(const struct metrics_rules *r, const struct record_meta *meta,
			 const struct pprof_profile *p, struct metrics_pending *out)
{
	struct record_label labels[RINGFILE_MAX_LABELS + 1];
	unsigned char *marks = NULL;
	enum mr_unit unit = MR_COUNT;
	int64_t scale = 1, all = -1;
	size_t n = meta->n_labels < RINGFILE_MAX_LABELS ? meta->n_labels : RINGFILE_MAX_LABELS;
	int vi;

	out->any = false;
	if (!r || !r->n_rules || !p)
		return;
	if (n) /* no labels: meta->labels may be NULL, which memcpy must not get */
		memcpy(labels, meta->labels, n * sizeof(*labels));
	labels[n].key = "type"; /* selectors may match the type too */
	labels[n++].value = meta->type ? meta->type : "";
	vi = counter_index(p, &unit, &scale);
	for (size_t i = 0; i < r->n_rules; i++) {
		const struct mr_rule *ru = &r->rules[i];
		bool negate;
		int64_t v;

		out->hit[i] = selector__match(ru->sel, meta->service, meta->device, labels, n);
		if (!out->hit[i])
			continue;
		out->any = true;
		out->unit[i] = (unsigned char)unit;
		if (vi < 0) {
			out->value[i] = -1; /* a snapshot: counted, adds nothing */
			continue;
		}
		if (!ru->fn) {
			if (all < 0)
				all = sum_samples(p, vi, NULL, false);
			v = all;
		} else {
			if (!marks)
				marks = malloc(p->n_functions + p->n_locations + 1);
			if (!marks) {
				out->hit[i] = false;
				continue;
			}
			negate = ru->fn_op == SEL_NE || ru->fn_op == SEL_NRE;
			if (mark_locations(p, ru, marks, marks + p->n_functions))
				v = sum_samples(p, vi, marks + p->n_functions, negate);
			else /* no function matches: no stack to look at */
				v = negate ? sum_samples(p, vi, NULL, false) : 0;
		}
		out->value[i] = v > INT64_MAX / scale ? INT64_MAX : v * scale;
	}
	free(marks);
}

/* ---- the series table ---------------------------------------------------------------------- */

static uint64_t hash_key(size_t rule, unsigned unit, const char *key, size_t len)
{
	return hash_fnv64_add(HASH_FNV64_BASIS ^ (rule << 8 | unit), key, len);
}

/* Where (rule, unit, key) is or would go in the slots; *found its series or NULL. */
static size_t series_find(const struct metrics_rules *r, uint64_t h, size_t rule, unsigned unit,
			  const char *key, size_t len, struct mr_series **found)
{
	size_t i = h & (r->n_slots - 1);

	*found = NULL;
	for (; r->slots[i]; i = (i + 1) & (r->n_slots - 1)) {
		struct mr_series *s = &r->series[r->slots[i] - 1];

		if (s->hash == h && s->rule == rule && s->unit == unit && s->key_len == len &&
		    !memcmp(s->key, key, len)) {
			*found = s;
			break;
		}
	}
	return i;
}

/*
 * Frees the series no profile updated for idle_ns (a device that went away, a version no
 * longer deployed), so that their rule's share is free for new ones: the table is compacted
 * and its slots rebuilt (O(max_series), hence at most once a second, or a quarter of idle_ns
 * when that is shorter). Prometheus sees such a
 * counter end; if it comes back it starts from 0, which rate() reads as a counter reset.
 */
static void series_sweep(struct metrics_rules *r, uint64_t now)
{
	size_t kept = 0;

	if (!r->idle_ns || now - r->swept_ns < (r->idle_ns / 4 < NSEC_PER_SEC ? r->idle_ns / 4
									   : NSEC_PER_SEC))
		return;
	r->swept_ns = now;
	for (size_t i = 0; i < r->n_series; i++) {
		struct mr_series *s = &r->series[i];

		if (now - s->touched_ns >= r->idle_ns) {
			free(s->key);
			r->rules[s->rule].n_series--;
			r->freed++;
			continue;
		}
		r->series[kept++] = *s;
	}
	if (kept == r->n_series)
		return;
	r->n_series = kept;
	memset(r->slots, 0, r->n_slots * sizeof(*r->slots));
	for (size_t i = 0; i < kept; i++) {
		struct mr_series *s = &r->series[i], *dup;
		size_t pos = series_find(r, s->hash, s->rule, s->unit, s->key, s->key_len, &dup);

		r->slots[pos] = (uint32_t)(i + 1);
	}
}

/* Whether rule may add a series: the table has room, and the rule its share. */
static bool series_room(const struct metrics_rules *r, size_t rule)
{
	size_t share = r->max_series / r->n_rules ? r->max_series / r->n_rules : 1;

	return r->n_series < r->max_series && r->rules[rule].n_series < share;
}

/* The series of (rule, unit, key), made when missing and room is left: NULL when full. */
static struct mr_series *series_get(struct metrics_rules *r, size_t rule, unsigned unit,
				    const char *key, size_t len, uint64_t now)
{
	uint64_t h = hash_key(rule, unit, key, len);
	struct mr_series *s;
	size_t i = series_find(r, h, rule, unit, key, len, &s);

	if (s)
		return s;
	/*
	 * Each rule has its share of the table: one rule whose labels take unbounded values
	 * (a device name) cannot leave the others without series. Idle series make room.
	 */
	if (!series_room(r, rule)) {
		series_sweep(r, now);
		if (!series_room(r, rule))
			return NULL;
		i = series_find(r, h, rule, unit, key, len, &s);
	}
	s = &r->series[r->n_series];
	s->key = malloc(len ? len : 1);
	if (!s->key)
		return NULL;
	memcpy(s->key, key, len);
	s->key_len = (uint16_t)len;
	s->hash = h;
	s->rule = (uint16_t)rule;
	s->unit = (uint8_t)unit;
	s->value = 0;
	r->slots[i] = (uint32_t)++r->n_series;
	r->rules[rule].n_series++;
	return s;
}

void metrics_rules__commit(struct metrics_rules *r, const struct record_meta *meta,
			   const struct metrics_pending *pend)
{
	char key[MR_KEY_MAX];
	uint64_t now;

	if (!r || !pend->any)
		return;
	now = port_clock_mono_ns();
	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->n_rules; i++) {
		const struct mr_rule *ru = &r->rules[i];
		struct mr_series *s = NULL;
		size_t len = 0;

		if (!pend->hit[i])
			continue;
		if (pend->value[i] < 0) {
			r->snapshots++;
			continue;
		}
		for (size_t j = 0; j < ru->n_by && len < sizeof(key); j++) {
			const char *v = meta_value(meta, ru->by[j]);
			size_t vl = strlen(v) + 1;

			if (len + vl > sizeof(key)) {
				len = sizeof(key);
				break;
			}
			memcpy(key + len, v, vl);
			len += vl;
		}
		if (len < sizeof(key))
			s = series_get(r, i, pend->unit[i], key, len, now);
		if (s) {
			s->value += (uint64_t)pend->value[i];
			s->touched_ns = now;
		} else {
			r->dropped++;
			r->rules[i].dropped++;
		}
	}
	pthread_mutex_unlock(&r->lock);
}

/* ---- text ---------------------------------------------------------------------------------- */

static void put_escaped(FILE *f, const char *s, bool quotes)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else if (*s == '"' && quotes)
			fputs("\\\"", f);
		else
			fputc(*s, f);
	}
}

static void put_series(FILE *f, const struct mr_rule *ru, const struct mr_series *s)
{
	const char *v = s->key;

	fprintf(f, "%s%s", ru->name, mr_suffix[s->unit]);
	for (size_t j = 0; j < ru->n_by; j++) {
		fprintf(f, "%s%s=\"", j ? "," : "{", ru->by_prom[j]);
		put_escaped(f, v, true);
		fputc('"', f);
		v += strlen(v) + 1;
	}
	if (ru->n_by)
		fputc('}', f);
	if (s->unit == MR_SECONDS)
		fprintf(f, " %" PRIu64 ".%09" PRIu64 "\n", s->value / 1000000000,
			s->value % 1000000000);
	else
		fprintf(f, " %" PRIu64 "\n", s->value);
}

static void put_family(FILE *f, const struct metrics_rules *r, size_t rule, unsigned unit)
{
	const struct mr_rule *ru = &r->rules[rule];
	bool head = false;

	for (size_t i = 0; i < r->n_series; i++) {
		const struct mr_series *s = &r->series[i];

		if (s->rule != rule || s->unit != unit)
			continue;
		if (!head) {
			fprintf(f, "# HELP %s%s Profiles' %s by metrics rule: ", ru->name,
				mr_suffix[unit], mr_what[unit]);
			put_escaped(f, ru->text, false);
			fprintf(f, "\n# TYPE %s%s counter\n", ru->name, mr_suffix[unit]);
			head = true;
		}
		put_series(f, ru, s);
	}
}

int metrics_rules__text(struct metrics_rules *r, char **out, size_t *len)
{
	FILE *f = open_memstream(out, len);

	if (!f)
		return -ENOMEM;
	pthread_mutex_lock(&r->lock);
	series_sweep(r, port_clock_mono_ns()); /* what Prometheus reads holds no idle series */
	for (size_t i = 0; i < r->n_rules; i++)
		for (unsigned u = 0; u < MR__N; u++)
			put_family(f, r, i, u);
	fprintf(f,
		"# HELP edgeprof_collector_metrics_rule_series Series of the metrics rules "
		"(at most %zu).\n# TYPE edgeprof_collector_metrics_rule_series gauge\n"
		"edgeprof_collector_metrics_rule_series %zu\n",
		r->max_series, r->n_series);
	fprintf(f,
		"# HELP edgeprof_collector_metrics_rule_series_dropped_total Profiles a rule "
		"matched whose series did not fit (--metrics-series): not counted.\n"
		"# TYPE edgeprof_collector_metrics_rule_series_dropped_total counter\n"
		"edgeprof_collector_metrics_rule_series_dropped_total %" PRIu64 "\n",
		r->dropped);
	fprintf(f,
		"# HELP edgeprof_collector_metrics_rule_series_freed_total Series freed after "
		"%" PRIu64 " s without a profile (--metrics-series-idle).\n"
		"# TYPE edgeprof_collector_metrics_rule_series_freed_total counter\n"
		"edgeprof_collector_metrics_rule_series_freed_total %" PRIu64 "\n",
		(uint64_t)(r->idle_ns / NSEC_PER_SEC), r->freed);
	fprintf(f,
		"# HELP edgeprof_collector_metrics_rule_dropped_total Profiles a rule matched "
		"whose series did not fit its share of --metrics-series (series / rules).\n"
		"# TYPE edgeprof_collector_metrics_rule_dropped_total counter\n");
	for (size_t i = 0; i < r->n_rules; i++)
		fprintf(f, "edgeprof_collector_metrics_rule_dropped_total{rule=\"%s\"} %" PRIu64
			"\n", r->rules[i].name, r->rules[i].dropped);
	fprintf(f,
		"# HELP edgeprof_collector_metrics_rule_snapshots_total Profiles a rule "
		"matched that hold only snapshots (inuse_*, goroutine): not counted.\n"
		"# TYPE edgeprof_collector_metrics_rule_snapshots_total counter\n"
		"edgeprof_collector_metrics_rule_snapshots_total %" PRIu64 "\n",
		r->snapshots);
	pthread_mutex_unlock(&r->lock);
	if (fclose(f)) {
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}
