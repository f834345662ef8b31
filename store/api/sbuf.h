/* SPDX-License-Identifier: MIT */
/*
 * store/api/sbuf.h — the API's growable output buffer (JSON, metrics), implemented in api.c;
 * a header of its own so that what api.h includes (regress-rules.h) can write into one
 * without including api.h back.
 */
#ifndef EDGEPROF_STORE_API_SBUF_H
#define EDGEPROF_STORE_API_SBUF_H

#include <stdbool.h>
#include <stddef.h>

/* A growable output buffer (JSON, metrics); oom sticks and turns the answer into a 500. */
struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};
void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sbuf_json_str(struct sbuf *b, const char *s);	/* quoted, escaped */
void sbuf_free(struct sbuf *b);

#endif /* EDGEPROF_STORE_API_SBUF_H */
