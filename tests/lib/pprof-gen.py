#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A pprof profile with exactly the stacks given, for tests that need known values.

    pprof-gen.py OUT KIND 'main;checksum=200000000' 'main;other=300000000' ...

KIND: cpu (samples/count + cpu/nanoseconds, value = ns, count = ns / 10 ms) or heap (Go's four
types: alloc_objects/count, alloc_space/bytes, inuse_objects/count, inuse_space/bytes; value =
bytes allocated, inuse = half of it) or inuse (a snapshot: inuse_objects, inuse_space = value).
Stacks are root first, as in folded text. Written by hand
from profile.proto (no protobuf module needed); gzip-compressed.
"""
import gzip
import sys


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def msg(*parts):
    return b"".join(parts)


def main():
    out, kind, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
    strings = [""]

    def s(x):
        if x not in strings:
            strings.append(x)
        return strings.index(x)

    if kind == "cpu":
        types = [("samples", "count"), ("cpu", "nanoseconds")]
    elif kind == "heap":
        types = [("alloc_objects", "count"), ("alloc_space", "bytes"),
                 ("inuse_objects", "count"), ("inuse_space", "bytes")]
    else:
        types = [("inuse_objects", "count"), ("inuse_space", "bytes")]
    body = b""
    for t, u in types:
        body += field(1, 2, msg(field(1, 0, s(t)), field(2, 0, s(u))))
    funcs, samples = {}, b""
    for spec in specs:
        stack, value = spec.rsplit("=", 1)
        value = int(value)
        locs = []
        for name in reversed(stack.split(";")):  # leaf first
            if name not in funcs:
                funcs[name] = len(funcs) + 1
            locs.append(funcs[name])
        vals = {"cpu": [value // 10000000, value],
                "heap": [value // 64, value, value // 128, value // 2],
                "inuse": [value // 64, value]}[kind]
        samples += field(2, 2, msg(field(1, 2, b"".join(varint(x) for x in locs)),
                                   field(2, 2, b"".join(varint(v) for v in vals))))
    body += samples
    for name, i in funcs.items():  # location i has function i
        body += field(4, 2, msg(field(1, 0, i), field(3, 0, 0x1000 + i),
                                field(4, 2, field(1, 0, i))))
    for name, i in funcs.items():
        body += field(5, 2, msg(field(1, 0, i), field(2, 0, s(name)), field(4, 0, s("app.c"))))
    if kind == "cpu":
        body += field(11, 2, msg(field(1, 0, s("cpu")), field(2, 0, s("nanoseconds"))))
        body += field(12, 0, 10000000)
    for x in strings:
        body += field(6, 2, x.encode())
    with open(out, "wb") as f:
        f.write(gzip.compress(body))


main()
