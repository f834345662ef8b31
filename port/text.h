/* SPDX-License-Identifier: MIT */
/*
 * port/text.h — text that came from a device or a user, made safe to print: UTF-8 checked byte
 * by byte, escaped for a JSON string (invalid bytes become U+FFFD, RFC 8259 wants UTF-8) or for
 * one log line (control and invalid bytes become \xNN, so one event is one line).
 */
#ifndef EDGEPROF_PORT_TEXT_H
#define EDGEPROF_PORT_TEXT_H

#include <stddef.h>

/* Length (1..4) of the well-formed UTF-8 sequence at s[0..n), or 0 when it is not one. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/* Writes s as a quoted JSON string through put(ctx, bytes, len). */
void json_str_write(const char *s, void (*put)(void *ctx, const char *p, size_t n), void *ctx);

/* Escapes in[0..) for a log line into out (always NUL-terminated, cut at a whole escape). */
void log_escape(const char *in, char *out, size_t outlen);

#endif /* EDGEPROF_PORT_TEXT_H */
