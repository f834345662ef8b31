#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Power loss: kill -9 of the pushing process at random moments, 100 times while it spools (the
# collector down) and 20 times while it drains (collector up). Every profile whose push was
# reported durable reaches the collector exactly once and in order, none is corrupt (the
# collector validates each pprof, and a sample is compared byte for byte), the spool reopens
# every time.
. "$EP_TOP/tests/lib/transport-lib.sh"

TRIALS=${TRIALS:-100}
make_certs
port=$(free_port)
make_profiles "$W/in" 3
rand_ms() { echo "0.$(printf '%03d' $((RANDOM % ($2 - $1) + $1)))"; }

echo "== $TRIALS x kill -9 while spooling"
: >"$W/reported"
for t in $(seq -f %03g 1 "$TRIALS"); do
	"$PUSH" --upload "https://127.0.0.1:$port" --tls-ca "$W/certs/ca.crt" \
		--tls-cert "$W/certs/dev-1.crt" --tls-key "$W/certs/dev-1.key" \
		--service pl --round "t$t" --seq-label seq --spool "$W/spool" --spool-size 16M \
		--no-drain --repeat 20 --timeout-ms 2000 "$W/in" >"$W/t.out" 2>"$W/t.err" &
	pid=$!
	sleep "$(rand_ms 5 250)"
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	sed -n 's/^spooled dev-1-//p' "$W/t.out" >>"$W/reported"
	if grep -q "error" "$W/t.err"; then cat "$W/t.err"; fail "trial $t: spool error"; fi
done
echo "reported durable: $(wc -l <"$W/reported")"
[ "$(wc -l <"$W/reported")" -ge 20 ] || fail "too few pushes reported to mean anything"

echo "== collector up; 20 x kill -9 while draining, then a full drain"
start_collector "$port" 64M
for t in $(seq 1 20); do
	push "$port" --service pl --spool "$W/spool" >"$W/d.out" 2>&1 &
	pid=$!
	sleep "$(rand_ms 20 400)"
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
done
push "$port" --service pl --spool "$W/spool" --drain-timeout 300 >"$W/final.out" 2>&1 ||
	{ tail -n 30 "$W/final.out"; fail "final drain did not empty the spool"; }
[ "$(stat_of "$W/final.out" dropped_permanent)" = 0 ] || fail "the collector refused a profile"
[ "$(stat_of "$W/final.out" dropped_spool_full)" = 0 ] || fail "spool evicted (too small?)"

list_seq "$port" pl >"$W/list"
cut -d' ' -f1 "$W/list" >"$W/got"
echo "stored: $(wc -l <"$W/got")"
[ -z "$(sort "$W/got" | uniq -d)" ] || fail "stored twice: $(sort "$W/got" | uniq -d | head -n 3)"
sort -C "$W/got" || fail "not stored in the order they were pushed"
missing=$(comm -23 <(sort "$W/reported") <(sort "$W/got") | sed -n 1,5p)
[ -z "$missing" ] || fail "reported durable but never arrived: $missing"
extra=$(comm -13 <(sort "$W/reported") <(sort "$W/got") | wc -l)
echo "written but killed before reporting: $extra (at most one per trial)"
[ "$extra" -le "$TRIALS" ] || fail "$extra profiles nobody pushed"

echo "== a sample is byte-identical to what was pushed"
for id in $(cut -d' ' -f2 "$W/list" | shuf -n 5 --random-source=<(yes)); do
	curl_get "$port" "/api/0/profiles/$id" >"$W/got.pb.gz"
	cmp -s "$W/got.pb.gz" "$W/in/p0000.pb.gz" || fail "profile $id differs"
done
echo "ok"
