#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fleet regression detection on the ClickHouse store (issue 39) against the ring: the same
# simulated staged roll-out (tests/drivers/regress-fleet: 120 devices, 25 % on 1.5,
# crc32_update 20 % slower, tls_renegotiate new at 1 %, 2 profiles a device) stored in a ring
# and, through the store front, in a real clickhouse-server (Debian's 18.16, loopback, data in
# $T). Compared in-process (the handler's code):
#   - ClickHouse's sums by device and stack (store__sum_by_device: the side's stacks in one
#     profile, each device's rows of them) give exactly the ring's
#     findings, every test (--all: verdicts, shares, p-values, U to the last digit, the stacks
#     that changed), and the same per-device shares;
#   - the same holds for ClickHouse read profile by profile (--per-profile, the old path);
#   - under a query memory budget (--query-mem, as the collector's) the same answer, every
#     byte charged given back; half of the peak charged refuses it with a clear error;
#   - the comparison can fail: a fleet with another seed in ClickHouse differs from the ring;
#   - duty weights: each device's second profile is a duty-cycled upload of weight 3
#     (--weight), weighed at ingest in ClickHouse, kept beside the bytes in the ring and weighed
#     when read: a device's shares are of weighted values on both (equal to the last digit);
#     the ring without the weights differs;
#   - a time range that holds nothing is an error on both;
#   - the per-device daily rollup (samples_1d): the fleet is stored yesterday, marked served
#     from yesterday on (samples_1d_since, as a backfill would), so the default range reads
#     yesterday from it and the raw rows around it, and the whole of yesterday from it alone:
#     both equal to the ring; a row added to samples_1d changes the answer (it is read), and
#     yesterday marked dirty (rollup_dirty) is read raw again, equal to the ring;
#   - --ch-backfill-days: the fleet stored two days ago, its samples_1d day dropped (stored
#     before the table existed) and half refilled (what a backfill cut short leaves): read raw,
#     equal to the ring; a collector with --ch-backfill-days 3, killed with kill -9 while its
#     statement runs (5 M rows three days ago, of series no comparison reads), then
#     started again beside a second collector backfilling the same database: the three ended
#     days served (samples_1d_since), that day summed once,
#     the fleet's day equal to the ring from the rollup, and a grown samples_1d row moves it;
#   - --ch-cluster: a second clickhouse-server, the two as the shards of cluster "edgeprof"
#     (a collector on each creates its tables, the fleet stored through the Distributed
#     tables): each shard's samples_1d_local (a materialized view) sums to its raw rows;
#     yesterday served on one shard only is read raw; served on both (the latest of the
#     shards' samples_1d_since), read from the rollup: equal to the ring, and a grown row on
#     shard 1 moves it; a dirty hour reads the day raw again; then a backfill on each shard
#     (a collector with --ch-backfill-days on each) serves the day before, equal to the ring.
. "$(dirname "$0")/../lib/collector-lib.sh"
. "$(dirname "$0")/../lib/clickhouse-lib.sh"
FLEET=$EP_BUILD/tests/drivers/regress-fleet
[ -x "$FLEET" ] || { echo "regress-fleet not built"; exit 77; }
ch_need --clickhouse

CH_EXTRA_CONFIG="<remote_servers><edgeprof>
  <shard><replica><host>127.0.0.1</host><port>$(($(ch_http_port 0) + 1))</port></replica></shard>
  <shard><replica><host>127.0.0.1</host><port>$(($(ch_http_port 1) + 1))</port></replica></shard>
</edgeprof></remote_servers>"
ch_start 0
CH=http://127.0.0.1:$(ch_http_port 0)
BASE='fw{version="1.4"}'
CAND='fw{version="1.5"}'
Y0=$(( ($(date +%s) / 86400 - 1) * 86400 )) # yesterday, 00:00 UTC
YDAY=$(date -u -d "@$Y0" +%F)
plain=(--devices 120 --cand-frac 0.25 --noise 0.05 --samples 3000 --profiles 2
       --effect crc32_update=1.2 --new tls_renegotiate=0.01 --time-s $((Y0 + 3600)))
