#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Node.js JavaScript frames in the BPF sampler (bpf/v8.h): the BPF program's per-sample cost
# with and without them, and what the profile names (tests/bench/bpf-v8-bench.py says how).
# Root; after make BOARD=host-x86_64 all-tests.
#   tests/bench/bpf-v8-bench.sh
#   REPS=5 SECONDS_PER_RUN=10 NODE=/usr/bin/node tests/bench/bpf-v8-bench.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
export EP_BUILD=${EP_BUILD:-$top/build/host-x86_64}
exec /usr/bin/python3 "$top/tests/bench/bpf-v8-bench.py" "$@"
