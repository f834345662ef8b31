#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPU hotplug: a CPU taken offline while the BPF sampler runs is dropped with a log line, the
# sampler keeps running, and once the CPU is back it is sampled again: a workload pinned to it
# afterwards gets its samples. Also offline-and-back between two rescans (the event died but the
# CPU reads online). Then the agent: its mmap records follow the CPU too, so a program exec'd on
# it once it is back has its maps from the records (mmap_cpus=2 again, mmap_cpu_offline=1,
# maps_from_records>=1; before, that CPU's records stopped for good). The CPU is always put back
# online (trap).
set -u
probe=$EP_BUILD/tests/bpf-probe
work=$EP_BUILD/tests/workloads/bpf-work
cpu=1
online=/sys/devices/system/cpu/cpu$cpu/online
[ -x "$probe" ] && [ -x "$work" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf() and CPU hotplug"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed: tools/setup.sh"; exit 77; }
[ -w "$online" ] || { echo "CPU $cpu cannot go offline here (no $online)"; exit 77; }
tmp=$(mktemp -d)
pids=()
cleanup() {
	echo 1 >"$online" 2>/dev/null
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	tail -n 1 "$tmp/check"; exit 77
fi
[ "$(cat "$online")" = 1 ] || { echo "CPU $cpu is offline before the test"; exit 77; }

run_case() { # name, seconds offline (0.3: back before the sampler's next 2 s rescan)
	# the probe outlives the ~11 s script below by 5 s, for loaded machines where the 3 s
	# workload runs late
	local name=$1 off=$2 ppid wpid n
	"$probe" --seconds 16 --hz 499 >"$tmp/out.$name" 2>"$tmp/err.$name" &
	ppid=$!
	pids+=("$ppid")
	sleep 1
	echo 0 >"$online" || { echo "cannot take CPU $cpu offline"; return 2; }
	sleep "$off"
	echo 1 >"$online" || { echo "cannot bring CPU $cpu back"; return 1; }
	sleep 4 # the next rescan attaches to it again
	taskset -c "$cpu" "$work" split 3 1 &
	wpid=$!
	pids+=("$wpid")
	wait "$wpid"
	wait "$ppid" || { echo "$name: bpf-probe failed"; cat "$tmp/err.$name"; return 1; }
	grep -E "went offline|now sampling|CPUs online" "$tmp/err.$name"
	n=$(grep -c "^$wpid " "$tmp/out.$name")
	echo "$name: workload on CPU $cpu after it came back: $n samples (3 s at 499 Hz)"
	grep -q "CPU $cpu went offline" "$tmp/err.$name" || { echo "$name: offline not noticed"; return 1; }
	grep -q "now sampling 2 CPUs" "$tmp/err.$name" || { echo "$name: CPU not re-attached"; return 1; }
	# ~1500 when idle; 269 seen at load average 9: the defect this finds is none at all
	[ "$n" -ge 100 ] || { echo "$name: CPU $cpu not sampled again"; return 1; }
}

agent_case() {
	local agent=$EP_BUILD/edgeprof-agent apid wpid
	[ -x "$agent" ] || { echo "agent: $agent not built"; return 1; }
	mkdir -p "$tmp/agent"
	"$agent" --once --seconds 12 --sampler bpf --hz 499 --output-dir "$tmp/agent" \
		>"$tmp/agent.log" 2>&1 &
	apid=$!
	pids+=("$apid")
	sleep 1
	echo 0 >"$online" || { echo "cannot take CPU $cpu offline"; return 2; }
	sleep 3
	echo 1 >"$online" || { echo "cannot bring CPU $cpu back"; return 1; }
	sleep 4 # the next rescans open an event on it again
	taskset -c "$cpu" "$work" split 2 1 &
	wpid=$!
	pids+=("$wpid")
	wait "$wpid"
	wait "$apid" || { echo "agent failed"; cat "$tmp/agent.log"; return 1; }
	PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/agent" "$wpid" <<'PY'
import glob, re, sys
import pprof_traces as pt
path, pid = glob.glob(sys.argv[1] + "/*.pb.gz")[0], sys.argv[2]
com = " ".join(pt.header(path))
val = lambda k: int(re.search(k + r"=(\d+)", com).group(1))
ss = [s for s in pt.samples(path, index="samples") if s.labels.get("pid", "").strip("[]") == pid]
n = sum(s.value for s in ss)
named = sum(s.value for s in ss if s.leaf in ("work_a", "work_b", "work_c"))
print(f"agent: mmap_cpus={val('mmap_cpus')} mmap_cpu_offline={val('mmap_cpu_offline')} "
      f"maps_from_records={val('maps_from_records')}; workload on CPU 1 afterwards: {n:.0f} "
      f"samples, {named:.0f} named")
ok = val("mmap_cpus") == 2 and val("mmap_cpu_offline") >= 1 and val("maps_from_records") >= 1
sys.exit(0 if ok and n >= 100 and named >= 0.9 * n else 1)  # n: see case() above
PY
}

rc=0
run_case long 3 || rc=1
run_case blink 0.3 || rc=1
agent_case || rc=1
[ "$rc" = 0 ] && echo "PASS: CPU hotplug followed" || echo "FAIL"
exit "$rc"
