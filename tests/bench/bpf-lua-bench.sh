#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Lua 5.4 frames in the BPF sampler: the BPF program's per-sample cost with and without them
# (lua5.4 running tests/workloads/luasplit.lua; EDGEPROF_BPF_NO_LUA=1 the native rows), and the
# agent's RSS and CPU with N lua5.4 processes: tests/bench/bpf-py-bench.py with INTERP=lua
# says how. Root; after make BOARD=host-x86_64 all-tests.
#   tests/bench/bpf-lua-bench.sh
#   REPS=5 SECONDS_PER_RUN=10 NPROCS=20 PHASES=cost,agent tests/bench/bpf-lua-bench.sh
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
export EP_BUILD=${EP_BUILD:-$top/build/host-x86_64}
INTERP=lua exec /usr/bin/python3 "$top/tests/bench/bpf-py-bench.py" "$@"
