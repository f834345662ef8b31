#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Several collectors, one ClickHouse cluster: two clickhouse-server instances (Debian's 18.16)
# on loopback as the two shards of cluster "edgeprof" (remote_servers), two collectors with
# --ch-cluster edgeprof (Distributed tables over samples_local, profiles_local, ... on each
# shard) and --ch-spool, each talking to its own shard. Two loads (one per collector, 2 devices
# each, an upload every 20 ms per device) run for 14 s while collector A is killed with
# kill -9 (and started again on its spool 1 s later, a new load on it) and shard 1 is killed
# and restarted. Then every acknowledged upload is in the cluster once, with all its sample
# rows, both shards hold a part of them, and a fleet query through either collector merges all;
# each shard's rollup equals its raw rows in the hours not in rollup_dirty (8 profiles of an
# hour two days ago make one such hour) and the fleet merge from it equals the raw rows'.
# Last, retention: 40-day-old profiles of 8 series (on both shards), and a collector on shard 0
# with --retention-days 30 --ch-shard-urls drops their days on both shards, nothing newer. ~50 s.
. "$(dirname "$0")/../lib/collector-lib.sh"
. "$(dirname "$0")/../lib/clickhouse-lib.sh"
fail() { echo "FAIL: $*"; tail -n 8 "$T"/cc*.log; exit 1; }
[ -x "$LOAD" ] || { echo "collector-load not built (make all-tests)"; exit 77; }
ch_need --ch-cluster

make_pki
"$EP" certs device "$T/pki" dev-2 >/dev/null || fail "certs dev-2"
"$PPROF_TOOL" encode "$T/p.pb.gz" 1400 130 16 >/dev/null 2>&1 || fail "pprof-tool encode"
for i in 1 2; do "$PPROF_TOOL" vary "$T/p.pb.gz" "$T/v$i.pb.gz" "$i" >/dev/null || fail vary; done
DB=edgeprof_cluster
CH_EXTRA_CONFIG="<remote_servers><edgeprof>
  <shard><replica><host>127.0.0.1</host><port>$(($(ch_http_port 0) + 1))</port></replica></shard>
  <shard><replica><host>127.0.0.1</host><port>$(($(ch_http_port 1) + 1))</port></replica></shard>
</edgeprof></remote_servers>"
ch_start 0
ch_start 1
PORTS=()
PIDS=()
collector() { # N [log-name]: collector N on shard N, its spool kept across restarts
	start_ch_collector "${2:-cc$1}" "http://127.0.0.1:$(ch_http_port "$1")/$DB" \
		--ch-cluster edgeprof --ch-spool "$T/spool$1" --ring-size 64M --ch-batch-ms 100
	PORTS[$1]=$CC_PORT PIDS[$1]=$CC_PID
}
collector 0
collector 1
load() { # N DEVICE ACKLOG PREFIX SECONDS: uploads to collector N
	"$LOAD" --url "https://localhost:${PORTS[$1]}" --ca "$T/pki/ca.crt" --cert "$T/pki/$2.crt" \
		--key "$T/pki/$2.key" --file "$T/v$((${1} + 1)).pb.gz" --clients 2 --prefix "$4" \
		--seconds "$5" --interval-ms 20 --ack-log "$3" >>"$T/load$1.log" 2>&1
}
metric() { # N NAME
	curl -sS --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
		"https://localhost:${PORTS[$1]}/metrics" | awk -v m="edgeprof_collector_$2" '$1 == m {print $2}'
}

