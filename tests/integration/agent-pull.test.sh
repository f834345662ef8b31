#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Pull mode (--pull-listen, issue 19): the agent serves /debug/pprof/ over real mutual TLS with
# the device certificate (edgeprof certs device --server-ip), and real pprof fetches a CPU
# profile of a SIGPROF producer from it with an operator certificate; the known split is in it.
# Refused: no client certificate (handshake), a certificate of another CA (handshake), a device
# certificate (403), seconds beyond the bound (400); heap without a heap recorder is a clear 404.
#
# The pprof client: `go tool pprof` of Debian 12's Go 1.19 fetches https URLs with a fetcher of
# its own that ignores -tls_ca/-tls_cert/-tls_key; upstream pprof (golang-github-google-pprof-dev,
# the same source, built here with that Go, offline) honours them. `go tool pprof` then reads the
# saved profile. ~15 s (the first run builds pprof once into the build directory, ~10 s).
. "$EP_TOP/tests/lib/transport-lib.sh"
agent=$B/edgeprof-agent
lib=$B/libedgeprof.so
split=$B/tests/workloads/split
[ -f "$lib" ] || { echo "skip: libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
"$agent" --help | grep -- "--pull-listen" >/dev/null || { echo "skip: agent built without CONFIG_PULL_SERVER"; exit 77; }
command -v go >/dev/null || { echo "skip: go is not installed (tools/deps/agent.list)"; exit 77; }
[ -d /usr/share/gocode/src/github.com/google/pprof ] ||
	{ echo "skip: golang-github-google-pprof-dev is not installed (tools/deps/agent.list)"; exit 77; }
if ldd "$lib" | grep libasan >/dev/null; then
	echo "skip: sanitizer build (LD_PRELOAD of an ASan library into the workload)"
	exit 77
fi
export HOME=$W GOCACHE=$B/tests/go-cache PPROF_TMPDIR=$W/pprof
PPROF=$B/tests/tools/pprof
if [ ! -x "$PPROF" ]; then
	mkdir -p "$(dirname "$PPROF")"
	GOPATH=/usr/share/gocode GO111MODULE=off GOFLAGS= go build -o "$PPROF.tmp" \
		github.com/google/pprof || fail "cannot build pprof from golang-github-google-pprof-dev"
	mv "$PPROF.tmp" "$PPROF"
fi

make_certs
"$B/edgeprof" certs device "$W/certs" gw-1 --server-ip 127.0.0.1 >/dev/null
"$B/edgeprof" certs init "$W/other" >/dev/null
"$B/edgeprof" certs operator "$W/other" op2 >/dev/null
port=$(free_port)
mkdir -p "$W/reg"
"$agent" --sampler sigprof --registry "$W/reg" --output-dir "$W/out" --round-seconds 1 \
	--period-seconds 60 --pull-listen "127.0.0.1:$port" --tls-ca "$W/certs/ca.crt" \
	--tls-cert "$W/certs/gw-1.crt" --tls-key "$W/certs/gw-1.key" 2>"$W/agent.log" &
PIDS+=($!)
for _ in $(seq 1 100); do grep -q "pull mode" "$W/agent.log" && break; sleep 0.1; done
grep -q "pull mode" "$W/agent.log" || { cat "$W/agent.log"; fail "agent does not listen"; }
env LD_PRELOAD="$lib" EDGEPROF_REGISTRY="$W/reg" EDGEPROF_SERVICE=pullsvc EDGEPROF_HZ=997 \
	"$split" --seconds 8 >/dev/null &
PIDS+=($!)
sleep 1.5 # the agent opens the new ring within a second

U="https://127.0.0.1:$port/debug/pprof"
TLS=(-tls_ca="$W/certs/ca.crt" -tls_cert="$W/certs/op.crt" -tls_key="$W/certs/op.key")
timeout 60 "$PPROF" -top "${TLS[@]}" "$U/profile?seconds=3" >"$W/top.txt" 2>"$W/pprof.err" ||
	{ cat "$W/pprof.err" "$W/agent.log"; fail "pprof cannot fetch the profile"; }
head -n 14 "$W/top.txt"
saved=$(ls "$W"/pprof/*.pb.gz | head -n 1)
go tool pprof -raw "$saved" >/dev/null 2>&1 || fail "go tool pprof cannot read the pulled profile"
# split's known shares: work_a 50 %, work_b 30 %, work_c 20 % of its CPU (tests/workloads/split.c)
$PY - "$W/top.txt" <<'EOF' || fail "the pulled profile does not hold split's known shares"
import re, sys
flat = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 6 and f[-1] in ("work_a", "work_b", "work_c"):
        flat[f[-1]] = float(f[1].rstrip("%"))
print("shares:", flat)
# the order always, the shares loosely: on a loaded machine the producer may get a fraction of a
# CPU for these 3 s (150 samples instead of 3000), and its work split comes in slices
want = {"work_a": 50, "work_b": 30, "work_c": 20}
a, b, c = (flat.get(k, 0) for k in ("work_a", "work_b", "work_c"))
sys.exit(0 if a > b > c > 0 and all(abs(flat.get(k, 0) - v) < 20 for k, v in want.items()) else 1)
EOF
grep -Eq 'Duration: [23](\.[0-9]+)?s' "$W/top.txt" || fail "the profile does not last ~3 s"

code() { curl -s -o "$W/body" -w '%{http_code}' --max-time 20 --cacert "$W/certs/ca.crt" "$@"; }
OP=(--cert "$W/certs/op.crt" --key "$W/certs/op.key")
[ "$(code "${OP[@]}" "$U/")" = 200 ] && grep -q 'profile?seconds' "$W/body" || fail "index"
[ "$(code "${OP[@]}" "$U/heap")" = 404 ] && grep -q 'EDGEPROF_PROFILES' "$W/body" ||
	fail "heap without a heap recorder is not a clear 404"
[ "$(code "${OP[@]}" "$U/profile?seconds=100000")" = 400 ] || fail "seconds beyond the bound"
[ "$(code "$U/")" = 000 ] || fail "a client without a certificate was served"
[ "$(code --cert "$W/other/op2.crt" --key "$W/other/op2.key" "$U/")" = 000 ] ||
	fail "an operator of another CA was served"
[ "$(code --cert "$W/certs/dev-1.crt" --key "$W/certs/dev-1.key" "$U/")" = 403 ] &&
	grep -q 'not an operator' "$W/body" || fail "a device certificate was not refused with 403"
timeout 30 "$PPROF" -top -tls_ca="$W/certs/ca.crt" -tls_cert="$W/certs/dev-1.crt" \
	-tls_key="$W/certs/dev-1.key" "$U/profile?seconds=1" >/dev/null 2>"$W/pprof2.err" &&
	fail "pprof with a device certificate got a profile"
grep -q 403 "$W/pprof2.err" || { cat "$W/pprof2.err"; fail "pprof was not told 403"; }
grep -c 'pull: refused' "$W/agent.log" | grep -x 2 >/dev/null || { cat "$W/agent.log"; fail "refusals not logged"; }
# Idle sockets cannot keep operators out (issue 38: 4 idle sockets, 0 of 2 profiles in 24 s;
# 1 idle socket, 10 s a request): 16 TCP connections that never speak, reopened as they are
# closed, while two operators each fetch a 2 s profile at once: both get it, taking turns at
# the main loop (2 + 2 s and the profile's making), within 12 s on a loaded machine.
$PY - "$port" 16 14 <<'PYEOF' &
import socket, sys, time
port, n, secs = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
socks, end = [], time.monotonic() + secs
while time.monotonic() < end:
    socks = [s for s in socks if s.fileno() >= 0]
    while len(socks) < n:
        try:
            s = socket.create_connection(("127.0.0.1", port))
            s.setblocking(False)
            socks.append(s)
        except OSError:
            break
    for s in socks:
        try:
            if s.recv(1) == b"":
                s.close()
        except BlockingIOError:
            pass
        except OSError:
            s.close()
    time.sleep(0.05)
PYEOF
idle=$!
sleep 1
t0=$(date +%s%N)
ops=()
for i in 1 2; do
	(c=$(code "${OP[@]}" "$U/profile?seconds=2"); echo "$c $((($(date +%s%N) - t0) / 1000000))" \
		>"$W/op$i") &
	ops+=($!)
done
wait "${ops[@]}"
kill "$idle" 2>/dev/null
echo "16 idle sockets: operator 1 got $(cat "$W/op1") ms, operator 2 $(cat "$W/op2") ms (HTTP code, ms)"
for i in 1 2; do
	read -r c ms <"$W/op$i"
	[ "$c" = 200 ] && [ "$ms" -le 12000 ] ||
		{ tail -n 20 "$W/agent.log"; fail "operator $i with 16 idle sockets: HTTP $c after $ms ms"; }
done
echo "ok"
