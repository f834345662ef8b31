#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Transport benchmark (device side), all against a real collector over mutual TLS on loopback:
#   1. CPU time of a full TLS handshake vs a resumed one (goal: resumed <= 1/5 of full), with
#      curl (OpenSSL) doing the same full mTLS POST as the peer reference;
#   2. bytes on the wire per profile, both directions, counted by a TCP relay: one upload per
#      connection with a full handshake, with a resumed one, and a spool drain (keep-alive);
#   3. peak RSS (VmHWM) of the pushing process while it drains a full 1 MiB spool (goal <= 4 MiB).
#
#   tests/bench/transport-bench.sh [BUILD_DIR] [N]      (defaults build/host-x86_64, 50)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-$top/build/host-x86_64}" && pwd)
N=${2:-50}
PY=/usr/bin/python3
PUSH=$B/tests/drivers/push-dir
for f in "$B/edgeprof" "$B/edgeprof-collector" "$PUSH" "$B/tests/pprof-tool"; do
	[ -x "$f" ] || { echo "missing $f: run 'make all-tests' first" >&2; exit 1; }
done
W=$(mktemp -d /tmp/edgeprof-transport-bench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
stat_of() { sed -n "s/^$2=//p" "$1" | tail -n 1; }

"$B/edgeprof" certs init "$W/certs" >/dev/null
"$B/edgeprof" certs device "$W/certs" bench-1 >/dev/null
port=$(free_port)
"$B/edgeprof-collector" --listen "127.0.0.1:$port" --tls-ca "$W/certs/ca.crt" \
	--tls-cert "$W/certs/server.crt" --tls-key "$W/certs/server.key" --ring "$W/ring" \
	--ring-size 256M >"$W/collector.log" 2>&1 &
PIDS+=($!)
for i in $(seq 1 100); do grep -q "port $port)" "$W/collector.log" && break; sleep 0.1; done

# A ~20 KB profile (500 samples, 150 stacks of 16 frames), the size of a busy gateway's round.
mkdir -p "$W/one"
"$B/tests/pprof-tool" encode "$W/one/p.pb.gz" 500 150 16 >/dev/null
size=$(stat -c %s "$W/one/p.pb.gz")
echo "profile: $size bytes (gzip pprof); N=$N uploads per measurement; $(nproc) CPUs"

# A TCP relay that counts bytes each way: RELAY_PORT -> port. Prints totals on SIGTERM.
relay=$(free_port)
$PY - "$relay" "$port" "$W/relay.txt" <<'PYEOF' &
import socket, sys, threading, signal
lp, rp, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
up = [0]; down = [0]; lock = threading.Lock()
def pipe(a, b, ctr):
    try:
        while True:
            d = a.recv(65536)
            if not d: break
            with lock: ctr[0] += len(d)
            b.sendall(d)
    except OSError: pass
    finally:
        for s in (a, b):
            try: s.shutdown(socket.SHUT_RDWR)
            except OSError: pass
def dump(*_):
    with lock, open(out, "w") as f: f.write("%d %d\n" % (up[0], down[0]))
signal.signal(signal.SIGUSR1, dump)
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", lp)); ls.listen(64)
while True:
    c, _ = ls.accept()
    s = socket.create_connection(("127.0.0.1", rp))
    threading.Thread(target=pipe, args=(c, s, up), daemon=True).start()
    threading.Thread(target=pipe, args=(s, c, down), daemon=True).start()
PYEOF
RELAY_PID=$!
PIDS+=($RELAY_PID)
sleep 0.5
relay_bytes() { kill -USR1 "$RELAY_PID"; sleep 0.3; cat "$W/relay.txt"; }

push() { # name via extra args
	"$PUSH" --upload "https://127.0.0.1:$relay" --tls-ca "$W/certs/ca.crt" \
		--tls-cert "$W/certs/bench-1.crt" --tls-key "$W/certs/bench-1.key" \
		--service bench --device bench-1 "$@"
}

echo
echo "== 1. handshake CPU (client side, process CPU time inside the handshake)"
# REPS runs of N/REPS uploads each; medians over the runs' per-handshake means.
REPS=5
per=$(( N / REPS > 0 ? N / REPS : 1 ))
median() { $PY -c 'import statistics, sys; print(int(statistics.median(map(float, sys.argv[1:]))))' "$@"; }
read -r u0 d0 < <(relay_bytes)
fulls=() ress=() curls=()
for rep in $(seq 1 $REPS); do
	push --round "full$rep" --repeat "$per" --forget-session "$W/one" >"$W/full.out" 2>"$W/full.err"
	fulls+=($(( $(stat_of "$W/full.out" full_cpu_ns) / $(stat_of "$W/full.out" handshakes) )))
done
read -r u1 d1 < <(relay_bytes)
for rep in $(seq 1 $REPS); do
	push --round "res$rep" --repeat "$per" "$W/one" >"$W/res.out" 2>"$W/res.err"
	nres=$(stat_of "$W/res.out" resumed)
	[ "$nres" -gt 0 ] || { echo "no resumed handshake: $(cat "$W/res.err")"; exit 1; }
	ress+=($(( $(stat_of "$W/res.out" resumed_cpu_ns) / nres )))
done
read -r u2 d2 < <(relay_bytes)
# peer: curl (OpenSSL), one process per full mTLS POST of the same profile
for rep in $(seq 1 $REPS); do
	/usr/bin/time -f "%U %S" -o "$W/curl.time" bash -c '
	for i in $(seq 1 '"$per"'); do
		curl -sS -o /dev/null --cacert "'"$W"'/certs/ca.crt" --cert "'"$W"'/certs/bench-1.crt" \
			--key "'"$W"'/certs/bench-1.key" -H "X-Edgeprof-Key: curl-'"$rep"'-$i" \
			--data-binary @"'"$W"'/one/p.pb.gz" \
			"https://127.0.0.1:'"$relay"'/api/0/profiles?service=bench-curl&type=cpu"
	done'
	read -r cu cs <"$W/curl.time"
	curls+=($($PY -c "print(int(($cu + $cs) * 1e9 / $per))"))
done
read -r u3 d3 < <(relay_bytes)
full_ns=$(median "${fulls[@]}")
res_ns=$(median "${ress[@]}")
curl_ns=$(median "${curls[@]}")
N=$((per * REPS))
echo "full handshake:    $((full_ns / 1000)) us CPU  (median of $REPS runs x $per)"
echo "resumed handshake: $((res_ns / 1000)) us CPU  (median of $REPS runs; the first of each run is full)"
$PY -c "print('resumed/full ratio: %.3f  (goal <= 0.200)' % ($res_ns / $full_ns))"
echo "peer: curl+OpenSSL, whole process per full-handshake POST: $((curl_ns / 1000)) us CPU (median)"
$PY -c "print('ours full handshake / curl whole POST: %.2f' % ($full_ns / $curl_ns))"

echo
echo "== 2. bytes on the wire per profile (payload $size bytes)"
$PY - "$N" "$size" "$u0" "$d0" "$u1" "$d1" "$u2" "$d2" "$u3" "$d3" <<'PYEOF'
import sys
n, size, u0, d0, u1, d1, u2, d2, u3, d3 = map(int, sys.argv[1:])
for name, u, d in (("ours, full handshake each", u1 - u0, d1 - d0),
                   ("ours, resumed session each", u2 - u1, d2 - d1),
                   ("peer curl, full handshake", u3 - u2, d3 - d2)):
    print("%-28s up %7.0f B  down %6.0f B  overhead %5.1f%%" % (name, u / n, d / n, 100.0 * (u / n - size) / size))
PYEOF
# drain of N spooled profiles on one kept-alive connection
dead=$(free_port)
"$PUSH" --upload "https://127.0.0.1:$dead" --tls-ca "$W/certs/ca.crt" --tls-cert "$W/certs/bench-1.crt" \
	--tls-key "$W/certs/bench-1.key" --service bench --round spool --spool "$W/spool" \
	--spool-size 4M --no-drain --repeat "$N" "$W/one" >/dev/null 2>&1 || true
read -r u4 d4 < <(relay_bytes)
push --round spool --spool "$W/spool" >"$W/drain.out" 2>&1
read -r u5 d5 < <(relay_bytes)
$PY -c "print('%-28s up %7.0f B  down %6.0f B  overhead %5.1f%%' % ('ours, spool drain keep-alive', ($u5 - $u4) / $N, ($d5 - $d4) / $N, 100.0 * (($u5 - $u4) / $N - $size) / $size))"

echo
echo "== 3. RSS while draining a full 1 MiB spool"
"$PUSH" --upload "https://127.0.0.1:$dead" --tls-ca "$W/certs/ca.crt" --tls-cert "$W/certs/bench-1.crt" \
	--tls-key "$W/certs/bench-1.key" --service bench --round full1m --spool "$W/spool1m" \
	--spool-size 1M --no-drain --repeat 80 "$W/one" >"$W/fill.out" 2>&1 || true
echo "spool: 80 profiles pushed while down, $(stat_of "$W/fill.out" spool_pending) fit and wait (the oldest were dropped)"
push --round full1m --spool "$W/spool1m" --spool-size 1M >"$W/drain1m.out" 2>&1
echo "drained $(stat_of "$W/drain1m.out" from_spool) profiles; peak RSS (VmHWM) $(stat_of "$W/drain1m.out" vm_hwm_kb) KiB (goal <= 4096)"
