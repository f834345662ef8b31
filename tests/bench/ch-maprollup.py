#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The hourly rollup as one row per (series, sig, hour) with its stacks in a Nested map, for
tests/bench/ch-replay.sh: what that layout would cost ClickHouse, measured before building it.

ch-maprollup.py SRC DST: copies a capture (CH_CAPTURE=SRC tests/bench/fleet-bench.sh, made by
collectors before the rollup by group: their rollup INSERTs go to samples_1h) to DST
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

from ch_native import blocks, block, un

SRC, DST = sys.argv[1], sys.argv[2]
MAP_DDL = (b"CREATE TABLE IF NOT EXISTS samples_1h (day Date, hour UInt32, series UInt64, "
           b"sig UInt64, stacksMap Nested(stack UInt64, v0 Int64, v1 Int64, v2 Int64, v3 Int64)) "
           b"ENGINE = SummingMergeTree PARTITION BY day ORDER BY (series, sig, hour)")
FMT = {'day': 'H', 'hour': 'I', 'series': 'Q', 'sig': 'Q', 'stack': 'Q',
       'v0': 'q', 'v1': 'q', 'v2': 'q', 'v3': 'q'}


def maprows(body):  # the rollup's one block of rows -> (rows in, the block of maps, rows out)
    (n, raw), = blocks(body)
    c = {name: un(FMT[name], raw[name]) for name in FMT}
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
    cols = [(name, t, struct.pack(f'<{m}{FMT[name]}', *[g[0][j] for g in groups]))
            for j, (name, t) in enumerate((('day', 'Date'), ('hour', 'UInt32'),
                                           ('series', 'UInt64'), ('sig', 'UInt64')))]
    cols += [(f'stacksMap.{name}', f'Array({t})',
              (offs, struct.pack(f'<{total}{FMT[name]}', *[c[name][r] for r in order])))
             for name, t in (('stack', 'UInt64'), ('v0', 'Int64'), ('v1', 'Int64'),
                             ('v2', 'Int64'), ('v3', 'Int64'))]
    return n, block(m, cols), m


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
            n_in, body, n_out = maprows(body)
            rows_in += n_in
            rows_out += n_out
        with open(f'{DST}/{key}.body', 'wb') as f:
            f.write(body)
        out.write(line)
print(f'{DST}: rollup rows {rows_in} -> {rows_out} (one per series, sig and hour)')
