#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The ClickHouse backend's hourly rollup by group (samples_1g, summed by the collector at
# insert by service, type and labels but the device's and node's) against the raw rows and the
# ring file, with a real clickhouse-server (Debian's 18.16) on loopback: the same profiles (3
# devices, 2 versions, several per device and hour, over 5 hours) go into a ring collector and
# a ClickHouse collector; merges and folded flame graphs over whole hours (rollup only), ranges
# with edges mid-hour (rollup + raw edges), one partial hour (raw only) and selectors (of whole
# groups: rollup; of some devices of a group: raw) are the same from the ring, from the rollup
# and from a collector that reads raw rows only (--rollup-seconds 0), and the rollup collector
# counts the merges that read it. samples_1g holds, group by group, the raw rows summed by
# hour, series and stack (what --ch-cluster's view makes) summed over the group's devices. An
# INSERT into samples_1g that fails marks its hours dirty instead of sending them again. The
# database's group rule is the first collector's --ch-rollup-without, kept by the next ones.
# Retention drops the rollup's old days too. ~20 s.
. "$(dirname "$0")/../lib/collector-lib.sh"
. "$(dirname "$0")/../lib/clickhouse-lib.sh"
ch_need --clickhouse

make_pki
for d in dev-2 dev-3; do "$EP" certs device "$T/pki" "$d" >/dev/null || fail "certs $d"; done
make_bases 3
for i in $(seq 0 11); do
	"$PPROF_TOOL" vary "$T/base$((i % 3)).pb.gz" "$T/v$i.pb.gz" "$i" >/dev/null 2>&1 ||
		fail "pprof-tool vary"
done

ch_start 0
DB=edgeprof_rollup
CHURL=http://127.0.0.1:$(ch_http_port 0)/$DB
# SAMPLES: samples as rows of (profile, stack, v); SCOLS: its columns to copy
SAMPLES="$DB.samples ARRAY JOIN stacks AS stack, v" SCOLS="stacks, v"
ch_sql 0 "CREATE DATABASE $DB"
start_collector
start_ch_collector chr "$CHURL" --ch-batch-ms 20 --ch-rollup-without node,rack
ROLL=$CC_PORT
layout=$(ch_sql 0 "SELECT groupArray(name) FROM system.columns WHERE database = '$DB' AND table = 'samples' AND name IN ('stack', 'stacks')")
[ "$layout" = "['stacks']" ] || fail "a new database's samples is not a row per profile: $layout"
start_ch_collector chw "$CHURL" --ch-batch-ms 20 --rollup-seconds 0
RAW=$CC_PORT

H=3600
base=$(( $(date +%s) / H * H - 8 * H )) # 8 whole hours ago
upload() { # port device file key labels time
	curl -sS --fail --max-time 60 --cacert "$T/pki/ca.crt" --cert "$T/pki/$2.crt" \
		--key "$T/pki/$2.key" --data-binary @"$3" -H "X-Edgeprof-Key: $4" \
		"https://localhost:$1/api/0/profiles?service=gw&type=cpu&labels=$5&created_at=$6" \
		>/dev/null || fail "upload $4 to port $1"
}
# profiles i = 0..n-1 from hour h0 on: every 600 s (6 per hour), devices in turn (each device,
# one version, has two profiles in an hour: the rollup sums them), to the ring and to port
load() { # port first-i n h0
	local i t dev labels
	for i in $(seq "$2" $(($2 + $3 - 1))); do
		t=$((base + $4 * H + 600 * (i - $2) + i % 7))
		dev=dev-$((i % 3 + 1)) labels="version=1.$((i % 3 % 2)),region=eu,node=n$((i % 3 + 1))"
		upload "$TLS_PORT" "$dev" "$T/v$((i % 12)).pb.gz" "k$i" "$labels" "$t" &
		upload "$1" "$dev" "$T/v$((i % 12)).pb.gz" "k$i" "$labels" "$t"
		wait $! || fail "upload k$i to the ring"
	done
}
load "$ROLL" 0 30 0 # hours 0-4

