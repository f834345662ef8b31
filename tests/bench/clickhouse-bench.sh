#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The collector's ClickHouse backend on this machine: ingest rate over mutual TLS into our own
# clickhouse-server (Debian's 18.16, loopback, data in a temp dir), storage against the gzip
# pprof bytes ingested, and the time of a merge and a render of everything stored.
#
#   tests/bench/clickhouse-bench.sh [BUILD_DIR]     env: SECONDS_PER_RUN (10), CLIENTS (64),
#                                                   FILES (4 varied ~20 KB profiles),
#                                                   BATCH_MS (200: --ch-batch-ms)
# Load: FILES collector-load processes (CLIENTS in all), each posting its own variant of a
# ~20 KB profile (tests/pprof-tool encode 1400 130 16, then vary: values scaled, ~1/8 of the
# samples dropped): the stacks repeat across uploads as a fleet on one firmware's do, which is
# what interning exploits, so the storage ratio is that of a fleet, not of random stacks.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
EP_BUILD=$(cd "${1:-$top/build/host-x86_64}" && pwd)
SECS=${SECONDS_PER_RUN:-10}
CLIENTS=${CLIENTS:-64}
FILES=${FILES:-4}
BATCH_MS=${BATCH_MS:-200}
. "$top/tests/lib/collector-lib.sh"
. "$top/tests/lib/clickhouse-lib.sh"
[ -x "$LOAD" ] || { echo "collector-load not built (make all-tests)"; exit 1; }

cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }

make_pki
"$PPROF_TOOL" encode "$T/p.pb.gz" 1400 130 16 >/dev/null 2>&1
for i in $(seq "$FILES"); do "$PPROF_TOOL" vary "$T/p.pb.gz" "$T/v$i.pb.gz" "$i" >/dev/null; done
ch_start 0
start_ch_collector chc "http://127.0.0.1:$(ch_http_port 0)/edgeprof_bench" \
	--ch-batch-ms "$BATCH_MS" --max-conns $((CLIENTS + 16)) --max-handshakes $((CLIENTS + 16))
echo "load: $(uptime)"
echo "clickhouse bench: $(nproc) CPUs, $CLIENTS clients over $FILES files of" \
	"$(stat -c %s "$T/v1.pb.gz") bytes, ${SECS}s, ClickHouse $(ch_sql 0 'SELECT version()')"
c0=$(cpu_of "$CC_PID") h0=$(cpu_of "${CH_PIDS[0]}")
pids=()
for i in $(seq "$FILES"); do
	"$LOAD" --url "https://localhost:$CC_PORT" --ca "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" \
		--key "$T/pki/dev-1.key" --file "$T/v$i.pb.gz" --clients $((CLIENTS / FILES)) \
		--seconds "$SECS" --prefix "f$i" >"$T/load.$i" 2>&1 &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
c1=$(cpu_of "$CC_PID") h1=$(cpu_of "${CH_PIDS[0]}")
n=0 bytes=0 failed=0
for i in $(seq "$FILES"); do
	k=$(sed -n 's/.*profiles=\([0-9]*\).*/\1/p' "$T/load.$i")
	f=$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' "$T/load.$i")
	n=$((n + k)) failed=$((failed + f)) bytes=$((bytes + k * $(stat -c %s "$T/v$i.pb.gz")))
done
grep -h "^client [0-9]" "$T"/load.* | sort | uniq -c | sort -rn | head -n 3 | sed "s/^/  failures: /"
stored=$(ch_sql 0 "SELECT count() FROM edgeprof_bench.profiles")
disk=$(ch_sql 0 "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = 'edgeprof_bench'")
awk -v n="$n" -v s="$SECS" -v c="$(echo "$c1 - $c0" | bc)" -v h="$(echo "$h1 - $h0" | bc)" \
	-v f="$failed" -v st="$stored" 'BEGIN {
	printf "ingest: %d profiles acknowledged (%d failed) in %ds: %.0f profiles/s; stored %d\n", n, f, s, n / s, st
	printf "cpu: collector %.1f s (%.0f profiles per CPU-second), clickhouse-server %.1f s\n", c, (c > 0 ? n / c : 0), h }'
ch_sql 0 "SELECT table, sum(rows), sum(bytes_on_disk), sum(data_uncompressed_bytes) FROM system.parts WHERE active AND database = 'edgeprof_bench' GROUP BY table ORDER BY table" |
	awk '{printf "  %-10s %10d rows %12d bytes on disk (%d uncompressed)\n", $1, $2, $3, $4}'
awk -v d="$disk" -v b="$bytes" 'BEGIN { printf "storage: %d bytes on disk for %d gzip pprof bytes ingested: %.3f (goal <= 0.2)\n", d, b, d / b }'
for f in "/api/0/profiles/merge?type=cpu&from=2000-01-01" "/api/0/render?type=cpu&from=2000-01-01&format=flamebearer"; do
	for _ in 1 2 3; do
		curl -sS -o /dev/null -w '%{time_total}\n' --cacert "$T/pki/ca.crt" \
			--cert "$T/pki/op.crt" --key "$T/pki/op.key" "https://localhost:$CC_PORT$f"
	done | sort -g | awk -v f="$f" -v n="$stored" 'NR == 2 {printf "query (median of 3, warm): %s over %d profiles: %.3f s\n", f, n, $1}'
done
