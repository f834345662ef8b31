#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark of pprof/ (not run by make test):
#  - encode: 1,000,000 samples over 10,000 unique stacks of depth 30 through the streaming
#    builder (tests/pprof-tool encode): time and peak RSS;
#  - decode + merge of 100 and 1,000 real-sized CPU profiles (~12-15 KB gzip each, from
#    `go test -cpuprofile` on Go standard-library benchmarks, varied per file) by us
#    (tests/pprof-tool merge) and by `go tool pprof -proto` in the same run, alternating:
#    medians of 3 of wall time and peak RSS (/usr/bin/time), and the ours/peer ratios. Ours
#    writes the result as `edgeprof merge` does: gzip level 6, deflated in parts on every CPU;
#  - instructions of one pprof_read() of a 20 KB profile (callgrind, when valgrind is installed):
#    unlike wall time on a shared machine, a number that only changes with the code.
#
#   tests/bench/pprof-bench.sh [BUILD_DIR]     (default build/host-x86_64; run make all-tests)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build/host-x86_64}" && pwd)
tool="$build/tests/pprof-tool"
work="$build/bench-pprof"
runs=3
[ -x "$tool" ] || { echo "missing $tool: run make all-tests"; exit 1; }
command -v go >/dev/null || { echo "go is not installed"; exit 1; }
export GOCACHE="$build/go-cache" HOME="$work" GOFLAGS= GOPROXY=off GOTOOLCHAIN=local
mkdir -p "$work/base" "$GOCACHE"
tmp=$(mktemp -d "$work/run.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Base profiles: Go's own std-library benchmarks, CPU-profiled (cached across runs).
specs=("strings:Index|Split|Replace" "bytes:Index|Equal|Fields" "sort:Sort|Stable"
       "strconv:Format|Parse|Append" "regexp:Match|Find")
for spec in "${specs[@]}"; do
	pkg=${spec%%:*} re=${spec#*:} n=${pkg//\//_}
	[ -s "$work/base/$n.pb.gz" ] && continue
	echo "generating base profile: go test -bench='$re' -cpuprofile $pkg"
	(cd "$tmp" && go test -run=NONE -bench="$re" -benchtime=50ms \
		-cpuprofile "$work/base/$n.pb.gz" -o "$tmp/$n.test" "$pkg" >/dev/null)
done
bases=("$work/base"/*.pb.gz)

# 1,000 inputs: each base profile varied (values scaled, samples dropped, time shifted).
if [ ! -s "$work/in/p0999.pb.gz" ]; then
	mkdir -p "$work/in"
	for i in $(seq 0 999); do
		"$tool" vary "${bases[$((i % ${#bases[@]}))]}" "$(printf '%s/in/p%04d.pb.gz' "$work" "$i")" $((i + 1))
	done
fi
sizes=$(ls -l "$work"/in/*.pb.gz | awk '{s += $5; n++} END {printf "%d files, mean %.1f KB", n, s / n / 1024}')
echo "inputs: $sizes"

measure() { # out-file cmd... -> appends "wall_seconds maxrss_kb cpu_seconds"
	local out=$1 t0 t1
	shift
	t0=$(date +%s%N)
	/usr/bin/time -f "%M %U %S" -o "$tmp/t" "$@" >/dev/null 2>"$tmp/err" ||
		{ cat "$tmp/err"; echo "failed: $*"; exit 1; }
	t1=$(date +%s%N)
	tail -n 1 "$tmp/t" | awk -v w="$(( (t1 - t0) / 1000 ))" '{printf "%.4f %d %.2f\n", w / 1e6, $1, $2 + $3}' >>"$out"
}

median() { # file column -> median
	awk -v c="$2" '{print $c}' "$1" | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'
}

echo
echo "== encode: 1,000,000 samples, 10,000 unique stacks, depth 30 (gzip level 6)"
: >"$tmp/enc"
for r in $(seq $runs); do
	measure "$tmp/enc" "$tool" encode "$tmp/enc.pb.gz" 1000000 10000 30
done
printf 'ours: %.3f s, peak RSS %.1f MB, output %s bytes (median of %d)\n' \
	"$(median "$tmp/enc" 1)" "$(echo "$(median "$tmp/enc" 2) / 1024" | bc -l)" \
	"$(stat -c %s "$tmp/enc.pb.gz")" "$runs"
go tool pprof -raw "$tmp/enc.pb.gz" >/dev/null 2>&1 && echo "go tool pprof reads it: yes"
: >"$tmp/enc"
for r in $(seq $runs); do
	PPROF_GZIP_LEVEL=-1 measure "$tmp/enc" "$tool" encode "$tmp/enc.pb" 1000000 10000 30
done
printf 'ours, no gzip: %.3f s, peak RSS %.1f MB, output %s bytes (where the time goes: deflate)\n' \
	"$(median "$tmp/enc" 1)" "$(echo "$(median "$tmp/enc" 2) / 1024" | bc -l)" \
	"$(stat -c %s "$tmp/enc.pb")"
rm -f "$tmp/enc.pb" "$tmp/enc.pb.gz"

for n in 100 1000; do
	files=()
	for i in $(seq 0 $((n - 1))); do files+=("$(printf '%s/in/p%04d.pb.gz' "$work" "$i")"); done
	: >"$tmp/ours" && : >"$tmp/peer"
	for r in $(seq $runs); do
		measure "$tmp/ours" "$tool" merge -o "$tmp/ours.pb.gz" "${files[@]}"
		measure "$tmp/peer" go tool pprof -proto -output "$tmp/peer.pb.gz" "${files[@]}"
	done
	# Same answer: identical flat values per function.
	"$tool" flat "$tmp/ours.pb.gz" >"$tmp/a"
	"$tool" flat "$tmp/peer.pb.gz" >"$tmp/b"
	cmp -s "$tmp/a" "$tmp/b" || { echo "merge results differ from go tool pprof"; exit 1; }
	ot=$(median "$tmp/ours" 1) om=$(median "$tmp/ours" 2) oc=$(median "$tmp/ours" 3)
	pt=$(median "$tmp/peer" 1) pm=$(median "$tmp/peer" 2) pc=$(median "$tmp/peer" 3)
	echo
	echo "== decode + merge of $n profiles (median of $runs; same result as the peer)"
	printf 'ours:           wall %7.3f s  cpu %6.2f s  peak RSS %6.1f MB\n' "$ot" "$oc" \
		"$(echo "$om / 1024" | bc -l)"
	printf 'go tool pprof:  wall %7.3f s  cpu %6.2f s  peak RSS %6.1f MB\n' "$pt" "$pc" \
		"$(echo "$pm / 1024" | bc -l)"
	printf 'ours/peer:      wall %.3f (%.1fx faster)  cpu %.3f  peak RSS %.3f\n' \
		"$(echo "$ot / $pt" | bc -l)" "$(echo "$pt / $ot" | bc -l)" \
		"$(echo "($oc + 0.005) / ($pc + 0.005)" | bc -l)" "$(echo "$om / $pm" | bc -l)"
done
if command -v valgrind >/dev/null; then
	"$tool" encode "$tmp/read.pb.gz" 1400 130 16 >/dev/null 2>&1
	ir=$(valgrind --tool=callgrind --toggle-collect=pprof_read --callgrind-out-file=/dev/null \
		"$tool" check "$tmp/read.pb.gz" 2>&1 | awk '/refs:/ {gsub(",", "", $NF); print $NF}')
	echo
	echo "== pprof_read of one $(stat -c %s "$tmp/read.pb.gz")-byte profile (encode 1400 130 16):" \
		"$ir instructions (callgrind)"
fi
echo
echo "load average during the run: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
