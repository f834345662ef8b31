/* SPDX-License-Identifier: MIT */
/*
 * port/tls.h — mutual TLS 1.2 over any transport, with mbedtls 2.28 kept out of sight.
 *
 * A tls_config holds what connections share: the CA, our certificate and key, the random
 * generator, and (server) the session-ticket key and session cache, or (client) the last session
 * for resumption. A tls_conn is one connection on a socket; reads and writes honour a deadline
 * so a slow peer cannot hold a thread forever.
 *
 * Policy, fixed here so no caller can weaken it: TLS 1.2 only; ECDHE with AES-GCM or
 * CHACHA20-POLY1305 only; the peer certificate is required and verified against the CA on both
 * sides (key usage and extended key usage included); the client checks the server's name (DNS
 * SAN, or IP SAN when the host is an IP literal).
 */
#ifndef EDGEPROF_PORT_TLS_H
#define EDGEPROF_PORT_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct tls_config;
struct tls_conn;

/*
 * Reads PEM files; err names the file and what is wrong. NULL on error. A client may pass
 * cert_file = key_file = NULL (it then cannot connect to our collector: tests of refusal).
 */
struct tls_config *tls_config__new_server(const char *ca_file, const char *cert_file,
					  const char *key_file, char *err, size_t errlen);
struct tls_config *tls_config__new_client(const char *ca_file, const char *cert_file,
					  const char *key_file, char *err, size_t errlen);
void tls_config__free(struct tls_config *cfg);		/* NULL-safe */
/*
 * Connections made after this call read ahead: a recv() for a record also takes up to bytes of
 * what follows into a malloc'd buffer per connection, which serves mbedtls's next asks (record
 * headers, short records) without a recv() each. 0 (the default) reads exactly what mbedtls
 * asks for. Set it before the first connection (not thread-safe against tls_conn__new).
 */
void tls_config__set_readahead(struct tls_config *cfg, size_t bytes);
/* Client: forget the saved session so the next handshake is a full one (benchmarks, tests). */
void tls_config__forget_session(struct tls_config *cfg);

/*
 * Wraps fd (a connected socket; tls does not close it). server_name (client only) is the name
 * to verify: a DNS name or an IP literal. NULL on allocation failure.
 */
struct tls_conn *tls_conn__new(struct tls_config *cfg, int fd, const char *server_name);
void tls_conn__free(struct tls_conn *c);			/* NULL-safe; does not close fd */

/* Absolute CLOCK_MONOTONIC deadline for the following I/O (0 = none). */
void tls_conn__set_deadline(struct tls_conn *c, uint64_t mono_ns);

/* CLOCK_MONOTONIC time the peer last sent a byte (0 = never yet): safe from any thread. */
uint64_t tls_conn__last_rx(const struct tls_conn *c);

/* While fd (e.g. a shutdown pipe) is readable, I/O fails at once with -ECANCELED (-1 = none). */
void tls_conn__set_cancel_fd(struct tls_conn *c, int fd);

/*
 * Runs the handshake: 0, -ETIMEDOUT, -ECANCELED, -ECONNRESET, or -EPROTO / -EACCES (certificate
 * refused) with the reason in tls_conn__error().
 */
int tls_conn__handshake(struct tls_conn *c);
const char *tls_conn__error(const struct tls_conn *c);

/* > 0 bytes read, 0 at a clean end of stream, or -errno (-ETIMEDOUT, -ECONNRESET, -EPROTO). */
ssize_t tls_conn__read(struct tls_conn *c, void *buf, size_t len);
/* Writes everything: 0 or -errno. */
int tls_conn__write(struct tls_conn *c, const void *buf, size_t len);
/*
 * Bytes the peer sent that TLS holds already: decrypted ones a read returns without touching
 * the socket, and read-ahead ones not yet decrypted (a record's start at least: the peer is
 * talking, a read may still wait for the rest of the record).
 */
size_t tls_conn__pending(const struct tls_conn *c);
/* Sends close_notify (best effort). */
void tls_conn__close(struct tls_conn *c);

/*
 * The peer certificate's subject CN into buf: 0, -ENOENT, -ENAMETOOLONG, or -EILSEQ when it holds
 * a control byte (NUL included: a C string would cut it).
 */
int tls_conn__peer_cn(const struct tls_conn *c, char *buf, size_t len);
/* True when the handshake resumed an earlier session (ticket or cache): no certificate work. */
bool tls_conn__resumed(const struct tls_conn *c);
/* True when the peer certificate's subject has an OU equal to ou. */
bool tls_conn__peer_has_ou(const struct tls_conn *c, const char *ou);
const char *tls_conn__cipher(const struct tls_conn *c);

/* ---- certificate writer (edgeprof certs, tests) ------------------------------------------- */

enum tls_cert_kind {
	TLS_CERT_CA,		/* CA:TRUE, keyCertSign|cRLSign */
	TLS_CERT_SERVER,	/* digitalSignature, EKU serverAuth, SAN dns_name/ip */
	TLS_CERT_CLIENT,	/* digitalSignature, EKU clientAuth */
	TLS_CERT_OPERATOR,	/* the same with OU=operator in the subject */
	TLS_CERT_DEVICE_PULL,	/* a device that also serves pull mode: EKU clientAuth and
				 * serverAuth, SAN dns_name/ip (the agent's --pull-listen) */
	TLS_CERT_BAD_USAGE,	/* keyCertSign only, EKU serverAuth: TLS must refuse it (tests) */
};

struct tls_cert_req {
	enum tls_cert_kind kind;
	const char *cn;
	const char *dns_name;	/* server SAN, NULL = none */
	const char *ip;		/* server SAN (IPv4 or IPv6 literal), NULL = none */
	int64_t not_before;	/* unix seconds; 0 = now - 1 h (clock skew) */
	int64_t not_after;	/* unix seconds; 0 = not_before + days */
	int days;		/* 0 = 825 */
};

/*
 * Makes an EC P-256 key and a certificate for it, signed by issuer (PEM files) or self-signed
 * when issuer_crt is NULL. Writes out_crt (0644) and out_key (0600) atomically. 0 or -errno.
 */
int tls_cert_make(const struct tls_cert_req *req, const char *issuer_crt, const char *issuer_key,
		  const char *out_crt, const char *out_key, char *err, size_t errlen);

#endif /* EDGEPROF_PORT_TLS_H */