load 0 dev-1 "$T/ack0" a 4 &
l0=$!
load 1 dev-2 "$T/ack1" b 14 &
l1=$!
sleep 3
kill -9 "${PIDS[0]}"
wait "${PIDS[0]}" 2>/dev/null
a_before=$(wc -l <"$T/ack0")
wait "$l0"
sleep 1
collector 0 cc0b
load 0 dev-1 "$T/ack0" a2 9 &
l0=$!
sleep 2
ch_kill 1
sleep 2
ch_start 1
wait "$l0" "$l1"
n0=$(wc -l <"$T/ack0") n1=$(wc -l <"$T/ack1")
# (the point is what is kept, not the rate: low bars for a loaded CI machine)
[ "$a_before" -ge 10 ] && [ "$n0" -ge $((a_before + 30)) ] && [ "$n1" -ge 50 ] ||
	{ cat "$T"/load*.log; fail "too few uploads acknowledged: A $a_before before its kill, $n0 in all; B $n1"; }
cat "$T/ack0" "$T/ack1" >"$T/acked"
n=$(wc -l <"$T/acked")
for i in 0 1; do
	for _ in $(seq 300); do
		[ "$(metric "$i" clickhouse_spool_pending_bytes)" = 0 ] && break
		sleep 0.1
	done
done
ids=$(awk '{print $1}' "$T/acked" | paste -sd, -)
# the Distributed tables forward the other shard's rows in the background: wait for them
for _ in $(seq 300); do
	got=$(ch_sql 0 "SELECT count(), uniqExact(id) FROM $DB.profiles WHERE id IN ($ids)")
	[ "$got" = "$n	$n" ] && break
	sleep 0.1
done
[ "$got" = "$n	$n" ] || fail "$n acknowledged, the cluster has (rows, ids) $got"
want=$(ch_sql 0 "SELECT sum(length(stacks)) FROM $DB.samples WHERE profile = $(head -n 1 "$T/ack1" | cut -d' ' -f1)")
rows=$(ch_sql 0 "SELECT uniqExact(c), any(c), uniqExact(profile) FROM (SELECT profile, sum(length(stacks)) c FROM $DB.samples WHERE profile IN ($ids) GROUP BY profile)")
[ "$rows" = "1	$want	$n" ] ||
	fail "sample rows per profile (kinds, rows, profiles) $rows, want 1, $want, $n"
s0=$(ch_sql 0 "SELECT count() FROM $DB.profiles_local")
s1=$(ch_sql 1 "SELECT count() FROM $DB.profiles_local")
# (an upload in flight at the kill -9 may be stored without its answer: more, never twice)
dup=$(ch_sql 0 "SELECT count() - uniqExact(id) FROM $DB.profiles")
[ "$s0" -gt 0 ] && [ "$s1" -gt 0 ] && [ $((s0 + s1)) -ge "$n" ] && [ "$dup" = 0 ] ||
	fail "shards hold $s0 and $s1 profiles ($dup twice), $n acknowledged"
all=$((s0 + s1))
for i in 0 1; do
	curl -sS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
		-D "$T/m$i.h" -o "$T/m$i" \
		"https://localhost:${PORTS[$i]}/api/0/profiles/merge?type=cpu&from=2000-01-01" ||
		fail "merge through collector $i"
	m=$(grep -i '^x-edgeprof-profiles' "$T/m$i.h" | tr -dc 0-9)
	[ "$m" = "$all" ] || fail "a fleet merge through collector $i: $m profiles, $all stored"
done
# profiles of an hour two days ago, stored without a failure: an hour the rollup serves (the
# loads' hours are mostly dirty: collector A's restart marks the hours of what it replays)
ph=$(($(date +%s) / 3600 * 3600 - 48 * 3600))
for k in 0 1 2 3 4 5 6 7; do
	d=dev-$((k % 2 + 1))
	curl -sS --fail --max-time 60 --cacert "$T/pki/ca.crt" --cert "$T/pki/$d.crt" \
		--key "$T/pki/$d.key" --data-binary @"$T/v$((k % 2 + 1)).pb.gz" -o /dev/null \
		"https://localhost:${PORTS[1]}/api/0/profiles?service=gw&type=cpu&labels=region=p$k&created_at=$((ph + 60 + k))" ||
		fail "upload $k to an hour two days ago"
