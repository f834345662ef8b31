// SPDX-License-Identifier: MIT
/* store/scrape/scrape-sd.c — a bounded reader of Prometheus' file_sd JSON (store/scrape/scrape-sd.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/scrape/scrape-sd.h"

struct cur {
	const char *p, *end, *start;
	char *err;
	size_t errlen;
	bool failed;
};

static int fail(struct cur *c, const char *what)
{
	if (!c->failed)
		snprintf(c->err, c->errlen, "offset %zu: %s", (size_t)(c->p - c->start), what);
	c->failed = true;
	return -EINVAL;
}

static void ws(struct cur *c)
{
	while (c->p < c->end && strchr(" \t\r\n", *c->p))
		c->p++;
}

static bool eat(struct cur *c, char ch)
{
	ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return true;
	}
	return false;
}

/* A JSON string into out (ASCII escapes only): 0 or -EINVAL. */
static int string(struct cur *c, char *out, size_t outlen)
{
	size_t n = 0;

	if (!eat(c, '"'))
		return fail(c, "expected a string");
	while (c->p < c->end && *c->p != '"') {
		char ch = *c->p++;

		if ((unsigned char)ch < 0x20)
			return fail(c, "control character in a string");
		if (ch == '\\') {
			if (c->p >= c->end)
				break;
			ch = *c->p++;
			ch = ch == 'n' ? '\n' : ch == 't' ? '\t' : ch;
			if (!strchr("\"\\/\n\t", ch))
				return fail(c, "unsupported escape in a string");
		}
		if (n + 1 >= outlen)
			return fail(c, "string too long");
		out[n++] = ch;
	}
	if (!eat(c, '"'))
		return fail(c, "unterminated string");
	out[n] = 0;
	return 0;
}

static bool key_ok(const char *k)
{
	if (!*k)
		return false;
	for (; *k; k++)
		if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') ||
		      (*k >= '0' && *k <= '9') || strchr("_.-", *k)))
			return false;
	return true;
}

static int labels(struct cur *c, struct sd_target *g)
{
	if (!eat(c, '{'))
		return fail(c, "\"labels\" must be an object");
	if (eat(c, '}'))
		return 0;
	do {
		struct sd_label l;

		if (string(c, l.key, sizeof(l.key)) || !eat(c, ':') ||
		    string(c, l.value, sizeof(l.value)))
			return fail(c, "expected \"key\": \"value\"");
		if (!key_ok(l.key))
			return fail(c, "a label name is letters, digits, _ . -");
		if (!strcmp(l.key, "service_name")) {
			snprintf(g->service, sizeof(g->service), "%s", l.value);
		} else if (!strcmp(l.key, "__scheme__")) {
			if (strcmp(l.value, "http") && strcmp(l.value, "https"))
				return fail(c, "__scheme__ must be http or https");
			g->https = !strcmp(l.value, "https");
		} else if (strncmp(l.key, "__", 2)) {
			if (g->n_labels == SD_MAX_LABELS)
				return fail(c, "too many labels in a group");
			g->labels[g->n_labels++] = l;
		}
	} while (eat(c, ','));
	return eat(c, '}') ? 0 : fail(c, "expected ',' or '}' in labels");
}

/* One group: its targets (addresses) into addrs, its labels into g. */
static int group(struct cur *c, struct sd_target *g, char (*addrs)[128], size_t *n_addrs)
{
	bool seen_targets = false;
	char key[32];

	if (!eat(c, '{'))
		return fail(c, "expected a group object");
	if (eat(c, '}'))
		return fail(c, "a group without \"targets\"");
	do {
		if (string(c, key, sizeof(key)) || !eat(c, ':'))
			return fail(c, "expected \"targets\" or \"labels\"");
		if (!strcmp(key, "labels")) {
			if (labels(c, g))
				return -EINVAL;
			continue;
		}
		if (strcmp(key, "targets") || !eat(c, '['))
			return fail(c, "a group has \"targets\" (an array) and \"labels\" only");
		seen_targets = true;
		if (eat(c, ']'))
			continue;
		do {
			if (*n_addrs == SD_MAX_TARGETS)
				return fail(c, "too many targets");
			if (string(c, addrs[*n_addrs], sizeof(addrs[0])))
				return -EINVAL;
			if (!strchr(addrs[*n_addrs], ':') || strpbrk(addrs[*n_addrs], "/?# "))
				return fail(c, "a target is HOST:PORT");
			(*n_addrs)++;
		} while (eat(c, ','));
		if (!eat(c, ']'))
			return fail(c, "expected ',' or ']' in targets");
	} while (eat(c, ','));
	if (!eat(c, '}'))
		return fail(c, "expected ',' or '}' in a group");
	return seen_targets ? 0 : fail(c, "a group without \"targets\"");
}

/* The array of groups; addrs holds one group's targets at a time. */
static int sd_groups(struct cur *cp, char (*addrs)[128], struct sd_target *out, size_t max)
{
	struct cur c = *cp;
	size_t n = 0;

	if (!addrs)
		return -ENOMEM;
	if (!eat(&c, '['))
		return fail(&c, "expected an array of groups");
	if (!eat(&c, ']')) {
		do {
			struct sd_target g = {0};
			size_t n_addrs = 0;

			if (group(&c, &g, addrs, &n_addrs))
				return -EINVAL;
			for (size_t i = 0; i < n_addrs; i++) {
				if (n == max)
					return fail(&c, "too many targets");
				out[n] = g;
				memcpy(out[n].addr, addrs[i], sizeof(out[n].addr));
				n++;
			}
		} while (eat(&c, ','));
		if (!eat(&c, ']'))
			return fail(&c, "expected ',' or ']' after a group");
	}
	ws(&c);
	if (c.p != c.end)
		return fail(&c, "text after the array");
	return (int)n;
}

int sd_parse(const char *text, size_t len, struct sd_target *out, size_t max, char *err,
	     size_t errlen)
{
	char(*addrs)[128] = malloc(SD_MAX_TARGETS * sizeof(*addrs)); /* a group's targets */
	struct cur c = {.p = text, .end = text + len, .start = text, .err = err, .errlen = errlen};
	int n = sd_groups(&c, addrs, out, max);

	free(addrs);
	return n;
}
