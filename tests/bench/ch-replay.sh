#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ClickHouse's CPU for a fixed ingest, load-independent: the requests collectors sent (recorded by
# `CH_CAPTURE=DIR tests/bench/fleet-bench.sh`, tests/bench/ch-capture.py) replayed one at a time
# in their order into a fresh clickhouse-server (ours, tests/lib/clickhouse-lib.sh, with
# part_log on), its utime+stime counted from the first INSERT until all is in, then until
# system.merges has stayed empty for 10 s (the merges those INSERTs cause); the CPU of its
# INSERT (HTTPHandler) and merge (BackgrProcPool) threads; part_log per table; the INSERTs'
# CPU and page faults from query_log.
#   ch-replay.sh DIR
#   REPEAT=N: the INSERTs replayed N times (the same rows again: more levels of merges)
#   EXTRA='a=1&b=2': settings added to every INSERT's URL
#   DDL_SED='s/.../.../': a sed script applied to each CREATE TABLE the collectors sent
#   CH_REPLAY_TMP=DIR: its data there (default /tmp; e.g. /dev/shm: without the filesystem's cost of
#   creating files, a quarter of its CPU on this ext4 without journal, and the noisiest part)
#   CH_MALLOC_CONF=..., CH_ENV='VAR=value ...': the server's allocator and environment
#   (tests/lib/clickhouse-lib.sh; CH_MALLOC_CONF= for jemalloc's defaults)
#   HASH=1: at the end, samples merged into one part (OPTIMIZE FINAL), then its rows, a hash of
#   their contents and whether they are sorted by its key (to compare two table definitions)
# e.g. the samples table as sent against one with another ORDER BY:
#   CH_CAPTURE=/tmp/cap CH_BASE=30100 PHASES=ingest SECONDS_PER_RUN=20 tests/bench/fleet-bench.sh
#   REPEAT=3 tests/bench/ch-replay.sh /tmp/cap
#   REPEAT=3 DDL_SED='s/ORDER BY (hour, series, ts)/ORDER BY (series, ts)/' \
#	tests/bench/ch-replay.sh /tmp/cap
set -eu
CAP=$(cd "$1" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d "${CH_REPLAY_TMP:-/tmp}/edgeprof-ch-replay.XXXXXX")
fail() { echo "FAIL: $*"; exit 1; }
ep_cleanup() { rm -rf "$T"; }
CH_EXTRA_CONFIG="<part_log><database>system</database><table>part_log</table><flush_interval_milliseconds>7500</flush_interval_milliseconds></part_log>"
. "$top/tests/lib/clickhouse-lib.sh"
ch_config 0
ch_start 0
PID=${CH_PIDS[0]}
P=$(ch_http_port 0)
DB=edgeprof_fleet
cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
usys_of() { awk '{print $14 / 100, $15 / 100}' "/proc/$1/stat"; }
sql() { curl -sS --data-binary "$1" "http://127.0.0.1:$P/"; }

requests() { # the index, then its INSERTs again REPEAT - 1 times
	cat "$CAP/index"
	for _ in $(seq 2 "${REPEAT:-1}"); do grep 'query=INSERT' "$CAP/index"; done
}
c0= u0= t0=
while read -r k _ _ target; do
	url="http://127.0.0.1:$P$target" body=$CAP/$k.body
	case "$target" in *query=INSERT*) url="$url${EXTRA:+&$EXTRA}" ;; esac
	[ -n "$c0" ] || [[ "$target" != *query=INSERT* ]] || { c0=$(cpu_of "$PID"); u0=$(usys_of "$PID"); t0=$(date +%s.%N); }
	if [ -n "${DDL_SED:-}" ] && head -c 12 "$body" | grep -q '^CREATE TABLE'; then
		sed "$DDL_SED" "$body" >"$T/ddl"
		body=$T/ddl
	fi
	code=$(curl -sS -o "$T/out" -w '%{http_code}' --data-binary @"$body" "$url")
	[ "$code" = 200 ] || echo "request $k: $code $(head -c 300 "$T/out")"
