// SPDX-License-Identifier: MIT
/* tests/drivers/push-expired-none.c — push-dir without a certificate writer (CONFIG_TLS_MINIMAL).
 */
#include <stdio.h>

#include "tests/drivers/push-expired.h"

int push_make_expired(const char *dir, const char *id)
{
	fprintf(stderr,
		"push-dir: --make-expired-cert %s %s: no certificate writer in this build "
		"(CONFIG_TLS_MINIMAL)\n",
		dir, id);
	return 2;
}
