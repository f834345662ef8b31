# SPDX-License-Identifier: MIT
"""Reads a pprof through `go tool pprof -traces` (the reference reader, not ours) for tests.

    samples(path, index="cpu", symbolize=False, lines=False) -> [Sample]
    Sample: value (ns for cpu, bytes for *_space, count for samples), frames (leaf first), labels {k: v}
    (lines: each frame "name file:line", as -lines shows it)
    comments(path) -> [str]
"""
import os
import re
import subprocess

UNITS = {"B": 1, "ns": 1, "us": 1e3, "\u00b5s": 1e3, "ms": 1e6, "s": 1e9, "mins": 60e9, "hrs": 3600e9}


class Sample:
    def __init__(self, value, frames, labels):
        self.value, self.frames, self.labels = value, frames, labels

    @property
    def leaf(self):
        return self.frames[0] if self.frames else ""


def _value(tok):
    m = re.fullmatch(r"([0-9.]+)([A-Za-z\u00b5]*)", tok)
    if not m:
        raise ValueError("bad value %r" % tok)
    return float(m.group(1)) * UNITS.get(m.group(2), 1)


def _run(path, index, symbolize, env=None, lines=False):
    cmd = ["go", "tool", "pprof", "-traces", "-sample_index=" + index]
    if lines:
        cmd.append("-lines")
    if index in ("cpu", "wall", "offcpu"):
        cmd.append("-unit=ns")  # full precision
    elif index.endswith("_space"):
        cmd.append("-unit=B")
    if not symbolize:
        cmd.append("-symbolize=none")
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(cmd + [path], capture_output=True, text=True, env=e, timeout=300)
    if r.returncode != 0:  # say why at the end of the log, where CI shows it
        size = os.path.getsize(path) if os.path.exists(path) else -1
        raise RuntimeError("go tool pprof failed (exit %d) on %s (%d bytes): %s"
                           % (r.returncode, path, size, r.stderr.strip()[-600:]))
    return r.stdout


def samples(path, index="cpu", symbolize=False, env=None, lines=False):
    out = _run(path, index, symbolize, env, lines)
    blocks = out.split("-----------+-------------------------------------------------------")
    result = []
    for b in blocks[1:]:
        labels, frames, value = {}, [], None
        for line in b.splitlines():
            if not line.strip():
                continue
            m = re.match(r"^\s+(\S+):\s+(.*)$", line)
            if m and value is None:
                labels[m.group(1)] = m.group(2).strip()
                continue
            parts = line.split(None, 1)
            if value is None and re.match(r"^\s*[0-9.]+[A-Za-z\u00b5]*\s", line):
                value = _value(parts[0])
                frames.append(parts[1].strip() if len(parts) > 1 else "")
            else:
                frames.append(line.strip())
        if value is not None:
            result.append(Sample(value, frames, labels))
    return result


def header(path, index="cpu"):
    """The lines before the first trace: File:, comments, Type:, Duration:."""
    out = _run(path, index, False)
    return out.split("-----------+")[0].splitlines()


def shares(ss, names):
    tot = sum(s.value for s in ss if s.leaf in names)
    return {n: 100.0 * sum(s.value for s in ss if s.leaf == n) / max(tot, 1) for n in names}
