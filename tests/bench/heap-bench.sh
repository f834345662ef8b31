#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Heap profiler overhead: libedgeprof.so (EDGEPROF_PROFILES=heap, 512 KiB sampling) vs
# gperftools' heap profiler (tcmalloc + HEAPPROFILE, Debian libgoogle-perftools4) and heaptrack
# (Debian heaptrack), in the same run, on an allocation-heavy load: `heapsplit churn M T`
# (M million small blocks allocated and freed per thread, T threads, 8192 live per thread).
#   tests/bench/heap-bench.sh [--build build/host-x86_64] [--millions 1] [--threads 2] [--reps 3]
# Rows: glibc (no profiler), edgeprof-off (libedgeprof.so preloaded, EDGEPROF_DISABLE=1: the
# interposed allocator alone), edgeprof, tcmalloc, gperftools, heaptrack.
# Prints per tool the median time of the allocation-heavy part (work_s, measured by the workload:
# start and exit excluded), the median wall and CPU (user+sys, children included: heaptrack's interpreter)
# seconds and max RSS, the overhead over its baseline (glibc malloc; gperftools also over
# tcmalloc alone, the allocator it needs) and edgeprof's ratios to the peers. Rows are
# interleaved (one of each tool per repetition), so load drifts hit every tool alike.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build/host-x86_64 millions=1 threads=2 reps=3
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--millions) millions=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--millions M] [--threads T] [--reps N]" >&2; exit 2 ;;
	esac
done
lib=$build/libedgeprof.so w=$build/tests/workloads/heapsplit
tc=$(ls /usr/lib/*/libtcmalloc.so.4 2>/dev/null | head -n 1 || true)
[ -x "$w" ] && [ -f "$lib" ] || { echo "build first: make -j2 all-tests"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tools=(glibc edgeprof-off edgeprof)
[ -n "$tc" ] && tools+=(tcmalloc gperftools) || echo "(no libtcmalloc.so.4: gperftools skipped)"
command -v heaptrack >/dev/null && tools+=(heaptrack) || echo "(no heaptrack: skipped)"

run() { # tool -> "wall cpu rss_kb"
	local cmd
	case $1 in
	glibc) cmd=(env) ;;
	# the library preloaded but recording nothing: what the interposition alone costs
	edgeprof-off) cmd=(env LD_PRELOAD="$lib" EDGEPROF_DISABLE=1) ;;
	edgeprof) cmd=(env LD_PRELOAD="$lib" EDGEPROF_PROFILES=heap EDGEPROF_OUTPUT="$tmp/e-%t.pb.gz") ;;
	tcmalloc) cmd=(env LD_PRELOAD="$tc") ;;
	gperftools) cmd=(env LD_PRELOAD="$tc" HEAPPROFILE="$tmp/gp") ;;
	heaptrack) cmd=(heaptrack -o "$tmp/ht") ;;
	esac
	/usr/bin/time -o "$tmp/t" -f "%e %U %S %M" "${cmd[@]}" "$w" churn "$millions" "$threads" \
		>"$tmp/out" 2>"$tmp/err" || { echo "$1 failed:"; tail -n 5 "$tmp/err"; exit 1; }
	grep -q '^churn sum' "$tmp/out" || { echo "$1: no result"; exit 1; }
	rm -f "$tmp"/gp.* "$tmp"/ht.* "$tmp"/e-*
	awk -v w="$(awk '$1 == "churn_ns" {print $2 / 1e9}' "$tmp/out")" \
		'{printf "%s %.3f %s %s\n", $1, $2 + $3, $4, w}' "$tmp/t"
}

for ((r = 0; r < reps; r++)); do
	for t in "${tools[@]}"; do
		echo "$t $(run "$t")" >>"$tmp/rows"
	done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs; heapsplit churn $millions x $threads threads, $reps reps"
awk -v tools="${tools[*]}" '
function median(a, n,   i, j, t) {
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ n[$1]++; W[$1, n[$1]] = $2; C[$1, n[$1]] = $3; R[$1, n[$1]] = $4; K[$1, n[$1]] = $5 }
END {
	nt = split(tools, T, " ")
	for (k = 1; k <= nt; k++) { t = T[k]
		for (i = 1; i <= n[t]; i++) { w[i] = W[t, i]; c[i] = C[t, i]; m[i] = R[t, i]; x[i] = K[t, i] }
		mw[t] = median(w, n[t]); mc[t] = median(c, n[t]); mr[t] = median(m, n[t]); mk[t] = median(x, n[t]) }
	printf "%-12s %8s %8s %8s %8s %10s %10s %10s %8s\n", "tool", "work_s", "wall_s", "cpu_s", "rss_MiB",
		"work_ovh", "wall_ovh", "cpu_ovh", "rss_add"
	for (k = 1; k <= nt; k++) { t = T[k]; base = (t == "gperftools") ? "tcmalloc" : "glibc"
		ok[t] = mk[t] / mk[base] - 1; ow[t] = mw[t] / mw[base] - 1; oc[t] = mc[t] / mc[base] - 1
		printf "%-12s %8.3f %8.3f %8.3f %8.1f %+9.1f%% %+9.1f%% %+9.1f%% %7.1fM", t, mk[t], mw[t], mc[t],
			mr[t] / 1024, 100 * ok[t], 100 * ow[t], 100 * oc[t], (mr[t] - mr[base]) / 1024
		if (t == "gperftools") printf "  (work vs glibc %+.1f%%)", 100 * (mk[t] / mk["glibc"] - 1)
		printf "\n" }
	for (k = 1; k <= nt; k++) { t = T[k]; if (t != "gperftools" && t != "heaptrack") continue
		printf "edgeprof overhead / %s overhead: work %.4f, cpu %.4f (goal: gperftools <= 0.5, heaptrack <= 1)\n",
			t, (ok[t] > 0 ? ok["edgeprof"] / ok[t] : 0), (oc[t] > 0 ? oc["edgeprof"] / oc[t] : 0) }
}' "$tmp/rows"
