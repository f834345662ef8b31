// SPDX-License-Identifier: MIT
/*
 * port/tls.c — mbedtls 2.28 behind port/tls.h. The transport is our own pair of bio callbacks
 * on a socket that poll() against the connection's deadline, so a peer that stalls mid-record
 * costs a timeout, not a thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <mbedtls/asn1.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "port/clock.h"
#include "port/tls.h"
#include "port/tls-priv.h"

/*
 * In order of preference (the server's decides): ChaCha20-Poly1305 first because mbedtls 2.28
 * runs it faster than AES-GCM even with AES-NI (GHASH one block at a time): 1.25-1.37x in a
 * 16 KiB-record loop on x86-64, ~5% of the collector's CPU per 20 KB profile; and the ARM
 * devices without AES instructions that upload to it gain more.
 */
static const int tls_ciphersuites[] = {
	MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	0,
};

static const mbedtls_ecp_group_id tls_curves[] = {
	MBEDTLS_ECP_DP_CURVE25519,
	MBEDTLS_ECP_DP_SECP256R1,
	MBEDTLS_ECP_DP_SECP384R1,
	MBEDTLS_ECP_DP_NONE,
};

struct tls_config {
	bool server;
	mbedtls_ssl_config conf;
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	mbedtls_x509_crt ca;
	mbedtls_x509_crt cert;
	mbedtls_pk_context key;
	void *srv;				/* server: tickets and cache (tls-server.c) */
	void (*srv_free)(void *srv);
	pthread_mutex_t lock;			/* client: guards session */
	mbedtls_ssl_session session;		/* client: last session, for resumption */
	bool have_session;
	size_t readahead;			/* bytes of read-ahead per connection, 0 = none */
};

struct tls_conn {
	struct tls_config *cfg;
	mbedtls_ssl_context ssl;
	int fd;
	uint64_t deadline_ns;
	bool timed_out;
	bool cancelled;
	int cancel_fd;		/* -1, or an fd whose readability aborts waits */
	bool resumed;
	bool have_ip;
	unsigned char ip[16];
	size_t ip_len;
	char seen_cn[64];	/* the peer leaf certificate's CN, once seen */
	char err[256];
	atomic_uint_fast64_t last_rx_ns; /* when the peer last sent a byte, 0 = never */
	/* read-ahead (tls_config__set_readahead): ra[ra_off, ra_len) received, not yet taken */
	unsigned char *ra;
	size_t ra_cap, ra_off, ra_len;
	bool sent;		/* client: sent since the last recv (the peer's answer is due) */
};

/*
 * The kernel's getrandom(), a strong source of its own: mbedtls calls it only under glibc and
 * reads /dev/urandom elsewhere (musl), which a minimal root or a chroot may lack. The
 * client-only configuration (CONFIG_TLS_MINIMAL) has no other source.
 */
static int tls_getrandom(void *data, unsigned char *out, size_t len, size_t *olen)
{
	ssize_t n = getrandom(out, len, 0);

	if (n < 0)
		return MBEDTLS_ERR_ENTROPY_SOURCE_FAILED;
	*olen = (size_t)n;
	return 0;
}

static void tls_strerror(int ret, const char *what, char *err, size_t errlen)
{
	char buf[128];

	mbedtls_strerror(ret, buf, sizeof(buf));
	snprintf(err, errlen, "%s: %s (-0x%04x)", what, buf, (unsigned)-ret);
}

/*
 * A certificate or key file that failed to load: a missing one names the command that makes it
 * (the first thing a newcomer meets), an unreadable one says why; else mbedtls' reason.
 * device: a device's file (edgeprof certs device DIR NAME), else the CA's or the collector's.
 */
static void tls_file_error(int ret, const char *path, bool device, char *err, size_t errlen)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	int dlen = slash ? (int)(slash - path) : 1;

	if (!access(path, R_OK)) {
		tls_strerror(ret, path, err, errlen);
	} else if (errno != ENOENT) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
	} else if (device) {
		snprintf(err, errlen, "no such file: %s (make one with: edgeprof certs device %.*s %.*s)",
			 path, dlen, slash ? path : ".", (int)strcspn(base, "."), base);
	} else {
		snprintf(err, errlen, "no such file: %s (make one with: edgeprof certs init %.*s)", path,
			 dlen, slash ? path : ".");
	}
}

