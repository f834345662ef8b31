#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A corrupted ring file (flipped bytes, truncated file, zeroed header) still opens, serves
# every intact record byte-identical, serves nothing damaged, and counts what it skipped.
set -eu
drv="$EP_BUILD/tests/drivers/store-append"
[ -x "$drv" ] || { echo "store-append driver not built"; exit 1; }
work=$(mktemp -d /tmp/edgeprof-store-corrupt.XXXXXX)
trap 'rm -rf "$work"' EXIT
ring=$work/ring
size=$((2 * 1024 * 1024))

stat_of() { sed -n "s/.*$1=\([0-9]*\).*/\1/p" "$work/verify" | tail -n 1; }
verify() { # fails the test when a damaged record is served
	"$drv" verify "$ring" >"$work/verify" 2>"$work/verr" || {
		echo "$1: verify failed"; grep -m5 BAD "$work/verify" || cat "$work/verr"; exit 1; }
}

"$drv" append "$ring" "$size" 0 200 0 >"$work/acks"
[ "$(wc -l <"$work/acks")" = 200 ] || { echo "append did not acknowledge 200 records"; exit 1; }
cp "$ring" "$work/pristine"
verify pristine
[ "$(stat_of records)" = 200 ] && [ "$(stat_of corrupt)" = 0 ] || { cat "$work/verify"; exit 1; }

# 1. flipped bytes in five records (inside their payloads, found by seq)
offset_of() { # seq -> byte offset of its record
	/usr/bin/python3 - "$ring" "$1" <<'PY'
import struct, sys
d = open(sys.argv[1], 'rb').read()
want = int(sys.argv[2])
for o in range(512, len(d) - 56, 8):
    if d[o:o+4] == b'EPRC' and struct.unpack_from('<Q', d, o + 16)[0] == want:
        print(o); break
PY
}
flip() { # offset
	printf '\x5a' | dd of="$ring" bs=1 seek="$1" conv=notrunc status=none
}
for s in 10 50 51 120 199; do
	off=$(offset_of $s)
	flip $((off + 150))
done
verify flipped
echo "flipped: $(tail -n 1 "$work/verify")"
[ "$(stat_of records)" = 195 ] && [ "$(stat_of corrupt)" = 5 ] ||
	{ echo "flipped bytes: expected 195 records served and 5 counted"; exit 1; }
for s in 10 50 51 120 199; do
	! grep -q "^rec $s " "$work/verify" || { echo "damaged record $s was served"; exit 1; }
done
# the intact ones are byte-identical to what was acknowledged
awk 'NR == FNR { if ($1 == "rec") have[$2] = $3; next }
     !($2 in have) && $2 != 10 && $2 != 50 && $2 != 51 && $2 != 120 && $2 != 199 { print "missing", $2; bad = 1 }
     ($2 in have) && have[$2] != $3 { print "different", $2; bad = 1 }
     END { exit bad }' "$work/verify" "$work/acks"

# 2. truncated in the middle of record 150
cp "$work/pristine" "$ring"
off=$(offset_of 150)
truncate -s $((off + 100)) "$ring"
verify truncated
echo "truncated: $(tail -n 1 "$work/verify")"
[ "$(stat_of records)" = 149 ] && [ "$(stat -c %s "$ring")" = "$size" ] ||
	{ echo "truncated: expected 149 records and the file extended back"; exit 1; }
"$drv" append "$ring" 0 0 3 1000 >/dev/null # and it takes new records
verify after-truncate-append
[ "$(stat_of records)" = 152 ] || { echo "append after truncation failed"; exit 1; }

# 3. zeroed header block
cp "$work/pristine" "$ring"
dd if=/dev/zero of="$ring" bs=512 count=1 conv=notrunc status=none
verify zeroed-header
echo "zeroed header: $(tail -n 1 "$work/verify")"
[ "$(stat_of records)" = 200 ] && [ "$(stat_of repaired)" = 1 ] ||
	{ echo "zeroed header: expected all 200 records recovered"; exit 1; }
verify zeroed-header-reopen
[ "$(stat_of repaired)" = 0 ] || { echo "header was not rewritten"; exit 1; }

# 4. random garbage over a whole region: never served, the rest is
cp "$work/pristine" "$ring"
dd if=/dev/urandom of="$ring" bs=4096 seek=40 count=16 conv=notrunc status=none
verify garbage
echo "garbage: $(tail -n 1 "$work/verify")"
r=$(stat_of records) c=$(stat_of corrupt)
[ $((r + c)) = 200 ] && [ "$c" -gt 0 ] || { echo "garbage: records + corrupt != 200"; exit 1; }
echo "corrupted ring files: intact records served, damaged ones counted"
