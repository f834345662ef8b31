#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The collector scrapes (--scrape-targets, issue 22 part 2): a Prometheus file_sd file names a
# real Go net/http/pprof program (plain HTTP, tests/workloads/gopprof) and then, rewritten while
# the collector runs, also a device in pull mode (the agent's --pull-listen, mutual TLS with the
# collector's operator certificate). Checked through the collector's own API:
#   - goapp's cpu and heap profiles are stored with the group's labels and instance=HOST:PORT;
#     the heap ones are deltas (the first scrape sets the baseline: its inuse_* snapshot only);
#   - the rewritten file is read again without a restart, and the device's profiles carry the
#     device label of its certificate (gw-1);
#   - a malformed file on SIGHUP keeps the targets of before (logged, and in /metrics);
#   - a target that is down is counted (edgeprof_collector_scrape_failed_total{reason="connect"}).
# ~15 s.
. "$EP_TOP/tests/lib/transport-lib.sh"
agent=$B/edgeprof-agent
lib=$B/libedgeprof.so
"$B/edgeprof-collector" --help 2>&1 | grep -- "--scrape-targets" >/dev/null ||
	{ echo "skip: collector built without CONFIG_COLLECTOR_SCRAPE"; exit 77; }
"$agent" --help | grep -- "--pull-listen" >/dev/null || { echo "skip: agent built without CONFIG_PULL_SERVER"; exit 77; }
command -v go >/dev/null || { echo "skip: go is not installed (tools/deps/agent.list)"; exit 77; }
[ -f "$lib" ] || { echo "skip: libedgeprof.so not built"; exit 77; }
ldd "$lib" | grep libasan >/dev/null && { echo "skip: sanitizer build (LD_PRELOAD into the workload)"; exit 77; }
export HOME=$W
GOPPROF=$("$EP_TOP/tests/workloads/gopprof/build.sh" "$B") || fail "cannot build gopprof"

"$GOPPROF" -keep 1024 >"$W/go.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do grep -q listening "$W/go.out" && break; sleep 0.1; done
gport=$(awk '/listening/ {print $2}' "$W/go.out")

make_certs
"$B/edgeprof" certs device "$W/certs" gw-1 --server-ip 127.0.0.1 >/dev/null
aport=$(free_port)
mkdir -p "$W/reg"
"$agent" --sampler sigprof --registry "$W/reg" --output-dir "$W/agent-out" \
	--pull-listen "127.0.0.1:$aport" --tls-ca "$W/certs/ca.crt" \
	--tls-cert "$W/certs/gw-1.crt" --tls-key "$W/certs/gw-1.key" 2>"$W/agent.log" &
PIDS+=($!)
env LD_PRELOAD="$lib" EDGEPROF_REGISTRY="$W/reg" EDGEPROF_SERVICE=split \
	"$B/tests/workloads/split" --seconds 30 >/dev/null &
PIDS+=($!)

cat >"$W/targets.json" <<JSON
[{"targets": ["127.0.0.1:$gport", "127.0.0.1:1"], "labels": {"service_name": "goapp", "env": "test"}}]
JSON
port=$(free_port)
"$B/edgeprof-collector" --listen "127.0.0.1:$port" --tls-ca "$W/certs/ca.crt" \
	--tls-cert "$W/certs/server.crt" --tls-key "$W/certs/server.key" \
	--ring "$W/collector.ring" --ring-size 16M --scrape-targets "$W/targets.json" \
	--scrape-interval 2 --scrape-seconds 1 --scrape-tls-cert "$W/certs/op.crt" \
	--scrape-tls-key "$W/certs/op.key" >>"$W/collector.log" 2>&1 &
COLL_PID=$!
PIDS+=("$COLL_PID")
for _ in $(seq 1 100); do grep -q "port $port)" "$W/collector.log" && break; sleep 0.1; done
grep -q "scrape: 2 targets" "$W/collector.log" || { cat "$W/collector.log"; fail "targets not read"; }

export EDGEPROF_COLLECTOR="https://127.0.0.1:$port" EDGEPROF_TLS_CA="$W/certs/ca.crt" \
	EDGEPROF_TLS_CERT="$W/certs/op.crt" EDGEPROF_TLS_KEY="$W/certs/op.key"
