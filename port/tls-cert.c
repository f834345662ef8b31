// SPDX-License-Identifier: MIT
/*
 * port/tls-cert.c — EC P-256 keys and X.509 v3 certificates with mbedtls' writer, so a build
 * host or a device needs no OpenSSL to make its CA, server and device certificates.
 * mbedtls 2.28 has no writer for subjectAltName or extendedKeyUsage: we encode those two
 * extensions' DER by hand (they are short and fixed in shape). Its writer also puts a NULL
 * parameter after ecdsa-with-SHA256, which RFC 5758 3.2 says to omit (and strict parsers,
 * Python's cryptography among them, warn they will refuse): cert_der_fix() takes it out of both
 * AlgorithmIdentifiers and signs the certificate again.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mbedtls/asn1write.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pem.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/sha256.h>
#include <mbedtls/x509_crt.h>

#include "port/file.h"
#include "port/tls.h"

struct cert_ctx {
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	mbedtls_pk_context key, issuer_key;
	mbedtls_x509_crt issuer;
	mbedtls_x509write_cert crt;
	mbedtls_mpi serial;
	unsigned char buf[4096];
	unsigned char der[4096];
};

static void cert_err(int ret, const char *what, char *err, size_t errlen)
{
	char buf[128];

	mbedtls_strerror(ret, buf, sizeof(buf));
	snprintf(err, errlen, "%s: %s", what, buf);
}

static void cert_time(int64_t t, char out[16])
{
	time_t tt = (time_t)t;
	struct tm tm;

	gmtime_r(&tt, &tm);
	strftime(out, 16, "%Y%m%d%H%M%S", &tm);
}

/* DER of SEQUENCE { dNSName, iPAddress } into out; returns the length or -EINVAL. */
static int cert_san_der(const struct tls_cert_req *req, unsigned char *out, size_t cap)
{
	unsigned char body[300];
	size_t n = 0, dns_len = req->dns_name ? strlen(req->dns_name) : 0;
	unsigned char ip[16];

	if (dns_len > 200)
		return -EINVAL;
	if (dns_len) {
		body[n++] = 0x82;
		body[n++] = (unsigned char)dns_len;
		memcpy(body + n, req->dns_name, dns_len);
		n += dns_len;
	}
	if (req->ip) {
		int len = inet_pton(AF_INET, req->ip, ip) == 1 ? 4 :
			  inet_pton(AF_INET6, req->ip, ip) == 1 ? 16 : -1;

		if (len < 0)
			return -EINVAL;
		body[n++] = 0x87;
		body[n++] = (unsigned char)len;
		memcpy(body + n, ip, (size_t)len);
		n += (size_t)len;
	}
	if (n + 3 > cap)
		return -EINVAL;
	out[0] = 0x30;
	if (n < 128) {
		out[1] = (unsigned char)n;
		memcpy(out + 2, body, n);
		return (int)n + 2;
	}
	out[1] = 0x81;
	out[2] = (unsigned char)n;
	memcpy(out + 3, body, n);
	return (int)n + 3;
}

