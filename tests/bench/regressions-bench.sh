#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fleet regression detection (issue 39): how often a real regression is found and how often an
# A/A comparison reports something, over seeded simulated staged roll-outs, and how long a
# comparison of 10,000 profiles on the ring store takes through a collector.
#
#   tests/bench/regressions-bench.sh [BUILD_DIR]
#     env: RUNS (100), DEVICES (1000), CAND_FRAC (0.1), NOISE (0.1: sigma of the per-device
#          log-normal factor on every function's weight), SAMPLES (2000 per profile),
#          EFFECT (1.2: crc32_update, 3 % of the CPU, is EFFECT times slower on 1.5),
#          NEW (0.01: tls_renegotiate's share on 1.5), T_DEVICES (1000) x T_PROFILES (10):
#          the timed comparison's fleet, REPS (3), CH_DIR (the ClickHouse case, below),
#          CH_SLICE_S (120: the old path's slice of the day; 0: not run), ONLY_CH (1: the ClickHouse
#          case alone), DAILY_CASE (1; 0: samples_1d against the raw rows not run), PREV_BUILD
#          (a build directory of another commit, e.g. the parent's: its collector runs beside
#          ours on the ClickHouse day, same run, alternating, same answers checked),
#          BACKFILL_CASE (0; 1: the backfill's cost on a copy of CH_DIR, below, then exit)
#
# Per run (seed 1..RUNS), tests/drivers/regress-fleet fills a ring in /dev/shm (tmpfs: the
# store's fdatasync costs nothing, so the loop measures the statistics, not the disk) with
# DEVICES devices, CAND_FRAC of them on 1.5, and compares fw{version="1.4"} with
# fw{version="1.5"} in-process (the code the handler runs): detected = crc32_update reported
# as a regression (positive change); new = tls_renegotiate reported new; extra = any other
# finding. A/A: the same fleet without the effect nor the new function (its own seed): any
# finding is a false positive. Then the timed comparison: T_DEVICES x T_PROFILES profiles,
# through a collector over mutual TLS with `edgeprof regressions` (median of REPS, warm), and
# the peer: scipy.stats (tests/lib/regress-ref.py) on the same per-device shares, statistics
# only, beside our whole comparison (which reads and decodes every profile too).
#
# ClickHouse (CH_DIR=dir: the synthetic day that tests/bench/fleet-bench.sh keeps there, made
# once with PHASES="ingest query" PROFILES=1000000 CH_DIR=dir; 1,000,000 profiles of 10,000
# devices gw-N, 130 sample rows each, 4 versions fw0..fw3 of 2,500 devices): fw1 against fw2
# over the whole day (an A/A: the versions draw from the same stacks), the median of REPS warm
# runs (after one), in-process (regress-fleet compare on the database) and through a collector
# over mutual TLS (edgeprof regressions). The previous path (every profile read through the
# store front, --per-profile) takes 0.1 s or more a profile: it runs on CH_SLICE_S seconds of the
# day only, beside ours on the same slice (the ratio), and its time for the whole day is that
# slice's per-profile time times the day's profiles (an estimate, said as such).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
EP_BUILD=$(cd "${1:-$top/build/host-x86_64}" && pwd)
FLEET=$EP_BUILD/tests/drivers/regress-fleet
RUNS=${RUNS:-100}
DEVICES=${DEVICES:-1000}
CAND_FRAC=${CAND_FRAC:-0.1}
NOISE=${NOISE:-0.1}
SAMPLES=${SAMPLES:-2000}
EFFECT=${EFFECT:-1.2}
NEW=${NEW:-0.01}
T_DEVICES=${T_DEVICES:-1000}
T_PROFILES=${T_PROFILES:-10}
REPS=${REPS:-3}
SHM=$(mktemp -d /dev/shm/edgeprof-regress.XXXXXX)
T=$(mktemp -d /tmp/edgeprof-regress-bench.XXXXXX)
CPID=
cleanup() {
	[ -n "$CPID" ] && kill "$CPID" 2>/dev/null && wait "$CPID" 2>/dev/null
	rm -rf "$SHM" "$T"
}
trap cleanup EXIT
BASE='fw{version="1.4"}'
CAND='fw{version="1.5"}'
common=(--devices "$DEVICES" --cand-frac "$CAND_FRAC" --noise "$NOISE" --samples "$SAMPLES"
	--ring-mb 64)

