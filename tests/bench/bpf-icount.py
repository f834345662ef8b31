# SPDX-License-Identifier: MIT
"""Reads the console of tests/bench/bpf-icount.sh's VM and prints the per-sample cost table.

    bpf-icount.py CONSOLE HZ VARIANTS COMM

Markers (one run each): "@@task-clock NAME I MS" (the workload's), "@@prof-clock NAME I MS"
(the profiler's own), "@@samples NAME I N" (perf: the workload's samples, counted in the guest),
"@@bpf-stats NAME I NS RUNS" (BPF_STATS=1: a program's run time and count, our variants),
"@@pprof NAME I" + base64 + "@@end" (ours: the profile, counted here with go tool pprof),
"@@prof-window NAME I NS0 NS1 UP0 UP1" (the profiler's CPU and /proc/uptime when the workload
started and ended), "@@script NAME I all|comm MS" (perf: `perf script`'s task-clock over all
records, or unwinding only the workload's), "@@records NAME I N" (perf: records in its file).
"""
import base64
import collections
import os
import statistics
import sys
import tempfile

import pprof_traces as pt

# per run: the profiler's CPU (ns) and /proc/uptime at the workload's start and end; perf
# script's task-clock (ms) by (name, all|comm); records in perf's file; user frames a
# workload sample in perf script's output
WINDOW, SCRIPT, RECORDS, DEPTH = (collections.defaultdict(list) for _ in range(4))

def parse(path, comm):
    clock, prof, samples, logs, stats = (collections.defaultdict(list) for _ in range(5))
    WINDOW.clear(), SCRIPT.clear(), RECORDS.clear(), DEPTH.clear()
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
        elif tag == "@@prof-window" and len(w) == 7:
            WINDOW[w[1]].append(tuple(float(x) for x in w[3:]))
        elif tag == "@@script" and len(w) == 5:
            SCRIPT[(w[1], w[3])].append(float(w[4]))
        elif tag == "@@records" and len(w) == 4:
            RECORDS[w[1]].append(float(w[3]))
        elif tag == "@@depth" and len(w) == 4:
            DEPTH[w[1]].append(float(w[3]))
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
    whole = {}
    for sfx in ("", "@2"):
        if not clock["base" + sfx]:
            continue
        if sfx:
            print(f"\n== the longer workload (WORK2), names ending in {sfx}")
        names = [v + sfx for v in variants]
        base = statistics.median(clock["base" + sfx])
        cost_table(names, hz, clock["base" + sfx], clock, prof, samples, logs, stats)
        whole[sfx] = whole_table(names, base, clock, prof, samples)
    if "@2" in whole:
        marginal_table(variants, whole[""], whole["@2"])


def cost_table(variants, hz, alone, clock, prof, samples, logs, stats):
    """The workload's slowdown per sample (the in-kernel cost), as perf stat counts it."""
    base = statistics.median(alone)
    print(f"{'':24} {'workload task-clock ms':>24} {'samples':>8} {'per sample':>18} "
          f"{'profiler task-clock ms':>24}")
    print(f"{'alone':24} {base:10.2f} ({spread(alone):>11}) {'':>8}")
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
    ours = [v for v in variants if is_ours(v) and v in cost]
    perf = [v for v in variants if is_perf(v) and v in cost]
    for o in ours:
        for p in perf:
            print(f"{o}/{p} per-sample cost: {cost[o] / cost[p]:.2f}")


def is_ours(v):
    return v.split(":")[0].split("@")[0] in ("ours", "peer")


def is_perf(v):
    return v.split(":")[0].split("@")[0] == "perf"


