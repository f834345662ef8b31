#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ring overflow is counted, not silent: one page of ring at 4999 Hz, read once a second while
# two threads burn CPU. The per-CPU drop counters must show far more drops than delivered.
set -u
probe=$EP_BUILD/tests/bpf-probe
work=$EP_BUILD/tests/workloads/bpf-work
[ -x "$probe" ] && [ -x "$work" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
tmp=$(mktemp -d)
wpid=
cleanup() { [ -n "$wpid" ] && kill "$wpid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
fi
"$work" split 6 2 &
wpid=$!
sleep 0.3
"$probe" --seconds 3 --hz 4999 --ring-kb 4 --sleep-ms 1000 --pid "$wpid" --quiet \
	>/dev/null 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
cat "$tmp/err"
samples=$(sed -n 's/^samples=\([0-9]*\).*/\1/p' "$tmp/err")
dropped=$(sed -n 's/.*dropped_ringbuf=\([0-9]*\).*/\1/p' "$tmp/err")
[ -n "$samples" ] && [ -n "$dropped" ] || { echo "no stats line"; exit 1; }
# ~3 s x 2 CPUs x 4999 Hz offered; a 4 KiB ring holds a few records per second read.
[ "$samples" -ge 3 ] || { echo "too few delivered: $samples"; exit 1; }
[ "$dropped" -ge 1000 ] || { echo "drops not counted: $dropped"; exit 1; }
[ "$dropped" -gt $((samples * 10)) ] || { echo "drops $dropped vs delivered $samples"; exit 1; }
echo "bpf drops: ok ($dropped dropped, $samples delivered)"