get() { # port path-and-query out
	curl -gsS --fail --max-time 60 --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" \
		--key "$T/pki/op.key" -D "$3.h" -o "$3" "https://localhost:$1$2" ||
		fail "GET $2 from port $1"
}
enc() { printf '%s' "$1" | sed 's/{/%7B/g; s/}/%7D/g; s/"/%22/g; s/=/%3D/g; s/~/%7E/g; s/,/%2C/g'; }
hours() { # port: rollups_read_total (merges that read a rollup)
	get "$1" /metrics "$T/metrics"
	sed -n 's/^edgeprof_collector_rollups_read_total \([0-9]*\)$/\1/p' "$T/metrics"
}
# same PORT... QS: the merge (go tool pprof's flat/cum per function via pprof-tool) and the
# folded flame graph of every port equal the ring's
same() {
	local qs=${*: -1} p n
	get "$TLS_PORT" "/api/0/profiles/merge?$qs" "$T/m.ring"
	"$PPROF_TOOL" flat "$T/m.ring" >"$T/f.ring" || fail "pprof-tool flat (ring)"
	[ -s "$T/f.ring" ] || fail "empty merge for $qs"
	get "$TLS_PORT" "/api/0/render?format=folded&$qs" "$T/r.ring"
	sort "$T/r.ring" >"$T/r.ring.s"
	n=$(grep -i '^x-edgeprof-profiles' "$T/m.ring.h" | tr -dc 0-9)
	for p in "${@:1:$#-1}"; do
		get "$p" "/api/0/profiles/merge?$qs" "$T/m.ch"
		"$PPROF_TOOL" flat "$T/m.ch" >"$T/f.ch" || fail "pprof-tool flat (port $p)"
		cmp -s "$T/f.ring" "$T/f.ch" || { diff "$T/f.ring" "$T/f.ch" | head; fail "merge $qs differs on port $p"; }
		[ "$(grep -i '^x-edgeprof-profiles' "$T/m.ch.h" | tr -dc 0-9)" = "$n" ] ||
			fail "merge $qs: not the ring's $n profiles on port $p"
		get "$p" "/api/0/render?format=folded&$qs" "$T/r.ch"
		sort "$T/r.ch" | cmp -s "$T/r.ring.s" - || fail "folded $qs differs on port $p"
	done
	echo "  $qs: $n profiles, $(wc -l <"$T/f.ring") functions, $(wc -l <"$T/r.ring") stacks: same"
}

ch_sql 0 "OPTIMIZE TABLE $DB.samples_1g FINAL" # merged: what a day of merges makes
rows=$(ch_sql 0 "SELECT count() FROM $DB.samples_1g")
raw=$(ch_sql 0 "SELECT count() FROM $SAMPLES")
[ "$rows" -gt 0 ] && [ "$rows" -lt "$raw" ] || fail "samples_1g holds $rows rows for $raw raw rows"
sums=$(ch_sql 0 "SELECT sum(v0), sum(v1) FROM $DB.samples_1g")
[ "$sums" = "$(ch_sql 0 "SELECT sum(v[1]), sum(v[2]) FROM $SAMPLES")" ] ||
	fail "samples_1g sums $sums, the raw rows $(ch_sql 0 "SELECT sum(v[1]), sum(v[2]) FROM $SAMPLES")"
[ "$(ch_sql 0 "EXISTS TABLE $DB.samples_1h")" = 0 ] || fail "samples_1h made on one server"
[ "$(ch_sql 0 "SELECT uniqExact(grp) FROM $DB.samples_1g")" = 2 ] ||
	fail "samples_1g: $(ch_sql 0 "SELECT uniqExact(grp) FROM $DB.samples_1g") groups, not the 2 versions of 3 devices"
[ "$(ch_sql 0 "SELECT without FROM $DB.samples_1g_rule")" = "node,rack" ] ||
	fail "the database's group rule: $(ch_sql 0 "SELECT without FROM $DB.samples_1g_rule")"
grep -q "hourly rollup by group (samples_1g) created" "$T/chr.log" || fail "no log line for samples_1g created"
# group by group the rows by series, hour and stack, summed over each group's devices (the
# group: the profile's service, type and labels but node; SummingMergeTree's merges drop a key
# whose sums are all 0)
nz="HAVING s0 != 0 OR s1 != 0 OR s2 != 0 OR s3 != 0 ORDER BY g, day, h, sig, stack"
ch_sql 0 "SELECT g, day, toUInt32(intDiv(ts, 3600000000000)) AS h, sig, stack, sum(v[1]) AS s0, sum(v[2]) AS s1, sum(v[3]) AS s2, sum(v[4]) AS s3 FROM $SAMPLES ANY INNER JOIN (SELECT id AS profile, concat(service, '/', type, '/', arrayStringConcat(arrayFilter((v, k) -> k != 'node', label_values, label_keys), ',')) AS g FROM $DB.profiles) USING profile WHERE length(v) <= 4 GROUP BY g, day, h, sig, stack $nz" | cut -f2- >"$T/view.rows"
ch_sql 0 "SELECT grp AS g, day, hour AS h, sig, stack, sum(v0) AS s0, sum(v1) AS s1, sum(v2) AS s2, sum(v3) AS s3 FROM $DB.samples_1g GROUP BY g, day, h, sig, stack $nz" | cut -f2- >"$T/roll.rows"
sort -o "$T/view.rows" "$T/view.rows"
sort -o "$T/roll.rows" "$T/roll.rows"
[ -s "$T/roll.rows" ] && cmp -s "$T/view.rows" "$T/roll.rows" ||
	{ diff "$T/view.rows" "$T/roll.rows" | head; fail "samples_1g is not the raw rows summed by group"; }
