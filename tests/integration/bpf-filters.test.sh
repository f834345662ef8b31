#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# In-kernel filters include and exclude what they should: pid list, comm prefix, cgroup v2,
# kernel stacks off, and the idle task (pid 0) left out by default.
set -u
probe=$EP_BUILD/tests/bpf-probe
work=$EP_BUILD/tests/workloads/bpf-work
[ -x "$probe" ] && [ -x "$work" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
tmp=$(mktemp -d)
pids=()
cg=
# The cgroup v2 hierarchy: /sys/fs/cgroup, or .../unified on a hybrid set-up.
cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	if [ -n "$cg" ] && [ -d "$cg" ]; then
		while read -r p; do echo "$p" >"$cg2/cgroup.procs"; done <"$cg/cgroup.procs"
		rmdir "$cg"
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }

"$work" split 30 &
a=$!
"$work" syscall 30 &
b=$!
pids+=("$a" "$b")
sleep 0.3

# pids of the samples (column 1), counted per pid.
probe_pids() { "$probe" --seconds 1.5 --hz 199 "$@" 2>"$tmp/err" | awk '!/^#/ {print $1}' | sort | uniq -c; }

echo "-- unfiltered: both workloads, never pid 0"
probe_pids >"$tmp/all"
sort -rn "$tmp/all" | head -n 5
grep -q " $a\$" "$tmp/all" || fail "split workload $a missing system-wide"
grep -q " $b\$" "$tmp/all" || fail "syscall workload $b missing system-wide"
grep -q " 0\$" "$tmp/all" && fail "idle (pid 0) sampled without --idle"

echo "-- --pid $a: only it"
probe_pids --pid "$a" >"$tmp/pid"
cat "$tmp/pid"
[ "$(wc -l <"$tmp/pid")" = 1 ] && grep -q " $a\$" "$tmp/pid" || fail "pid filter"

echo "-- --pid $a --pid $b: both, nothing else"
probe_pids --pid "$a" --pid "$b" >"$tmp/pids"
cat "$tmp/pids"
[ "$(wc -l <"$tmp/pids")" = 2 ] || fail "two-pid filter"

echo "-- --comm bpfw-sys: only the syscall workload"
probe_pids --comm bpfw-sys >"$tmp/comm"
cat "$tmp/comm"
[ "$(wc -l <"$tmp/comm")" = 1 ] && grep -q " $b\$" "$tmp/comm" || fail "comm filter"

echo "-- --no-kernel: no kernel frames even for the syscall workload"
"$probe" --seconds 1.5 --hz 199 --pid "$b" --no-kernel 2>/dev/null >"$tmp/nok"
[ -s "$tmp/nok" ] || fail "no samples with --no-kernel"
grep -q ';k:' "$tmp/nok" && fail "kernel frames with --no-kernel"
"$probe" --seconds 1.5 --hz 199 --pid "$b" 2>/dev/null >"$tmp/k"
grep -q ';k:' "$tmp/k" || fail "no kernel frames by default"

if [ -n "$cg2" ] && [ -w "$cg2/cgroup.procs" ]; then
	echo "-- --cgroup: only the process moved into a new cgroup"
	cg=$cg2/edgeprof-bpf-test-$$
	mkdir "$cg" || fail "mkdir $cg"
	echo "$a" >"$cg/cgroup.procs" || fail "moving $a into $cg"
	probe_pids --cgroup "$cg" >"$tmp/cg"
	cat "$tmp/cg"
	[ "$(wc -l <"$tmp/cg")" = 1 ] && grep -q " $a\$" "$tmp/cg" || fail "cgroup filter"
	# Its samples carry the cgroup (container) label, with exe and comm.
	"$probe" --seconds 1 --hz 199 --pid "$a" 2>/dev/null | grep '^#first' >"$tmp/labels"
	cat "$tmp/labels"
	grep -q " cgroup=/edgeprof-bpf-test-$$\( \|\$\)" "$tmp/labels" || fail "cgroup label"
	grep -q " exe=$work\( \|\$\)" "$tmp/labels" || fail "exe label"
	grep -q " comm=bpfw-split\( \|\$\)" "$tmp/labels" || fail "comm label"
	# The agent's --bpf-cgroup: its profile holds that process only, the other one runs beside
	agent=$EP_BUILD/edgeprof-agent
	mkdir "$tmp/agent"
	"$agent" --once --seconds 2 --sampler bpf --bpf-cgroup "$cg" --output-dir "$tmp/agent" \
		2>"$tmp/agent.err" || { cat "$tmp/agent.err"; fail "agent --bpf-cgroup"; }
	go tool pprof -raw "$tmp"/agent/*.pb.gz 2>/dev/null | grep -o 'pid:\[[0-9]*\]' | sort |
		uniq -c >"$tmp/agent.pids"
	echo "-- edgeprof-agent --bpf-cgroup: pids of its samples"
	cat "$tmp/agent.pids"
	[ "$(wc -l <"$tmp/agent.pids")" = 1 ] && grep -q "pid:\[$a\]" "$tmp/agent.pids" ||
		fail "agent --bpf-cgroup"
	"$agent" --once --seconds 1 --bpf-cgroup /proc 2>"$tmp/agent.err" && fail "--bpf-cgroup /proc taken"
	grep -q "not a cgroup v2 directory" "$tmp/agent.err" || fail "no clear error for --bpf-cgroup /proc"
else
	echo "-- cgroup v2 not writable here: cgroup filter not tested"
fi
echo "bpf filters: ok"
