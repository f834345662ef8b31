#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent scrapes the Pyroscope Node SDK's pull endpoints (@pyroscope/nodejs' express
# middleware, from the npm registry, pinned by tests/scrape-node/package-lock.json; 0.4.7, the
# last release for Debian bookworm's Node 18: 0.4.8 and later need Node 20): its
# /debug/pprof/profile (wall time) shows busyKnown, the function that burns 40 ms of every 50
# (called by tick);
# its /debug/pprof/heap (in-use sampling, nothing cumulative) is shipped every round, the first
# included. ~10 s (the first run installs the packages into the build directory).
set -euo pipefail
: "${EP_TOP:?}" "${EP_BUILD:?}"
B=$EP_BUILD
fail() { echo "FAIL: $*"; exit 1; }
"$B/edgeprof-agent" --help | grep -- "--scrape " >/dev/null ||
	{ echo "skip: agent built without CONFIG_AGENT_SCRAPE"; exit 77; }
command -v node >/dev/null && command -v npm >/dev/null ||
	{ echo "skip: node and npm are not installed (tools/deps/agent.list)"; exit 77; }
command -v go >/dev/null || { echo "skip: go (go tool pprof) is not installed"; exit 77; }
NODE_DIR=$B/scrape-node
if [ ! -d "$NODE_DIR/node_modules/@pyroscope/nodejs" ] ||
	! cmp -s "$EP_TOP/tests/scrape-node/package-lock.json" "$NODE_DIR/package-lock.json"; then
	mkdir -p "$NODE_DIR"
	cp "$EP_TOP/tests/scrape-node/package.json" "$EP_TOP/tests/scrape-node/package-lock.json" \
		"$NODE_DIR/"
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci @pyroscope/nodejs"
fi
cp "$EP_TOP/tests/scrape-node/app.js" "$NODE_DIR/"
W=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-scrape-node.XXXXXX")
# no inlining: busyKnown keeps its frame (V8 would fold it into the timer callback at times)
node --no-turbo-inlining "$NODE_DIR/app.js" >"$W/node.out" 2>&1 &
npid=$!
trap 'kill $npid 2>/dev/null; wait $npid 2>/dev/null || true; rm -rf "$W"' EXIT
for _ in $(seq 1 100); do grep -q listening "$W/node.out" && break; sleep 0.1; done
nport=$(awk '/listening/ {print $2}' "$W/node.out")
[ -n "$nport" ] || { cat "$W/node.out"; fail "the Node service does not listen"; }

export HOME=$W
timeout -s INT 7 "$B/edgeprof-agent" --sampler sigprof --registry "$W/reg" --output-dir "$W/out" \
	--round-seconds 2 --period-seconds 2 --jitter-percent 0 --scrape-types cpu,heap \
	--scrape "node=http://127.0.0.1:$nport" 2>"$W/agent.log" || true
grep scrape "$W/agent.log" | tail -n 2
ls "$W/out"
[ "$(ls "$W/out" | grep -c '^node-cpu-')" -ge 2 ] || fail "the wall profiles were not scraped"
[ "$(ls "$W/out" | grep -c '^node-heap-')" -ge 2 ] || fail "the heap was not scraped every round"
f=$(ls "$W"/out/node-cpu-* | tail -n 1)
go tool pprof -top "$f" 2>/dev/null >"$W/top.txt" || true
head -n 8 "$W/top.txt"
# busyKnown, or its caller tick when V8's sampler missed the leaf (seen under heavy load)
awk '$NF == "busyKnown" || $NF == "tick" {s += $2 + 0} END {exit !(s > 50)}' "$W/top.txt" ||
	fail "busyKnown (and tick, its caller) is not the top of the scraped wall profile"
go tool pprof -top "$(ls "$W"/out/node-heap-* | head -n 1)" 2>/dev/null | grep '^Type: space' >/dev/null ||
	fail "the first round's heap (a snapshot) is not the SDK's space profile"
echo "ok"
