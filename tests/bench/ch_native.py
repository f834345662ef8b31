# SPDX-License-Identifier: MIT
"""The varints of ClickHouse's Native format (LEB128: column and row counts, string lengths),
shared by the capture rewriters tests/bench/ch-relayout.py and tests/bench/ch-rebatch.py."""


def varint(b, i):
    """The unsigned varint at b[i:], and the index after it."""
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << s
        s += 7
        if c < 0x80:
            return v, i


def put_varint(v):
    """v as an unsigned varint."""
    o = bytearray()
    while True:
        c, v = v & 0x7f, v >> 7
        o.append(c | (0x80 if v else 0))
        if not v:
            return bytes(o)
