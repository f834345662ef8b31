#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Signal-safety torture: the torture workload (4 threads that malloc/free, lock a mutex, fork,
# write and read files, burn CPU) under libedgeprof.so at 1 kHz for 4 seconds, twice (frame
# pointer and eh_frame unwinders). It must exit cleanly (no deadlock: bounded by timeout; no
# crash; its own data checks pass), and the profile must still be accurate: cpu total within
# 5 % of getrusage. Under `make test SAN=1` the library is the ASan+UBSan build.
set -u
lib=$EP_BUILD/libedgeprof.so
w=$EP_BUILD/tests/workloads
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
preload=$lib
if ldd "$lib" | grep -q libasan; then
	preload="$(ldd "$lib" | awk '/libasan/ {print $3}') $lib"
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
	echo "SAN build: ASan+UBSan library"
fi

rc=0
for unwind in cfi fp; do
	timeout 300 env LD_PRELOAD="$preload" EDGEPROF_OUTPUT="$tmp/$unwind.pb.gz" \
		EDGEPROF_HZ=1000 EDGEPROF_UNWIND=$unwind "$w/torture" --seconds 4 --threads 4 \
		>"$tmp/$unwind.out" 2>"$tmp/$unwind.err"
	st=$?
	cat "$tmp/$unwind.out" "$tmp/$unwind.err"
	if [ $st != 0 ]; then
		echo "torture ($unwind) exited $st (124 = deadlock/timeout)"
		rc=1
		continue
	fi
	PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/$unwind" <<'PY' || rc=1
import sys
import pprof_traces as pt
base = sys.argv[1]
out = open(base + ".out").read()
cpu_ns = int(out.split("cpu_ns=")[1].split()[0])
forks = int(out.split("forks=")[1].split()[0])
ss = pt.samples(base + ".pb.gz")
total = sum(s.value for s in ss)
leaves = {}
for s in ss:
    leaves[s.leaf] = leaves.get(s.leaf, 0) + s.value
top = sorted(leaves.items(), key=lambda kv: -kv[1])[:6]
print(f"profile cpu {total/1e9:.3f}s vs getrusage {cpu_ns/1e9:.3f}s "
      f"({100.0*(total-cpu_ns)/cpu_ns:+.2f}%), {forks} forks; top leaves:",
      [(k, f"{100.0*v/total:.1f}%") for k, v in top])
ok = forks > 0 and abs(total - cpu_ns) <= 0.05 * cpu_ns and leaves.get("do_cpu", 0) > 0
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PY
done
exit $rc
