#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Offline: the collector is down for several rounds (separate push-dir runs, as agent rounds or
# restarts), then up: every profile arrives exactly once, in order. Spool full: the oldest are
# dropped, the count arrives in the next upload's labels, the newest are kept.
. "$EP_TOP/tests/lib/transport-lib.sh"

make_certs
port=$(free_port)
make_profiles "$W/in" 3

echo "== collector down: 4 rounds of 3 profiles go to the spool"
for r in 1 2 3 4; do
	rc=0
	push "$port" --service offline --round "r$r" --seq-label seq --spool "$W/spool" \
		--spool-size 1M --no-drain --timeout-ms 3000 "$W/in" >"$W/round$r.out" 2>&1 || rc=$?
	[ "$rc" = 3 ] || { cat "$W/round$r.out"; fail "round $r: expected exit 3 (spool not empty), got $rc"; }
	[ "$(grep -c '^spooled ' "$W/round$r.out")" = 3 ] || { cat "$W/round$r.out"; fail "round $r not spooled"; }
done
grep -h -m 2 "unreachable" "$W"/round*.out | head -n 2 || true
[ "$(stat_of "$W/round4.out" spool_pending)" = 12 ] || fail "spool should hold 12"

echo "== collector up: one drain delivers all, oldest first"
start_collector "$port"
push "$port" --service offline --spool "$W/spool" --drain-timeout 120 >"$W/drain.out" 2>&1 ||
	{ cat "$W/drain.out"; fail "drain did not empty the spool"; }
[ "$(stat_of "$W/drain.out" from_spool)" = 12 ] || { cat "$W/drain.out"; fail "drained count"; }
[ "$(stat_of "$W/drain.out" reused)" -ge 10 ] || fail "the drain did not keep the connection alive"
list_seq "$port" offline >"$W/list"
cut -d' ' -f1 "$W/list" >"$W/got"
for r in 1 2 3 4; do for i in 0 1 2; do echo "r$r-00000$i"; done; done >"$W/want"
diff "$W/want" "$W/got" || fail "not exactly once in order"

echo "== a crash after the upload but before the consume: the re-send is a no-op"
push "$port" --service offline --spool "$W/spool" >"$W/again.out" 2>&1
[ "$(stat_of "$W/again.out" from_spool)" = 0 ] || fail "spool not empty after drain"
push "$port" --service offline --round r1 --seq-label seq "$W/in/p0000.pb.gz" >"$W/dup.out" 2>&1
[ "$(list_seq "$port" offline | wc -l)" = 12 ] || fail "a re-sent key was stored twice"

echo "== spool full: 16 KiB spool, 42 profiles of about 1.2 KB while down"
stop_collector
make_profiles "$W/big" 3 1200
rc=0
push "$port" --service full --round f --seq-label seq --spool "$W/small" --spool-size 16K \
	--no-drain --repeat 14 "$W/big" >"$W/full.out" 2>&1 || rc=$?
[ "$rc" = 3 ] || { cat "$W/full.out"; fail "expected exit 3, got $rc"; }
pending=$(stat_of "$W/full.out" spool_pending)
echo "spool holds $pending of 42"
[ "$pending" -lt 42 ] && [ "$pending" -gt 0 ] || fail "a 16 KiB spool cannot hold 42 profiles"
start_collector "$port"
push "$port" --service full --spool "$W/small" >"$W/fulldrain.out" 2>&1 || fail "drain"
list_seq "$port" full >"$W/flist"
cat "$W/flist"
n=$(wc -l <"$W/flist")
dropped=$(head -n 1 "$W/flist" | cut -d' ' -f3)
[ "$n" = "$pending" ] || fail "received $n, spool held $pending"
[ "$((n + dropped))" = 42 ] || fail "received $n + reported dropped $dropped != 42"
[ "$(tail -n 1 "$W/flist" | cut -d' ' -f1)" = "f-000041" ] || fail "newest not kept"
[ "$(awk '$3 != 0' "$W/flist" | wc -l)" = 1 ] || fail "drop count reported more than once"
[ "$(stat_of "$W/fulldrain.out" dropped_spool_full)" = "$dropped" ] || fail "stats disagree"
echo "ok"