static int cert_set_usage(struct cert_ctx *x, const struct tls_cert_req *req)
{
	static const unsigned char eku_server[] = { 0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01,
						    0x05, 0x05, 0x07, 0x03, 0x01 };
	static const unsigned char eku_client[] = { 0x30, 0x0a, 0x06, 0x08, 0x2b, 0x06, 0x01,
						    0x05, 0x05, 0x07, 0x03, 0x02 };
	static const unsigned char eku_both[] = { 0x30, 0x14, 0x06, 0x08, 0x2b, 0x06, 0x01, 0x05,
						  0x05, 0x07, 0x03, 0x02, 0x06, 0x08, 0x2b, 0x06,
						  0x01, 0x05, 0x05, 0x07, 0x03, 0x01 };
	const unsigned char *eku = NULL;
	size_t eku_len = sizeof(eku_server);
	unsigned int ku;
	int ret;

	switch (req->kind) {
	case TLS_CERT_CA:
		ku = MBEDTLS_X509_KU_KEY_CERT_SIGN | MBEDTLS_X509_KU_CRL_SIGN;
		break;
	case TLS_CERT_SERVER:
		ku = MBEDTLS_X509_KU_DIGITAL_SIGNATURE;
		eku = eku_server;
		break;
	case TLS_CERT_CLIENT:
	case TLS_CERT_OPERATOR:
		ku = MBEDTLS_X509_KU_DIGITAL_SIGNATURE;
		eku = eku_client;
		break;
	case TLS_CERT_DEVICE_PULL:
		ku = MBEDTLS_X509_KU_DIGITAL_SIGNATURE;
		eku = eku_both;
		eku_len = sizeof(eku_both);
		break;
	default:
		ku = MBEDTLS_X509_KU_KEY_CERT_SIGN;
		eku = eku_server;
		break;
	}
	ret = mbedtls_x509write_crt_set_basic_constraints(&x->crt, req->kind == TLS_CERT_CA, -1);
	if (!ret)
		ret = mbedtls_x509write_crt_set_key_usage(&x->crt, ku);
	if (!ret && eku)
		ret = mbedtls_x509write_crt_set_extension(
			&x->crt, MBEDTLS_OID_EXTENDED_KEY_USAGE,
			MBEDTLS_OID_SIZE(MBEDTLS_OID_EXTENDED_KEY_USAGE), 0, eku, eku_len);
	if (!ret && (req->kind == TLS_CERT_SERVER || req->kind == TLS_CERT_DEVICE_PULL) &&
	    (req->dns_name || req->ip)) {
		unsigned char san[320];
		int len = cert_san_der(req, san, sizeof(san));

		if (len < 0)
			return len;
		ret = mbedtls_x509write_crt_set_extension(
			&x->crt, MBEDTLS_OID_SUBJECT_ALT_NAME,
			MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), 0, san, (size_t)len);
	}
	return ret;
}

static int cert_fill(struct cert_ctx *x, const struct tls_cert_req *req, const char *issuer_crt,
		     char *err, size_t errlen)
{
	char subject[160], issuer[300], nb[16], na[16];
	int64_t not_before = req->not_before ? req->not_before : (int64_t)time(NULL) - 3600;
	int64_t not_after = req->not_after ? req->not_after :
			    not_before + 86400LL * (req->days > 0 ? req->days : 825);
	unsigned char rnd[16];
	int ret;

	if (strpbrk(req->cn, ",=+\\\"<>;")) {
		snprintf(err, errlen, "name '%s' has a character not allowed in a CN", req->cn);
		return -EINVAL;
	}
	snprintf(subject, sizeof(subject), "CN=%s,%sO=edgeprof", req->cn,
		 req->kind == TLS_CERT_OPERATOR ? "OU=operator," : "");
	if (issuer_crt) {
		ret = mbedtls_x509_dn_gets(issuer, sizeof(issuer), &x->issuer.subject);
		if (ret < 0) {
			cert_err(ret, issuer_crt, err, errlen);
			return -EINVAL;
		}
	} else {
		snprintf(issuer, sizeof(issuer), "%s", subject);
	}
	cert_time(not_before, nb);
	cert_time(not_after, na);
	mbedtls_x509write_crt_set_version(&x->crt, MBEDTLS_X509_CRT_VERSION_3);
	mbedtls_x509write_crt_set_md_alg(&x->crt, MBEDTLS_MD_SHA256);
	mbedtls_x509write_crt_set_subject_key(&x->crt, &x->key);
	mbedtls_x509write_crt_set_issuer_key(&x->crt, issuer_crt ? &x->issuer_key : &x->key);
	ret = mbedtls_ctr_drbg_random(&x->drbg, rnd, sizeof(rnd));
	rnd[0] &= 0x7f; /* a positive serial */
	rnd[0] |= 0x01;
	if (!ret)
		ret = mbedtls_mpi_read_binary(&x->serial, rnd, sizeof(rnd));
	if (!ret)
		ret = mbedtls_x509write_crt_set_serial(&x->crt, &x->serial);
	if (!ret)
		ret = mbedtls_x509write_crt_set_validity(&x->crt, nb, na);
	if (!ret)
		ret = mbedtls_x509write_crt_set_subject_name(&x->crt, subject);
	if (!ret)
		ret = mbedtls_x509write_crt_set_issuer_name(&x->crt, issuer);
	if (!ret)
		ret = mbedtls_x509write_crt_set_subject_key_identifier(&x->crt);
	if (!ret)
		ret = mbedtls_x509write_crt_set_authority_key_identifier(&x->crt);
	if (!ret)
		ret = cert_set_usage(x, req);
	if (ret) {
		cert_err(ret, "certificate fields", err, errlen);
		return -EINVAL;
	}
	return 0;
}

