#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stack completeness on code without frame pointers (Debian's xz, gzip, python3, sqlite3 and an
# own -O2 -fomit-frame-pointer workload): edgeprof beside `perf record --call-graph dwarf`, same
# run; see stacks-bench.py. Mode sigprof (libedgeprof.so) or bpf (edgeprof-agent, root).
#   tests/bench/stacks-bench.sh sigprof|bpf [--reps 3] [--hz 999] [--programs xz,own] [--show 3]
#   EP_BUILD=build/host-x86_64 tests/bench/stacks-bench.sh bpf
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { sed -n '3,7p' "$0"; exit 2; }
mode=$1
shift
exec /usr/bin/python3 "$top/tests/bench/stacks-bench.py" "$mode" \
	--build "${EP_BUILD:-$top/build/host-x86_64}" "$@"