opts=("${plain[@]}" --weight 3)
"$FLEET" fill "$T/ring" --ring-mb 32 --seed 39 "${opts[@]}" || fail "regress-fleet fill (ring)"
"$FLEET" fill "$T/ring1" --ring-mb 32 --seed 39 "${plain[@]}" || fail "regress-fleet fill (ring, no weights)"
"$FLEET" fill "$CH/regress_a" --seed 39 "${opts[@]}" || fail "regress-fleet fill (clickhouse)"
"$FLEET" fill "$CH/regress_b" --seed 40 "${opts[@]}" || fail "regress-fleet fill (clickhouse, seed 40)"
[ "$(ch_sql 0 'SELECT count() FROM regress_a.profiles')" = 240 ] || fail "not 240 profiles in ClickHouse"
[ "$(ch_sql 0 'SELECT count() FROM regress_a.samples_1d')" -gt 0 ] || fail "samples_1d is empty"
[ "$(ch_sql 0 'SELECT min(day) > today() FROM regress_a.samples_1d_since')" = 1 ] ||
	fail "a new samples_1d serves days before tomorrow"
ch_sql 0 "INSERT INTO regress_a.samples_1d_since VALUES ('$YDAY')" # filled whole: a new database

cmp_run() { # STORE OUT [flags]: every test and every share, without the timing
	local where=$1 out=$2
	shift 2
	"$FLEET" compare "$where" "$BASE" "$CAND" --all --chains --shares "$out.shares" "$@" >"$out.all" ||
		fail "regress-fleet compare $where $*"
	sed -i 's/ seconds=.*//' "$out.all"
	sort -o "$out.shares" "$out.shares"
}
cmp_run "$T/ring" "$T/ring"
cmp_run "$CH/regress_a" "$T/ch"
cmp_run "$CH/regress_a" "$T/chp" --per-profile
grep -q '^regression self crc32_update ' "$T/ring.all" || fail "the ring does not find crc32_update"
grep -A1 '^regression self crc32_update ' "$T/ring.all" | grep -q '^  stack main>storage_task ' ||
	fail "no stack for crc32_update"
grep -q '^new self tls_renegotiate ' "$T/ring.all" || fail "the ring does not find tls_renegotiate"
tests=$(sed -n 's/.* tests=\([0-9]*\).*/\1/p' "$T/ring.all")
[ "${tests:-0}" -ge 40 ] || fail "only ${tests:-0} tests"
diff "$T/ring.all" "$T/ch.all" >"$T/d1" || { grep '^>' "$T/d1" | head -3; tail -n 1 "$T/ring.all" "$T/ch.all"; fail "ClickHouse by device differs from the ring"; }
diff "$T/ring.shares" "$T/ch.shares" >/dev/null || fail "ClickHouse's per-device shares differ"
diff "$T/ring.all" "$T/chp.all" >/dev/null || fail "ClickHouse profile by profile differs from the ring"
echo "ring = ClickHouse by device = ClickHouse profile by profile: $tests tests," \
	"$(grep -vc '^\(none\|devices_base=\|  stack\)' "$T/ring.all") findings"
# the query's memory: a side's sums, stacks and rows charged to its budget, all given back, the
# same answer under it; a budget of half that peak refuses the comparison with a clear error
"$FLEET" compare "$CH/regress_a" "$BASE" "$CAND" --all --chains --query-mem 268435456 \
	>"$T/chm.all" 2>"$T/chm.err" || fail "compare under a 256 MiB budget: $(cat "$T/chm.err")"
sed -i 's/ seconds=.*//' "$T/chm.all"
diff "$T/ch.all" "$T/chm.all" >/dev/null || fail "the answer under a budget differs"
peak=$(sed -n 's/^query_mem_peak=//p' "$T/chm.err")
[ "${peak:-0}" -gt 10000 ] || fail "a comparison's sums charged only ${peak:-0} bytes"
"$FLEET" compare "$CH/regress_a" "$BASE" "$CAND" --query-mem $((peak / 2)) >/dev/null \
	2>"$T/chm2.err" && fail "half the peak's budget ($((peak / 2)) bytes) was enough"
