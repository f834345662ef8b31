#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Bad input gets a clear JSON error and changes nothing, and the collector keeps serving others:
# malformed pprof, a gzip bomb, an oversized body (sized and chunked), an oversized head, a bad
# selector, a bad type, an unknown endpoint, a wrong method, a slowloris client (plain HTTP and a
# TLS client that never handshakes), the plain-HTTP token check (Bearer and Basic), and the
# connection cap.
. "$(dirname "$0")/../lib/collector-lib.sh"

make_pki
"$PPROF_TOOL" build "$T/p.pb.gz" >/dev/null || fail "pprof-tool build"
TOKEN=s3cret-token-123
start_collector --max-body 256K --request-timeout-ms 1500 --http-listen 127.0.0.1:0 \
	--http-token "$TOKEN"
POST=$(URL '/api/0/profiles?service=gw&type=cpu')

expect() { # name, code, body regex, curl args...
	local name=$1 code=$2 re=$3
	shift 3
	local out
	out=$(dcurl op "$@" 2>&1)
	echo "$name: $(echo "$out" | tr '\n' ' ' | cut -c1-200)"
	echo "$out" | grep -q "HTTP $code" || fail "$name: wanted $code"
	echo "$out" | grep -Eq "$re" || fail "$name: answer does not match /$re/"
	# and a good upload right after still works
	dcurl dev-1 --data-binary @"$T/p.pb.gz" "$POST" | grep -q 'HTTP 200' ||
		fail "$name: server stopped serving"
	good=$((good + 1))
}
good=0

printf 'this is not a profile' >"$T/garbage"
expect malformed 400 '"code":400,"error":"invalid pprof' --data-binary @"$T/garbage" "$POST"
head -c 100000 /dev/zero | gzip -c >"$T/zeros.gz"
expect not-pprof-gzip 400 'invalid pprof' --data-binary @"$T/zeros.gz" "$POST"
head -c 150000000 /dev/zero | gzip -9 -c >"$T/bomb.gz"
ls -l "$T/bomb.gz"
expect gzip-bomb 413 '"code":413' --data-binary @"$T/bomb.gz" "$POST"
head -c 400000 /dev/urandom >"$T/big"
expect too-large 413 'larger than the limit' --data-binary @"$T/big" "$POST"
expect too-large-chunked 413 'larger than the limit' -H 'Transfer-Encoding: chunked' \
	--data-binary @"$T/big" "$POST"
expect head-too-large 431 'request head' -H "X-Pad: $(head -c 20000 /dev/zero | tr '\0' a)" \
	"$(URL /api/0/version)"
expect bad-selector 400 'bad selector.*column' "$(URL '/api/0/profiles?query=gw%7Bregion%3D')"
expect bad-time 400 'from' "$(URL '/api/0/profiles?from=yesterday-ish')"
expect bad-type 400 "type 'nope'" --data-binary @"$T/p.pb.gz" \
	"$(URL '/api/0/profiles?service=gw&type=nope')"
expect no-service 400 'service is required' --data-binary @"$T/p.pb.gz" \
	"$(URL '/api/0/profiles?type=cpu')"
expect empty-body 400 'empty body' --data-binary '' "$POST"
expect unknown-endpoint 404 'no such endpoint' "$(URL /api/0/nope)"
expect bad-id 400 'profile ids' "$(URL /api/0/profiles/12x)"
expect missing-id 404 'is not stored' "$(URL /api/0/profiles/999999)"
expect wrong-method 405 'not allowed' -X DELETE "$(URL /api/0/profiles)"

# Plain HTTP: the token is required, as Bearer or as Basic password.
H=http://127.0.0.1:$HTTP_PORT
code=$(curl -s -o /dev/null -w '%{http_code}' --data-binary @"$T/p.pb.gz" \
	"$H/api/0/profiles?service=gw&type=cpu")
[ "$code" = 401 ] || fail "plain HTTP without token: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong-token-xx" \
	"$H/api/0/version")
[ "$code" = 401 ] || fail "plain HTTP with a wrong token: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
	--data-binary @"$T/p.pb.gz" "$H/api/0/profiles?service=gw&type=cpu")
[ "$code" = 200 ] || fail "plain HTTP with bearer token: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -u "anyone:$TOKEN" "$H/api/0/version")
[ "$code" = 200 ] || fail "plain HTTP with basic auth: $code"
good=$((good + 1))

