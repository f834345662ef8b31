// SPDX-License-Identifier: MIT
/* store/query/selector.c — a small recursive-descent parser for selectors (grammar in selector.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/clock.h"
#include "store/query/selector.h"

#define STR_(x) #x
#define STR(x) STR_(x)

struct matcher {
	char *name;
	char *value;
	enum selector_op op;
	bool is_regex;
	regex_t re;
};

/* What matching has spent (selector__match takes a const selector: this is the mutable part). */
struct match_budget {
	uint64_t start_ns;	/* thread CPU time at the first regexec */
	unsigned calls;
	bool over;
};

struct selector {
	char *service;
	struct matcher m[SELECTOR_MAX_MATCHERS];
	size_t n;
	unsigned expansion;	/* of all its regexes together */
	struct match_budget *budget;
};

struct parser {
	const char *s, *p;
	unsigned flags;
	unsigned expansion;	/* regex positions so far, see regex_expansion() */
	char *err;
	size_t errlen;
};

static int perr(struct parser *ps, const char *what)
{
	snprintf(ps->err, ps->errlen, "selector: %s at column %zu", what,
		 (size_t)(ps->p - ps->s) + 1);
	return -EINVAL;
}

static void skip_ws(struct parser *ps)
{
	while (*ps->p == ' ' || *ps->p == '\t')
		ps->p++;
}

static bool is_name_start(char c)
{
	return isalpha((unsigned char)c) || c == '_';
}

/* Label names: [A-Za-z_][A-Za-z0-9_.-]*; service names also allow '.', '-', '/' and ':'. */
static bool is_name_char(char c, bool service)
{
	return isalnum((unsigned char)c) || c == '_' || c == '.' ||
	       (service && (c == '-' || c == '/' || c == ':'));
}

static char *read_name(struct parser *ps, bool service)
{
	const char *start = ps->p;

	if (!is_name_start(*ps->p))
		return NULL;
	while (is_name_char(*ps->p, service))
		ps->p++;
	return strndup(start, ps->p - start);
}

/* A double-quoted string with \" \\ \n \t escapes (or, for ingest, a bare word). */
static int read_value(struct parser *ps, char **out)
{
	size_t cap = strlen(ps->p) + 1, n = 0;
	char *v;

	if (*ps->p != '"') {
		const char *start = ps->p;

		if (!(ps->flags & SELECTOR_F_INGEST))
			return perr(ps, "expected '\"' to start the value");
		while (*ps->p && *ps->p != ',' && *ps->p != '}')
			ps->p++;
		while (ps->p > start && ps->p[-1] == ' ')
			ps->p--;
		*out = strndup(start, ps->p - start);
		return *out ? 0 : -ENOMEM;
	}
	v = malloc(cap);
	if (!v)
		return -ENOMEM;
	ps->p++;
	while (*ps->p && *ps->p != '"') {
		char c = *ps->p++;

		if (c == '\\') {
			c = *ps->p++;
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c == 'r')
				c = '\r';
			else if (c != '"' && c != '\\') {
				free(v);
				ps->p--;
				return perr(ps, "unknown escape in value");
			}
		}
		v[n++] = c;
	}
	if (*ps->p != '"') {
		free(v);
		return perr(ps, "unterminated value (missing '\"')");
	}
	ps->p++;
	v[n] = 0;
	*out = v;
	return 0;
}

static int read_op(struct parser *ps, enum selector_op *op)
{
	if (ps->p[0] == '=' && ps->p[1] == '~') {
		*op = SEL_RE;
		ps->p += 2;
	} else if (ps->p[0] == '!' && ps->p[1] == '=') {
		*op = SEL_NE;
		ps->p += 2;
	} else if (ps->p[0] == '!' && ps->p[1] == '~') {
		*op = SEL_NRE;
		ps->p += 2;
	} else if (ps->p[0] == '=') {
		*op = SEL_EQ;
		ps->p++;
	} else {
		return perr(ps, "expected '=' after label name");
	}
	if ((ps->flags & SELECTOR_F_INGEST) && *op != SEL_EQ)
		return perr(ps, "only '=' is allowed in an ingest name");
	return 0;
}

