#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The include graph of the sources against docs/architecture.md's table of layers.

Fails (exit 1, one line per finding) on: an include the table does not allow (upward or
sideways), a cycle among the table's own rows, a cycle of modules (x.c/x.h pairs) through their
includes, a file directly in store/ or agent/ that is not a front file, a .c file over 1,800
lines, agent/daemon/main.c over 600 lines. Usage: layers.py [TOP]
"""
import os
import re
import sys

TOP = sys.argv[1] if len(sys.argv) > 1 else '.'
AREAS = ('port', 'elf', 'pprof', 'agent', 'bpf', 'store', 'tools')
FRONT = {
    'store': {'main.c', 'store.h', 'store.c', 'store-int.h'},
    'agent': {'edgeprof.h'},
}
NOT_CODE = re.compile(r'^(Build.*\.mk|Kconfig|README\.md)$')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_table():
    rows = {}
    with open(os.path.join(TOP, 'docs/architecture.md')) as f:
        for line in f:
            cells = line.split('|')
            if len(cells) < 4 or not cells[1].strip().startswith('`'):
                continue
            name = cells[1].strip().strip('`')
            rows[name] = re.findall(r'`([^`]+)`', cells[2])
    return rows


def layer_of(path, rows):
    """The longest row naming path: the file itself or a folder holding it."""
    best = None
    for name in rows:
        hit = path == name if not name.endswith('/') else path.startswith(name)
        if hit and (best is None or len(name) > len(best)):
            best = name
    return best


def closure(rows, top):
    """The layers below top: those it lists, and theirs (a layer sees all it stands on)."""
    seen, todo = set(), list(rows[top])
    while todo:
        r = todo.pop()
        if r not in seen and r in rows:
            seen.add(r)
            todo.extend(rows[r])
    return seen


def sources():
    for area in AREAS:
        for d, _, files in os.walk(os.path.join(TOP, area)):
            for fn in files:
                if fn.endswith(('.c', '.h')):
                    yield os.path.relpath(os.path.join(d, fn), TOP)


def cycles(graph):
    """Every cycle's nodes, once per strongly connected component (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


def main():
    rows = read_table()
    bad = []
    for c in cycles({r: [d for d in deps if d != r] for r, deps in rows.items()}):
        bad.append('the table of layers has a cycle: ' + ' '.join(c))
    below = {r: closure(rows, r) for r in rows}
    modules = {}
    for src in sorted(sources()):
        layer = layer_of(src, rows)
        if layer is None:
            bad.append(f'{src}: in no layer of docs/architecture.md')
            continue
        text = open(os.path.join(TOP, src), errors='replace').read()
        if src.endswith('.c') and text.count('\n') > 1800:
            bad.append(f'{src}: {text.count(chr(10))} lines (at most 1,800)')
        # a module is a .c and its .h, unless the table gives the header a layer of its own
        mod = layer + ':' + os.path.basename(src).rsplit('.', 1)[0]
        for inc in INCLUDE.findall(text):
            if inc.split('/')[0] not in AREAS:
                continue
            to = layer_of(inc, rows)
            modules.setdefault(mod, set()).add(f'{to}:{os.path.basename(inc).rsplit(".", 1)[0]}')
            if to is None:
                bad.append(f'{src}: includes {inc}, in no layer')
            elif to != layer and to not in below[layer]:
                bad.append(f'{src}: includes {inc} ({layer} may not include {to})')
    for c in cycles({m: [d for d in deps if d != m] for m, deps in modules.items()}):
        bad.append('include cycle: ' + ' -> '.join(c))
    for area, front in FRONT.items():
        for fn in sorted(os.listdir(os.path.join(TOP, area))):
            full = os.path.join(TOP, area, fn)
            if os.path.isfile(full) and fn not in front and not NOT_CODE.match(fn):
                bad.append(f'{area}/{fn}: directly in {area}/ (front files: '
                           f'{", ".join(sorted(front))}); give it its layer\'s folder')
    main_c = os.path.join(TOP, 'agent/daemon/main.c')
    n = open(main_c).read().count('\n')
    if n > 600:
        bad.append(f'agent/daemon/main.c: {n} lines (at most 600)')
    for b in bad:
        print(b)
    print(f'layers: {len(list(sources()))} files, {sum(map(len, modules.values()))} includes, '
          f'{len(rows)} layers, {len(bad)} findings')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