echo "rollup: $rows rows for $raw raw sample rows, the same sums; group by group the raw rows'"
# same_reads N PORT... QS: same, and the first port's merge and flame graph read the rollup
# N times (2: both; 0: raw rows only)
same_reads() {
	local want=$1 r0
	shift
	r0=$(hours "$1")
	same "$@"
	[ "$(($(hours "$1") - r0))" = "$want" ] ||
		fail "${*: -1}: $(($(hours "$1") - r0)) reads of the rollup, want $want"
}
echo "fresh database:"
same_reads 2 "$ROLL" "$RAW" "type=cpu&from=$base&to=$((base + 5 * H - 1))"           # 5 whole hours
same_reads 2 "$ROLL" "$RAW" "type=cpu&from=$((base + 1000))&to=$((base + 3 * H + 1700))" # edges mid-hour
same_reads 0 "$ROLL" "$RAW" "type=cpu&from=$((base + H + 100))&to=$((base + 2 * H - 100))" # no whole hour
same_reads 2 "$ROLL" "$RAW" "type=cpu&from=$((base + 1))&query=$(enc 'gw{version="1.1"}')" # to now
# devices 1 and 3 are all of version 1.0: whole groups; devices 1 and 2, or node n1, are not
same_reads 2 "$ROLL" "$RAW" "type=cpu&from=$base&to=$((base + 4 * H))&query=$(enc '{device=~"dev-[13]"}')"
same_reads 0 "$ROLL" "$RAW" "type=cpu&from=$base&to=$((base + 4 * H))&query=$(enc '{device=~"dev-[12]"}')"
same_reads 0 "$ROLL" "$RAW" "type=cpu&from=$base&to=$((base + 4 * H))&query=$(enc '{node="n1"}')"
[ "$(hours "$RAW")" = 0 ] || fail "--rollup-seconds 0 read the rollup"
echo "rollup collector: merges of whole groups read samples_1g, of part of a group raw rows; --rollup-seconds 0: none"

# A lost rollup insert (a server dying between a batch's INSERT into samples and the one into
# samples_1g): rows in samples that samples_1g lacks (written here by hand). Once their hour is
# in rollup_dirty (what the collector writes when either INSERT fails), merges read that hour
# raw: the raw rows' answer.
dh=$((base - 24 * H))
upload "$ROLL" dev-1 "$T/v0.pb.gz" kdirty region=eu $((dh + 60))
ch_sql 0 "INSERT INTO $DB.samples (day, ts, series, sig, profile, $SCOLS) SELECT day, ts, series, sig, profile + 1, $SCOLS FROM $DB.samples WHERE ts >= ${dh}000000000 AND ts < $((dh + H))000000000"
flat2() { # qs: the merges of the rollup and the raw collector, flat
	get "$ROLL" "/api/0/profiles/merge?$1" "$T/d.roll"
	get "$RAW" "/api/0/profiles/merge?$1" "$T/d.raw"
	"$PPROF_TOOL" flat "$T/d.roll" >"$T/d.roll.f" && "$PPROF_TOOL" flat "$T/d.raw" >"$T/d.raw.f" ||
		fail "pprof-tool flat"
}
flat2 "type=cpu&from=$dh&to=$((dh + H))"
cmp -s "$T/d.roll.f" "$T/d.raw.f" && fail "a view insert lost: the rollup's merge still equals the raw rows'"
ch_sql 0 "INSERT INTO $DB.rollup_dirty VALUES ('$(date -u -d "@$dh" +%F)', $((dh / H)))"
h0=$(hours "$ROLL")
flat2 "type=cpu&from=$dh&to=$((dh + H))"
cmp -s "$T/d.roll.f" "$T/d.raw.f" || { diff "$T/d.roll.f" "$T/d.raw.f" | head; fail "a dirty hour's merge differs from the raw rows'"; }
[ "$(($(hours "$ROLL") - h0))" = 1 ] || fail "the merge over a dirty hour did not go through the rollup path"
echo "a lost rollup insert: the rollup's merge differs from the raw rows'; its hour marked dirty: the same"

