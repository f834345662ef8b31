# SPDX-License-Identifier: MIT
# Shared by tests/integration/transport-*.test.sh (sourced, not run): real certificates from
# `edgeprof certs`, a real collector on a loopback port, the push-dir driver, cleanup on exit.
set -euo pipefail
# set -e ends a test without a word; this says which command did it (a test's own subshells
# and functions do not inherit the trap: it names the line that called them)
trap 'echo "FAIL: exit $? at line $LINENO of $0: $BASH_COMMAND" >&2' ERR
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

# A TCP port on 127.0.0.1 that was free a moment ago, outside the ephemeral range (why: there).
free_port() {
	$PY "$EP_TOP/tests/lib/free-port.py"
}

make_certs() { # -> $W/certs/{ca,server,dev-1,op}.{crt,key} (op: an operator, to read)
	"$B/edgeprof" certs init "$W/certs" >/dev/null
	"$B/edgeprof" certs device "$W/certs" dev-1 >/dev/null
	"$B/edgeprof" certs operator "$W/certs" op >/dev/null
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

# curl_get PORT PATH?QUERY: GET over mTLS as the operator op (a device may not read)
curl_get() {
	curl -sS --fail --max-time 60 --cacert "$W/certs/ca.crt" --cert "$W/certs/op.crt" \
		--key "$W/certs/op.key" "https://127.0.0.1:$1$2"
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

# write_profile FILE [PAD]: a valid gzip pprof of our own (no fixture of another area needed):
# CPU profile, 3 functions (main -> hashLoop 70 %, main -> sortLoop 30 %), time now; PAD adds an
# unreferenced, incompressible string of about PAD bytes (to make the profile that much larger).
write_profile() {
	$PY - "$1" "${2:-0}" <<'PYEOF'
import base64, gzip, os, sys, time
def varint(v):
    o = bytearray()
    while True:
        c = v & 0x7f; v >>= 7
        if not v: o.append(c); return bytes(o)
        o.append(c | 0x80)
def field(n, v):          # varint field
    return varint(n << 3) + varint(v)
def msg(n, b):            # length-delimited field
    return varint(n << 3 | 2) + varint(len(b)) + b
def packed(n, vals):
    return msg(n, b"".join(varint(v) for v in vals))
strings = ["", "samples", "count", "cpu", "nanoseconds", "main", "hashLoop", "sortLoop",
           "/usr/bin/transport-test"]
pad = int(sys.argv[2])
if pad:
    strings.append(base64.b64encode(os.urandom(pad * 3 // 4)).decode())
S = {s: i for i, s in enumerate(strings)}
p = bytearray()
p += msg(1, field(1, S["samples"]) + field(2, S["count"]))
p += msg(1, field(1, S["cpu"]) + field(2, S["nanoseconds"]))
period = 10_000_000
for stack, n in (([2, 1], 70), ([3, 1], 30)):      # location ids, leaf first
    p += msg(2, packed(1, stack) + packed(2, [n, n * period]))
p += msg(3, field(1, 1) + field(2, 0x400000) + field(3, 0x500000) + field(5, S["/usr/bin/transport-test"])
         + field(7, 1) + field(8, 1) + field(9, 1))  # symbolized: nothing for pprof to look up
for lid, fid, addr in ((1, 1, 0x401000), (2, 2, 0x402000), (3, 3, 0x403000)):
    p += msg(4, field(1, lid) + field(2, 1) + field(3, addr) + msg(4, field(1, fid) + field(2, 10 * lid)))
for fid, name in ((1, "main"), (2, "hashLoop"), (3, "sortLoop")):
    p += msg(5, field(1, fid) + field(2, S[name]) + field(3, S[name]) + field(4, S["/usr/bin/transport-test"]))
for s in strings:
    p += msg(6, s.encode())
p += field(9, time.time_ns()) + field(10, 10_000_000_000)
p += msg(11, field(1, S["cpu"]) + field(2, S["nanoseconds"])) + field(12, period)
open(sys.argv[1], "wb").write(gzip.compress(bytes(p)))
PYEOF
}

# make_profiles DIR N [PAD]: N copies of one profile (the transport does not care about content;
# identical bytes let tests compare what the collector stores with what was pushed)
make_profiles() {
	local dir=$1 n=$2 i
	mkdir -p "$dir"
	write_profile "$dir/.one" "${3:-0}"
	for i in $(seq -f %04g 0 $((n - 1))); do
		cp "$dir/.one" "$dir/p$i.pb.gz"
	done
	rm -f "$dir/.one"
}

stat_of() { # stat_of FILE NAME -> value of NAME=value in a push-dir output
	sed -n "s/^$2=//p" "$1" | tail -n 1
}
