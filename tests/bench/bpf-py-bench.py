# SPDX-License-Identifier: MIT
"""CPython frames in the BPF sampler (bpf/python.h): what they cost. Run by bpf-py-bench.sh.

1. Per-sample cost of the BPF program (the kernel's own account, kernel.bpf_stats_enabled:
   run time and runs of do_sample, its tail calls included) on the samples of two Debian
   python3.11 processes running tests/workloads/pysplit.py, at 999 Hz, rows alternating:
     frames    the Python frames walked (the default)
     native    EDGEPROF_BPF_NO_PYTHON=1: the same sampler without them (native frames of the
               same stacks: the goal's "same sampler on native code of the same depth")
     filtered  --pid 1: no sample kept; the cost of a sample of another process, subtracted
               from the rows above (the machine's other processes run the program too)
   Prints per row and the medians, and python/native (the frames row's over the native's).
2. The agent (edgeprof-agent --sampler bpf --once, default settings) with N python3.11
   processes running (pysplit.py, CPU-bound): its peak RSS (VmHWM) and CPU time, with the
   Python frames and without (EDGEPROF_BPF_NO_PYTHON=1), alternating; the medians and ratios.
   The issue's goal: RSS <= 12 MiB with 20 Python processes.
No peer for Python frames: py-spy is not in Debian's archive; Debian's austin (1.0.1) predates
3.11's frame layout.
INTERP=lua (bpf-lua-bench.sh): the same for Lua 5.4's frames (bpf/lua.h): Debian's lua5.4
running tests/workloads/luasplit.lua, EDGEPROF_BPF_NO_LUA=1 for the native rows. No peer
either: no BPF profiler that walks PUC Lua's frames is in Debian's archive."""
import os
import re
import statistics
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("EP_BUILD", os.path.join(TOP, "build", "host-x86_64"))
PROBE = os.path.join(BUILD, "tests", "bpf-probe")
AGENT = os.path.join(BUILD, "edgeprof-agent")
INTERP = os.environ.get("INTERP", "python")
PY, WORK, NO_FRAMES = {
    "python": ("/usr/bin/python3.11", "pysplit.py", "EDGEPROF_BPF_NO_PYTHON"),
    "lua": ("/usr/bin/lua5.4", "luasplit.lua", "EDGEPROF_BPF_NO_LUA")}[INTERP]
WORK = os.path.join(TOP, "tests", "workloads", WORK)
REPS = int(os.environ.get("REPS", "3"))
SECONDS = float(os.environ.get("SECONDS_PER_RUN", "6"))
NPROCS = int(os.environ.get("NPROCS", "20"))
PHASES = os.environ.get("PHASES", "cost,agent").split(",")
STATS = "/proc/sys/kernel/bpf_stats_enabled"


def pythons(n, seconds, nice=0):
    """n pysplit.py processes; nice < 0 (root): they get the CPUs on a busy machine, so that
    most of the program's runs are their samples."""
    return [subprocess.Popen(["nice", "-n", str(nice), PY, WORK, str(seconds)],
                             stdout=subprocess.DEVNULL) for _ in range(n)]


def probe_row(variant):
    """(ns a kept sample costs, before subtraction; runs; kept samples; ns a run) of one row."""
    # (they outlive the probe, whose loading takes seconds on a busy machine; killed after)
    procs = pythons(2, SECONDS + 30, nice=-10) if variant != "filtered" else []
    pids = [str(p.pid) for p in procs] or ["1"]
    env = dict(os.environ)
    if variant == "native":
        env[NO_FRAMES] = "1"
    argv = [PROBE, "--seconds", str(SECONDS), "--hz", "999", "--quiet", "--python"]
    for p in pids:
        argv += ["--pid", p]
    time.sleep(0.5)
    r = subprocess.run(argv, env=env, capture_output=True, text=True)
    for p in procs:
        p.kill()
        p.wait()
    m = re.search(r"run_time_ns=(\d+) run_cnt=(\d+)", r.stderr)
    k = re.search(r"samples=(\d+) dropped_ringbuf=(\d+)", r.stderr)
    py = re.search(INTERP + r": .*program_samples=(\d+)", r.stderr)
    if not m or not k:
        sys.exit("bpf-probe: " + r.stderr.strip()[-400:])
    ns, runs = int(m.group(1)), int(m.group(2))
    # a sample the ring had no room for ran the program all the same
    kept = int(k.group(1)) + int(k.group(2))
    return ns, runs, kept, int(py.group(1)) if py else 0, int(k.group(2))


