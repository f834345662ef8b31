// SPDX-License-Identifier: MIT
/*
 * tests/drivers/push-expired.c — push-dir --make-expired-cert: an expired device certificate for
 * the host's tests of refusal. Needs mbedtls's certificate writer, which the client-only mbedtls
 * of the musl boards (CONFIG_TLS_MINIMAL) lacks: there push-expired-none.c stands in.
 */
#include <inttypes.h>
#include <stdio.h>

#include "port/clock.h"
#include "port/tls.h"
#include "tests/drivers/push-expired.h"

/* An expired device certificate (tests of refusal): CERTDIR/ID.crt, ID.key. */
int push_make_expired(const char *dir, const char *id)
{
	int64_t now = (int64_t)(port_clock_real_ns() / NSEC_PER_SEC);
	struct tls_cert_req req = {
	    .kind = TLS_CERT_CLIENT,
	    .cn = id,
	    .not_before = now - 30 * 86400,
	    .not_after = now - 86400,
	};
	char ca[512], cakey[512], crt[512], key[512], err[256];

	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	snprintf(cakey, sizeof(cakey), "%s/ca.key", dir);
	snprintf(crt, sizeof(crt), "%s/%s.crt", dir, id);
	snprintf(key, sizeof(key), "%s/%s.key", dir, id);
	if (tls_cert_make(&req, ca, cakey, crt, key, err, sizeof(err))) {
		fprintf(stderr, "push-dir: %s\n", err);
		return 1;
	}
	return 0;
}