if [ "${ONLY_CH:-0}" != 1 ]; then
echo "== detection: $RUNS runs, $DEVICES devices, $CAND_FRAC on the candidate, noise $NOISE," \
	"$SAMPLES samples/device, crc32_update x$EFFECT at 3 %, tls_renegotiate new at $NEW"
det=0 sign=0 new=0 extra=0 aa=0 aa_runs=0
for seed in $(seq 1 "$RUNS"); do
	rm -f "$SHM/ring"
	"$FLEET" fill "$SHM/ring" "${common[@]}" --seed "$seed" --effect "crc32_update=$EFFECT" \
		--new "tls_renegotiate=$NEW"
	"$FLEET" compare "$SHM/ring" "$BASE" "$CAND" >"$T/out"
	grep -q '^regression self crc32_update ' "$T/out" && det=$((det + 1))
	awk '$3 == "crc32_update" && $2 == "self" && $6 > 0 { f = 1 } END { exit !f }' "$T/out" &&
		sign=$((sign + 1))
	grep -q '^new self tls_renegotiate ' "$T/out" && new=$((new + 1))
	n=$(grep -vc -e ' crc32_update ' -e ' tls_renegotiate ' -e '^devices_base=' "$T/out" || true)
	[ "$n" -gt 0 ] && extra=$((extra + 1))
	rm -f "$SHM/ring"
	"$FLEET" fill "$SHM/ring" "${common[@]}" --seed $((seed + 1000000))
	"$FLEET" compare "$SHM/ring" "$BASE" "$CAND" >"$T/aa"
	aa_runs=$((aa_runs + 1))
	if [ "$(grep -vc '^devices_base=' "$T/aa" || true)" -gt 0 ]; then
		aa=$((aa + 1))
		sed 's/^/  A\/A finding: /' "$T/aa" | grep -v devices_base= | head -3
	fi
done
echo "regression found (right sign): $det/$RUNS ($sign/$RUNS with a positive change)"
echo "new function found: $new/$RUNS"
echo "runs with another finding: $extra/$RUNS"
echo "A/A runs reporting anything: $aa/$aa_runs"

echo "== timing: $T_DEVICES devices x $T_PROFILES profiles on the ring, through a collector"
"$FLEET" fill "$SHM/t" --devices "$T_DEVICES" --profiles "$T_PROFILES" --cand-frac "$CAND_FRAC" \
	--noise "$NOISE" --samples "$SAMPLES" --seed 7 --effect "crc32_update=$EFFECT" --ring-mb 256
"$FLEET" compare "$SHM/t" "$BASE" "$CAND" --all --shares "$T/shares" >"$T/all"
inproc=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' "$T/all")
ours_stats=$(sed -n 's/.*stats_seconds=\([0-9.]*\).*/\1/p' "$T/all")
/usr/bin/python3 "$top/tests/lib/regress-ref.py" "$T/shares" "$T/all" | tee "$T/ref"
scipy=$(sed -n 's/.*scipy_seconds=\([0-9.]*\).*/\1/p' "$T/ref")
EP=$EP_BUILD/edgeprof
"$EP" certs init "$T/pki" >/dev/null
"$EP" certs operator "$T/pki" op >/dev/null
"$EP_BUILD/edgeprof-collector" --listen 127.0.0.1:0 --tls-ca "$T/pki/ca.crt" \
	--tls-cert "$T/pki/server.crt" --tls-key "$T/pki/server.key" --ring "$SHM/t" \
	>"$T/collector.log" 2>&1 &
CPID=$!
port=
for _ in $(seq 200); do
	port=$(sed -n 's/.*mutual TLS, port \([0-9]*\)).*/\1/p' "$T/collector.log" | tail -n 1)
	[ -n "$port" ] && break
	sleep 0.05