grep -q 'needs more than' "$T/chm2.err" || fail "no budget error: $(cat "$T/chm2.err")"
echo "query memory: peak $peak bytes charged, all given back; half of it refused"

whole=(--from-s "$Y0" --to-s $((Y0 + 86400))) # ts <= to: the next day's first instant, raw
cmp_run "$T/ring" "$T/ringd" "${whole[@]}"
cmp_run "$CH/regress_a" "$T/chd" "${whole[@]}"
diff "$T/ringd.all" "$T/chd.all" >/dev/null || fail "ClickHouse from samples_1d (yesterday) differs from the ring"
diff "$T/ring.all" "$T/ringd.all" >/dev/null || fail "yesterday alone differs from the whole range on the ring"
# a (device, stack) sum of yesterday grown in samples_1d: read, the answer moves
ch_sql 0 "INSERT INTO regress_a.samples_1d SELECT day, series, sig, stack, v0 * 50, v1 * 50, v2 * 50, v3 * 50 FROM regress_a.samples_1d WHERE series = (SELECT any(series) FROM regress_a.profiles WHERE has(label_values, '1.5')) LIMIT 20"
cmp_run "$CH/regress_a" "$T/cht" "${whole[@]}"
diff -q "$T/ringd.all" "$T/cht.all" >/dev/null && fail "a grown samples_1d row changed nothing: the rollup is not read"
cmp_run "$CH/regress_a" "$T/chtd"
diff -q "$T/ring.all" "$T/chtd.all" >/dev/null && fail "the default range does not read samples_1d"
# yesterday marked dirty: read raw, the ring's answer again
ch_sql 0 "INSERT INTO regress_a.rollup_dirty VALUES ('$YDAY', $((Y0 / 3600 + 5)))"
cmp_run "$CH/regress_a" "$T/chr" "${whole[@]}"
diff "$T/ringd.all" "$T/chr.all" >/dev/null || fail "a dirty day is not read raw"
echo "samples_1d: yesterday from the rollup = the ring; a grown rollup row moves it; a dirty day read raw"

cmp_run "$CH/regress_b" "$T/other"
diff -q "$T/ring.all" "$T/other.all" >/dev/null && fail "another fleet compares equal: the check cannot fail"
cmp_run "$T/ring1" "$T/ring1"
diff -q "$T/ring.all" "$T/ring1.all" >/dev/null && fail "the weights change nothing: the check cannot fail"
echo "duty weights: ring (weighed when read) = ClickHouse (weighed at ingest); unweighed differs"

old=$(($(date +%s) - 86400 * 3))
for where in "$T/ring" "$CH/regress_a"; do
	"$FLEET" compare "$where" "$BASE" "$CAND" --from-s "$old" --to-s $((old + 60)) \
		>"$T/empty" 2>"$T/empty.err" && fail "an empty range compared ($where)"
	grep -q 'no profiles match\|regress-fleet' "$T/empty.err" || fail "no error for an empty range ($where)"