/* A {m,n} bound at *p (after '{'): advances past '}'; false when a number is too large. */
static bool repeat_ok(const char **p)
{
	const char *s = *p;

	while (*s && *s != '}') {
		if (*s >= '0' && *s <= '9') {
			char *end;

			if (strtoul(s, &end, 10) > SELECTOR_MAX_REPEAT)
				return false;
			s = end;
		} else {
			s++;
		}
	}
	*p = *s ? s + 1 : s;
	return true;
}

/* Skips a bracket expression (p is after '['): returns what follows its closing ']'. */
static const char *skip_bracket(const char *p)
{
	if (*p == '^')
		p++;
	if (*p == ']') /* a leading ']' is a literal */
		p++;
	while (*p && *p != ']') {
		if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
			const char close[3] = { p[1], ']', '\0' }, *end = strstr(p + 2, close);

			p = end ? end + 2 : p + strlen(p);
			continue;
		}
		p++;
	}
	return *p ? p + 1 : p;
}

/* {m,n} at p (after '{'): the largest count (n, or m + 1 for {m,}, or m). */
static unsigned long repeat_max(const char *p)
{
	char *end;
	unsigned long m = strtoul(p, &end, 10), n;

	if (*end != ',')
		return m;
	if (end[1] == '}')
		return m + 1;
	n = strtoul(end + 1, NULL, 10);
	return n > m ? n : m;
}

/*
 * How many positions re has once its counted repeats are written out, as glibc's regcomp()
 * does ((a{1,100}){1,100} is 10,000 copies of a): its compile memory and its matching time
 * follow this number (measured: 500 positions, 11 MB and 0.2 ms per 4 KiB value; 30,000,
 * 132 MB and 3.3 ms per 60-byte value). Saturates at UINT_MAX / 2.
 */
static unsigned regex_expansion(const char *re)
{
	unsigned long total[SELECTOR_MAX_GROUP_DEPTH + 2] = { 0 }, last = 0;
	const unsigned long cap = UINT_MAX / 2;
	int d = 0;

	for (const char *p = re; *p;) {
		char c = *p++;
		unsigned long f = 0;

		if (c == '(' && d < SELECTOR_MAX_GROUP_DEPTH + 1) {
			total[++d] = 0;
			last = 0;
			continue;
		}
		if (c == ')' && d > 0) {
			last = total[d--];
			total[d] += last;
		} else if (c == '*' || c == '?') {
			f = 1;
		} else if (c == '+') {
			f = 2; /* a+ is aa* */
		} else if (c == '{') {
			f = repeat_max(p);
			p += strcspn(p, "}");
			p += *p == '}';
		} else if (c != '|' && c != '^' && c != '$') {
			if (c == '\\' && *p)
				p++;
			else if (c == '[')
				p = skip_bracket(p);
			last = 1;
			total[d] += 1;
		}
		if (f) { /* the last item, f times */
			unsigned long grown = last * (f ? f : 1);

			if (f > cap || grown > cap)
				return (unsigned)cap;
			total[d] += grown - last;
			last = grown;
		}
		if (total[d] > cap)
			return (unsigned)cap;
	}
	while (d > 0) {
		total[d - 1] += total[d];
		d--;
	}
	return total[0] > cap ? (unsigned)cap : (unsigned)total[0];
}

/* NULL when re is safe to hand to regcomp(), else why not (see SELECTOR_MAX_REGEX). */
static const char *regex_untamed(const char *re)
{
	unsigned quantifiers = 0, depth = 0;
	bool after_quantifier = false;

	if (strlen(re) > SELECTOR_MAX_REGEX)
		return "longer than 256 characters";
	for (const char *p = re; *p;) {
		char c = *p++;
		bool quant = c == '*' || c == '+' || c == '?' || c == '{';

		if (quant && after_quantifier)
			return "a quantifier after a quantifier";
		if (quant && ++quantifiers > SELECTOR_MAX_QUANTIFIERS)
			return "more than 16 quantifiers";
		if (c == '{' && !repeat_ok(&p))
			return "a repeat count over 100";
		if (c == '\\' && *p >= '0' && *p <= '9')
			return "a backreference (\\1 to \\9 are not supported)";
		if (c == '\\' && *p)
			p++;
		else if (c == '[')
			p = skip_bracket(p);
		else if (c == '(' && ++depth > SELECTOR_MAX_GROUP_DEPTH)
			return "groups nested deeper than 4";
		else if (c == ')' && depth)
			depth--;
		after_quantifier = quant;
	}
	return NULL;
}

