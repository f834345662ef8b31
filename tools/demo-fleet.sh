#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make demo-fleet: a fleet on this machine. Our own clickhouse-server (Debian's 18.16) on
# loopback with its data in a temporary directory, two collectors on it (--clickhouse, each
# with its --ch-spool), 1,000 simulated devices (tests/drivers/collector-load --fleet: 4
# firmware versions, profiles made from real profiles' stacks by tests/pprof-tool fleet)
# uploading over mutual TLS for a minute (DEMO_SECONDS), then one fleet query per firmware
# version through a collector, and its top functions (the newest version, fw3, spends
# DEMO_FLEET_EFFECT's factor times the CPU in its function: sort.partition=1.3). Then a staged
# roll-out checked for regressions: a comparison's unit is the device, its certificate, and the
# load above has one certificate for all its devices, so the roll-out is
# tests/drivers/regress-fleet's (DEMO_ROLLOUT_DEVICES devices, 200, each its own, 25 % on
# firmware 1.5 whose devices spend DEMO_EFFECT's factor times the CPU in its function,
# crc32_update=1.2, with per-device noise; DEMO_EFFECT= for none), stored into the same
# database by the collector's store code, and `edgeprof regressions 'fw{version="1.4"}'
# 'fw{version="1.5"}'` through a collector finds it (what the web UI's Regressions tab lists).
# Everything started is stopped on exit.
# Usage: tools/demo-fleet.sh BUILD_DIR
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
EP_BUILD=$(cd "${1:-$top/build/host-x86_64}" && pwd)
SECS=${DEMO_SECONDS:-60}
DEVICES=${DEMO_DEVICES:-1000}
FLEET_EFFECT=${DEMO_FLEET_EFFECT-sort.partition=1.3}
EFFECT=${DEMO_EFFECT-crc32_update=1.2}
ROLLOUT=${DEMO_ROLLOUT_DEVICES:-200}
REGRESS_FLEET=$EP_BUILD/tests/drivers/regress-fleet
. "$top/tests/lib/collector-lib.sh"
. "$top/tests/lib/clickhouse-lib.sh"
[ -x "$LOAD" ] || { echo "demo-fleet: collector-load not built (make all-tests)"; exit 1; }
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

say "Certificates, and a fleet's profiles made from the stacks of real ones"
make_pki
mkdir -p "$T/pool" "$T/fleet"
if command -v go >/dev/null; then
	(cd "$top/tests/oracle" && GOCACHE=$T/gocache GOFLAGS=-mod=mod go run . "$T/pool" 1 >/dev/null 2>&1) || true
fi
"$PPROF_TOOL" fleet "$T/fleet" 4 8 1400 ${FLEET_EFFECT:+--version-effect "$FLEET_EFFECT"} "$T"/pool/*.pb.gz \
	"$top"/tests/fuzz/pprof-reader.corpus/go-*.gz.seed
say "ClickHouse on loopback ($T/ch0), two collectors on it"
ch_start 0
echo "clickhouse-server $(ch_sql 0 'SELECT version()') on 127.0.0.1:$(ch_http_port 0)"
urls=()
for i in 1 2; do
	start_ch_collector "collector$i" "http://127.0.0.1:$(ch_http_port 0)/edgeprof_demo" \
		--ch-spool "$T/spool$i" --ring-size 256M --fsync-ms 5
	urls+=(--url "https://localhost:$CC_PORT")
	echo "collector $i: https://localhost:$CC_PORT (mutual TLS)"
done
say "$DEVICES devices upload through both collectors for $SECS s"
# 20 connections, 50 devices each, one upload every 200 ms at most per connection: each device
# at most every 10 s
"$LOAD" "${urls[@]}" --ca "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" --key "$T/pki/dev-1.key" \
	--fleet "$T/fleet" --devices "$DEVICES" --clients 20 --interval-ms 200 --seconds "$SECS" \
	--prefix demo
for _ in $(seq 100); do
	[ "$(ch_sql 0 'SELECT count() FROM edgeprof_demo.profiles')" -gt 0 ] && break
	sleep 0.1
done
ch_sql 0 "SELECT label_values[indexOf(label_keys, 'version')] AS version, count() AS profiles, uniqExact(label_values[indexOf(label_keys, 'node')]) AS devices FROM edgeprof_demo.profiles GROUP BY version ORDER BY version FORMAT PrettyCompactMonoBlock"
for v in 0 1 2 3; do
	say "Top functions of firmware fw$v (a fleet query: gw{version=\"fw$v\"}, merged by ClickHouse)"
	curl -gsS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
		-o "$T/fw$v.pb.gz" -D "$T/fw$v.h" \
		"https://localhost:$CC_PORT/api/0/profiles/merge?type=cpu&from=2000-01-01&query=%7Bversion%3D%22fw$v%22%7D"
	echo "$(grep -i '^x-edgeprof-profiles' "$T/fw$v.h" | tr -dc 0-9) profiles merged"
	"$EP" top -n 8 "$T/fw$v.pb.gz" | sed -n '/flat%/,$p'
done
say "A staged roll-out: $ROLLOUT devices, 25 % on firmware 1.5${EFFECT:+ (made: $EFFECT on 1.5)}, stored in edgeprof_demo"
"$REGRESS_FLEET" fill "http://127.0.0.1:$(ch_http_port 0)/edgeprof_demo" --devices "$ROLLOUT" \
	--cand-frac 0.25 --profiles 2 --samples 3000 ${EFFECT:+--effect "$EFFECT"}
say "Which functions take another share of the CPU on 1.5's devices than on 1.4's"
"$EP" regressions --collector "https://localhost:$CC_PORT" --tls-ca "$T/pki/ca.crt" \
	--tls-cert "$T/pki/op.crt" --tls-key "$T/pki/op.key" --from 2000-01-01 \
	'fw{version="1.4"}' 'fw{version="1.5"}'
