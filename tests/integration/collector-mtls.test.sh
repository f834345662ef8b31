#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Real mutual TLS on loopback with certificates from `edgeprof certs`: a device is accepted and
# labelled by its certificate's CN (a spoofed device label is ignored), an idempotent retry
# stores nothing, `edgeprof ls/query` pull the profile back; refused: no client certificate,
# a certificate from another CA, an expired one, one with the wrong key usage — each with a
# clear log line, a handshake-failure count, and nothing stored. SIGTERM exits cleanly and at
# once, even with a client stuck before its TLS hello.
. "$(dirname "$0")/../lib/collector-lib.sh"

make_pki
now=$(date +%s)
"$EP" certs device "$T/pki" old --not-before $((now - 30 * 86400)) --not-after $((now - 86400)) \
	>/dev/null || fail "expired cert"
"$EP" certs device "$T/pki" badusage --key-usage bad >/dev/null || fail "bad usage cert"
"$EP" certs init "$T/other" >/dev/null && "$EP" certs device "$T/other" intruder >/dev/null ||
	fail "other CA"
cp "$T/other/intruder.crt" "$T/other/intruder.key" "$T/pki/"
[ "$(stat -c %a "$T/pki/dev-1.key")" = 600 ] || fail "device key is not mode 0600"
"$EP" certs init "$T/pki" >/dev/null 2>&1 && fail "certs init replaced an existing CA"

"$PPROF_TOOL" build "$T/p.pb.gz" >/dev/null || fail "pprof-tool build"
start_collector

# Accepted: device from the CN, client's own device label dropped.
out=$(dcurl dev-1 --data-binary @"$T/p.pb.gz" -H 'X-Edgeprof-Key: dev-1-r1' \
	"$(URL '/api/0/profiles?service=gw&type=cpu&labels=region=eu,device=spoofed')")
echo "$out"
echo "$out" | grep -q 'HTTP 200' || fail "upload refused"
echo "$out" | grep -q '"device":"dev-1"' || fail "device label is not the CN"
echo "$out" | grep -q 'spoofed' && fail "client overrode the device label"
id=$(echo "$out" | sed -n 's/.*"id":"\([0-9]*\)".*/\1/p')

# The retry with the same key returns the same id and stores nothing.
out=$(dcurl dev-1 --data-binary @"$T/p.pb.gz" -H 'X-Edgeprof-Key: dev-1-r1' \
	"$(URL '/api/0/profiles?service=gw&type=cpu&labels=region=eu')")
echo "$out" | grep -q "\"id\":\"$id\"" || fail "retry got another id: $out"
echo "$out" | grep -q '"duplicate":true' || fail "retry not flagged as duplicate"
[ "$(metric ring_records)" = 1 ] || fail "retry stored a second record"

dcurl op -o "$T/back.pb.gz" "$(URL "/api/0/profiles/$id")" | grep -q 'HTTP 200' || fail "get"
cmp "$T/p.pb.gz" "$T/back.pb.gz" || fail "stored profile is not byte-identical"

export EDGEPROF_COLLECTOR=https://localhost:$TLS_PORT EDGEPROF_TLS_CA=$T/pki/ca.crt \
	EDGEPROF_TLS_CERT=$T/pki/op.crt EDGEPROF_TLS_KEY=$T/pki/op.key
"$EP" ls 'gw{device="dev-1"}' --from 2000-01-01 | tee "$T/ls"
grep -q "region=eu" "$T/ls" || fail "edgeprof ls does not list it"
"$EP" query 'gw{region="eu"}' --from 2000-01-01 -o "$T/merged.pb.gz" || fail "edgeprof query"
"$PPROF_TOOL" check "$T/merged.pb.gz" || fail "merged profile does not read"
"$EP" query 'gw{region="us"}' --from 2000-01-01 -o "$T/none.pb.gz" 2>"$T/q.err" &&
	fail "query of nothing succeeded"
grep -q "no profiles match" "$T/q.err" || fail "no clear message for an empty query"

# Refused clients: curl fails, the log says why, the counter moves, nothing is stored.
refuse() { # name, curl cert args..., expected log text
	local name=$1 want=$2
	shift 2
	curl -sS --max-time 30 --cacert "$T/pki/ca.crt" "$@" --data-binary @"$T/p.pb.gz" \
		"$(URL '/api/0/profiles?service=gw&type=cpu')" >"$T/$name.out" 2>&1 &&
		fail "$name: upload accepted: $(cat "$T/$name.out")"
	for _ in $(seq 100); do # the alert reaches curl just before the log line is written
		grep -q "refused TLS client .*$want" "$T/collector.log" && break
		sleep 0.1
	done
	grep -q "refused TLS client .*$want" "$T/collector.log" || fail "$name: no log line '$want'"
	echo "refused $name: $(grep "refused TLS client .*$want" "$T/collector.log" | tail -n 1)"
}
refuse no-cert "no certificate"
# ... with a TLS alert that says so, not a connection reset (issue 24)
grep -q 'alert handshake failure' "$T/no-cert.out" || fail "no-cert: no TLS alert: $(cat "$T/no-cert.out")"
refuse other-ca "not correctly signed" --cert "$T/pki/intruder.crt" --key "$T/pki/intruder.key"
refuse expired "expired" --cert "$T/pki/old.crt" --key "$T/pki/old.key"
refuse bad-usage "keyUsage" --cert "$T/pki/badusage.crt" --key "$T/pki/badusage.key"
[ "$(metric ring_records)" = 1 ] || fail "a refused client stored something"
fails=$(dcurl op "$(URL /metrics)" | grep '^edgeprof_collector_tls_handshake_failures_total' |
	awk '{s += $2} END {print s}')
[ "$fails" -ge 4 ] || fail "handshake failures not counted ($fails)"

# The server still serves after all that.
dcurl dev-1 "$(URL /healthz)" | grep -q 'HTTP 200' || fail "not serving after refusals"
# SIGTERM does not wait for a client stuck before its TLS hello (the handshake timeout is 10 s).
exec 3<>/dev/tcp/127.0.0.1/"$TLS_PORT"
sleep 0.3
t0=$(date +%s)
stop_collector
[ $(( $(date +%s) - t0 )) -lt 6 ] || fail "shutdown waited for a silent client"
exec 3<&-
grep -q "shutting down" "$T/collector.log" || fail "no shutdown line"
echo "collector mTLS: ok"