done
[ -n "$port" ] || { cat "$T/collector.log"; exit 1; }
times=()
for _ in $(seq 0 "$REPS"); do # the first is the warm-up
	t0=$(date +%s.%N)
	"$EP" regressions --collector "https://localhost:$port" --tls-ca "$T/pki/ca.crt" \
		--tls-cert "$T/pki/op.crt" --tls-key "$T/pki/op.key" --from now-1d "$BASE" \
		"$CAND" >"$T/table"
	times+=("$(echo "$(date +%s.%N) - $t0" | bc)")
done
med=$(printf '%s\n' "${times[@]:1}" | sort -n | sed -n "$(((REPS + 1) / 2))p")
head -3 "$T/table"
profiles=$(grep -o '([0-9]* profiles)' "$T/table" | head -2 | tr -dc '0-9 \n' | paste -sd+ | bc)
echo "profiles compared: $profiles"
echo "edgeprof regressions (collector, mTLS, warm): median ${med}s of $REPS (goal <= 2 s)"
echo "in-process comparison (list + read/merge + shares + tests): ${inproc}s"
echo "statistics only (Mann-Whitney + BH + intervals, every test, --all): ours ${ours_stats}s," \
	"scipy.stats ${scipy}s (without intervals)"
echo "  (ours includes 1,000-resample bootstrap intervals of the findings only)"
if [ -n "${PREV_BUILD:-}" ]; then # the other build's in-process comparison, alternating
	for i in $(seq 0 "$REPS"); do
		for b in "$EP_BUILD" "$PREV_BUILD"; do
			k=ours
			[ "$b" = "$EP_BUILD" ] || k=prev
			"$b/tests/drivers/regress-fleet" compare "$SHM/t" "$BASE" "$CAND" --all --chains >"$T/r.$k"
			[ "$i" = 0 ] || sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' "$T/r.$k" >>"$T/r.$k.t"
			sed -i 's/ seconds=.*//' "$T/r.$k"
		done
	done
	cmp -s "$T/r.ours" "$T/r.prev" || { echo "the ring: our answer differs from $PREV_BUILD's"; exit 1; }
	o=$(sort -g "$T/r.ours.t" | sed -n "$(((REPS + 1) / 2))p")
	p=$(sort -g "$T/r.prev.t" | sed -n "$(((REPS + 1) / 2))p")
	awk -v o="$o" -v p="$p" -v n="$REPS" -v l="$(uptime | sed 's/.*average: //')" 'BEGIN {
		printf "the ring in-process, median of %d, alternating: ours %.3f s, PREV_BUILD %.3f s: ours/prev %.3f (the same answers, --all --chains; load %s)\n", n, o, p, o / p, l }'
fi
fi

