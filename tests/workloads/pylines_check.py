# SPDX-License-Identifier: MIT
"""Judges the lines of tests/workloads/pylines.py's frames in a pprof (read by go tool pprof
-traces -lines): of the samples of PID under hot(), the share whose hot() frame is on a line
marked HOT, and whose main() frame is on the line marked CALL. Exits 1 below MIN percent, or
with under MIN_SECONDS of samples under hot().
Usage: pylines_check.py PROFILE SCRIPT PID MIN MIN_SECONDS"""
import sys

import pprof_traces as pt


def marked(script, mark):
    return {i + 1 for i, l in enumerate(open(script)) if l.rstrip().endswith("# " + mark)}


def line_of(frames, func):
    """The line of the leaf-most frame of func ("func file:line"), or None."""
    for f in frames:
        name, _, where = f.partition(" ")
        if name == func and ":" in where:
            return int(where.rsplit(":", 1)[1])
    return None


def main():
    path, script, pid, least, secs = sys.argv[1:6]
    hot, call = marked(script, "HOT"), marked(script, "CALL")
    ss = [s for s in pt.samples(path, lines=True) if s.labels.get("pid") == pid]
    under = [s for s in ss if line_of(s.frames, "hot") is not None]
    tot = sum(s.value for s in under) or 1
    on_hot = 100 * sum(s.value for s in under if line_of(s.frames, "hot") in hot) / tot
    on_call = 100 * sum(s.value for s in under if line_of(s.frames, "main") in call) / tot
    seen = {}
    for s in under:
        seen[line_of(s.frames, "hot")] = seen.get(line_of(s.frames, "hot"), 0) + s.value
    print(f"pid {pid}: {tot / 1e9:.2f} s under hot(); hot() on its HOT lines {sorted(hot)} "
          f"{on_hot:.1f}%, main() on its CALL line {sorted(call)} {on_call:.1f}%; hot()'s lines: " +
          " ".join(f"{k}:{100 * v / tot:.1f}%" for k, v in sorted(seen.items(), key=str)))
    for l in pt.header(path):
        if "python names" in l:
            print(l.strip())
    ok = tot >= float(secs) * 1e9 and on_hot >= float(least) and on_call >= float(least)
    sys.exit(0 if ok else 1)


main()
