#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# edgeprof-agent as a daemon: rounds of 2 s every 3 s (no jitter) write one profile per round,
# each about 2 s long, with the producer paused between rounds (its samples cover the rounds
# only); SIGTERM in the middle of a round writes that partial round and exits 0.
set -u
agent=$EP_BUILD/edgeprof-agent
lib=$EP_BUILD/libedgeprof.so
split=$EP_BUILD/tests/workloads/split
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
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
env LD_PRELOAD="$preload" EDGEPROF_REGISTRY="$tmp/reg" EDGEPROF_SERVICE=roundsvc EDGEPROF_HZ=997 \
	"$split" --seconds 60 >/dev/null &
pids+=($!)
sleep 0.3
"$agent" --sampler sigprof --round-seconds 2 --period-seconds 3 --jitter-percent 0 \
	--registry "$tmp/reg" --output-dir "$tmp/out" 2>"$tmp/agent.err" &
apid=$!
pids+=("$apid")
# rounds start at 0, 3, 6, 9 s: at 10 s three whole rounds are written, the fourth is running
sleep 10
n=$(ls "$tmp"/out/roundsvc-cpu-*.pb.gz 2>/dev/null | wc -l)
[ "$n" -ge 2 ] || { cat "$tmp/agent.err"; fail "$n profiles after 10 s, want >= 2"; }
kill -TERM "$apid"
for _ in $(seq 1 100); do kill -0 "$apid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$apid" 2>/dev/null && fail "agent did not stop on SIGTERM"
wait "$apid" || fail "agent exit code on SIGTERM"
cat "$tmp/agent.err"
m=$(ls "$tmp"/out/roundsvc-cpu-*.pb.gz | wc -l)
[ "$m" -gt "$n" ] || fail "SIGTERM mid-round wrote no partial profile ($n before, $m after)"

PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp"/out/roundsvc-cpu-*.pb.gz <<'PY'
import re, sys
import pprof_traces as pt
ok = True
paths = sorted(sys.argv[1:])
for i, path in enumerate(paths):
    head = pt.header(path)
    dur = [l for l in head if l.startswith("Duration:")][0]
    m = re.search(r"Duration: ([0-9.]+)(ms|s)", dur)
    secs = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    ss = pt.samples(path)
    cpu = sum(s.value for s in ss) / 1e9
    last = i == len(paths) - 1
    print(f"{path.split('/')[-1]}: round {secs:.2f}s, cpu {cpu:.2f}s{' (partial)' if last else ''}")
    if not last:
        ok &= 1.5 <= secs <= 3.0
    # one thread, paused between rounds: at most the round's length of CPU (plus one period)
    ok &= cpu <= secs + 0.2
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