static int cert_load_issuer(struct cert_ctx *x, const char *crt, const char *key, char *err,
			    size_t errlen)
{
	int ret = mbedtls_x509_crt_parse_file(&x->issuer, crt);

	if (ret) {
		cert_err(ret, crt, err, errlen);
		return -ENOENT;
	}
	ret = mbedtls_pk_parse_keyfile(&x->issuer_key, key, NULL);
	if (ret) {
		cert_err(ret, key, err, errlen);
		return -ENOENT;
	}
	if (mbedtls_pk_check_pair(&x->issuer.pk, &x->issuer_key)) {
		snprintf(err, errlen, "%s does not match %s", key, crt);
		return -EINVAL;
	}
	return 0;
}

/*
 * der[0..len) as mbedtls wrote it: SEQUENCE { tbs, sigAlg, signature }. Rewrites it into x->der
 * with both ecdsa-with-SHA256 AlgorithmIdentifiers without their NULL parameter and a new
 * signature over the new tbs. Returns the new length or a negative mbedtls error.
 */
static int cert_der_fix(struct cert_ctx *x, bool self_signed, const unsigned char *der, size_t len)
{
	static const unsigned char alg_null[] = { 0x30, 0x0c, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
						  0x3d, 0x04, 0x03, 0x02, 0x05, 0x00 };
	static const unsigned char alg[] = { 0x30, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
					     0x3d, 0x04, 0x03, 0x02 };
	unsigned char *p = (unsigned char *)der, *end = p + len, *tbs, *body, *w, hash[32];
	unsigned char sig[MBEDTLS_ECDSA_MAX_LEN], tbs_new[4096];
	size_t n, tbs_len, off, sig_len, total = 0;
	int ret;

	ret = mbedtls_asn1_get_tag(&p, end, &n, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE);
	tbs = p;
	if (!ret)
		ret = mbedtls_asn1_get_tag(&p, end, &tbs_len,
					   MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE);
	if (ret)
		return ret;
	body = p;
	for (off = 0; off + sizeof(alg_null) <= tbs_len; off++)
		if (!memcmp(body + off, alg_null, sizeof(alg_null)))
			break;
	if (off + sizeof(alg_null) > tbs_len || tbs_len > sizeof(tbs_new) - 8)
		return MBEDTLS_ERR_ASN1_UNEXPECTED_TAG;
	/* the tbs again, backwards as asn1write does: what follows, the short form, what precedes */
	w = tbs_new + sizeof(tbs_new);
	n = tbs_len - off - sizeof(alg_null);
	w -= n;
	memcpy(w, body + off + sizeof(alg_null), n);
	w -= sizeof(alg);
	memcpy(w, alg, sizeof(alg));
	w -= off;
	memcpy(w, body, off);
	n = (size_t)(tbs_new + sizeof(tbs_new) - w);
	MBEDTLS_ASN1_CHK_ADD(n, mbedtls_asn1_write_len(&w, tbs_new, n));
	MBEDTLS_ASN1_CHK_ADD(n, mbedtls_asn1_write_tag(&w, tbs_new, MBEDTLS_ASN1_CONSTRUCTED |
								    MBEDTLS_ASN1_SEQUENCE));
	(void)tbs;
	ret = mbedtls_sha256_ret(w, n, hash, 0);
	if (!ret)
		ret = mbedtls_pk_sign(self_signed ? &x->key : &x->issuer_key, MBEDTLS_MD_SHA256, hash,
				      sizeof(hash), sig, &sig_len, mbedtls_ctr_drbg_random,
				      &x->drbg);
	if (ret)
		return ret;
	/* Certificate ::= SEQUENCE { tbs, sigAlg, BIT STRING signature } */
	p = x->der + sizeof(x->der);
	MBEDTLS_ASN1_CHK_ADD(total, mbedtls_asn1_write_bitstring(&p, x->der, sig, sig_len * 8));
	MBEDTLS_ASN1_CHK_ADD(total, mbedtls_asn1_write_raw_buffer(&p, x->der, alg, sizeof(alg)));
	MBEDTLS_ASN1_CHK_ADD(total, mbedtls_asn1_write_raw_buffer(&p, x->der, w, n));
	MBEDTLS_ASN1_CHK_ADD(total, mbedtls_asn1_write_len(&p, x->der, total));
	MBEDTLS_ASN1_CHK_ADD(total, mbedtls_asn1_write_tag(&p, x->der, MBEDTLS_ASN1_CONSTRUCTED |
								       MBEDTLS_ASN1_SEQUENCE));
	memmove(x->der, p, total);
	return (int)total;
}

