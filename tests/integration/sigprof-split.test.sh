#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libedgeprof.so (LD_PRELOAD, standalone EDGEPROF_OUTPUT) on the known-split workload, read back
# with `go tool pprof`: work_a/b/c at 50/30/20 % of cpu within ±3 pp; every thread of the
# 4-thread variant appears with its share; the profile's cpu total is the process's getrusage
# CPU time within 5 % at 99 Hz and at 1 kHz; the leaf's caller (run_split, which the -O2 leaf
# never links to with a frame) is on ≥ 99 % of the stacks.
set -u
lib=$EP_BUILD/libedgeprof.so
split=$EP_BUILD/tests/workloads/split
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
preload=$lib
if ldd "$lib" | grep -q libasan; then # SAN build: the ASan runtime must come first
	preload="$(ldd "$lib" | awk '/libasan/ {print $3}') $lib"
	export ASAN_OPTIONS=detect_leaks=0
fi

run() { # name hz threads rounds
	# env right before the target: timeout(1) itself must not be profiled
	timeout 600 env LD_PRELOAD="$preload" EDGEPROF_OUTPUT="$tmp/$1.pb.gz" EDGEPROF_HZ="$2" \
		"$split" --threads "$3" --rounds "$4" >"$tmp/$1.out" || return 1
	[ -s "$tmp/$1.pb.gz" ] || { echo "$1: no profile written"; return 1; }
}

# About 18 CPU-seconds per case. The CPU-clock timers fire at most once per kernel tick
# (250 Hz here), so 999 Hz gives ~4400 samples: ±3 pp is 4 standard deviations of work_a's
# share (0.75 pp). 99 Hz gives ~1770: ±5 pp there, also 4 sigma. At 3 sigma, nine such checks
# a run failed about one CI run in fifty (work_a 56.3 % of 883 samples at 99 Hz).
rc=0
run hz999-t1 999 1 16000 || rc=1
run hz99-t4 99 4 4000 || rc=1
run hz999-t4 999 4 4000 || rc=1
[ $rc = 0 ] || exit 1

PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp" <<'PY'
import collections, sys
import pprof_traces as pt
tmp = sys.argv[1]
ok = True
for case, threads in (("hz999-t1", 1), ("hz99-t4", 4), ("hz999-t4", 4)):
    path = f"{tmp}/{case}.pb.gz"
    ss = pt.samples(path)
    cpu_ns = int(open(f"{tmp}/{case}.out").read().split("cpu_ns=")[1].split()[0])
    total = sum(s.value for s in ss)
    work = [s for s in ss if s.leaf in ("work_a", "work_b", "work_c")]
    counts = pt.samples(path, index="samples")
    n = sum(s.value for s in counts)
    sh = pt.shares(ss, ("work_a", "work_b", "work_c"))
    print(f"{case}: {int(n)} samples, profile cpu {total/1e9:.3f}s vs getrusage {cpu_ns/1e9:.3f}s "
          f"({100.0*(total-cpu_ns)/cpu_ns:+.2f}%)")
    tol = 3 if case.startswith("hz999") else 5 # 4 sigma each: see the runs above
    for f, want in (("work_a", 50), ("work_b", 30), ("work_c", 20)):
        print(f"  {f}: {sh[f]:.2f}% (want {want} ±{tol})")
        ok &= abs(sh[f] - want) <= tol
    ok &= abs(total - cpu_ns) <= 0.05 * cpu_ns
    # completeness: leaf, its caller, then main (single thread) or the thread start
    # (threads start in libc's start_thread, unnamed without libc's symbols)
    full = sum(s.value for s in work if len(s.frames) > 2 and s.frames[1] == "run_split"
               and ("main" in s.frames[2:] or s.frames[-1].startswith("[libc")))
    wsum = sum(s.value for s in work)
    print(f"  complete stacks (leaf, run_split, ... root): {100.0*full/max(wsum,1):.2f}%")
    ok &= full >= 0.99 * wsum
    per = collections.Counter()
    for s in ss:
        per[s.labels.get("thread")] += s.value
    if threads > 1:
        workers = {t: v for t, v in per.items() if v > 0.05 * total}
        print("  per thread:", {t: f"{100.0*v/total:.1f}%" for t, v in per.items()})
        ok &= len(workers) == threads
        for t, v in workers.items():
            ok &= abs(100.0 * v / total - 100.0 / threads) <= 5
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
