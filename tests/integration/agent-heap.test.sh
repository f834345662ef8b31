#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Heap profiles through the agent: a producer with EDGEPROF_PROFILES=heap (no EDGEPROF_OUTPUT)
# keeps its sampled-allocation table in <registry>/<pid>.heap; edgeprof-agent writes a
# <service>-heap-*.pb.gz snapshot each round (rounds of 1 s). The workload leaks
# 64 KiB every 10 ms in leak_here beside 8 MiB held steady by steady_hold:
#   - leak_here's inuse_space grows from the first round to the last (about 6.4 MB/s);
#   - `edgeprof diff FIRST LAST -i inuse_space` colours leak_here red (its share grew) and
#     steady_hold blue;
#   - the table is gone from the registry once the producer exits.
# About 8 s.
set -u
agent=$EP_BUILD/edgeprof-agent
lib=$EP_BUILD/libedgeprof.so
w=$EP_BUILD/tests/workloads/heapsplit
E=$EP_BUILD/edgeprof
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
grep -q '^CONFIG_PROFILE_HEAP=y' "$EP_BUILD/.config" || { echo "CONFIG_PROFILE_HEAP off"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
preload=$lib
if ldd "$lib" | grep -q libasan; then
	preload="$(ldd "$lib" | awk '/libasan/ {print $3}') $lib"
	export ASAN_OPTIONS=detect_leaks=0
fi
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$tmp/reg" "$tmp/out"
env LD_PRELOAD="$preload" EDGEPROF_REGISTRY="$tmp/reg" EDGEPROF_SERVICE=leaky \
	EDGEPROF_PROFILES=heap EDGEPROF_HEAP_RATE=16384 "$w" leak 6 >"$tmp/w.out" &
wpid=$!
pids+=("$wpid")
sleep 0.3
ls "$tmp/reg/$wpid.heap" >/dev/null || fail "no heap table in the registry"
"$agent" --sampler sigprof --round-seconds 1 --period-seconds 1 --jitter-percent 0 \
	--registry "$tmp/reg" --output-dir "$tmp/out" 2>"$tmp/agent.err" &
apid=$!
pids+=("$apid")
wait "$wpid" || fail "workload exited $?"
sleep 0.2
kill -TERM "$apid"
wait "$apid"
[ -e "$tmp/reg/$wpid.heap" ] && fail "the heap table outlived its process"
profiles=$(ls "$tmp"/out/leaky-heap-*.pb.gz 2>/dev/null | sort -t- -k4)
n=$(echo "$profiles" | grep -c . || true)
[ "$n" -ge 3 ] || { cat "$tmp/agent.err"; ls -la "$tmp/out" "$tmp/reg"; fail "$n heap profiles, want >= 3"; }
# file names end in -<sequence>.pb.gz: order by it
first=$(ls "$tmp"/out/leaky-heap-*.pb.gz | awk -F- '{print $NF, $0}' | sort -n | head -1 | cut -d' ' -f2)
last=$(ls "$tmp"/out/leaky-heap-*.pb.gz | awk -F- '{print $NF, $0}' | sort -n | sed -n '$p' | cut -d' ' -f2)
# the last whole round, not one cut by the producer's exit
prev=$(ls "$tmp"/out/leaky-heap-*.pb.gz | awk -F- '{print $NF, $0}' | sort -n | tail -2 | head -1 | cut -d' ' -f2)
echo "$n heap profiles; first $(basename "$first"), last whole $(basename "$prev")"
leak_mb() { go tool pprof -top -sample_index=inuse_space -unit=MB "$1" 2>/dev/null |
	awk '$NF == "leak_here" {sub("MB", "", $4); print $4}'; }
a=$(leak_mb "$first") b=$(leak_mb "$prev")
echo "leak_here inuse_space: first round ${a:-?} MB, later round ${b:-?} MB"
awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN {exit !(b > a + 3)}' || fail "leak_here did not grow"
"$E" diff "$first" "$prev" -i inuse_space -o "$tmp/diff.svg" || fail "edgeprof diff exited $?"
frame() { tr -d '\n' <"$tmp/diff.svg" | grep -o "<title>$1[^<]*</title><rect [^>]*>" | head -1; }
l=$(frame leak_here) s=$(frame steady_hold)
echo "diff: leak_here [$l]"
echo "diff: steady_hold [$s]"
[[ $l == *"share +"*'fill="rgb(250,'* ]] || fail "leak_here not red (grown) in the diff"
[[ $s == *"share -"*',250)"'* ]] || fail "steady_hold not blue (shrunk) in the diff"
echo PASS
