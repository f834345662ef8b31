#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `edgeprof top/info/merge/folded` against `go tool pprof` on real Go runtime profiles (CPU,
# heap, goroutine, mutex) written by tools/cli/testdata/workload.go:
#  - top prints what `go tool pprof -top` prints, for every sample type, with --cum, -n and
#    --nodefraction, and for several files merged;
#  - merge writes a file pprof reads (-raw) and whose -top equals pprof's own merge;
#  - folded lines add up to pprof's total for every sample type and hold the named burners;
#  - exit codes 0/1/2 and --help for every command.
set -u
E="$EP_BUILD/edgeprof"
[ -x "$E" ] || { echo "no $E: is CONFIG_TOOLS on?"; exit 1; }
command -v go >/dev/null || { echo "go tool pprof is the oracle: install golang-go"; exit 1; }
tmp=$(mktemp -d "$EP_BUILD/cli-top.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export HOME="$EP_BUILD/cli-go/home" GOCACHE="$EP_BUILD/cli-go/gocache" GO111MODULE=off GOFLAGS=
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pprof() { timeout 120 go tool pprof "$@" 2>"$tmp/pprof.err"; }

"$EP_TOP/tools/cli/testdata/go-profiles.sh" "$EP_BUILD" "$tmp" || { echo "workload failed"; exit 1; }
cd "$tmp" || exit 1

# Exact: one file, our whole output against pprof's.
same_top() { # label, edgeprof top args..., --, pprof args...
	local label=$1 ours=() theirs=()
	shift
	while [ "$1" != -- ]; do ours+=("$1"); shift; done
	shift
	theirs=("$@")
	"$E" top "${ours[@]}" >ours.txt 2>ours.err || { fail "$label: edgeprof exit $?: $(cat ours.err)"; return; }
	pprof -top "${theirs[@]}" >theirs.txt || { fail "$label: pprof failed: $(cat pprof.err)"; return; }
	if diff -u theirs.txt ours.txt >diff.txt; then
		echo "ok   top $label ($(grep -c '%  ' ours.txt) functions)"
	else
		fail "top $label differs from go tool pprof -top:"; cat diff.txt
	fi
}

# Tolerant: the function -> flat value pairs of two -top outputs (inline labels dropped).
pairs() { sed -n '/^ *flat  *flat%/,$p' "$1" | tail -n +2 |
	awk '{ n = $6; for (i = 7; i <= NF; i++) if ($i !~ /^\((partial-)?inline\)$/) n = n " " $i; print n "\t" $1 }' | sort; }

for f in cpu1 cpu2; do
	same_top "$f" "$f.pb.gz" -- "$f.pb.gz"
	same_top "$f --cum" --cum "$f.pb.gz" -- -cum "$f.pb.gz"
	same_top "$f -n 5" -n 5 "$f.pb.gz" -- -nodecount=5 "$f.pb.gz"
	same_top "$f samples" -i samples "$f.pb.gz" -- -sample_index=samples "$f.pb.gz"
	same_top "$f nodefraction" --nodefraction=0.05 "$f.pb.gz" -- -nodefraction=0.05 "$f.pb.gz"
done
for si in alloc_objects alloc_space inuse_objects inuse_space; do
	same_top "heap $si" -i "$si" heap.pb.gz -- -sample_index="$si" heap.pb.gz
done
same_top goroutine goroutine.pb.gz -- goroutine.pb.gz
same_top "mutex contentions" -i contentions mutex.pb.gz -- -sample_index=contentions mutex.pb.gz
same_top "mutex delay" mutex.pb.gz -- mutex.pb.gz
grep -q 'main.burnAlpha' <("$E" top cpu1.pb.gz) || fail "cpu1: main.burnAlpha not in top"

# Several files: merged first, as pprof merges its arguments.
"$E" top cpu1.pb.gz cpu2.pb.gz >ours.txt || fail "top of two files exited $?"
pprof -top cpu1.pb.gz cpu2.pb.gz >theirs.txt
if [ -s theirs.txt ] && diff <(pairs theirs.txt) <(pairs ours.txt) >diff.txt; then
	echo "ok   top of cpu1+cpu2 = pprof's merge ($(pairs ours.txt | wc -l) functions)"
else
	fail "top cpu1 cpu2 differs from go tool pprof -top cpu1 cpu2:"; cat diff.txt
fi

# merge: a file pprof reads, with pprof's own merge as its -top.
"$E" merge -o merged.pb.gz cpu1.pb.gz cpu2.pb.gz || fail "merge exited $?"
pprof -raw merged.pb.gz >/dev/null || fail "go tool pprof -raw cannot read our merge: $(cat pprof.err)"
pprof -top merged.pb.gz >merged.txt
if [ -s merged.txt ] && diff <(pairs theirs.txt) <(pairs merged.txt) >diff.txt; then
	echo "ok   merge: pprof -top of our merged file = pprof's merge"
else
	fail "merged file's -top differs:"; cat diff.txt
fi
"$E" merge -o - cpu1.pb.gz heap.pb.gz >/dev/null 2>err.txt
rc=$?
[ $rc = 1 ] && [ -s err.txt ] || fail "merging cpu with heap: exit $rc (want 1 with a message)"
echo "ok   merge cpu+heap refused: $(head -1 err.txt)"

# folded: sums equal pprof's total for every sample type; the burners are leaves.
total_of() { # file index -> pprof's total in raw units
	pprof -top -nodefraction=0 -nodecount=1 -unit=ns -sample_index="$2" "$1" |
		sed -n 's/^Showing nodes accounting for .* of \([0-9.]*\)[^0-9]* total$/\1/p'
}
for spec in cpu1:samples cpu1:cpu cpu2:cpu heap:alloc_space heap:inuse_objects goroutine:goroutine mutex:delay; do
	f=${spec%%:*} si=${spec#*:}
	sum=$("$E" folded -i "$si" "$f.pb.gz" | awk '{ s += $NF } END { printf "%d", s }')
	want=$(total_of "$f.pb.gz" "$si")
	if [ -n "$want" ] && [ "$sum" = "${want%.*}" ]; then
		echo "ok   folded $f $si sums to $sum"
	else
		fail "folded $f $si sums to $sum, pprof's total is '$want'"
	fi
done
"$E" folded cpu1.pb.gz cpu2.pb.gz >folded.txt
for fn in burnAlpha burnBeta burnGamma; do
	grep -Eq "^runtime.main;main.main;main.cpuProfile;main.$fn[; ]" folded.txt ||
		fail "folded: no runtime.main;main.main;main.cpuProfile;main.$fn stack"
done
[ "$(awk '{ print $1 }' folded.txt | sort | uniq -d | wc -l)" = 0 ] || fail "folded: a stack twice"

# info: types, time, mappings with the binary.
"$E" info cpu1.pb.gz >info.txt || fail "info exited $?"
grep -q 'cpu/nanoseconds' info.txt && grep -q 'samples/count' info.txt &&
	grep -q '(default)' info.txt && grep -q 'workload' info.txt &&
	grep -Eq '^time: +20[0-9-]+T' info.txt || { fail "info lacks types/time/mapping:"; cat info.txt; }

# Exit codes and help.
expect() { # want-rc args...
	local want=$1
	shift
	"$E" "$@" >out.txt 2>&1
	local rc=$?
	[ $rc = "$want" ] || fail "edgeprof $* exited $rc, want $want: $(head -3 out.txt)"
}
expect 2
expect 2 no-such-command
expect 2 top
expect 2 top -n x cpu1.pb.gz
expect 2 merge cpu1.pb.gz
expect 2 flame cpu1.pb.gz
expect 2 diff -o d.svg cpu1.pb.gz
expect 1 top no-such-file.pb.gz
head -c 300 cpu1.pb.gz >truncated.pb.gz
expect 1 top truncated.pb.gz
expect 1 top -i no_such_type cpu1.pb.gz
grep -q "no sample type 'no_such_type'" out.txt || fail "unknown sample type: $(cat out.txt)"
expect 0 --help
for c in info top merge folded flame diff help; do
	expect 0 "$c" --help
	grep -q "^usage: edgeprof $c" out.txt || fail "$c --help prints no usage line"
done
"$E" --help | grep -q '^  top ' || fail "--help does not list top"
# every registered command, whichever area added it, answers --help and `help CMD` with 0
for c in $("$E" --help | sed -n 's/^  \([a-z][a-z-]*\)  .*/\1/p'); do
	expect 0 "$c" --help
	expect 0 help "$c"
done

[ $fails = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all cli-top checks passed"
