#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Helpers for the collector's adversarial tests (not a test itself).

  normal URL CA CERT KEY FILE SECONDS [TOKEN]  a normal device: one upload every 50 ms, each on
      a new connection (mTLS for https://, a bearer token for http://); prints
      "ok=N failed=M p99_ms=X" and the first failures.
  flood HOST PORT CONNS SECONDS  CONNS TCP connections that never send a byte, reopened as
      the collector closes them; prints how many were opened in all.
  pprof OUT FUNC [TYPE UNIT PERIOD_TYPE PERIOD_UNIT]  a small gzip pprof written by hand (so
      every string may be anything: invalid UTF-8, newlines) with one sample in FUNC; FUNC and
      the others are Python string literals (b'\\xff' style escapes allowed).
"""
import http.client
import socket
import ssl
import sys
import time
import selectors


def normal(url, ca, cert, key, path, seconds, token=None):
    body = open(path, "rb").read()
    tls = url.startswith("https://")
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    ctx = None
    if tls:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.load_cert_chain(cert, key)
    ok, failed, lat, errors = 0, 0, [], []
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        t0 = time.monotonic()
        n += 1
        try:
            if tls:
                c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
            else:
                c = http.client.HTTPConnection(host, int(port), timeout=10)
            hdr = {"X-Edgeprof-Key": "normal-%d-%d" % (time.time_ns(), n),
                   "Content-Type": "application/octet-stream"}
            if token:
                hdr["Authorization"] = "Bearer " + token
            c.request("POST", "/api/0/profiles?service=normal&type=cpu", body, hdr)
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                ok += 1
            else:
                failed += 1
                errors.append("HTTP %d" % r.status)
        except Exception as e:  # any failure counts
            failed += 1
            errors.append(repr(e)[:120])
        lat.append(time.monotonic() - t0)
        time.sleep(max(0.0, 0.05 - (time.monotonic() - t0)))
    lat.sort()
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else 0
    print("ok=%d failed=%d p99_ms=%.0f" % (ok, failed, p99))
    for e in errors[:5]:
        print("  failure:", e)


def flood(host, port, conns, seconds):
    sel = selectors.DefaultSelector()
    opened = 0
    end = time.monotonic() + seconds

    def one():
        nonlocal opened
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.setblocking(False)
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            return
        opened += 1
        sel.register(s, selectors.EVENT_READ)

    for _ in range(conns):
        one()
    while time.monotonic() < end:
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                d = s.recv(4096)
            except OSError:
                d = b""
            if not d:  # closed by the collector: open another
                sel.unregister(s)
                s.close()
                one()
    print("opened=%d" % opened)


def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def _field(num, payload):  # length-delimited
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _int(num, v):
    return _varint(num << 3) + _varint(v)


def mkpprof(out, func, typ=b"samples", unit=b"count", ptyp=b"cpu", punit=b"nanoseconds"):
    import gzip
    strings = [b"", typ, unit, ptyp, punit, func, b"app.c"]
    vt = lambda t, u: _int(1, t) + _int(2, u)
    prof = _field(1, vt(1, 2))                                   # sample_type
    prof += _field(2, _field(1, _varint(1)) + _field(2, _varint(7)))  # sample: loc 1, value 7
    prof += _field(4, _int(1, 1) + _int(3, 0x1000) + _field(4, _int(1, 1) + _int(2, 3)))
    prof += _field(5, _int(1, 1) + _int(2, 5) + _int(3, 5) + _int(4, 6))
    for st in strings:
        prof += _field(6, st)
    prof += _int(9, 1700000000 * 10**9) + _int(10, 10**10)
    prof += _field(11, vt(3, 4)) + _int(12, 10**7)
    open(out, "wb").write(gzip.compress(prof))


def _lit(x):
    import ast
    v = ast.literal_eval(x if x[:2] in ("b'", 'b"') else repr(x))
    return v if isinstance(v, bytes) else v.encode()


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "normal":
        normal(a[1], a[2], a[3], a[4], a[5], float(a[6]), a[7] if len(a) > 7 else None)
    elif a[0] == "pprof":
        mkpprof(a[1], *[_lit(x) for x in a[2:]])
    elif a[0] == "flood":
        flood(a[1], int(a[2]), int(a[3]), float(a[4]))
    else:
        sys.exit(__doc__)
