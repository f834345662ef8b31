#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The lines of Python frames under LD_PRELOAD=libedgeprof.so (standalone): Debian's
# python3.11 runs tests/workloads/pylines.py, whose hot loop is on the lines marked HOT and
# called from the line marked CALL. Read back by go tool pprof -traces -lines, >= 95 % of the
# samples under hot() have hot() on a HOT line and main() on the CALL line (the frames' line,
# not the function's first line: agent/core/pyline.h).
set -u
lib=$EP_BUILD/libedgeprof.so
py=/usr/bin/python3.11
work=$EP_TOP/tests/workloads/pylines.py
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
grep -q "^CONFIG_PYFRAMES=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_PYFRAMES off"; exit 77; }
[ -x "$py" ] || { echo "python3.11 not installed"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# at the default rate (99 Hz), 4 s: ~400 samples
env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/cpu.pb.gz" "$py" "$work" 4 >"$tmp/out" &
pid=$!
wait "$pid" || fail "pylines.py exited with $?"
grep -q "^sink " "$tmp/out" || fail "output: $(cat "$tmp/out")"
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 "$EP_TOP/tests/workloads/pylines_check.py" \
	"$tmp/cpu.pb.gz" "$work" "$pid" 95 1 || fail "lines"
