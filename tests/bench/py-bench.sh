#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPython frames in libedgeprof.so (agent/lib/pyframes.h): Debian's python3.11 running
# tests/workloads/pysplit.py (fib / work_dict / outer -> inner, with the script's own CPU
# accounting) under LD_PRELOAD=libedgeprof.so at default settings (standalone profile), rows
# interleaved per repetition:
#   python   the Python frames spliced in (the default)
#   native   EDGEPROF_PYTHON=0: the same walk without them (the cost's baseline: native frames
#            of the same stacks)
# Prints per run: samples naming a script function, the handlers' shares against the script's,
# the handler's median time (its own histogram, the profile's comment); then medians and the
# python/native ratio of the handler's time. No peer: py-spy is not in Debian's archive.
# --python 3.13: Debian trixie's python3.13 from build/py313-root (tools/setup.sh), on its own
# loader, whose frames come from its _Py_DebugOffsets (agent/core/pydebug.h).
#   tests/bench/py-bench.sh [--build build/host-x86_64] [--seconds 6] [--reps 3] [--python 3.13]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build/host-x86_64 seconds=6 reps=3 version=3.11
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--python) version=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--seconds N] [--reps N] [--python 3.11|3.13]" >&2; exit 2 ;;
	esac
done
lib=$build/libedgeprof.so
[ -f "$lib" ] || { echo "build first: make -j2 all-tests"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $version in
3.11) py=(/usr/bin/python3.11) ;;
3.13) root=$top/build/py313-root
      [ -f "$root/.complete" ] || { echo "no build/py313-root: run tools/setup.sh"; exit 1; }
      py=(env "PYTHONHOME=$root/usr" "$root/usr/lib64/ld-linux-x86-64.so.2"
	  --library-path "$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/python3.13") ;;
*) echo "--python: 3.11 (Debian 12's) or 3.13 (trixie's, build/py313-root)" >&2; exit 2 ;;
esac
echo "$("${py[@]}" --version), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$reps"); do
	for mode in python native; do
		env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/$mode.$r.pb.gz" \
			EDGEPROF_PYTHON="$([ $mode = python ] && echo 1 || echo 0)" \
			"${py[@]}" "$top/tests/workloads/pysplit.py" "$seconds" >"$tmp/$mode.$r.out"
		echo "$r $mode $tmp/$mode.$r.pb.gz $tmp/$mode.$r.out" >>"$tmp/runs"
	done
done
PYTHONPATH="$top/tests/workloads" /usr/bin/python3 - "$tmp/runs" <<'PY'
import re, statistics, sys
import pprof_traces as pt
H = ("fib", "work_dict", "outer")
SCRIPT = set(H) | {"inner", "run", "main", "<module>"}
rows = {"python": [], "native": []}
for line in open(sys.argv[1]):
    r, mode, path, out = line.split()
    truth = {l.split()[0]: float(l.split()[1]) for l in open(out) if l.split()[0] in H}
    ss = pt.samples(path)
    tot = sum(s.value for s in ss) or 1
    named = 100 * sum(s.value for s in ss if SCRIPT & set(s.frames)) / tot
    per = dict.fromkeys(H, 0.0)
    for s in ss:
        h = next((f if f != "inner" else "outer" for f in s.frames if f in H or f == "inner"), None)
        if h:
            per[h] += s.value
    htot = sum(per.values()) or 1
    gap = max(abs(100 * per[h] / htot - truth[h]) for h in H)
    ns = int(re.search(r"handler_ns_p50=(\d+)", " ".join(pt.header(path))).group(1))
    n = int(re.search(r"samples=(\d+)", " ".join(l for l in pt.header(path) if "sigprof:" in l)).group(1))
    rows[mode].append((named, gap, ns))
    print(f"run {r} {mode:6}: samples {n:5d}  script function named {named:5.1f}%  max share gap "
          f"{gap:5.1f} pp  handler p50 {ns} ns")
med = lambda m, i: statistics.median(x[i] for x in rows[m])
print(f"median python: named {med('python', 0):.1f}%  gap {med('python', 1):.1f} pp  handler "
      f"{med('python', 2):.0f} ns; native: named {med('native', 0):.1f}%  handler "
      f"{med('native', 2):.0f} ns; handler ratio python/native {med('python', 2) / med('native', 2):.2f}")
PY