count() { # SELECTOR TYPE -> number of stored profiles
	"$B/edgeprof" ls "$1" --type "$2" --from now-1h 2>/dev/null | grep -c "$3" || true
}
wait_for() { # SELECTOR TYPE PATTERN MIN
	for _ in $(seq 1 150); do
		[ "$(count "$1" "$2" "$3")" -ge "$4" ] && return 0
		sleep 0.1
	done
	cat "$W/collector.log"
	"$B/edgeprof" ls "$1" --type "$2" --from now-1h
	fail "$1 --type $2: fewer than $4 profiles"
}
wait_for 'goapp{env="test",instance="127.0.0.1:'"$gport"'"}' cpu goapp 1
wait_for 'goapp{env="test"}' heap goapp 2 # the first: inuse only; the second: a delta
"$B/edgeprof" query 'goapp{env="test"}' --type heap --from now-1h -o "$W/heap.pb.gz" || fail "query heap"
go tool pprof -top -sample_index=alloc_space "$W/heap.pb.gz" 2>/dev/null | grep main.allocKnown >/dev/null ||
	fail "the scraped heap has no allocKnown"

# the file is rewritten: read again without a restart, the device scraped over mutual TLS
cat >"$W/targets.json.new" <<JSON
[{"targets": ["127.0.0.1:$gport"], "labels": {"service_name": "goapp", "env": "test"}},
 {"targets": ["127.0.0.1:$aport"], "labels": {"service_name": "gwpull", "__scheme__": "https"}}]
JSON
mv "$W/targets.json.new" "$W/targets.json"
wait_for 'gwpull{device="gw-1"}' cpu gwpull 1
"$B/edgeprof" query 'gwpull{device="gw-1"}' --type cpu --from now-1h -o "$W/pull.pb.gz" || fail "query pull"
go tool pprof -top "$W/pull.pb.gz" 2>/dev/null | grep work_a >/dev/null || fail "the device's profile has no split"
grep -q "scrape: the targets file changed: 2 targets" "$W/collector.log" || fail "no reread logged"

echo '[{"targets": ' >"$W/targets.json.bad"
cp "$W/targets.json.bad" "$W/targets.json"
kill -HUP "$COLL_PID"
for _ in $(seq 1 50); do grep -q "keeping the 2 targets" "$W/collector.log" && break; sleep 0.1; done
grep -q "keeping the 2 targets" "$W/collector.log" || { cat "$W/collector.log"; fail "a bad file was not refused"; }
kill -0 "$COLL_PID" || fail "SIGHUP stopped the collector"
curl_get "$port" /metrics >"$W/metrics.txt"
grep -E '^edgeprof_collector_scrape' "$W/metrics.txt"
grep -q '^edgeprof_collector_scrape_reload_errors 1' "$W/metrics.txt" || fail "reload error not in /metrics"
grep -qE '^edgeprof_collector_scrape_failed_total\{reason="connect"\} [1-9]' "$W/metrics.txt" ||
	fail "the down target's failed connects are not counted"
grep -qE '^edgeprof_collector_scrape_stored_total [1-9]' "$W/metrics.txt" || fail "nothing stored"

# A target that accepts and never answers costs only its own scrapes (issue 38: one such
# target, each fetch allowed its seconds + 10 s, left a good target 2 scrapes in 45 s instead
# of 16): with it in the file, goapp keeps its 2 s interval (1 s CPU profiles): >= 4 in 12 s.
sport=$(free_port)
$PY - "$sport" <<'PYEOF' &
import socket, sys, time
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1])))
srv.listen(64)
held = []
end = time.monotonic() + 40
srv.settimeout(1)
while time.monotonic() < end:
    try:
        held.append(srv.accept()[0])  # read nothing, answer nothing
    except socket.timeout:
        pass
PYEOF
PIDS+=($!)
cat >"$W/targets.json.new" <<JSON
[{"targets": ["127.0.0.1:$gport", "127.0.0.1:$sport"], "labels": {"service_name": "goapp", "env": "slow"}}]
JSON
mv "$W/targets.json.new" "$W/targets.json"
for _ in $(seq 1 50); do
	[ "$(grep -c "scrape: the targets file changed: 2 targets" "$W/collector.log")" -ge 2 ] && break
	sleep 0.1
done
sleep 1
n0=$(count 'goapp{env="slow",instance="127.0.0.1:'"$gport"'"}' cpu goapp)
sleep 12
n1=$(count 'goapp{env="slow",instance="127.0.0.1:'"$gport"'"}' cpu goapp)
echo "a target that never answers beside it: goapp scraped $((n1 - n0)) times in 12 s (interval 2 s)"
[ $((n1 - n0)) -ge 4 ] || { tail -n 20 "$W/collector.log"; fail "the slow target starved goapp"; }
echo "ok"
