# SPDX-License-Identifier: MIT
"""Node.js JavaScript frames in the BPF sampler (bpf/v8.h): what they cost. Run by
bpf-v8-bench.sh.

Per-sample cost of the BPF program (the kernel's own account, BPF_ENABLE_STATS held by the
probe for its run: run time and runs of do_sample, its tail calls included) on the samples of two node processes (no
flag) running tests/workloads/v8split.js, at 999 Hz, rows alternating:
  v8        the JavaScript frames walked (the default)
  native    EDGEPROF_BPF_NO_V8=1: the same sampler without them (native frames of the same
            stacks: the issue's "same sampler on native code of the same depth")
  filtered  --pid 1: no sample kept; the cost of a sample of another process, subtracted from
            the rows above (the machine's other processes run the program too)
Prints per row and the medians, and v8/native. No peer in the same run: the OpenTelemetry
eBPF profiler, the one that walks V8 frames without perf maps, is in neither Debian's archive
nor npm; perf names JavaScript only from a perf map (--perf-basic-prof: tests/bench/jit-bench.sh).
NODE=path picks the node (default: node on PATH); NODE_ROOT=build/node18-root runs that
root's node 18 with its libnode.so.108."""
import os
import re
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("EP_BUILD", os.path.join(TOP, "build", "host-x86_64"))
PROBE = os.path.join(BUILD, "tests", "bpf-probe")
WORK = os.path.join(TOP, "tests", "workloads", "v8split.js")
REPS = int(os.environ.get("REPS", "3"))
SECONDS = float(os.environ.get("SECONDS_PER_RUN", "6"))
ROOT = os.environ.get("NODE_ROOT", "")
NODE = ([os.path.join(ROOT, "usr/bin/node")] if ROOT else [os.environ.get("NODE", "node")])
ENV = dict(os.environ)
if ROOT:
    ENV["LD_LIBRARY_PATH"] = os.path.join(ROOT, "usr/lib/x86_64-linux-gnu")


def nodes(n, seconds):
    """n v8split.js processes at nice -10 (root): they get the CPUs on a busy machine, so that
    most of the program's runs are their samples."""
    return [subprocess.Popen(["nice", "-n", "-10"] + NODE + [WORK, str(seconds)], env=ENV,
                             stdout=subprocess.DEVNULL, cwd="/tmp") for _ in range(n)]


def probe_row(variant):
    """(ns, runs, kept samples, samples with JavaScript frames, ring drops) of one row."""
    procs = nodes(2, SECONDS + 30) if variant != "filtered" else []
    pids = [str(p.pid) for p in procs] or ["1"]
    env = dict(os.environ)
    env["EDGEPROF_PROBE_STATS"] = "1"  # held on for the row, whatever others do to the sysctl
    if variant == "native":
        env["EDGEPROF_BPF_NO_V8"] = "1"
    argv = [PROBE, "--seconds", str(SECONDS), "--hz", "999", "--quiet", "--v8"]
    for p in pids:
        argv += ["--pid", p]
    time.sleep(0.5)
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    for p in procs:
        p.kill()
        p.wait()
    m = re.search(r"run_time_ns=(\d+) run_cnt=(\d+)", r.stderr)
    k = re.search(r"samples=(\d+) dropped_ringbuf=(\d+)", r.stderr)
    js = re.search(r"v8: .*program_samples=(\d+) program_frames=(\d+)", r.stderr)
    if not m or not k:
        sys.exit("bpf-probe: " + r.stderr.strip()[-400:])
    ns, runs = int(m.group(1)), int(m.group(2))
    kept = int(k.group(1)) + int(k.group(2))  # a sample the ring had no room for ran all the same
    return (ns, runs, kept, int(js.group(1)) if js else 0, int(js.group(2)) if js else 0,
            int(k.group(2)))


def main():
    if os.geteuid():
        sys.exit("needs root (BPF)")
    if not os.access(PROBE, os.X_OK):
        sys.exit(f"no {PROBE}: make BOARD=host-x86_64 all-tests")
    ver = subprocess.run(NODE + ["-p", "process.version + ' V8 ' + process.versions.v8"],
                         env=ENV, capture_output=True, text=True).stdout.strip()
    print(f"node {ver}, {os.cpu_count()} CPUs, load {open('/proc/loadavg').read().split()[0]}")
    rows = {"v8": [], "native": [], "filtered": []}
    for _ in range(REPS):
        for v in ("filtered", "v8", "native"):
            rows[v].append(probe_row(v))
    per_run_filtered = statistics.median(r[0] / max(r[1], 1) for r in rows["filtered"])
    print(f"\n== BPF program per sample, 999 Hz, 2 node v8split.js (nice -10), "
          f"{SECONDS:.0f} s a row, {REPS} alternating rows each")
    print(f"filtered (a sample of another process): {per_run_filtered:.0f} ns a run")
    # A v8 row's samples without JavaScript frames (before the probe listed the processes, or
    # in C++ and the collector) cost what a native row's do: only the walked ones are priced.
    med = {}
    for v in ("native", "v8"):
        costs = []
        for ns, runs, kept, walked, frames, dropped in rows[v]:
            rest = ns - (runs - kept) * per_run_filtered
            if v == "v8":
                c = (rest - (kept - walked) * med["native"]) / max(walked, 1)
            else:
                c = rest / max(kept, 1)
            costs.append(c)
            print(f"{v:7} runs {runs:6d} kept {kept:5d} (ring full {dropped}) with JavaScript "
                  f"frames {walked:5d} ({frames / max(walked, 1):4.1f} a sample) -> "
                  f"{c / 1000:6.2f} us a sample")
        med[v] = statistics.median(costs)
        print(f"{v:7} median {med[v] / 1000:.2f} us a sample")
    if med["native"] > 0:
        print(f"v8/native per-sample cost (medians): {med['v8'] / med['native']:.2f} (goal <= 2)")


if __name__ == "__main__":
    main()