void tls_config__free(struct tls_config *cfg)
{
	if (!cfg)
		return;
	mbedtls_ssl_config_free(&cfg->conf);
	if (cfg->srv_free)
		cfg->srv_free(cfg->srv);
	mbedtls_ssl_session_free(&cfg->session);
	mbedtls_x509_crt_free(&cfg->ca);
	mbedtls_x509_crt_free(&cfg->cert);
	mbedtls_pk_free(&cfg->key);
	mbedtls_ctr_drbg_free(&cfg->drbg);
	mbedtls_entropy_free(&cfg->entropy);
	pthread_mutex_destroy(&cfg->lock);
	free(cfg);
}

static int tls_config_load(struct tls_config *cfg, const char *ca_file, const char *cert_file,
			   const char *key_file, char *err, size_t errlen)
{
	int ret;

	ret = mbedtls_x509_crt_parse_file(&cfg->ca, ca_file);
	if (ret) {
		tls_file_error(ret, ca_file, false, err, errlen);
		return -EINVAL;
	}
	if (!cert_file && !cfg->server)
		return 0; /* a client without a certificate: only for tests of refusal */
	ret = mbedtls_x509_crt_parse_file(&cfg->cert, cert_file);
	if (ret) {
		tls_file_error(ret, cert_file, !cfg->server, err, errlen);
		return -EINVAL;
	}
	ret = mbedtls_pk_parse_keyfile(&cfg->key, key_file, NULL);
	if (ret) {
		tls_file_error(ret, key_file, !cfg->server, err, errlen);
		return -EINVAL;
	}
	ret = mbedtls_pk_check_pair(&cfg->cert.pk, &cfg->key);
	if (ret) {
		snprintf(err, errlen, "%s does not match the key in %s", cert_file, key_file);
		return -EINVAL;
	}
	return 0;
}