static int compile(struct parser *ps, struct matcher *m, const char *at)
{
	const char *why = regex_untamed(m->value);
	size_t n = strlen(m->value);
	char *anchored;
	int rc;

	if (!why) {
		ps->expansion += regex_expansion(m->value);
		if (ps->expansion > SELECTOR_MAX_EXPANSION)
			why = "over the budget of " STR(SELECTOR_MAX_EXPANSION) " positions with its "
			      "counted repeats written out (the selector's regexes together; "
			      "(a{1,10}){1,10} is 100)";
	}
	if (why) {
		ps->p = at;
		snprintf(ps->err, ps->errlen, "selector: regex refused at column %zu: %s",
			 (size_t)(at - ps->s) + 1, why);
		return -EINVAL;
	}
	anchored = malloc(n + 5);
	if (!anchored)
		return -ENOMEM;
	snprintf(anchored, n + 5, "^(%s)$", m->value);
	rc = regcomp(&m->re, anchored, REG_EXTENDED | REG_NOSUB);
	free(anchored);
	if (rc) {
		char msg[128];

		regerror(rc, &m->re, msg, sizeof(msg));
		ps->p = at;
		snprintf(ps->err, ps->errlen, "selector: bad regex \"%s\" at column %zu: %s",
			 m->value, (size_t)(at - ps->s) + 1, msg);
		return -EINVAL;
	}
	m->is_regex = true;
	return 0;
}

static int parse_matcher(struct parser *ps, struct selector *sel)
{
	struct matcher *m;
	const char *vstart;
	int err;

	if (sel->n == SELECTOR_MAX_MATCHERS)
		return perr(ps, "too many matchers");
	m = &sel->m[sel->n];
	memset(m, 0, sizeof(*m));
	m->name = read_name(ps, false);
	if (!m->name)
		return perr(ps, "expected a label name");
	sel->n++; /* owned by sel from here, freed with it */
	skip_ws(ps);
	err = read_op(ps, &m->op);
	if (err)
		return err;
	skip_ws(ps);
	vstart = ps->p;
	err = read_value(ps, &m->value);
	if (err)
		return err;
	if (m->op == SEL_RE || m->op == SEL_NRE)
		return compile(ps, m, vstart);
	return 0;
}

static int parse_braces(struct parser *ps, struct selector *sel)
{
	int err;

	ps->p++; /* '{' */
	skip_ws(ps);
	if (*ps->p == '}') {
		ps->p++;
		return 0;
	}
	for (;;) {
		err = parse_matcher(ps, sel);
		if (err)
			return err;
		skip_ws(ps);
		if (*ps->p == '}') {
			ps->p++;
			return 0;
		}
		if (*ps->p != ',')
			return perr(ps, *ps->p ? "expected ',' or '}' after a matcher"
					       : "missing '}' at the end");
		ps->p++;
		skip_ws(ps);
		if (*ps->p == '}') { /* trailing comma, as Prometheus allows */
			ps->p++;
			return 0;
		}
	}
}

/* "service" and "__name__" matchers with '=' name the service. */
static void hoist_service(struct selector *sel)
{
	if (*sel->service)
		return;
	for (size_t i = 0; i < sel->n; i++) {
		struct matcher *m = &sel->m[i];

		if (m->op == SEL_EQ &&
		    (!strcmp(m->name, "service") || !strcmp(m->name, "__name__"))) {
			free(sel->service);
			sel->service = strdup(m->value);
			return;
		}
	}
}

