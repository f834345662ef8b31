#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Metrics from profiles (issue 22 item 3): --metrics-rule counters scraped by a real Prometheus
# (Debian's prometheus, tools/deps/metrics.list) over mutual TLS with an operator certificate;
# PromQL over its HTTP API gives the rate we uploaded: CPU seconds in checksum by version, all
# CPU seconds, bytes allocated. A device certificate's scrape is refused (the target is down),
# duplicates count nothing, heap inuse snapshots are not counters, the series bound holds and
# its overflow is counted, and `promtool check metrics` passes on the collector's /metrics.
# About 20 s.
. "$(dirname "$0")/../lib/collector-lib.sh"

command -v prometheus >/dev/null && command -v promtool >/dev/null ||
	{ echo "prometheus not installed (tools/deps/metrics.list)"; exit 77; }
"$COLLECTOR" --http-listen 127.0.0.1:0 --ring "$T/r0" --metrics-rule 'x=y junk' 2>&1 | grep -q 'built without' &&
	{ echo "collector built without CONFIG_COLLECTOR_METRICS_RULES"; exit 77; }
GEN="/usr/bin/python3 $(dirname "$0")/../lib/pprof-gen.py"
PPID_PROM=
trap 'if [ -n "$PPID_PROM" ]; then kill "$PPID_PROM"; wait "$PPID_PROM"; fi 2>/dev/null; ep_cleanup' EXIT

make_pki
# v1.4: 0.2 s in checksum (0.05 s of it under other), 0.3 s elsewhere; v1.5: 0.1 s in checksum.
$GEN "$T/v14.pb.gz" cpu 'main;checksum=150000000' 'main;other=250000000' \
	'main;other;checksum=50000000' 'main;idle=50000000' || fail "pprof-gen"
$GEN "$T/v15.pb.gz" cpu 'main;checksum=100000000' || fail "pprof-gen"
$GEN "$T/heap.pb.gz" heap 'main;alloc=1048576' 'main;other=524288' || fail "pprof-gen"
start_collector \
	--metrics-rule 'gw_checksum_cpu=gw function="checksum" by (version)' \
	--metrics-rule 'gw_cpu=gw{type="cpu"}' \
	--metrics-rule 'gw_not_checksum=gw{type="cpu"} function!~"check.*"' \
	--metrics-rule 'gw_alloc=gw{type="heap"} by (service, device)' \
	--metrics-rule 'few=gw{type="cpu"} by (seq)' --metrics-rule 'none=nothing'

up() { # FILE VERSION SEQ [TYPE]
	dcurl dev-1 --data-binary @"$1" \
		"$(URL "/api/0/profiles?service=gw&type=${4:-cpu}&labels=version=$2,seq=$3&key=$2-$3")" |
		grep -q 'HTTP 200' || fail "upload $1"
}

# Bad rules are refused at start with the reason.
out=$("$COLLECTOR" --http-listen 127.0.0.1:0 --ring "$T/r2" --metrics-rule 'x=gw by region' 2>&1)
echo "$out" | grep -q "expected '(' after by" || fail "bad rule: $out"

PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$T/prom.yml" <<EOF
global: { scrape_interval: 1s, evaluation_interval: 1s }
scrape_configs:
  - job_name: edgeprof
    scheme: https
    tls_config: { ca_file: $T/pki/ca.crt, cert_file: $T/pki/op.crt, key_file: $T/pki/op.key,
                  server_name: localhost }
    static_configs: [ { targets: ["127.0.0.1:$TLS_PORT"] } ]
  - job_name: device
    scheme: https
    tls_config: { ca_file: $T/pki/ca.crt, cert_file: $T/pki/dev-1.crt, key_file: $T/pki/dev-1.key,
                  server_name: localhost }
    static_configs: [ { targets: ["127.0.0.1:$TLS_PORT"] } ]
EOF
promtool check config "$T/prom.yml" >/dev/null || fail "promtool check config"
prometheus --config.file="$T/prom.yml" --storage.tsdb.path="$T/prom" \
	--web.listen-address="127.0.0.1:$PORT" >"$T/prom.log" 2>&1 &
PPID_PROM=$!
P=http://127.0.0.1:$PORT
q() { # PROMQL [TIME]: the first value of an instant query
	curl -sS --max-time 10 "$P/api/v1/query" --data-urlencode "query=$1" \
		${2:+--data-urlencode "time=$2"} | /usr/bin/python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(r[0]["value"][1] if r else "none")'
}
for _ in $(seq 100); do [ "$(q 'up{job="edgeprof"}' 2>/dev/null)" = 1 ] && break; sleep 0.2; done
[ "$(q 'up{job="edgeprof"}')" = 1 ] || { tail "$T/prom.log"; fail "Prometheus cannot scrape us"; }

# Upload at a steady pace for 8 s: each round one v1.4 and one v1.5 profile.
t0=$(date +%s.%N)
n=0
while [ "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print (b - a < 8) }')" = 1 ]; do
	n=$((n + 1))
	up "$T/v14.pb.gz" 1.4 "$n"
	up "$T/v15.pb.gz" 1.5 "$n"
	date +%s.%N >>"$T/rounds"
	sleep 0.2
