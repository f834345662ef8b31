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
#     yesterday marked dirty (rollup_dirty) is read raw again, equal to the ring.
. "$(dirname "$0")/../lib/collector-lib.sh"
. "$(dirname "$0")/../lib/clickhouse-lib.sh"
FLEET=$EP_BUILD/tests/drivers/regress-fleet
[ -x "$FLEET" ] || { echo "regress-fleet not built"; exit 77; }
ch_need --clickhouse

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
echo "PASS"
