/* SPDX-License-Identifier: MIT */
#ifndef EDGEPROF_TESTS_PUSH_EXPIRED_H
#define EDGEPROF_TESTS_PUSH_EXPIRED_H

/* An expired device certificate (tests of refusal): DIR/ID.crt, ID.key signed by DIR/ca.*. */
int push_make_expired(const char *dir, const char *id);

#endif
