#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Stack snapshots unwound at the collector (issue 36 item 3), repeated: each repetition is one
# run of tests/integration/snapshot-armv7.test.sh (qemu-arm, own C -O2 Thumb-2 without unwind
# tables, snapshots on every sample, a real collector with the debug files uploaded), whose
# peers run in the same repetition: the -funwind-tables build of the same source (the truth)
# and the device's own chains of the same samples (its reading of the code). Prints per
# repetition and the medians: the share of samples labelled unwind=exact and right (edges),
# the share whose whole chain is one of the truth's (chains), the device's alike, the ratios
# ours/device, and the gzip bytes a snapshot adds to the upload.
#   tests/bench/snapshot-bench.sh [--reps 5]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
reps=5
[ "${1:-}" = --reps ] && reps=$2
build=${EP_BUILD:-$top/build/host-x86_64}
make -s -C "$top" BOARD=host-x86_64 all-tests >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for i in $(seq "$reps"); do
	EP_TOP=$top EP_BUILD=$build nice bash "$top/tests/integration/snapshot-armv7.test.sh" >"$out" 2>&1 ||
		{ echo "repetition $i failed:"; grep -v ' info: ' "$out" | tail -n 20; }
	sed -n 's/^own C without tables.*: \([0-9]*\) samples.*right: \([0-9.]*\) % .*), \([0-9.]*\) % (the whole.*same samples: \([0-9.]*\) % \/ \([0-9.]*\) %$/\1 \2 \3 \4 \5/p' "$out" |
		tr '\n' ' '
	sed -n 's/^size: \([0-9]*\) snapshots add \([0-9]*\) bytes.*/\1 \2/p' "$out"
done | /usr/bin/python3 -c '
import statistics, sys
rows = [list(map(float, l.split())) for l in sys.stdin if len(l.split()) == 7]
if not rows:
    sys.exit("no repetition gave figures")
print("rep  samples  exact-edges  exact-chains  device-edges  device-chains  gzip-B/snapshot")
for i, r in enumerate(rows, 1):
    print(f"{i:3d}  {r[0]:7.0f}  {r[1]:10.1f} %  {r[2]:11.1f} %  {r[3]:11.1f} %  {r[4]:12.1f} %  "
          f"{r[6] / r[5]:14.0f}")
med = [statistics.median(r[k] for r in rows) for k in range(5)]
per = statistics.median(r[6] / r[5] for r in rows)
print(f"median over {len(rows)}: exact and right {med[1]:.1f} % (edges), {med[2]:.1f} % "
      f"(chains); device {med[3]:.1f} % / {med[4]:.1f} %; ratio ours/device "
      f"{med[1] / med[3]:.3f} (edges), {med[2] / med[4]:.3f} (chains); {per:.0f} gzip bytes "
      f"a snapshot")
'
