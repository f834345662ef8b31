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
samples reaching main, and "code-checked": our samples that reach main with every call edge
confirmed by the call instruction before its return address (judge_cross; the only check
under qemu-user, --arch arm64|armhf, where perf cannot look), and "self gap pp": the largest
gap between a function's self share in ours and in perf's, in percentage points, our samples
taken in the kernel left out (perf's cpu-clock:u has none; issue 35 asks for 2 pp at most),
beside "chance pp": twice the standard error of that difference between two samplings of the
same share (at 99 Hz a few-second program's gap is mostly chance: raise --hz or --scale).
Medians over the repetitions.

  stacks-bench.py sigprof|bpf [--arch x86_64|arm64|armhf] [--build build/host-x86_64] [--reps 3] [--hz 999]
                  [--programs xz,gzip,python3,sqlite3,own] [--stack 16384] [--show N]
                  [--agent-opt=--stack-entries=4096 ...]
Programs also: tools (200 short Debian tools: xz, gzip, sha256sum of 30-100 ms), subshells (a
bash script working in $(...)), openssl (speed sha256), ownssl (own, linked to libcrypto), node
(tests/workloads/jitsplit.js: JIT code without tables, frame pointers kept, in Debian's node;
perf's DWARF walk stops in JIT frames, so its "main" share is low there: read ours->main), perl
and lua5.4 (a loop in the interpreter). python3 in mode bpf: the agent puts the script's frames in
place of _PyEval_EvalFrameDefault's (issue 37), so "match" and "code-checked", which compare
native frames, do not apply there: read ours->main.

In mode bpf the program and perf run in a new cgroup v2 directory and the agent samples only it
(--bpf-cgroup), so what it does is the mix's, not the rest of this shared machine's (--system-wide:
the whole machine, as a gateway's agent runs). Mode bpf also prints the footprint (issue 35's goal: agent RSS <= 12 MiB, agent CPU <= 1/5 of
perf --call-graph dwarf on the same mix): the agent's CPU over its whole life (wait4: loading
the programs, the rounds, symbolizing and writing), the part of it that loading took (the
verifier's, once per start of a daemon that then runs for days: "load s"), perf record's own
CPU (not the program's), the ratios with and without the load, and the agent's peak RSS; per
program and over the mix.
"""
import argparse
import collections
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stacks_elf  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# node's main is `jmp node::Start` (Debian's node 20 on x86_64): no stack of it holds main, and
# glibc marks __libc_start_call_main, which called it, outermost: node::Start is its root
MAIN = {"main", "__libc_start_main", "_ZN4node5StartEiPPc"}
# The agent runs at its defaults (--agent-opt to change them): mmap records on, the stack table
# sized from the round (--once --seconds 600) and the rate. Before (issue 35) the bench gave it
# 64 Ki entries and EDGEPROF_NO_MMAP_EVENTS=1: the default 4096 filled with a parallel build's
# stacks in its first seconds (xz: 20 samples of ~13 000 kept).

PY_LOOP = ("def f(n):\n s = 0\n for i in range(n):\n  s += i * i % 7\n return s\n"
           "def g(n):\n return f(n)\nprint(g({n}))")
PERL_LOOP = "sub f {{ my $s = 0; $s += $_ * $_ % 7 for 1 .. $_[0]; $s }} print f({n}), qq(\\n);"
LUA_LOOP = ("local function f(n) local s = 0 for i = 1, n do s = s + i * i % 7 end return s end "
            "print(f({n}))")
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
    own_ssl = os.path.join(tmp, "stacks-work-ssl")
    if not os.path.exists(own_ssl):  # the same program, merely linked to Debian's libcrypto
        subprocess.run(["gcc", "-O2", "-fomit-frame-pointer", "-o", own_ssl,
                        os.path.join(HERE, "stacks-work.c"), "-Wl,--no-as-needed", "-lcrypto"],
                       check=True)
    small = {}
    for name, size in (("xz", 200_000), ("gz", 1_500_000), ("sha", 12_000_000)):
        small[name] = os.path.join(tmp, f"small-{name}.bin")
        if not os.path.exists(small[name]):
            with open(small[name], "wb") as f:
                f.write(os.urandom(int(size * scale)))
    # 200 short Debian tools of 30-100 ms each (CPU time here), one after the other
    tools = (f"for i in $(seq 67); do xz -6 -T1 -c {small['xz']} >/dev/null; "
             f"gzip -9 -c {small['gz']} >/dev/null; sha256sum {small['sha']} >/dev/null; done")
    # a shell script whose work is in command substitutions: each $(...) a fork of bash
    subsh = ("f() { local s=0 i; for ((i = 0; i < $1; i++)); do s=$((s + i * i % 7)); done; "
             "echo $s; }; for k in $(seq N); do x=$(f 3000); y=$(f ${#x}00); done"
             .replace("N", str(int(150 * scale))))
    return {
        "tools": ["bash", "-c", tools],
        "subshells": ["bash", "-c", subsh],
        "openssl": ["openssl", "speed", "-seconds", str(max(1, int(4 * scale))), "sha256"],
        "ownssl": [own_ssl, str(int(8000 * scale))],
        "node": ["node", os.path.join(HERE, "..", "workloads", "jitsplit.js"),
                 str(max(1, int(4 * scale)))],
        "xz": ["xz", "-9", "-T1", "-c", rnd],
        "gzip": ["gzip", "-9", "-c", rnd, rnd, rnd, rnd, rnd, rnd],
        "python3": ["/usr/bin/python3", "-c", PY_LOOP.format(n=int(12e6 * scale))],
        "sqlite3": ["sqlite3", ":memory:", SQL.format(n=int(4e6 * scale))],
        "own": [own, str(int(8000 * scale))],
        "perl": ["perl", "-e", PERL_LOOP.format(n=int(2e7 * scale))],
        "lua5.4": ["lua5.4", "-e", LUA_LOOP.format(n=int(8e7 * scale))],
    }


# ---- reading the profiles --------------------------------------------------------------------

def chain_of(frames):
    """frames: [(path, file offset)] leaf first -> tuple of function ids root -> leaf."""
    out = []
    for i, (path, off) in enumerate(frames):
        out.append(stacks_elf.function(path, off if i == 0 else off - 1))
    return tuple(reversed(out))


# The processes of a workload that are judged, by comm (default: the program's name)
COMMS = {"tools": {"xz", "gzip", "sha256sum"}, "subshells": {"bash"}}


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
            if cur and cur_comm in comm and not any("libedgeprof" in p for p, _ in cur):
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
    return [chain_of(f) for f in pprof_frames(path, pid)]


def pprof_frames(path, pid=None, comms=None, user_only=False):
    """Each sample's frames [(path, file offset)] leaf first, as many times as it counted.
    Frames past the leaf are return address - 1 (the agent steps back into the call). pid: a
    pid or a set of them; comms: the comms kept (None: any); user_only: without the samples
    taken in the kernel (perf's cpu-clock:u takes none there)."""
    return [f for f, _ in pprof_samples(path, pid, comms=comms, user_only=user_only)]


def pprof_samples(path, pid=None, main_thread=False, comms=None, user_only=False,
                  unwind="inferred"):
    """pprof_frames, each with whether the sample is labelled unwind=inferred (or the label
    value unwind names: "exact", the collector's snapshots); main_thread: only the samples of
    the process's first thread."""
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
                # count, location ids, pid, comm, inferred
                samples.append([int(m.group(1)), [int(x) for x in m.group(2).split()], None,
                                None, False])
            m = re.search(r"pid:\[(\d+)\]", line)
            if m and samples:
                samples[-1][2] = int(m.group(1))
            m = re.search(r"comm:\[([^\]]*)\]", line)
            if m and samples:
                samples[-1][3] = m.group(1)
            if f"unwind:[{unwind}]" in line and samples:
                samples[-1][4] = True
            m = re.search(r"thread:\[(\d+)\]", line)
            if m and samples and main_thread and int(m.group(1)) != samples[-1][2]:
                samples[-1][0] = 0  # another thread (the library's writer): left out
        elif sect == "Locations":
            m = re.match(r"\s+(\d+): 0x([0-9a-f]+)(?: M=(\d+))?", line)
            if m:
                locs[int(m.group(1))] = (int(m.group(2), 16), int(m.group(3) or 0))
        elif sect == "Mappings":
            m = re.match(r"(\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) (\S+)", line)
            if m:
                maps[int(m.group(1))] = (int(m.group(2), 16), int(m.group(4), 16), m.group(5))
    chains = []
    pids = pid if isinstance(pid, (set, frozenset)) or pid is None else {pid}
    for count, ids, spid, scomm, inferred in samples:
        if (pids is not None and spid not in pids) or (comms is not None and scomm not in comms):
            continue
        frames, kernel = [], False
        for lid in ids:
            addr, mid = locs[lid]
            if mid in maps and not maps[mid][2].startswith("[kernel"):  # user frames only
                start, off, path = maps[mid]
                frames.append((path, addr - start + off))
            kernel |= mid in maps and maps[mid][2].startswith("[kernel")
        if not (user_only and kernel):
            chains += [(frames, inferred)] * count
    return chains


def reaches_main(ch):
    return any(f in MAIN for f in ch)


def self_gap(ours, perf):
    """The largest gap, in percentage points, between a function's self share (the leaf of its
    samples) in ours and in perf's (issue 35: within 2 pp for each program), and the function."""
    share = lambda cs: collections.Counter(c[-1] for c in cs if c)  # noqa: E731
    o, p = share(ours), share(perf)
    no, np_ = sum(o.values()) or 1, sum(p.values()) or 1
    gaps = {f: abs(100.0 * o[f] / no - 100.0 * p[f] / np_) for f in set(o) | set(p)}
    f = max(gaps, key=gaps.get) if gaps else None
    if not f:
        return float("nan"), None, float("nan")
    # two samplings of one share differ by chance: twice the standard error of the difference
    q = (o[f] + p[f]) / (no + np_)
    noise = 200.0 * (q * (1 - q) * (1 / no + 1 / np_)) ** 0.5
    return gaps[f], f, noise


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


# ---- other architectures, under qemu-user ----------------------------------------------------

CROSS = {
    "arm64": {"triple": "aarch64-linux-gnu", "qemu": "qemu-aarch64", "board": "gateway-arm64",
              "cc": ["aarch64-linux-gnu-gcc", "-O2", "-fomit-frame-pointer"]},
    "armhf": {"triple": "arm-linux-gnueabihf", "qemu": "qemu-arm", "board": "gateway-armv7",
              "cc": ["arm-linux-gnueabihf-gcc", "-O2", "-fomit-frame-pointer", "-mthumb",
                     "-funwind-tables"]},
}
# Debian's programs for the target, downloaded and unpacked (never installed) into
# build/bench-<arch>: apt-get download needs the architecture added (tools/setup.sh does).
DEBS = ("xz-utils liblzma5 gzip sqlite3 libsqlite3-0 libreadline8 libtinfo6 python3.11-minimal "
        "libexpat1 zlib1g").split()


def cross_root(top, arch):
    root = os.path.join(top, "build", f"bench-{arch}")
    if not os.path.exists(os.path.join(root, ".complete")):
        debs = os.path.join(root, "debs")
        os.makedirs(debs, exist_ok=True)
        subprocess.run(["apt-get", "download", "-qq", "-o", "APT::Sandbox::User=root"] +
                       [f"{p}:{arch}" for p in DEBS], cwd=debs, check=True)
        for d in os.listdir(debs):
            subprocess.run(["dpkg", "-x", os.path.join(debs, d), root], check=True)
        open(os.path.join(root, ".complete"), "w").close()
    return root


def cross_programs(tmp, root, arch, scale):
    c = CROSS[arch]
    rnd = os.path.join(tmp, "random.bin")
    if not os.path.exists(rnd):
        with open(rnd, "wb") as f:
            f.write(os.urandom(int(scale * (1 << 20))))
    own = os.path.join(tmp, f"stacks-work-{arch}")
    subprocess.run(c["cc"] + ["-o", own, os.path.join(HERE, "stacks-work.c")], check=True)
    binp = lambda n: next(p for p in (f"{root}/usr/bin/{n}", f"{root}/bin/{n}")  # noqa: E731
                          if os.path.exists(p))
    return {
        "xz": [binp("xz"), "-9", "-T1", "-c", rnd],
        "gzip": [binp("gzip"), "-9", "-c", rnd, rnd, rnd],
        "python3": [binp("python3.11"), "-c", PY_LOOP.format(n=int(1e6 * scale))],
        "sqlite3": [binp("sqlite3"), ":memory:", SQL.format(n=int(3e5 * scale))],
        "own": [own, str(int(400 * scale))],
    }


def run_cross(top, arch, root, argv, hz, tmp, tag, labels=False, lib=None):
    """The program under qemu-user with the board's libedgeprof.so: its samples' frames
    (labels: with whether each is labelled unwind=inferred; and the profile's comments)."""
    c = CROSS[arch]
    t = c["triple"]
    out = os.path.join(tmp, f"{tag}.pb.gz")
    libs = ":".join([f"{root}/usr/lib/{t}", f"{root}/lib/{t}",
                     f"{top}/build/sysroot-{arch}/usr/lib/{t}"])
    cmd = [c["qemu"], "-L", f"/usr/{t}", "-E", f"LD_LIBRARY_PATH={libs}",
           "-E", "LD_PRELOAD=" + (lib or f"{top}/build/{c['board']}/libedgeprof.so"),
           "-E", f"EDGEPROF_OUTPUT={out}", "-E", f"EDGEPROF_HZ={hz}"] + argv
    with open(os.path.join(tmp, "out"), "wb") as o:
        subprocess.run(cmd, stdout=o, stderr=subprocess.PIPE, check=True, timeout=1800)
    if labels:
        com = subprocess.run(["go", "tool", "pprof", "-comments", out], capture_output=True,
                             text=True).stdout
        return pprof_samples(out, main_thread=True), com
    return pprof_frames(out)


def tables(frame, ra):
    e = stacks_elf.elf(frame[0])
    va = e.vaddr(frame[1]) if e else None
    return va is not None and e.has_tables(va & ~1)


def judge_cross(frames_list, show=0):
    """(verified %, reached main %, judged, samples): a sample is verified when its chain
    reaches main and every caller's call instruction calls its callee (stacks_elf.edge_ok:
    the compiler's call graph read back from the code). Samples short of main whose leaf is
    in code without unwind tables, or whose walk ended in such code, are not judged (Debian
    armhf C code has none: gcc emits .ARM.exidx for C only with -funwind-tables)."""
    judged = verified = reached = 0
    bad = collections.Counter()
    for fr in frames_list:
        ch = chain_of(fr)
        main = reaches_main(ch)
        reached += main
        if not main and (not fr or not (tables(fr[0], False) and tables(fr[-1], len(fr) > 1))):
            continue  # short of main: no user frame, or in code without tables (the leaf, or
            # where it ended)
        judged += 1
        # our pprof holds return address - 1 (as perf does): the call is before + 1
        ok = main and all(stacks_elf.edge_ok((fr[i][0], fr[i][1] + 1), fr[i - 1])
                          for i in range(1, len(fr)))
        verified += ok
        if not ok:
            bad[ch] += 1
    for c, n in bad.most_common(show):
        print(f"    {n:5d} x {' > '.join(c)}")
    pct = lambda a, b: 100.0 * a / b if b else float("nan")  # noqa: E731
    return pct(verified, judged), pct(reached, len(frames_list)), judged, len(frames_list)


def main_cross(a, top):
    root = cross_root(top, a.arch)
    tmp = tempfile.mkdtemp(prefix="stacks-bench.")
    try:
        progs = cross_programs(tmp, root, a.arch, a.scale)
        print(f"arch {a.arch} under {CROSS[a.arch]['qemu']} (qemu-user), sigprof, {a.hz} Hz, "
              f"{a.reps} reps (medians); peer: the call instructions (edge_ok), no perf here")
        print(f"{'program':<9} {'ours n':>7} {'judged':>7} {'verified %':>11} {'->main %':>9}")
        allv = []
        for name in a.programs.split(","):
            res = []
            for rep in range(a.reps):
                fl = run_cross(top, a.arch, root, progs[name], a.hz, tmp, f"{name}-{rep}")
                res.append(judge_cross(fl, a.show if rep == 0 else 0))
            v, m, j, n = (statistics.median(x[i] for x in res) for i in range(4))
            allv.append(v)
            print(f"{name:<9} {n:>7.0f} {j:>7.0f} {v:>11.1f} {m:>9.1f}")
        allv = [v for v in allv if v == v]  # programs with nothing judged: nan
        if allv:
            print(f"median verified over programs: {statistics.median(allv):.1f} %")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- armv7: code without unwind tables (issue 36) --------------------------------------------

# Code without unwind tables, as firmware builds it (issue 36), per mode: the qemu-user arch,
# the compiler, the flags without and with tables. armv7: Debian's default is Thumb-2 without
# -funwind-tables. arm64: gcc emits .eh_frame unless told not to; firmware built for size tells
# it (-fno-asynchronous-unwind-tables -fno-unwind-tables), without frame pointers.
NOTABLES = {
    "armv7": dict(arch="armhf", cc=["arm-linux-gnueabihf-gcc", "-O2"], notables=[],
                  tables=["-funwind-tables"], strip="arm-linux-gnueabihf-strip"),
    "arm64": dict(arch="arm64", cc=["aarch64-linux-gnu-gcc", "-O2", "-fomit-frame-pointer"],
                  notables=["-fno-asynchronous-unwind-tables", "-fno-unwind-tables"], tables=[],
                  strip="aarch64-linux-gnu-strip"),
}


def notables_programs(tmp, root, scale, mode="armv7"):
    """name -> (argv, {run path: path to name its frames by}). own: stacks-work.c built -O2
    without and with unwind tables (NOTABLES), run stripped and named through the unstripped
    copy; xz: Debian's xz and liblzma for the arch, stripped."""
    m = NOTABLES[mode]
    rnd = os.path.join(tmp, "random.bin")
    with open(rnd, "wb") as f:
        f.write(os.urandom(int(scale * (1 << 20))))
    out = {}
    for name, flags in (("own-notables", m["notables"]), ("own-tables", m["tables"])):
        full = os.path.join(tmp, name + ".full")
        run = os.path.join(tmp, name)
        subprocess.run(m["cc"] + flags + ["-o", full, os.path.join(HERE, "stacks-work.c")],
                       check=True)
        subprocess.run([m["strip"], "-o", run, full], check=True)
        out[name] = ([run, str(int(3000 * scale))], {run: full})
    xz = next(p for p in (f"{root}/usr/bin/xz", f"{root}/bin/xz") if os.path.exists(p))
    out["xz"] = ([xz, "-9", "-T1", "-c", rnd], {})
    return out


def armv7_programs(tmp, root, scale):
    return notables_programs(tmp, root, scale, "armv7")


def judge_armv7(samples, names, show=0):
    """Per run: samples, % reaching main, % labelled inferred, and among the edges (caller's
    return address -> callee) of inferred samples the % whose call instruction calls the
    callee (stacks_elf.edge_ok, read from the unstripped copy; edges in files without
    symbols cannot be judged: counted apart), and the chains reaching main."""
    n = reach = inf = edges = ok = unjudged = 0
    chains, bad, pairs = collections.Counter(), collections.Counter(), collections.Counter()
    for fr, inferred in samples:
        fr = [(names.get(p, p), o) for p, o in fr]
        ch = chain_of(fr)
        n += 1
        main = reaches_main(ch)
        reach += main
        inf += inferred
        if main:
            chains[ch] += 1
        for i in range(1, len(ch)):
            pairs[(ch[i - 1], ch[i])] += 1
        if not inferred:
            continue
        for i in range(1, len(fr)):
            callee = stacks_elf.elf(fr[i - 1][0])
            va = callee.vaddr(fr[i - 1][1]) if callee else None
            if va is None or callee.start(va & ~1) is None:
                unjudged += 1  # no symbol names the callee's function: its start unknown
                continue
            edges += 1
            good = stacks_elf.edge_ok((fr[i][0], fr[i][1] + 1), fr[i - 1])
            ok += good
            if not good:
                bad[(ch[-i - 1], ch[-i])] += 1
    for (a, b), k in bad.most_common(show):
        print(f"    {k:5d} x edge {a} -> {b} not a call")
    pct = lambda a, b: 100.0 * a / b if b else float("nan")  # noqa: E731
    return dict(n=n, main=pct(reach, n), inferred=pct(inf, n), edges=edges,
                edges_ok=pct(ok, edges), unjudged=unjudged, chains=chains, pairs=pairs)


def same_pairs(ours, ref):
    """% of ours' caller -> callee function pairs (each frame's, weighted by samples) that a
    run of the -funwind-tables build also saw: frames right one by one, whatever the rest of
    the chain (a whole chain can be missing from the reference runs by chance: qsort's
    recursion depth varies)."""
    total = sum(ours.values())
    return 100.0 * sum(k for p, k in ours.items() if p in ref) / total if total else float("nan")


def same_chains(ours, ref):
    """% of ours' samples reaching main whose whole chain (function names, leaf included) a
    run of the -funwind-tables build also saw: the same call chains, found without tables."""
    total = sum(ours.values())
    return 100.0 * sum(k for c, k in ours.items() if c in ref) / total if total else float("nan")


def main_armv7(a, top):
    """armv7 or arm64 (a.mode): code without unwind tables against the same built with them."""
    arch = NOTABLES[a.mode]["arch"]
    root = cross_root(top, arch)
    tmp = tempfile.mkdtemp(prefix="stacks-bench.")
    try:
        progs = notables_programs(tmp, root, a.scale, a.mode)
        print(f"{a.build}/libedgeprof.so")
        print(f"{a.mode} under {CROSS[arch]['qemu']} (qemu-user), sigprof, {a.hz} Hz, "
              f"{a.reps} reps (medians); peer: the call instructions (edge_ok) and a build "
              "with tables; no perf here")
        print(f"{'program':<13} {'n':>6} {'->main %':>9} {'inferred %':>11} {'edges':>7} "
              f"{'edges ok %':>11} {'same chains %':>14} {'same frames %':>14} "
              f"{'handler p50 us (qemu)':>22}")
        runs = {}
        for name in ("own-tables", "own-notables", "xz"):
            if name.split("-")[0] not in a.programs.split(",") and name not in a.programs:
                continue
            argv, names = progs[name]
            res = []
            for rep in range(a.reps):
                smp, com = run_cross(top, arch, root, argv, a.hz, tmp, f"{name}-{rep}", True,
                                     os.path.join(os.path.abspath(a.build), "libedgeprof.so"))
                r = judge_armv7(smp, names, a.show if rep == 0 else 0)
                m = re.search(r"handler_ns_p50=(\d+)", com)
                r["p50"] = int(m.group(1)) / 1000 if m else float("nan")
                res.append(r)
            runs[name] = res
            med = lambda k: statistics.median(r[k] for r in res)  # noqa: E731
            same = samef = float("nan")
            if name == "own-notables" and "own-tables" in runs:
                ref = set().union(*(r["chains"] for r in runs["own-tables"]))
                same = statistics.median(same_chains(r["chains"], ref) for r in res)
                refp = set().union(*(r["pairs"] for r in runs["own-tables"]))
                samef = statistics.median(same_pairs(r["pairs"], refp) for r in res)
            print(f"{name:<13} {med('n'):>6.0f} {med('main'):>9.1f} {med('inferred'):>11.1f} "
                  f"{med('edges'):>7.0f} {med('edges_ok'):>11.1f} {same:>14.1f} {samef:>14.1f} "
                  f"{med('p50'):>22.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ---- running --------------------------------------------------------------------------------

def proc_cpu(pid):
    """A process's own CPU seconds so far (not its children's), or None: its threads' run time
    in ns (schedstat), where /proc/PID/stat counts clock ticks (10 ms: the agent's CPU over
    200 short tools, after its load, is 40-80 ms)."""
    try:
        total = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            m = re.search(rf"^{field}:\s+(\d+)", f.read(), re.M)
    except OSError:
        return None
    return int(m.group(1)) if m else None


def proc_anon_kib(pid):
    """A process's anonymous resident memory (RssAnon, KiB): its own memory, without the page
    cache of the files it maps (the agent maps programs to read their .eh_frame)."""
    return proc_status_kib(pid, "RssAnon")


def proc_hwm_kib(pid):
    """The peak RSS of the process's program (VmHWM, KiB). Not wait4's ru_maxrss: that keeps
    the forked Python's RSS from before the exec (14-28 MiB here, all of it the bench's)."""
    return proc_status_kib(pid, "VmHWM")


class Watch(threading.Thread):
    """The peak of fn(pid), read every 20 ms until the process is gone. For perf's CPU its final
    flush after the program ends is not counted, which favours perf in the ratio."""

    def __init__(self, pid, fn):
        super().__init__(daemon=True)
        self.pid, self.fn, self.peak = pid, fn, 0

    def run(self):
        while True:
            v = self.fn(self.pid)
            if v is None:
                return
            self.peak = max(self.peak, v)
            time.sleep(0.02)


def wait_loaded(pid, limit=30.0):
    """Waits until the agent's programs are loaded and attached, and returns the CPU seconds
    that took: the verifier's, once per start of a daemon that then runs for days. Loaded: its
    CPU has stopped climbing (under 10 ms in a 200 ms window, twice), at least 1 s after the
    start; a 2.0 s sleep before this stood for it, and was short on a loaded machine."""
    t0, last, calm = time.monotonic(), proc_cpu(pid) or 0.0, 0
    while time.monotonic() - t0 < limit:
        time.sleep(0.2)
        now = proc_cpu(pid)
        if now is None:
            break
        calm = calm + 1 if now - last < 0.01 else 0
        last = now
        if calm >= 2 and time.monotonic() - t0 >= 1.0:
            break
    return last


def stop_agent(agent):
    """SIGINT, then the agent's whole life in CPU seconds, from wait4: its start (loading the
    programs) and its last round (symbolizing, writing) included."""
    agent.send_signal(signal.SIGINT)
    err = []
    reader = threading.Thread(target=lambda: err.append(agent.stderr.read()), daemon=True)
    reader.start()
    _, status, ru = os.wait4(agent.pid, 0)  # the RssAnon watch ends with the process
    agent.returncode = os.waitstatus_to_exitcode(status)
    reader.join(timeout=10)
    return ru.ru_utime + ru.ru_stime, (err[0] if err else b"")


# per run in mode bpf: (program, agent cpu s, perf record cpu s, perf script cpu s,
# agent peak RSS (VmHWM) KiB, agent peak RssAnon KiB; both polled every 20 ms)
FOOT = []
# bpf: the cgroup v2 directory the program and perf run in, the agent's --bpf-cgroup (None:
# the agent samples the whole machine, --system-wide)
CGROUP = None


def mix_cgroup():
    """A new cgroup v2 directory for the mix, so the agent's work (and its footprint) is the
    mix's, not that of whatever else this shared machine runs; None where v2 is not writable."""
    with open("/proc/mounts") as f:
        root = next((ln.split()[1] for ln in f if ln.split()[2] == "cgroup2"), None)
    if not root or not os.access(os.path.join(root, "cgroup.procs"), os.W_OK):
        return None
    cg = os.path.join(root, f"edgeprof-stacks-bench-{os.getpid()}")
    os.makedirs(cg, exist_ok=True)
    return cg


def drop_cgroup(cg):
    root = os.path.dirname(cg)
    try:
        with open(os.path.join(cg, "cgroup.procs")) as f:
            for pid in f.read().split():
                with open(os.path.join(root, "cgroup.procs"), "w") as r:
                    r.write(pid)
        os.rmdir(cg)
    except OSError as e:
        print(f"  cgroup {cg}: {e}", file=sys.stderr)


def join_cgroup():
    """preexec_fn: perf (and the program it starts) into the mix's cgroup."""
    with open(os.path.join(CGROUP, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))


def run_one(mode, build, name, argv, hz, stack, tmp, rep, show=0, agent_opts=()):
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
                                  outdir] + (["--bpf-cgroup", CGROUP] if CGROUP else []) +
                                 list(agent_opts), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
        anon, hwm = Watch(agent.pid, proc_anon_kib), Watch(agent.pid, proc_hwm_kib)
        anon.start()
        hwm.start()
        load = wait_loaded(agent.pid)
    with open(os.path.join(tmp, "out"), "wb") as out:
        # ASLR off: with it on, perf 6.1 here unwound no libc frame at all in some runs
        # (all samples of a run, also without edgeprof); -N -B: no shared build-id cache
        p = subprocess.Popen(["setarch", "-R", "perf", "record", "-q", "-N", "-B", "-e",
                              "cpu-clock:u", "-F", str(hz), "--call-graph", f"dwarf,{stack}",
                              "-o", data, "--"] + env + argv,
                             stdout=out, stderr=subprocess.PIPE,
                             preexec_fn=join_cgroup if agent and CGROUP else None)
        watch = Watch(p.pid, proc_cpu)
        watch.start()
        _, err = p.communicate(timeout=900)
        watch.join(timeout=5)
    if p.returncode:
        raise RuntimeError(f"{name}: perf record: {err.decode()[-300:]}")
    pid = None
    if agent:
        # the program's pids: those perf recorded (its children too)
        hdr = subprocess.run(["perf", "script", "-i", data, "-F", "pid", "--no-inline"],
                             capture_output=True, text=True).stdout.split()
        pid = {int(x) for x in hdr} or {-1}
        acpu, aerr = stop_agent(agent)
        anon.join(timeout=1)
        hwm.join(timeout=1)
        files = [os.path.join(outdir, f) for f in os.listdir(outdir) if f.endswith(".pb.gz")]
        ours = files[0] if files else None
        com = subprocess.run(["go", "tool", "pprof", "-comments", ours], capture_output=True,
                             text=True).stdout if ours else ""
        drops = {k: int(v) for k, v in re.findall(r"\b(dropped_\w+)=(\d+)", com) if int(v)}
        if drops:  # a profile short of samples is not judged silently
            print(f"  {name}: the agent dropped samples: {drops}", file=sys.stderr)
        if show:  # what the agent counted: the profile's comments, its log
            print(f"  agent {name} rep {rep}: {len(pid)} pids\n    " +
                  "\n    ".join(com.splitlines() + aerr.decode().splitlines()[-10:]))
    comm = COMMS.get(name, {os.path.basename(argv[0])[:15]})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    pc = perf_chains(data, comm)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if agent:  # perf script: what perf needs to turn its record into unwound stacks
        script = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        FOOT.append((name, acpu, watch.peak, script, hwm.peak, anon.peak, load))
    # samples with user frames: perf's cpu-clock:u takes none in the kernel, the agent does
    # (a process in exec or exit has no user stack)
    oc = [f for f in pprof_frames(ours, pid, comm) if f] if ours else []
    ou = [f for f in pprof_frames(ours, pid, comm, user_only=True) if f] if ours else []
    os.unlink(data)
    return oc, pc, ou


def footprint_line(name, runs):
    a, rec, scr, load = (statistics.median(r[i] for r in runs) for i in (1, 2, 3, 6))
    rss, anon = (max(r[i] for r in runs) / 1024 for i in (4, 5))
    both, nan = rec + scr, float("nan")
    print(f"{name:<9} {a:>8.2f} {load:>7.2f} {rec:>8.2f} {scr:>8.2f} "
          f"{a / rec if rec else nan:>9.2f} {(a - load) / rec if rec else nan:>10.2f} "
          f"{a / both if both else nan:>12.3f} {rss:>8.1f} {anon:>9.1f}")


def print_footprint():
    """The agent (system-wide, its whole life) against perf: record (its own CPU, not the
    program's) and script (unwinding and naming what record copied), per program and over the
    whole mix (sums); the agent's peak RSS and RssAnon (its own memory, without the page cache of
    the files it maps)."""
    print(f"{'footprint':<9} {'agent s':>8} {'load s':>7} {'record s':>8} {'script s':>8} "
          f"{'ag/rec':>9} {'(ag-ld)/rec':>10} {'ag/(rec+scr)':>12} {'rss MiB':>8} "
          f"{'anon MiB':>9}")
    by = collections.defaultdict(list)
    for r in FOOT:
        by[r[0]].append(r)
    for name, runs in by.items():
        footprint_line(name, runs)
    if len(by) > 1:
        reps = max(len(v) for v in by.values())
        mix = [("mix",) + tuple(sum(r[i] for r in FOOT) / reps for i in (1, 2, 3)) +
               tuple(max(r[i] for r in FOOT) for i in (4, 5)) +
               (sum(r[6] for r in FOOT) / reps,)]
        footprint_line("mix", mix)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("sigprof", "bpf", "armv7", "arm64"))
    ap.add_argument("--build", default="build/host-x86_64")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--hz", type=int, default=999)
    ap.add_argument("--stack", type=int, default=16384, help="perf's stack dump, bytes")
    ap.add_argument("--scale", type=float, default=1.0, help="work per program")
    ap.add_argument("--programs", default="xz,gzip,python3,sqlite3,own")
    ap.add_argument("--show", type=int, default=0, help="print the N commonest mismatches")
    ap.add_argument("--agent-opt", action="append", default=[],
                    help="bpf: an option for edgeprof-agent (default: none, its defaults)")
    ap.add_argument("--system-wide", action="store_true",
                    help="bpf: the agent samples the whole machine (default: only the mix's "
                         "cgroup, --bpf-cgroup, so its footprint is the mix's)")
    ap.add_argument("--arch", default="x86_64", choices=("x86_64", "arm64", "armhf"),
                    help="arm64/armhf: under qemu-user with the gateway board's build (sigprof)")
    a = ap.parse_args()
    if a.mode in NOTABLES:
        if a.programs == ap.get_default("programs"):
            a.programs = "own,xz"
        return main_armv7(a, os.path.abspath(os.path.join(HERE, "..", "..")))
    if a.arch != "x86_64":
        if a.mode != "sigprof":
            sys.exit("under qemu-user only sigprof runs (no bpf() there)")
        return main_cross(a, os.path.abspath(os.path.join(HERE, "..", "..")))
    build = os.path.abspath(a.build)
    tmp = tempfile.mkdtemp(prefix="stacks-bench.")
    global CGROUP
    CGROUP = mix_cgroup() if a.mode == "bpf" and not a.system_wide else None
    try:
        progs = programs(tmp, build, a.scale)
        print(f"mode {a.mode}, {a.hz} Hz, perf --call-graph dwarf,{a.stack}, {a.reps} reps "
              f"(medians)")
        print(f"{'program':<9} {'ours n':>7} {'judged':>7} {'match %':>8} "
              f"{'ours->main %':>13} {'perf->main %':>13} {'ours/perf':>10} "
              f"{'code-checked %':>15} {'self gap pp':>11} {'chance pp':>9}")
        allm = []
        for name in a.programs.split(","):
            res = []
            for rep in range(a.reps):
                for attempt in range(5):
                    try:
                        oc, pc, ou = run_one(a.mode, build, name, progs[name], a.hz, a.stack, tmp,
                                         f"{rep}.{attempt}", a.show, a.agent_opt)
                        break
                    except RuntimeError as e:
                        # perf 6.1 here sometimes dies reading its own data ("assertion
                        # failed at util/build-id.c:1010", more often while other profilers
                        # run on the machine): that run is taken again
                        print(f"  {name}: {str(e).splitlines()[0]}; again", file=sys.stderr)
                else:
                    print(f"  {name}: perf failed 5 times: repetition left out", file=sys.stderr)
                    continue
                ours_chains = [chain_of(f) for f in oc]
                gap, gap_fn, noise = self_gap([chain_of(f) for f in ou], pc)
                res.append((len(oc),) + compare(ours_chains, pc, a.show if rep == 0 else 0) +
                           (judge_cross(oc)[0], gap, noise))
                if a.show and rep == 0 and gap_fn:
                    print(f"    largest self-share gap: {gap:.2f} pp in {gap_fn} (chance: "
                          f"{noise:.2f} pp)")
            if not res:
                print(f"{name:<9} (perf failed every time)")
                continue
            med = [statistics.median(x[i] for x in res) for i in range(8)]
            n, match, om, pm, judged, checked, gap, noise = med
            allm.append(match)
            print(f"{name:<9} {n:>7.0f} {judged:>7.0f} {match:>8.1f} {om:>13.1f} {pm:>13.1f} "
                  f"{om / pm if pm else float('nan'):>10.3f} {checked:>15.1f} {gap:>11.2f} "
                  f"{noise:>9.2f}")
        if allm:
            print(f"median match over programs: {statistics.median(allm):.1f} %")
        if FOOT:
            print_footprint()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if CGROUP:
            drop_cgroup(CGROUP)


if __name__ == "__main__":
    main()