def cost_phase():
    try:
        with open(STATS) as f:
            old = f.read().strip()
        with open(STATS, "w") as f:
            f.write("1")
    except OSError as e:
        sys.exit(f"cannot enable {STATS}: {e}")
    rows = {"frames": [], "native": [], "filtered": []}
    try:
        for _ in range(REPS):
            for v in ("filtered", "frames", "native"):
                rows[v].append(probe_row(v))
    finally:
        with open(STATS, "w") as f:
            f.write(old)
    per_run_filtered = statistics.median(ns / max(runs, 1) for ns, runs, *_ in rows["filtered"])
    print(f"\n== BPF program per sample, 999 Hz, 2 {os.path.basename(PY)} "
          f"{os.path.basename(WORK)} (nice -10), "
          f"{SECONDS:.0f} s a row, "
          f"{REPS} alternating rows each; load {open('/proc/loadavg').read().split()[0]}")
    print(f"filtered (a sample of another process): {per_run_filtered:.0f} ns a run")
    # A python row's samples taken before the probe listed the processes (its first batch)
    # have no Python frames: they cost what a native row's do.
    med = {}
    for v in ("native", "frames"):
        costs = []
        for ns, runs, kept, walked, dropped in rows[v]:
            rest = ns - (runs - kept) * per_run_filtered
            if v == "frames":
                c = (rest - (kept - walked) * med["native"]) / max(walked, 1)
            else:
                c = rest / max(kept, 1)
            costs.append(c)
            print(f"{v:7} runs {runs:6d} kept {kept:5d} (ring full {dropped}) with {INTERP} frames "
                  f"{walked:5d} -> {c / 1000:6.2f} us a sample")
        med[v] = statistics.median(costs)
        print(f"{v:7} median {med[v] / 1000:.2f} us a sample")
    if med["native"] > 0:
        print(f"{INTERP}/native per-sample cost (medians): {med['frames'] / med['native']:.2f} "
              f"(goal <= 2)")


def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def agent_row(variant, tmp):
    procs = pythons(NPROCS, SECONDS + 60)  # killed once the agent is done
    env = dict(os.environ)
    if variant == "native":
        env[NO_FRAMES] = "1"
    time.sleep(1)
    out = os.path.join(tmp, variant)
    a = subprocess.Popen([AGENT, "--once", "--seconds", str(int(SECONDS)), "--sampler", "bpf",
                          "--output-dir", out], env=env, stderr=subprocess.PIPE, text=True)
    hwm = cpu = 0
    while a.poll() is None:
        hwm = max(hwm, status_kb(a.pid, "VmHWM"))
        cpu = max(cpu, cpu_s(a.pid))
        time.sleep(0.2)
    err = a.stderr.read()
    for p in procs:
        p.kill()
        p.wait()
    comment = ""
    for f in os.listdir(out) if os.path.isdir(out) else []:
        r = subprocess.run(["go", "tool", "pprof", "-comments", os.path.join(out, f)],
                           capture_output=True, text=True)
        comment = " ".join(w for w in r.stdout.split()
                           if w.startswith(("py_procs=", "py_spliced=", "lua_procs=", "lua_spliced=")))
    if a.returncode:
        sys.exit("agent: " + err[-400:])
    return hwm / 1024, cpu, comment


def agent_phase():
    import tempfile
    rows = {"frames": [], "native": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(REPS):
            for v in ("frames", "native"):
                rows[v].append(agent_row(v, os.path.join(tmp, str(i))))
    print(f"\n== edgeprof-agent --sampler bpf --once --seconds {SECONDS:.0f} (defaults) with "
          f"{NPROCS} {os.path.basename(PY)} {os.path.basename(WORK)} running; {REPS} alternating "
          f"rows each")
    med = {}
    for v in ("frames", "native"):
        for rss, cpu, c in rows[v]:
            print(f"{v:7} peak RSS {rss:5.1f} MiB  CPU {cpu:5.2f} s  {c}")
        med[v] = (statistics.median(r[0] for r in rows[v]), statistics.median(r[1] for r in rows[v]))
        print(f"{v:7} median peak RSS {med[v][0]:.1f} MiB, CPU {med[v][1]:.2f} s")
    print(f"{INTERP}/native: RSS {med['frames'][0] / med['native'][0]:.2f}, "
          f"CPU {med['frames'][1] / max(med['native'][1], 1e-9):.2f}; goal RSS <= 12 MiB: "
          f"{'met' if med['frames'][0] <= 12 else 'NOT met'}")


def main():
    if os.geteuid():
        sys.exit("needs root (BPF)")
    for f in (PROBE, AGENT, PY):
        if not os.access(f, os.X_OK):
            sys.exit(f"no {f}: make BOARD=host-x86_64 all-tests")
    v = subprocess.run([PY, "-v" if INTERP == "lua" else "--version"], capture_output=True,
                       text=True)
    print(f"{(v.stdout + v.stderr).strip().splitlines()[0]}, "
          f"{os.cpu_count()} CPUs, load {open('/proc/loadavg').read().split()[0]}")
    if "cost" in PHASES:
        cost_phase()
    if "agent" in PHASES:
        agent_phase()


if __name__ == "__main__":
    main()