int selector__parse(const char *text, unsigned flags, struct selector **out, char *err,
		    size_t errlen)
{
	struct parser ps = { .s = text, .p = text, .flags = flags, .err = err, .errlen = errlen };
	struct selector *sel;
	int e = 0;

	*out = NULL;
	if (strlen(text) > SELECTOR_MAX_LEN) {
		snprintf(err, errlen, "selector: longer than %d bytes", SELECTOR_MAX_LEN);
		return -E2BIG;
	}
	sel = calloc(1, sizeof(*sel));
	if (!sel)
		return -ENOMEM;
	skip_ws(&ps);
	if (is_name_start(*ps.p)) {
		sel->service = read_name(&ps, true);
		if (!sel->service)
			e = -ENOMEM;
	} else {
		sel->service = strdup("");
	}
	skip_ws(&ps);
	if (!e && *ps.p == '{')
		e = parse_braces(&ps, sel);
	else if (!e && *ps.p && !*sel->service)
		e = perr(&ps, "expected a service name or '{'");
	if (!e) {
		skip_ws(&ps);
		if (*ps.p)
			e = perr(&ps, "unexpected text after the selector");
	}
	if (e) {
		selector__free(sel);
		return e;
	}
	hoist_service(sel);
	sel->expansion = ps.expansion;
	if (flags & SELECTOR_F_NO_BUDGET) {
		*out = sel;
		return 0;
	}
	sel->budget = calloc(1, sizeof(*sel->budget));
	if (!sel->budget) {
		selector__free(sel);
		return -ENOMEM;
	}
	*out = sel;
	return 0;
}

const char *selector__service(const struct selector *sel)
{
	return sel->service;
}

size_t selector__n_matchers(const struct selector *sel)
{
	return sel->n;
}

int selector__matcher(const struct selector *sel, size_t i, const char **name,
		      enum selector_op *op, const char **value)
{
	if (i >= sel->n)
		return -ENOENT;
	*name = sel->m[i].name;
	*op = sel->m[i].op;
	*value = sel->m[i].value;
	return 0;
}

static const char *label_value(const char *name, const char *service, const char *device,
			       const struct record_label *labels, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(labels[i].key, name))
			return labels[i].value ? labels[i].value : "";
	if (!strcmp(name, "device"))
		return device ? device : "";
	if (!strcmp(name, "service") || !strcmp(name, "__name__"))
		return service ? service : "";
	return "";
}

/*
 * regexec() under the selector's CPU budget: every 64 calls the thread's CPU time since the
 * first is checked; once over SELECTOR_MATCH_CPU_MS nothing matches any more and
 * selector__over_budget() says so, for the caller to answer an error rather than a short list.
 */
static bool regex_match(const struct selector *sel, const struct matcher *m, const char *v)
{
	struct match_budget *b = sel->budget;

	if (!b)
		return regexec(&m->re, v, 0, NULL, 0) == 0;
	if (b->over)
		return false;
	if (b->calls++ == 0) {
		b->start_ns = port_clock_thread_cputime_ns();
	} else if (!(b->calls % 64) && port_clock_thread_cputime_ns() - b->start_ns >
					       (uint64_t)SELECTOR_MATCH_CPU_MS * NSEC_PER_MSEC) {
		b->over = true;
		return false;
	}
	return regexec(&m->re, v, 0, NULL, 0) == 0;
}

bool selector__over_budget(const struct selector *sel)
{
	return sel && sel->budget && sel->budget->over;
}

bool selector__match(const struct selector *sel, const char *service, const char *device,
		     const struct record_label *labels, size_t n_labels)
{
	if (!sel)
		return true;
	if (*sel->service && strcmp(sel->service, service ? service : ""))
		return false;
	for (size_t i = 0; i < sel->n; i++) {
		const struct matcher *m = &sel->m[i];
		const char *v = label_value(m->name, service, device, labels, n_labels);
		bool hit;

		if (m->is_regex)
			hit = regex_match(sel, m, v);
		else
			hit = strcmp(v, m->value) == 0;
		if (hit != (m->op == SEL_EQ || m->op == SEL_RE))
			return false;
	}
	return true;
}

void selector__free(struct selector *sel)
{
	if (!sel)
		return;
	for (size_t i = 0; i < sel->n; i++) {
		free(sel->m[i].name);
		free(sel->m[i].value);
		if (sel->m[i].is_regex)
			regfree(&sel->m[i].re);
	}
	free(sel->service);
	free(sel->budget);
	free(sel);
}
