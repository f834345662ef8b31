#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The web UI's Regressions tab (issue 39) in headless Chromium (tests/ui/regress-ui-test.mjs) on
# the staged roll-out of tests/integration/regress-fleet.test.sh: the findings table and the
# link from a finding to the diff flame graph with the function searched; the standing rule's
# row (--regression-rule 'fw=fw by version') and its link. Screenshots land in test-logs/.
. "$EP_TOP/tests/lib/collector-lib.sh"
FLEET=$EP_BUILD/tests/drivers/regress-fleet
command -v node >/dev/null || fail "node is not installed"
[ -x /usr/bin/chromium ] || fail "chromium is not installed (tools/deps/ui.list)"

NODE_DIR=$EP_BUILD/ui-node
if [ ! -d "$NODE_DIR/node_modules/playwright-core" ]; then
	mkdir -p "$NODE_DIR"
	cp "$EP_TOP/tests/ui/package.json" "$EP_TOP/tests/ui/package-lock.json" "$NODE_DIR/"
	(cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci playwright-core"
fi
cp "$EP_TOP/tests/ui/regress-ui-test.mjs" "$NODE_DIR/"

"$FLEET" fill "$T/ring" --ring-mb 32 --devices 200 --cand-frac 0.1 --noise 0.05 --samples 5000 \
	--profiles 2 --spacing-s 30 --cand-delay-s 10 --time-s $(($(date +%s) - 120)) --seed 39 \
	--effect crc32_update=1.2 --new tls_renegotiate=0.01 ||
	fail "regress-fleet fill"
make_pki
start_collector --http-listen 127.0.0.1:0 --http-token s3cret-token \
	--regression-rule 'fw=fw by version' --regression-interval 1
OUT=$EP_BUILD/test-logs
mkdir -p "$OUT"
(cd "$NODE_DIR" && timeout 300 node regress-ui-test.mjs "http://127.0.0.1:$HTTP_PORT" s3cret-token \
	"$OUT") ||
	fail "the Regressions tab"
stop_collector
echo "PASS"