done
# --ch-backfill-days: the same fleet two days ago, in a database whose samples_1d lacks that
# day (stored before the table existed) but for a part of it (a backfill cut short)
D2=$((Y0 - 86400))
D2DAY=$(date -u -d "@$D2" +%F)
"$FLEET" fill "$CH/regress_d" --seed 39 "${opts[@]}" --time-s $((D2 + 3600)) || fail "regress-fleet fill (two days ago)"
ch_sql 0 "ALTER TABLE regress_d.samples_1d DROP PARTITION ID '${D2DAY//-/}'"
ch_sql 0 "INSERT INTO regress_d.samples_1d SELECT day, series, sig, stack, sum(v[1]), sum(v[2]), sum(v[3]), sum(v[4]) FROM regress_d.samples ARRAY JOIN stacks AS stack, v WHERE day = '$D2DAY' AND series IN (SELECT series FROM regress_d.profiles WHERE has(label_values, '1.5') LIMIT 20) GROUP BY day, series, sig, stack"
d2=(--from-s "$D2" --to-s $((D2 + 86400)))
cmp_run "$CH/regress_d" "$T/bf0" "${d2[@]}"
diff "$T/ringd.all" "$T/bf0.all" >/dev/null || fail "the day before the backfill (raw) differs from the ring"
# and three days ago 5,000,000 (profile, stack) rows of series no profile row names (no
# comparison reads them): a day whose backfill statement runs seconds, for the kill -9 to land in
D3DAY=$(date -u -d "@$((D2 - 86400))" +%F)
ch_sql 0 "INSERT INTO regress_d.samples (day, ts, series, sig, profile, stacks, v) SELECT toDate('$D3DAY'), toUInt64(($D2 - 86400 + number % 86400) * 1000000000), number % 3000, 7, number, arrayMap(i -> intHash64(number * 64 + i) % 5000, range(50)), arrayMap(i -> [toInt64(1), toInt64(i)], range(50)) FROM numbers(100000)"
make_pki
start_ch_collector ccb "$CH/regress_d" --ch-backfill-days 3
running() { ch_sql 0 "SELECT count() FROM system.processes WHERE query_id = 'edgeprof-backfill-regress_d' AND query LIKE 'INSERT%'"; }
for _ in $(seq 600); do [ "$(running)" = 1 ] && break; sleep 0.05; done
[ "$(running)" = 1 ] || { cat "$T/ccb.log"; fail "no backfill statement seen running: the kill -9 would not land mid-day"; }
kill -9 "$CC_PID"
wait "$CC_PID" 2>/dev/null
first=$(grep -c 'backfill: day' "$T/ccb.log" || true)
[ "$(ch_sql 0 "SELECT countIf(day = '$D3DAY') FROM regress_d.samples_1d_since")" = 0 ] ||
	fail "a day killed mid-backfill is served"
# started again, with a second collector of the same database backfilling at the same time
start_ch_collector ccb3 "$CH/regress_d" --ch-backfill-days 3
port3=$CC_PORT
start_ch_collector ccb2 "$CH/regress_d" --ch-backfill-days 3
for c in ccb2 ccb3; do
	for _ in $(seq 1200); do grep -q 'backfill done\|backfill ended' "$T/$c.log" && break; sleep 0.1; done
	grep -q 'backfill done' "$T/$c.log" || { cat "$T/$c.log"; fail "$c: the backfill did not end"; }
done
[ "$(ch_sql 0 "SELECT sum(v0), sum(v1) FROM regress_d.samples_1d WHERE day = '$D3DAY'")" = \
	"$(ch_sql 0 "SELECT sum(v[1]), sum(v[2]) FROM regress_d.samples ARRAY JOIN v WHERE day = '$D3DAY'")" ] ||
	fail "the day killed mid-backfill, done again: samples_1d's sums differ from the raw rows'"
[ "$(ch_sql 0 "SELECT min(day) = today() - 3 FROM regress_d.samples_1d_since")" = 1 ] ||
	fail "the backfill did not serve the 3 ended days: $(ch_sql 0 'SELECT * FROM regress_d.samples_1d_since' | tr '\n' ' ')"
# the statement the kill -9 left running filled the day: served as it is, not dropped and filled again
cat "$T/ccb2.log" "$T/ccb3.log" | grep -q "day '$D3DAY' is whole in samples_1d already" ||
	fail "the day whose fill outlived the kill -9 was filled again"
bf_days() { curl -sS --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
	"https://localhost:$1/metrics" | awk '$1 == "edgeprof_collector_clickhouse_backfill_days_total" {print $2}'; }
