#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Oracle test of pprof/: compares our reader, builder and merge with Go's runtime/pprof and
# `go tool pprof` (tools nobody here wrote). Fails (does not skip) when go is missing.
#
#  1. tests/oracle (stdlib only) writes CPU, heap, goroutine, mutex and block profiles, three
#     variants; our reader reads every one, and our flat values per function equal
#     `go tool pprof -top`'s for each;
#  2. our builder's output (every feature) is read by `go tool pprof -raw` without error and
#     round-trips through our reader losslessly; so do the Go profiles through our writer;
#  3. our merge of the three CPU (and heap) profiles has the same -top flat values as
#     `go tool pprof -proto a b c`'s merge, and Go reads our merged file.
set -euo pipefail

tool="$EP_BUILD/tests/pprof-tool"
work=$(mktemp -d "$EP_BUILD/pprof-oracle.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

command -v go >/dev/null || { echo "FAIL: go is not installed (tools/deps/oracles.list: golang-go)"; exit 1; }
[ -x "$tool" ] || { echo "FAIL: $tool is missing (make all-tests builds it)"; exit 1; }

# A Go build cache under the build dir: works as root in CI, with no network.
export GOCACHE="$EP_BUILD/go-cache" HOME="$work" GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
mkdir -p "$GOCACHE"

(cd "$EP_TOP/tests/oracle" && go build -o "$work/oracle" .)
for v in 0 1 2; do
	mkdir -p "$work/v$v"
	"$work/oracle" "$work/v$v" "$v"
done

unit_flag() { # profile -> -unit=... so that go prints raw integers
	local t
	t=$(go tool pprof -top "$1" 2>/dev/null | sed -n 's/^Type: //p')
	case $t in
	cpu|delay|contentions*) echo "-unit=ns" ;;
	*space*|*bytes*) echo "-unit=B" ;;
	*) echo "" ;;
	esac
}

go_flat() { # files... -> "<flat> <cum> <name>" sorted by name, as `pprof-tool flat` prints
	local u
	u=$(unit_flag "$1")
	# go marks a node reached inlined ("(inline)") or both ways ("(partial-inline)", seen on
	# some runs of the Go program); names are compared without the mark. A function go shows
	# twice (inlined and not) gets cum "-": pprof counts such a sample in both nodes, which a
	# per-name sum cannot reproduce. The flat values still add up.
	# shellcheck disable=SC2086
	go tool pprof -top -nodefraction=0 -nodecount=1000000 $u "$@" 2>/dev/null |
		awk '/^ *flat  *flat%/ {on=1; next}
		     on && NF >= 6 {
			v=$1; sub(/(ns|B)$/, "", v); c=$4; sub(/(ns|B)$/, "", c); name=$6
			for (i = 7; i <= NF; i++) name = name " " $i
			sub(/ \((partial-)?inline\)$/, "", name)
			s[name] += v; cum[name] += c; rows[name]++
		     }
		     END { for (n in s) printf "%d %s %s\n", s[n], (rows[n] > 1 ? "-" : cum[n]), n }' |
		LC_ALL=C sort -k3
}

our_flat() { # files... -> like go_flat, with "-" where go_flat has it (given as $work/go.txt)
	"$tool" flat "$@" | LC_ALL=C sort -k3 |
		awk 'NR == FNR { if ($2 == "-") dash[substr($0, index($0, $3))] = 1; next }
		     { n = substr($0, index($0, $3)); if (n in dash) $2 = "-"; print }' \
			"$work/go.txt" -
}

compare_flat() { # label files...
	local what=$1
	shift
	go_flat "$@" >"$work/go.txt"
	our_flat "$@" >"$work/our.txt"
	if [ ! -s "$work/go.txt" ] && [ "$what" != "mutex-empty" ]; then
		echo "note: go shows no samples for $what"
	fi
	if ! diff -u "$work/go.txt" "$work/our.txt"; then
		echo "FAIL: flat/cum values differ from go tool pprof -top for $what"
		exit 1
	fi
	echo "ok   flat and cum == go tool pprof -top: $what ($(wc -l <"$work/our.txt") functions)"
}

# 1. read every Go profile; same flat values as go tool pprof -top.
for v in 0 1 2; do
	for k in cpu heap goroutine mutex block; do
		f="$work/v$v/$k.pb.gz"
		"$tool" check "$f"
		compare_flat "$k v$v" "$f"
	done
