#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Stack completeness on code without frame pointers: edgeprof beside `perf --call-graph dwarf`.

Each program runs once per repetition under both profilers at the same time:
  setarch -R perf record -e cpu-clock:u -F HZ --call-graph dwarf,STACK -- <program + edgeprof>
where edgeprof is libedgeprof.so preloaded (mode sigprof) or edgeprof-agent --sampler bpf
running system-wide during the program (mode bpf; its samples are those of the program's pid).

Every frame of both profiles, (file, file offset), is named by one resolver (stacks_elf.py):
the sized .symtab/.dynsym symbol covering it, else its unwind entry's start ("file+0xSTART").
Non-leaf frames are return addresses: they are looked up at address - 1. A chain is the
functions root -> leaf; it "reaches main" when it holds main or __libc_start_main (Debian's
stripped executables have no `main` symbol; a chain through __libc_start_main reached it).

Metric (per program): among edgeprof samples whose leaf function is the leaf of some perf chain
that reaches main, the share whose whole chain equals such a perf chain. perf samples taken
inside libedgeprof.so (our handler) are left out. Also printed: each profiler's share of
samples reaching main. Medians over the repetitions.

  stacks-bench.py sigprof|bpf [--build build/host-x86_64] [--reps 3] [--hz 999]
                  [--programs xz,gzip,python3,sqlite3,own] [--stack 16384] [--show N]
"""
import argparse
import collections
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stacks_elf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MAIN = {"main", "__libc_start_main"}

PY_LOOP = ("def f(n):\n s = 0\n for i in range(n):\n  s += i * i % 7\n return s\n"
           "def g(n):\n return f(n)\nprint(g({n}))")
SQL = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {n}) "
       "SELECT sum(x * x % 7) FROM c;")


def programs(tmp, build, scale):
    """name -> argv (stdin/stdout are files): each takes a few seconds of CPU here."""
    rnd = os.path.join(tmp, "random.bin")
    if not os.path.exists(rnd):
        with open(rnd, "wb") as f:
            f.write(os.urandom(int(6 * scale) << 20))
    own = os.path.join(tmp, "stacks-work")
    if not os.path.exists(own):
        subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-o", own,
                        os.path.join(HERE, "stacks-work.c")], check=True)
    return {
        "xz": ["xz", "-9", "-T1", "-c", rnd],
        "gzip": ["gzip", "-9", "-c", rnd, rnd, rnd, rnd, rnd, rnd],
        "python3": ["/usr/bin/python3", "-c", PY_LOOP.format(n=int(12e6 * scale))],
        "sqlite3": ["sqlite3", ":memory:", SQL.format(n=int(4e6 * scale))],
        "own": [own, str(int(8000 * scale))],
    }


# ---- reading the profiles --------------------------------------------------------------------

def chain_of(frames):
    """frames: [(path, file offset)] leaf first -> tuple of function ids root -> leaf."""
    out = []
    for i, (path, off) in enumerate(frames):
        out.append(stacks_elf.function(path, off if i == 0 else off - 1))
    return tuple(reversed(out))


def perf_chains(data, comm):
    """perf script: per sample a header line, then 'ip (dso)' lines innermost first; ip is the
    offset in the file (perf prints map-relative addresses for DWARF callchains)."""
    r = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,dso", "--no-inline"],
                       capture_output=True, text=True, timeout=1800)
    if r.returncode:
        raise RuntimeError(f"perf script: {r.stderr.strip()[-200:]}")
    out = r.stdout
    chains, cur, cur_comm = [], [], None
    for line in out.splitlines() + [""]:
        s = line.strip()
        if not line.startswith(("\t", " ")) or not s:
            if cur and cur_comm == comm and not any("libedgeprof" in p for p, _ in cur):
                chains.append(chain_of([(p, o) for p, o in cur if not p.startswith("[kernel")]))
            cur, cur_comm = [], (s.split()[0] if s else None)
            continue
        m = re.match(r"([0-9a-f]+) \((.*)\)$", s)
        if m:
            cur.append((m.group(2), int(m.group(1), 16)))
    return chains


def pprof_chains(path, pid=None):
    """Our pprof through `go tool pprof -raw` (the reference reader): each sample's chain, as
    many times as it counted (sample index 0 = samples/count)."""
    txt = subprocess.run(["go", "tool", "pprof", "-raw", "-symbolize=none", path],
                         capture_output=True, text=True, timeout=300).stdout
    sect, samples, locs, maps = None, [], {}, {}
    for line in txt.splitlines():
        if line in ("Samples:", "Locations", "Mappings"):
            sect = line
            continue
        if sect == "Samples:":
            m = re.match(r"\s+(\d+)\s+\d+: ([\d ]+)$", line)
            if m:
                samples.append([int(m.group(1)), [int(x) for x in m.group(2).split()], None])
            m = re.search(r"pid:\[(\d+)\]", line)
            if m and samples:
                samples[-1][2] = int(m.group(1))
        elif sect == "Locations":
            m = re.match(r"\s+(\d+): 0x([0-9a-f]+)(?: M=(\d+))?", line)
            if m:
                locs[int(m.group(1))] = (int(m.group(2), 16), int(m.group(3) or 0))
        elif sect == "Mappings":
            m = re.match(r"(\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) (\S+)", line)
            if m:
                maps[int(m.group(1))] = (int(m.group(2), 16), int(m.group(4), 16), m.group(5))
    chains = []
    for count, ids, spid in samples:
        if pid is not None and spid != pid:
            continue
        frames = []
        for lid in ids:
            addr, mid = locs[lid]
            if mid in maps and not maps[mid][2].startswith("[kernel"):  # user frames only
                start, off, path = maps[mid]
                frames.append((path, addr - start + off))
        chains += [chain_of(frames)] * count
    return chains


def reaches_main(ch):
    return any(f in MAIN for f in ch)


def compare(ours, perf, show=0):
    """(metric %, ours reaching main %, perf reaching main %, denominator)."""
    full = {c for c in perf if reaches_main(c)}
    leaves = {c[-1] for c in full}
    judged = [c for c in ours if c and c[-1] in leaves]
    good = [c for c in judged if c in full]
    if show:
        bad = collections.Counter(c for c in judged if c not in full)
        for c, n in bad.most_common(show):
            print(f"    {n:5d} x ours: {' > '.join(c)}")
            near = max(full, key=lambda p: (p[-1] == c[-1], len(os.path.commonprefix([p, c]))))
            print(f"          perf: {' > '.join(near)}")
    pct = lambda a, b: 100.0 * a / b if b else float("nan")  # noqa: E731
    return (pct(len(good), len(judged)), pct(sum(map(reaches_main, ours)), len(ours)),
            pct(sum(map(reaches_main, perf)), len(perf)), len(judged))


# ---- running --------------------------------------------------------------------------------

def run_one(mode, build, name, argv, hz, stack, tmp, rep):
    data = os.path.join(tmp, f"{name}-{rep}.data")
    ours = os.path.join(tmp, f"{name}-{rep}.pb.gz")
    env, agent = [], None
    if mode == "sigprof":
        env = ["env", "LD_PRELOAD=" + os.path.join(build, "libedgeprof.so"),
               "EDGEPROF_OUTPUT=" + ours, f"EDGEPROF_HZ={hz}"]
    else:
        outdir = os.path.join(tmp, f"agent-{name}-{rep}")
        os.makedirs(outdir)
        agent = subprocess.Popen([os.path.join(build, "edgeprof-agent"), "--once", "--seconds",
                                  "600", "--sampler", "bpf", "--hz", str(hz), "--output-dir",
                                  outdir], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 env=dict(os.environ, EDGEPROF_NO_MMAP_EVENTS="1"))
        time.sleep(2.0)  # programs loaded and attached
    with open(os.path.join(tmp, "out"), "wb") as out:
        # ASLR off: with it on, perf 6.1 here unwound no libc frame at all in some runs
        # (all samples of a run, also without edgeprof); -N -B: no shared build-id cache
        p = subprocess.Popen(["setarch", "-R", "perf", "record", "-q", "-N", "-B", "-e",
                              "cpu-clock:u", "-F", str(hz), "--call-graph", f"dwarf,{stack}",
                              "-o", data, "--"] + env + argv,
                             stdout=out, stderr=subprocess.PIPE)
        _, err = p.communicate(timeout=900)
    if p.returncode:
        raise RuntimeError(f"{name}: perf record: {err.decode()[-300:]}")
    pid = None
    if agent:
        # the program's pid: the one perf recorded (its comm lines)
        hdr = subprocess.run(["perf", "script", "-i", data, "-F", "pid", "--no-inline"],
                             capture_output=True, text=True).stdout.split()
        pid = int(hdr[0]) if hdr else -1
        agent.send_signal(signal.SIGINT)
        agent.communicate(timeout=120)
        files = [os.path.join(outdir, f) for f in os.listdir(outdir) if f.endswith(".pb.gz")]
        ours = files[0] if files else None
    comm = os.path.basename(argv[0])[:15]
    pc = perf_chains(data, comm)
    oc = pprof_chains(ours, pid) if ours else []
    os.unlink(data)
    return oc, pc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("sigprof", "bpf"))
    ap.add_argument("--build", default="build/host-x86_64")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--hz", type=int, default=999)
    ap.add_argument("--stack", type=int, default=16384, help="perf's stack dump, bytes")
    ap.add_argument("--scale", type=float, default=1.0, help="work per program")
    ap.add_argument("--programs", default="xz,gzip,python3,sqlite3,own")
    ap.add_argument("--show", type=int, default=0, help="print the N commonest mismatches")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="stacks-bench.")
    try:
        progs = programs(tmp, build, a.scale)
        print(f"mode {a.mode}, {a.hz} Hz, perf --call-graph dwarf,{a.stack}, {a.reps} reps "
              f"(medians)")
        print(f"{'program':<9} {'ours n':>7} {'judged':>7} {'match %':>8} "
              f"{'ours->main %':>13} {'perf->main %':>13} {'ours/perf':>10}")
        allm = []
        for name in a.programs.split(","):
            res = []
            for rep in range(a.reps):
                for attempt in range(3):
                    try:
                        oc, pc = run_one(a.mode, build, name, progs[name], a.hz, a.stack, tmp,
                                         f"{rep}.{attempt}")
                        break
                    except RuntimeError as e:
                        # perf 6.1 here sometimes dies reading its own data ("assertion
                        # failed at util/build-id.c:1010"): that run is taken again
                        print(f"  {name}: {e}; again", file=sys.stderr)
                else:
                    raise RuntimeError(f"{name}: perf failed 3 times")
                res.append((len(oc),) + compare(oc, pc, a.show if rep == 0 else 0))
            med = [statistics.median(x[i] for x in res) for i in range(5)]
            n, match, om, pm, judged = med
            allm.append(match)
            print(f"{name:<9} {n:>7.0f} {judged:>7.0f} {match:>8.1f} {om:>13.1f} {pm:>13.1f} "
                  f"{om / pm if pm else float('nan'):>10.3f}")
        print(f"median match over programs: {statistics.median(allm):.1f} %")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
