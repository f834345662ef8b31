#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stack completeness on code without frame pointers (Debian's xz, gzip, python3, sqlite3 and an
# own -O2 -fomit-frame-pointer workload): edgeprof beside `perf record --call-graph dwarf`, same
# run; see stacks-bench.py. Mode sigprof (libedgeprof.so) or bpf (edgeprof-agent, root).
#   tests/bench/stacks-bench.sh sigprof|bpf [--reps 3] [--hz 999] [--programs xz,own] [--show 3]
#   tests/bench/stacks-bench.sh sigprof --arch arm64 --scale 3   (qemu-user; also armhf)
#   tests/bench/stacks-bench.sh armv7 [--reps 3] [--scale 1] [--programs own,xz] [--show 5]
#     (qemu-arm: own C built -O2 Thumb-2 with and without -funwind-tables, stripped, and
#      Debian's armhf xz -9; the gateway-armv7 build's libedgeprof.so; see main_armv7)
#   tests/bench/stacks-bench.sh arm64 [--reps 3] [--scale 1] [--programs own,xz] [--show 5]
#     (qemu-aarch64: own C built -O2 -fomit-frame-pointer with and without
#      -fno-asynchronous-unwind-tables -fno-unwind-tables, stripped, and Debian's arm64 xz -9;
#      the gateway-arm64 build's libedgeprof.so)
#   EP_BUILD=build/host-x86_64 tests/bench/stacks-bench.sh bpf
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { sed -n '3,14p' "$0"; exit 2; }
mode=$1
shift
[ "$mode" = armv7 ] && EP_BUILD=${EP_BUILD:-$top/build/gateway-armv7}
[ "$mode" = arm64 ] && EP_BUILD=${EP_BUILD:-$top/build/gateway-arm64}
exec /usr/bin/python3 "$top/tests/bench/stacks-bench.py" "$mode" \
	--build "${EP_BUILD:-$top/build/host-x86_64}" "$@"
