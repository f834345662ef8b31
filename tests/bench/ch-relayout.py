#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The same ingest in samples' two layouts, for tests/bench/ch-replay.sh.

ch-relayout.py SRC DST: copies a capture (CH_CAPTURE=SRC tests/bench/fleet-bench.sh) of
collectors that wrote samples as a row per (profile, stack) (main before issue 18's i18p) to
DST, each INSERT INTO samples (Native) regrouped as a row per profile (stacks Array(UInt64),
v Array(Array(Int64)); FLAT=1: v Array(Int64), the values flattened) and the samples CREATE
TABLE replaced by that layout's. Then ch-replay.sh SRC and ch-replay.sh DST replay the same
rows in either layout.
"""
import array, os, shutil, sys

SRC, DST = sys.argv[1], sys.argv[2]
os.makedirs(DST, exist_ok=True)
DDL = (b"CREATE TABLE IF NOT EXISTS samples (day Date, ts UInt64, series UInt64, sig UInt64, "
       b"profile UInt64, stacks Array(UInt64), v Array(" + (b"Int64" if os.environ.get("FLAT") else b"Array(Int64)") + b"), hour UInt32 MATERIALIZED "
       b"toUInt32(intDiv(ts, 3600000000000))) ENGINE = MergeTree PARTITION BY day ORDER BY (hour, series, ts)")

from ch_native import varint, put_varint


def s(x):
    return put_varint(len(x)) + x

def relayout(b):
    nc, i = varint(b, 0)
    n, i = varint(b, i)
    cols = {}
    for _ in range(nc):
        l, i = varint(b, i); name = b[i:i + l].decode(); i += l
        l, i = varint(b, i); typ = b[i:i + l].decode(); i += l
        if typ == "Date":
            a = array.array("H", b[i:i + 2 * n]); i += 2 * n; cols[name] = a
        elif typ == "Array(Int64)":
            off = array.array("Q", b[i:i + 8 * n]); i += 8 * n
            nv = off[-1] if n else 0
            vals = array.array("q", b[i:i + 8 * nv]); i += 8 * nv
            cols[name] = (off, vals)
        else:
            a = array.array("Q", b[i:i + 8 * n]); i += 8 * n; cols[name] = a
    assert i == len(b)
    prof = cols["profile"]
    starts = [k for k in range(n) if k == 0 or prof[k] != prof[k - 1]]
    np_ = len(starts)
    ends = array.array("Q", starts[1:] + [n])
    out = [put_varint(7), put_varint(np_)]
    for name, typ in (("day", "Date"), ("ts", "UInt64"), ("series", "UInt64"), ("sig", "UInt64"), ("profile", "UInt64")):
        a = array.array(cols[name].typecode, (cols[name][k] for k in starts))
        out += [s(name.encode()), s(typ.encode()), a.tobytes()]
    out += [s(b"stacks"), s(b"Array(UInt64)"), ends.tobytes(), cols["stack"].tobytes()]
    off, vals = cols["v"]
    if os.environ.get("FLAT"):
        vends = array.array("Q", (off[e - 1] for e in ends))
        out += [s(b"v"), s(b"Array(Int64)"), vends.tobytes(), vals.tobytes()]
    else:
        out += [s(b"v"), s(b"Array(Array(Int64))"), ends.tobytes(), off.tobytes(), vals.tobytes()]
    return b"".join(out)

for line in open(os.path.join(SRC, "index")):
    k = line.split()[0]
    body = open(os.path.join(SRC, k + ".body"), "rb").read()
    if "INSERT%20INTO%20samples%20FORMAT%20Native" in line:
        body = relayout(body)
    elif body.startswith(b"CREATE TABLE IF NOT EXISTS samples ("):
        body = DDL
    open(os.path.join(DST, k + ".body"), "wb").write(body)
shutil.copy(os.path.join(SRC, "index"), os.path.join(DST, "index"))