struct tls_config *tls__config_new(bool server, const char *ca_file, const char *cert_file,
					 const char *key_file, char *err, size_t errlen)
{
	static const char pers[] = "edgeprof-tls";
	struct tls_config *cfg = calloc(1, sizeof(*cfg));
	int ret;

	if (!cfg) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	cfg->server = server;
	pthread_mutex_init(&cfg->lock, NULL);
	mbedtls_ssl_config_init(&cfg->conf);
	mbedtls_entropy_init(&cfg->entropy);
	mbedtls_ctr_drbg_init(&cfg->drbg);
	mbedtls_x509_crt_init(&cfg->ca);
	mbedtls_x509_crt_init(&cfg->cert);
	mbedtls_pk_init(&cfg->key);
	mbedtls_ssl_session_init(&cfg->session);

	ret = mbedtls_entropy_add_source(&cfg->entropy, tls_getrandom, NULL, 32,
					 MBEDTLS_ENTROPY_SOURCE_STRONG);
	if (ret) {
		tls_strerror(ret, "entropy source", err, errlen);
		goto out_free;
	}
	ret = mbedtls_ctr_drbg_seed(&cfg->drbg, mbedtls_entropy_func, &cfg->entropy,
				    (const unsigned char *)pers, sizeof(pers));
	if (ret) {
		tls_strerror(ret, "random generator", err, errlen);
		goto out_free;
	}
	if (tls_config_load(cfg, ca_file, cert_file, key_file, err, errlen))
		goto out_free;
	ret = mbedtls_ssl_config_defaults(&cfg->conf,
					  server ? MBEDTLS_SSL_IS_SERVER : MBEDTLS_SSL_IS_CLIENT,
					  MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
	if (ret) {
		tls_strerror(ret, "TLS defaults", err, errlen);
		goto out_free;
	}
	mbedtls_ssl_conf_rng(&cfg->conf, mbedtls_ctr_drbg_random, &cfg->drbg);
	mbedtls_ssl_conf_min_version(&cfg->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
				     MBEDTLS_SSL_MINOR_VERSION_3);
	mbedtls_ssl_conf_max_version(&cfg->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
				     MBEDTLS_SSL_MINOR_VERSION_3);
	mbedtls_ssl_conf_ciphersuites(&cfg->conf, tls_ciphersuites);
	mbedtls_ssl_conf_curves(&cfg->conf, tls_curves);
	mbedtls_ssl_conf_authmode(&cfg->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
	mbedtls_ssl_conf_ca_chain(&cfg->conf, &cfg->ca, NULL);
	ret = cert_file ? mbedtls_ssl_conf_own_cert(&cfg->conf, &cfg->cert, &cfg->key) : 0;
	if (ret) {
		tls_strerror(ret, "own certificate", err, errlen);
		goto out_free;
	}
	mbedtls_ssl_conf_renegotiation(&cfg->conf, MBEDTLS_SSL_RENEGOTIATION_DISABLED);
	if (!server)
		mbedtls_ssl_conf_session_tickets(&cfg->conf, MBEDTLS_SSL_SESSION_TICKETS_ENABLED);
	return cfg;

out_free:
	tls_config__free(cfg);
	return NULL;
}

struct tls_config *tls_config__new_client(const char *ca_file, const char *cert_file,
					  const char *key_file, char *err, size_t errlen)
{
	return tls__config_new(false, ca_file, cert_file, key_file, err, errlen);
}

mbedtls_ssl_config *tls__ssl_conf(struct tls_config *cfg)
{
	return &cfg->conf;
}

mbedtls_ctr_drbg_context *tls__drbg(struct tls_config *cfg)
{
	return &cfg->drbg;
}

void tls__set_server(struct tls_config *cfg, void *srv, void (*srv_free)(void *srv))
{
	cfg->srv = srv;
	cfg->srv_free = srv_free;
}

void tls_config__set_readahead(struct tls_config *cfg, size_t bytes)
{
	cfg->readahead = bytes;
}

void tls_config__forget_session(struct tls_config *cfg)
{
	pthread_mutex_lock(&cfg->lock);
	mbedtls_ssl_session_free(&cfg->session);
	mbedtls_ssl_session_init(&cfg->session);
	cfg->have_session = false;
	pthread_mutex_unlock(&cfg->lock);
}

/*
 * Waits until fd is ready for events, the deadline passes, or the cancel fd becomes readable:
 * 0 or an mbedtls error.
 */
static int tls_wait(struct tls_conn *c, short events)
{
	for (;;) {
		struct pollfd pfd[2] = {
			{ .fd = c->fd, .events = events },
			{ .fd = c->cancel_fd, .events = POLLIN },
		};
		int timeout = -1, n;

		if (c->deadline_ns) {
			uint64_t now = port_clock_mono_ns();

			if (now >= c->deadline_ns) {
				c->timed_out = true;
				return MBEDTLS_ERR_SSL_TIMEOUT;
			}
			timeout = (int)((c->deadline_ns - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
		}
		n = poll(pfd, c->cancel_fd >= 0 ? 2 : 1, timeout);
		if (n > 0 && c->cancel_fd >= 0 && (pfd[1].revents & POLLIN)) {
			c->cancelled = true;
			return MBEDTLS_ERR_NET_RECV_FAILED;
		}
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return MBEDTLS_ERR_NET_POLL_FAILED;
	}
}

static int tls_bio_send(void *ctx, const unsigned char *buf, size_t len)
{
	struct tls_conn *c = ctx;

	for (;;) {
		ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		int ret;

		if (n >= 0) {
			c->sent = true;
			return (int)n;
		}
		if (errno == EINTR)
			continue;
		if (errno == EPIPE || errno == ECONNRESET)
			return MBEDTLS_ERR_NET_CONN_RESET;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return MBEDTLS_ERR_NET_SEND_FAILED;
		ret = tls_wait(c, POLLOUT);
		if (ret)
			return ret;
	}
}

/*
 * One recv of at most len bytes into buf and, when ahead > 0, up to ahead more into the
 * read-ahead buffer (empty when called), waiting (poll) while there is nothing yet: the bytes
 * mbedtls asked for land in its own buffer, only those beyond them are copied out later.
 * A client that has just sent (a request, a handshake flight) polls first: the answer is
 * seldom there yet, and a recv() that finds nothing is a syscall spent for the poll that
 * follows anyway (collector-load: one recv() fewer per upload). Not once the deadline has
 * passed: a recv then still returns what has arrived, as it did before.
 */
static int tls_recv_some(struct tls_conn *c, unsigned char *buf, size_t len, size_t ahead)
{
	struct iovec iov[2] = { { buf, len }, { c->ra, ahead } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	if (c->sent && !c->cfg->server) {
		c->sent = false;
		if (!c->deadline_ns || port_clock_mono_ns() < c->deadline_ns) {
			int ret = tls_wait(c, POLLIN);

			if (ret)
				return ret;
		}
	}
	c->sent = false;
	for (;;) {
		ssize_t n = ahead ? recvmsg(c->fd, &mh, MSG_DONTWAIT)
				  : recv(c->fd, buf, len, MSG_DONTWAIT);
		int ret;

		if (n > 0)
			atomic_store_explicit(&c->last_rx_ns, port_clock_mono_ns(),
					      memory_order_relaxed);
		if (n > (ssize_t)len) {
			c->ra_off = 0;
			c->ra_len = (size_t)n - len;
			n = (ssize_t)len;
		}
		if (n >= 0)
			return (int)n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET
						   : MBEDTLS_ERR_NET_RECV_FAILED;
		ret = tls_wait(c, POLLIN);
		if (ret)
			return ret;
	}
}

/* What a record header's ask reads ahead at most: a small record whole. */
#define TLS_RA_HEADER_AHEAD 1024

/*
 * mbedtls asks for a record's 5-byte header, then for its body: two recv() per record, four
 * for a 20 KB upload (two records). With read-ahead, each ask that goes to the socket also
 * takes what follows (up to ra_cap) into our buffer, and the following asks are served from
 * it. So that few bytes go through it (a copy each: reading a whole upload ahead and copying
 * it out cost the collector more CPU in memcpy than the recv() calls it saved), a header's
 * ask reads ahead only TLS_RA_HEADER_AHEAD (a response, a handshake message: the record
 * whole), and a body's ask reads the rest of its record straight into mbedtls's buffer and
 * what follows into ours (the next record's header, a short record's body). A 20 KB upload:
 * two recv() and ~5 KB copied. A recv never waits for more than the socket has, so deadlines
 * and slow peers behave as without it.
 */
static int tls_bio_recv(void *ctx, unsigned char *buf, size_t len)
{
	struct tls_conn *c = ctx;
	size_t ahead = c->ra_cap;

	if (c->ra_len > c->ra_off) {
		size_t avail = c->ra_len - c->ra_off, k = avail < len ? avail : len;

		memcpy(buf, c->ra + c->ra_off, k);
		c->ra_off += k;
		return (int)k;	/* mbedtls asks again for the rest, if it needs it */
	}
	if (len <= 5 && ahead > TLS_RA_HEADER_AHEAD)
		ahead = TLS_RA_HEADER_AHEAD;
	return tls_recv_some(c, buf, len, ahead);
}

/*
 * mbedtls 2.28 lists only dNSName SANs, so an IP literal is checked here, on the raw DER:
 * find the subjectAltName extension and compare every iPAddress [7] entry.
 */
static bool tls_crt_has_ip(const mbedtls_x509_crt *crt, const unsigned char *ip, size_t ip_len)
{
	static const unsigned char san_oid[] = { 0x06, 0x03, 0x55, 0x1d, 0x11 };
	const unsigned char *p = crt->raw.p, *end = crt->raw.p + crt->raw.len;

	for (; p + sizeof(san_oid) < end; p++) {
		unsigned char *q = (unsigned char *)p + sizeof(san_oid);
		const unsigned char *seq_end;
		size_t len;

		if (memcmp(p, san_oid, sizeof(san_oid)))
			continue;
		if (q < end && *q == MBEDTLS_ASN1_BOOLEAN && q + 3 <= end)
			q += 3;
		if (mbedtls_asn1_get_tag(&q, end, &len, MBEDTLS_ASN1_OCTET_STRING) ||
		    mbedtls_asn1_get_tag(&q, end, &len,
					 MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE))
			return false;
		seq_end = q + len;
		while (q < seq_end) {
			unsigned char tag = *q++;

			if (mbedtls_asn1_get_len(&q, seq_end, &len))
				return false;
			if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) && len == ip_len &&
			    !memcmp(q, ip, ip_len))
				return true;
			q += len;
		}
		return false;
	}
	return false;
}

/* The subject CN of crt into buf (truncated), "" when it has none. */
static void tls_crt_cn(const mbedtls_x509_crt *crt, char *buf, size_t len)
{
	const mbedtls_x509_name *n;

	buf[0] = '\0';
	for (n = &crt->subject; n; n = n->next) {
		if (!MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid)) {
			size_t l = n->val.len < len - 1 ? n->val.len : len - 1;

			memcpy(buf, n->val.p, l);
			buf[l] = '\0';
			for (size_t i = 0; i < l; i++)
				if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
					buf[i] = '?';
			return;
		}
	}
}

/*
 * Runs for every certificate of the peer's chain: remembers the leaf's CN (so a refusal can
 * name who was refused) and, for an IP literal, checks the leaf's IP SANs.
 */
static int tls_verify(void *ctx, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
	struct tls_conn *c = ctx;

	if (depth)
		return 0;
	tls_crt_cn(crt, c->seen_cn, sizeof(c->seen_cn));
	if (c->have_ip && !tls_crt_has_ip(crt, c->ip, c->ip_len))
		*flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
	return 0;
}

static int tls_conn_set_name(struct tls_conn *c, const char *name)
{
	if (inet_pton(AF_INET, name, c->ip) == 1) {
		c->ip_len = 4;
	} else if (inet_pton(AF_INET6, name, c->ip) == 1) {
		c->ip_len = 16;
	} else {
		return mbedtls_ssl_set_hostname(&c->ssl, name) ? -ENOMEM : 0;
	}
	c->have_ip = true;
	return 0;
}

struct tls_conn *tls_conn__new(struct tls_config *cfg, int fd, const char *server_name)
{
	struct tls_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->cfg = cfg;
	c->fd = fd;
	c->cancel_fd = -1;
	mbedtls_ssl_init(&c->ssl);
	if (cfg->readahead) {
		c->ra = malloc(cfg->readahead);
		if (!c->ra)
			goto out_free;
		c->ra_cap = cfg->readahead;
	}
	if (mbedtls_ssl_setup(&c->ssl, &cfg->conf))
		goto out_free;
	mbedtls_ssl_set_bio(&c->ssl, c, tls_bio_send, tls_bio_recv, NULL);
	mbedtls_ssl_set_verify(&c->ssl, tls_verify, c);
	if (!cfg->server) {
		if (tls_conn_set_name(c, server_name ? server_name : "localhost"))
			goto out_free;
		pthread_mutex_lock(&cfg->lock);
		if (cfg->have_session)
			mbedtls_ssl_set_session(&c->ssl, &cfg->session);
		pthread_mutex_unlock(&cfg->lock);
	}
	return c;

out_free:
	tls_conn__free(c);
	return NULL;
}

void tls_conn__free(struct tls_conn *c)
{
	if (!c)
		return;
	mbedtls_ssl_free(&c->ssl);
	free(c->ra);
	free(c);
}

void tls_conn__set_deadline(struct tls_conn *c, uint64_t mono_ns)
{
	c->deadline_ns = mono_ns;
	c->timed_out = false;
}

uint64_t tls_conn__last_rx(const struct tls_conn *c)
{
	return atomic_load_explicit(&c->last_rx_ns, memory_order_relaxed);
}

void tls_conn__set_cancel_fd(struct tls_conn *c, int fd)
{
	c->cancel_fd = fd;
}

const char *tls_conn__error(const struct tls_conn *c)
{
	return c->err;
}

static int tls_map_error(struct tls_conn *c, int ret, const char *what)
{
	uint32_t flags;

	if (c->cancelled) {
		snprintf(c->err, sizeof(c->err), "%s: cancelled", what);
		return -ECANCELED;
	}
	if (ret == MBEDTLS_ERR_SSL_TIMEOUT || c->timed_out) {
		snprintf(c->err, sizeof(c->err), "%s: timed out", what);
		return -ETIMEDOUT;
	}
	if (ret == MBEDTLS_ERR_NET_CONN_RESET || ret == MBEDTLS_ERR_SSL_CONN_EOF) {
		snprintf(c->err, sizeof(c->err), "%s: connection closed by peer", what);
		return -ECONNRESET;
	}
	if (ret == MBEDTLS_ERR_SSL_NO_CLIENT_CERTIFICATE) {
		/* mbedtls 2.28 just stops here: tell the client why (RFC 5246 7.4.6) */
		mbedtls_ssl_send_alert_message(&c->ssl, MBEDTLS_SSL_ALERT_LEVEL_FATAL,
					       MBEDTLS_SSL_ALERT_MSG_HANDSHAKE_FAILURE);
		snprintf(c->err, sizeof(c->err), "%s: the client sent no certificate", what);
		return -EACCES;
	}
	flags = mbedtls_ssl_get_verify_result(&c->ssl);
	if (flags && flags != (uint32_t)-1) {
		char info[160];
		int n;

		mbedtls_x509_crt_verify_info(info, sizeof(info), "", flags);
		n = (int)strlen(info);
		while (n > 0 && info[n - 1] == '\n')
			info[--n] = '\0';
		for (char *p = info; *p; p++)
			if (*p == '\n')
				*p = ';';
		snprintf(c->err, sizeof(c->err), "%s: certificate refused: %s%s%s%s", what, info,
			 c->seen_cn[0] ? " (CN=" : "", c->seen_cn, c->seen_cn[0] ? ")" : "");
		return -EACCES;
	}
	tls_strerror(ret, what, c->err, sizeof(c->err));
	return -EPROTO;
}

int tls_conn__handshake(struct tls_conn *c)
{
	int ret = 0;

	/*
	 * Step by step: an abbreviated (resumed) handshake jumps from ServerHello straight to
	 * ChangeCipherSpec on both sides, never passing through the server-certificate state.
	 */
	c->resumed = true;
	while (c->ssl.state != MBEDTLS_SSL_HANDSHAKE_OVER) {
		if (c->ssl.state == MBEDTLS_SSL_SERVER_CERTIFICATE)
			c->resumed = false;
		ret = mbedtls_ssl_handshake_step(&c->ssl);
		if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		if (ret)
			break;
	}
	if (ret)
		return tls_map_error(c, ret, "TLS handshake");
	if (!c->cfg->server && !tls_conn__resumed(c)) {
		pthread_mutex_lock(&c->cfg->lock);
		mbedtls_ssl_session_free(&c->cfg->session);
		mbedtls_ssl_session_init(&c->cfg->session);
		c->cfg->have_session = !mbedtls_ssl_get_session(&c->ssl, &c->cfg->session);
		pthread_mutex_unlock(&c->cfg->lock);
	}
	return 0;
}

ssize_t tls_conn__read(struct tls_conn *c, void *buf, size_t len)
{
	for (;;) {
		int ret = mbedtls_ssl_read(&c->ssl, buf, len);

		if (ret > 0)
			return ret;
		if (ret == 0 || ret == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY ||
		    ret == MBEDTLS_ERR_SSL_CONN_EOF)
			return 0;
		if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		return tls_map_error(c, ret, "TLS read");
	}
}

int tls_conn__write(struct tls_conn *c, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len) {
		int ret = mbedtls_ssl_write(&c->ssl, p, len);

		if (ret == MBEDTLS_ERR_SSL_WANT_READ || ret == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		if (ret < 0)
			return tls_map_error(c, ret, "TLS write");
		p += ret;
		len -= (size_t)ret;
	}
	return 0;
}

size_t tls_conn__pending(const struct tls_conn *c)
{
	return mbedtls_ssl_get_bytes_avail(&c->ssl) + (c->ra_len - c->ra_off);
}

void tls_conn__close(struct tls_conn *c)
{
	int ret;

	do {
		ret = mbedtls_ssl_close_notify(&c->ssl);
	} while (ret == MBEDTLS_ERR_SSL_WANT_WRITE);
}

int tls_conn__peer_cn(const struct tls_conn *c, char *buf, size_t len)
{
	const mbedtls_x509_crt *crt = mbedtls_ssl_get_peer_cert(&c->ssl);
	const mbedtls_x509_name *n;

	if (!crt)
		return -ENOENT;
	for (n = &crt->subject; n; n = n->next) {
		if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid))
			continue;
		if (n->val.len >= len)
			return -ENAMETOOLONG;
		for (size_t i = 0; i < n->val.len; i++)
			if (n->val.p[i] < 0x20 || n->val.p[i] == 0x7f)
				return -EILSEQ;
		memcpy(buf, n->val.p, n->val.len);
		buf[n->val.len] = '\0';
		return 0;
	}
	return -ENOENT;
}

bool tls_conn__peer_has_ou(const struct tls_conn *c, const char *ou)
{
	const mbedtls_x509_crt *crt = mbedtls_ssl_get_peer_cert(&c->ssl);
	size_t len = strlen(ou);

	for (const mbedtls_x509_name *n = crt ? &crt->subject : NULL; n; n = n->next)
		if (!MBEDTLS_OID_CMP(MBEDTLS_OID_AT_ORG_UNIT, &n->oid) && n->val.len == len &&
		    !memcmp(n->val.p, ou, len))
			return true;
	return false;
}

bool tls_conn__resumed(const struct tls_conn *c)
{
	return c->resumed;
}

const char *tls_conn__cipher(const struct tls_conn *c)
{
	return mbedtls_ssl_get_ciphersuite(&c->ssl);
}
