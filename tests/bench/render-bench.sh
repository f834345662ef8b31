#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Render benchmark of the collector (issue 8): the flame graph of 1 hour of a 100-device fleet.
#  1. a ring with DEVICES devices x 2 h 10 min of realistic cpu profiles (one per device every
#     10 s, ~20 KB each, render-bench fill) ending 10 minutes in the future, so that the newest
#     buckets are still open while we measure, as they are for a live fleet;
#  2. the collector on it with rollups (BUCKET-second buckets, spans of 12, per series and per
#     group = all devices of the service); we wait until those of the closed buckets are built
#     and report their CPU cost and the ring space they take;
#  3. GET /api/0/render (json, flamebearer) over HTTP, median of RUNS, for
#       aligned  the last clock hour (spans wholly inside),
#       sliding  an hour that starts and ends mid-bucket, 1 h 10 min to 10 min ago (bucket
#                rollups and the raw profiles of the two partial buckets),
#       live     the hour up to now: its newest buckets are open (raw profiles only; the UI's
#                default "last hour");
#  4. peer 1: our own merge + render of the aligned and sliding hours from raw records only (in
#     process, no merge limit, render-bench merge ... raw), RUNS_RAW runs;
#  5. peer 2: `go tool pprof -proto` merging one device's hour (360 files) against our render
#     of the same device and hour.
# Usage: tests/bench/render-bench.sh [BUILD_DIR]
#        (env: RUNS=5 RUNS_RAW=3 DEVICES=100 BUCKET=60 DIR=/var/tmp)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build/host-x86_64}
drv=$build/tests/drivers/render-bench
coll=$build/edgeprof-collector
[ -x "$drv" ] && [ -x "$coll" ] || { echo "build first: make all-tests"; exit 1; }
RUNS=${RUNS:-5}
RUNS_RAW=${RUNS_RAW:-3}
DEVICES=${DEVICES:-100}
BUCKET=${BUCKET:-60}
dir=$(mktemp -d "${DIR:-/var/tmp}/edgeprof-render-bench.XXXXXX")
cpid=
trap '[ -n "$cpid" ] && kill "$cpid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="edgeprof_collector_$1" '$1 == m { print $2 }'; }

start() { # rollup-seconds
	"$coll" --ring "$ring" --http-listen 127.0.0.1:0 --rollup-seconds "$1" >"$dir/log" 2>&1 &
	cpid=$!
	for _ in $(seq 600); do
		port=$(sed -n 's/.*plain HTTP, port \([0-9]*\).*/\1/p' "$dir/log")
		[ -n "$port" ] && return 0
		sleep 0.1
	done
	echo "collector did not start:"; cat "$dir/log"; exit 1
}
stop() { kill "$cpid"; wait "$cpid" 2>/dev/null || true; cpid=; }

render() { # query-string -> median seconds of RUNS
	for _ in $(seq "$RUNS"); do
		curl -s -o "$dir/out" -w '%{http_code} %{time_total}\n' \
			"http://127.0.0.1:$port/api/0/render?$1" >"$dir/t"
		read -r code secs <"$dir/t"
		[ "$code" = 200 ] || { echo "render $1: HTTP $code" >&2; exit 1; }
		echo "$secs"
	done | median
}

now=$(date +%s)
end=$(( now / 10 * 10 + 600 ))	# the last profile of each device; 780 per device back from there
hour=$(( now / 3600 * 3600 ))
echo "render benchmark: $(nproc) CPUs, uptime: $(uptime)"
ring=$dir/ring
echo "filling $ring: $DEVICES devices x 780 profiles (2 h 10 min)..."
"$drv" fill "$ring" "$DEVICES" 780 "$end"

start 0
used0=$(metric ring_used_bytes)
stop
start "$BUCKET"
# the buckets and spans closed now (grace 60 s), per series and for the group
closed=$(( ($(date +%s) - 60) / BUCKET * BUCKET ))
first=$(( (end - 7800) / BUCKET * BUCKET ))
want=$(( (DEVICES + 1) * ((closed - first) / BUCKET + (closed - first) / (12 * BUCKET)) ))
t0=$(date +%s)
for _ in $(seq 1800); do
	[ "$(metric rollups_built_total)" -ge "$want" ] && break
	sleep 1