# Labels a device chooses (its group is hashed from them at ingest and again, from the stored
# strings, at query time): bytes that are not UTF-8, a long value, 62 labels. dev-2 and dev-3
# with the same labels are one group; dev-1 another: a merge of the first group reads the rollup
# and equals the raw rows'.
oh=$((base - 96 * H))
many=$(for i in $(seq 0 59); do printf ',l%d=%d' "$i" "$i"; done)
odd="w=%FF%FEx%C3,long=$(printf 'v%.0s' $(seq 200))$many"
upload "$ROLL" dev-2 "$T/v1.pb.gz" kodd2 "odd=x,$odd" $((oh + 60))
upload "$ROLL" dev-3 "$T/v2.pb.gz" kodd3 "odd=x,$odd" $((oh + 120))
upload "$ROLL" dev-1 "$T/v3.pb.gz" kodd1 "odd=y,$odd" $((oh + 180))
r0=$(hours "$ROLL")
flat2 "type=cpu&from=$oh&to=$((oh + H))&query=$(enc '{odd="x"}')"
cmp -s "$T/d.roll.f" "$T/d.raw.f" || { diff "$T/d.roll.f" "$T/d.raw.f" | head; fail "odd labels: the rollup's merge differs from the raw rows'"; }
[ "$(($(hours "$ROLL") - r0))" = 1 ] || fail "odd labels: the merge of a whole group did not read the rollup"
get "$ROLL" "/api/0/profiles/merge?type=cpu&from=$oh&to=$((oh + H))&query=$(enc '{odd="x"}')" "$T/d.n"
[ "$(grep -i '^x-edgeprof-profiles' "$T/d.n.h" | tr -dc 0-9)" = 2 ] || fail "odd labels: not the 2 profiles of odd=x"
echo "labels that are not UTF-8, long, 62 of them: the group hashed alike at ingest and query"

# A collector killed between a batch's INSERT into samples and its rollup rows: its intent in
# rollup_pending (sign 1) with no done row (sign -1). Every batch sent so far has both; rows in
# samples that samples_1g lacks (by hand, as above) are read raw once such an intent names
# their hour.
[ "$(ch_sql 0 "SELECT count() FROM $DB.rollup_pending")" -gt 0 ] || fail "no intent in rollup_pending"
[ "$(ch_sql 0 "SELECT count() FROM (SELECT hour, batch FROM $DB.rollup_pending GROUP BY hour, batch HAVING sum(sign) > 0)")" = 0 ] ||
	fail "a batch sent in full left an intent without its done row"
kh=$((base - 72 * H))
upload "$ROLL" dev-3 "$T/v2.pb.gz" kkill region=eu $((kh + 60))
ch_sql 0 "INSERT INTO $DB.samples (day, ts, series, sig, profile, $SCOLS) SELECT day, ts, series, sig, profile + 1, $SCOLS FROM $DB.samples WHERE ts >= ${kh}000000000 AND ts < $((kh + H))000000000"
flat2 "type=cpu&from=$kh&to=$((kh + H))"
cmp -s "$T/d.roll.f" "$T/d.raw.f" && fail "a killed collector's rows: the rollup's merge still equals the raw rows'"
ch_sql 0 "INSERT INTO $DB.rollup_pending (day, hour, batch, sign) VALUES ('$(date -u -d "@$kh" +%F)', $((kh / H)), 12345, 1)"
flat2 "type=cpu&from=$kh&to=$((kh + H))"
cmp -s "$T/d.roll.f" "$T/d.raw.f" || { diff "$T/d.roll.f" "$T/d.raw.f" | head; fail "an hour with a pending batch: the merge differs from the raw rows'"; }
echo "a collector killed between samples and rollup: the merge differs; its intent pending: the raw rows'"

# An INSERT into samples_1g that fails (the table renamed away): the upload is stored all the
# same, its hour marked dirty (not its rows sent again: a failed INSERT may have been applied)
fh=$((base - 48 * H))
ch_sql 0 "RENAME TABLE $DB.samples_1g TO $DB.samples_1g_away"
upload "$ROLL" dev-2 "$T/v1.pb.gz" kfail region=eu $((fh + 60))
ch_sql 0 "RENAME TABLE $DB.samples_1g_away TO $DB.samples_1g"
[ "$(ch_sql 0 "SELECT count() FROM $DB.rollup_dirty WHERE hour = $((fh / H))")" = 1 ] ||
	fail "a failed INSERT into samples_1g did not mark its hour"