done
# (acknowledged once in the spool: wait for their profile rows, which go after the samples)
for _ in $(seq 300); do
	[ "$(ch_sql 0 "SELECT count() FROM $DB.profiles WHERE ts >= ${ph}000000000 AND ts < $((ph + 3600))000000000")" = 8 ] && break
	sleep 0.1
done
s0=$(ch_sql 0 "SELECT count() FROM $DB.profiles_local")
s1=$(ch_sql 1 "SELECT count() FROM $DB.profiles_local")
[ "$(ch_sql 0 "SELECT count() FROM $DB.rollup_dirty WHERE hour = $((ph / 3600))")" = 0 ] ||
	fail "the hour two days ago is marked dirty (no INSERT failed then)"
# the hourly rollup (a materialized view on each shard's samples_local) has every row, once, in
# every hour not in rollup_dirty (an INSERT into samples that failed, or uploads replayed at
# start, may leave rows the view never summed: merges read those hours raw)
hr="toUInt32(intDiv(ts, 3600000000000))"
clean="GLOBAL NOT IN (SELECT hour FROM $DB.rollup_dirty)"
for i in 0 1; do
	r=$(ch_sql "$i" "SELECT sum(v[1]), sum(v[2]), uniqExact($hr) FROM $DB.samples_local ARRAY JOIN v WHERE $hr $clean")
	u=$(ch_sql "$i" "SELECT sum(v0), sum(v1), uniqExact(hour) FROM $DB.samples_1h_local WHERE hour $clean")
	[ "$r" = "$u" ] || fail "shard $i: samples_1h_local sums $u, samples_local $r (hours not dirty)"
done
[ "$(ch_sql 0 "SELECT sum(v0) FROM $DB.samples_1h WHERE hour $clean")" = \
	"$(ch_sql 0 "SELECT sum(v[1]) FROM $DB.samples ARRAY JOIN v WHERE $hr $clean")" ] ||
	fail "the Distributed samples_1h does not sum to the samples (hours not dirty)"
dirty=$(ch_sql 0 "SELECT uniqExact(hour) FROM $DB.rollup_dirty")
hours=$(ch_sql 0 "SELECT uniqExact($hr) FROM $DB.samples")
c0=$(ch_sql 0 "SELECT uniqExact(hour) FROM $DB.samples_1h_local WHERE hour $clean")
c1=$(ch_sql 1 "SELECT uniqExact(hour) FROM $DB.samples_1h_local WHERE hour $clean")
[ "$c0" -gt 0 ] && [ "$c1" -gt 0 ] || fail "no hour not dirty on a shard to compare ($c0, $c1)"
get_flat() { # i: the fleet merge through collector i, as pprof-tool flat
	curl -sS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
		-o "$T/f$1.pb" "https://localhost:${PORTS[$1]}/api/0/profiles/merge?type=cpu&from=2000-01-01" &&
		"$PPROF_TOOL" flat "$T/f$1.pb"
}
get_flat 0 >"$T/flat0" || fail "merge through collector 0"
start_ch_collector ccraw "http://127.0.0.1:$(ch_http_port 0)/$DB" --ch-cluster edgeprof --rollup-seconds 0
PORTS[2]=$CC_PORT
get_flat 2 >"$T/flat2" || fail "merge through the raw collector"
cmp -s "$T/flat0" "$T/flat2" || { diff "$T/flat0" "$T/flat2" | head; fail "the rollup's fleet merge differs from the raw rows'"; }
# a selector's merge: its series go to the shards as an external table (sel_series), 4 of
# the 8 series of the hour two days ago (on both shards) and none of the loads'
sel='%7Bregion%3D~%22p%5B0-3%5D%22%7D'
for i in 0 2; do
	curl -gsS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
		-D "$T/s$i.h" -o "$T/s$i.pb" \
		"https://localhost:${PORTS[$i]}/api/0/profiles/merge?type=cpu&from=2000-01-01&query=$sel" ||
		fail "a selector's merge through collector $i"
	[ "$(grep -i '^x-edgeprof-profiles' "$T/s$i.h" | tr -dc 0-9)" = 4 ] ||
		fail "a selector's merge through collector $i: not the 4 profiles of p0-p3"
	"$PPROF_TOOL" flat "$T/s$i.pb" >"$T/sflat$i"