done
n=$(our_flat "$work/v0/cpu.pb.gz" | wc -l)
[ "$n" -gt 0 ] || { echo "FAIL: the CPU profile has no samples"; exit 1; }

# 2. builder output is read by go, and round-trips through our reader and writer.
"$tool" build "$work/built.pb.gz"
go tool pprof -raw "$work/built.pb.gz" >"$work/built.raw" 2>"$work/built.err" ||
	{ cat "$work/built.err"; echo "FAIL: go tool pprof cannot read our builder's output"; exit 1; }
grep -q "0123456789abcdef0123456789abcdef01234567" "$work/built.raw" ||
	{ echo "FAIL: build id lost"; exit 1; }
grep -q "bytes:\[4096 bytes\]" "$work/built.raw" || { echo "FAIL: numeric label lost"; exit 1; }
grep -q "inlined_helper work.c:6" "$work/built.raw" || { echo "FAIL: inline frame lost"; exit 1; }
"$tool" dump "$work/built.pb.gz" >"$work/a.txt"
"$tool" rewrite "$work/built.pb.gz" "$work/re.pb.gz"
"$tool" dump "$work/re.pb.gz" >"$work/b.txt"
diff -u "$work/a.txt" "$work/b.txt" || { echo "FAIL: builder output does not round-trip"; exit 1; }
[ "$(grep -c '^sample' "$work/a.txt")" = 100 ] || { echo "FAIL: want 100 samples"; exit 1; }
echo "ok   builder output: go reads it, round-trips losslessly"

for k in cpu heap goroutine mutex block; do
	f="$work/v1/$k.pb.gz"
	"$tool" dump "$f" >"$work/a.txt"
	"$tool" rewrite "$f" "$work/re.pb.gz"
	"$tool" dump "$work/re.pb.gz" >"$work/b.txt"
	diff -u "$work/a.txt" "$work/b.txt" || { echo "FAIL: $k does not round-trip"; exit 1; }
	go tool pprof -raw "$work/re.pb.gz" >/dev/null 2>"$work/re.err" ||
		{ cat "$work/re.err"; echo "FAIL: go cannot read our rewrite of $k"; exit 1; }
	go tool pprof -raw "$f" 2>/dev/null | sed -n '/^Samples:/,$p' >"$work/ga.txt"
	go tool pprof -raw "$work/re.pb.gz" 2>/dev/null | sed -n '/^Samples:/,$p' >"$work/gb.txt"
	diff -u "$work/ga.txt" "$work/gb.txt" ||
		{ echo "FAIL: go sees our rewrite of $k differently"; exit 1; }
done
echo "ok   Go profiles round-trip through our reader and writer (go -raw identical)"

# 3. merge: same flat values as go tool pprof -proto a b c.
for k in cpu heap block; do
	files=("$work/v0/$k.pb.gz" "$work/v1/$k.pb.gz" "$work/v2/$k.pb.gz")
	go tool pprof -proto "${files[@]}" >"$work/go-merged.pb.gz" 2>/dev/null
	"$tool" merge -o "$work/our-merged.pb.gz" "${files[@]}"
	go_flat "$work/go-merged.pb.gz" >"$work/go.txt"
	our_flat "${files[@]}" >"$work/our.txt"
	go_flat "$work/our-merged.pb.gz" >"$work/go-ours.txt"
	diff -u "$work/go.txt" "$work/our.txt" || { echo "FAIL: merged $k differs from go's"; exit 1; }
	diff -u "$work/go.txt" "$work/go-ours.txt" ||
		{ echo "FAIL: go reads our merged $k differently"; exit 1; }
	echo "ok   merge of 3 $k profiles == go tool pprof -proto ($(wc -l <"$work/our.txt") functions)"
done

# Incompatible profiles: a clear error, like pprof's.
if "$tool" merge -o "$work/bad.pb.gz" "$work/v0/cpu.pb.gz" "$work/v0/heap.pb.gz" 2>"$work/err"; then
	echo "FAIL: merging cpu with heap succeeded"; exit 1
fi
grep -q "cannot be combined" "$work/err" || { cat "$work/err"; echo "FAIL: unclear error"; exit 1; }
echo "ok   cpu + heap refused: $(cat "$work/err")"
echo "PASS"