bfm=$(bf_days "$CC_PORT")
bfm3=$(bf_days "$port3")
[ "$((bfm + bfm3 + first))" -ge 3 ] || fail "backfill days counted: $bfm and $bfm3 after the restart, $first before"
cmp_run "$CH/regress_d" "$T/bf1" "${d2[@]}"
diff "$T/ringd.all" "$T/bf1.all" >/dev/null || fail "the backfilled day differs from the ring"
ch_sql 0 "INSERT INTO regress_d.samples_1d SELECT day, series, sig, stack, v0 * 50, v1 * 50, v2 * 50, v3 * 50 FROM regress_d.samples_1d WHERE day = '$D2DAY' AND series = (SELECT any(series) FROM regress_d.profiles WHERE has(label_values, '1.5')) LIMIT 20"
cmp_run "$CH/regress_d" "$T/bf2" "${d2[@]}"
diff -q "$T/ringd.all" "$T/bf2.all" >/dev/null && fail "a grown samples_1d row of the backfilled day changed nothing: not read"
echo "backfill: a collector killed -9 while a backfill statement ran ($first days done before)," \
	"started again beside a second one: 3 days served ($bfm and $bfm3 by the two), $D3DAY summed" \
	"once, $D2DAY from the rollup = the ring; read"
grep -h 'backfill' "$T/ccb.log" "$T/ccb2.log" "$T/ccb3.log" | head -n 12

# --ch-cluster: two servers as the shards of cluster "edgeprof"; a collector on each creates
# its tables (ON CLUSTER needs ZooKeeper), the fleet is stored through the Distributed tables
ch_start 1
CH1=http://127.0.0.1:$(ch_http_port 1)
start_ch_collector cs0 "$CH/regress_c" --ch-cluster edgeprof
start_ch_collector cs1 "$CH1/regress_c" --ch-cluster edgeprof
export REGRESS_FLEET_CLUSTER=edgeprof
"$FLEET" fill "$CH/regress_c" --seed 39 "${opts[@]}" || fail "regress-fleet fill (cluster)"
for _ in $(seq 100); do [ "$(ch_sql 0 'SELECT count() FROM regress_c.profiles')" = 240 ] && break; sleep 0.1; done
p0=$(ch_sql 0 'SELECT count() FROM regress_c.profiles_local')
p1=$(ch_sql 1 'SELECT count() FROM regress_c.profiles_local')
[ "$p0" -gt 0 ] && [ "$p1" -gt 0 ] && [ $((p0 + p1)) = 240 ] || fail "shards hold $p0 + $p1 profiles, not 240 on both"
for i in 0 1; do
	r=$(ch_sql "$i" "SELECT sum(v[1]), sum(v[2]), uniqExact(series) FROM regress_c.samples_local ARRAY JOIN v")
	u=$(ch_sql "$i" "SELECT sum(v0), sum(v1), uniqExact(series) FROM regress_c.samples_1d_local")
	[ "$r" = "$u" ] || fail "shard $i: samples_1d_local sums $u, samples_local $r"
done
since() { # N DAY: shard N's samples_1d_since_local holds DAY alone (its shard_num: N + 1)
	ch_sql "$1" "DROP TABLE regress_c.samples_1d_since_local"
	ch_sql "$1" "CREATE TABLE regress_c.samples_1d_since_local (day Date, shard UInt32) ENGINE = Log"
	ch_sql "$1" "INSERT INTO regress_c.samples_1d_since_local VALUES ('$2', $(($1 + 1)))"
}
[ "$(ch_sql 1 'SELECT count(), min(day) > today() FROM regress_c.samples_1d_since')" = "2	1" ] ||
	fail "a new cluster's samples_1d_since: not tomorrow on both shards"