done < <(requests)
c1=$(cpu_of "$PID") t1=$(date +%s.%N)
quiet=0
while [ $quiet -lt 10 ]; do
	sleep 1
	if [ "$(sql "SELECT count() FROM system.merges")" = 0 ]; then quiet=$((quiet + 1)); else quiet=0; fi
done
c2=$(cpu_of "$PID") u2=$(usys_of "$PID") t2=$(date +%s.%N)
n=$(sql "SELECT count() FROM $DB.profiles")
sql "SYSTEM FLUSH LOGS" >/dev/null
echo "replay of $CAP x${REPEAT:-1}; settings: ${EXTRA:-none}; DDL: ${DDL_SED:-as sent}; load $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v n="$n" -v a="$c0" -v b="$c1" -v c="$c2" -v ta="$t0" -v tb="$t1" -v tc="$t2" 'BEGIN {
	printf "clickhouse-server: %d profiles: %.2f s CPU until all in (%.3f ms/profile, %.1f s), %.2f s until merges are done (%.3f ms/profile, %.1f s more)\n",
		n, b - a, 1000 * (b - a) / n, tb - ta, c - a, 1000 * (c - a) / n, tc - tb }'
echo "$u0 $u2" | awk '{printf "  user %.2f s, system %.2f s (until merges are done)\n", $3 - $1, $4 - $2}'
for t in /proc/"$PID"/task/*; do
	echo "$(tr ' ' _ <"$t/comm") $(awk '{print $14 + $15}' "$t/stat")"
done | awk '{c[$1] += $2} END {for (k in c) if (c[k] >= 1) printf "  threads %s: %.2f s\n", k, c[k] / 100}' | sort
sql "SELECT table, event_type, count(), sum(rows), sum(size_in_bytes), sum(duration_ms) FROM system.part_log WHERE database = '$DB' GROUP BY table, event_type ORDER BY table, event_type FORMAT TSV" |
	awk '{printf "  part_log %-14s %-11s %5d parts %11d rows %11d bytes %7d ms\n", $1, $2, $3, $4, $5, $6}'
sql "SELECT event, value FROM system.events WHERE event IN ('InsertQuery', 'MergeTreeDataWriterBlocks', 'Merge', 'MergedRows', 'SoftPageFaults') FORMAT TSV" |
	tr '\n\t' ' =' | sed 's/^/  events: /; s/$/\n/'
if [[ "${EXTRA:-}" == *log_queries=1* ]]; then
	sql "SELECT replaceRegexpOne(query, ' FORMAT.*', '') AS q, count(), sum(ProfileEvents.Values[indexOf(ProfileEvents.Names, 'UserTimeMicroseconds')]) / 1e6, sum(ProfileEvents.Values[indexOf(ProfileEvents.Names, 'SystemTimeMicroseconds')]) / 1e6, sum(ProfileEvents.Values[indexOf(ProfileEvents.Names, 'SoftPageFaults')]) FROM system.query_log WHERE type = 2 AND query LIKE 'INSERT INTO%' GROUP BY q ORDER BY 3 DESC FORMAT TSV" |
		awk -F'\t' '{printf "  query_log %-32s %4d: user %6.2f s, sys %6.2f s, %d page faults\n", $1, $2, $3, $4, $5}'
fi
if [ -n "${HASH:-}" ]; then
	for _ in $(seq 30); do
		sql "OPTIMIZE TABLE $DB.samples FINAL" >/dev/null 2>&1 || true
		[ "$(sql "SELECT count() FROM system.parts WHERE active AND database = '$DB' AND table = 'samples'")" = 1 ] && break
		sleep 1
	done
	sql "SELECT count(), sum(cityHash64(day, ts, series, sig, profile, stack, hour, arrayStringConcat(arrayMap(x -> toString(x), v), ','))) FROM $DB.samples" |
		awk '{printf "samples: %d rows, content hash %s, ", $1, $2}'
	sql "SELECT arrayUniq(a), arraySum(arrayMap((x, y) -> x < y, arrayPopFront(a), arrayPopBack(a))) FROM (SELECT groupArray((hour, series, ts, stack)) AS a FROM $DB.samples SETTINGS max_threads = 1)" |
		awk '{printf "%d distinct keys, %d rows before a smaller key\n", $1, $2}'
fi
