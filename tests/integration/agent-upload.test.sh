#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# edgeprof-agent pushes its round's profile to a real collector over mutual TLS (--upload):
# a SIGPROF producer's service arrives, stored once, with the known split in it.
. "$EP_TOP/tests/lib/transport-lib.sh"
agent=$B/edgeprof-agent
lib=$B/libedgeprof.so
split=$B/tests/workloads/split
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
"$agent" --help | grep -- "--upload" >/dev/null || { echo "agent built without CONFIG_UPLOAD_MTLS"; exit 77; }
preload=$lib
if ldd "$lib" | grep libasan >/dev/null; then
	preload="$(ldd "$lib" | awk '/libasan/ {print $3}') $lib"
	export ASAN_OPTIONS=detect_leaks=0
fi

make_certs
port=$(free_port)
start_collector "$port"
mkdir -p "$W/reg"
"$agent" --sampler sigprof --once --seconds 4 --registry "$W/reg" \
	--upload "https://127.0.0.1:$port" --tls-ca "$W/certs/ca.crt" \
	--tls-cert "$W/certs/dev-1.crt" --tls-key "$W/certs/dev-1.key" 2>"$W/agent.err" &
apid=$!
PIDS+=("$apid")
sleep 0.5
env LD_PRELOAD="$preload" EDGEPROF_REGISTRY="$W/reg" EDGEPROF_SERVICE=uploadsvc \
	EDGEPROF_HZ=997 "$split" --seconds 6 >/dev/null &
PIDS+=($!)
for _ in $(seq 1 300); do kill -0 "$apid" 2>/dev/null || break; sleep 0.1; done
wait "$apid" || { cat "$W/agent.err"; fail "agent exit code"; }
cat "$W/agent.err"
grep -q "profile of uploadsvc handed to the transport" "$W/agent.err" || fail "not handed over"
n=$(list_seq "$port" uploadsvc | wc -l)
[ "$n" = 1 ] || fail "collector holds $n profiles of uploadsvc, want 1"
curl_get "$port" "/api/0/profiles/merge?service=uploadsvc&type=cpu&from=2000-01-01T00:00:00&to=now%2B24h" \
	>"$W/merged.pb.gz" || fail "merge query"
go tool pprof -top -symbolize=none "$W/merged.pb.gz" 2>/dev/null >"$W/top.txt" || true
head -12 "$W/top.txt"
grep -q "work_a" "$W/top.txt" || fail "work_a not in the stored profile"
echo PASS