def whole_table(variants, base, clock, prof, samples):
    """The whole cost of a workload sample, us (1 ns = 1 instruction): kernel (the workload's
    slowdown) + the profiler's CPU after its start-up (the window the workload ran in, then its
    finish at SIGINT) + post-processing (perf script over the workload's samples; ours: none,
    the agent's pprof is named). Start-up (ms) and the steady state (ms of CPU a second of
    the window, all of it at this rate on a busy CPU) apart. Returns per variant the medians
    of each part's total (ms) and of the samples, for marginal_table."""
    rows, totals = {}, {}
    for v in variants:
        n = len(clock[v])
        if not n or len(samples[v]) != n or len(WINDOW[v]) != n or len(prof[v]) != n:
            continue
        perf = is_perf(v)
        if perf and len(SCRIPT[(v, "comm")]) != n:
            continue
        r, t = collections.defaultdict(list), collections.defaultdict(list)
        for i in range(n):
            c0, c1, u0, u1 = WINDOW[v][i]
            t["samples"].append(samples[v][i])
            t["kernel"].append(clock[v][i] - base)
            t["window"].append((c1 - c0) / 1e6)
            t["finish"].append(max(prof[v][i] - c1 / 1e6, 0))
            t["post"].append(SCRIPT[(v, "comm")][i] if perf else 0.0)
            t["post_all"].append(SCRIPT[(v, "all")][i] if perf and SCRIPT[(v, "all")] else 0.0)
            t["startup"].append(c0 / 1e6)
            s = max(samples[v][i], 1)
            for k in ("kernel", "window", "finish", "post", "post_all"):
                r[k].append(t[k][-1] * 1e3 / s)
            r["whole"].append(r["kernel"][-1] + r["window"][-1] + r["finish"][-1] +
                              r["post"][-1])
            r["startup"].append(t["startup"][-1])
            r["steady"].append(t["window"][-1] / max(u1 - u0, 0.01))
        rows[v] = {k: statistics.median(x) for k, x in r.items()}
        rows[v]["spread"] = spread(r["whole"], 2)
        totals[v.split("@")[0]] = {k: statistics.median(x) for k, x in t.items()}
    if not rows:
        return totals
    print()
    print("whole cost of a workload sample, us (medians): kernel + profiler after start-up "
          "(window + finish) + post-processing")
    print(f"{'':24} {'kernel':>7} {'window':>7} {'finish':>7} {'post':>7} {'whole':>7} "
          f"{'(spread)':>13} {'start-up ms':>12} {'steady ms/s':>12} {'post all':>9}")
    for v, x in rows.items():
        print(f"{v:24} {x['kernel']:7.2f} {x['window']:7.2f} {x['finish']:7.2f} "
              f"{x['post']:7.2f} {x['whole']:7.2f} {x['spread']:>13} {x['startup']:12.1f} "
              f"{x['steady']:12.1f} {x['post_all']:9.2f}")
    for v in rows:
        if DEPTH[v]:
            print(f"{v}: perf script's user frames a workload sample {statistics.median(DEPTH[v]):.1f}")
    print("(post: perf script --comm <workload>, its samples unwound and named; post all: "
          "perf script over every record (also the idle CPU's before the workload), per "
          "workload sample; ours: the agent's named pprof is the product, no post-processing)")
    ratios({v: {**x, "after": x["window"] + x["finish"]} for v, x in rows.items()},
           "steady", "startup")
    return totals


def ratios(rows, *extra):
    for o in (v for v in rows if is_ours(v)):
        for p in (v for v in rows if is_perf(v)):
            a, b = rows[o], rows[p]
            more = "".join(f", {k} {a[k] / b[k]:.2f}" if b[k] else f", {k} -"
                           for k in extra)
            print(f"{o}/{p}: whole {a['whole'] / b['whole']:.2f}, profiler after start-up "
                  f"{a['after'] / b['after']:.2f}, with post-processing "
                  f"{a['after'] / (b['after'] + b['post']):.2f}{more}")


def marginal_table(variants, short, long):
    """Each part's growth from WORK to WORK2 over the samples' growth: what one more sample
    costs once every profiler has started, its one-time work (start-up, loading symbols,
    perf script's own start) cancelled."""
    rows = {}
    for v in variants:
        if v not in short or v not in long:
            continue
        a, b = short[v], long[v]
        dn = b["samples"] - a["samples"]
        if dn <= 0:
            continue
        rows[v] = {k: (b[k] - a[k]) * 1e3 / dn for k in ("kernel", "window", "finish", "post")}
        rows[v]["whole"] = sum(rows[v].values())
        rows[v]["after"] = rows[v]["window"] + rows[v]["finish"]
        rows[v]["dn"] = dn
    if not rows:
        return
    print("\nmarginal cost of a workload sample, us: (WORK2 - WORK) / (samples WORK2 - WORK), "
          "medians of each")
    print(f"{'':24} {'kernel':>7} {'window':>7} {'finish':>7} {'post':>7} {'whole':>7} "
          f"{'samples':>8}")
    for v, x in rows.items():
        print(f"{v:24} {x['kernel']:7.2f} {x['window']:7.2f} {x['finish']:7.2f} "
              f"{x['post']:7.2f} {x['whole']:7.2f} {x['dn']:8.0f}")
    ratios(rows)


if __name__ == "__main__":
    main()
