#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Debian's python3.11 under LD_PRELOAD=libedgeprof.so (standalone): the samples carry the
# script's own functions (agent/lib/pyframes.h) in place of _PyEval_EvalFrameDefault, named with
# file, first line and current line. tests/workloads/pysplit.py runs three handlers (fib, work_dict,
# outer -> inner) and prints its own CPU accounting: >= 95 % of the samples name a script
# function, the handlers' shares are within 3 pp of the script's, the chain from the native
# main through <module> to the handler is whole, and the script's output and exit status are
# those of a run without the library.
set -u
lib=$EP_BUILD/libedgeprof.so
py=/usr/bin/python3.11
work=$EP_TOP/tests/workloads/pysplit.py
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
grep -q "^CONFIG_PYFRAMES=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_PYFRAMES off"; exit 77; }
[ -x "$py" ] || { echo "python3.11 not installed"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$py" "$work" 1 3 >"$tmp/plain.out"
plain_rc=$?
env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/cpu.pb.gz" EDGEPROF_HZ=997 "$py" "$work" 10 3 cpu \
	>"$tmp/prof.out"
prof_rc=$?
[ "$plain_rc" = 3 ] && [ "$prof_rc" = 3 ] || fail "exit status $prof_rc under the library, $plain_rc without"
[ "$(cut -d' ' -f1 "$tmp/plain.out")" = "$(cut -d' ' -f1 "$tmp/prof.out")" ] ||
	fail "output differs: $(cat "$tmp/prof.out")"
cat "$tmp/prof.out"
# the location's line is fib's body (the frame's line), s= its first line
line=$(grep -n "^def fib" "$work" | cut -d: -f1)
go tool pprof -raw -symbolize=none "$tmp/cpu.pb.gz" 2>/dev/null | grep -m2 -E " fib .*pysplit.py:$((line + 1)) s=$line" ||
	fail "no fib location with the script's file and lines"
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/cpu.pb.gz" "$tmp/prof.out" <<'PY'
import sys
import pprof_traces as pt
path, out = sys.argv[1:3]
H = ("fib", "work_dict", "outer")
SCRIPT = set(H) | {"inner", "run", "main", "<module>"}
truth = {l.split()[0]: float(l.split()[1]) for l in open(out) if l.split()[0] in H}
ss = pt.samples(path)
tot = sum(s.value for s in ss)
named = sum(s.value for s in ss if SCRIPT & set(s.frames))
whole = sum(s.value for s in ss if "<module>" in s.frames and "Py_RunMain" in s.frames)
per = dict.fromkeys(H, 0.0)
for s in ss:
    h = next((f if f != "inner" else "outer" for f in s.frames if f in H or f == "inner"), None)
    if h:
        per[h] += s.value
htot = sum(per.values())
shares = {h: 100 * per[h] / htot for h in H}
gap = max(abs(shares[h] - truth[h]) for h in H)
print(f"samples {len(ss)} stacks, {tot / 1e9:.2f} s; script function named {100 * named / tot:.1f}%; "
      f"chain Py_RunMain..<module> whole {100 * whole / tot:.1f}%; under a handler "
      f"{100 * htot / tot:.1f}%")
print("shares " + " ".join(f"{h} {shares[h]:.1f} (script {truth[h]:.1f})" for h in H) +
      f"; max gap {gap:.1f} pp")
for l in pt.header(path):
    if "python" in l:
        print(l.strip())
ok = tot > 1e9 and 100 * named / tot >= 95 and gap <= 3 and 100 * whole / tot >= 90
sys.exit(0 if ok else 1)
PY