done
t1=$(date +%s.%N)
up "$T/v14.pb.gz" 1.4 1 # a duplicate (same key): counts nothing
up "$T/heap.pb.gz" h 1 heap
sleep 2.5 # two more scrapes
# The rate over the last 6 s of the run, against the rounds stored in that window.
at=$(awk -v b="$t1" 'BEGIN { printf "%.3f", b - 0.5 }')
echo "uploaded $n rounds in $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s"

# The totals are exact.
check_eq() { # what got want
	awk -v g="$2" -v w="$3" 'BEGIN { exit !(g != "none" && g - w < 1e-6 && w - g < 1e-6) }' ||
		fail "$1: $2, want $3"
	echo "ok  $1 = $2"
}
check_eq "checksum v1.4 total" "$(q 'gw_checksum_cpu_seconds_total{version="1.4"}')" \
	"$(awk -v n="$n" 'BEGIN { print n * 0.2 }')"
check_eq "checksum v1.5 total" "$(q 'gw_checksum_cpu_seconds_total{version="1.5"}')" \
	"$(awk -v n="$n" 'BEGIN { print n * 0.1 }')"
check_eq "all cpu total" "$(q 'gw_cpu_seconds_total')" "$(awk -v n="$n" 'BEGIN { print n * 0.6 }')"
check_eq "cpu outside checksum" "$(q 'gw_not_checksum_seconds_total')" \
	"$(awk -v n="$n" 'BEGIN { print n * 0.3 }')"
check_eq "alloc bytes" "$(q 'gw_alloc_bytes_total{service="gw",device="dev-1"}')" 1572864

# The rate Prometheus computes is the one we uploaded at: within 15%, or within 2.5 rounds of
# the k stored in the window when the machine is so loaded that k is small (1 s scrapes, late
# under load, cut a 6 s window at their own instants, not at our uploads', and rate()
# extrapolates to the window's edges). The totals above are the exact check; this one catches
# a counter counted twice or in the wrong unit.
k=$(awk -v at="$at" '$1 > at - 6 && $1 <= at { k++ } END { print k + 0 }' "$T/rounds")
check_rate() { # what promql per-round-value
	local got
	got=$(q "$2" "$at")
	awk -v g="$got" -v k="$k" -v v="$3" 'BEGIN { w = k * v / 6; d = 2.5 * v / 6
		if (d < 0.15 * w) d = 0.15 * w
		exit !(g != "none" && g > w - d && g < w + d) }' ||
		fail "$1: $got, want $(awk -v k="$k" -v v="$3" 'BEGIN { print k * v / 6 }')"
	echo "ok  $1 = $got CPU-s/s (uploaded: $(awk -v k="$k" -v v="$3" 'BEGIN { print k * v / 6 }'))"
}
check_rate "rate(checksum v1.4)" 'rate(gw_checksum_cpu_seconds_total{version="1.4"}[6s])' 0.2
check_rate "sum by version of the rate" 'sum(rate(gw_checksum_cpu_seconds_total[6s]))' 0.3
check_rate "rate(all cpu)" 'rate(gw_cpu_seconds_total[6s])' 0.6

# A device certificate may not read /metrics: its scrape fails.
[ "$(q 'up{job="device"}')" = 0 ] || fail "a device certificate scraped /metrics"
echo "ok  device certificate's scrape refused (up 0)"

dcurl op "$(URL /metrics)" | sed '$d' >"$T/metrics.txt"
promtool check metrics <"$T/metrics.txt" || fail "promtool check metrics"
echo "ok  promtool check metrics"
grep -q '^# TYPE gw_checksum_cpu_seconds_total counter$' "$T/metrics.txt" || fail "no TYPE counter"
grep -q '^none' "$T/metrics.txt" && fail "a rule that matched nothing has a series"
# Series: checksum by version (1.4, 1.5 in seconds; the heap profile's 0 bytes), all cpu,
# outside checksum, alloc, and by (seq) one per round.
series=$(metric metrics_rule_series)
[ "$series" = $((6 + n)) ] || fail "series: $series, want $((6 + n))"
[ "$(metric metrics_rule_series_dropped_total)" = 0 ] || fail "dropped with room"
echo "ok  $series series, none dropped"
kill "$PPID_PROM"; wait "$PPID_PROM" 2>/dev/null; PPID_PROM=
stop_collector

# The bound: 3 series, 5 label sets: 2 profiles counted as dropped, the 3 series exact. A heap
# profile of only inuse_* (a snapshot) adds nothing and is counted.
rm -f "$T/ring"
$GEN "$T/inuse.pb.gz" inuse 'main;alloc=4096' || fail "pprof-gen"
start_collector --metrics-series 3 --metrics-rule 'few=gw by (seq)'
for i in 1 2 3 4 5; do up "$T/v15.pb.gz" 1.5 "$i"; done
up "$T/inuse.pb.gz" 1.5 9 heap
dcurl op "$(URL /metrics)" | grep '^few\|metrics_rule'
[ "$(metric metrics_rule_series)" = 3 ] || fail "series over the bound"
[ "$(metric metrics_rule_series_dropped_total)" = 2 ] || fail "overflow not counted"
[ "$(metric metrics_rule_snapshots_total)" = 1 ] || fail "snapshot not counted"
dcurl op "$(URL /metrics)" | grep -q '^few_seconds_total{seq="3"} 0.100000000$' || fail "series 3"
stop_collector
echo "ok  bound of 3 series: 2 dropped and counted; a snapshot counted, not added"
