#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# End to end over real mutual TLS on loopback: push-dir (agent/transport) -> edgeprof-collector
# -> merged profile -> `go tool pprof -top` shows the pushed profile's functions. A re-send of the
# same keys is a no-op (idempotency), session resumption is used, clock-less items are labelled.
. "$EP_TOP/tests/lib/transport-lib.sh"

make_certs
port=$(free_port)
start_collector "$port"
make_profiles "$W/in" 5

echo "== push 5 profiles"
push "$port" --service e2e --labels region=eu --round 100 --seq-label seq --spool "$W/spool" \
	"$W/in" >"$W/push1.out" 2>"$W/push1.err" || { cat "$W/push1.out" "$W/push1.err"; fail "push"; }
cat "$W/push1.out"
[ "$(stat_of "$W/push1.out" uploaded)" = 5 ] || fail "not all uploaded"
[ "$(stat_of "$W/push1.out" spooled)" = 0 ] || fail "spooled while the collector was up"
[ "$(stat_of "$W/push1.out" resumed)" -ge 4 ] || fail "TLS sessions were not resumed"
grep -q "connected to collector" "$W/push1.err" || fail "no 'connected' log line"

echo "== the same keys again: the collector keeps one copy"
push "$port" --service e2e --labels region=eu --round 100 --seq-label seq "$W/in" >"$W/push2.out" 2>&1
[ "$(stat_of "$W/push2.out" uploaded)" = 5 ] || fail "re-send not acknowledged"
list_seq "$port" e2e >"$W/list"
cat "$W/list"
[ "$(wc -l <"$W/list")" = 5 ] || fail "expected 5 stored profiles, got $(wc -l <"$W/list")"
[ "$(cut -d' ' -f1 "$W/list" | tr '\n' ' ')" = "100-000000 100-000001 100-000002 100-000003 100-000004 " ] ||
	fail "wrong order or keys"

echo "== stored bytes are what was sent"
id=$(head -n 1 "$W/list" | cut -d' ' -f2)
curl_get "$port" "/api/0/profiles/$id" >"$W/one.pb.gz"
cmp "$W/one.pb.gz" "$W/in/p0000.pb.gz" || fail "stored profile differs from the pushed file"

echo "== a device without a clock: its profile says 12 s after boot (1970)"
$PY - "$W/in/p0000.pb.gz" "$W/t1970.pb.gz" <<'PYEOF'
import gzip, sys
d = gzip.decompress(open(sys.argv[1], "rb").read())
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if not c & 0x80: return v, i
def enc(v):
    o = bytearray()
    while True:
        c = v & 0x7f; v >>= 7
        if not v: o.append(c); return bytes(o)
        o.append(c | 0x80)
out, i = bytearray(), 0
while i < len(d):  # rewrite Profile.time_nanos (field 9) at the top level
    start = i
    tag, i = varint(d, i)
    wt = tag & 7
    if wt == 0: _, i = varint(d, i)
    elif wt == 2: n, i = varint(d, i); i += n
    elif wt == 1: i += 8
    elif wt == 5: i += 4
    out += enc(9 << 3) + enc(12 * 10**9) if tag >> 3 == 9 else d[start:i]
open(sys.argv[2], "wb").write(gzip.compress(bytes(out)))
PYEOF
push "$port" --service e2e-noclock --round 7 --clock-unset "$W/t1970.pb.gz" >"$W/push3.out" 2>&1
[ "$(stat_of "$W/push3.out" uploaded)" = 1 ] || { cat "$W/push3.out"; fail "clock-less profile refused"; }
# placed at receive time: found in the last hour, labelled as such
curl_get "$port" "/api/0/profiles?service=e2e-noclock&from=now-1h&to=now%2B1h" >"$W/noclock.json"
cat "$W/noclock.json"; echo
grep -q '"key":"clock","value":"unset"' "$W/noclock.json" || fail "no clock=unset label"
grep -q '"key":"age_s"' "$W/noclock.json" || fail "no age_s label"

echo "== merged profile through go tool pprof"
curl_get "$port" "/api/0/profiles/merge?service=e2e&type=cpu&from=now-1h&to=now%2B1h" >"$W/merged.pb.gz"
if command -v go >/dev/null; then
	HOME=$W GOCACHE=$W/go-cache GOFLAGS=-mod=mod go tool pprof -top "$W/merged.pb.gz" >"$W/top.txt" 2>&1 ||
		{ cat "$W/top.txt"; fail "go tool pprof failed"; }
	head -n 12 "$W/top.txt"
	go tool pprof -top "$W/in/p0000.pb.gz" 2>/dev/null | awk 'NR>6 && NR<=9 {print $NF}' >"$W/want"
	while read -r fn; do
		grep -qF "$fn" "$W/top.txt" || fail "function $fn missing from the merged profile"
	done <"$W/want"
	# the merge of the 5 stored copies has 5x the samples of one
	total() { go tool pprof -top -unit=ms "$1" 2>/dev/null | sed -n 's/.*Total samples = \([0-9.]*\)ms.*/\1/p'; }
	one=$(total "$W/in/p0000.pb.gz")
	all=$(total "$W/merged.pb.gz")
	echo "one profile: ${one}ms, merged: ${all}ms"
	$PY -c "import sys; sys.exit(0 if abs($all - 5 * $one) < 1e-6 else 1)" ||
		fail "merged total ${all}ms is not 5 x ${one}ms"
fi
echo "ok"
