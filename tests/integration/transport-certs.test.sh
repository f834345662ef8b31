#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Refusals over real mutual TLS, with real certificates: a device certificate from another CA,
# an expired device certificate, a collector certificate made for another name. Each time the
# transport says so clearly (once), keeps the profiles in its spool, and nothing is stored; with
# the right certificate the same spool then drains.
. "$EP_TOP/tests/lib/transport-lib.sh"

make_certs
"$B/edgeprof" certs init "$W/other" >/dev/null
"$B/edgeprof" certs device "$W/other" dev-1 >/dev/null
"$PUSH" --make-expired-cert "$W/certs" old
port=$(free_port)
start_collector "$port"
make_profiles "$W/in" 2

refused() { # NAME EXPECTED-TEXT push-dir args...
	local name=$1 want=$2 rc=0
	shift 2
	"$PUSH" --upload "https://127.0.0.1:$port" --service certs --spool "$W/$name.spool" \
		--round "$name" --no-drain --timeout-ms 5000 "$@" "$W/in" >"$W/$name.out" 2>"$W/$name.err" || rc=$?
	echo "-- $name: $(grep -m1 'upload:' "$W/$name.err" || true)"
	[ "$rc" = 3 ] || { cat "$W/$name.out" "$W/$name.err"; fail "$name: expected exit 3, got $rc"; }
	grep -q "$want" "$W/$name.err" || { cat "$W/$name.err"; fail "$name: no clear message"; }
	[ "$(grep -c 'upload:' "$W/$name.err")" = 1 ] || fail "$name: logged more than once"
	[ "$(grep -c '^spooled ' "$W/$name.out")" = 2 ] || fail "$name: not spooled"
}

refused foreign-ca "device certificate" --tls-ca "$W/certs/ca.crt" \
	--tls-cert "$W/other/dev-1.crt" --tls-key "$W/other/dev-1.key"
refused expired "device certificate" --tls-ca "$W/certs/ca.crt" \
	--tls-cert "$W/certs/old.crt" --tls-key "$W/certs/old.key"
refused wrong-ca-pinned "not correctly signed by the trusted CA" --tls-ca "$W/other/ca.crt" \
	--tls-cert "$W/certs/dev-1.crt" --tls-key "$W/certs/dev-1.key"

echo "-- collector certificate for another name"
"$B/edgeprof" certs init "$W/named" --server-name collector.example --server-ip 10.9.9.9 >/dev/null
"$B/edgeprof" certs device "$W/named" dev-1 >/dev/null
port2=$(free_port)
"$B/edgeprof-collector" --listen "127.0.0.1:$port2" --tls-ca "$W/named/ca.crt" \
	--tls-cert "$W/named/server.crt" --tls-key "$W/named/server.key" --ring "$W/named.ring" \
	--ring-size 1M >"$W/named.log" 2>&1 &
PIDS+=($!)
for i in $(seq 1 100); do grep -q "port $port2)" "$W/named.log" && break; sleep 0.1; done
rc=0
"$PUSH" --upload "https://127.0.0.1:$port2" --tls-ca "$W/named/ca.crt" \
	--tls-cert "$W/named/dev-1.crt" --tls-key "$W/named/dev-1.key" --service certs \
	--spool "$W/spool2" --no-drain "$W/in" >"$W/name.out" 2>"$W/name.err" || rc=$?
echo "-- wrong-name: $(grep -m1 'upload:' "$W/name.err" || true)"
[ "$rc" = 3 ] || fail "wrong name: expected exit 3, got $rc"
grep -q "Common Name\|CN" "$W/name.err" || fail "wrong name: no clear message"

echo "-- nothing was stored; the right certificate drains the spool"
[ "$(list_seq "$port" certs | wc -l)" = 0 ] || fail "a refused device stored something"
for name in foreign-ca expired wrong-ca-pinned; do
	push "$port" --service certs --spool "$W/$name.spool" >"$W/ok.out" 2>&1 ||
		{ cat "$W/ok.out"; fail "drain"; }
	[ "$(stat_of "$W/ok.out" from_spool)" = 2 ] || fail "expected the 2 spooled profiles"
done
list_seq "$port" certs >"$W/list" || true
cat "$W/list"
[ "$(wc -l <"$W/list")" = 6 ] || fail "not stored"
echo "ok"
