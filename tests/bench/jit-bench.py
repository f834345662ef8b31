# SPDX-License-Identifier: MIT
"""The arithmetic of tests/bench/jit-bench.sh: one line per run and profiler, then medians.

argv[1]: lines "rep pid edgeprof.pb.gz perf-script.txt node-output".
named  = % of the node process's samples with a frame naming a script function
main   = the same, main thread only (the other threads are V8's compiler and GC)
handl  = % of the process's samples under one of the three handlers
shares = each handler's share of the handler samples, and the largest gap (pp) to the
         script's own accounting (its CPU time around each handler)
"""
import re
import statistics
import sys

import pprof_traces as pt

HANDLERS = ("fib", "work_dict", "outer")
SCRIPT = set(HANDLERS) | {"inner", "run"}
JS_TAGS = ("JS", "LazyCompile", "Function", "Script", "Eval")


def v8_name(raw):
    """The function in a perf-map name, as agent/core/perfmap.c reads it."""
    tag, sep, rest = raw.partition(":")
    if not sep or tag not in JS_TAGS:
        return raw
    rest = rest[1:] if rest[:1] in ("~", "^", "+", "*") else rest
    name, sp, loc = rest.rpartition(" ")
    if sp and re.search(r":\d+(:\d+)?$", loc):
        rest = name
    return rest or "(anonymous)"


def perf_samples(path, pid):
    """(weight 1, frames leaf first, tid) of pid from perf script -F pid,tid,ip,sym."""
    out, cur = [], None
    for line in open(path, errors="replace"):
        s = line.strip()
        m = re.match(r"^(\d+)/(\d+)$", s)
        if m:
            cur = (int(m.group(1)), int(m.group(2)), [])
            if cur[0] == pid:
                out.append(cur)
            continue
        m = re.match(r"^[0-9a-f]+ (.*)$", s)
        if m and cur is not None:
            cur[2].append(v8_name(m.group(1)))
    return [(1.0, fr, tid) for _, tid, fr in out]


def ours_samples(path, pid):
    return [(s.value, [v8_name(f) for f in s.frames], int(s.labels.get("thread", "-1")))
            for s in pt.samples(path) if s.labels.get("pid") == str(pid)]


def handler(frames):
    for f in frames:
        if f in HANDLERS:
            return f
        if f == "inner":
            return "outer"
    return None


def measure(samples, pid, truth):
    tot = sum(w for w, _, _ in samples) or 1
    main = [(w, fr) for w, fr, t in samples if t == pid]
    mtot = sum(w for w, _ in main) or 1
    named = 100 * sum(w for w, fr, _ in samples if SCRIPT & set(fr)) / tot
    mnamed = 100 * sum(w for w, fr in main if SCRIPT & set(fr)) / mtot
    per = {h: 0.0 for h in HANDLERS}
    for w, fr, _ in samples:
        h = handler(fr)
        if h:
            per[h] += w
    htot = sum(per.values()) or 1
    shares = {h: 100 * per[h] / htot for h in HANDLERS}
    gap = max(abs(shares[h] - truth[h]) for h in HANDLERS)
    return {"n": len(samples), "named": named, "main": mnamed, "handl": 100 * htot / tot,
            "shares": shares, "gap": gap}


def main():
    rows = {"edgeprof": [], "perf": []}
    for line in open(sys.argv[1]):
        rep, pid, ours, perf, node = line.split()
        pid = int(pid)
        truth = {}
        for l in open(node):
            k, _, v = l.partition(" ")
            if k in HANDLERS:
                truth[k] = float(v)
        print(f"run {rep}: script's own shares " +
              " ".join(f"{h} {truth[h]:.1f}" for h in HANDLERS))
        for name, ss in (("edgeprof", ours_samples(ours, pid)), ("perf", perf_samples(perf, pid))):
            m = measure(ss, pid, truth)
            rows[name].append(m)
            print(f"  {name:8} samples {m['n']:5d}  named {m['named']:5.1f}%  main thread "
                  f"{m['main']:5.1f}%  under a handler {m['handl']:5.1f}%  shares " +
                  " ".join(f"{h} {m['shares'][h]:.1f}" for h in HANDLERS) +
                  f"  max gap {m['gap']:.1f} pp")
    med = lambda name, k: statistics.median(r[k] for r in rows[name])
    for k in ("named", "main", "handl", "gap"):
        o, p = med("edgeprof", k), med("perf", k)
        print(f"median {k:6}: edgeprof {o:5.1f}  perf {p:5.1f}  ratio {o / p if p else 0:.2f}")


main()