done
built=$(metric rollups_built_total)
cpu_s=$(metric rollup_build_cpu_seconds_total)
used1=$(metric ring_used_bytes)
span_h=$(awk -v c="$closed" -v f="$first" 'BEGIN { print (c - f) / 3600 }')
echo "rollups ($BUCKET s buckets): $built built in $(( $(date +%s) - t0 )) s (want $want)," \
	"$(metric rollups_dropped_total) dropped; build CPU $(awk -v c="$cpu_s" -v h="$span_h" \
	'BEGIN { printf "%.1f s for %.2f hours = %.1f s per fleet-hour", c, h, c / h }');" \
	"ring space $(( (used1 - used0) >> 20 )) MiB over $(( used0 >> 20 )) MiB of profiles" \
	"($(awk -v a="$used0" -v b="$used1" 'BEGIN { printf "%.1f", (b - a) * 100 / a }')%)"

a_from=$(( hour - 3600 )) a_to=$hour
s_from=$(( (now - 4200) / 300 * 300 + 150 )); s_to=$(( s_from + 3600 ))
printf '\n%-34s %10s\n' "render over HTTP (median of $RUNS)" seconds
for fmt in json flamebearer; do
	aj=$(render "format=$fmt&from=$a_from&to=$a_to")
	sj=$(render "format=$fmt&from=$s_from&to=$s_to")
	lj=$(render "format=$fmt&from=now-1h&to=now")
	printf '%-34s %10s\n' "aligned hour, $fmt" "$aj" "sliding hour, $fmt" "$sj" \
		"live hour (to now), $fmt" "$lj"
	[ "$fmt" = json ] && ours_aligned=$aj ours_sliding=$sj
done
echo "rollups read: $(metric rollups_read_total), stale: $(metric rollups_stale_total)"
sel=$(printf '%s' '{device="gw-000"}' | sed 's/{/%7B/; s/}/%7D/; s/"/%22/g; s/=/%3D/')
ours_dev=$(render "format=json&query=$sel&from=$a_from&to=$a_to")
stop

echo
echo "peer 1: our merge + render from raw records only (in process, $RUNS_RAW runs)"
peer1() { # name from to ours
	raw=$("$drv" merge "$ring" "$2" "$3" "$RUNS_RAW" raw json)
	raw_med=$(echo "$raw" | sed 's/seconds=\([^ ]*\).*/\1/' | tr , '\n' | median)
	echo "  $1 raw:     $raw"
	printf '  %s: raw %s s, ours over HTTP %s s; ours/peer1 = %.3f\n' "$1" "$raw_med" "$4" \
		"$(awk -v a="$4" -v b="$raw_med" 'BEGIN { print a / b }')"
}
peer1 aligned "$a_from" "$a_to" "$ours_aligned"
peer1 sliding "$s_from" "$s_to" "$ours_sliding"

echo
mkdir "$dir/dev"
"$drv" export "$ring" gw-000 "$a_from" "$a_to" "$dir/dev" >/dev/null
n=$(ls "$dir/dev" | wc -l)
go_med=$(for _ in $(seq "$RUNS"); do
	s=$(date +%s.%N)
	go tool pprof -proto "$dir"/dev/*.pb.gz >"$dir/go.pb.gz" 2>/dev/null
	awk -v a="$s" -v b="$(date +%s.%N)" 'BEGIN { print b - a }'
done | median)
dev_raw=$("$drv" merge "$ring" "$a_from" "$a_to" "$RUNS" raw json '{device="gw-000"}' |
	sed 's/seconds=\([^ ]*\).*/\1/' | tr , '\n' | median)
printf 'peer 2: go tool pprof -proto of one device-hour (%d profiles): %.3f s (median of %d)\n' \
	"$n" "$go_med" "$RUNS"
printf '  ours, same device and hour: render json over HTTP (span rollup) %s s, ours/peer2 = %.3f;\n' \
	"$ours_dev" "$(awk -v a="$ours_dev" -v b="$go_med" 'BEGIN { print a / b }')"
printf '  raw records only (in process, merge + render) %s s, ours/peer2 = %.3f\n' \
	"$dev_raw" "$(awk -v a="$dev_raw" -v b="$go_med" 'BEGIN { print a / b }')"
echo "uptime at end: $(uptime)"
