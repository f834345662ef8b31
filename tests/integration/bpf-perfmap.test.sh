#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# JIT frames named from perf maps (agent/core/perfmap.h): node --perf-basic-prof running
# tests/workloads/jitsplit.js under edgeprof-agent --sampler bpf. >= 95 % of the node main
# thread's samples name a script function; fib's frame carries the script's file and line and
# the perf map as its mapping; the profile's comment counts the maps read. With --no-symbolize
# the JIT frames are still named (only the device can), the native ones not.
set -u
agent=$EP_BUILD/edgeprof-agent
probe=$EP_BUILD/tests/bpf-probe
[ -x "$probe" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
grep -q "^CONFIG_PERFMAP=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_PERFMAP off"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
command -v node >/dev/null || { echo "node not installed (nodejs)"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
npid=
cleanup() { [ -n "$npid" ] && kill "$npid" 2>/dev/null; wait 2>/dev/null; [ -n "$npid" ] && rm -f "/tmp/perf-$npid.map"; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
fi
(cd "$tmp" && exec node --perf-basic-prof --no-turbo-inlining "$EP_TOP/tests/workloads/jitsplit.js" 8) >"$tmp/node.out" &
npid=$!
sleep 1
# Beside it, an agent with --no-symbolize: it leaves native code to the collector's debug files,
# but a perf map lives and dies with its process, so JIT frames are named on the device all the
# same (at the same time: the first agent's end, naming node's 99 MB, may outlast node; node
# runs 8 s so that both rounds end while it runs: a perf map is read at the round's end).
"$agent" --once --seconds 2 --sampler bpf --hz 499 --no-symbolize --output-dir "$tmp/o2" \
	2>"$tmp/err2" &
apid=$!
"$agent" --once --seconds 4 --sampler bpf --hz 499 --output-dir "$tmp/o" 2>"$tmp/err" ||
	{ cat "$tmp/err"; fail "agent"; }
wait "$apid" || { cat "$tmp/err2"; fail "agent --no-symbolize"; }
go tool pprof -raw -symbolize=none "$tmp"/o2/*.pb.gz 2>/dev/null >"$tmp/raw2"
grep -q -E "^ +[0-9]+: 0x[0-9a-f]+ M=[0-9]+ fib " "$tmp/raw2" ||
	fail "--no-symbolize: fib not named from the perf map"
grep -q -E " M=[0-9]+ (node::Start|uv_run|Builtins_)" "$tmp/raw2" &&
	fail "--no-symbolize: a native function was named on the device"
echo "--no-symbolize: JIT frames named ($(grep -c -E ' M=[0-9]+ fib ' "$tmp/raw2") fib locations), native code left unnamed"
wait "$npid" || fail "node exited with $?"
cat "$tmp/node.out"
prof=$(ls "$tmp"/o/*.pb.gz)
go tool pprof -raw -symbolize=none "$prof" 2>/dev/null >"$tmp/raw"
line=$(grep -n "^function fib" "$EP_TOP/tests/workloads/jitsplit.js" | cut -d: -f1)
grep -m2 -E "^ +[0-9]+: 0x[0-9a-f]+ M=[0-9]+ fib .*jitsplit.js:$line s=$line" "$tmp/raw" ||
	fail "no fib location with the script's file and line $line"
grep -q "/tmp/perf-$npid.map .*\[FN\]" "$tmp/raw" || fail "no mapping named after the perf map"
PYTHONPATH="$EP_TOP/tests/workloads:$EP_TOP/tests/bench" /usr/bin/python3 - "$prof" "$npid" "$tmp/node.out" <<'PY'
import sys
import pprof_traces as pt
path, pid, out = sys.argv[1], sys.argv[2], sys.argv[3]
SCRIPT = {"fib", "work_dict", "outer", "inner", "run"}
main = [s for s in pt.samples(path) if s.labels.get("pid") == pid and s.labels.get("thread") == pid]
tot = sum(s.value for s in main)
named = sum(s.value for s in main if SCRIPT & set(s.frames))
print(f"node main thread: {len(main)} stacks, {tot / 1e9:.2f} s; script function named "
      f"{100 * named / max(tot, 1):.1f}%")
unnamed = {}
for s in main:
    if not SCRIPT & set(s.frames):
        k = " < ".join(s.frames[:10])
        unnamed[k] = unnamed.get(k, 0) + s.value
for k, v in sorted(unnamed.items(), key=lambda kv: -kv[1])[:4]:
    print(f"  unnamed {100 * v / max(tot, 1):.1f}%: {k}")
if named < 0.95 * tot:
    print("\n".join(pt.header(path)))
c = [l for l in pt.header(path) if "perfmap:" in l]
print(c[0].strip() if c else "no perfmap comment")
ok = tot >= 0.3e9 and named >= 0.95 * tot and c and "files=0 " not in c[0]
sys.exit(0 if ok else 1)
PY
