#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ad-hoc files in the CLI (issue 22 item 4): `edgeprof top`, `flame`, `diff` (and every command
# that reads profiles) take folded/collapsed text (Brendan Gregg's "a;b;c 12" lines) as well as
# pprof, gzipped or not, by sniffing. Oracle: `go tool pprof` on the pprof `edgeprof merge`
# writes from the folded text, and `edgeprof folded` of a pprof read back. About 2 s.
set -u
E="$EP_BUILD/edgeprof"
GEN="/usr/bin/python3 $EP_TOP/tests/lib/pprof-gen.py"
[ -x "$E" ] || { echo "no $E: is CONFIG_TOOLS on?"; exit 77; }
command -v go >/dev/null || { echo "go tool pprof is the oracle: install golang-go"; exit 1; }
tmp=$(mktemp -d "$EP_BUILD/cli-folded.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export HOME="$EP_BUILD/cli-go/home" GOCACHE="$EP_BUILD/cli-go/gocache"
mkdir -p "$HOME"
fail() { echo "FAIL: $*"; exit 1; }
cd "$tmp" || exit 1

# What flamegraph.pl's stackcollapse scripts write: comments, blank lines, spaces and parentheses
# in frame names, a stack twice (summed), CRLF line ends.
printf '# collapsed\nmain;work;spin 70\nmain;work 10\n\nmain;idle 20\r\nmain;operator new(unsigned long) 5\nmain;work;spin 5\n' >a.folded
printf 'main;work;spin 30\nmain;work 10\nmain;idle 60\n' >b.folded

# top of folded text = go tool pprof -top of the same text converted by edgeprof merge
"$E" merge a.folded -o a.pb.gz || fail "merge of folded text"
go tool pprof -raw a.pb.gz >/dev/null 2>&1 || fail "pprof cannot read our conversion"
"$E" top a.folded | sed -n '/flat%/,$p' >ours.txt
go tool pprof -top a.pb.gz 2>/dev/null | sed -n '/flat%/,$p' >theirs.txt
diff ours.txt theirs.txt || fail "top of folded text differs from pprof's"
grep -q '^ *75 .* spin$' ours.txt || fail "spin: $(cat ours.txt)"
grep -q 'operator new(unsigned long)$' ours.txt || fail "a frame with spaces"
echo "ok  top of folded = go tool pprof -top ($(wc -l <ours.txt) lines)"

# pprof -> folded -> top: the same values as top of the pprof (raw and gzipped)
$GEN c.pb.gz cpu 'main;checksum=200000000' 'main;other=300000000' 'main;other;checksum=50000000'
gzip -dc c.pb.gz >c.pb
"$E" folded c.pb >c.folded || fail "folded of raw pprof"
"$E" top c.folded | grep -q '^ *250000000 .* checksum$' || fail "folded round trip: $("$E" top c.folded)"
"$E" top c.pb | grep -q '250ms .* checksum$' || fail "raw (not gzipped) pprof"
echo "ok  pprof (raw and gzip) -> folded -> top"

# flame and diff of folded files
"$E" flame a.folded -o a.svg || fail "flame of folded text"
grep -q '<title>spin' a.svg || fail "flame: no spin frame"
"$E" diff a.folded b.folded -o d.svg || fail "diff of folded text"
grep -A1 '<title>spin' d.svg | grep -q 'base 75 (68.18%), new 30 (30.00%)' ||
	fail "diff: $(grep -A1 '<title>spin' d.svg)"
echo "ok  flame and diff of folded text"

# Text that is neither: a clear error naming the line, exit 1
printf 'main;work 10\nnot a stack\n' >bad.folded
out=$("$E" top bad.folded 2>&1) && fail "bad folded text accepted"
echo "$out" | grep -q 'line 2: expected' || fail "no line in: $out"
out=$(printf 'hello world\n' | "$E" top - 2>&1) && fail "text accepted"
echo "$out" | grep -q 'neither pprof nor folded text' || fail "unclear: $out"
echo "ok  bad text: $out"
