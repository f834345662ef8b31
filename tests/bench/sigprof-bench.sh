#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# libedgeprof.so vs gperftools (and perf's shares) on the split workload; see sigprof-bench.py.
#   tests/bench/sigprof-bench.sh [--build build/host-x86_64] [--rounds 2000] [--reps 3] [--hz 99,1000,4999] [--xz-reps 3]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
make -j2 all-tests >/dev/null
exec /usr/bin/python3 tests/bench/sigprof-bench.py "$@"
