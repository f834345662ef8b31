#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hourly rollup two ways, clickhouse-server's CPU for each (load-independent): the batches'
# own rollup INSERTs (what the collectors send) with all the merges they cause, against one
# INSERT ... SELECT that makes the same rows from samples inside ClickHouse. Both must give
# the same sums. The requests are a capture (CH_CAPTURE=DIR tests/bench/fleet-bench.sh), replayed
# one at a time into a fresh clickhouse-server of ours (tests/lib/clickhouse-lib.sh).
#   ch-rollup-agg.sh DIR
# e.g. a fleet of 100,000 devices, where no device repeats within a batch:
#   CH_CAPTURE=/tmp/capD DEVICES=100000 PHASES=ingest SECONDS_PER_RUN=20 tests/bench/fleet-bench.sh
#   tests/bench/ch-rollup-agg.sh /tmp/capD
# Measured twice (19,415 uploads, 13.8M rollup rows): 4.46 and 4.86 s for the batches'
# INSERTs and merges, 43.5 and 46.3 s for the INSERT ... SELECT. It reads the rollup by series
# (samples_1h): captures of collectors before the rollup by group (samples_1g), which made the
# batches' rollup small for large fleets instead (store/README.md).
set -eu
CAP=$(cd "$1" && pwd)
top=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-ch-agg.XXXXXX")
fail() { echo "FAIL: $*"; exit 1; }
ep_cleanup() { rm -rf "$T"; }
. "$top/tests/lib/clickhouse-lib.sh"
ch_config 0
ch_start 0
PID=${CH_PIDS[0]}
P=$(ch_http_port 0)
cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
sql() { curl -sS --data-binary "$1" "http://127.0.0.1:$P/?database=edgeprof_fleet"; }
quiet() { # until no merge has run for 8 s
	local q=0
	while [ $q -lt 8 ]; do
		sleep 1
		if [ "$(sql 'SELECT count() FROM system.merges')" = 0 ]; then q=$((q + 1)); else q=0; fi
	done
}
replay() { # rest: every request but the rollup's INSERTs; rollup: only those
	local k target code
	while read -r k _ _ target; do
		case "$1:$target" in
		rest:*INSERT%20INTO%20samples_1h%20*) continue ;;
		rollup:*INSERT%20INTO%20samples_1h%20*) ;;
		rollup:*) continue ;;
		esac
		code=$(curl -sS -o "$T/out" -w '%{http_code}' --data-binary @"$CAP/$k.body" \
			"http://127.0.0.1:$P$target")
		[ "$code" = 200 ] || echo "request $k: $code $(head -c 300 "$T/out")"
	done <"$CAP/index"
}
sums='SELECT sum(v0), sum(v1), sum(v2), sum(v3), count() FROM samples_1h FINAL'

replay rest
quiet
echo "samples: $(sql 'SELECT count(), sum(length(stacks)) FROM samples' | tr '\t' ' ') (profiles, rows)"
c0=$(cpu_of "$PID")
replay rollup
quiet
c1=$(cpu_of "$PID")
a=$(sql "$sums" | tr '\t' ' ')
echo "the batches' rollup INSERTs and their merges: $(echo "$c1 - $c0" | bc) s CPU; sums and rows: $a"
sql 'TRUNCATE TABLE samples_1h'
sleep 2
c2=$(cpu_of "$PID")
sql "INSERT INTO samples_1h SELECT day, toUInt32(intDiv(ts, 3600000000000)) AS hour, series, sig, stack, sum(v[1]), sum(v[2]), sum(v[3]), sum(v[4]) FROM samples ARRAY JOIN stacks AS stack, v WHERE length(v) <= 4 GROUP BY day, hour, series, sig, stack ORDER BY series, sig, hour, stack"
quiet
c3=$(cpu_of "$PID")
b=$(sql "$sums" | tr '\t' ' ')
echo "one INSERT ... SELECT from samples: $(echo "$c3 - $c2" | bc) s CPU; sums and rows: $b"
[ "$a" = "$b" ] || fail "the two rollups differ"
