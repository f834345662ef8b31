// SPDX-License-Identifier: MIT
/*
 * store/server/answer.c — the answer a request gets (struct server_answer, server.h): its body,
 * and the JSON error every refusal is, the server's own (401, 408, 413, 503 ...) and the API's.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "port/log.h"
#include "port/text.h"
#include "store/server/server.h"

void server_answer__reset(struct server_answer *an)
{
	if (!an->body_static)
		free(an->body);
	an->body = NULL;
	an->body_len = 0;
	an->body_static = false;
}

void server_answer__set(struct server_answer *an, int status, const char *ctype, void *body,
			size_t len, bool is_static)
{
	server_answer__reset(an);
	an->status = status;
	an->content_type = ctype;
	an->body = body;
	an->body_len = len;
	an->body_static = is_static;
}

/* The JSON body's buffer: sized for the worst escaping (\uXXXX per byte) up front. */
struct jbuf {
	char *p;
	size_t len, cap;
};

static void jbuf_put(void *ctx, const char *p, size_t n)
{
	struct jbuf *b = ctx;

	if (b->len + n < b->cap) {
		memcpy(b->p + b->len, p, n);
		b->len += n;
	}
}

/* {"code":N,"error":"msg"}\n, malloc'd: NULL when out of memory. */
static char *error_json(int status, const char *msg, size_t *len)
{
	struct jbuf b = { .cap = 64 + 6 * strlen(msg) };
	int n;

	b.p = malloc(b.cap);
	if (!b.p)
		return NULL;
	n = snprintf(b.p, b.cap, "{\"code\":%d,\"error\":", status);
	b.len = (size_t)n;
	json_str_write(msg, jbuf_put, &b);
	jbuf_put(&b, "}\n", 2);
	*len = b.len;
	return b.p;
}

void server_answer__verror(struct server_answer *an, struct server_metrics *m, const char *peer,
			   const char *device, const char *path, int status, enum reject_reason r,
			   const char *fmt, va_list ap)
{
	char msg[512], *body;
	size_t len = 0;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	m->rejected[r]++;
	body = error_json(status, msg, &len);
	if (!body) {
		server_answer__set(an, status, NULL, NULL, 0, true);
		return;
	}
	server_answer__set(an, status, "application/json", body, len, false);
	/* The path is unknown when the request could not be read (408, 413, 431). */
	path = path ? path : "(request)";
	device = device ? device : "";
	if (status >= 500) {
		pr_warn("%s %s: %d %s", peer, path, status, msg);
	} else {
		/* a client asks for 4xx at will: a few lines a second, and a count of the rest */
		static struct port_ratelimit rl;
		uint64_t missed;

		if (port_ratelimit(&rl, 20, &missed))
			pr_info("%s%s%s %s: %d %s%s%.0" PRIu64 "%s", peer,
				device[0] ? " device " : "", device, path, status, msg,
				missed ? " (and " : "", missed ? missed : 0,
				missed ? " more 4xx in the last second)" : "");
	}
}
