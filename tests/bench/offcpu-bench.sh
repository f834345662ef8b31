#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Off-CPU profiling overhead on a context-switch-heavy load, `perf bench sched pipe` (two tasks
# passing a token through pipes, pinned to CPU 0: every operation blocks and switches twice),
# in the same run:
#   base          the bench alone
#   edgeprof      edgeprof-agent --sampler bpf --profiles offcpu (system-wide), default threshold
#   edgeprof-all  the same with --offcpu-min-us 0: every blocked system call sent with its stack
#   perf          perf record -a -e sched:sched_switch -g (system-wide, a stack per switch)
#   tests/bench/offcpu-bench.sh [--build build/host-x86_64] [--loops 100000] [--reps 3]
# The cost is CPU time per operation: the bench's own (user + system: the BPF programs and
# perf's kernel side run in the switching tasks) plus the profiler's process over the same time
# (the agent's, from /proc/PID/stat; perf record's, which time(1) counts with its child), as
# wall time per operation swings with the load of a shared machine. Prints the medians, the
# overhead over base, and each edgeprof row's overhead as a ratio of perf's (goal: <= 1/3), with
# every run's value. Rows interleave (one of each per repetition). Needs root, and tracefs on
# /sys/kernel/tracing (mounted if absent, unmounted after).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build/host-x86_64 loops=100000 reps=3
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--loops) loops=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--loops N] [--reps N]" >&2; exit 2 ;;
	esac
done
agent=$build/edgeprof-agent
[ -x "$agent" ] || { echo "build first: make -j2 all-tests"; exit 1; }
command -v perf >/dev/null || { echo "perf not installed (linux-perf)"; exit 1; }
tmp=$(mktemp -d)
mounted=0
apid=
cleanup() {
	[ -n "$apid" ] && kill "$apid" 2>/dev/null && wait "$apid" 2>/dev/null
	[ $mounted = 1 ] && umount /sys/kernel/tracing
	rm -rf "$tmp"
}
trap cleanup EXIT
if [ ! -e /sys/kernel/tracing/events/sched/sched_switch/id ]; then
	mount -t tracefs nodev /sys/kernel/tracing && mounted=1
fi
tck=$(getconf CLK_TCK)

# CPU seconds (user + sys, children waited for) of CMD, then its output in $tmp/out
cpu_of() {
	/usr/bin/time -f '%U %S' -o "$tmp/time" "$@" >"$tmp/out" 2>&1
	awk '{print $1 + $2}' "$tmp/time"
}
bench=(taskset -c 0 perf bench sched pipe -l "$loops")
proc_cpu() { awk -v t="$tck" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
per_op_us() { awk -v c="$1" -v n="$loops" 'BEGIN {printf "%.3f", 1e6 * c / n}'; }

# the agent, running and past its start (tables loaded), for the duration of one bench
with_agent() {
	local a0 a1 c
	"$agent" --sampler bpf --profiles offcpu "$@" --once --seconds 600 --bpf-ringbuf-kb 4096 \
		--registry "$tmp/reg" --output-dir "$tmp/odir" 2>"$tmp/agent.log" &
	apid=$!
	sleep 2
	a0=$(proc_cpu "$apid")
	c=$(cpu_of "${bench[@]}")
	a1=$(proc_cpu "$apid")
	kill "$apid"
	wait "$apid" 2>/dev/null || true
	apid=
	per_op_us "$(awk -v c="$c" -v a="$a0" -v b="$a1" 'BEGIN {print c + b - a}')"
}

declare -A res
rows="base edgeprof edgeprof-all perf"
for ((r = 0; r < reps; r++)); do
	res[base]+="$(per_op_us "$(cpu_of "${bench[@]}")") "
	res[edgeprof]+="$(with_agent) "
	res[edgeprof-all]+="$(with_agent --offcpu-min-us 0) "
	res[perf]+="$(per_op_us "$(cpu_of perf record -q -a -e sched:sched_switch -g \
		-o "$tmp/perf.data" -- taskset -c 0 perf bench sched pipe -l "$loops")") "
	rm -f "$tmp/perf.data"
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
base=$(echo "${res[base]}" | median)
perf_ov=$(echo "${res[perf]}" | median | awk -v b="$base" '{print $1 - b}')
printf '%-13s %12s %10s %8s   (perf bench sched pipe -l %s, %s reps, medians)\n' \
	row "CPU us/op" overhead "vs perf" "$loops" "$reps"
for row in $rows; do
	m=$(echo "${res[$row]}" | median)
	awk -v row="$row" -v m="$m" -v b="$base" -v p="$perf_ov" 'BEGIN {
		printf "%-13s %12.3f %+9.1f%% %8s", row, m, 100 * (m - b) / b,
			(row ~ /^edgeprof/ && p > 0) ? sprintf("%.2fx", (m - b) / p) : "" }'
	echo "   runs: ${res[$row]}"
done
