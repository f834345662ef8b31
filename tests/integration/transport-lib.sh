# SPDX-License-Identifier: MIT
# Shared by tests/integration/transport-*.test.sh (sourced, not run): real certificates from
# `edgeprof certs`, a real collector on a loopback port, the push-dir driver, cleanup on exit.
set -euo pipefail
: "${EP_TOP:?}" "${EP_BUILD:?}"
B=$EP_BUILD
PY=/usr/bin/python3
export LC_ALL=C
PUSH=$B/tests/drivers/push-dir
for f in "$B/edgeprof" "$B/edgeprof-collector" "$PUSH"; do
	if [ ! -x "$f" ]; then
		echo "skip: $f is not built (CONFIG_COLLECTOR/CONFIG_TOOLS/CONFIG_UPLOAD_MTLS off?)"
		exit 77
	fi
done
W=$(mktemp -d "${TMPDIR:-/tmp}/edgeprof-transport.XXXXXX")
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() { echo "FAIL: $*"; exit 1; }

# A TCP port on 127.0.0.1 that was free a moment ago (bound to 0, then released).
free_port() {
	$PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

make_certs() { # -> $W/certs/{ca,server,dev-1}.{crt,key}
	"$B/edgeprof" certs init "$W/certs" >/dev/null
	"$B/edgeprof" certs device "$W/certs" dev-1 >/dev/null
}

# start_collector PORT [RING_SIZE] -> COLL_PID; waits until it listens
start_collector() {
	local port=$1 size=${2:-16M} i
	"$B/edgeprof-collector" --listen "127.0.0.1:$port" --tls-ca "$W/certs/ca.crt" \
		--tls-cert "$W/certs/server.crt" --tls-key "$W/certs/server.key" \
		--ring "$W/collector.ring" --ring-size "$size" >>"$W/collector.log" 2>&1 &
	COLL_PID=$!
	PIDS+=("$COLL_PID")
	for i in $(seq 1 200); do
		grep -q "port $port)" "$W/collector.log" 2>/dev/null && return 0
		kill -0 "$COLL_PID" 2>/dev/null || { cat "$W/collector.log"; fail "collector died"; }
		sleep 0.1
	done
	cat "$W/collector.log"
	fail "collector did not listen on $port"
}

stop_collector() {
	kill -TERM "$COLL_PID" 2>/dev/null || true
	wait "$COLL_PID" 2>/dev/null || true
}

# push PORT [push-dir options...]: device dev-1 unless --tls-cert/--tls-key are given later
push() {
	local port=$1
	shift
	"$PUSH" --upload "https://127.0.0.1:$port" --tls-ca "$W/certs/ca.crt" \
		--tls-cert "$W/certs/dev-1.crt" --tls-key "$W/certs/dev-1.key" "$@"
}

# curl_get PORT PATH?QUERY: GET over mTLS as dev-1
curl_get() {
	curl -sS --fail --max-time 60 --cacert "$W/certs/ca.crt" --cert "$W/certs/dev-1.crt" \
		--key "$W/certs/dev-1.key" "https://127.0.0.1:$1$2"
}

# list_seq PORT SERVICE: the "seq" label of every stored profile of SERVICE, oldest id first
list_seq() {
	curl_get "$1" "/api/0/profiles?service=$2&from=2000-01-01T00:00:00&to=now%2B24h&limit=100000" |
		$PY -c '
import json, sys
d = json.load(sys.stdin)["body"] or []
d.sort(key=lambda p: int(p["id"]))
for p in d:
    lab = {l["key"]: l["value"] for l in p["labels"]}
    print(lab.get("seq", "-"), p["id"], lab.get("edgeprof_spool_dropped", "0"), p["size"])
'
}

# make_profiles DIR N: N distinct valid gzip pprof files (the builder's feature profile with
# different sample values would be nicer; distinct content is what matters here)
make_profiles() {
	local dir=$1 n=$2 i
	mkdir -p "$dir"
	for i in $(seq -f %04g 0 $((n - 1))); do
		cp "$EP_TOP/tests/fuzz/pprof-reader.corpus/go-cpu.pb.gz" "$dir/p$i.pb.gz"
	done
}

stat_of() { # stat_of FILE NAME -> value of NAME=value in a push-dir output
	sed -n "s/^$2=//p" "$1" | tail -n 1
}
