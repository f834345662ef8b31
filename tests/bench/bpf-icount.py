# SPDX-License-Identifier: MIT
"""Reads the console of tests/bench/bpf-icount.sh's VM and prints the per-sample cost table.

    bpf-icount.py CONSOLE HZ VARIANTS COMM

Markers (one run each): "@@task-clock NAME I MS" (the workload's), "@@prof-clock NAME I MS"
(the profiler's own), "@@samples NAME I N" (perf: the workload's samples, counted in the guest),
"@@bpf-stats NAME I NS RUNS" (BPF_STATS=1: a program's run time and count, our variants),
"@@pprof NAME I" + base64 + "@@end" (ours: the profile, counted here with go tool pprof).
"""
import base64
import collections
import os
import statistics
import sys
import tempfile

import pprof_traces as pt

def parse(path, comm):
    clock, prof, samples, logs, stats = (collections.defaultdict(list) for _ in range(5))
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        w = lines[i].split()
        tag = w[0] if w else ""
        if tag in ("@@task-clock", "@@prof-clock", "@@samples") and len(w) == 4:
            {"@@task-clock": clock, "@@prof-clock": prof, "@@samples": samples}[tag][w[1]].append(
                float(w[3]))
        elif tag == "@@bpf-stats" and len(w) == 5:
            # the sampling program and (CFI) its walker, which it tail-calls: their time
            # together over the sampling program's runs (the one that runs most often when
            # the walker takes few runs a sample; else both are printed)
            stats[w[1]].append((float(w[3]), float(w[4])))
        elif tag == "@@pprof" and len(w) == 3:
            j = lines.index("@@end", i)
            samples[w[1]].append(count_samples("".join(lines[i + 1:j]), comm))
            i = j
        elif tag == "@@log" or tag == "@@error":
            logs[w[1] if len(w) > 1 else ""].append(lines[i])
        i += 1
    return clock, prof, samples, logs, stats


def count_samples(b64, comm):
    """The workload's samples in one of our profiles (the comm label names it)."""
    if not b64:
        return 0  # no profile written: it had no samples at all
    with tempfile.NamedTemporaryFile(suffix=".pb.gz", delete=False) as f:
        f.write(base64.b64decode(b64))
    try:
        ss = pt.samples(f.name, index="samples")
    finally:
        os.unlink(f.name)
    return sum(s.value for s in ss if s.labels.get("comm", "").strip("[]") == comm)


def spread(xs, digits=2):
    return f"{min(xs):.{digits}f}-{max(xs):.{digits}f}" if len(xs) > 1 else "one run"


def main():
    console, hz, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
    clock, prof, samples, logs, stats = parse(console, sys.argv[4][:15])  # the kernel's comm length
    if not clock["base"]:
        sys.exit("no base runs in the console")
    base = statistics.median(clock["base"])
    print(f"{'':24} {'workload task-clock ms':>24} {'samples':>8} {'per sample':>18} "
          f"{'profiler task-clock ms':>24}")
    print(f"{'alone':24} {base:10.2f} ({spread(clock['base']):>11}) {'':>8}")
    cost = {}
    for v in variants:
        if not clock[v] or not samples[v]:
            print(f"{v:24} no complete run")
            continue
        c, n = statistics.median(clock[v]), statistics.median(samples[v])
        per = [(x - base) * 1e3 / max(s, 1) for x, s in zip(clock[v], samples[v])]
        cost[v] = statistics.median(per)
        p = statistics.median(prof[v]) if prof[v] else float("nan")
        print(f"{v:24} {c:10.2f} ({spread(clock[v]):>11}) {n:8.0f} "
              f"{cost[v]:7.3f} us ({spread(per, 3)}) {p:10.1f}")
        if stats[v]:
            for t, r in stats[v]:
                print(f"{'':24} BPF program: {t / 1e3 / max(r, 1):.3f} us a run, {r:.0f} runs, "
                      f"{t / 1e6:.1f} ms (kernel.bpf_stats_enabled)")
        for line in logs[v][:3]:
            print("    " + line)
    print(f"(per sample: the workload's slowdown over its samples; 1 ns = 1 guest instruction; "
          f"{hz} Hz)")
    ours = [v for v in variants if v.split(":")[0] in ("ours", "peer") and v in cost]
    perf = [v for v in variants if v.split(":")[0] == "perf" and v in cost]
    for o in ours:
        for p in perf:
            print(f"{o}/{p} per-sample cost: {cost[o] / cost[p]:.2f}")


if __name__ == "__main__":
    main()
