#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The HTTP requests collectors send to ClickHouse, recorded for tests/bench/ch-replay.sh.

ch-capture.py PORT UPSTREAM_PORT DIR: listens on 127.0.0.1:PORT and forwards every request to
ClickHouse on 127.0.0.1:UPSTREAM_PORT (keep-alive kept per connection), answering with its
answer. Each request's body goes to DIR/NNNNNNN.body and a line "NNNNNNN THREAD METHOD TARGET"
to DIR/index, in the order they arrived. fleet-bench.sh starts it with CH_CAPTURE=DIR.
"""
import http.client
import http.server
import os
import sys
import threading

PORT, UPSTREAM, OUT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
os.makedirs(OUT, exist_ok=True)
LOCK = threading.Lock()
SEQ = [0]
INDEX = open(os.path.join(OUT, "index"), "a", encoding="ascii")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self, method):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        with LOCK:  # numbered in arrival order: the replay's order
            SEQ[0] += 1
            with open(os.path.join(OUT, "%07d.body" % SEQ[0]), "wb") as f:
                f.write(body)
            INDEX.write("%07d %d %s %s\n" % (SEQ[0], threading.get_ident(), method, self.path))
            INDEX.flush()
        if not hasattr(self, "up"):
            self.up = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=600)
        headers = {k: v for k, v in self.headers.items() if k.lower() == "content-type"}
        self.up.request(method, self.path, body=body, headers=headers)
        r = self.up.getresponse()
        data = r.read()
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding", "connection", "keep-alive"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        self.forward("POST")

    def do_GET(self):
        self.forward("GET")


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
