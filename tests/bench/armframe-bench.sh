#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of reading one armv7 frame from the code (elf/armframe.c, as libedgeprof.so's armv7
# walk does where no unwind table covers a pc), natively on this machine's CPU over Debian's
# armhf libc and liblzma (tests/bench/armframe-bench.c): ns and instructions per reading.
# An ARM core differs: state figures as "this CPU"; qemu-arm figures are in stacks-bench armv7.
#   tests/bench/armframe-bench.sh [FILE...]      BUDGET=384 (CONFIG_UNWIND_ARM_SCAN_INSNS)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -I"$top" -o "$bin" "$top/tests/bench/armframe-bench.c" "$top/elf/armframe.c"
[ $# -gt 0 ] || set -- /usr/arm-linux-gnueabihf/lib/libc.so.6 \
	"$top"/build/bench-armhf/lib/arm-linux-gnueabihf/liblzma.so.5
"$bin" "$@"
