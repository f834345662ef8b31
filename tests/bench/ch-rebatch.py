#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The same ingest in fewer, larger batches, for tests/bench/ch-replay.sh.

ch-rebatch.py SRC DST K: copies a capture (CH_CAPTURE=SRC tests/bench/fleet-bench.sh, a
database of one row per profile) to DST with every K consecutive INSERTs of samples,
samples_1h and profiles as one INSERT (at the place of the K-th): samples as one Native block
sorted by (hour, series, ts), the rollup's rows as one Native block summed by key and sorted
as the collector does, profiles' RowBinary rows concatenated; of the per-batch requests, the
rollup_pending rows and the id lookups of one batch in K are kept. The capture's consecutive
batches are those of all collectors, so the rollup sums across collectors where one collector's
longer batch would sum only its own. ch-replay.sh SRC and ch-replay.sh DST then replay the same
profiles in batches K times as large. For captures of collectors before the rollup by group
(their rollup INSERTs go to samples_1h, by series; this version's go to samples_1g).
"""
import os, re, struct, sys

from ch_native import blocks, block, un

SRC, DST, K = sys.argv[1], sys.argv[2], int(sys.argv[3])


def samples(bodies):
    rows = []
    for body in bodies:
        for n, c in blocks(body):
            day, ts, series, sig, prof = (un('H', c['day']), un('Q', c['ts']), un('Q', c['series']),
                                          un('Q', c['sig']), un('Q', c['profile']))
            so, sd = c['stacks']
            _, (vo, vd) = c['v']
            for r in range(n):
                a, e = so[r - 1] if r else 0, so[r]
                lens = [vo[k] - (vo[k - 1] if k else 0) for k in range(a, e)]
                va, ve = vo[a - 1] if a else 0, vo[e - 1] if e else 0
                rows.append(((ts[r] // 3600000000000, series[r], ts[r]), day[r], ts[r], series[r],
                             sig[r], prof[r], sd[8 * a:8 * e], lens, vd[8 * va:8 * ve]))
    rows.sort(key=lambda r: r[0])
    n = len(rows)
    cols = [('day', 'Date', struct.pack(f'<{n}H', *[r[1] for r in rows]))]
    for name, k in (('ts', 2), ('series', 3), ('sig', 4), ('profile', 5)):
        cols.append((name, 'UInt64', struct.pack(f'<{n}Q', *[r[k] for r in rows])))
    so, vo, c, cv = [], [], 0, 0
    for r in rows:
        c += len(r[6]) // 8; so.append(c)
        for ln in r[7]:
            cv += ln; vo.append(cv)
    cols.append(('stacks', 'Array(UInt64)', (so, b''.join(r[6] for r in rows))))
    cols.append(('v', 'Array(Array(Int64))', (so, (vo, b''.join(r[8] for r in rows)))))
    return block(n, cols)


def rollup(bodies):  # summed by (series, sig, hour, stack), the table's key (day follows hour)
    acc = {}
    for body in bodies:
        for n, c in blocks(body):
            day, hour, series, sig, stack = (un('H', c['day']), un('I', c['hour']), un('Q', c['series']),
                                             un('Q', c['sig']), un('Q', c['stack']))
            vs = [un('q', c[f'v{j}']) for j in range(4)]
            for r in range(n):
                k = (series[r], sig[r], hour[r], stack[r], day[r])
                a = acc.get(k)
                if a is None:
                    acc[k] = [vs[0][r], vs[1][r], vs[2][r], vs[3][r]]
                else:
                    for j in range(4):
                        a[j] += vs[j][r]
    keys = sorted(acc)
    n = len(keys)
    cols = [('day', 'Date', struct.pack(f'<{n}H', *[k[4] for k in keys])),
            ('hour', 'UInt32', struct.pack(f'<{n}I', *[k[2] for k in keys])),
            ('series', 'UInt64', struct.pack(f'<{n}Q', *[k[0] for k in keys])),
            ('sig', 'UInt64', struct.pack(f'<{n}Q', *[k[1] for k in keys])),
            ('stack', 'UInt64', struct.pack(f'<{n}Q', *[k[3] for k in keys]))]
    cols += [(f'v{j}', 'Int64', struct.pack(f'<{n}q', *[acc[k][j] for k in keys])) for j in range(4)]
    return block(n, cols)


JOIN = {'samples': samples, 'samples_1h': rollup, 'profiles': b''.join}
os.makedirs(DST, exist_ok=True)
out, pend, batches, lookups, last = [], {}, {}, 0, {}


def emit(thread, target, body):
    key = '%07d' % (len(out) + 1)
    with open(f'{DST}/{key}.body', 'wb') as f:
        f.write(body)
    out.append(f'{key} {thread} POST {target}')


for line in open(f'{SRC}/index'):
    key, thread, _, target = line.rstrip('\n').split(' ', 3)
    with open(f'{SRC}/{key}.body', 'rb') as f:
        body = f.read()
    m = re.search(r'query=INSERT%20INTO%20([a-z_0-9]+)%20', target)
    if m and m.group(1) in JOIN:
        t = m.group(1)
        pend.setdefault(t, []).append(body)
        last[t] = (thread, target)
        if len(pend[t]) == K:
            emit(thread, target, JOIN[t](pend.pop(t)))
        continue
    if body.startswith(b'INSERT INTO rollup_pending'):  # a batch's intent, then its done
        batch = re.search(rb"VALUES \('[^']*', \d+, (\d+)", body).group(1)
        if batches.setdefault(batch, len(batches)) % K:
            continue
    if body.startswith(b'SELECT id FROM profiles'):
        lookups += 1
        if (lookups - 1) % K:
            continue
    emit(thread, target, body)
for t, bodies in pend.items():
    emit(*last[t], JOIN[t](bodies))
with open(f'{DST}/index', 'w') as f:
    f.write(''.join(o + '\n' for o in out))
print(f'{len(out)} requests in {DST}')
