#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Lua frames in libedgeprof.so (agent/lib/luaframes.h): Debian's lua5.4 running
# tests/workloads/luasplit.lua (fibs -> fib / work_str -> a gsub callback / outer -> inner,
# with the script's own os.clock accounting) under LD_PRELOAD=libedgeprof.so at default
# settings (standalone profile), rows interleaved per repetition:
#   lua      the Lua frames spliced in (the default)
#   native   EDGEPROF_LUA=0: the same walk without them (the cost's baseline: the native frames
#            of the same stacks)
# Prints per run: samples with a handler's frame, the handlers' shares against the script's,
# the handler's median time (its own histogram, quarter-octave buckets: the profile's comment),
# the Lua walker's system calls per sample (strace -c, a separate short run); then medians and
# the lua/native ratio of the handler's time. No peer: no Lua sampling profiler in Debian's
# archive runs in-process (LuaJIT's jit.profile is LuaJIT only). --lua /usr/bin/lua5.1: the
# same with Debian's Lua 5.1 (agent/lib/lua51frames.c); --lua /usr/bin/luajit with LuaJIT 2.1
# (agent/lib/ljframes.c), --flags -joff with its JIT off.
#   tests/bench/lua-bench.sh [--build build/host-x86_64] [--seconds 6] [--reps 3] [--lua BIN]
#                            [--flags FLAGS]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build/host-x86_64 seconds=6 reps=3 lua=/usr/bin/lua5.4 flags=
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--lua) lua=$2; shift 2 ;;
	--flags) flags=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--seconds N] [--reps N] [--lua BIN] [--flags FLAGS]" >&2
	   exit 2 ;;
	esac
done
lib=$build/libedgeprof.so
[ -f "$lib" ] || { echo "build first: make -j2 all-tests"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$("$lua" -v 2>&1 | cut -d' ' -f1-2) $flags, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$reps"); do
	for mode in lua native; do
		env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/$mode.$r.pb.gz" \
			EDGEPROF_LUA="$([ $mode = lua ] && echo 1 || echo 0)" \
			"$lua" $flags "$top/tests/workloads/luasplit.lua" "$seconds" >"$tmp/$mode.$r.out"
		echo "$r $mode $tmp/$mode.$r.pb.gz $tmp/$mode.$r.out" >>"$tmp/runs"
	done
done
if command -v strace >/dev/null; then
	for mode in lua native; do
		strace -f -c -e trace=process_vm_readv -o "$tmp/$mode.strace" env LD_PRELOAD="$lib" \
			EDGEPROF_OUTPUT="$tmp/$mode.s.pb.gz" EDGEPROF_LUA="$([ $mode = lua ] && echo 1 || echo 0)" \
			"$lua" $flags "$top/tests/workloads/luasplit.lua" 2 >/dev/null
	done
fi
PYTHONPATH="$top/tests/workloads" /usr/bin/python3 - "$tmp" <<'PY'
import os, re, statistics, sys
import pprof_traces as pt
tmp = sys.argv[1]
H = ("fib", "work_str", "outer")
rows = {"lua": [], "native": []}

def handler(frame):
    m = re.match(r"function <.*luasplit\.lua:(\d+)>$", frame)
    return m and int(m.group(1))

src = open(os.path.join(os.path.dirname(pt.__file__), "luasplit.lua")).read().splitlines()
first = {}
for n, l in enumerate(src):
    m = re.match(r"local function (\w+)", l)
    if m:
        first[n + 1] = {"fibs": "fib", "inner": "outer"}.get(m.group(1), m.group(1))

for line in open(os.path.join(tmp, "runs")):
    r, mode, path, out = line.split()
    truth = {l.split()[0]: float(l.split()[1]) for l in open(out) if l.split()[0] in H}
    ss = pt.samples(path)
    tot = sum(s.value for s in ss) or 1
    per = dict.fromkeys(H, 0.0)
    for s in ss:
        h = next((first[handler(f)] for f in s.frames if first.get(handler(f)) in H), None)
        if h:
            per[h] += s.value
    htot = sum(per.values())
    named = 100 * htot / tot
    gap = max(abs(100 * per[h] / (htot or 1) - truth[h]) for h in H)
    hdr = " ".join(pt.header(path))
    ns = int(re.search(r"handler_ns_p50=(\d+)", hdr).group(1))
    n = int(re.search(r"sigprof: hz=\d+ samples=(\d+)", hdr).group(1))
    rows[mode].append((named, gap, ns))
    print(f"run {r} {mode:6}: samples {n:5d}  handler frame {named:5.1f}%  max share gap "
          f"{gap:5.1f} pp  handler p50 {ns} ns")
for mode in rows:
    f = os.path.join(tmp, mode + ".strace")
    if os.path.exists(f):
        calls = next((int(l.split()[3]) for l in open(f) if l.strip().endswith("process_vm_readv")), 0)
        hdr = " ".join(pt.header(os.path.join(tmp, mode + ".s.pb.gz")))
        n = int(re.search(r"sigprof: hz=\d+ samples=(\d+)", hdr).group(1))
        print(f"{mode}: process_vm_readv per sample {calls / max(n, 1):.1f} (strace, {n} samples)")
med = lambda m, i: statistics.median(x[i] for x in rows[m])
print(f"median lua: handler frame {med('lua', 0):.1f}%  gap {med('lua', 1):.1f} pp  handler "
      f"{med('lua', 2):.0f} ns; native: handler frame {med('native', 0):.1f}%  handler "
      f"{med('native', 2):.0f} ns; handler ratio lua/native {med('lua', 2) / med('native', 2):.2f}")
PY
