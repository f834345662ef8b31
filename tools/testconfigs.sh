#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The config matrix: every board, allnoconfig, allyesconfig and each top-level feature alone
# must build, so no combination Kconfig allows rots; each board's binaries must fit its
# boards/<board>/size-budget. Output under build/testconfigs/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
out=build/testconfigs
jobs=${JOBS:-2}
failed=()
ok=0

build() { # name, make args for the configuration step...
	local name=$1; shift
	local o="$out/$name"
	rm -rf "$o"
	if make -s O="$o" "$@" >"$out/$name.log" 2>&1 &&
	   make -s -j"$jobs" O="$o" BOARD=host-x86_64 all >>"$out/$name.log" 2>&1; then
		ok=$((ok + 1)); echo "OK    $name"
	else
		failed+=("$name"); echo "FAIL  $name (see $out/$name.log)"; tail -n 15 "$out/$name.log"
	fi
}

mkdir -p "$out"
for b in boards/*/; do
	b=$(basename "$b")
	rm -rf "$out/board-$b"
	if make -s O="$out/board-$b" BOARD="$b" defconfig >"$out/board-$b.log" 2>&1 &&
	   make -s -j"$jobs" O="$out/board-$b" BOARD="$b" all >>"$out/board-$b.log" 2>&1; then
		ok=$((ok + 1)); echo "OK    board-$b"
		# Each board's stripped binaries within boards/<board>/size-budget (make size-check).
		if tools/size.sh --check-dir "$out/board-$b" "$b"; then ok=$((ok + 1))
		else failed+=("size-$b"); fi
	else
		failed+=("board-$b"); echo "FAIL  board-$b"; tail -n 15 "$out/board-$b.log"
	fi
done
build allnoconfig BOARD=host-x86_64 allnoconfig
build allyesconfig BOARD=host-x86_64 allyesconfig
for f in SAMPLER_SIGPROF SAMPLER_BPF SYMBOLIZE UPLOAD_MTLS COLLECTOR TOOLS; do
	build "only-$f" BOARD=host-x86_64 allnoconfig SET="$f=y"
done
build only-SPOOL BOARD=host-x86_64 allnoconfig SET="UPLOAD_MTLS=y SPOOL=y"
build only-PULL_SERVER BOARD=host-x86_64 allnoconfig SET="UPLOAD_MTLS=y PULL_SERVER=y"
build only-AGENT_SCRAPE BOARD=host-x86_64 allnoconfig SET="UPLOAD_MTLS=y AGENT_SCRAPE=y"
build collector-no-scrape BOARD=host-x86_64 allnoconfig SET="COLLECTOR=y COLLECTOR_SCRAPE=n"

echo "testconfigs: $ok passed, ${#failed[@]} failed"
[ ${#failed[@]} = 0 ]
