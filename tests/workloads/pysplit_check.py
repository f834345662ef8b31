# SPDX-License-Identifier: MIT
"""Checks a profile of pysplit.py (read by go tool pprof -traces) against the script's own CPU
accounting, and prints the figures: the share of samples naming a script function, the share of
samples under run() whose chain is whole (run, main and <module> named in that order above the
interpreter's native Py_RunMain, no unnamed Python frame between), and each handler's share
against the script's, with the largest gap.

Usage: pysplit_check.py PROFILE SCRIPT_OUTPUT [NAMED_MIN WHOLE_MIN GAP_MAX [PID]]
Exit 0 when named >= NAMED_MIN %, whole >= WHOLE_MIN % and the gap <= GAP_MAX pp (95 95 3).
PID: only that process's main thread (a system-wide profile)."""
import sys

import pprof_traces as pt

H = ("fib", "work_dict", "outer")
SCRIPT = set(H) | {"inner", "run", "main", "<module>"}
UNNAMED = "[[python]]"  # a Python frame whose code object could not be read


def whole(frames):
    """run, main, <module>, then Py_RunMain below, with every Python frame named."""
    want = ["run", "main", "<module>", "Py_RunMain"]
    at = [frames.index(w) if w in frames else -1 for w in want]
    return min(at) >= 0 and at == sorted(at) and UNNAMED not in frames[:at[-1]]


def main():
    path, out = sys.argv[1:3]
    named_min, whole_min, gap_max = (float(a) for a in (sys.argv[3:6] or (95, 95, 3)))
    pid = sys.argv[6] if len(sys.argv) > 6 else None
    truth = {l.split()[0]: float(l.split()[1]) for l in open(out) if l.split()[0] in H}
    ss = [s for s in pt.samples(path)
          if pid is None or (s.labels.get("pid") == pid and s.labels.get("thread") == pid)]
    tot = sum(s.value for s in ss)
    named = sum(s.value for s in ss if SCRIPT & set(s.frames))
    under = [s for s in ss if "run" in s.frames]
    utot = sum(s.value for s in under) or 1
    whole_share = 100 * sum(s.value for s in under if whole(s.frames)) / utot
    per = dict.fromkeys(H, 0.0)
    for s in ss:
        h = next((f if f != "inner" else "outer" for f in s.frames if f in H or f == "inner"), None)
        if h:
            per[h] += s.value
    htot = sum(per.values()) or 1
    shares = {h: 100 * per[h] / htot for h in H}
    gap = max(abs(shares[h] - truth[h]) for h in H)
    print(f"samples {len(ss)} stacks, {tot / 1e9:.2f} s; script function named "
          f"{100 * named / tot:.1f}%; under run() {100 * utot / tot:.1f}%, of which whole chains "
          f"(run, main, <module>, Py_RunMain) {whole_share:.1f}%")
    print("shares " + " ".join(f"{h} {shares[h]:.1f} (script {truth[h]:.1f})" for h in H) +
          f"; max gap {gap:.1f} pp")
    for l in pt.header(path):
        if "py_" in l:
            print(" ".join(w for w in l.split() if w.startswith("py_")))
        elif "python" in l:
            print(l.strip())
    ok = (tot > 1e9 and 100 * named / tot >= named_min and whole_share >= whole_min and
          gap <= gap_max)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
