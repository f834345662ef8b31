#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Symbolization from build-ids at the collector: a stripped binary profiled on the "device"
# shows addresses (never wrong names) until its unstripped twin is uploaded with
# `edgeprof debuginfo upload`; then the merged export names work_a/b/c for go tool pprof.
# Bad uploads (not ELF, wrong build-id, bad id, too large) get clear errors and change nothing.
. "$EP_TOP/tests/lib/collector-lib.sh"
W=$EP_BUILD/tests/workloads
command -v go >/dev/null || fail "go is not installed (tools/deps/oracles.list)"
export GOCACHE=$T/gocache HOME=$T PPROF_BINARY_PATH=/nonexistent

make_pki
start_collector --max-body 512K --max-debuginfo 2M
export EDGEPROF_COLLECTOR=https://localhost:$TLS_PORT EDGEPROF_TLS_CA=$T/pki/ca.crt \
	EDGEPROF_TLS_CERT=$T/pki/op.crt EDGEPROF_TLS_KEY=$T/pki/op.key

EDGEPROF_OUTPUT=$T/s.pb.gz EDGEPROF_HZ=499 LD_PRELOAD=$EP_BUILD/libedgeprof.so \
	"$W/split-stripped" --seconds 1 >/dev/null || fail "profiling split-stripped"
dcurl op --data-binary "@$T/s.pb.gz" "$(URL '/api/0/profiles?service=app&type=cpu')" \
	| grep -q '"code":200' || fail "upload profile"

top() { # -> go tool pprof -top of the merged export, without local symbolization
	"$EP" query 'app' -o "$T/m.pb.gz" 2>/dev/null || fail "query"
	go tool pprof -symbolize=none -top "$T/m.pb.gz" 2>/dev/null
}
top >"$T/before.txt"
grep -q 'work_a' "$T/before.txt" && fail "names before any debug file: $(cat "$T/before.txt")"
grep -q '\[split-stripped\]' "$T/before.txt" || fail "expected bare addresses: $(cat "$T/before.txt")"

id=$(file -L "$W/split" | sed -n 's/.*BuildID\[sha1\]=\([0-9a-f]*\).*/\1/p')
[ -n "$id" ] || fail "no build-id on $W/split"
# Refused: not ELF, another file's build-id, a bad id, a file over the body limit.
expect() { # CODE PATTERN curl-args...
	local code=$1 pat=$2
	shift 2
	dcurl op "$@" >"$T/answer" || true
	grep -q "HTTP $code" "$T/answer" && grep -q "$pat" "$T/answer" \
		|| fail "expected $code /$pat/: $(cat "$T/answer")"
}
echo "not an elf file at all" >"$T/junk"
expect 400 'not an ELF file' --data-binary "@$T/junk" "$(URL "/api/0/debuginfo/$id")"
expect 400 'build-id is' --data-binary "@$EP_BUILD/tests/workloads/torture" "$(URL "/api/0/debuginfo/$id")"
expect 400 'lowercase hex' --data-binary "@$W/split" "$(URL '/api/0/debuginfo/XYZ')"
# Debug files have their own body bound (2M here), other requests keep --max-body (512K).
# A real debug file between the two: the first of ours that is (they grow with the features).
big=
for f in "$EP_BUILD"/edgeprof.debug "$EP_BUILD"/libedgeprof.so.debug "$EP_BUILD"/*.debug; do
	[ -f "$f" ] && [ "$(stat -c %s "$f")" -gt 524288 ] && [ "$(stat -c %s "$f")" -lt 2097152 ] &&
		{ big=$f; break; }
done
[ -n "$big" ] || fail "no debug file of this build lies between 512 KiB and 2 MiB"
expect 400 'build-id is' --data-binary "@$big" "$(URL '/api/0/debuginfo/00aa')"
cat "$big" "$big" "$big" >"$T/huge" # over 2M: three times a file over 512K
expect 413 'larger than the limit of 2097152 bytes' --data-binary "@$T/huge" \
	"$(URL '/api/0/debuginfo/00aa')"
expect 413 'larger than the limit of 2097152 bytes' --data-binary "@$T/huge" \
	-H 'Transfer-Encoding: chunked' "$(URL '/api/0/debuginfo/00aa')"
expect 413 'larger than the limit of 524288 bytes' --data-binary "@$big" \
	"$(URL '/api/0/profiles?service=app&type=cpu')"
dcurl op "$(URL /api/0/debuginfo)" | grep -q '"body":\[\]' || fail "a refused upload was stored"


# A debug file whose line table is garbage (version 9): names, no file:line, a counted error.
cp "$W/split" "$T/bad-dwarf"
off=$(readelf -S -W "$T/bad-dwarf" | awk '{ sub(/^ *\[ *[0-9]+\] */, "") } $1 == ".debug_line" { print $4 }')
[ -n "$off" ] || fail "no .debug_line in $W/split"
printf '\x09' | dd of="$T/bad-dwarf" bs=1 seek=$((0x$off + 4)) conv=notrunc status=none
dcurl op --data-binary "@$T/bad-dwarf" "$(URL "/api/0/debuginfo/$id")" | grep -q '"code":200' \
	|| fail "upload of the bad-dwarf twin"
