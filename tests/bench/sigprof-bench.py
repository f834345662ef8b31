#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""libedgeprof.so beside gperftools' SIGPROF profiler (same workload, same run, interleaved).

For each frequency (99, 1000, 4999 Hz) and each profiler, N repetitions of a fixed amount of
work (tests/workloads/split --rounds R): the process's CPU time (getrusage), peak RSS, and the
samples the profile holds. Reported, as medians:
  per-sample cost = (CPU with the profiler - CPU without) / samples in the profile
  added RSS       = peak RSS with the profiler - without
  cpu accounted   = profile's cpu total / getrusage CPU (gperftools counts 1/frequency each)
  shares          = work_a/b/c share of cpu in each profile, beside `perf record -g`'s
plus edgeprof-agent's peak RSS while it drains one producer (--sampler sigprof).
gperftools is injected with env directly before the target, not around a wrapper.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads"))
import pprof_traces as pt  # noqa: E402

GPERF = "/usr/lib/x86_64-linux-gnu/libprofiler.so.0"


def run(cmd, env=None):
    """time(1) -> env(1) -> target: the preload reaches the target (env execs it) and not the
    process that measures. Returns (cpu_ns printed by the workload, peak RSS in KiB)."""
    pre = ["env"] + [f"{k}={v}" for k, v in (env or {}).items()]
    r = subprocess.run(["/usr/bin/time", "-f", "maxrss=%M"] + pre + cmd, capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd}: {r.stderr[-500:]}")
    cpu = int(re.search(r"cpu_ns=(\d+)", r.stdout).group(1))
    rss = int(re.search(r"maxrss=(\d+)", r.stderr).group(1))
    return cpu, rss


def gperf_profile(split, path):
    """(samples, cpu ns, shares) of a gperftools profile read by go tool pprof."""
    out = subprocess.run(["go", "tool", "pprof", "-traces", "-sample_index=samples", split, path],
                         capture_output=True, text=True, timeout=300).stdout
    tmpf = path + ".pb.gz"
    subprocess.run(["go", "tool", "pprof", "-proto", "-output", tmpf, split, path],
                   capture_output=True, timeout=300)
    ss = pt.samples(tmpf, index="cpu", symbolize=False)
    n = sum(s.value for s in pt.samples(tmpf, index="samples", symbolize=False))
    return n, sum(s.value for s in ss), pt.shares(ss, ("work_a", "work_b", "work_c"))


HANDLER = []
PERF_COMPLETE = []


def ours_profile(path):
    for line in pt.header(path):
        m = re.search(r"handler_ns_p50=(\d+)", line)
        if m:
            HANDLER.append(int(m.group(1)))
    ss = pt.samples(path)
    n = sum(s.value for s in pt.samples(path, index="samples"))
    return n, sum(s.value for s in ss), pt.shares(ss, ("work_a", "work_b", "work_c"))


