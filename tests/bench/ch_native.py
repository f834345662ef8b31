# SPDX-License-Identifier: MIT
"""ClickHouse's Native format as the capture rewriters (tests/bench/ch-relayout.py, ch-rebatch.py,
ch-maprollup.py) read and write it: varints (LEB128: column and row counts, string lengths),
and blocks of fixed-width columns and arrays of them."""
import struct


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


WIDTH = {'Date': 2, 'UInt64': 8, 'Int64': 8, 'UInt32': 4, 'Int8': 1, 'UInt8': 1, 'UInt16': 2}


def read_col(b, i, t, n):  # a scalar column's bytes, or (offsets, inner) for Array(T)
    if t in WIDTH:
        return b[i:i + WIDTH[t] * n], i + WIDTH[t] * n
    assert t.startswith('Array(') and t.endswith(')'), t
    offs = list(struct.unpack_from(f'<{n}Q', b, i)); i += 8 * n
    inner, i = read_col(b, i, t[6:-1], offs[-1] if n else 0)
    return (offs, inner), i


def write_col(t, v):
    if t in WIDTH:
        return v
    offs, inner = v
    return struct.pack(f'<{len(offs)}Q', *offs) + write_col(t[6:-1], inner)


def blocks(b):  # Native over HTTP: columns, rows, then each column's name, type and data
    i = 0
    while i < len(b):
        nc, i = varint(b, i)
        nr, i = varint(b, i)
        cols = {}
        for _ in range(nc):
            ln, i = varint(b, i); name = b[i:i + ln].decode(); i += ln
            ln, i = varint(b, i); t = b[i:i + ln].decode(); i += ln
            cols[name], i = read_col(b, i, t, nr)
        yield nr, cols


def block(n, cols):
    o = bytearray(put_varint(len(cols)) + put_varint(n))
    for name, t, v in cols:
        o += put_varint(len(name)) + name.encode() + put_varint(len(t)) + t.encode() + write_col(t, v)
    return bytes(o)


def un(fmt, b):
    return struct.unpack(f'<{len(b) // struct.calcsize(fmt)}{fmt}', b)
