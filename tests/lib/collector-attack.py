#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Helpers for the collector's adversarial tests (not a test itself).

  normal URL CA CERT KEY FILE COUNT [TOKEN]  a normal device: COUNT uploads, one every 50 ms
      at most, each on a new connection (mTLS for https://, a bearer token for http://); prints
      "ok=N failed=M p99_ms=X retried=R" and the first failures (an upload is retried once, as the agent does).
  flood HOST PORT CONNS SECONDS  CONNS TCP connections that never send a byte, reopened as
      the collector closes them, for SECONDS or until TERM/INT; prints how many were opened.
  device URL CA CERT KEY FILE LOG STOP  a normal device for the whole suite: one upload every
      50 ms on a new mTLS connection (retried once, as the agent does) until the file STOP
      exists; appends "START_S OK LAT_S" per upload to LOG.
  table LOG PHASES  the suite's table: PHASES has "name count start end rss_kib lines" lines.
  uploads URL CA CERT KEY FILE...  uploads each FILE once on one keep-alive mTLS connection
      (reconnecting after a close); prints "sent=N codes={code: n}".
  tokens URL  token forms on the plain-HTTP listener; prints "sent=N codes={...}".
  pprof OUT FUNC [TYPE UNIT PERIOD_TYPE PERIOD_UNIT]  a small gzip pprof written by hand (so
      every string may be anything: invalid UTF-8, newlines) with one sample in FUNC; FUNC and
      the others are Python string literals (b'\\xff' style escapes allowed).
  pprof-at OUT TIME_NS  the same with one sample in "work", dated TIME_NS (time_nanos).
  deep OUT SAMPLES FRAMES  a legal gzip pprof of SAMPLES samples of FRAMES frames each (of a
      FRAMES-location table), stacks varied enough that gzip's ratio stays under the reader's
      bomb bound (issue 38: 7,000 x 4,096 is 426 KB gzipped and decodes to 230 MB).
  wide OUT SAMPLES  a legal gzip pprof of SAMPLES one-frame samples with varied values.
  posts URL CA CERT KEY FILE PATH N [TOKEN]  N POSTs of FILE to PATH ("{i}" replaced by the
      number of the post) on one keep-alive connection (mTLS, or with CA "-" plain HTTP with
      the bearer TOKEN); prints "sent=N codes={...} sample=S group_devices=G": how many
      answers told the device to sample, and the last answer's group size.
  burst URL CA CERT KEY FILE N  N uploads of FILE at once, each on its own mTLS connection;
      prints the first answer of each code, then "sent=N codes={...}".
  queries URL TOKEN SECONDS THREADS PATH...  THREADS operators on the plain-HTTP listener,
      each asking the PATHs in turn (a new connection each) for SECONDS; prints the first
      answer of each code, per path its codes and slowest answer ("qN PATH: codes={...}
      slowest_s=X"), then "sent=N codes={...} worst_s=X".
      Exits 1 when a request got no answer (reset, timeout) or a code other than 200, 204,
      413 or 503, or a 503 for memory without Retry-After.
"""
import http.client
import socket
import ssl
import sys
import time
import selectors


def normal(url, ca, cert, key, path, count, token=None):
    body = open(path, "rb").read()
    tls = url.startswith("https://")
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    ctx = None
    if tls:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.load_cert_chain(cert, key)
    ok, failed, retried, lat, errors = 0, 0, 0, [], []
    # A count, not a duration: on a loaded machine a duration gives too few uploads to judge.
    for n in range(1, int(count) + 1):
        t0 = time.monotonic()
        # A device whose upload fails sends it once more with the same key, as the agent's
        # transport does (the collector keeps one copy): an upload fails when both attempts do.
        key = "normal-%d-%d" % (time.time_ns(), n)
        for attempt in (1, 2):
            status, err = upload_once(host, port, tls, ctx, token, key, body)
            if status == 200 or attempt == 2:
                break
            retried += 1
        if status == 200:
            ok += 1
        else:
            failed += 1
            errors.append(err)
        lat.append(time.monotonic() - t0)
        time.sleep(max(0.0, 0.05 - (time.monotonic() - t0)))
    lat.sort()
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else 0
    print("ok=%d failed=%d p99_ms=%.0f retried=%d" % (ok, failed, p99, retried))
    for e in errors[:5]:
        print("  failure:", e)


def upload_once(host, port, tls, ctx, token, key, body):
    """One POST on a new connection: (HTTP status or 0, error text)."""
    try:
        if tls:
            c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
        else:
            c = http.client.HTTPConnection(host, int(port), timeout=10)
        hdr = {"X-Edgeprof-Key": key, "Content-Type": "application/octet-stream"}
        if token:
            hdr["Authorization"] = "Bearer " + token
        c.request("POST", "/api/0/profiles?service=normal&type=cpu", body, hdr)
        r = c.getresponse()
        r.read()
        c.close()
        return r.status, "HTTP %d" % r.status
    except Exception as e:  # any failure counts
        return 0, repr(e)[:120]


def flood(host, port, conns, seconds):
    sel = selectors.DefaultSelector()
    import signal
    opened = 0
    end = time.monotonic() + seconds

    def stop(*_):  # TERM or INT ends the flood early, still printing its count
        nonlocal end
        end = 0
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

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


def device(url, ca, cert, key, path, log, stop):
    import os
    body = open(path, "rb").read()
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(cert, key)
    n = 0
    with open(log, "a", buffering=1) as out:
        while not os.path.exists(stop):
            t0 = time.time()
            n += 1
            # retried once with the same key, as the agent's transport does (see normal())
            key = "dev-%d-%d" % (os.getpid(), n)
            status, _ = upload_once(host, port, True, ctx, None, key, body)
            if status != 200:
                status, _ = upload_once(host, port, True, ctx, None, key, body)
            ok = int(status == 200)
            lat = time.time() - t0
            out.write("%.3f %d %.4f\n" % (t0, ok, lat))
            time.sleep(max(0.0, 0.05 - lat))


def table(log, phases):
    rows = [l.split() for l in open(log)]
    print("| attack | count | peak RSS above idle | normal uploads ok | p99 | log lines |")
    print("|---|---|---|---|---|---|")
    worst = []
    for line in open(phases):
        name, count, start, end, rss, lines = line.split()
        start, end = float(start), float(end)
        sel = [r for r in rows if start <= float(r[0]) <= end]
        ok = sum(int(r[1]) for r in sel)
        lat = sorted(float(r[2]) for r in sel)
        p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000 if lat else 0
        rate = 100.0 * ok / len(sel) if sel else 0
        print("| %s | %s | %.1f MiB | %d/%d (%.1f%%) | %.0f ms | %s |" % (
            name, count, int(rss) / 1024, ok, len(sel), rate, p99, lines))
        worst.append((rate, len(sel), name, int(rss)))
    return worst


def uploads(url, ca, cert, key, files):
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(cert, key)
    codes = {}
    c = None
    for i, f in enumerate(files):
        try:
            if c is None:
                c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
            c.request("POST", "/api/0/profiles?service=fuzz&type=cpu", open(f, "rb").read(),
                      {"X-Edgeprof-Key": "fuzz-%d-%d" % (time.time_ns(), i)})
            r = c.getresponse()
            r.read()
            code = r.status
            if r.getheader("Connection", "").lower() == "close":
                c.close()
                c = None
        except Exception as e:
            code = type(e).__name__
            c = None
        codes[code] = codes.get(code, 0) + 1
    print("sent=%d codes=%s" % (len(files), codes))
    return codes


def tokens(url):
    import base64
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    forms = ["", "Bearer", "Bearer ", "Bearer wrong-token", "bearer s3cret-token-12",
             "Bearer s3cret-token-1234", "Basic", "Basic !!!!", "Basic " + "A" * 2000,
             "Basic " + base64.b64encode(b"user:wrong").decode(),
             "Basic " + base64.b64encode(b"no-colon").decode(),
             "Basic " + base64.b64encode(b":" + b"x" * 600).decode(),
             "Digest username=x", "Bearer " + "x" * 8000, "Bearer s3cret-token-123\x00"]
    codes = {}
    for rep in range(20):
        for f in forms:
            for path in ("/api/0/services", "/api/0/profiles?service=t&type=cpu", "/metrics",
                         "/?token=wrong", "/ui/x"):
                try:
                    c = http.client.HTTPConnection(host, int(port), timeout=10)
                    hdr = {"Authorization": f} if f else {}
                    if rep % 2:
                        hdr["Cookie"] = "edgeprof_token=" + f[-12:]
                    c.request("POST" if "type=cpu" in path else "GET", path,
                              b"x" * 100 if "type=cpu" in path else None, hdr)
                    r = c.getresponse()
                    r.read()
                    code = r.status
                    c.close()
                except ValueError:
                    continue  # a header http.client will not send
                except Exception as e:
                    code = type(e).__name__
                codes[code] = codes.get(code, 0) + 1
    print("sent=%d codes=%s" % (sum(codes.values()), codes))
    return codes


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


def mkpprof(out, func, typ=b"samples", unit=b"count", ptyp=b"cpu", punit=b"nanoseconds",
            time_ns=1700000000 * 10**9):
    import gzip
    strings = [b"", typ, unit, ptyp, punit, func, b"app.c"]
    vt = lambda t, u: _int(1, t) + _int(2, u)
    prof = _field(1, vt(1, 2))                                   # sample_type
    prof += _field(2, _field(1, _varint(1)) + _field(2, _varint(7)))  # sample: loc 1, value 7
    prof += _field(4, _int(1, 1) + _int(3, 0x1000) + _field(4, _int(1, 1) + _int(2, 3)))
    prof += _field(5, _int(1, 1) + _int(2, 5) + _int(3, 5) + _int(4, 6))
    for st in strings:
        prof += _field(6, st)
    prof += _int(9, time_ns) + _int(10, 10**10)
    prof += _field(11, vt(3, 4)) + _int(12, 10**7)
    open(out, "wb").write(gzip.compress(prof))


def _tables(n_locs):
    """Strings, one function and n_locs locations (ids 1..n) calling it."""
    strings = [b"", b"samples", b"count", b"cpu", b"nanoseconds", b"f", b"app.c"]
    out = b"".join(_field(6, st) for st in strings)
    out += _field(5, _int(1, 1) + _int(2, 5) + _int(3, 5) + _int(4, 6))
    for i in range(1, n_locs + 1):
        out += _field(4, _int(1, i) + _int(3, 0x1000 + 16 * i) + _field(4, _int(1, 1)))
    vt = lambda t, u: _int(1, t) + _int(2, u)
    out += _field(1, vt(1, 2)) + _field(11, vt(3, 4)) + _int(12, 10**7)
    return out + _int(9, time.time_ns()) + _int(10, 10**10)


def deep(out, samples, frames):
    import gzip
    import random
    rnd = random.Random(38)
    vb = [_varint(i) for i in range(frames + 1)]
    base = vb[1:frames - 23]
    off = [0]
    for v in base:
        off.append(off[-1] + len(v))
    flat = b"".join(base)
    body = []
    for _ in range(samples):
        # 24 random leaf frames over a rotation of one stack: ~120 gzipped bytes a sample
        r = off[rnd.randrange(len(base))]
        packed = b"".join(vb[rnd.randrange(1, frames + 1)] for _ in range(24))
        packed += flat[r:] + flat[:r]
        body.append(_field(2, _field(1, packed) + _field(2, _varint(rnd.randrange(1, 100)))))
    open(out, "wb").write(gzip.compress(_tables(frames) + b"".join(body), 6))


def wide(out, samples):
    import gzip
    import os
    # sample: 12 06 0a 01 01 10 V (location 1, value V of 1..16): 7 bytes, V random
    rec = bytearray(_field(2, _field(1, _varint(1)) + _int(2, 1)) * samples)
    rec[6::7] = os.urandom(samples).translate(bytes((b & 15) + 1 for b in range(256)))
    open(out, "wb").write(gzip.compress(_tables(1) + bytes(rec), 6))


def posts(url, ca, cert, key, path, target, n, token=None):
    import re
    body = open(path, "rb").read()
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    ctx = None
    if ca != "-":
        ctx = ssl.create_default_context(cafile=ca)
        ctx.load_cert_chain(cert, key)
    codes, sample, group = {}, 0, -1
    c = None
    for i in range(n):
        try:
            if c is None:
                c = (http.client.HTTPSConnection(host, int(port), context=ctx, timeout=10)
                     if ctx else http.client.HTTPConnection(host, int(port), timeout=10))
            hdr = {"Authorization": "Bearer " + token} if token else {}
            c.request("POST", target.replace("{i}", str(i)), body, hdr)
            r = c.getresponse()
            text = r.read().decode(errors="replace")
            code = r.status
            sample += '"sample":true' in text
            m = re.search(r'"group_devices":(\d+)', text)
            group = int(m.group(1)) if m else group
            if r.getheader("Connection", "").lower() == "close":
                c.close()
                c = None
        except Exception as e:
            code = type(e).__name__
            c = None
        codes[code] = codes.get(code, 0) + 1
    print("sent=%d codes=%s sample=%d group_devices=%d" % (n, codes, sample, group))
    return codes


def burst(url, ca, cert, key, path, n):
    import threading
    body = open(path, "rb").read()
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.load_cert_chain(cert, key)
    codes, first = {}, {}
    lock = threading.Lock()

    def one(i):
        try:
            c = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=60)
            c.request("POST", "/api/0/profiles?service=burst&type=cpu", body,
                      {"X-Edgeprof-Key": "burst-%d-%d" % (time.time_ns(), i)})
            r = c.getresponse()
            text = r.read()[:200]
            code = r.status
            if code == 503:
                text = b"Retry-After=" + str(r.getheader("Retry-After")).encode() + b" " + text
            c.close()
        except Exception as e:
            code, text = type(e).__name__, b""
        with lock:
            codes[code] = codes.get(code, 0) + 1
            first.setdefault(code, text)

    th = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    [t.start() for t in th]
    [t.join() for t in th]
    for c, t in first.items():
        print("  %s: %s" % (c, t.decode(errors="replace")[:150]))
    print("sent=%d codes=%s" % (n, codes))  # last: the suite's phase() reads the tail
    return codes


def queries(url, token, seconds, threads, paths):
    import threading
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    codes, first, worst, bad, per = {}, {}, {}, [], {}
    lock = threading.Lock()
    end = time.time() + seconds

    def ask(path):
        t0 = time.time()
        try:
            c = http.client.HTTPConnection(host, int(port), timeout=60)
            c.request("GET", path, headers={"Authorization": "Bearer " + token})
            r = c.getresponse()
            body = r.read()
            code, retry = r.status, r.getheader("Retry-After")
            c.close()
        except Exception as e:
            code, body, retry = type(e).__name__, b"", None
        return code, body, retry, time.time() - t0

    def one(k):
        i = k
        while time.time() < end:
            q = i % len(paths)
            path = paths[q]
            i += 1
            code, body, retry, dt = ask(path)
            with lock:
                codes[code] = codes.get(code, 0) + 1
                first.setdefault(code, body[:200])
                per.setdefault(q, {})
                per[q][code] = per[q].get(code, 0) + 1
                worst[q] = max(worst.get(q, 0), dt)
                if code not in (200, 204, 413, 503) or \
                        (code == 503 and b"memory" in body and retry is None):
                    bad.append((path, code, body[:200]))

    th = [threading.Thread(target=one, args=(k,)) for k in range(threads)]
    [t.start() for t in th]
    [t.join() for t in th]
    for c, t in first.items():
        print("  %s: %s" % (c, t.decode(errors="replace")[:160]))
    for q in sorted(per):
        print("  q%d %s: codes=%s slowest_s=%.2f" % (q, paths[q], per[q], worst[q]))
    for b in bad[:5]:
        print("  BAD %s: %s %s" % b)
    print("sent=%d codes=%s worst_s=%.2f" % (sum(codes.values()), codes,
                                              max(worst.values()) if worst else 0))
    return not bad


def _lit(x):
    import ast
    v = ast.literal_eval(x if x[:2] in ("b'", 'b"') else repr(x))
    return v if isinstance(v, bytes) else v.encode()


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "normal":
        normal(a[1], a[2], a[3], a[4], a[5], float(a[6]), a[7] if len(a) > 7 else None)
    elif a[0] == "device":
        device(*a[1:8])
    elif a[0] == "table":
        worst = table(a[1], a[2])
        bad = [w for w in worst if w[1] and w[0] < 99.0]
        sys.exit(1 if bad else 0)
    elif a[0] == "uploads":
        uploads(a[1], a[2], a[3], a[4], a[5:])
    elif a[0] == "tokens":
        codes = tokens(a[1])
        sys.exit(0 if set(codes) <= {401, 303} else 1)
    elif a[0] == "pprof-at":
        mkpprof(a[1], b"work", time_ns=int(a[2]))
    elif a[0] == "pprof":
        mkpprof(a[1], *[_lit(x) for x in a[2:]])
    elif a[0] == "deep":
        deep(a[1], int(a[2]), int(a[3]))
    elif a[0] == "wide":
        wide(a[1], int(a[2]))
    elif a[0] == "posts":
        codes = posts(a[1], a[2], a[3], a[4], a[5], a[6], int(a[7]),
                      a[8] if len(a) > 8 else None)
        sys.exit(0 if set(codes) == {200} else 1)
    elif a[0] == "burst":
        burst(a[1], a[2], a[3], a[4], a[5], int(a[6]))
    elif a[0] == "queries":
        sys.exit(0 if queries(a[1], a[2], float(a[3]), int(a[4]), a[5:]) else 1)
    elif a[0] == "flood":
        flood(a[1], int(a[2]), int(a[3]), float(a[4]))
    else:
        sys.exit(__doc__)
