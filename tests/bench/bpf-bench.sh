#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Peers (bcc, kernel headers) are installed by `tools/setup.sh --bench`; perf comes with make test's setup.
# BPF sampler benchmark (root): ours vs `perf record -a -g` (and bcc `profile` where it runs),
# same run, same workload, 19 Hz and 99 Hz; then the per-sample cost at 4999 Hz.
#   tests/bench/bpf-bench.sh            (after: make all-tests)
#   SECONDS_PER_RUN=10 COST_RUNS=5 COST_ROUNDS=1500 EP_BUILD=build/host-x86_64 tests/bench/bpf-bench.sh
#   PHASES=leaf tests/bench/bpf-bench.sh   (any of profile,leaf,cost)
#   CHURN=gcc PHASES=profile tests/bench/bpf-bench.sh   (profile while programs start: gcc, burn)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
export EP_BUILD=${EP_BUILD:-$top/build/host-x86_64}
exec /usr/bin/python3 "$top/tests/bench/bpf-bench.py" "$@"