# The per-device daily rollup (samples_1d, store/ch/ch-daily.c) against the raw rows (--raw:
# the path before it), the whole day, median of REPS warm runs each, in-process. A day
# generated before samples_1d existed gets its rows as collectors send them (summed by
# device, an INSERT per hour here, as a backfill would) and is marked served; timed twice:
# as found (after those INSERTs: ClickHouse's background merges running or not), then merged
# (OPTIMIZE FINAL: what a day of background merges leaves). Both answers equal, or it fails.
# Beside the times, ClickHouse's user CPU for a side's GROUP BY (system.query_log): the times
# swing with the load of this shared machine, the CPU much less.
daily_case() { # T0
	local t0=$1 day dd s0 rows parts st
	day=$(date -u -d "@$t0" +%F)
	if [ "$(ch_sql 0 "SELECT count() FROM edgeprof_day.samples_1d WHERE day = '$day'")" = 0 ]; then
		s0=$(date +%s.%N)
		for h in $(seq 0 23); do
			ch_sql 0 "INSERT INTO edgeprof_day.samples_1d SELECT day, series, sig, stack, sum(v[1]), sum(v[2]), sum(v[3]), sum(v[4]) FROM edgeprof_day.samples ARRAY JOIN stacks AS stack, v WHERE ts >= ($t0 + $h * 3600) * 1000000000 AND ts < ($t0 + ($h + 1) * 3600) * 1000000000 AND length(v) <= 4 GROUP BY day, series, sig, stack ORDER BY series, sig, stack" || return 1
		done
		ch_sql 0 "INSERT INTO edgeprof_day.samples_1d_since VALUES ('$day')"
		echo "samples_1d: the day summed by device into $(ch_sql 0 "SELECT count() FROM edgeprof_day.samples_1d") rows in $(echo "$(date +%s.%N) - $s0" | bc) s (24 INSERTs, once)"
	fi
	sed -i '0,/<default>/s//<default><log_queries>1<\/log_queries>/' "$T/ch0/users.xml"
	for _ in $(seq 150); do # ClickHouse reloads users.xml within seconds
		[ "$(ch_sql 0 "SELECT value FROM system.settings WHERE name = 'log_queries'")" = 1 ] && break
		sleep 0.2
	done
	for st in as-found merged; do
		if [ "$st" = merged ]; then
			s0=$(date +%s.%N)
			ch_sql 0 "OPTIMIZE TABLE edgeprof_day.samples_1d FINAL" || return 1
			echo "samples_1d: OPTIMIZE FINAL in $(echo "$(date +%s.%N) - $s0" | bc) s"
		fi
		rows=$(ch_sql 0 "SELECT count() FROM edgeprof_day.samples_1d WHERE day = '$day'")
		parts=$(ch_sql 0 "SELECT count() FROM system.parts WHERE active AND database = 'edgeprof_day' AND table = 'samples_1d'")
		rm -f "$T/d.t" "$T/r.t"
		since=$(date +%s)
		for i in $(seq 0 "$REPS"); do # the first of each: warm-up
			"$FLEET" compare "$DB" "$B" "$C" --from-s "$t0" --to-s $((t0 + 86400)) >"$T/d.out" || return 1
			"$FLEET" compare "$DB" "$B" "$C" --from-s "$t0" --to-s $((t0 + 86400)) --raw >"$T/r.out" || return 1
			[ "$i" = 0 ] && continue
			secs <"$T/d.out" >>"$T/d.t"
			secs <"$T/r.out" >>"$T/r.t"
		done
		sed 's/ seconds=.*//' "$T/d.out" | cmp -s - <(sed 's/ seconds=.*//' "$T/r.out") ||
			{ echo "samples_1d: its answer differs from the raw rows'"; return 1; }
		awk -v d="$(median <"$T/d.t")" -v r="$(median <"$T/r.t")" -v n="$REPS" -v st="$st" \
			-v rows="$rows" -v parts="$parts" 'BEGIN {
			printf "samples_1d %s (%d rows, %d parts): the day fw1 against fw2 in-process, median of %d warm: daily rollup %.2f s, raw rows %.2f s: rollup/raw %.3f (same answers)\n", st, rows, parts, n, d, r, d / r }'
		tail -n 1 "$T/d.out"
		# ClickHouse's own figures for a side's GROUP BY (load-independent: user CPU)
		sleep 8 # query_log is flushed every 7.5 s
		for k in "LIKE '%FROM samples_1d WHERE%'" "NOT LIKE '%samples_1d%'"; do
			ch_sql 0 "SELECT ProfileEvents.Values[indexOf(ProfileEvents.Names, 'UserTimeMicroseconds')] / 1e6, query_duration_ms / 1e3, read_rows FROM system.query_log WHERE type = 2 AND event_time >= toDateTime($since) AND query LIKE '%GROUP BY series, stack%' AND query $k" |
				sort -g | awk -v k="$k" '{ c[NR] = $1; w[NR] = $2; r[NR] = $3 } END { m = int((NR + 1) / 2); printf "  clickhouse, a side'"'"'s GROUP BY %s (median of %d by CPU): %.2f s user CPU, %.2f s, %d rows read\n", (k ~ /NOT/) ? "on raw rows" : "on samples_1d", NR, c[m], w[m], r[m] }'
		done
	done
}

