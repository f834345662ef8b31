# SPDX-License-Identifier: MIT
"""Judges a BPF profile of tests/workloads/v8split.js (tests/integration/bpf-node-v8.test.sh):
the share of each node main thread's samples that name a script function, and the handlers'
shares against the script's own accounting (its output). Exits 1 when the node started before
the agent has < 5 s of samples, < 95 % named or a share off by > 3 pp, or the one started
after it < 2 s or < 90 % named.
Usage: v8split_check.py PROFILE OUT_PREFIX PID_BEFORE PID_AFTER (OUT_PREFIX.before.out, .after.out)"""
import sys

import pprof_traces as pt

path, tmp, before, after = sys.argv[1:5]
H = ("fib_handler", "work_dict", "outer")
OF = {"fib": "fib_handler", "inner": "outer"}  # what they call, under their frame
SCRIPT = set(H) | set(OF) | {"run"}
ss = pt.samples(path)


def judge(what, pid, out):
    main = [s for s in ss if s.labels.get("pid") == pid and s.labels.get("thread") == pid]
    tot = sum(s.value for s in main) or 1
    named = 100 * sum(s.value for s in main if SCRIPT & set(s.frames)) / tot
    truth = {l.split()[0]: float(l.split()[1]) for l in open(out) if l.split()[0] in H}
    per = dict.fromkeys(H, 0.0)
    for s in main:
        h = next((OF.get(f, f) for f in s.frames if f in H or f in OF), None)
        if h:
            per[h] += s.value
    htot = sum(per.values()) or 1
    gap = max(abs(100 * per[h] / htot - truth[h]) for h in H)
    print(f"{what}: {len(main)} stacks, {tot / 1e9:.2f} s; script function named {named:.1f}%; "
          "shares " + " ".join(f"{h} {100 * per[h] / htot:.1f} (script {truth[h]:.1f})"
                               for h in H) + f"; max gap {gap:.1f} pp")
    return tot, named, gap


ok = True
tot, named, gap = judge("before the agent", before, tmp + ".before.out")
ok &= tot >= 5e9 and named >= 95 and gap <= 3
tot, named, gap = judge("after the agent", after, tmp + ".after.out")
ok &= tot >= 2e9 and named >= 90
for l in pt.header(path):
    if "v8_" in l:
        print(" ".join(w for w in l.split() if w.startswith("v8_")))
    elif "javascript" in l:
        print(l.strip())
sys.exit(0 if ok else 1)
