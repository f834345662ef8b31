#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Storage benchmark of the collector (issue 6), all in one run on the same disk:
#  1. ring-file write bandwidth against dd with the same fsync policy:
#       every record  — ours: fdatasync per record;  dd: oflag=dsync (O_DSYNC per write)
#       group commit  — ours: fsync_ms=1000;         dd: conv=fdatasync (one sync at the end)
#     both into a preallocated file of the same size, 20 KiB records (N of them with a sync per
#     record, 10 N with group commit); median of RUNS, ratio. Ours counts payload bytes only.
#  2. index memory with 1,000,000 indexed profiles (RSS growth, bytes per entry).
#  3. query + merge of 1,000 stored profiles (300 functions, 2,000 samples each).
#  4. collector start on a full 512 MiB ring (scan, CRC of every record, index rebuild).
#  5. the store (ring slot table + index) with 1,000,000 profiles: RSS and start time.
# Usage: tests/bench/store-bench.sh [BUILD_DIR]   (env: RUNS=5 DIR=/var/tmp N=2000 COLD=1)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build/host-x86_64}
drv=$build/tests/drivers/store-append
bench=$build/tests/drivers/store-bench
[ -x "$drv" ] && [ -x "$bench" ] || { echo "build first: make all-tests"; exit 1; }
RUNS=${RUNS:-5}
N=${N:-2000}
LEN=20480
dir=$(mktemp -d "${DIR:-/var/tmp}/edgeprof-store-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

ours() { # fsync_ms count -> MB/s
	local size=$(( ($2 * (LEN + 128)) + (1 << 20) ))
	rm -f "$dir/ring"
	"$drv" bench "$dir/ring" "$size" "$1" "$2" "$LEN" |
		sed -n 's/bytes=\([0-9]*\) seconds=\([0-9.]*\)/\1 \2/p' | awk '{ printf "%.2f\n", $1 / $2 / 1e6 }'
}

dd_run() { # dd-flags count -> MB/s
	local size=$(( ($2 * (LEN + 128)) + (1 << 20) ))
	rm -f "$dir/dd"
	fallocate -l "$size" "$dir/dd"
	# shellcheck disable=SC2086
	dd if=/dev/zero of="$dir/dd" bs=$LEN count="$2" conv=notrunc $1 2>&1 |
		awk '/bytes/ { printf "%.2f\n", $1 / $(NF - 3) / 1e6 }'
}

echo "== ring-file write bandwidth vs dd ($LEN-byte records, $RUNS runs each, on $(df --output=source "$dir" | tail -n 1))"
for policy in "every-record 0 oflag=dsync $N" "group-commit 1000 conv=fdatasync $((10 * N))"; do
	set -- $policy
	: >"$dir/o" && : >"$dir/d"
	for _ in $(seq "$RUNS"); do
		ours "$2" "$4" >>"$dir/o"
		dd_run "$3" "$4" >>"$dir/d"
	done
	o=$(median <"$dir/o") d=$(median <"$dir/d")
	printf '%-13s %6d records: ours %8.2f MB/s   dd %8.2f MB/s   ours/dd %.2f   (runs: ours %s; dd %s)\n' \
		"$1" "$4" "$o" "$d" "$(awk -v o="$o" -v d="$d" 'BEGIN { print o / d }')" \
		"$(tr '\n' ' ' <"$dir/o")" "$(tr '\n' ' ' <"$dir/d")"
done

echo "== index memory"
"$bench" index 1000000

echo "== query + merge"
"$bench" merge "$dir" 1000

echo "== start on a full ring (512 MiB of 20 KiB records)"
rm -f "$dir/ring"
"$drv" bench "$dir/ring" $((512 << 20)) 1000 26000 $LEN >/dev/null
sync
# COLD=1 (root) drops the page cache first: a cold start, but it slows everything else running
if [ -n "${COLD:-}" ] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
	echo "(page cache dropped: cold start)"
else
	echo "(warm page cache; COLD=1 for a cold start)"
fi
"$bench" open "$dir/ring"

echo "== store with 1,000,000 indexed profiles (200-byte payloads, fleet-like metadata)"
"$bench" fill "$dir/m.ring" $((400 << 20)) 1000000 200
"$bench" open "$dir/m.ring"
