#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# JIT names of a node process that exits before the round ends (agent/core/perfmap.h): its
# /tmp/perf-PID.map can no longer be opened through /proc/PID/root when the round's names are
# given, so it is read while the process runs (its first JIT-page sample, and as it grows) and,
# after the exit, the rest is read from the same file (same device and inode) in /tmp. The
# machine is kept busy (one shell loop per CPU) so the round ends well after node's exit.
# Of node's main-thread samples running JavaScript, <= 5 % have an unnamed JIT frame and >= 60 %
# name a script function (the rest: node's bootstrap); the perf map's comment is there.
set -u
agent=$EP_BUILD/edgeprof-agent
probe=$EP_BUILD/tests/bpf-probe
[ -x "$probe" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
grep -q "^CONFIG_PERFMAP=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_PERFMAP off"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
command -v node >/dev/null || { echo "node not installed (nodejs)"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
npid= apid= busy=()
cleanup() {
	for p in $apid "${busy[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	[ -n "$npid" ] && rm -f "/tmp/perf-$npid.map"
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
fi
ncpu=$(nproc)
for _ in $(seq "$ncpu"); do
	sh -c 'while :; do :; done' &
	busy+=("$!")
done
"$agent" --once --seconds 12 --sampler bpf --hz 499 --output-dir "$tmp/o" 2>"$tmp/err" &
apid=$!
# loaded: the sampler's CPU events are open (one per CPU, beside the mmap records' one per CPU)
for _ in $(seq 300); do
	n=$(ls -l "/proc/$apid/fd" 2>/dev/null | grep -c 'perf_event')
	[ "$n" -ge $((2 * ncpu)) ] && break
	sleep 0.1
done
[ "$n" -ge $((2 * ncpu)) ] || { cat "$tmp/err"; fail "the agent did not start sampling"; }
(cd "$tmp" && exec node --perf-basic-prof --no-turbo-inlining "$EP_TOP/tests/workloads/jitsplit.js" 2) >"$tmp/node.out" &
npid=$!
wait "$npid" || fail "node exited with $?"
kill -0 "$apid" 2>/dev/null || fail "the round ended before node exited: the case is not forced"
echo "node $npid exited; the round goes on"
wait "$apid" || { cat "$tmp/err"; fail "agent"; }
apid=
cat "$tmp/node.out"
prof=$(ls "$tmp"/o/*.pb.gz); [ -n "${KEEP:-}" ] && echo "kept $prof"
PYTHONPATH="$EP_TOP/tests/workloads:$EP_TOP/tests/bench" /usr/bin/python3 - "$prof" "$npid" <<'PY'
import re, sys
import pprof_traces as pt
path, pid = sys.argv[1], sys.argv[2]
SCRIPT = {"fib", "work_dict", "outer", "inner", "run"}
ENTRY = ("Builtins_JSEntry", "Builtins_InterpreterEntryTrampoline")
# The samples running JavaScript (node's own bootstrap code too): their JIT frames must be named
# (an unnamed one is "<unknown>", or the perf map's mapping without a function).
main = [s for s in pt.samples(path) if s.labels.get("pid") == pid and s.labels.get("thread") == pid]
js = [s for s in main if SCRIPT & set(s.frames) or any(f.startswith(ENTRY) for f in s.frames)]
tot = sum(s.value for s in js)
unnamed = sum(s.value for s in js
              if any(f.startswith("<unknown>") or f.startswith("[perf-") for f in s.frames))
script = sum(s.value for s in js if SCRIPT & set(s.frames))
print(f"node main thread: {sum(s.value for s in main) / 1e9:.2f} s, running JS {tot / 1e9:.2f} s; "
      f"of that, an unnamed JIT frame {100 * unnamed / max(tot, 1):.1f}%, a script function "
      f"{100 * script / max(tot, 1):.1f}%")
c = [l.strip() for l in pt.header(path) if "perfmap:" in l]
print(c[0] if c else "no perfmap comment")
# after_exit: what was appended after the last read while node ran (0 when that read had it all)
ok = tot >= 0.15e9 and unnamed <= 0.05 * tot and script >= 0.6 * tot and bool(c)
sys.exit(0 if ok else 1)
PY
