#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The ClickHouse backend's durable queue (--ch-spool), with a real clickhouse-server (Debian's
# 18.16) on loopback:
#  1. ClickHouse killed (kill -9) for 4 s and started again while 4 clients upload: uploads are still
#     acknowledged while it is down (from the spool; a 256 KiB memory queue makes most of them
#     spill and be read back), and once the spool drained every acknowledged upload is in
#     ClickHouse once, with all its sample rows.
#  2. kill -9 of the collector with acknowledged uploads only in its spool (ClickHouse down;
#     40 with an idempotency key, 5 without):
#     after both restart, every one of them is in ClickHouse once. Then the spool file as it was
#     before they were sent (what a kill -9 between an INSERT and its consume marker leaves) is
#     put back: the replay finds them in ClickHouse and stores none twice.
#     Before, with ClickHouse up and the queue full, uploads wait for room (back-pressure,
#     counted) instead of spilling.
#  3. A full spool refuses (503 saying so, with Retry-After, counted) and never overwrites what
#     ClickHouse has not got.
#  4. Without a spool, a queue that cannot take the upload answers 503 saying so, with
#     Retry-After.
# ~40 s.
. "$(dirname "$0")/../lib/collector-lib.sh"
. "$(dirname "$0")/../lib/clickhouse-lib.sh"
fail() { echo "FAIL: $*"; tail -n 15 "$T"/chs*.log; exit 1; }
[ -x "$LOAD" ] || { echo "collector-load not built (make all-tests)"; exit 77; }
ch_need --ch-spool

make_pki
"$PPROF_TOOL" encode "$T/p.pb.gz" 1400 130 16 >/dev/null 2>&1 || fail "pprof-tool encode"
"$PPROF_TOOL" vary "$T/p.pb.gz" "$T/v.pb.gz" 1 >/dev/null || fail "pprof-tool vary"
DB=edgeprof_spool
ch_start 0
URL=http://127.0.0.1:$(ch_http_port 0)/$DB

metric() { # NAME: the collector's metric (edgeprof_collector_NAME)
	curl -sS --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
		"https://localhost:$CC_PORT/metrics" | awk -v m="edgeprof_collector_$1" '$1 == m {print $2}'
}
drained() { # waits until the spool has nothing ClickHouse has not got
	for _ in $(seq 300); do
		[ "$(metric clickhouse_spool_pending_bytes)" = 0 ] && return 0
		sleep 0.1
	done
	fail "the spool did not drain: $(metric clickhouse_spool_pending_bytes) bytes pending"
}
load() { # ACKLOG PREFIX CLIENTS ARGS...: collector-load against the collector
	local ack=$1 prefix=$2 clients=$3
	shift 3
	"$LOAD" --url "https://localhost:$CC_PORT" --ca "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" \
		--key "$T/pki/dev-1.key" --file "$T/v.pb.gz" --clients "$clients" --prefix "$prefix" \
		--ack-log "$ack" "$@"
}
stored_once() { # ACKLOG WHAT: every id in ACKLOG is in ClickHouse once, with all its samples
	local ids n got rows
	ids=$(awk '{print $1}' "$1" | paste -sd, -)
	n=$(wc -l <"$1")
	got=$(ch_sql 0 "SELECT count(), uniqExact(id) FROM $DB.profiles WHERE id IN ($ids)")
	[ "$got" = "$n	$n" ] || fail "$2: $n acknowledged, ClickHouse has (rows, ids) $got"
	rows=$(ch_sql 0 "SELECT uniqExact(c), any(c), uniqExact(profile) FROM (SELECT profile, sum(length(stacks)) c FROM $DB.samples WHERE profile IN ($ids) GROUP BY profile)")
	[ "$rows" = "1	$want_rows	$n" ] ||
		fail "$2: sample rows per profile (kinds, rows, profiles) $rows, want 1, $want_rows, $n"
}

# 1. ClickHouse killed and down for 4 s under load.
start_ch_collector chs "$URL" --ch-spool "$T/spool" --ring-size 64M --ch-queue 256K \
	--ch-batch-ms 50