def perf_attributed(cmd, env, dsos, tmp, tag):
    """perf record -F 20000 (hrtimer cpu-clock: not tick-limited) of the profiled run; returns
    the CPU seconds perf attributes to the profiler's own libraries (user space)."""
    data = os.path.join(tmp, f"attr-{tag}.data")
    pre = ["env"] + [f"{k}={v}" for k, v in env.items()]
    r = subprocess.run(["perf", "record", "-F", "20000", "-e", "cpu-clock", "-o", data, "--"] +
                       pre + cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return None
    out = subprocess.run(["perf", "report", "-i", data, "--sort", "dso", "--stdio",
                          "--show-nr-samples"], capture_output=True, text=True,
                         timeout=300).stdout
    n = 0
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and not line.startswith("#") and any(d in parts[2] for d in dsos):
            n += int(parts[1])
    return n / 20000.0


def completeness(ss):
    """Share of the cpu in work_a/b/c whose stack keeps the leaf's caller (run_split)."""
    work = [x for x in ss if x.leaf in ("work_a", "work_b", "work_c")]
    full = sum(x.value for x in work if len(x.frames) > 1 and x.frames[1] == "run_split")
    return 100.0 * full / max(sum(x.value for x in work), 1)


def perf_shares(split, rounds, tmp):
    data = os.path.join(tmp, "perf.data")
    r = subprocess.run(["perf", "record", "-g", "-F", "999", "-o", data, "--", split,
                        "--rounds", str(rounds)], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return None
    out = subprocess.run(["perf", "script", "-i", data, "-F", "ip,sym"], capture_output=True,
                         text=True, timeout=300).stdout
    leaves, stacks, cur = {}, [], []
    for line in out.splitlines() + [""]:
        if not line.strip():
            if cur:
                stacks.append(cur)
            cur = []
            continue
        cur.append(line.strip().split()[-1])
    for st in stacks:
        leaves[st[0]] = leaves.get(st[0], 0) + 1
    work = [st for st in stacks if st[0] in ("work_a", "work_b", "work_c")]
    tot = len(work)
    res = {f: 100.0 * leaves.get(f, 0) / max(tot, 1) for f in ("work_a", "work_b", "work_c")}
    PERF_COMPLETE.append(100.0 * sum(1 for st in work if len(st) > 1 and st[1] == "run_split")
                         / max(tot, 1))
    return res


def agent_rss(build, split, tmp):
    reg, out = os.path.join(tmp, "reg"), os.path.join(tmp, "out")
    os.makedirs(reg, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    agent = subprocess.Popen(["/usr/bin/time", "-f", "maxrss=%M", os.path.join(build, "edgeprof-agent"),
                              "--sampler", "sigprof", "--once", "--seconds", "5", "--registry", reg,
                              "--output-dir", out], stderr=subprocess.PIPE, text=True)
    e = dict(os.environ, LD_PRELOAD=os.path.join(build, "libedgeprof.so"), EDGEPROF_REGISTRY=reg,
             EDGEPROF_HZ="999")
    subprocess.run([split, "--seconds", "6", "--threads", "2"], env=e, capture_output=True)
    err = agent.communicate(timeout=60)[1]
    return int(re.search(r"maxrss=(\d+)", err).group(1))


def frameless(lib, have_gperf, reps, tmp):
    """Debian's xz -9 -T1 (liblzma, xz and libc without frame pointers: every frame by the
    unwind tables) at 999 Hz: our handler's median time, and the per-sample cost of both
    profilers by perf attribution (their own libraries' CPU / their samples), same run."""
    rnd = os.path.join(tmp, "random.bin")
    with open(rnd, "wb") as f:
        f.write(os.urandom(6 << 20))
    cmd = ["xz", "-9", "-T1", "-k", "-f", rnd]  # writes random.bin.xz: stdout stays quiet
    handler, costs, depth = [], {}, []
    for rep in range(reps):
        p = os.path.join(tmp, f"xz-{rep}.pb.gz")
        env = {"LD_PRELOAD": lib, "EDGEPROF_OUTPUT": p, "EDGEPROF_HZ": "999"}
        # the handler's own clock, in a run without perf (whose 20 kHz sampling would
        # stretch it), then the attribution run
        subprocess.run(["env"] + [f"{k}={v}" for k, v in env.items()] + cmd, check=True,
                       capture_output=True, timeout=900)
        for line in pt.header(p):
            m = re.search(r"handler_ns_p50=(\d+)", line)
            if m:
                handler.append(int(m.group(1)))
        cpu = perf_attributed(cmd, env, ["libedgeprof"], tmp, f"xzo{rep}")
        ss = pt.samples(p, index="samples")
        n = sum(x.value for x in ss)
        depth.append(sum(x.value * len(x.frames) for x in ss) / max(n, 1))
        if cpu is not None:
            costs.setdefault("edgeprof", []).append(cpu / max(n, 1))
        if have_gperf:
            g = os.path.join(tmp, f"xz-gperf-{rep}.prof")
            cpu = perf_attributed(cmd, {"LD_PRELOAD": GPERF, "CPUPROFILE": g,
                                        "CPUPROFILE_FREQUENCY": "999"},
                                  ["libprofiler", "libunwind"], tmp, f"xzg{rep}")
            if cpu is not None:
                costs.setdefault("gperftools", []).append(cpu / gperf_profile("/usr/bin/xz",
                                                                              g)[0])
    line = (f"xz -9 -T1 (no frame pointers), 999 Hz, {reps} reps: edgeprof handler median "
            f"{statistics.median(handler)} ns, {statistics.median(depth):.1f} frames/sample; "
            f"per-sample cost (perf-attributed):")
    med = {k: statistics.median(v) * 1e6 for k, v in costs.items()}
    for k, v in med.items():
        line += f" {k} {v:.2f} us"
    if "edgeprof" in med and med.get("gperftools"):
        line += f"; ours/peer {med['edgeprof'] / med['gperftools']:.2f}"
    print(line)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build/host-x86_64")
    ap.add_argument("--rounds", type=int, default=2000, help="split rounds (~2.3 s CPU here)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--hz", default="99,1000,4999")
    ap.add_argument("--xz-reps", type=int, default=3,
                    help="runs of the frameless xz comparison (0: none)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    split = os.path.join(build, "tests/workloads/split")
    lib = os.path.join(build, "libedgeprof.so")
    have_gperf = os.path.exists(GPERF)
    tmp = tempfile.mkdtemp(prefix="sigprof-bench.")
    try:
        cmd = [split, "--rounds", str(a.rounds)]
        print(f"workload: split --rounds {a.rounds} (1 thread); {a.reps} repetitions, medians")
        print(f"{'Hz':>5} {'profiler':<10} {'cpu s':>7} {'samples':>8} {'cost us':>8} "
              f"{'+RSS KiB':>9} {'cpu acct':>8}  shares a/b/c")
        results = {}
        for hz in [int(h) for h in a.hz.split(",")]:
            rows = {"none": [], "edgeprof": [], "gperftools": []}
            for rep in range(a.reps):
                rows["none"].append(run(cmd) + (None,))
                p = os.path.join(tmp, f"ours-{hz}-{rep}.pb.gz")
                c, r = run(cmd, {"LD_PRELOAD": lib, "EDGEPROF_OUTPUT": p, "EDGEPROF_HZ": str(hz)})
                rows["edgeprof"].append((c, r, ours_profile(p)))
                if have_gperf:
                    g = os.path.join(tmp, f"gperf-{hz}-{rep}.prof")
                    c, r = run(cmd, {"LD_PRELOAD": GPERF, "CPUPROFILE": g,
                                     "CPUPROFILE_FREQUENCY": str(hz)})
                    rows["gperftools"].append((c, r, gperf_profile(split, g)))
            base_cpu = statistics.median(x[0] for x in rows["none"])
            base_rss = statistics.median(x[1] for x in rows["none"])
            print(f"{hz:>5} {'none':<10} {base_cpu/1e9:>7.3f} {'':>8} {'':>8} {base_rss:>9}")
            for name in ("edgeprof", "gperftools"):
                if not rows[name]:
                    continue
                cpu = statistics.median(x[0] for x in rows[name])
                costs = [(x[0] - base_cpu) / max(x[2][0], 1) / 1e3 for x in rows[name]]
                cost = statistics.median(costs)
                rss = statistics.median(x[1] for x in rows[name]) - base_rss
                n = statistics.median(x[2][0] for x in rows[name])
                acct = statistics.median(x[2][1] / x[0] for x in rows[name])
                sh = {f: statistics.median(x[2][2][f] for x in rows[name])
                      for f in ("work_a", "work_b", "work_c")}
                results[(hz, name)] = (cost, rss, acct, sh)
                print(f"{hz:>5} {name:<10} {cpu/1e9:>7.3f} {n:>8.0f} {cost:>8.2f} {rss:>9.0f} "
                      f"{acct:>8.3f}  {sh['work_a']:.1f}/{sh['work_b']:.1f}/{sh['work_c']:.1f}")
            if (hz, "gperftools") in results:
                o, g = results[(hz, "edgeprof")], results[(hz, "gperftools")]
                print(f"{hz:>5} ours/peer: per-sample cost {o[0]/g[0] if g[0] > 0 else float('nan'):.2f}, "
                      f"added RSS {o[1]/g[1] if g[1] > 0 else float('nan'):.2f}, "
                      f"cpu accounted {o[2]:.3f} vs {g[2]:.3f}")
        if HANDLER:
            print(f"edgeprof handler time per sample (unwind + ring write, vDSO clock inside "
                  f"the handler, median of quarter-octave buckets (older libraries: log2); "
                  f"excludes the kernel's signal delivery): "
                  f"{statistics.median(HANDLER)} ns")
        ps = perf_shares(split, a.rounds, tmp) if shutil.which("perf") else None
        if ps:
            print("perf record -g -F 999 shares a/b/c: "
                  f"{ps['work_a']:.1f}/{ps['work_b']:.1f}/{ps['work_c']:.1f}")
            for (hz, name), (_, _, _, sh) in sorted(results.items()):
                d = max(abs(sh[f] - ps[f]) for f in ps)
                print(f"  {name} at {hz} Hz: max |share - perf's| = {d:.2f} pp")
        # per-sample cost by attribution: slowdown is below the noise (the tick limits samples)
        if shutil.which("perf"):
            for hz in (1000, 4999):
                line = f"per-sample cost at {hz} Hz (perf-attributed CPU in the profiler's own " \
                       f"libraries / its samples, median of {a.reps}):"
                costs = {}
                for rep in range(a.reps):
                    p = os.path.join(tmp, f"attr-ours-{hz}-{rep}.pb.gz")
                    cpu = perf_attributed(cmd, {"LD_PRELOAD": lib, "EDGEPROF_OUTPUT": p,
                                                "EDGEPROF_HZ": str(hz)}, ["libedgeprof"], tmp,
                                          f"o{hz}{rep}")
                    if cpu is not None:
                        costs.setdefault("edgeprof", []).append(cpu / ours_profile(p)[0])
                    if have_gperf:
                        g = os.path.join(tmp, f"attr-gperf-{hz}-{rep}.prof")
                        cpu = perf_attributed(cmd, {"LD_PRELOAD": GPERF, "CPUPROFILE": g,
                                                    "CPUPROFILE_FREQUENCY": str(hz)},
                                              ["libprofiler", "libunwind"], tmp, f"g{hz}{rep}")
                        if cpu is not None:
                            costs.setdefault("gperftools", []).append(
                                cpu / gperf_profile(split, g)[0])
                med = {k: statistics.median(v) * 1e6 for k, v in costs.items()}
                for k, v in med.items():
                    line += f" {k} {v:.2f} us"
                if "edgeprof" in med and med.get("gperftools"):
                    line += f"; ours/peer {med['edgeprof'] / med['gperftools']:.2f}"
                print(line)
        # stack completeness: the leaf's caller, in ours (both unwinders) and gperftools'
        c_cmd = [split, "--rounds", str(max(a.rounds // 4, 100))]
        line = "stack completeness (leaf's caller present), 1 kHz:"
        for mode in ("cfi", "fp"):
            p = os.path.join(tmp, f"compl-{mode}.pb.gz")
            run(c_cmd, {"LD_PRELOAD": lib, "EDGEPROF_OUTPUT": p, "EDGEPROF_HZ": "1000",
                        "EDGEPROF_UNWIND": mode})
            line += f" edgeprof({mode}) {completeness(pt.samples(p)):.1f}%"
        if have_gperf:
            g = os.path.join(tmp, "compl-gperf.prof")
            run(c_cmd, {"LD_PRELOAD": GPERF, "CPUPROFILE": g, "CPUPROFILE_FREQUENCY": "1000"})
            subprocess.run(["go", "tool", "pprof", "-proto", "-output", g + ".pb.gz", split, g],
                           capture_output=True, timeout=300)
            line += f" gperftools {completeness(pt.samples(g + '.pb.gz')):.1f}%"
        if PERF_COMPLETE:
            line += f" perf -g {PERF_COMPLETE[0]:.1f}%"
        print(line)
        print(f"edgeprof-agent peak RSS (draining one 2-thread producer at 999 Hz, sigprof only): "
              f"{agent_rss(build, split, tmp)} KiB")
        print(f"libedgeprof.so size: {os.path.getsize(lib)} bytes")
        if a.xz_reps:
            frameless(lib, have_gperf, a.xz_reps, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
