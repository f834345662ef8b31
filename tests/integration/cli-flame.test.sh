#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `edgeprof flame` and `edgeprof diff` on real Go CPU profiles (tools/cli/testdata/workload.go):
#  - the SVG is well-formed XML (xmllint), self-contained, names the three burners, and each
#    burner's share in its tooltip equals `go tool pprof -top`'s cum%;
#  - headless Chromium renders it (screenshot) and runs its script: a "#s=" search highlights
#    the burners and reports their share, a "#z=" zoom widens a frame to the full width;
#  - the diff colours what grew red and what shrank blue;
#  - --min-width merges narrow frames, --max-frames bounds the output.
set -u
E="$EP_BUILD/edgeprof"
[ -x "$E" ] || { echo "no $E: is CONFIG_TOOLS on?"; exit 1; }
command -v go >/dev/null || { echo "go tool pprof is the oracle: install golang-go"; exit 1; }
command -v xmllint >/dev/null || { echo "xmllint missing: install libxml2-utils (tools/deps/cli.list)"; exit 1; }
command -v chromium >/dev/null || { echo "chromium missing (tools/deps/cli.list)"; exit 1; }
tmp=$(mktemp -d "$EP_BUILD/cli-flame.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export HOME="$EP_BUILD/cli-go/home" GOCACHE="$EP_BUILD/cli-go/gocache" GO111MODULE=off GOFLAGS=
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

"$EP_TOP/tools/cli/testdata/go-profiles.sh" "$EP_BUILD" "$tmp" || { echo "workload failed"; exit 1; }
cd "$tmp" || exit 1

# Chromium with a throw-away profile, no network, bounded in time.
browse() { # url, then chromium's output flags
	local url=$1
	shift
	timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$tmp/chromium" --window-size=1200,600 "$@" "$url" 2>>chromium.log
}

"$E" flame -o cpu.svg cpu1.pb.gz cpu2.pb.gz || fail "flame exited $?"
xmllint --noout cpu.svg || fail "cpu.svg is not well-formed XML"
grep -Eq '(href|src)=|url\(' cpu.svg && fail "cpu.svg loads something from elsewhere"
for fn in burnAlpha burnBeta burnGamma; do
	grep -q "<title>main.$fn
" cpu.svg || fail "cpu.svg has no main.$fn frame"
done
echo "ok   flame: well-formed, self-contained, $(grep -c '<g data-d' cpu.svg) frames"

# The subtitle counts samples as pprof does (the samples/count total), not sample records.
want=$(go tool pprof -top -sample_index=samples cpu1.pb.gz cpu2.pb.gz 2>/dev/null |
	sed -n 's/.* of \([0-9]*\) total.*/\1/p')
got=$(grep -o 'total [^<]* in [0-9]* samples' cpu.svg | head -n 1 | awk '{print $(NF - 1)}')
if [ -n "$want" ] && [ "$got" = "$want" ]; then
	echo "ok   subtitle: $got samples, pprof's samples total is $want"
else
	fail "subtitle says '$got' samples, pprof's samples total is '$want'"
fi

# Each burner is called from one place only: its frame's share is pprof's cum%.
go tool pprof -top cpu1.pb.gz cpu2.pb.gz >top.txt 2>/dev/null
for fn in burnAlpha burnBeta burnGamma; do
	want=$(awk -v f="main.$fn" '$6 == f { print $5 }' top.txt | tr -d '%')
	got=$(grep -A1 "<title>main.$fn$" cpu.svg | sed -n 's/.*(\([0-9.]*\)%)<\/title>.*/\1/p')
	if [ -n "$want" ] && [ "$got" = "$want" ]; then
		echo "ok   main.$fn is $got% wide, pprof's cum% is $want%"
	else
		fail "main.$fn is '$got'% wide, pprof's cum% is '$want'%"
	fi
done

# The browser: a picture, and the script at work.
browse "file://$tmp/cpu.svg" --screenshot="$tmp/cpu.png" >/dev/null
if [ "$(head -c 8 cpu.png 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
	[ "$(stat -c %s cpu.png)" -gt 5000 ]; then
	echo "ok   chromium screenshot: $(stat -c %s cpu.png) bytes"
	cp cpu.png "$EP_BUILD/test-logs/cli-flame.png" 2>/dev/null
else
	fail "no screenshot from chromium: $(tail -3 chromium.log)"
fi
browse "file://$tmp/cpu.svg#s=^main%5C.burn" --dump-dom >search.dom
matched=$(sed -n 's/.*Matched: \([0-9.]*\)%.*/\1/p' search.dom | head -1)
hits=$(grep -o 'class="match"' search.dom | wc -l)
want=$(awk '$6 ~ /^main\.burn/ { s += $5 } END { printf "%.1f", s }' top.txt)
if [ -n "$matched" ] && [ "$hits" -ge 3 ] &&
	awk -v a="$matched" -v b="$want" 'BEGIN { exit !(a - b < 0.25 && b - a < 0.25) }'; then
	echo "ok   search ^main\\.burn: $hits frames highlighted, Matched: $matched% (pprof: $want%)"
else
	fail "search: matched '$matched'% in $hits frames, pprof says $want%"
fi
browse "file://$tmp/cpu.svg#z=main.burnGamma" --dump-dom >zoom.dom
hidden=$(grep -o 'class="hide"' zoom.dom | wc -l)
# the zoomed frame spans the drawing (1200 - 2 * 10 px)
if tr -d '\n' <zoom.dom | grep -q '<title>main.burnGamma[^<]*</title><rect [^>]*width="1180.00"' &&
	[ "$hidden" -gt 0 ]; then
	echo "ok   zoom main.burnGamma: full width, $hidden frames hidden"
else
	fail "zoom: main.burnGamma not full width or nothing hidden ($hidden)"
fi

# diff: cpu1 burns Alpha most, cpu2 Gamma.
"$E" diff cpu1.pb.gz cpu2.pb.gz -o diff.svg || fail "diff exited $?"
xmllint --noout diff.svg || fail "diff.svg is not well-formed XML"
frame() { tr -d '\n' <diff.svg | grep -o "<title>main.$1[^<]*</title><rect [^>]*>" | head -1; }
a=$(frame burnAlpha) g=$(frame burnGamma)
if [[ $g == *"share +"*'fill="rgb(250,'* ]] && [[ $a == *"share -"*',250)"'* ]]; then
	echo "ok   diff: burnGamma red (grew), burnAlpha blue (shrank)"
else
	fail "diff colours: gamma [$g] alpha [$a]"
fi
# a profile against itself: nothing changed, nothing lacking, every box white
"$E" diff cpu1.pb.gz cpu1.pb.gz -o self.svg || fail "diff of a profile with itself exited $?"
coloured=$(grep -o 'fill="rgb([0-9,]*)"' self.svg | grep -vc 'rgb(250,250,250)')
grep -q '0.00% of base is in stacks NEW lacks' self.svg && [ "$coloured" = 0 ] ||
	fail "self-diff: $coloured coloured boxes"
"$E" diff cpu1.pb.gz heap.pb.gz -o bad.svg 2>/dev/null
[ $? = 1 ] || fail "diff of cpu against heap did not fail"
browse "file://$tmp/diff.svg" --screenshot="$tmp/diff.png" >/dev/null
[ -s diff.png ] && cp diff.png "$EP_BUILD/test-logs/cli-diff.png" 2>/dev/null

# Bounds: wide minimum width merges frames; a frame budget cuts and says so.
"$E" flame --min-width 60 -o narrow.svg cpu1.pb.gz cpu2.pb.gz || fail "flame --min-width exited $?"
# (whether narrow siblings add up to a merged box depends on the run; the unit test pins that)
narrowest=$(grep -o '<rect x="[0-9.]*" y="[0-9]*" width="[0-9.]*"' narrow.svg |
	sed 's/.*width="//; s/"//' | sort -g | head -1)
[ "$(grep -c '<g data-d' narrow.svg)" -lt "$(grep -c '<g data-d' cpu.svg)" ] &&
	awk -v w="$narrowest" 'BEGIN { exit !(w >= 60) }' ||
	fail "--min-width 60: narrowest box $narrowest px, $(grep -c '<g data-d' narrow.svg) boxes"
"$E" flame --max-frames 5 -o few.svg cpu1.pb.gz || fail "flame --max-frames exited $?"
[ "$(grep -c '<g data-d' few.svg)" -le 5 ] && grep -q 'boxes, frames under' few.svg ||
	fail "--max-frames 5 drew $(grep -c '<g data-d' few.svg) frames"
xmllint --noout narrow.svg few.svg || fail "bounded SVGs are not well-formed"
echo "ok   bounds: merged narrow frames, frame budget"

[ $fails = 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all cli-flame checks passed"
