#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ad-hoc files (issue 22 item 4): the web UI opens a chosen or dropped pprof (gzip or raw) or
# folded-text file and shows its flame graph and top table, in headless Chromium driven by
# playwright-core as ui-browser does; the collector renders it (POST /api/0/render) and stores
# nothing. The endpoint itself: roles (a device gets a 403 before its body), --max-body (413),
# bad input (400). Screenshots in test-logs/.
. "$EP_TOP/tests/lib/collector-lib.sh"
command -v node >/dev/null || fail "node is not installed"
[ -x /usr/bin/chromium ] || fail "chromium is not installed (tools/deps/ui.list)"
GEN="/usr/bin/python3 $EP_TOP/tests/lib/pprof-gen.py"

NODE_DIR=$EP_BUILD/ui-node
if [ ! -d "$NODE_DIR/node_modules/playwright-core" ]; then
	mkdir -p "$NODE_DIR"
	cp "$EP_TOP/tests/ui/package.json" "$EP_TOP/tests/ui/package-lock.json" "$NODE_DIR/"
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci playwright-core"
fi
cp "$EP_TOP/tests/ui/ui-file-test.mjs" "$NODE_DIR/"

make_pki
start_collector --http-listen 127.0.0.1:0 --http-token s3cret-token --max-body 64K
H=http://127.0.0.1:$HTTP_PORT
$GEN "$T/cpu.pb.gz" cpu 'main;checksum=200000000' 'main;other=300000000' \
	'main;other;checksum=50000000' || fail "pprof-gen"
gzip -dc "$T/cpu.pb.gz" >"$T/cpu.pb"
printf '# stackcollapse\nmain;work;spin 70\nmain;work 10\nmain;idle 20\n' >"$T/stacks.folded"
printf 'main;work 10\nthis is not a stack\n' >"$T/bad.folded"
head -c 100000 /dev/urandom >"$T/big.bin"

# The endpoint, as scripts use it.
post() { # FILE [curl args...] -> body, then "HTTP code"
	local f=$1
	shift
	curl -sS --max-time 30 -w '\nHTTP %{http_code}\n' --data-binary "@$f" "$@"
}
out=$(post "$T/stacks.folded" -H 'Authorization: Bearer s3cret-token' "$H/api/0/render?format=folded")
echo "$out" | grep -q '^main;work;spin 70$' || fail "folded render of folded text: $out"
out=$(post "$T/cpu.pb" -H 'Authorization: Bearer s3cret-token' "$H/api/0/render?format=json")
echo "$out" | grep -q '"total":550000000' || fail "raw pprof: $out"
out=$(post "$T/bad.folded" -H 'Authorization: Bearer s3cret-token' "$H/api/0/render")
echo "$out" | grep -q 'HTTP 400' || fail "bad file: $out"
out=$(post "$T/big.bin" -H 'Authorization: Bearer s3cret-token' "$H/api/0/render")
echo "$out" | grep -q 'HTTP 413' || fail "over --max-body: $out"
out=$(dcurl dev-1 --data-binary @"$T/cpu.pb.gz" "$(URL /api/0/render)")
echo "$out" | grep -q 'HTTP 403' || fail "a device rendered a file: $out"
out=$(dcurl op --data-binary @"$T/cpu.pb.gz" "$(URL '/api/0/render?format=folded')")
echo "$out" | grep -q '^main;other;checksum 50000000$' || fail "operator over mTLS: $out"
code=$(curl -sS -o /dev/null -w '%{http_code}' --data-binary @"$T/cpu.pb" "$H/api/0/render")
[ "$code" = 401 ] || fail "no token: $code"
echo "ok  POST /api/0/render: folded, raw and gzip pprof; 400, 413, 403 (device), 401"

(cd "$NODE_DIR" && timeout 120 node ui-file-test.mjs "$H" s3cret-token "$EP_BUILD/test-logs" \
	"$T/cpu.pb.gz" "$T/cpu.pb" "$T/stacks.folded" "$T/bad.folded" "$T/big.bin") ||
	fail "browser test"

# Nothing was stored by any of it.
[ "$(stored)" = 0 ] || fail "$(stored) profiles stored"
dcurl op "$(URL '/api/0/profiles?from=2000-01-01T00:00:00')" | grep -q '"body":\[\]' ||
	fail "the store is not empty"
echo "ok  nothing stored; screenshots in $EP_BUILD/test-logs/ui-file-*.png"
