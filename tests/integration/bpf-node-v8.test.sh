#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Node.js JavaScript frames in the BPF sampler without perf maps (bpf/v8.h): node, with no
# flag, running tests/workloads/v8split.js (three handlers, each too big for TurboFan to inline; the script prints its own CPU
# accounting, the truth) under edgeprof-agent --sampler bpf at its default settings. One node
# started before the agent (>= 95 % of its main thread's samples name a script function, the
# handlers' shares within 3 pp of its accounting), one started after it (>= 90 % named: its
# first samples come before it is listed). The fib frames carry the script's file and the
# [javascript] mapping; no perf map is written.
# The node is /usr/bin/node: Debian 12's 18.20.4 (V8 10.2, its symbols in libnode.so.108) in
# CI, NodeSource's 20 (V8 11.3, in the executable) where that is installed. EP_NODE_ROOT=DIR
# runs DIR/usr/bin/node with DIR's libraries instead (bookworm's nodejs and libnode108
# unpacked there with dpkg -x: both versions on one machine).
set -u
agent=$EP_BUILD/edgeprof-agent
probe=$EP_BUILD/tests/bpf-probe
work=$EP_TOP/tests/workloads/v8split.js
node=(node)
if [ -n "${EP_NODE_ROOT:-}" ]; then
	node=(env "LD_LIBRARY_PATH=$EP_NODE_ROOT/usr/lib/x86_64-linux-gnu" "$EP_NODE_ROOT/usr/bin/node")
fi
[ -x "$probe" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
grep -q "^CONFIG_BPF_V8=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_BPF_V8 off"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
"${node[@]}" --version >/dev/null 2>&1 || { echo "node not installed (nodejs)"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
[ -n "${EP_KEEP:-}" ] && echo "kept: $tmp" # EP_KEEP=1: the files stay, for a look
pids=
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; [ -n "${EP_KEEP:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
fi
echo "node $("${node[@]}" --version), V8 $("${node[@]}" -p process.versions.v8)"
secs=${EP_NODE_SECONDS:-16}
(cd "$tmp" && exec "${node[@]}" "$work" "$((secs + 3))") >"$tmp/before.out" &
before=$!
pids=$before
sleep 0.5
"$agent" --once --seconds "$secs" --sampler bpf --output-dir "$tmp/o" 2>"$tmp/err" &
apid=$!
pids="$pids $apid"
# sampling has begun once the CPU events are open beside the mmap records' (2 per CPU)
for _ in $(seq 200); do
	n=$(ls -l "/proc/$apid/fd" 2>/dev/null | grep -c "perf_event")
	[ "$n" -ge "$((2 * $(nproc)))" ] && break
	sleep 0.1
done
sleep 1
(cd "$tmp" && exec "${node[@]}" "$work" "$((secs / 2))") >"$tmp/after.out" &
after=$!
pids="$pids $after"
wait "$after" || fail "the node started after the agent exited with $?"
wait "$apid" || { cat "$tmp/err"; fail "agent"; }
wait "$before" || fail "the node started before the agent exited with $?"
pids=
ls /tmp/perf-"$before".map /tmp/perf-"$after".map 2>/dev/null && fail "a perf map was written"
prof=$(ls "$tmp"/o/*.pb.gz)
go tool pprof -raw -symbolize=none "$prof" 2>/dev/null >"$tmp/raw"
grep -m1 -E "^ +[0-9]+: 0x[0-9a-f]+ M=[0-9]+ fib .*v8split.js" "$tmp/raw" ||
	fail "no fib location with the script's file"
	grep -q "\[javascript\]" "$tmp/raw" || fail "no [javascript] mapping"
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$prof" "$tmp" "$before" "$after" <<'PY'
import sys
import pprof_traces as pt
path, tmp, before, after = sys.argv[1:5]
H = ("fib_handler", "work_dict", "outer")
OF = {"fib": "fib_handler", "inner": "outer"}  # what they call, under their frame
SCRIPT = set(H) | set(OF) | {"run"}
ss = pt.samples(path)


def judge(what, pid, out):
    main = [s for s in ss if s.labels.get("pid") == pid and s.labels.get("thread") == pid]
    tot = sum(s.value for s in main) or 1
    named = 100 * sum(s.value for s in main if SCRIPT & set(s.frames)) / tot
    truth = {l.split()[0]: float(l.split()[1]) for l in open(out) if l.split()[0] in H}
    per = dict.fromkeys(H, 0.0)
    for s in main:
        h = next((OF.get(f, f) for f in s.frames if f in H or f in OF), None)
        if h:
            per[h] += s.value
    htot = sum(per.values()) or 1
    gap = max(abs(100 * per[h] / htot - truth[h]) for h in H)
    print(f"{what}: {len(main)} stacks, {tot / 1e9:.2f} s; script function named {named:.1f}%; "
          "shares " + " ".join(f"{h} {100 * per[h] / htot:.1f} (script {truth[h]:.1f})"
                               for h in H) + f"; max gap {gap:.1f} pp")
    return tot, named, gap


ok = True
tot, named, gap = judge("before the agent", before, tmp + "/before.out")
ok &= tot >= 5e9 and named >= 95 and gap <= 3
tot, named, gap = judge("after the agent", after, tmp + "/after.out")
ok &= tot >= 2e9 and named >= 90
for l in pt.header(path):
    if "v8_" in l:
        print(" ".join(w for w in l.split() if w.startswith("v8_")))
    elif "javascript" in l:
        print(l.strip())
sys.exit(0 if ok else 1)
PY
