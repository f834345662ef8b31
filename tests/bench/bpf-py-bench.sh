#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPython frames in the BPF sampler: the BPF program's per-sample cost with and without them,
# and the agent's RSS and CPU with 20 python3.11 processes running (tests/bench/bpf-py-bench.py
# says how). Root; after make BOARD=host-x86_64 all-tests.
#   tests/bench/bpf-py-bench.sh
#   REPS=5 SECONDS_PER_RUN=10 NPROCS=20 PHASES=cost,agent tests/bench/bpf-py-bench.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
export EP_BUILD=${EP_BUILD:-$top/build/host-x86_64}
exec /usr/bin/python3 "$top/tests/bench/bpf-py-bench.py" "$@"
