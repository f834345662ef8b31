#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Node.js JavaScript frames in the BPF sampler without perf maps (bpf/v8.h): node, with no
# flag, running tests/workloads/v8split.js (three handlers, each too big for TurboFan to
# inline; the script prints its own CPU accounting, the truth) under edgeprof-agent --sampler
# bpf at its default settings. One node started before the agent (>= 95 % of its main
# thread's samples name a script function, the handlers' shares within 3 pp of its
# accounting, or three standard deviations of the sampling error where the machine's load left
# fewer than 2,500 samples: tests/workloads/v8split_check.py), one started after it (>= 90 %
# named: its first samples, node's own start-up, come before its script runs). The fib
# frames carry the script's file, fib's first line and the [javascript] mapping; no perf map
# is written.
# Each node there is: /usr/bin/node (Debian 12's 18.20.4 in CI, V8 10.2 with its symbols in
# libnode.so.108; NodeSource's 20, V8 11.3, in the executable where that is installed), and
# build/node18-root's (bookworm's nodejs and libnode108 unpacked by tools/setup.sh,
# tools/deps/node18-amd64.target-list) when it is another version: both V8 layouts on one
# machine. The test's processes are sampled alone, in their own cgroup (tests/lib/bpf-cgroup.sh),
# the nodes at nice -10 (a busy machine left node a third of a CPU: 400 samples).
set -u
agent=$EP_BUILD/edgeprof-agent
probe=$EP_BUILD/tests/bpf-probe
work=$EP_TOP/tests/workloads/v8split.js
root18=$EP_TOP/build/node18-root
[ -x "$probe" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
grep -q "^CONFIG_BPF_V8=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_BPF_V8 off"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
command -v node >/dev/null || { echo "node not installed (nodejs)"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
[ -n "${EP_KEEP:-}" ] && echo "kept: $tmp" # EP_KEEP=1: the files stay, for a look
pids=
. "$EP_TOP/tests/lib/bpf-cgroup.sh"
trap bpf_test_cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
bpf_probe_or_skip
secs=${EP_NODE_SECONDS:-16}
bpf_own_cgroup edgeprof-bpf-node
fib_line=$(grep -n "^function fib(" "$work" | cut -d: -f1)
# One node under the agent: check_node TAG COMMAND...
check_node() {
	local tag=$1 before after apid n prof
	shift
	local node=("$@")
	echo "node $("${node[@]}" --version), V8 $("${node[@]}" -p process.versions.v8)"
	(cd "$tmp" && exec nice -n -10 "${node[@]}" "$work" "$((secs + 3))") >"$tmp/$tag.before.out" &
	before=$!
	pids=$before
	sleep 0.5
	"$agent" --once --seconds "$secs" --sampler bpf $only --output-dir "$tmp/$tag.o" 2>"$tmp/$tag.err" &
	apid=$!
	pids="$pids $apid"
	bpf_wait_sampling "$apid"
	sleep 1
	(cd "$tmp" && exec nice -n -10 "${node[@]}" "$work" "$((secs - 3))") >"$tmp/$tag.after.out" &
	after=$!
	pids="$pids $after"
	wait "$after" || fail "the node started after the agent exited with $?"
	wait "$apid" || { cat "$tmp/$tag.err"; fail "agent"; }
	wait "$before" || fail "the node started before the agent exited with $?"
	pids=
	ls /tmp/perf-"$before".map /tmp/perf-"$after".map 2>/dev/null && fail "a perf map was written"
	prof=$(ls "$tmp"/$tag.o/*.pb.gz)
	go tool pprof -raw -symbolize=none "$prof" 2>/dev/null >"$tmp/$tag.raw"
	grep -m1 -E "^ +[0-9]+: 0x[0-9a-f]+ M=[0-9]+ fib .*v8split.js:$fib_line s=$fib_line" "$tmp/$tag.raw" ||
		fail "no fib location with the script's file and fib's first line ($fib_line)"
	grep -q "\[javascript\]" "$tmp/$tag.raw" || fail "no [javascript] mapping"
	PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 "$EP_TOP/tests/workloads/v8split_check.py" \
		"$prof" "$tmp/$tag" "$before" "$after"
}

check_node system node || exit 1
v18=$(LD_LIBRARY_PATH=$root18/usr/lib/x86_64-linux-gnu "$root18/usr/bin/node" --version 2>/dev/null)
if [ -f "$root18/.complete" ] && [ -n "$v18" ] && [ "$v18" != "$(node --version)" ]; then
	check_node node18 env "LD_LIBRARY_PATH=$root18/usr/lib/x86_64-linux-gnu" "$root18/usr/bin/node" || exit 1
else
	echo "build/node18-root: none, or the same node as /usr/bin/node (tools/setup.sh fetches it)"
fi
