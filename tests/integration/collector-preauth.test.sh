#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Nothing is read for a client before it is authenticated (issue 24 item 1): on the plain-HTTP
# listener a request without the token is answered 401 from its head alone, with
# "Connection: close", no "100 Continue", and without waiting for (or buffering) its body; eight
# such requests announcing 200 MB bodies leave the collector's RSS where it was.
. "$(dirname "$0")/../lib/collector-lib.sh"

make_pki
start_collector --http-listen 127.0.0.1:0 --http-token s3cret-token-123 --request-timeout-ms 5000
PY=/usr/bin/python3
rss() { awk "/^$1/ {print \$2}" "/proc/$CPID/status"; }
before=$(rss VmRSS)

# One request: the head only, announcing a 200 MB debug file; the answer must come at once.
"$PY" - "$HTTP_PORT" <<'PYEOF' || fail "token-less request with a body"
import socket, sys, time
port = int(sys.argv[1])
for expect in (False, True):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(3)
    head = ("POST /api/0/debuginfo/0123456789abcdef HTTP/1.1\r\nHost: x\r\n"
            "Content-Length: 200000000\r\n" + ("Expect: 100-continue\r\n" if expect else "") +
            "\r\n")
    t0 = time.monotonic()
    s.sendall(head.encode() + b"\0" * 65536)
    ans = b""
    try:
        while b"\r\n\r\n" not in ans:
            d = s.recv(4096)
            if not d:
                break
            ans += d
    except (socket.timeout, ConnectionResetError) as e:
        print("no answer:", e, ans[:100]); sys.exit(1)
    dt = time.monotonic() - t0
    first = ans.split(b"\r\n", 1)[0]
    print("expect=%s: %r in %.3f s" % (expect, first, dt))
    if b" 401 " not in first or dt > 1.0:
        sys.exit(1)
    if b"100 Continue" in ans or b"connection: close" not in ans.lower():
        print(ans); sys.exit(1)
    s.close()
PYEOF

# Eight at once, each sending 200 MB as fast as it can: RSS stays within 64 MiB of idle.
"$PY" - "$HTTP_PORT" <<'PYEOF' || fail "eight big token-less uploads"
import socket, sys, threading
port = int(sys.argv[1])
codes = []
def one():
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(10)
    s.sendall(b"POST /api/0/debuginfo/0123456789abcdef HTTP/1.1\r\nHost: x\r\n"
              b"Content-Length: 200000000\r\n\r\n")
    chunk = b"\0" * (1 << 20)
    try:
        for _ in range(200):
            s.sendall(chunk)
    except OSError:
        pass  # closed by the collector after its 401: what we want
    try:
        codes.append(s.recv(4096).split(b"\r\n", 1)[0])
    except OSError as e:
        codes.append(repr(e).encode())
th = [threading.Thread(target=one) for _ in range(8)]
[t.start() for t in th]
[t.join() for t in th]
print(codes)
PYEOF
after=$(rss VmHWM)
echo "RSS before ${before} KiB, peak during eight 200 MB token-less uploads ${after} KiB"
[ "$after" -lt $((before + 65536)) ] || fail "RSS grew by $((after - before)) KiB"
grep -q "requests_rejected_total{reason=\"unauthorized\"} [1-9]" <(dcurl op "$(URL /metrics)") ||
	fail "401s not counted"
echo PASS
