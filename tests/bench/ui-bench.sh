#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Web UI responsiveness (issue 8): a collector holding two ~20,000-frame cpu profiles (40 and
# 10 minutes ago), the page loaded in headless Chromium; long tasks (> 50 ms) during load, zoom,
# hover, search and diff, and first (contentful) paint. Goal: no task over 200 ms.
# Usage: tests/bench/ui-bench.sh [BUILD_DIR]   (env: PATHS=1500 call paths ~ 20,000 frames)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build/host-x86_64}
drv=$build/tests/drivers/render-bench
[ -x "$drv" ] && [ -x "$build/edgeprof-collector" ] || { echo "build first: make all-tests"; exit 1; }
command -v node >/dev/null && [ -x /usr/bin/chromium ] || { echo "needs node and chromium"; exit 1; }
dir=$(mktemp -d /tmp/edgeprof-ui-bench.XXXXXX)
cpid=
trap '[ -n "$cpid" ] && kill "$cpid" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT

node_dir=$build/ui-node	# shared with the ui-browser integration test
if [ ! -d "$node_dir/node_modules/playwright-core" ]; then
	mkdir -p "$node_dir"
	cp "$top/tests/ui/package.json" "$top/tests/ui/package-lock.json" "$node_dir/"
	(cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
cp "$top/tests/ui/ui-bench.mjs" "$node_dir/"

"$build/edgeprof-collector" --ring "$dir/ring" --ring-size 64M --http-listen 127.0.0.1:0 \
	>"$dir/log" 2>&1 &
cpid=$!
for _ in $(seq 100); do
	port=$(sed -n 's/.*plain HTTP, port \([0-9]*\).*/\1/p' "$dir/log")
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || { cat "$dir/log"; exit 1; }
"$drv" frames "${PATHS:-1500}" "$dir/p.pb.gz"
for ago in 40 10; do
	at=$(date -u -d "-$ago minutes" +%Y-%m-%dT%H:%M:%S)
	curl -sS --data-binary "@$dir/p.pb.gz" \
		"http://127.0.0.1:$port/api/0/profiles?service=bench&type=cpu&created_at=$at" |
		grep -q '"code":200' || { echo "upload failed"; exit 1; }
done
echo "ui benchmark: $(nproc) CPUs, uptime: $(uptime)"
mkdir -p "$build/test-logs"
(cd "$node_dir" && node ui-bench.mjs "http://127.0.0.1:$port" "$build/test-logs")
