#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Crash safety of the ring file, at scale (issue 41): TRIALS kill -9 trials over both fsync
# policies (every record, group commit), rings of 64 KiB to 4 MiB (so the wrap point is hit
# often), records of 190 B to 8 KiB, one writer or 2-3 concurrent ones; then POWER power-cut
# trials with fsync per record. Each trial forks a writer that acknowledges records only once
# durable, crashes it (SIGKILL after 0-20 ms, or at a random write torn as SIGKILL tears it,
# or a power cut that keeps or rolls back each unsynced 512-byte sector at random: the
# LD_PRELOAD shim ring-crash-shim.c), reopens the ring and checks that every acknowledged
# record from the oldest live one on is served byte-identical and nothing torn is served.
# The loop is store-append crash (tests/drivers/store-append.c), in one process: a trial
# costs milliseconds, not a shell pipeline.
#
# Usage: tests/bench/ring-crash.sh [BUILD_DIR]
#   env: TRIALS=20000 POWER=1000 SEED=1 JOBS=1 (parallel runs, each a share of the trials)
#        DIR=/dev/shm (kill -9 keeps the page cache whatever the file system; the power cut is
#        the shim's, so tmpfs is as good as a disk and spares it) MAX_SECONDS=5400 (per mode)
#        KEEP=1 (keep the ring before each failing trial too; failing rings are always kept)
# Prints, per mode: trials, acknowledged records, lost, damaged, failed trials, seconds.
# Exits 1 when any acknowledged record was lost or damaged, or a trial failed another check.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build/host-x86_64}
drv=$build/tests/drivers/store-append
[ -x "$drv" ] || { echo "build first: make all-tests"; exit 1; }
TRIALS=${TRIALS:-20000}
POWER=${POWER:-1000}
SEED=${SEED:-1}
JOBS=${JOBS:-1}
MAX_SECONDS=${MAX_SECONDS:-5400}
base=${DIR:-/dev/shm}
[ -d "$base" ] && [ -w "$base" ] || base=/var/tmp
work=$(mktemp -d "$base/edgeprof-ring-crash.XXXXXX")
cleanup() {
	# failing rings are the evidence: keep the folder when there are any
	if ls "$work"/*/fail-* >/dev/null 2>&1; then
		echo "failing rings kept in $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

shim=$work/ring-crash-shim.so
${CC:-cc} -O2 -Wall -Wextra -Werror -shared -fPIC -o "$shim" "$top/tests/bench/ring-crash-shim.c" -ldl

run_mode() { # mode trials -> one summary line per job, then the total
	local mode=$1 trials=$2 per j pids=() start
	per=$(( (trials + JOBS - 1) / JOBS ))
	start=$(date +%s)
	for j in $(seq 1 "$JOBS"); do
		mkdir -p "$work/$mode-$j"
		# a share each, with its own seed; bounded in time whatever happens
		ASAN_OPTIONS=${ASAN_OPTIONS:-verify_asan_link_order=0} LD_PRELOAD=$shim \
			timeout -s KILL "$MAX_SECONDS" \
			"$drv" crash "$work/$mode-$j" "$per" $((SEED * 1000 + j)) "$mode" \
			>"$work/$mode-$j.log" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || true; done
	for j in $(seq 1 "$JOBS"); do
		grep -E '^trial|^  ' "$work/$mode-$j.log" | head -n 20 || true
		grep -q '^mode=' "$work/$mode-$j.log" ||
			echo "mode=$mode job $j did not finish (timeout after ${MAX_SECONDS}s?)"
	done
	cat "$work/$mode"-*.log | awk -v mode="$mode" -v secs=$(( $(date +%s) - start )) '
		/^mode=/ {
			for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] }
			jobs++
		}
		END {
			printf "%-5s trials %6d  acknowledged %9d  lost %d  damaged %d  failed trials %d  (torn records seen %d, trials on a wrapped ring %d; %d job(s), %d s)\n",
				mode, v["trials"], v["acked"], v["lost"], v["damaged"], v["failed_trials"],
				v["torn_seen"], v["wrapped_rings"], jobs, secs
		}' | tee -a "$work/summary"
}

echo "== ring-file crash trials ($(nproc) CPUs, JOBS=$JOBS, in $work)"
t0=$(date +%s)
[ "$TRIALS" -gt 0 ] && run_mode kill "$TRIALS"
[ "$POWER" -gt 0 ] && run_mode power "$POWER"
echo "total: $(( $(date +%s) - t0 )) s"
bad=$(awk '{ bad += $7 + $9 + $12 } END { print bad + 0 }' "$work/summary")
[ "$bad" = 0 ]
