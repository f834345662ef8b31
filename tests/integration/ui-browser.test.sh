#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The web UI in a real browser: a collector with four real profiles (two of the split workload
# labelled region=eu half an hour ago, two of the torture workload labelled region=us five
# minutes ago), driven by headless Chromium through playwright-core: token login, flame graph,
# label selector, timeline range, comparison colours, download; the type picker on a heap profile
# (service mem: in use and allocated, in bytes and objects) and a wall-clock one (service wait,
# in time); the runtimes' colours on Debian's python3.11 under the library (service py: its
# script's frames blue, the native ones around them warm). Screenshots land in test-logs/.
. "$EP_TOP/tests/lib/collector-lib.sh"
W=$EP_BUILD/tests/workloads
command -v node >/dev/null || fail "node is not installed"
[ -x /usr/bin/chromium ] || fail "chromium is not installed (tools/deps/ui.list)"

# playwright-core from the npm registry, pinned by tests/ui/package-lock.json.
NODE_DIR=$EP_BUILD/ui-node
if [ ! -d "$NODE_DIR/node_modules/playwright-core" ]; then
	mkdir -p "$NODE_DIR"
	cp "$EP_TOP/tests/ui/package.json" "$EP_TOP/tests/ui/package-lock.json" "$NODE_DIR/"
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci playwright-core"
fi
cp "$EP_TOP/tests/ui/ui-test.mjs" "$NODE_DIR/"

make_pki
start_collector --http-listen 127.0.0.1:0 --http-token s3cret-token

profile() { # OUT WORKLOAD
	EDGEPROF_OUTPUT=$1 EDGEPROF_HZ=499 LD_PRELOAD=$EP_BUILD/libedgeprof.so "$W/$2" --seconds 1 \
		>/dev/null || fail "profiling $2"
}
profile "$T/a.pb.gz" split
profile "$T/b.pb.gz" torture
upload() { # FILE REGION MINUTES_AGO
	local at
	at=$(date -u -d "-$3 minutes" +%Y-%m-%dT%H:%M:%S)
	curl -sS --max-time 60 -H 'Authorization: Bearer s3cret-token' --data-binary "@$1" \
		"http://127.0.0.1:$HTTP_PORT/api/0/profiles?service=demo&type=cpu&labels=region=$2&created_at=$at" \
		| grep -q '"code":200' || fail "upload $1"
}
# a heap profile and a wall-clock one of libedgeprof.so, each its own service
EDGEPROF_PROFILES=heap EDGEPROF_HEAP_RATE=16384 EDGEPROF_OUTPUT=$T/heap.pb.gz \
	LD_PRELOAD=$EP_BUILD/libedgeprof.so "$W/heapsplit" 64 >/dev/null || fail "profiling heapsplit"
EDGEPROF_PROFILES=wall EDGEPROF_HZ=99 EDGEPROF_OUTPUT=$T/wall.pb.gz \
	LD_PRELOAD=$EP_BUILD/libedgeprof.so "$W/wallsplit" 0.5 >/dev/null || fail "profiling wallsplit"
# a CPython 3.11 profile (agent/lib/pyframes.h): script frames among native ones
[ -x /usr/bin/python3.11 ] || fail "python3.11 is not installed (tools/deps/agent.list: python3)"
EDGEPROF_HZ=499 EDGEPROF_OUTPUT=$T/py.pb.gz LD_PRELOAD=$EP_BUILD/libedgeprof.so \
	/usr/bin/python3.11 "$EP_TOP/tests/workloads/pysplit.py" 1 >/dev/null || fail "profiling pysplit.py"
for st in mem:heap:heap wait:wall:wall py:cpu:py; do
	IFS=: read -r svc type f <<<"$st"
	curl -sS --max-time 60 -H 'Authorization: Bearer s3cret-token' --data-binary "@$T/$f.pb.gz" \
		"http://127.0.0.1:$HTTP_PORT/api/0/profiles?service=$svc&type=$type" \
		| grep -q '"code":200' || fail "upload $f as type $type"
done
code=$(curl -sS -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret-token' \
	"http://127.0.0.1:$HTTP_PORT/api/0/render?query=mem&type=heap&from=now-1h&to=now&index=nope")
[ "$code" = 400 ] || fail "render with an unknown index answered $code"
upload "$T/a.pb.gz" eu 31
upload "$T/a.pb.gz" eu 29
upload "$T/b.pb.gz" us 6
upload "$T/b.pb.gz" us 4

# The JSON endpoints answer scripts too.
curl -sS -H 'Authorization: Bearer s3cret-token' \
	"http://127.0.0.1:$HTTP_PORT/api/0/render?query=demo&from=now-1h&to=now&format=folded" \
	>"$T/folded.txt" || fail "render folded"
grep -q ';work_a [0-9]' "$T/folded.txt" || fail "folded render lacks work_a: $(head -3 "$T/folded.txt")"
curl -sS -H 'Authorization: Bearer s3cret-token' \
	"http://127.0.0.1:$HTTP_PORT/api/0/timeline?query=demo&from=now-1h&to=now" | tee "$T/tl.json" \
	| grep -q '"profiles":4' || fail "timeline: $(cat "$T/tl.json")"
code=$(curl -sS -o /dev/null -w '%{http_code}' "http://127.0.0.1:$HTTP_PORT/api/0/render?query=demo")
[ "$code" = 401 ] || fail "render without the token answered $code"

(cd "$NODE_DIR" && timeout 300 node ui-test.mjs "http://127.0.0.1:$HTTP_PORT" s3cret-token "$EP_BUILD/test-logs") \
	|| fail "browser test"
echo "ok: screenshots in $EP_BUILD/test-logs/ui-*.png"
