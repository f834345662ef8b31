#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fleet-wide duty cycling over the real API: a collector with --duty-percent 5 answers each
# upload with the device's schedule. 20 devices of one group (version=1.2, region=eu; told apart
# by a node label) upload twice in one hour-long window: once all are known, exactly 1 of them
# (5 % of 20) is told to sample this window, each with weight 20 and its next window within
# 20 windows; a device of another group is scheduled on its own (one device: every window).
# Then a real agent in a group of 40 skips the rounds outside its windows, and on ClickHouse
# the profiles' weights make a merge the fleet's total. The simulated 10,000-device fleet is
# tests/unit/store/api/duty-test.c. ~35 s.
. "$(dirname "$0")/../lib/collector-lib.sh"
"$COLLECTOR" --help 2>&1 | grep -q -- --duty-percent ||
	{ echo "collector built without CONFIG_COLLECTOR_DUTY"; exit 77; }
make_pki
"$PPROF_TOOL" build "$T/b.pb.gz" >/dev/null || fail "pprof-tool build"
start_collector --duty-percent 5 --duty-window 3600
# A device is its certificate (labels only choose its group): one certificate each.
for n in $(seq 20) x; do "$EP" certs device "$T/pki" "gw-$n" >/dev/null || fail "certs gw-$n"; done
for n in 1 2; do "$EP" certs device "$T/pki" "w-$n" >/dev/null || fail "certs w-$n"; done
up() { # DEVICE LABELS: an upload with DEVICE's certificate
	curl -sS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/$1.crt" --key "$T/pki/$1.key" \
		--data-binary @"$T/b.pb.gz" \
		"https://localhost:$TLS_PORT/api/0/profiles?service=gw&type=cpu&labels=node=$1,$2" ||
		fail "upload from $1"
}
# a window boundary between the rounds would change who samples: start just after one
[ $(( $(date +%s) % 3600 )) -lt 3590 ] || sleep 11
for round in 1 2; do
	: >"$T/round$round"
	for i in $(seq 20); do up "gw-$i" "version=1.2,region=eu" >>"$T/round$round"; echo >>"$T/round$round"; done
done
n=$(grep -c '"sample":true' "$T/round2")
[ "$n" = 1 ] || { head -n 3 "$T/round2"; fail "$n of 20 devices told to sample, want 1 (5 %)"; }
grep -q '"schedule":{' "$T/round2" || fail "no schedule in the answer"
[ "$(grep -c '"weight":20.000,' "$T/round2")" = 20 ] || fail "weights are not 20/1 = 20"
[ "$(grep -c '"group_devices":20,"group_slots":1' "$T/round2")" = 20 ] || fail "group of 20, 1 slot"
now=$(date +%s)
grep -o '"next_start":[0-9]*' "$T/round2" | cut -d: -f2 | while read -r t; do
	[ "$t" -gt "$now" ] && [ "$t" -le $((now + 21 * 3600)) ] || fail "next window at $t"
done
other=$(up gw-x "version=2.0,region=us")
case $other in *'"sample":true'*'"group_devices":1,'*) ;; *) fail "another group: $other" ;; esac
echo "duty cycling: 1 of 20 devices of a group samples this window (weight 20), another group's one device samples"