static int cert_write(struct cert_ctx *x, bool self_signed, const char *out_crt,
		      const char *out_key, char *err, size_t errlen)
{
	int ret;

	ret = mbedtls_pk_write_key_pem(&x->key, x->buf, sizeof(x->buf));
	if (ret) {
		cert_err(ret, "key PEM", err, errlen);
		return -EINVAL;
	}
	ret = port_file_write_atomic(out_key, x->buf, strlen((char *)x->buf), 0600);
	if (ret) {
		snprintf(err, errlen, "%s: %s", out_key, strerror(-ret));
		return ret;
	}
	ret = mbedtls_x509write_crt_der(&x->crt, x->buf, sizeof(x->buf), mbedtls_ctr_drbg_random,
					&x->drbg);
	if (ret > 0)
		ret = cert_der_fix(x, self_signed, x->buf + sizeof(x->buf) - ret, (size_t)ret);
	if (ret > 0) {
		size_t olen;

		ret = mbedtls_pem_write_buffer("-----BEGIN CERTIFICATE-----\n",
					       "-----END CERTIFICATE-----\n", x->der, (size_t)ret,
					       x->buf, sizeof(x->buf), &olen);
	}
	if (ret) {
		cert_err(ret, "certificate DER", err, errlen);
		return -EINVAL;
	}
	ret = port_file_write_atomic(out_crt, x->buf, strlen((char *)x->buf), 0644);
	if (ret)
		snprintf(err, errlen, "%s: %s", out_crt, strerror(-ret));
	return ret;
}

int tls_cert_make(const struct tls_cert_req *req, const char *issuer_crt, const char *issuer_key,
		  const char *out_crt, const char *out_key, char *err, size_t errlen)
{
	static const char pers[] = "edgeprof-certs";
	struct cert_ctx *x = calloc(1, sizeof(*x));
	int ret;

	if (!x)
		return -ENOMEM;
	mbedtls_entropy_init(&x->entropy);
	mbedtls_ctr_drbg_init(&x->drbg);
	mbedtls_pk_init(&x->key);
	mbedtls_pk_init(&x->issuer_key);
	mbedtls_x509_crt_init(&x->issuer);
	mbedtls_x509write_crt_init(&x->crt);
	mbedtls_mpi_init(&x->serial);

	ret = mbedtls_ctr_drbg_seed(&x->drbg, mbedtls_entropy_func, &x->entropy,
				    (const unsigned char *)pers, sizeof(pers));
	if (!ret)
		ret = mbedtls_pk_setup(&x->key, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
	if (!ret)
		ret = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(x->key),
					  mbedtls_ctr_drbg_random, &x->drbg);
	if (ret) {
		cert_err(ret, "EC P-256 key", err, errlen);
		ret = -EIO;
		goto out;
	}
	if (issuer_crt) {
		ret = cert_load_issuer(x, issuer_crt, issuer_key, err, errlen);
		if (ret)
			goto out;
	}
	ret = cert_fill(x, req, issuer_crt, err, errlen);
	if (!ret)
		ret = cert_write(x, !issuer_crt, out_crt, out_key, err, errlen);
out:
	mbedtls_mpi_free(&x->serial);
	mbedtls_x509write_crt_free(&x->crt);
	mbedtls_x509_crt_free(&x->issuer);
	mbedtls_pk_free(&x->issuer_key);
	mbedtls_pk_free(&x->key);
	mbedtls_ctr_drbg_free(&x->drbg);
	mbedtls_entropy_free(&x->entropy);
	mbedtls_platform_zeroize(x, sizeof(*x));
	free(x);
	return ret;
}
