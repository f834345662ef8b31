# SPDX-License-Identifier: MIT
# Shared by tests/integration/collector-*.test.sh (sourced; not a test itself): a temporary
# directory, real certificates made by `edgeprof certs`, a collector on loopback ports it picks
# itself (port 0; we read the ports from its log), curl as the mTLS client, cleanup on exit.
set -u
EP=$EP_BUILD/edgeprof
COLLECTOR=$EP_BUILD/edgeprof-collector
PPROF_TOOL=$EP_BUILD/tests/pprof-tool
LOAD=$EP_BUILD/tests/drivers/collector-load
for b in "$EP" "$COLLECTOR" "$PPROF_TOOL"; do
	[ -x "$b" ] || { echo "$(basename "$b") not built (CONFIG_COLLECTOR/CONFIG_TOOLS off?)"; exit 77; }
done
command -v curl >/dev/null || { echo "curl not installed (tools/deps/net.list)"; exit 77; }

T=$(mktemp -d /tmp/edgeprof-collector-test.XXXXXX)
CPID=
TLS_PORT=
HTTP_PORT=
ep_cleanup() {
	if [ -n "$CPID" ]; then kill -9 "$CPID" 2>/dev/null; wait "$CPID" 2>/dev/null; fi
	rm -rf "$T"
}
trap ep_cleanup EXIT

fail() { echo "FAIL: $*"; [ -f "$T/collector.log" ] && tail -n 20 "$T/collector.log"; exit 1; }

# Certificates: our CA + server + device dev-1 (uploads) + operator op (reads) in $T/pki.
make_bases() { # N: $T/base0..N-1.pb.gz, synthetic profiles, each larger than the last
	local i
	for i in $(seq 0 $(($1 - 1))); do
		"$PPROF_TOOL" encode "$T/base$i.pb.gz" $((200 + 300 * i)) $((20 + 30 * i)) \
			$((6 + 3 * i)) >/dev/null 2>&1 || fail "pprof-tool encode"
	done
}

make_pki() {
	"$EP" certs init "$T/pki" >/dev/null || fail "certs init"
	"$EP" certs device "$T/pki" dev-1 >/dev/null || fail "certs device"
	"$EP" certs operator "$T/pki" op >/dev/null || fail "certs operator"
}

# start_collector [extra flags...]: mTLS on 127.0.0.1:0 (+ whatever the flags add), ring $T/ring.
start_collector() {
	: >"$T/collector.log"
	"$COLLECTOR" --listen 127.0.0.1:0 --tls-ca "$T/pki/ca.crt" --tls-cert "$T/pki/server.crt" \
		--tls-key "$T/pki/server.key" --ring "$T/ring" --ring-size "${RING_SIZE:-32M}" "$@" \
		>>"$T/collector.log" 2>&1 &
	CPID=$!
	for _ in $(seq 200); do
		TLS_PORT=$(sed -n 's/.*mutual TLS, port \([0-9]*\)).*/\1/p' "$T/collector.log" | tail -n 1)
		HTTP_PORT=$(sed -n 's/.*plain HTTP.*port \([0-9]*\)).*/\1/p' "$T/collector.log" | tail -n 1)
		if [ -n "$TLS_PORT" ]; then
			case " $* " in *" --http-listen "*) [ -n "$HTTP_PORT" ] && return 0 ;; *) return 0 ;; esac
		fi
		kill -0 "$CPID" 2>/dev/null || fail "collector exited at start"
		sleep 0.05
	done
	fail "collector did not start listening"
}

stop_collector() { # SIGTERM: must exit 0
	kill -TERM "$CPID"
	wait "$CPID"
	local rc=$?
	CPID=
	[ "$rc" = 0 ] || fail "collector exited $rc on SIGTERM"
}

# dcurl DEVICE ARGS...: curl as a device over mTLS; prints the body, then "HTTP <code>".
dcurl() {
	local dev=$1
	shift
	curl -sS --max-time 60 --cacert "$T/pki/ca.crt" --cert "$T/pki/$dev.crt" \
		--key "$T/pki/$dev.key" -w '\nHTTP %{http_code}\n' "$@"
}
URL() { echo "https://localhost:$TLS_PORT$1"; }

# stored: the collector's count of stored profiles (from /metrics over mTLS).
stored() {
	dcurl op "$(URL /metrics)" | sed -n 's/^edgeprof_collector_profiles_stored_total \([0-9]*\)/\1/p'
}
metric() {
	dcurl op "$(URL /metrics)" | grep "^edgeprof_collector_$1 " | awk '{print $2}'
}