# The agent obeys: 39 devices (certificates L-1..39) and a real agent (sigprof, rounds of 1 s
# back to back) in one group of a collector with 1 s windows: after its first round (no
# schedule yet) the agent is the 40th of 2 slots a window, so it samples one window in 20: in
# 8 s, at most 2 rounds more.
agent=$EP_BUILD/edgeprof-agent lib=$EP_BUILD/libedgeprof.so split=$EP_BUILD/tests/workloads/split
if [ -f "$lib" ] && "$agent" --help 2>&1 | grep -q -- --upload; then
	kill -9 "$CPID"; wait "$CPID" 2>/dev/null; CPID=; rm -f "$T/ring"
	start_collector --duty-percent 5 --duty-window 1 --duty-group-by fleet
	mkdir -p "$T/fleet" "$T/reg"
	"$PPROF_TOOL" fleet "$T/fleet" 1 1 100 "$T/b.pb.gz" 2>/dev/null || fail "pprof-tool fleet"
	for n in $(seq 39); do
		"$EP" certs device "$T/pki" "L-$n" >/dev/null || fail "certs L-$n"
		curl -sS --fail -o /dev/null --cacert "$T/pki/ca.crt" --cert "$T/pki/L-$n.crt" \
			--key "$T/pki/L-$n.key" --data-binary @"$T/b.pb.gz" \
			"https://localhost:$TLS_PORT/api/0/profiles?service=load&type=cpu" ||
			fail "device L-$n"
	done
	preload=$lib # a sanitized library needs the ASan runtime first (its malloc is interposed)
	ldd "$lib" | grep -q libasan && preload="$(ldd "$lib" | awk '/libasan/ {print $3}') $lib"
	env LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 EDGEPROF_REGISTRY="$T/reg" \
		EDGEPROF_SERVICE=dutysvc \
		EDGEPROF_HZ=997 "$split" --seconds 11 >/dev/null &
	wpid=$!
	timeout -s INT 9 "$agent" --sampler sigprof --registry "$T/reg" --round-seconds 1 \
		--period-seconds 1 --jitter-percent 0 --upload "https://localhost:$TLS_PORT" \
		--tls-ca "$T/pki/ca.crt" --tls-cert "$T/pki/dev-1.crt" \
		--tls-key "$T/pki/dev-1.key" 2>"$T/agent.err"
	wait "$wpid"
	skipped=$(grep -c "skipped: not in this device's window" "$T/agent.err")
	sent=$(grep -c "profile of dutysvc handed to the transport" "$T/agent.err")
	[ "$sent" -ge 1 ] && [ "$sent" -le 3 ] && [ "$skipped" -ge 4 ] ||
		{ tail -n 20 "$T/agent.err"; fail "agent: $sent rounds uploaded, $skipped skipped"; }
	echo "the agent obeys: $sent rounds uploaded (the first before any schedule), $skipped skipped in ~8 s"
	# its first rounds were decided before any schedule came back (the second is decided as
	# the first ends, before its upload): not weighed, nor the 39 curl uploads; a later
	# round is sampled in a told window: weighed
	weighed=$(metric duty_profiles_weighed_total)
	[ "${weighed:-99}" -le $((sent - 1)) ] && { [ "$sent" -lt 3 ] || [ "$weighed" -ge 1 ]; } ||
		fail "agent: $weighed of $sent profiles weighed (the first is never)"
	# The agent labels the rounds it samples in told windows (duty_window): alone with one
	# other device in a group (50 %: 1 slot of 2, 2 s windows) it samples every other window,
	# and those rounds' profiles are weighed 2; its rounds without a schedule are not.
	kill -9 "$CPID"; wait "$CPID" 2>/dev/null; CPID=; rm -f "$T/ring"
	start_collector --duty-percent 50 --duty-window 2 --duty-group-by fleet
	curl -sS --fail -o /dev/null --cacert "$T/pki/ca.crt" --cert "$T/pki/L-1.crt" \
		--key "$T/pki/L-1.key" --data-binary @"$T/b.pb.gz" \
		"https://localhost:$TLS_PORT/api/0/profiles?service=load&type=cpu" || fail "L-1"
	env LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 EDGEPROF_REGISTRY="$T/reg" \
		EDGEPROF_SERVICE=dutysvc \
		EDGEPROF_HZ=997 "$split" --seconds 11 >/dev/null &
	wpid=$!
	timeout -s INT 9 "$agent" --sampler sigprof --registry "$T/reg" --round-seconds 1 \
		--period-seconds 1 --jitter-percent 0 --upload "https://localhost:$TLS_PORT" \
		--tls-ca "$T/pki/ca.crt" --tls-cert "$T/pki/dev-1.crt" \
		--tls-key "$T/pki/dev-1.key" 2>"$T/agent2.err"
	wait "$wpid"
	sent=$(grep -c "profile of dutysvc handed to the transport" "$T/agent2.err")
	weighed=$(metric duty_profiles_weighed_total)
	unweighed=$(metric duty_profiles_unweighed_total)
	[ "${weighed:-0}" -ge 1 ] && [ "$weighed" -le $((sent - 1)) ] ||
		{ tail -n 20 "$T/agent2.err"; fail "agent: $weighed of $sent profiles weighed (want 1..$((sent - 1)))"; }
	echo "the agent labels rounds of told windows: $weighed of its $sent profiles weighed, $unweighed not (decided before a schedule; L-1's)"