"$EP" query 'app' -o "$T/m.pb.gz" 2>/dev/null || fail "query"
go tool pprof -symbolize=none -top -lines "$T/m.pb.gz" >"$T/bad.txt" 2>/dev/null
grep -q ' work_a$' "$T/bad.txt" || fail "bad line table: work_a not named alone: $(cat "$T/bad.txt")"
grep -q 'split\.c:' "$T/bad.txt" && fail "bad line table gave file:line: $(cat "$T/bad.txt")"
metric() { dcurl op "$(URL /metrics)" | awk -v m="edgeprof_collector_$1" '$1 == m { print $2 }'; }
[ "$(metric debuginfo_line_errors_total)" = 1 ] || fail "line table error not counted"
grep -q 'no file:line, names only: line table version 9' "$T/collector.log" \
	|| fail "no clear log of the bad line table"

# The good twin replaces it.
"$EP" debuginfo upload "$W/split" | grep -q "^$id " || fail "debuginfo upload"
dcurl op "$(URL /api/0/debuginfo)" | grep -q "\"build_id\":\"$id\"" || fail "debuginfo list"
top >"$T/after.txt"
for f in work_a work_b work_c run_split; do
	grep -q " $f\$" "$T/after.txt" || fail "$f not named after upload: $(cat "$T/after.txt")"
done
# file:line from the DWARF line table (the workload is built with -g): each work_ function's hot
# lines are in the split.c lines of its body.
src=$EP_TOP/tests/workloads/split.c
body() { awk -v f="$1" 'index($0, " " f "(") { s = NR } s && /^}/ { print s, NR; exit }' "$src"; }
check_lines() { # what was uploaded
	"$EP" query 'app' -o "$T/m.pb.gz" 2>/dev/null || fail "query"
	go tool pprof -symbolize=none -top -lines "$T/m.pb.gz" >"$T/lines.txt" 2>/dev/null
	for f in work_a work_b work_c; do
		read -r first last < <(body $f)
		n=$(awk -v f="$f" -v a="$first" -v b="$last" '
			$(NF-1) == f && $NF ~ /\/tests\/workloads\/split\.c:[0-9]+$/ {
				l = $NF; sub(/.*:/, "", l); if (l + 0 >= a && l + 0 <= b) n++ }
			END { print n + 0 }' "$T/lines.txt")
		[ "$n" -ge 1 ] || fail "$1: $f has no split.c:$first-$last line: $(cat "$T/lines.txt")"
	done
}
check_lines "the debug file"
# The same with zlib-compressed debug sections (SHF_COMPRESSED, as gcc -gz or objcopy write).
objcopy --compress-debug-sections=zlib "$W/split" "$T/split-z"
readelf -S -W "$T/split-z" | grep -q ' \.debug_line .* C ' || fail "objcopy did not compress"
dcurl op --data-binary "@$T/split-z" "$(URL "/api/0/debuginfo/$id")" | grep -q '"code":200' \
	|| fail "upload of the compressed twin"
check_lines "the compressed debug file"
cp "$T/lines.txt" "$T/lines-z.txt"
"$EP" debuginfo upload "$W/split" >/dev/null || fail "debuginfo upload"
check_lines "the debug file again"
cmp -s "$T/lines.txt" "$T/lines-z.txt" || fail "compressed and plain debug files differ"
[ "$(metric debuginfo_line_errors_total)" = 1 ] || fail "line table errors: not just the bad one"
# Shares are the workload's 50/30/20, within a wide margin (sampling noise on a loaded box).
share() { awk -v f="$1" '$NF == f { sub("%", "", $2); print int($2) }' "$T/after.txt"; }
a=$(share work_a)
[ "$a" -ge 35 ] && [ "$a" -le 65 ] || fail "work_a share $a%"
# The single-profile download stays byte-identical to what the device sent.
dcurl op -o "$T/one.pb.gz" "$(URL /api/0/profiles/1)" >/dev/null
cmp -s "$T/one.pb.gz" "$T/s.pb.gz" || fail "GET /api/0/profiles/1 is not the stored bytes"
echo "ok: names after upload: $(grep -c work_ "$T/after.txt") work_ frames; go tool pprof -top -lines:"
grep -m3 ' work_' "$T/lines.txt"
