#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Benchmark of the edgeprof CLI beside `go tool pprof` on the same files in the same run:
# median wall time and peak RSS of `top` on one profile and on N profiles merged, and the
# cost of `folded` and `flame` on the merged set. Not part of `make test`.
#
#   tests/bench/cli-bench.sh BUILD_DIR PROFILE [N=100] [RUNS=5]
#
# PROFILE should be real-sized (e.g. `go test -run=NONE -bench=. -cpuprofile p.prof strings`,
# about 20 KB gzipped); the N inputs are copies of it, so the merge dedups everything.
set -eu
build=$(cd "$1" && pwd) prof=$2 n=${3:-100} runs=${4:-5}
E="$build/edgeprof"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOME="$build/cli-go/home" GOCACHE="$build/cli-go/gocache"
mkdir -p "$HOME"
for i in $(seq 1 "$n"); do cp "$prof" "$tmp/p$i.pb.gz"; done

# median of RUNS runs of a command: "seconds maxrss_kb"
measure() {
	local i
	for i in $(seq 1 "$runs"); do
		local t0 t1
		t0=$(date +%s%N)
		/usr/bin/time -f '%M' -o "$tmp/t" "$@" >/dev/null 2>&1
		t1=$(date +%s%N)
		echo "$(( (t1 - t0) / 1000 ))e-6 $(cat "$tmp/t")"
	done | sort -g | awk '{ t[NR] = $1; m[NR] = $2 } END { i = int((NR + 1) / 2); print t[i], m[i] }'
}

row() { # label, ours..., --, peer...
	local label=$1 ours=() peer=()
	shift
	while [ "$1" != -- ]; do ours+=("$1"); shift; done
	shift
	peer=("$@")
	read -r ot om < <(measure "${ours[@]}")
	if [ ${#peer[@]} -gt 0 ]; then
		read -r pt pm < <(measure "${peer[@]}")
		awk -v l="$label" -v ot="$ot" -v om="$om" -v pt="$pt" -v pm="$pm" 'BEGIN {
			printf "%-28s ours %6.3fs %7.1f MB | pprof %6.3fs %7.1f MB | time %5.3fx rss %5.3fx\n",
			       l, ot, om / 1024, pt, pm / 1024, (pt > 0 ? ot / pt : 0), (pm > 0 ? om / pm : 0) }'
	else
		awk -v l="$label" -v ot="$ot" -v om="$om" 'BEGIN {
			printf "%-28s ours %6.3fs %7.1f MB\n", l, ot, om / 1024 }'
	fi
}

# the pprof binary itself, not the `go` wrapper that would add its own start-up
P="$(go env GOTOOLDIR)/pprof"
echo "median of $runs runs; ratios are ours/pprof (lower is better)"
row "top, 1 file" "$E" top "$tmp/p1.pb.gz" -- "$P" -top "$tmp/p1.pb.gz"
row "top, $n files merged" "$E" top "$tmp"/p*.pb.gz -- "$P" -top "$tmp"/p*.pb.gz
row "merge, $n files" "$E" merge -o "$tmp/m.pb.gz" "$tmp"/p*.pb.gz -- \
	"$P" -proto -output "$tmp/pm.pb.gz" "$tmp"/p*.pb.gz
row "folded, $n files" "$E" folded "$tmp"/p*.pb.gz --
row "flame svg, $n files" "$E" flame -o "$tmp/f.svg" "$tmp"/p*.pb.gz --