fi
# Profiles carry the weight: on ClickHouse (which stores the decoded rows) two devices of a
# group with a 50 % budget (1 slot of 2: weight 2) uploading the same profile merge to 4 times
# its values, the fleet's total had both sampled both windows.
if [ -x "${CH_SERVER:-/usr/sbin/clickhouse-server}" ] && "$COLLECTOR" --help 2>&1 | grep -q -- --clickhouse; then
	. "$(dirname "$0")/../lib/clickhouse-lib.sh"
	ch_start 0
	chd_args=(--ch-batch-ms 50 --duty-percent 50 --duty-window 3600 --duty-group-by fleet
		--ch-spool "$T/spool" --ring-size 16M)
	start_ch_collector chd "http://127.0.0.1:$(ch_http_port 0)/edgeprof_duty" "${chd_args[@]}"
	TLS_PORT=$CC_PORT
	# first contacts at a time before the merge below (not weighed: no told window), then
	# each device's told window (this one when told to sample, else its next), then one
	# profile each sampled in it, as the agent labels it (duty_window): weighed 2 each
	up w-1 "x=1&created_at=2001-01-01T00:00:00" >/dev/null
	up w-2 "x=1&created_at=2001-01-01T00:00:00" >/dev/null
	told() { # DEVICE: the window it is told to sample in, from its schedule
		up "$1" "x=1&created_at=2001-01-01T00:00:01" | $PY -c '
import json, sys
s = json.load(sys.stdin)["body"]["schedule"]
print((s["window_start"] if s["sample"] else s["next_start"]) // s["window_s"])'
	}
	PY=/usr/bin/python3
	w1=$(told w-1) && w2=$(told w-2) || fail "no schedule"
	up w-1 "x=1,duty_window=$w1" >/dev/null
	up w-2 "x=1,duty_window=$w2" >"$T/w2"
	grep -q '"weight":2.000,' "$T/w2" || fail "weight 2 for 1 slot of 2: $(cat "$T/w2")"
	grep -q 'duty_window' "$T/w2" && fail "the duty_window label was stored: $(cat "$T/w2")"
	metric() { curl -sS --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
		"https://localhost:$CC_PORT/metrics" | awk -v m="edgeprof_collector_$1" '$1 == m {print $2}'; }
	drained() { # acknowledged once in the spool: in ClickHouse once nothing is pending
		for _ in $(seq 300); do
			[ "$(metric clickhouse_spool_pending_bytes)" = 0 ] && return 0
			sleep 0.1
		done
		fail "the spool did not drain"
	}
	merge_is() { # N WHAT: the merge of everything stored is N x the uploaded profile
		curl -gsS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
			-o "$T/m.pb.gz" \
			"https://localhost:$CC_PORT/api/0/profiles/merge?type=cpu&from=2020-01-01" ||
			fail "merge ($2)"
		"$PPROF_TOOL" flat "$T/b.pb.gz" |
			awk -v n="$1" '{printf "%.0f %.0f %s\n", n * $1, n * $2, $3}' >"$T/want"
		"$PPROF_TOOL" flat "$T/m.pb.gz" >"$T/got"
		cmp -s "$T/want" "$T/got" || { diff "$T/want" "$T/got" | head; fail "$2"; }
	}
	drained
	merge_is 4 "weighted merge"
	echo "weights: 2 devices, 1 slot: ClickHouse's merge of their 2 profiles is 4 x one (the fleet's total)"
	# uploads acknowledged from the spool while ClickHouse is down, and read back from it by
	# the collector started again after a kill -9, are weighed as they were: with two more
	# profiles (weight 2 each), the merge is 8 x one
	ch_kill 0
	up w-1 "x=1,duty_window=$w1" >/dev/null
	up w-2 "x=1,duty_window=$w2" >/dev/null
	kill -9 "$CC_PID"
	wait "$CC_PID" 2>/dev/null || true
	ch_start 0
	start_ch_collector chd2 "http://127.0.0.1:$(ch_http_port 0)/edgeprof_duty" "${chd_args[@]}"
	TLS_PORT=$CC_PORT
	drained
	merge_is 8 "weights of replayed uploads"
	echo "weights: 2 uploads read back from the spool after a kill -9: the merge is 8 x one"
fi
echo "collector-duty: ok"
