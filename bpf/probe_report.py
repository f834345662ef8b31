# SPDX-License-Identifier: MIT
"""Reads bpf-probe output and names user addresses of a non-PIE binary with nm(1).

Used by tests/integration/bpf-*.test.sh and tests/bench/bpf-bench.sh (an independent oracle:
nm's symbol table, not our symbolizer).
"""
import bisect
import subprocess


class Sample:
    __slots__ = ("pid", "tid", "comm", "user", "kernel")

    def __init__(self, pid, tid, comm, user, kernel):
        self.pid, self.tid, self.comm, self.user, self.kernel = pid, tid, comm, user, kernel


def load(path):
    """Samples from a bpf-probe stdout file. user: addresses root first; kernel: names."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            head, _, _count = line.rpartition(" ")
            pid, tid, rest = head.split(" ", 2)
            parts = rest.split(";")
            user = [int(p[2:], 16) for p in parts[1:] if p.startswith("u:")]
            kernel = [p[2:] for p in parts[1:] if p.startswith("k:")]
            out.append(Sample(int(pid), int(tid), parts[0], user, kernel))
    return out


def labels(path):
    """{pid: {key: value}} from the "#first" lines (values without spaces)."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#first "):
                parts = line.split()
                out[int(parts[1])] = dict(p.split("=", 1) for p in parts[3:] if "=" in p)
    return out


def first_seen(path):
    """{pid: alive} from the "#first <pid> <alive>" lines."""
    out = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#first "):
                _, pid, alive = line.split()[:3]
                out[int(pid)] = alive == "1"
    return out


class Nm:
    """Function symbols of one binary (its link-time addresses: build it -no-pie)."""

    def __init__(self, binary):
        text = subprocess.run(["nm", "-S", "--defined-only", binary], check=True,
                              capture_output=True, text=True).stdout
        syms = []
        for line in text.splitlines():
            f = line.split()
            if len(f) == 4 and f[2] in "tTwW":
                syms.append((int(f[0], 16), int(f[1], 16), f[3]))
        syms.sort()
        self.starts = [s[0] for s in syms]
        self.syms = syms

    def name(self, addr):
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        start, size, name = self.syms[i]
        return name if addr < start + max(size, 1) else None

    def frames(self, sample):
        """Names of the user frames, root first; return addresses looked up at addr-1."""
        names = []
        last = len(sample.user) - 1
        for i, a in enumerate(sample.user):
            names.append(self.name(a if i == last else a - 1))
        return names

    def leaf(self, sample):
        """The innermost frame of the binary (its own code, not libc's)."""
        for n in reversed(self.frames(sample)):
            if n:
                return n
        return None


SPLIT = (("work_a", 50), ("work_b", 30), ("work_c", 20))


def split_shares_ok(leaf, tol):
    """Prints each work_ function's share of the three (leaf: a Counter of leaf names) against
    the workload's known 50/30/20 split; True when every share is within tol points."""
    work = sum(leaf[f] for f, _ in SPLIT)
    ok = True
    for f, want in SPLIT:
        got = 100.0 * leaf[f] / max(work, 1)
        print(f"  {f}: {got:5.1f}% (want {want} ±{tol})")
        ok &= abs(got - want) <= tol
    return ok