load "$T/ack1" ref 1 --count 1 >/dev/null || fail "first upload"
drained
want_rows=$(ch_sql 0 "SELECT sum(length(stacks)) FROM $DB.samples") # stacks of a profile
# ClickHouse up, uploads as fast as they are acknowledged: the queue fills, uploads wait
load "$T/ack1" bp 4 --seconds 3 >"$T/load0.log" 2>&1 || { cat "$T/load0.log"; fail "load"; }
s0=$(metric clickhouse_spool_spilled_total)
w0=$(metric clickhouse_waits_total)
[ "$s0" = 0 ] && [ "$w0" -gt 0 ] ||
	fail "ClickHouse up, the 256 KiB queue full: $s0 spilled, $w0 waited (want 0, > 0)"
echo "ClickHouse up, 4 clients for 3 s: $(wc -l <"$T/ack1") acknowledged, $w0 waited for room" \
	"($(metric clickhouse_wait_milliseconds_total) ms in all), none spilled"
load "$T/ack1" down 4 --seconds 10 --interval-ms 20 >"$T/load1.log" 2>&1 &
lpid=$!
sleep 2
ch_kill 0
a0=$(wc -l <"$T/ack1")
sleep 4
a1=$(wc -l <"$T/ack1")
pending=$(metric clickhouse_spool_pending_bytes)
ch_start 0
wait "$lpid" || { cat "$T/load1.log"; fail "load with ClickHouse down"; }
[ "$a1" -ge $((a0 + 20)) ] ||
	fail "only $((a1 - a0)) uploads acknowledged in the 4 s ClickHouse was down"
drained
stored_once "$T/ack1" "ClickHouse stopped and started under load"
spilled=$(metric clickhouse_spool_spilled_total)
replayed=$(metric clickhouse_spool_replayed_total)
[ "$spilled" -gt 0 ] && [ "$replayed" = "$spilled" ] ||
	fail "spilled $spilled, replayed $replayed (ClickHouse down must spill)"
echo "ClickHouse down 4 s under load: $((a1 - a0)) acknowledged meanwhile ($pending bytes in" \
	"the spool), $(wc -l <"$T/ack1") in all stored once; $spilled spilled and read back"

# 2. kill -9 of the collector with acknowledged uploads only in its spool.
ch_kill 0
load "$T/ack2" kill 2 --count 40 >/dev/null || fail "uploads with ClickHouse down"
for i in 1 2 3 4 5; do # without an idempotency key: found again by the id the spool keeps
	curl -sS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" --key "$T/pki/dev-1.key" \
		--data-binary @"$T/v.pb.gz" "https://localhost:$CC_PORT/api/0/profiles?service=bench&type=cpu" |
		grep -o '"id":"[0-9]*"' | tr -dc '0-9\n' >>"$T/ack2" || fail "upload without a key"
done
[ "$(wc -l <"$T/ack2")" = 45 ] || fail "45 uploads with ClickHouse down: $(wc -l <"$T/ack2") acknowledged"
cp "$T/spool" "$T/spool.before"
kill -9 "$CC_PID"
wait "$CC_PID" 2>/dev/null
ch_start 0
start_ch_collector chs2 "$URL" --ch-spool "$T/spool" --ch-queue 256K --ch-batch-ms 50
drained
stored_once "$T/ack2" "kill -9 of the collector, ClickHouse down"
grep -h 'not yet in ClickHouse' "$T/chs2.log" | head -n 1
kill -9 "$CC_PID"
wait "$CC_PID" 2>/dev/null
cp "$T/spool.before" "$T/spool"
start_ch_collector chs3 "$URL" --ch-spool "$T/spool" --ch-batch-ms 50
drained
stored_once "$T/ack2" "the spool replayed again"
stored_once "$T/ack1" "the spool replayed again"
echo "kill -9 of the collector: $(wc -l <"$T/ack2") acknowledged from the spool stored once," \
	"once more after the spool was put back as before they were sent"

# 3. A full spool refuses and keeps what it acknowledged.
start_ch_collector chs4 "$URL" --ch-spool "$T/spool.small" --ring-size 1M --ch-batch-ms 50
ch_kill 0
load "$T/ack3" full 1 --count 200 >"$T/load3.log" 2>&1
refused=$(metric clickhouse_spool_refused_total)
n3=$(wc -l <"$T/ack3")
[ "$refused" -ge 1 ] && [ "$n3" -ge 10 ] && [ "$n3" -lt 200 ] ||
	{ cat "$T/load3.log"; fail "1 MiB spool, ClickHouse down: $n3 of 200 acknowledged, $refused refused"; }
