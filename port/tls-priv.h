/* SPDX-License-Identifier: MIT */
/*
 * port/tls-priv.h — between tls.c (both ends, what a client needs) and tls-server.c (session
 * tickets and cache, only in the programs that serve TLS): the device agent links no server
 * code, so its minimal mbedtls (CONFIG_TLS_MINIMAL) has none either.
 */
#ifndef EDGEPROF_PORT_TLS_PRIV_H
#define EDGEPROF_PORT_TLS_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ssl.h>

struct tls_config;

/* A configuration with its certificates loaded; a client one also asks for session tickets. */
struct tls_config *tls__config_new(bool server, const char *ca_file, const char *cert_file,
				   const char *key_file, char *err, size_t errlen);
mbedtls_ssl_config *tls__ssl_conf(struct tls_config *cfg);
mbedtls_ctr_drbg_context *tls__drbg(struct tls_config *cfg);
/* The server's state, freed by srv_free(srv) in tls_config__free(). */
void tls__set_server(struct tls_config *cfg, void *srv, void (*srv_free)(void *srv));

#endif