[ -n "${CH_DIR:-}" ] || { echo "== ClickHouse: CH_DIR not set (the synthetic day; see the head of this file): skipped"; exit 0; }
# --ch-backfill-days (store/ch/ch-backfill.c) against the peer, the hourly backfill by hand
# that daily_case() does (24 INSERT ... SELECT, an hour each), on a copy of CH_DIR (never
# written): the day's samples_1d dropped and samples_1d_since reset to the day after it
# before each (so the backfill does that one day: other days of the copy stay as they are),
# wall time and clickhouse-server's CPU (user + system, /proc) each, the same rows after both.
backfill_case() {
	local t0=$1 day days since0 s0 c0 ours_w ours_c peer_w peer_c a b
	day=$(date -u -d "@$t0" +%F)
	days=$(( $(date +%s) / 86400 - t0 / 86400 ))
	cpu_ch() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz }' "/proc/${CH_PIDS[1]}/stat"; }
	reset() {
		ch_sql 1 "ALTER TABLE edgeprof_day.samples_1d DROP PARTITION ID '${day//-/}'" || return 1
		ch_sql 1 "DROP TABLE edgeprof_day.samples_1d_since" || return 1
		ch_sql 1 "CREATE TABLE edgeprof_day.samples_1d_since (day Date) ENGINE = Log" || return 1
		ch_sql 1 "INSERT INTO edgeprof_day.samples_1d_since VALUES (toDate('$day') + 1)"
	}
	sums() { ch_sql 1 "SELECT count(), sum(v0), sum(v1), uniqExact(series, stack) FROM (SELECT series, sig, stack, sum(v0) AS v0, sum(v1) AS v1 FROM edgeprof_day.samples_1d WHERE day = '$day' GROUP BY series, sig, stack)"; }
	reset || return 1
	s0=$(date +%s.%N) c0=$(cpu_ch)
	for h in $(seq 0 23); do
		ch_sql 1 "INSERT INTO edgeprof_day.samples_1d SELECT day, series, sig, stack, sum(v[1]), sum(v[2]), sum(v[3]), sum(v[4]) FROM edgeprof_day.samples ARRAY JOIN stacks AS stack, v WHERE ts >= ($t0 + $h * 3600) * 1000000000 AND ts < ($t0 + ($h + 1) * 3600) * 1000000000 AND length(v) <= 4 GROUP BY day, series, sig, stack ORDER BY series, sig, stack" || return 1
	done
	peer_w=$(echo "$(date +%s.%N) - $s0" | bc) peer_c=$(echo "$(cpu_ch) - $c0" | bc)
	a=$(sums)
	reset || return 1
	make_pki
	s0=$(date +%s.%N) c0=$(cpu_ch)
	start_ch_collector bf "http://127.0.0.1:$(ch_http_port 1)/edgeprof_day" --ch-backfill-days "$days"
	for _ in $(seq 36000); do grep -q 'backfill done\|backfill ended' "$T/bf.log" && break; sleep 0.1; done
	ours_w=$(echo "$(date +%s.%N) - $s0" | bc) ours_c=$(echo "$(cpu_ch) - $c0" | bc)
	grep "backfill" "$T/bf.log" | grep -v "(0 rows" | head -n 4
	grep -q 'backfill done' "$T/bf.log" || { echo "the backfill did not end"; return 1; }
	b=$(sums)
	[ "$a" = "$b" ] || { echo "backfill: the day's rows differ: by hand $a, ours $b"; return 1; }
	awk -v ow="$ours_w" -v oc="$ours_c" -v pw="$peer_w" -v pc="$peer_c" -v d="$days" -v r="$a" -v l="$(uptime | sed 's/.*average: //')" 'BEGIN {
		printf "backfill of the day (%d days back): --ch-backfill-days %.1f s, %.1f s of clickhouse-server CPU (the totals check and the empty days included); by hand, 24 hourly INSERT ... SELECT: %.1f s, %.1f s CPU: ours/peer wall %.3f, CPU %.3f; the same rows (count, sums, distinct (series, stack): %s); load %s\n", d, ow, oc, pw, pc, ow / pw, oc / pc, r, l }'
}

if [ "${BACKFILL_CASE:-0}" = 1 ]; then
	(
		. "$top/tests/lib/collector-lib.sh"
		. "$top/tests/lib/clickhouse-lib.sh"
		mkdir -p "$T/ch1"
		cp -a "$CH_DIR/data" "$T/ch1/"
		ch_config 1
		ch_start 1
		t0=$(ch_sql 1 "SELECT intDiv(min(ts), 1000000000) FROM edgeprof_day.profiles WHERE device LIKE 'gw-%'")
		backfill_case "$t0"
	)
	exit $?
