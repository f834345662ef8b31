#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The cost of reading one arm64 frame from the code (elf/a64frame.c, as libedgeprof.so's arm64
# walk does where no .eh_frame row covers a pc), natively on this machine's CPU over Debian's
# arm64 libc and liblzma (tests/bench/a64frame-bench.c): ns and instructions per reading.
# An ARM core differs: state figures as "this CPU"; qemu-aarch64 figures (the handler's
# median) are in stacks-bench arm64.
#   tests/bench/a64frame-bench.sh [FILE...]      BUDGET=384 (CONFIG_UNWIND_A64_SCAN_INSNS)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
gcc -std=gnu11 -O2 -Wall -Wextra -Werror -I"$top" -o "$bin" "$top/tests/bench/a64frame-bench.c" "$top/elf/a64frame.c"
[ $# -gt 0 ] || set -- /usr/aarch64-linux-gnu/lib/libc.so.6 \
	"$top"/build/bench-arm64/lib/aarch64-linux-gnu/liblzma.so.5
"$bin" "$@"