# grown rows on shard 1 first: read or not, the answer says
ch_sql 1 "INSERT INTO regress_c.samples_1d_local SELECT day, series, sig, stack, v0 * 50, v1 * 50, v2 * 50, v3 * 50 FROM regress_c.samples_1d_local WHERE series = (SELECT any(series) FROM regress_c.profiles_local WHERE has(label_values, '1.5')) LIMIT 20"
since 0 "$YDAY"
cmp_run "$CH/regress_c" "$T/cl0" "${whole[@]}"
diff "$T/ringd.all" "$T/cl0.all" >/dev/null || fail "cluster, yesterday served on shard 0 only (raw): differs from the ring"
since 1 "$YDAY"
cmp_run "$CH/regress_c" "$T/cl1" "${whole[@]}"
diff -q "$T/ringd.all" "$T/cl1.all" >/dev/null && fail "cluster: a grown samples_1d_local row on shard 1 changed nothing: the rollup is not read"
ch_sql 1 "ALTER TABLE regress_c.samples_1d_local DROP PARTITION ID '${YDAY//-/}'"
ch_sql 1 "INSERT INTO regress_c.samples_1d_local SELECT day, series, sig, stack, sum(v[1]), sum(v[2]), sum(v[3]), sum(v[4]) FROM regress_c.samples_local ARRAY JOIN stacks AS stack, v WHERE day = '$YDAY' GROUP BY day, series, sig, stack"
cmp_run "$CH/regress_c" "$T/cl2" "${whole[@]}"
diff "$T/ringd.all" "$T/cl2.all" >/dev/null || fail "cluster: yesterday from the rollup differs from the ring"
cmp_run "$CH/regress_c" "$T/cl3"
diff "$T/ring.all" "$T/cl3.all" >/dev/null || fail "cluster: the default range (rollup and raw) differs from the ring"
ch_sql 1 "INSERT INTO regress_c.samples_1d_local SELECT day, series, sig, stack, v0 * 50, v1 * 50, v2 * 50, v3 * 50 FROM regress_c.samples_1d_local WHERE day = '$YDAY' LIMIT 20"
ch_sql 0 "INSERT INTO regress_c.rollup_dirty_local VALUES ('$YDAY', $((Y0 / 3600 + 5)))"
cmp_run "$CH/regress_c" "$T/cl4" "${whole[@]}"
diff "$T/ringd.all" "$T/cl4.all" >/dev/null || fail "cluster: a dirty day is not read raw"
echo "cluster: each shard's samples_1d_local = its raw rows; served on one shard: raw;" \
	"on both: the rollup (read), = the ring; a dirty day raw"
# a backfill on each shard: the fleet two days ago, that day dropped from both shards' rollups
"$FLEET" fill "$CH/regress_c" --seed 39 "${opts[@]}" --time-s $((D2 + 3600)) || fail "regress-fleet fill (cluster, two days ago)"
for i in 0 1; do ch_sql "$i" "ALTER TABLE regress_c.samples_1d_local DROP PARTITION ID '${D2DAY//-/}'"; done
start_ch_collector cb0 "$CH/regress_c" --ch-cluster edgeprof --ch-backfill-days 2
start_ch_collector cb1 "$CH1/regress_c" --ch-cluster edgeprof --ch-backfill-days 2
for _ in $(seq 300); do grep -q 'backfill done' "$T/cb0.log" && grep -q 'backfill done' "$T/cb1.log" && break; sleep 0.1; done
grep -q 'backfill done' "$T/cb0.log" && grep -q 'backfill done' "$T/cb1.log" || { cat "$T/cb0.log" "$T/cb1.log"; fail "the shards' backfills did not end"; }
cmp_run "$CH/regress_c" "$T/cl5" "${d2[@]}"
diff "$T/ringd.all" "$T/cl5.all" >/dev/null || fail "cluster: the backfilled day differs from the ring"
ch_sql 0 "INSERT INTO regress_c.samples_1d_local SELECT day, series, sig, stack, v0 * 50, v1 * 50, v2 * 50, v3 * 50 FROM regress_c.samples_1d_local WHERE day = '$D2DAY' LIMIT 20"
cmp_run "$CH/regress_c" "$T/cl6" "${d2[@]}"
diff -q "$T/ringd.all" "$T/cl6.all" >/dev/null && fail "cluster: the backfilled day's rollup is not read"
echo "cluster backfill: a collector on each shard served the day two days ago, = the ring; read"
unset REGRESS_FLEET_CLUSTER
echo "PASS"
