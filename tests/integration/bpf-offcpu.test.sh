#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Off-CPU time from the BPF sampler (edgeprof-agent --profiles cpu,offcpu): threads that block
# in known stacks for known times (tests/workloads/wallsplit.c: nanosleep, poll, select, a
# pipe's read, pthread_join) are reported, per thread, within 3 % of the blocked time the
# workload measured around its calls, and their stacks hold the functions that blocked
# (read_e, poll_b, sleep_a: the program's frames above libc's). The agent writes <service>-offcpu-*
# beside <service>-cpu-*. Needs root; mounts tracefs on /sys/kernel/tracing if it is not (and
# unmounts it after). About 10 s (the round outlasts the workload on a loaded machine: a blocked
# call is reported when it returns).
set -u
agent=$EP_BUILD/edgeprof-agent
w=$EP_BUILD/tests/workloads/wallsplit
probe=$EP_BUILD/tests/bpf-probe
[ -x "$probe" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
mounted=0
cleanup() {
	[ -n "${apid:-}" ] && kill "$apid" 2>/dev/null
	wait 2>/dev/null
	[ $mounted = 1 ] && umount /sys/kernel/tracing
	rm -rf "$tmp"
}
trap cleanup EXIT
if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	tail -n 1 "$tmp/check"; exit 77
fi
if [ ! -e /sys/kernel/tracing/events/sched/sched_switch/id ]; then
	if ! mount -t tracefs nodev /sys/kernel/tracing 2>"$tmp/mount"; then
		echo "cannot mount tracefs: $(cat "$tmp/mount")"; exit 77
	fi
	mounted=1
fi

mkdir -p "$tmp/out"
# the agent loads the processes' unwind tables first: the workload starts once it runs
"$agent" --sampler bpf --profiles cpu,offcpu --once --seconds 9 --bpf-ringbuf-kb 4096 \
	--registry "$tmp/reg" --output-dir "$tmp/out" 2>"$tmp/agent.log" &
apid=$!
# attached once it says so (a block that began before is not seen); the tables load after
for ((i = 0; i < 200; i++)); do
	grep -q "off-CPU time on" "$tmp/agent.log" && break
	sleep 0.1
done
grep -q "off-CPU time on" "$tmp/agent.log" || { echo "agent did not start off-CPU:"; cat "$tmp/agent.log"; exit 1; }
sleep 1
"$w" 1.2 >"$tmp/w.out"
wait $apid || { echo "agent failed:"; tail -5 "$tmp/agent.log"; exit 1; }
apid=
grep -h "BPF sampler unavailable\|off-CPU" "$tmp/agent.log"
off=$(find "$tmp/out" -name '*-offcpu-*.pb.gz' | head -1)
if [ -z "$off" ] || [ -z "$(find "$tmp/out" -name '*-cpu-*.pb.gz')" ]; then
	echo "no offcpu and cpu profiles"; ls "$tmp/out"; exit 1
fi

PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/w.out" "$off" <<'PY'
import sys, collections
import pprof_traces as pt
out, prof = sys.argv[1], sys.argv[2]
truth, tids = {}, {}
for line in open(out):
    f = line.split()
    if f[0] == "tid":
        tids[f[1]] = f[2]
    else:
        truth[f[0]] = int(f[1])
ss = pt.samples(prof, index="offcpu", symbolize=True)
by_tid = collections.Counter()
for s in ss:
    by_tid[s.labels.get("thread", "")] += s.value
ok = True
# per thread: what blocked there (main: join_all; work_main is CPU)
want = collections.Counter()
for fn in ("sleep_a", "poll_b", "select_d", "read_e", "join_all"):
    want[tids[fn]] += truth[fn]
for tid, ns in sorted(want.items()):
    got = by_tid.get(tid, 0)
    err = 100.0 * (got - ns) / ns
    fns = [f for f in truth if tids.get(f) == tid and f != "work_main"]
    print(f"thread {tid} ({'+'.join(fns)}): {got/1e6:.1f} ms off-CPU vs {ns/1e6:.1f} ms "
          f"measured ({err:+.2f}%, want within 3%)")
    ok &= abs(err) <= 3
# sleep_a blocks first, before the process's tables are listed (its stacks are walked by frame
# pointers then): libc's nanosleep -> clock_nanosleep keep no frame pointer, and sleep_a was
# lost for part of its time (bpf/leaf.c walks the 64 stack words an off-CPU record carries)
for fn in ("read_e", "poll_b", "sleep_a"):
    if truth[fn] < 100e6:  # a starved machine overran sleep_a's half: too short to weigh
        print(f"stacks through {fn}: {truth[fn]/1e6:.1f} ms measured: too short, not checked")
        continue
    got = sum(s.value for s in ss if s.labels.get("thread") == tids[fn] and fn in s.frames)
    err = 100.0 * (got - truth[fn]) / truth[fn]
    # one blocked call (20 ms asked; 25.0 ms as it lasted in one CI run under load) is at
    # times not reported at all, in a quiet CI run too: its thread's total stays within 3 %,
    # one stack's may not (the cause is open in issue 35's note)
    print(f"stacks through {fn}: {got/1e6:.1f} ms vs {truth[fn]/1e6:.1f} ms ({err:+.2f}%, "
          f"want within 3% or one call, 30 ms)")
    ok &= abs(err) <= 3 or abs(got - truth[fn]) <= 30e6
head = " ".join(pt.header(prof, "offcpu"))
print([l for l in head.split("edgeprof ") if l.startswith("offcpu")][0][:200])
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
