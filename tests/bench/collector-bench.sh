#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ingest throughput of edgeprof-collector over mutual TLS with keep-alive: 1, 8 and 64 concurrent
# clients (tests/drivers/collector-load: port/tls + port/http, the agent's code path) posting a
# ~20 KB gzip pprof, under two fsync policies: every record (--fsync-ms 0, the default) and group
# commit (--fsync-ms 5). Reports profiles/s, MB/s, latency, and the collector's own CPU time per
# profile (profiles per CPU-second = what one core sustains), median of REPS runs. Clients
# connect before the timed phase (keep-alive steady state; handshakes are not counted).
#
# Peer, in the same run on the same disk: dd writing 20 KB blocks with oflag=dsync (one
# synchronous write per profile, no TLS/HTTP/validation/index) — the disk's ceiling for the
# every-record policy; "ours/peer" is our profiles/s over dd's writes/s.
#
#   tests/bench/collector-bench.sh [BUILD_DIR]     env: SECONDS_PER_RUN (4), REPS (3),
#                                                  BENCH_DIR (a directory on the disk to test)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-$top/build/host-x86_64}" && pwd)
SECS=${SECONDS_PER_RUN:-4}
REPS=${REPS:-3}
for b in edgeprof edgeprof-collector tests/pprof-tool tests/drivers/collector-load; do
	[ -x "$B/$b" ] || { echo "missing $B/$b: run make all-tests"; exit 1; }
done
T=$(mktemp -d "${BENCH_DIR:-/var/tmp}/edgeprof-collector-bench.XXXXXX")
CPID=
trap '[ -n "$CPID" ] && kill "$CPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

"$B/edgeprof" certs init "$T/pki" >/dev/null
"$B/edgeprof" certs device "$T/pki" bench >/dev/null
"$B/tests/pprof-tool" encode "$T/p.pb.gz" 1400 130 16 >/dev/null 2>&1
size=$(stat -c %s "$T/p.pb.gz")

median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

start() { # fsync_ms ring [taskset prefix]
	rm -f "$2"
	: >"$T/log" # here, not in the child: it may run after the first look for the port
	${3:-} "$B/edgeprof-collector" --listen 127.0.0.1:0 --tls-ca "$T/pki/ca.crt" \
		--tls-cert "$T/pki/server.crt" --tls-key "$T/pki/server.key" --ring "$2" \
		--ring-size 1G --fsync-ms "$1" --max-conns 256 >>"$T/log" 2>&1 &
	CPID=$!
	for _ in $(seq 200); do
		PORT=$(sed -n 's/.*mutual TLS, port \([0-9]*\)).*/\1/p' "$T/log")
		[ -n "$PORT" ] && return 0
		sleep 0.05
	done
	cat "$T/log"; exit 1
}

echo "load: $(uptime)"
echo "collector ingest benchmark: $(nproc) CPUs, profile $size bytes, ${SECS}s x $REPS runs each,"
echo "ring on $(df --output=source "$T" | tail -n 1) ($T)"
echo
dd_rates=()
for _ in $(seq "$REPS"); do
	r=$(dd if=/dev/zero of="$T/dd" bs="$size" count=1000 oflag=dsync 2>&1 |
		awk '/copied/ {print 1000 / $(NF-3)}')
	dd_rates+=("$r")
done
rm -f "$T/dd"
dd_rate=$(printf '%s\n' "${dd_rates[@]}" | median)
printf 'peer: dd bs=%s oflag=dsync: %.0f writes/s (median)\n\n' "$size" "$dd_rate"

printf '%-22s %7s %12s %8s %8s %8s %10s %12s %10s\n' policy clients profiles/s MB/s p50_ms \
	p99_ms cpu_s "prof/cpu_s" ours/peer
# every-record/group-Nms: the fsync policy; disk: ring on BENCH_DIR's disk; tmpfs: ring in
# /dev/shm, i.e. no disk at all — the CPU ceiling of TLS + HTTP + validation + index.
# pin: the collector on CPU 1 only (taskset -c 1), the load generator on CPU 0: profiles/s is
# then directly what one core sustains (the goal's "on one core"), not an extrapolation.
SHM=$(mktemp -d /dev/shm/edgeprof-collector-bench.XXXXXX)
trap '[ -n "$CPID" ] && kill "$CPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T" "$SHM"' EXIT
runs="0:disk 5:disk 0:tmpfs"
[ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null && runs="$runs 0:disk:pin 5:disk:pin 0:tmpfs:pin"
for run in $runs; do
	policy=${run%%:*} where=${run#*:} pin_srv= pin_load=
	case $where in *:pin) where=${where%:pin} pin_srv="taskset -c 1" pin_load="taskset -c 0";;
	esac
	ring=$T/ring
	[ "$where" = tmpfs ] && ring=$SHM/ring
	for clients in 1 8 64; do
		rates=() mbs=() p50s=() p99s=() cpus=() percpu=()
		for _ in $(seq "$REPS"); do
			start "$policy" "$ring" "$pin_srv"
			out=$($pin_load "$B/tests/drivers/collector-load" --url "https://localhost:$PORT" \
				--ca "$T/pki/ca.crt" --cert "$T/pki/bench.crt" --key "$T/pki/bench.key" \
				--file "$T/p.pb.gz" --clients "$clients" --seconds "$SECS" \
				--server-pid "$CPID")
			kill "$CPID"; wait "$CPID" || true; CPID=
			get() { echo "$out" | sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
			n=$(get profiles)
			cpu=$(get server_cpu_s)
			rates+=("$(get profiles_per_s)") mbs+=("$(get mb_per_s)")
			p50s+=("$(get p50_ms)") p99s+=("$(get p99_ms)") cpus+=("$cpu")
			percpu+=("$(awk -v n="$n" -v c="$cpu" 'BEGIN {print (c > 0 ? n / c : 0)}')")
		done
		rate=$(printf '%s\n' "${rates[@]}" | median)
		printf '%-22s %7s %12.0f %8.2f %8.2f %8.2f %10.2f %12.0f %10.2f\n' \
			"$([ "$policy" = 0 ] && echo every-record || echo "group-${policy}ms")-$where${pin_srv:+-1cpu}" \
			"$clients" "$rate" "$(printf '%s\n' "${mbs[@]}" | median)" \
			"$(printf '%s\n' "${p50s[@]}" | median)" "$(printf '%s\n' "${p99s[@]}" | median)" \
			"$(printf '%s\n' "${cpus[@]}" | median)" \
			"$(printf '%s\n' "${percpu[@]}" | median)" \
			"$(awk -v a="$rate" -v b="$dd_rate" 'BEGIN {print a / b}')"
	done
done
echo
echo "prof/cpu_s = profiles stored per CPU-second of the collector (TLS, HTTP, pprof validation,"
echo "index, ring write): the rate one core sustains when the disk keeps up. Unpinned, the load"
echo "client shares the machine's CPUs, so profiles/s is also bounded by it; *-1cpu rows pin the"
echo "collector to CPU 1 and the load client to CPU 0, so their profiles/s is one core's rate."
echo "All figures are medians of $REPS runs; ours/peer = profiles/s over dd's synchronous writes/s."
echo "load: $(uptime)"
