#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Unauthenticated connections cannot starve devices (issue 24 item 3): 300 TCP connections that
# never send a byte on each listener (more than --max-conns, all from one address), kept up for
# the whole run, while a normal device uploads over mTLS and a token holder over plain HTTP, 40
# uploads each on a new connection every 50 ms: >= 99% of both succeed; evictions are counted in /metrics and
# logged at most once a second.
. "$(dirname "$0")/../lib/collector-lib.sh"

make_pki
"$PPROF_TOOL" build "$T/p.pb.gz" >/dev/null || fail "pprof-tool build"
TOKEN=s3cret-token-123
start_collector --http-listen 127.0.0.1:0 --http-token "$TOKEN" --max-conns 256
A="/usr/bin/python3 $(dirname "$0")/../lib/collector-attack.py"
N=40
# The floods outlast the normal clients (bounded at 120 s) and are stopped when those are done.
$A flood 127.0.0.1 "$TLS_PORT" 300 120 >"$T/flood-tls" &
F1=$!
$A flood 127.0.0.1 "$HTTP_PORT" 300 120 >"$T/flood-http" &
F2=$!
sleep 1
lines0=$(wc -l <"$T/collector.log")
t0=$(date +%s)
$A normal "https://localhost:$TLS_PORT" "$T/pki/ca.crt" "$T/pki/dev-1.crt" "$T/pki/dev-1.key" \
	"$T/p.pb.gz" $N >"$T/normal-tls" &
N1=$!
$A normal "http://127.0.0.1:$HTTP_PORT" - - - "$T/p.pb.gz" $N "$TOKEN" >"$T/normal-http"
wait $N1
SECS=$(($(date +%s) - t0))
lines=$(($(wc -l <"$T/collector.log") - lines0))
kill -TERM $F1 $F2 2>/dev/null
wait $F1 $F2 2>/dev/null
echo "flood on mTLS: $(cat "$T/flood-tls"); on plain HTTP: $(cat "$T/flood-http")"
echo "normal device over mTLS:  $(cat "$T/normal-tls")"
echo "token holder over HTTP:   $(cat "$T/normal-http")"
echo "collector log lines during the flood: $lines"
for f in normal-tls normal-http; do
	read -r ok failed <<<"$(sed -n 's/^ok=\([0-9]*\) failed=\([0-9]*\).*/\1 \2/p' "$T/$f")"
	[ -n "$ok" ] && [ $((ok + failed)) = $N ] || fail "$f: the client did not finish"
	[ $((failed * 100)) -le "$ok" ] || fail "$f: $failed of $((ok + failed)) uploads failed"
done
[ "$lines" -le $((3 * (SECS + 1))) ] || fail "$lines log lines in ${SECS} s: not rate-limited"
ev=$(metric connections_evicted_total)
echo "connections_evicted_total $ev"
[ "${ev:-0}" -gt 0 ] || fail "no eviction counted"
echo PASS
