// SPDX-License-Identifier: MIT
/*
 * port/tls-server.c — the server end of port/tls.h: session tickets (stateless resumption, the
 * agent's way) and a session cache (resumption by id, other clients' way). Apart from tls.c so
 * that the agent, a client only, links no server code.
 */
#include <stdio.h>
#include <stdlib.h>

#include <mbedtls/error.h>
#include <mbedtls/ssl_cache.h>
#include <mbedtls/ssl_ticket.h>

#include "port/tls-priv.h"
#include "port/tls.h"

#define TLS_SESSION_CACHE_ENTRIES 1024
#define TLS_TICKET_LIFETIME_S 86400

struct tls_server {
	mbedtls_ssl_ticket_context ticket;
	mbedtls_ssl_cache_context cache;
};

static void tls_server_free(void *p)
{
	struct tls_server *srv = p;

	mbedtls_ssl_ticket_free(&srv->ticket);
	mbedtls_ssl_cache_free(&srv->cache);
	free(srv);
}

struct tls_config *tls_config__new_server(const char *ca_file, const char *cert_file,
					  const char *key_file, char *err, size_t errlen)
{
	struct tls_config *cfg = tls__config_new(true, ca_file, cert_file, key_file, err, errlen);
	mbedtls_ssl_config *conf;
	struct tls_server *srv;
	char buf[128];
	int ret;

	if (!cfg)
		return NULL;
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		snprintf(err, errlen, "out of memory");
		tls_config__free(cfg);
		return NULL;
	}
	mbedtls_ssl_ticket_init(&srv->ticket);
	mbedtls_ssl_cache_init(&srv->cache);
	tls__set_server(cfg, srv, tls_server_free);
	conf = tls__ssl_conf(cfg);
	ret = mbedtls_ssl_ticket_setup(&srv->ticket, mbedtls_ctr_drbg_random, tls__drbg(cfg),
				       MBEDTLS_CIPHER_AES_256_GCM, TLS_TICKET_LIFETIME_S);
	if (ret) {
		mbedtls_strerror(ret, buf, sizeof(buf));
		snprintf(err, errlen, "session tickets: %s (-0x%04x)", buf, (unsigned)-ret);
		tls_config__free(cfg);
		return NULL;
	}
	mbedtls_ssl_conf_session_tickets_cb(conf, mbedtls_ssl_ticket_write,
					    mbedtls_ssl_ticket_parse, &srv->ticket);
	mbedtls_ssl_cache_set_max_entries(&srv->cache, TLS_SESSION_CACHE_ENTRIES);
	mbedtls_ssl_conf_session_cache(conf, &srv->cache, mbedtls_ssl_cache_get,
				       mbedtls_ssl_cache_set);
	return cfg;
}
