#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a newcomer meets first in each tool says what to do next: --help shows a way to start, a
# bad flag points at --help, a missing certificate names the command that makes it, an
# unreachable collector asks whether one is running there. Each check runs the real binary.
set -u
B=$EP_BUILD
agent=$B/edgeprof-agent coll=$B/edgeprof-collector cli=$B/edgeprof
for f in "$agent" "$coll" "$cli"; do [ -x "$f" ] || { echo "$f not built"; exit 77; }; done
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
n=0
expect() { # CODE PATTERN CMD...: exit code CODE and PATTERN (fixed string) in its output
	local code=$1 pat=$2 rc
	shift 2
	"$@" >"$tmp/out" 2>&1
	rc=$?
	n=$((n + 1))
	[ "$rc" = "$code" ] || { cat "$tmp/out"; fail "exit $rc, not $code: $*"; }
	grep -qF -- "$pat" "$tmp/out" || { cat "$tmp/out"; fail "no '$pat' from: $*"; }
}
"$cli" certs init "$tmp/pki" >/dev/null && "$cli" certs device "$tmp/pki" gw-1 >/dev/null ||
	fail "edgeprof certs"
# a port nothing listens on: bind one, note it, close it
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
TLS=(--tls-ca "$tmp/pki/ca.crt" --tls-cert "$tmp/pki/gw-1.crt" --tls-key "$tmp/pki/gw-1.key")

# edgeprof-agent
expect 0 "edgeprof-agent --once --seconds 10 --output-dir" "$agent" --help
expect 2 "Try 'edgeprof-agent --help'." "$agent" --bogus
expect 2 "Try 'edgeprof-agent --help'." "$agent" --hz
if "$agent" --version | grep -q '+upload-mtls'; then
	expect 0 "edgeprof certs init pki && edgeprof certs device pki gw-1" "$agent" --help
	expect 2 "no such file: $tmp/pki/gw-2.crt (make one with: edgeprof certs device $tmp/pki gw-2)" \
		"$agent" --once --seconds 1 --sampler sigprof --registry "$tmp/reg" \
		--upload "https://127.0.0.1:$port" --tls-ca "$tmp/pki/ca.crt" \
		--tls-cert "$tmp/pki/gw-2.crt" --tls-key "$tmp/pki/gw-1.key"
	expect 2 "no such file: $tmp/nope/ca.crt (make one with: edgeprof certs init $tmp/nope)" \
		"$agent" --once --seconds 1 --sampler sigprof --registry "$tmp/reg" \
		--upload "https://127.0.0.1:$port" --tls-ca "$tmp/nope/ca.crt" \
		--tls-cert "$tmp/pki/gw-1.crt" --tls-key "$tmp/pki/gw-1.key"
	# an unreachable collector, no spool: a profile to send comes from a preloaded workload
	if [ -f "$B/libedgeprof.so" ] && [ -x "$B/tests/workloads/split" ] && ! ldd "$B/libedgeprof.so" | grep -q libasan; then
		mkdir -p "$tmp/reg"
		EDGEPROF_REGISTRY="$tmp/reg" EDGEPROF_SERVICE=fs LD_PRELOAD="$B/libedgeprof.so" \
			"$B/tests/workloads/split" --seconds 4 >/dev/null &
		pids+=($!)
		sleep 0.3
		expect 0 "is edgeprof-collector listening there?" "$agent" --once --seconds 1 \
			--sampler sigprof --registry "$tmp/reg" --upload "https://127.0.0.1:$port" "${TLS[@]}"
		grep -qF -- "--spool FILE keeps profiles until it is back" "$tmp/out" ||
			{ cat "$tmp/out"; fail "no word on the lost profile"; }
	fi
fi

# edgeprof-collector
expect 0 "edgeprof-collector --listen 127.0.0.1:8443 --tls-ca pki/ca.crt" "$coll" --help
expect 2 "usage: edgeprof-collector" "$coll" --bogus
expect 1 "no such file: $tmp/pki/srv.crt (make one with: edgeprof certs init $tmp/pki)" \
	"$coll" --listen "127.0.0.1:$port" --tls-ca "$tmp/pki/ca.crt" --tls-cert "$tmp/pki/srv.crt" \
	--tls-key "$tmp/pki/server.key" --ring "$tmp/ring" --ring-size 16M

# edgeprof
expect 0 "'edgeprof COMMAND --help'" "$cli" --help
expect 2 "edgeprof: no command 'bogus'" "$cli" bogus
expect 2 "Try 'edgeprof query --help'." "$cli" query 'x{}'
# a bad flag in any subcommand: getopt's line names "edgeprof CMD", then the hint (issue 15)
for cmd in top flame diff merge folded info query ls debuginfo; do
	expect 2 "edgeprof $cmd: unrecognized option '--bogus'" "$cli" "$cmd" --bogus
	grep -qxF "Try 'edgeprof $cmd --help'." "$tmp/out" || { cat "$tmp/out"; fail "no hint: $cmd"; }
done
expect 2 "Try 'edgeprof top --help'." "$cli" top -n
expect 2 "Try 'edgeprof certs --help'." "$cli" certs --bogus
expect 1 "(is edgeprof-collector running there? check --collector or EDGEPROF_COLLECTOR)" \
	"$cli" query 'x{}' --collector "https://127.0.0.1:$port" "${TLS[@]}" -o "$tmp/q.pb.gz"
expect 1 "make them with: edgeprof certs init pki && edgeprof certs device pki NAME" \
	"$cli" query 'x{}' --collector "https://127.0.0.1:$port" -o "$tmp/q.pb.gz"
expect 1 "no such file: $tmp/pki/gw-9.key (make one with: edgeprof certs device $tmp/pki gw-9)" \
	"$cli" query 'x{}' --collector "https://127.0.0.1:$port" --tls-ca "$tmp/pki/ca.crt" \
	--tls-cert "$tmp/pki/gw-1.crt" --tls-key "$tmp/pki/gw-9.key" -o "$tmp/q.pb.gz"
echo "PASS: $n first-screen messages"