grep -q " 503 .*spool for ClickHouse is full.*retry later" "$T/load3.log" ||
	{ cat "$T/load3.log"; fail "the refusal is not a 503 that says the spool is full"; }
full503() { # WHAT: one more upload gets a 503 with Retry-After
	curl -sS -D "$T/h" -o "$T/b" --cacert "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" \
		--key "$T/pki/dev-1.key" --data-binary @"$T/v.pb.gz" \
		"https://localhost:$CC_PORT/api/0/profiles?service=bench&type=cpu" || fail "$1: curl"
	grep -q '^HTTP/1.1 503' "$T/h" && grep -qi '^Retry-After: [0-9]' "$T/h" ||
		{ cat "$T/h" "$T/b"; fail "$1: not a 503 with Retry-After"; }
	echo "$1: $(head -n 1 "$T/h" | tr -d '\r'), $(grep -i '^Retry-After' "$T/h" | tr -d '\r'): $(cat "$T/b")"
}
full503 "a full spool"
ch_start 0
drained
stored_once "$T/ack3" "a full spool"
echo "a full 1 MiB spool: $n3 acknowledged and stored, then refused with 503 ($refused counted)"

# 4. Without a spool, a queue smaller than an upload's rows cannot take it.
kill "$CC_PID"
wait "$CC_PID" 2>/dev/null
start_ch_collector chs5 "$URL" --ch-queue 4K --ch-batch-ms 50
full503 "a 4 KiB queue, no spool"
grep -q "queue to ClickHouse is full" "$T/b" || fail "the 503 does not say the queue is full"

# 5. Start while ClickHouse is down (issue 38): with --ch-spool the collector starts on the
#    spool, acknowledges within 2 s of its start, says so in its log and at /healthz, creates
#    the schema and sends what it acknowledged once ClickHouse answers. (Before: "connect to
#    ...: Connection refused", exit 1.) Without a spool it still refuses to start.
kill "$CC_PID"
wait "$CC_PID" 2>/dev/null
ch_sql 0 "DROP DATABASE IF EXISTS ${DB}_cold" >/dev/null
ch_kill 0
COLD=http://127.0.0.1:$(ch_http_port 0)/${DB}_cold
t0=$(date +%s%N)
start_ch_collector chs6 "$COLD" --ch-spool "$T/spool.cold" --ring-size 8M --ch-batch-ms 50
load "$T/ack5" cold 1 --count 1 >"$T/load5.log" 2>&1 || { cat "$T/load5.log"; fail "first upload"; }
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -le 2000 ] || fail "first acknowledgement $ms ms after the start (want <= 2000)"
load "$T/ack5" cold2 2 --count 20 >/dev/null || fail "uploads with ClickHouse down since the start"
grep -q "ClickHouse does not answer.*starting on the spool" "$T/chs6.log" ||
	fail "the log does not say it started on the spool"
health=$(curl -sS --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
	"https://localhost:$CC_PORT/healthz")
case $health in ok*"unreachable since the start"*"acknowledging into the spool"*) ;;
*) fail "/healthz does not say ClickHouse is down: $health" ;; esac
echo "ClickHouse down at start: first upload acknowledged $ms ms after the start;" \
	"/healthz: $(echo "$health" | tail -n 1)"
ch_start 0
drained
DB=${DB}_cold stored_once "$T/ack5" "started while ClickHouse was down"
grep -q "ClickHouse answers after .* schema ready" "$T/chs6.log" || fail "no 'schema ready' line"
health=$(curl -sS --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
	"https://localhost:$CC_PORT/healthz")
case $health in ok*"clickhouse: reachable"*) ;; *) fail "/healthz after: $health" ;; esac
echo "then ClickHouse started: $(wc -l <"$T/ack5") acknowledged while it was down, stored once"
kill "$CC_PID"
wait "$CC_PID" 2>/dev/null
ch_kill 0
timeout 10 "$COLLECTOR" --listen 127.0.0.1:0 --tls-ca "$T/pki/ca.crt" \
	--tls-cert "$T/pki/server.crt" --tls-key "$T/pki/server.key" --clickhouse "$COLD" \
	--debuginfo-dir "$T/nospool.dbg" >"$T/nospool.log" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "connect" "$T/nospool.log" ||
	fail "without ClickHouse and without a spool: exit $rc, $(cat "$T/nospool.log")"
echo "collector-ch-spool: ok"