# Slowloris: half a request head, then silence. Others are served meanwhile; the slow one gets
# a 408 after --request-timeout-ms and is closed.
exec 3<>/dev/tcp/127.0.0.1/"$HTTP_PORT"
printf 'GET /api/0/version HTTP/1.1\r\nHost: x\r\nX-Slow: ' >&3
exec 4<>/dev/tcp/127.0.0.1/"$TLS_PORT" # a TLS client that never says hello
dcurl dev-1 --data-binary @"$T/p.pb.gz" "$POST" | grep -q 'HTTP 200' ||
	fail "not serving while a slow client hangs"
good=$((good + 1))
slow=$(timeout 20 cat <&3)
exec 3<&-
echo "slow client got: $(echo "$slow" | head -n 1)"
echo "$slow" | grep -q '^HTTP/1.1 408' || fail "slow client did not get a 408"
echo "$slow" | grep -q '"code":408' || fail "no JSON error for the slow client"
timeout 20 cat <&4 >/dev/null
exec 4<&-
# The same over mutual TLS: a device that completes the handshake and then dribbles.
if command -v openssl >/dev/null; then
	slow=$( (printf 'POST /api/0/profiles?service=gw&type=cpu HTTP/1.1\r\nHost: x\r\n'
		sleep 6) | timeout 20 openssl s_client -quiet -connect "127.0.0.1:$TLS_PORT" \
		-cert "$T/pki/dev-1.crt" -key "$T/pki/dev-1.key" -CAfile "$T/pki/ca.crt" 2>/dev/null)
	echo "slow TLS client got: $(echo "$slow" | head -n 1)"
	echo "$slow" | grep -q '^HTTP/1.1 408' || fail "slow TLS client did not get a 408"
fi
for _ in $(seq 100); do
	grep -q 'refused TLS client.*timed out' "$T/collector.log" && break
	sleep 0.1
done
grep -q 'refused TLS client.*timed out' "$T/collector.log" || fail "TLS handshake timeout not logged"

# Rollups (store/ring/rollup.h) are records too: uploads dated in the past are rolled up at once (read
# again while the rollup thread is between its append and its count).
for _ in $(seq 50); do
	rollups=$(metric rollups_built_total)
	stored=$(( $(metric ring_records) - ${rollups:-0} ))
	[ "$stored" = "$good" ] && break
	sleep 0.1
done
[ "$stored" = "$good" ] || fail "stored $stored profiles, want $good"
dcurl op "$(URL /metrics)" | grep '^edgeprof_collector_requests_rejected_total' | grep -v ' 0$'
[ "$(dcurl op "$(URL /metrics)" | grep 'rejected_total{reason="too_large"}' |
	awk '{print $2}')" -ge 3 ] || fail "too-large rejections not counted"
stop_collector

# The connection cap: with --max-conns 2 and two authenticated keep-alive connections open, a
# third is answered 503 at once (and counted); once they close, service resumes. (Connections
# that have not authenticated have a budget of their own: collector-flood.test.sh.)
start_collector --max-conns 2 --http-listen 127.0.0.1:0 --http-token "$TOKEN"
exec 5<>/dev/tcp/127.0.0.1/"$HTTP_PORT"
exec 6<>/dev/tcp/127.0.0.1/"$HTTP_PORT"
printf 'GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n' "$TOKEN" >&5
printf 'GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n' "$TOKEN" >&6
sleep 0.3
out=$(curl -sS -w '\nHTTP %{http_code}' -H "Authorization: Bearer $TOKEN" \
	"http://127.0.0.1:$HTTP_PORT/api/0/version")
echo "over the cap: $out"
echo "$out" | grep -q 'HTTP 503' || fail "connection over the cap not refused"
echo "$out" | grep -q 'too many connections' || fail "no clear message over the cap"
exec 5<&- 6<&-
for _ in $(seq 50); do
	code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
		"http://127.0.0.1:$HTTP_PORT/api/0/version")
	[ "$code" = 200 ] && break
	sleep 0.1
done
[ "$code" = 200 ] || fail "no service after the idle connections closed: $code"
[ "$(metric connections_refused_total)" -ge 1 ] || fail "refusal not counted"
stop_collector
echo "collector bad input: ok"
