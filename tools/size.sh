#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Flash footprint, BusyBox-style: what each binary of a board weighs, and what each
# Kconfig feature adds to it. Every board's defconfig is built once as is ("base") and once per
# feature it has on, with only that feature off (make defconfig SET="SYM=n"); the bytes a
# feature adds are base minus that build. A feature's row includes the features that depend on
# it (UPLOAD_MTLS off takes SPOOL with it). Builds go to build/size/<board>/{base,no-SYM}/, JOBS
# (default 2) of them at a time, one make job each; a rerun rebuilds only what changed.
#
#   tools/size.sh [BOARD...]                 per-feature table (all boards by default)
#   tools/size.sh --totals [BOARD...]        only the board builds: size of each binary
#   tools/size.sh --check [BOARD...]         --totals, failing when a binary passes its budget
#   tools/size.sh --check-dir DIR BOARD      check an existing build (make testconfigs does)
#   tools/size.sh --diff DIR_A DIR_B         bloat-o-meter-style: symbols that grew or shrank
#                                            from A to B (nm --size-sort of the .debug files)
#
# Budgets: boards/<board>/size-budget, "binary bytes" a line (text + data), # comments. Every
# binary a board builds needs a line; a binary larger than its budget fails the check.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=build/size
jobs=${JOBS:-2}
binaries="edgeprof-agent libedgeprof.so edgeprof-collector edgeprof"

# bytes DIR BIN: flash bytes, text + data as size(1) counts them (0 when the configuration does
# not build it). Not the file size: on aarch64 segments align to 64 KiB and the stripped file
# grows in steps of up to that (SPOOL's 29 KB of code leave it unchanged), a noise no feature
# table or budget can use. The file size is printed beside it.
bytes() { if [ -f "$1/$2" ]; then size "$1/$2" | awk 'NR == 2 { print $1 + $2 }'; else echo 0; fi; }
fbytes() { if [ -f "$1/$2" ]; then stat -c %s "$1/$2"; else echo 0; fi; }

build() { # BOARD NAME [SYM=VAL]: configure and build into build/size/BOARD/NAME
	local o="$out/$1/$2"
	mkdir -p "$o"
	rm -f "$o.failed"
	if make -s O="$o" BOARD="$1" defconfig SET="${3:-}" >"$o.log" 2>&1 &&
	   make -s -j1 O="$o" BOARD="$1" all >>"$o.log" 2>&1; then
		return 0
	fi
	echo "size: build $o failed (see $o.log)" >&2
	tail -n 15 "$o.log" >&2
	touch "$o.failed"
	return 1
}

# run_all "BOARD NAME [SYM=VAL]"...: the builds, JOBS at a time; fails if any failed.
run_all() {
	local spec rc=0 n=0
	for spec in "$@"; do
		# shellcheck disable=SC2086 # spec is words on purpose
		build $spec &
		n=$((n + 1))
		if [ "$n" -ge "$jobs" ]; then wait -n || rc=1; n=$((n - 1)); fi
	done
	while [ "$n" -gt 0 ]; do wait -n || rc=1; n=$((n - 1)); done
	return $rc
}

# features BOARD: the bool features its base build has on (kconfig.py features). Not STATIC:
# a dynamic binary is smaller only by the shared libraries the device must then carry, and the
# ARM sysroots hold what a static link needs (a dynamic aarch64 link misses libz.so.1).
features() {
	/usr/bin/python3 kconfig/kconfig.py features "$out/$1/base/.config" | grep -vx STATIC
}

check_dir() { # DIR BOARD: 0 when every binary fits its budget
	local dir=$1 board=$2 budget="boards/$2/size-budget" b size max rc=0
	[ -f "$budget" ] || { echo "size: no $budget" >&2; return 1; }
	for b in $binaries; do
		[ -f "$dir/$b" ] || continue
		size=$(bytes "$dir" "$b")
		max=$(awk -v b="$b" '$1 == b { print $2 }' "$budget")
		if [ -z "$max" ]; then
			echo "size: $board builds $b but $budget has no line for it" >&2; rc=1
		elif [ "$size" -gt "$max" ]; then
			echo "size: $board $b has $size bytes (text + data), over its budget of $max ($budget)" >&2
			rc=1
		else
			printf 'size: %-14s %-18s %9d bytes (budget %d)\n' "$board" "$b" "$size" "$max"
		fi
	done
	return $rc
}

