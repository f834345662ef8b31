#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libedgeprof.so's heap profile (EDGEPROF_PROFILES=heap, standalone) on a workload with a known
# split (tests/workloads/heapsplit.c: alloc_a/b/c 60/30/10 % of the bytes, alloc_c in a thread
# through posix_memalign, alloc_b through calloc+realloc, early_alloc in a constructor before
# main; 64 + 32 + 16 MiB kept live), read back with `go tool pprof -traces`:
#   - default rate (512 KiB), 2 GiB: alloc_space shares within 2 pp of the truth, the
#     alloc_space total within 5 %;
#   - EDGEPROF_HEAP_RATE=16384, 512 MiB: inuse_space total within 5 % and inuse shares within
#     2 pp; early_alloc's stack goes through the constructor, alloc_c's through the thread;
#   - EDGEPROF_PROFILES=cpu,heap with "%t" in EDGEPROF_OUTPUT: one file per type; without it
#     the heap profile goes beside the CPU one as NAME.heap.pb.gz;
#   - gateway-arm64 and gateway-armv7 under qemu-user, when built beside: the inuse case.
# About 5 s.
set -u
lib=$EP_BUILD/libedgeprof.so
w=$EP_BUILD/tests/workloads/heapsplit
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
grep -q '^CONFIG_PROFILE_HEAP=y' "$EP_BUILD/.config" || { echo "CONFIG_PROFILE_HEAP off"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
preload=$lib
if ldd "$lib" | grep -q libasan; then # SAN build: the ASan runtime must come first
	preload="$(ldd "$lib" | awk '/libasan/ {print $3}') $lib"
	export ASAN_OPTIONS=detect_leaks=0
fi

rc=0
timeout 300 env LD_PRELOAD="$preload" EDGEPROF_PROFILES=heap EDGEPROF_OUTPUT="$tmp/d-%t.pb.gz" \
	"$w" 2048 >"$tmp/d.out" || rc=1
timeout 300 env LD_PRELOAD="$preload" EDGEPROF_PROFILES=heap EDGEPROF_HEAP_RATE=16384 \
	EDGEPROF_OUTPUT="$tmp/r-%t.pb.gz" "$w" 512 >"$tmp/r.out" || rc=1
timeout 300 env LD_PRELOAD="$preload" EDGEPROF_PROFILES=cpu,heap EDGEPROF_OUTPUT="$tmp/both-%t.pb.gz" \
	"$w" 256 >/dev/null || rc=1
timeout 300 env LD_PRELOAD="$preload" EDGEPROF_PROFILES=heap,cpu EDGEPROF_OUTPUT="$tmp/plain.pb.gz" \
	"$w" 256 >/dev/null || rc=1
for f in d-heap r-heap both-cpu both-heap plain plain.heap; do
	[ -s "$tmp/$f.pb.gz" ] || { echo "no profile $f.pb.gz"; rc=1; }
done
[ ! -e "$tmp/d-cpu.pb.gz" ] || { echo "EDGEPROF_PROFILES=heap wrote a CPU profile"; rc=1; }
# the ARM boards under qemu-user, when built beside this one: the inuse case
arm=()
for board in gateway-arm64:qemu-aarch64:aarch64-linux-gnu:sysroot-arm64 \
	gateway-armv7:qemu-arm:arm-linux-gnueabihf:sysroot-armhf; do
	IFS=: read -r b q triple sysroot <<<"$board"
	bdir=$EP_BUILD/../$b
	if [ ! -f "$bdir/libedgeprof.so" ] || [ ! -x "$bdir/tests/workloads/heapsplit" ] ||
		! command -v "$q" >/dev/null || ! grep -q '^CONFIG_PROFILE_HEAP=y' "$bdir/.config"; then
		echo "($b: not built or no $q: skipped)"
		continue
	fi
	timeout 300 "$q" -L "/usr/$triple" \
		-E "LD_LIBRARY_PATH=$(cd "$EP_BUILD/../$sysroot" && pwd)/usr/lib/$triple" \
		-E LD_PRELOAD="$(cd "$bdir" && pwd)/libedgeprof.so" -E EDGEPROF_PROFILES=heap \
		-E EDGEPROF_HEAP_RATE=16384 -E EDGEPROF_OUTPUT="$tmp/$b-heap.pb.gz" \
		"$bdir/tests/workloads/heapsplit" 512 >"$tmp/$b.out" || rc=1
	arm+=("$b")
done
[ $rc = 0 ] || exit 1

PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp" "${arm[@]}" <<'PY'
import sys
import pprof_traces as pt
tmp = sys.argv[1]
ok = True
FNS = ("alloc_a", "alloc_b", "alloc_c", "early_alloc")

def truth(case, kind):
    t = {}
    for line in open(f"{tmp}/{case}.out"):
        k, fn, v = line.split()
        if k == kind:
            t[fn] = int(v)
    return t

def check(case, index, kind, share_tol, total_tol):
    global ok
    ss = pt.samples(f"{tmp}/{case}-heap.pb.gz", index=index, symbolize=True)
    case = case.replace("-heap", "")
    tr = truth(case, kind)
    total, want = sum(s.value for s in ss), sum(tr.values())
    print(f"{case} {index}: total {total/2**20:.1f} MiB vs truth {want/2**20:.1f} MiB "
          f"({100.0*(total-want)/want:+.2f}%, want within {total_tol}%)")
    ok &= abs(total - want) <= total_tol / 100.0 * want
    for fn in FNS:
        got = 100.0 * sum(s.value for s in ss if s.leaf == fn) / max(total, 1)
        exp = 100.0 * tr[fn] / want
        print(f"  {fn}: {got:.2f}% (truth {exp:.2f}%, want ±{share_tol} pp)")
        ok &= abs(got - exp) <= share_tol
    return ss

# default rate: ~4,100 samples; alloc_c's share has a standard deviation of ~0.5 pp
check("d", "alloc_space", "alloc", 2, 5)
# 16 KiB: ~7,000 samples of the 117 MiB in use: the total's deviation ~1.2 %
ss = check("r", "inuse_space", "inuse", 2, 5)
check("r", "alloc_space", "alloc", 2, 5)
ss = pt.samples(f"{tmp}/r-heap.pb.gz", index="alloc_space", symbolize=True)
early = [s for s in ss if s.leaf == "early_alloc"]
before = all("main" not in s.frames for s in early) and early
print(f"early_alloc: {len(early)} stacks, none under main (before main): {bool(before)}")
ok &= bool(before)
thr = [s for s in ss if s.leaf == "alloc_c"]
ok &= bool(thr) and all(len(s.frames) > 1 and s.frames[1] == "thread_c" for s in thr)
print(f"alloc_c: {len(thr)} stacks, caller thread_c on all: {ok}")
head = " ".join(pt.header(f"{tmp}/r-heap.pb.gz", "inuse_space"))
print([l for l in head.split("edgeprof")][1][:160])
ok &= "live_overflow=0" in head and "stacks_dropped=0" in head
for b in sys.argv[2:]: # 32-bit ARM: the call site only (its unwinder: pc and lr)
    check(b, "inuse_space", "inuse", 2, 5)
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
