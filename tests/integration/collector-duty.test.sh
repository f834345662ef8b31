#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fleet-wide duty cycling over the real API: a collector with --duty-percent 5 answers each
# upload with the device's schedule. 40 devices of one group (version=1.2, region=eu; told apart
# by a node label) upload twice in one hour-long window: once all are known, exactly 2 of them
# (5 % of 40) are told to sample this window, each with weight 20 and its next window within
# 20 windows; a device of another group is scheduled on its own (one device: every window).
# The simulated 10,000-device fleet is tests/unit/duty-test.c. ~3 s.
. "$(dirname "$0")/collector-lib.sh"
"$COLLECTOR" --help 2>&1 | grep -q -- --duty-percent ||
	{ echo "collector built without CONFIG_COLLECTOR_DUTY"; exit 77; }
make_pki
"$PPROF_TOOL" build "$T/b.pb.gz" >/dev/null || fail "pprof-tool build"
start_collector --duty-percent 5 --duty-window 3600
up() { # NODE LABELS
	curl -sS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" --key "$T/pki/dev-1.key" \
		--data-binary @"$T/b.pb.gz" \
		"https://localhost:$TLS_PORT/api/0/profiles?service=gw&type=cpu&labels=node=$1,$2" ||
		fail "upload from $1"
}
# a window boundary between the rounds would change who samples: start just after one
[ $(( $(date +%s) % 3600 )) -lt 3590 ] || sleep 11
for round in 1 2; do
	: >"$T/round$round"
	for i in $(seq 40); do up "gw-$i" "version=1.2,region=eu" >>"$T/round$round"; echo >>"$T/round$round"; done
done
n=$(grep -c '"sample":true' "$T/round2")
[ "$n" = 2 ] || { head -n 3 "$T/round2"; fail "$n of 40 devices told to sample, want 2 (5 %)"; }
grep -q '"schedule":{' "$T/round2" || fail "no schedule in the answer"
[ "$(grep -c '"weight":20.000,' "$T/round2")" = 40 ] || fail "weights are not 40/2 = 20"
[ "$(grep -c '"group_devices":40,"group_slots":2' "$T/round2")" = 40 ] || fail "group of 40, 2 slots"
now=$(date +%s)
grep -o '"next_start":[0-9]*' "$T/round2" | cut -d: -f2 | while read -r t; do
	[ "$t" -gt "$now" ] && [ "$t" -le $((now + 21 * 3600)) ] || fail "next window at $t"
done
other=$(up gw-x "version=2.0,region=us")
case $other in *'"sample":true'*'"group_devices":1,'*) ;; *) fail "another group: $other" ;; esac
echo "duty cycling: 2 of 40 devices of a group sample this window (weight 20), another group's one device samples"
echo "collector-duty: ok"