totals() { # BOARD...: one line per binary: text + data, stripped file size, budget
	local board b
	printf '%-14s %-18s %10s %10s %10s\n' board binary text+data file budget
	for board in "$@"; do
		for b in $binaries; do
			[ -f "$out/$board/base/$b" ] || continue
			printf '%-14s %-18s %10s %10s %10s\n' "$board" "$b" \
				"$(bytes "$out/$board/base" "$b")" "$(fbytes "$out/$board/base" "$b")" \
				"$(awk -v b="$b" '$1 == b { print $2 }' "boards/$board/size-budget" 2>/dev/null)"
		done
	done
}

kib() { awk -v n="$1" 'BEGIN { printf "%.1f", n / 1024 }'; }

table() { # BOARD: bytes each feature adds, per binary the board builds (KiB: their sum)
	local board=$1 f b base off sum bins=""
	for b in $binaries; do [ -f "$out/$board/base/$b" ] && bins="$bins $b"; done
	echo
	echo "$board: bytes (text + data) each feature adds: base minus a build with it off"
	printf '  %-20s' feature
	for b in $bins; do printf ' %18s' "$b"; done
	printf ' %8s\n' KiB
	printf '  %-20s' "(base)"
	sum=0
	for b in $bins; do
		base=$(bytes "$out/$board/base" "$b"); sum=$((sum + base))
		printf ' %18s' "$base"
	done
	printf ' %8s\n' "$(kib $sum)"
	for f in $(features "$board"); do
		printf '  %-20s' "$f"
		if [ -f "$out/$board/no-$f.failed" ]; then echo " build failed"; continue; fi
		sum=0
		for b in $bins; do
			base=$(bytes "$out/$board/base" "$b")
			off=$(bytes "$out/$board/no-$f" "$b")
			sum=$((sum + base - off))
			printf ' %18s' "$((base - off))"
		done
		printf ' %8s\n' "$(kib $sum)"
	done
}

# diff A B: per binary, symbols whose size changed, largest change first (bloat-o-meter).
symdiff() {
	local b
	for b in $binaries; do
		[ -f "$1/$b.debug" ] || [ -f "$2/$b.debug" ] || continue
		echo "$b: $(bytes "$1" "$b") -> $(bytes "$2" "$b") bytes (text + data)"
		awk 'FNR == 1 { side++ }
		     NF >= 4 { sz[$4] += (side == 1 ? -1 : 1) * $2 }
		     END { for (s in sz) if (sz[s] != 0)
				printf "%d %+10d  %s\n", sz[s] < 0 ? -sz[s] : sz[s], sz[s], s }' \
			<(nm --size-sort -S -t d "$1/$b.debug" 2>/dev/null || true) \
			<(nm --size-sort -S -t d "$2/$b.debug" 2>/dev/null || true) |
			sort -k1,1nr | cut -d' ' -f2- | head -n 40
	done
}

mode=table
case "${1:-}" in
--totals | --check) mode=${1#--}; shift ;;
--check-dir) [ $# = 3 ] || { echo "usage: $0 --check-dir DIR BOARD" >&2; exit 2; }
	check_dir "$2" "$3"; exit ;;
--diff) [ $# = 3 ] || { echo "usage: $0 --diff DIR_A DIR_B" >&2; exit 2; }
	symdiff "$2" "$3"; exit ;;
-*) sed -n '3,20p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
boards=("$@")
[ ${#boards[@]} -gt 0 ] || mapfile -t boards < <(ls boards)

t0=$(date +%s)
nbuilds=0
specs=()
for board in "${boards[@]}"; do specs+=("$board base"); done
rc=0
run_all "${specs[@]}" || rc=1
nbuilds=${#specs[@]}
echo "size: ${#specs[@]} board builds, $(($(date +%s) - t0)) s" >&2
if [ "$mode" = table ]; then
	specs=()
	for board in "${boards[@]}"; do
		for f in $(features "$board"); do specs+=("$board no-$f $f=n"); done
	done
	run_all "${specs[@]}" || rc=1
	nbuilds=$((nbuilds + ${#specs[@]}))
fi
totals "${boards[@]}"
if [ "$mode" = table ]; then
	for board in "${boards[@]}"; do table "$board"; done
fi
if [ "$mode" = check ]; then
	for board in "${boards[@]}"; do check_dir "$out/$board/base" "$board" || rc=1; done
fi
echo "size: $nbuilds builds, $(($(date +%s) - t0)) s (JOBS=$jobs)"
exit $rc
