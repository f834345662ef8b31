#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The armv7 walk per frame under qemu-arm, code read vs .ARM.exidx (tests/bench/armwalk-bench.c),
# with the gateway-armv7 build's objects: `make BOARD=gateway-armv7` first.
#   tests/bench/armwalk-bench.sh [REPS=2000] [DEPTH=12]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
b=$top/build/gateway-armv7
t=arm-linux-gnueabihf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
objs="$b/pic/agent/lib/unwind.o $b/pic/agent/lib/modules.o $b/pic/elf/cfi.o $b/pic/elf/ehabi.o
	$b/pic/elf/armframe.o"
for flags in -fno-unwind-tables -funwind-tables; do
	$t-gcc -std=gnu11 -O2 $flags -I"$top" -I"$b/include" -o "$tmp/w$flags" \
		"$top/tests/bench/armwalk-bench.c" $objs -ldl -lpthread
	for cache in on off; do
		env=()
		[ $cache = off ] && env=(-E NOCACHE=1)
		printf '%-20s cache %-3s: ' "$flags" "$cache"
		qemu-arm -L /usr/$t -E LD_LIBRARY_PATH="$top/build/sysroot-armhf/usr/lib/$t" \
			"${env[@]}" "$tmp/w$flags" "${1:-2000}" "${2:-12}"
	done
done