grep -q 'INSERT INTO samples_1g .*marked dirty' "$T/chr.log" ||
	fail "no log line for the failed INSERT into samples_1g"
grep -q 'marked in rollup_dirty (its samples_1g rows failed)' "$T/chr.log" ||
	fail "the mark's log line does not say it was samples_1g that failed"
get "$ROLL" /metrics "$T/metrics"
grep -qx 'edgeprof_collector_clickhouse_rollup_failures_total 1' "$T/metrics" ||
	fail "clickhouse_rollup_failures_total is not 1: $(grep rollup_failures "$T/metrics")"
[ "$(ch_sql 0 "SELECT count() FROM $DB.samples_1g WHERE hour = $((fh / H))")" = 0 ] ||
	fail "the failed rollup rows were sent again"
flat2 "type=cpu&from=$fh&to=$((fh + H))"
cmp -s "$T/d.roll.f" "$T/d.raw.f" || fail "the marked hour's merge differs from the raw rows'"
echo "a failed INSERT into samples_1g: its hour marked dirty, not sent again; the merge is the raw rows'"

# The database's group rule is the first collector's; a list that is not label names is
# refused at start, before the database is touched; a second collector with another list
# keeps to the database's rule, and makes the same groups.
for bad in "node'x" "a b" "$(printf 'n%.0s' $(seq 300))"; do
	if "$COLLECTOR" --listen 127.0.0.1:0 --tls-ca "$T/pki/ca.crt" --tls-cert "$T/pki/server.crt" \
		--tls-key "$T/pki/server.key" --clickhouse "$CHURL" --debuginfo-dir "$T/bad.dbg" \
		--ch-rollup-without "$bad" >"$T/bad.log" 2>&1; then
		fail "--ch-rollup-without '${bad:0:20}' accepted"
	fi
	grep -q -- "--ch-rollup-without .*label names" "$T/bad.log" || { cat "$T/bad.log"; fail "no clear error for '${bad:0:20}'"; }
done
[ "$(ch_sql 0 "SELECT count() FROM $DB.samples_1g_rule")" = 1 ] || fail "a refused list reached samples_1g_rule"
start_ch_collector chv "$CHURL" --ch-batch-ms 20 --ch-rollup-without host
NEW=$CC_PORT
grep -q "rollup groups leave out the labels 'node,rack' (the database's rule" "$T/chv.log" ||
	fail "a second collector with another --ch-rollup-without did not keep to the database's rule"
load "$NEW" 30 12 5 # hours 5-6, by the second collector: the same groups
g7="SELECT uniqExact(grp) FROM $DB.samples_1g WHERE hour >= $((base / H)) AND hour < $((base / H + 7))"
[ "$(ch_sql 0 "$g7")" = 2 ] || fail "two collectors made $(ch_sql 0 "$g7") groups of 2 versions"
echo "a second collector (its own --ch-rollup-without, the database's rule kept):"
same_reads 2 "$NEW" "$RAW" "type=cpu&from=$base&to=$((base + 7 * H - 1))"
same_reads 2 "$NEW" "$RAW" "type=cpu&from=$((base + 4 * H + 10))&to=$((base + 6 * H + 10))&query=$(enc 'gw{version="1.0"}')"

# Retention drops the rollup's old days with the samples'.
upload "$NEW" dev-1 "$T/v0.pb.gz" kold region=eu $((base - 40 * 86400))
[ "$(ch_sql 0 "SELECT count() FROM $DB.samples_1g WHERE day < today() - 30")" -gt 0 ] ||
	fail "the old profile is not in samples_1g"
start_ch_collector chx "$CHURL" --retention-days 30
for _ in $(seq 100); do
	[ "$(ch_sql 0 "SELECT count() FROM $DB.samples_1g WHERE day < today() - 30")" = 0 ] && break
	sleep 0.1
done
[ "$(ch_sql 0 "SELECT count() FROM $DB.samples_1g WHERE day < today() - 30")" = 0 ] ||
	fail "--retention-days 30 kept the rollup's old day"
grep 'retention: dropped samples_1g ' "$T/chx.log" || { cat "$T/chx.log"; fail "no retention line for samples_1g"; }
echo "collector-ch-rollup: ok"
