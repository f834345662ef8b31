#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Roles (issue 24 item 7): a device certificate uploads and reads nothing (403 with a clear
# message, decided on the head: its body is never read); an operator certificate
# (`edgeprof certs operator`, OU=operator) and the plain-HTTP token read; `edgeprof ls` and
# `query` work with the operator's certificate and say why with a device's.
# CNs with a control byte (NUL included, item 6) are refused, not cut. Certificates carry no
# NULL parameter after ecdsa-with-SHA256.
. "$(dirname "$0")/../lib/collector-lib.sh"

make_pki
"$PPROF_TOOL" build "$T/p.pb.gz" >/dev/null || fail "pprof-tool build"
TOKEN=s3cret-token-123
start_collector --http-listen 127.0.0.1:0 --http-token "$TOKEN"
dcurl dev-1 --data-binary @"$T/p.pb.gz" "$(URL '/api/0/profiles?service=gw&type=cpu')" |
	grep -q 'HTTP 200' || fail "a device cannot upload"
openssl x509 -in "$T/pki/op.crt" -noout -subject | grep -q 'OU *= *operator' ||
	fail "operator certificate without OU=operator"
openssl x509 -in "$T/pki/dev-1.crt" -noout -subject | grep -q 'OU' && fail "device with an OU"
# No NULL parameter after ecdsa-with-SHA256 (RFC 5758 3.2; mbedtls 2.28's writer adds one).
for c in ca server dev-1 op; do
	openssl x509 -in "$T/pki/$c.crt" -outform DER | openssl asn1parse -inform DER |
		grep -A1 ecdsa-with-SHA256 | grep -q NULL && fail "$c.crt: NULL after ecdsa-with-SHA256"
done
openssl verify -CAfile "$T/pki/ca.crt" "$T/pki/server.crt" "$T/pki/dev-1.crt" "$T/pki/op.crt" ||
	fail "openssl does not verify our certificates"

for path in /api/0/services '/api/0/profiles?from=now-1h' '/api/0/profiles/merge?type=cpu' \
	/api/0/profiles/1 /metrics /api/0/debuginfo '/api/0/render?query=gw' /; do
	out=$(dcurl dev-1 "$(URL "$path")")
	echo "device GET $path: $(echo "$out" | tr '\n' ' ' | cut -c1-160)"
	echo "$out" | grep -q 'HTTP 403' || fail "device read $path"
	echo "$out" | grep -q 'dev-1 is a device certificate: it may upload, not read' ||
		fail "no clear message on $path"
	dcurl op "$(URL "$path")" | grep -q 'HTTP 403' && fail "operator refused on $path"
done
dcurl dev-1 "$(URL /healthz)" | grep -q 'HTTP 200' || fail "device cannot ask /healthz"
dcurl dev-1 "$(URL /api/0/version)" | grep -q 'HTTP 200' || fail "device cannot ask the version"
out=$(dcurl dev-1 --data-binary @"$T/p.pb.gz" "$(URL /api/0/debuginfo/0123456789abcdef)")
echo "$out" | grep -q 'HTTP 403' || fail "device uploaded a debug file"
dcurl op "$(URL /api/0/services)" | grep -q '"gw"' || fail "operator cannot list services"
curl -sS -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$HTTP_PORT/api/0/services" |
	grep -q '"gw"' || fail "token holder cannot list services"

export EDGEPROF_COLLECTOR=https://localhost:$TLS_PORT EDGEPROF_TLS_CA=$T/pki/ca.crt
EDGEPROF_TLS_CERT=$T/pki/op.crt EDGEPROF_TLS_KEY=$T/pki/op.key "$EP" ls gw --from 2000-01-01T00:00:00 |
	grep -q dev-1 || fail "edgeprof ls with the operator certificate"
out=$(EDGEPROF_TLS_CERT=$T/pki/dev-1.crt EDGEPROF_TLS_KEY=$T/pki/dev-1.key \
	"$EP" ls gw --from 2000-01-01T00:00:00 2>&1) && fail "edgeprof ls with a device certificate succeeded"
echo "edgeprof ls as a device: $out"
echo "$out" | grep -q 'operator certificate' || fail "edgeprof ls: no clear message"

# A CN with a NUL (or another control byte), signed by our CA: refused, not cut at the NUL.
/usr/bin/python3 - "$T/pki" <<'PYEOF' || fail "making the NUL-CN certificates"
import datetime, sys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID
d = sys.argv[1]
ca = x509.load_pem_x509_certificate(open(d + "/ca.crt", "rb").read())
cakey = serialization.load_pem_private_key(open(d + "/ca.key", "rb").read(), None)
for name, cn in (("nul", "gw-nul\0hidden"), ("esc", "gw-\x1b[31mred")):
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.utcnow()
    crt = (x509.CertificateBuilder()
           .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
           .issuer_name(ca.subject).public_key(key.public_key())
           .serial_number(x509.random_serial_number())
           .not_valid_before(now - datetime.timedelta(hours=1))
           .not_valid_after(now + datetime.timedelta(days=1))
           .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False,
                                        False), critical=True)
           .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
           .sign(cakey, hashes.SHA256()))
    open("%s/%s.crt" % (d, name), "wb").write(crt.public_bytes(serialization.Encoding.PEM))
    open("%s/%s.key" % (d, name), "wb").write(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
PYEOF
before=$(stored)
for who in nul esc; do
	dcurl "$who" --data-binary @"$T/p.pb.gz" "$(URL '/api/0/profiles?service=cn&type=cpu')" \
		>/dev/null 2>&1
done
[ "$(stored)" = "$before" ] || fail "a certificate with a control byte in its CN uploaded"
dcurl op "$(URL '/api/0/profiles?from=2000-01-01')" | grep -q '"gw-nul"' && fail "CN cut at NUL"
grep -q 'refused TLS client.*CN' "$T/collector.log" || fail "no log line for the CN"
echo PASS