fi
echo "== ClickHouse: the synthetic day in $CH_DIR, fw1 against fw2"
(
	. "$top/tests/lib/collector-lib.sh"
	. "$top/tests/lib/clickhouse-lib.sh"
	mkdir -p "$T"
	ln -s "$(cd "$CH_DIR" && pwd)" "$T/ch0"
	rm -f "$T/ch0/config.xml"
	ch_config 0
	ch_start 0
	DB=http://127.0.0.1:$(ch_http_port 0)/edgeprof_day
	n=$(ch_sql 0 "SELECT count() FROM edgeprof_day.profiles WHERE device LIKE 'gw-%'")
	t0=$(ch_sql 0 "SELECT intDiv(min(ts), 1000000000) FROM edgeprof_day.profiles WHERE device LIKE 'gw-%'")
	[ "$n" -ge 1000 ] || { echo "ClickHouse: no synthetic day in $CH_DIR"; exit 1; }
	B='{version="fw1"}' C='{version="fw2"}'
	median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
	secs() { sed -n 's/.* seconds=\([0-9.]*\).*/\1/p'; }
	[ "${DAILY_CASE:-1}" = 0 ] || daily_case "$t0" || exit 1
	if [ "${CH_SLICE_S:-120}" != 0 ]; then # the profile-by-profile path: ~0.4 s a profile
		slice="--from-s $((t0 + 43200)) --to-s $((t0 + 43200 + ${CH_SLICE_S:-120}))"
		"$FLEET" compare "$DB" "$B" "$C" $slice >"$T/new.s" || exit 1 # warm-up
		"$FLEET" compare "$DB" "$B" "$C" $slice >"$T/new.s" || exit 1
		"$FLEET" compare "$DB" "$B" "$C" $slice --per-profile >"$T/old.s" || exit 1
		sed 's/ seconds=.*//' "$T/new.s" | cmp -s - <(sed 's/ seconds=.*//' "$T/old.s") ||
			{ echo "ClickHouse: the two paths' answers differ on the slice"; exit 1; }
		sp=$(ch_sql 0 "SELECT countIf(has(label_values, 'fw1') OR has(label_values, 'fw2')) FROM edgeprof_day.profiles WHERE ts >= ($t0 + 43200) * 1000000000 AND ts <= ($t0 + 43200 + ${CH_SLICE_S:-120}) * 1000000000")
		dp=$(ch_sql 0 "SELECT countIf(has(label_values, 'fw1') OR has(label_values, 'fw2')) FROM edgeprof_day.profiles")
		awk -v o="$(secs <"$T/old.s")" -v w="$(secs <"$T/new.s")" -v sp="$sp" -v dp="$dp" -v s="${CH_SLICE_S:-120}" 'BEGIN {
			printf "slice of %d s (%d profiles of fw1 and fw2; the same answers): ours %.3f s, previous path (profile by profile) %.3f s: ours/previous %.4f\n", s, sp, w, o, w / o
			printf "previous path over the day (%d profiles), estimated from the slice: %.0f s\n", dp, o / sp * dp }'
	fi
	for _ in $(seq 0 "$REPS"); do
		"$FLEET" compare "$DB" "$B" "$C" --from-s "$t0" --to-s $((t0 + 86400)) >"$T/day" ||
			exit 1
		secs <"$T/day" >>"$T/day.t"
	done
	tail -n 1 "$T/day"
	inproc=$(tail -n "$REPS" "$T/day.t" | median)
	[ "${CH_SLICE_S:-120}" = 0 ] || awk -v o="$(secs <"$T/old.s")" -v sp="$sp" -v dp="$dp" -v d="$inproc" 'BEGIN {
		printf "the day in-process: ours %.2f s, previous path ~%.0f s (estimate): ours/previous ~%.4f\n", d, o / sp * dp, d / (o / sp * dp) }'
	make_pki
	start_ch_collector chr "$DB"
	ports=("$CC_PORT") names=(ours) pids=("$CC_PID")
	if [ -n "${PREV_BUILD:-}" ]; then # the other build's collector, on the same database
		ours_coll=$COLLECTOR
		COLLECTOR=$PREV_BUILD/edgeprof-collector
		start_ch_collector prev "$DB"
		COLLECTOR=$ours_coll
		ports+=("$CC_PORT") names+=(prev) pids+=("$CC_PID")
	fi
	# CPU seconds (user + system) a process has used: what a comparison costs the collector
	# and ClickHouse whatever else the shared machine runs (the wall time waits for the cores)
	cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz }' "/proc/$1/stat"; }
	regressions() { # PORT PID OUT: one comparison of the day: wall, collector CPU, ClickHouse CPU
		local s0 c0 h0
		s0=$(date +%s.%N) c0=$(cpu_s "$2") h0=$(cpu_s "${CH_PIDS[0]}")
		"$EP" regressions --collector "https://localhost:$1" --tls-ca "$T/pki/ca.crt" \
			--tls-cert "$T/pki/op.crt" --tls-key "$T/pki/op.key" --from "$t0" \
			--to $((t0 + 86400)) "$B" "$C" >"$3" 2>&1 || { cat "$3"; echo failed >"$T/failed"; }
		echo "$(date +%s.%N) - $s0" | bc >>"$3.t"
		echo "$(cpu_s "$2") - $c0" | bc >>"$3.cpu"
		echo "$(cpu_s "${CH_PIDS[0]}") - $h0" | bc >>"$3.chcpu"
	}
	for i in $(seq 0 "$REPS"); do # alternating which goes first; the first round: warm-up
		order=(0 1)
		[ $((i % 2)) = 1 ] && order=(1 0)
		for k in "${order[@]}"; do
			[ "$k" -lt "${#ports[@]}" ] && regressions "${ports[$k]}" "${pids[$k]}" "$T/table.${names[$k]}"
		done
		[ "$i" = 0 ] || uptime | sed 's/.*load average: \([0-9.]*\),.*/\1/' >>"$T/load"
	done
	head -n 3 "$T/table.ours"
	coll=$(tail -n "$REPS" "$T/table.ours.t" | median)
	[ ! -f "$T/failed" ] || coll="$coll (some runs failed: see above)"
	echo "ClickHouse, $n profiles in the day: fw1 against fw2, median of $REPS warm:" \
		"edgeprof regressions (collector, mTLS) ${coll}s (goal <= 3 s); in-process ${inproc}s;" \
		"1-min load average during them: $(tr '\n' ' ' <"$T/load")(2 cores, shared)"
	echo "  CPU a comparison (median): collector $(tail -n "$REPS" "$T/table.ours.cpu" | median) s," \
		"clickhouse-server $(tail -n "$REPS" "$T/table.ours.chcpu" | median) s"
	[ -n "${PREV_BUILD:-}" ] || exit 0
	# every test (all=1: verdicts, shares, p-values, intervals, stacks) from both collectors
	for k in 0 1; do
		curl -sS -G --max-time 120 --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" \
			--key "$T/pki/op.key" --data-urlencode "base=$B" --data-urlencode "cand=$C" \
			--data-urlencode "from=$t0" --data-urlencode "to=$((t0 + 86400))" \
			--data-urlencode all=1 "https://localhost:${ports[$k]}/api/0/regressions" \
			>"$T/all.${names[$k]}"
	done
	grep -q '"tests":[1-9]' "$T/all.ours" || { head -c 300 "$T/all.ours"; echo; echo "no tests in our answer"; exit 1; }
	cmp -s "$T/all.ours" "$T/all.prev" && cmp -s "$T/table.ours" "$T/table.prev" ||
		{ echo "ClickHouse: our collector's answer differs from $PREV_BUILD's"; exit 1; }
	prev=$(tail -n "$REPS" "$T/table.prev.t" | median)
	awk -v o="$coll" -v p="$prev" -v n="$REPS" -v t="$(grep -o '"tests":[0-9]*' "$T/all.ours")" \
		-v oc="$(tail -n "$REPS" "$T/table.ours.cpu" | median)" \
		-v pc="$(tail -n "$REPS" "$T/table.prev.cpu" | median)" 'BEGIN {
		printf "ClickHouse, the day through a collector, median of %d warm, same run, alternating: ours %.2f s, PREV_BUILD %.2f s: ours/prev %.3f; the collector'"'"'s CPU ours %.2f s, PREV_BUILD %.2f s: ours/prev %.3f (the same answers, every test: %s)\n", n, o, p, o / p, oc, pc, oc / pc, t }'
)
