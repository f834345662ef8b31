#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# JIT frames from perf maps: node --perf-basic-prof running tests/workloads/jitsplit.js (three
# handlers, fib / work_dict / outer -> inner, with the script's own CPU accounting), profiled in
# the same run by edgeprof-agent --sampler bpf (default settings but the round: one round of
# --seconds) and by perf record -g (frame pointers) reading the same /tmp/perf-PID.map through
# perf script. Prints, for each: the share of the node process's samples (and of its main
# thread's) that name a script function, the handlers' shares against the script's own, and
# ours/perf ratios. tests/bench/jit-bench.py does the arithmetic.
# TurboFan inlines small hot callees into their caller and the perf map names the code object,
# not the functions inlined in it: the handlers' shares are only measurable with
# --node-flags --no-turbo-inlining (what perf sees is the same either way; the default keeps
# node's default).
#   tests/bench/jit-bench.sh [--build build/host-x86_64] [--seconds 6] [--reps 3] [--hz 99]
#                            [--node-flags '--no-turbo-inlining']
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build/host-x86_64 seconds=6 reps=3 hz= nflags=
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--hz) hz=$2; shift 2 ;;
	--node-flags) nflags=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--seconds N] [--reps N] [--hz N] [--node-flags F]" >&2; exit 2 ;;
	esac
done
agent=$build/edgeprof-agent
[ -x "$agent" ] || { echo "build first: make -j2 all-tests"; exit 1; }
command -v perf >/dev/null || { echo "perf not installed (linux-perf)"; exit 1; }
command -v node >/dev/null || { echo "node not installed (nodejs)"; exit 1; }
tmp=$(mktemp -d)
npid= apid= ppid_=
cleanup() {
	for p in $npid $apid $ppid_; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "$npid" ] && rm -f "/tmp/perf-$npid.map"
	rm -rf "$tmp"
}
trap cleanup EXIT
ahz=${hz:+--hz $hz}
phz=${hz:-$("$agent" --version | tr ' ' '\n' | sed -n 's/^sample-hz=//p')}
echo "node $(node --version), perf $(perf --version | awk '{print $3}'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), perf -F $phz, node --perf-basic-prof $nflags"
for r in $(seq 1 "$reps"); do
	# shellcheck disable=SC2086 # flags, split on purpose
	(cd "$tmp" && exec node --perf-basic-prof $nflags "$top/tests/workloads/jitsplit.js" $((seconds + 2))) >"$tmp/node.$r" &
	npid=$!
	sleep 1 # past start-up: the handlers are compiled and in the map
	"$agent" --once --seconds "$seconds" --sampler bpf $ahz --output-dir "$tmp/o$r" 2>"$tmp/agent.$r" &
	apid=$!
	perf record -q -F "$phz" -g -p "$npid" -o "$tmp/perf.$r" -- sleep "$seconds" 2>/dev/null &
	ppid_=$!
	wait "$apid" "$ppid_"
	apid= ppid_=
	wait "$npid" || { echo "node exited with $?"; exit 1; }
	perf script -i "$tmp/perf.$r" -F pid,tid,ip,sym 2>/dev/null >"$tmp/perf.$r.txt"
	rm -f "/tmp/perf-$npid.map"
	echo "$r $npid $(ls "$tmp/o$r"/*.pb.gz) $tmp/perf.$r.txt $tmp/node.$r" >>"$tmp/runs"
	npid=
done
PYTHONPATH="$top/tests/workloads" python3 "$top/tests/bench/jit-bench.py" "$tmp/runs"