done
cmp -s "$T/sflat0" "$T/sflat2" || fail "the rollup's selector merge differs from the raw rows'"
[ "$(awk '{s += $1} END {print (s > 0)}' "$T/sflat0")" = 1 ] || fail "an empty selector merge"
echo "rollup: each shard's samples_1h_local sums to its samples_local in each hour not dirty" \
	"($dirty of $hours hours marked dirty: read raw; $c0 and $c1 hours compared);" \
	"the fleet merge (the rollup and dirty hours raw) equals the raw rows'"
echo "two collectors, two shards: $n acknowledged (A: $a_before before its kill -9, $n0 in all;" \
	"B: $n1, shard 1 restarted meanwhile), all stored once ($s0 + $s1 on the shards);" \
	"a fleet merge through either collector: $all profiles"
grep -h "clickhouse: INSERT" "$T"/cc*.log | head -n 2

# Retention on every shard: an ALTER reaches only the server it runs on, so the collector asks
# each server of the cluster (here on one host: their HTTP ports in --ch-shard-urls).
old=$(($(date +%s) - 40 * 86400))
for r in 1 2 3 4 5 6 7 8; do
	curl -sS --fail --max-time 60 --cacert "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" \
		--key "$T/pki/dev-1.key" --data-binary @"$T/v1.pb.gz" -o /dev/null \
		"https://localhost:${PORTS[1]}/api/0/profiles?service=gw&type=cpu&labels=region=r$r&created_at=$old" ||
		fail "old upload $r"
done
olds() { # N TABLE: rows of days older than 30 on shard N
	ch_sql "$1" "SELECT count() FROM $DB.${2}_local WHERE day < today() - 30"
}
for _ in $(seq 300); do
	[ $(($(olds 0 profiles) + $(olds 1 profiles))) = 8 ] && break
	sleep 0.1
done
o0=$(olds 0 profiles) o1=$(olds 1 profiles)
[ "$o0" -gt 0 ] && [ "$o1" -gt 0 ] && [ $((o0 + o1)) = 8 ] ||
	fail "the 8 old profiles are not on both shards: $o0 and $o1"
start_ch_collector ccr "http://127.0.0.1:$(ch_http_port 0)/$DB" --ch-cluster edgeprof \
	--retention-days 30 \
	--ch-shard-urls "http://127.0.0.1:$(ch_http_port 0),http://127.0.0.1:$(ch_http_port 1)"
for _ in $(seq 100); do
	[ "$(olds 0 profiles)$(olds 1 profiles)$(olds 0 samples)$(olds 1 samples)" = 0000 ] && break
	sleep 0.1
done
left="$(olds 0 profiles) $(olds 1 profiles) $(olds 0 samples) $(olds 1 samples)"
[ "$left" = "0 0 0 0" ] ||
	{ grep retention "$T/ccr.log"; fail "--retention-days 30 left old rows (profiles on shard 0, 1; samples on 0, 1): $left"; }
k0=$(ch_sql 0 "SELECT count() FROM $DB.profiles_local")
k1=$(ch_sql 1 "SELECT count() FROM $DB.profiles_local")
[ "$k0" = "$s0" ] && [ "$k1" = "$s1" ] || fail "retention dropped newer profiles: $k0 + $k1 left of $s0 + $s1"
# (it also read the cluster's 2 servers from system.clusters: a count that differs is a warning)
! grep 'warning: clickhouse: retention' "$T/ccr.log" || fail "retention warned"
echo "retention: 40-day-old days dropped on both shards ($o0 + $o1 profiles), $s0 + $s1 newer kept"
grep -h 'retention: dropped' "$T/ccr.log" | head -n 4
echo "collector-ch-cluster: ok"
