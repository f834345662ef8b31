#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The hourly rollup as one row per (series, sig, hour) with its stacks in a Nested map, for
tests/bench/ch-replay.sh: what that layout would cost ClickHouse, measured before building it.

ch-maprollup.py SRC DST: copies a capture (CH_CAPTURE=SRC tests/bench/fleet-bench.sh) to DST
with the rollup table made as

    samples_1h (day Date, hour UInt32, series UInt64, sig UInt64, stacksMap Nested(stack UInt64,
      v0 Int64, v1 Int64, v2 Int64, v3 Int64)) ENGINE = SummingMergeTree
      PARTITION BY day ORDER BY (series, sig, hour)

(18.16's SummingMergeTree sums a Nested column whose name ends in Map by its first column when
it merges rows with the same key) and every INSERT of its rows rewritten to it: the rows of one
(series, sig, hour), sorted by stack as the collector sends them, become one row of arrays.
Every other request is copied as it is. ch-replay.sh SRC and ch-replay.sh DST then replay the
same uploads with the two layouts of the rollup.

Measured (a capture of 19,415 uploads of 100,000 devices, where no device uploads twice within
a batch, so the rollup has a row per stack of each profile: 13.8M rows against 19,415 rows of
arrays; ch-replay.sh with CH_REPLAY_TMP=/dev/shm, alternated): clickhouse-server's CPU was no
lower: 7.70 and 7.50 s against 8.13 and 7.36 s. Its INSERTs took less (HTTPHandler 3.41 and
3.32 s against 4.50 and 4.44 s), its merges more (SummingMergeTree merges the maps entry by
entry: 6.1 and 5.1 s of part_log merge time for 7,782 rows against 4.7 and 3.4 s
for 5.5M rows). Not adopted.
"""
import os, re, struct, sys

from ch_native import varint, put_varint

SRC, DST = sys.argv[1], sys.argv[2]
MAP_DDL = (b"CREATE TABLE IF NOT EXISTS samples_1h (day Date, hour UInt32, series UInt64, "
           b"sig UInt64, stacksMap Nested(stack UInt64, v0 Int64, v1 Int64, v2 Int64, v3 Int64)) "
           b"ENGINE = SummingMergeTree PARTITION BY day ORDER BY (series, sig, hour)")
WIDTH = {'Date': 2, 'UInt32': 4, 'UInt64': 8, 'Int64': 8}
FMT = {'Date': 'H', 'UInt32': 'I', 'UInt64': 'Q', 'Int64': 'q'}


def columns(b):  # one Native block of scalar columns: name -> values
    i = 0
    nc, i = varint(b, i)
    nr, i = varint(b, i)
    cols = {}
    for _ in range(nc):
        ln, i = varint(b, i); name = b[i:i + ln].decode(); i += ln
        ln, i = varint(b, i); t = b[i:i + ln].decode(); i += ln
        cols[name] = struct.unpack_from(f'<{nr}{FMT[t]}', b, i)
        i += WIDTH[t] * nr
    assert i == len(b), 'one block of scalar columns expected'
    return nr, cols


def col(name, t, data):
    return put_varint(len(name)) + name.encode() + put_varint(len(t)) + t.encode() + data


def maprows(body):
    n, c = columns(body)
    groups = []  # (day, hour, series, sig), then the row indexes of its stacks
    for r in range(n):
        k = (c['day'][r], c['hour'][r], c['series'][r], c['sig'][r])
        if not groups or groups[-1][0] != k:
            groups.append((k, []))
        groups[-1][1].append(r)
    groups.sort(key=lambda g: (g[0][2], g[0][3], g[0][1]))  # the table's key
    m = len(groups)
    offs, total = [], 0
    for _, rows in groups:
        total += len(rows)
        offs.append(total)
    order = [r for _, rows in groups for r in rows]
    o = bytearray(put_varint(9) + put_varint(m))
    o += col('day', 'Date', struct.pack(f'<{m}H', *[g[0][0] for g in groups]))
    o += col('hour', 'UInt32', struct.pack(f'<{m}I', *[g[0][1] for g in groups]))
    o += col('series', 'UInt64', struct.pack(f'<{m}Q', *[g[0][2] for g in groups]))
    o += col('sig', 'UInt64', struct.pack(f'<{m}Q', *[g[0][3] for g in groups]))
    offsets = struct.pack(f'<{m}Q', *offs)
    o += col('stacksMap.stack', 'Array(UInt64)',
             offsets + struct.pack(f'<{total}Q', *[c['stack'][r] for r in order]))
    for j in range(4):
        o += col(f'stacksMap.v{j}', 'Array(Int64)',
                 offsets + struct.pack(f'<{total}q', *[c[f'v{j}'][r] for r in order]))
    return bytes(o)


os.makedirs(DST, exist_ok=True)
rows_in = rows_out = 0
with open(f'{SRC}/index') as idx, open(f'{DST}/index', 'w') as out:
    for line in idx:
        key = line.split(' ', 1)[0]
        with open(f'{SRC}/{key}.body', 'rb') as f:
            body = f.read()
        if body.startswith(b'CREATE TABLE IF NOT EXISTS samples_1h ('):
            body = MAP_DDL
        elif re.search(r'query=INSERT%20INTO%20samples_1h%20FORMAT%20Native', line):
            rows_in += columns(body)[0]
            body = maprows(body)
            rows_out += varint(body, varint(body, 0)[1])[0]
        with open(f'{DST}/{key}.body', 'wb') as f:
            f.write(body)
        out.write(line)
print(f'{DST}: rollup rows {rows_in} -> {rows_out} (one per series, sig and hour)')
