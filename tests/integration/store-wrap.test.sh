#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Wraparound: write 5x the ring's size; the newest records are served, the oldest are gone,
# the counts match, and a reopen finds exactly the same set.
set -eu
drv="$EP_BUILD/tests/drivers/store-append"
[ -x "$drv" ] || { echo "store-append driver not built"; exit 1; }
work=$(mktemp -d /tmp/edgeprof-store-wrap.XXXXXX)
trap 'rm -rf "$work"' EXIT
ring=$work/ring
size=$((512 * 1024))
# records average ~4.2 KiB: 5x the ring is about 620 records
"$drv" append "$ring" "$size" 0 620 0 >"$work/acks"
"$drv" verify "$ring" >"$work/verify"
stats=$(tail -n 1 "$work/verify")
echo "$stats"
first=$(sed -n 's/.*first=\([0-9]*\).*/\1/p' <<<"$stats")
last=$(sed -n 's/.*last=\([0-9]*\).*/\1/p' <<<"$stats")
records=$(sed -n 's/.*records=\([0-9]*\).*/\1/p' <<<"$stats")
[ "$last" = 620 ] || { echo "newest record is $last, want 620"; exit 1; }
[ "$first" -gt 400 ] || { echo "oldest live record $first: the ring did not wrap 5 times"; exit 1; }
[ "$records" = $((last - first + 1)) ] || { echo "records $records != $last - $first + 1"; exit 1; }
# every acknowledged record from first on is served, identical; none before it
awk -v first="$first" '
	NR == FNR { if ($1 == "rec") have[$2] = $3; next }
	$2 >= first && have[$2] != $3 { print "missing or different:", $2; bad = 1 }
	$2 < first && ($2 in have) { print "should be gone:", $2; bad = 1 }
	END { exit bad }' "$work/verify" "$work/acks"
# live bytes fit in the ring
sum=$(awk '$1 == "rec" { n++ } END { print n }' "$work/verify")
[ "$sum" = "$records" ] || { echo "served $sum records, stats say $records"; exit 1; }
"$drv" verify "$ring" >"$work/verify2"
cmp -s <(grep '^rec' "$work/verify") <(grep '^rec' "$work/verify2") ||
	{ echo "a reopen serves a different set"; exit 1; }
echo "wrapped 5x: newest $last served, oldest live $first, $records records"
