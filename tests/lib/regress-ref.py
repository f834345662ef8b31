#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# The regression detection's statistics computed independently, with scipy.stats (Debian's
# python3-scipy), on the per-device shares the collector's code used:
#
#   regress-ref.py SHARES ALL_TESTS [--alpha 0.001] [--min-change 0.05]
#
# SHARES: "function metric side device share" lines (regress-fleet compare --shares); ALL_TESTS:
# the C code's every test, "verdict metric function base_pct cand_pct delta_pct p_value
# p_adjusted u" lines (regress-fleet compare --all). For each (function, metric): U and the
# two-sided p of scipy.stats.mannwhitneyu(cand, base, method="asymptotic") (tie and continuity
# corrected), the means, the Benjamini-Hochberg adjustment (written here from the 1995 paper's
# step-up rule: scipy 1.10 has no false_discovery_control) and the verdict; every value must
# agree (p to 1e-9 relative), every test must be in both. Prints "ok N tests, K findings".
import sys
import time
from collections import defaultdict

import numpy as np
from scipy.stats import mannwhitneyu


def main():
    args = sys.argv[1:]
    alpha, min_change = 0.001, 0.05
    if "--alpha" in args:
        alpha = float(args[args.index("--alpha") + 1])
    if "--min-change" in args:
        min_change = float(args[args.index("--min-change") + 1])
    shares = defaultdict(lambda: {"base": {}, "cand": {}})
    devices = {"base": set(), "cand": set()}
    for line in open(args[0]):
        fn, metric, side, dev, share = line.split()
        shares[(fn, metric)][side][int(dev)] = float(share)
        devices[side].add(int(dev))
    nb, nc = len(devices["base"]), len(devices["cand"])
    keys = sorted(shares)
    t0 = time.perf_counter()
    res = {}
    for k in keys:
        a = np.array([shares[k]["base"].get(i, 0.0) for i in range(nb)])
        b = np.array([shares[k]["cand"].get(i, 0.0) for i in range(nc)])
        r = mannwhitneyu(b, a, method="asymptotic", use_continuity=True,
                         alternative="two-sided")
        res[k] = dict(u=r.statistic, p=min(1.0, r.pvalue), ma=a.mean(), mb=b.mean(),
                      pa=int((a > 0).sum()), pb=int((b > 0).sum()))
    # Benjamini-Hochberg: p_(i) * m / i, then the running minimum from the largest p down.
    m = len(keys)
    order = sorted(keys, key=lambda k: res[k]["p"])
    run = 1.0
    for i in range(m - 1, -1, -1):
        run = min(run, res[order[i]]["p"] * m / (i + 1))
        res[order[i]]["adj"] = run
    stat_s = time.perf_counter() - t0
    findings = 0
    for k in keys:
        x = res[k]
        v = "none"
        if x["adj"] < alpha:
            if x["pa"] == 0:
                v = "new"
            elif x["pb"] == 0:
                v = "gone"
            elif abs((x["mb"] - x["ma"]) / x["ma"]) >= min_change:
                v = "regression" if x["mb"] > x["ma"] else "improvement"
        x["verdict"] = v
        findings += v != "none"
    seen = set()
    for line in open(args[1]):
        f = line.split()
        if len(f) != 9:
            continue
        verdict, metric, fn = f[0], f[1], f[2]
        base_pct, cand_pct, p, adj, u = map(float, (f[3], f[4], f[6], f[7], f[8]))
        k = (fn, metric)
        if k not in res:
            sys.exit(f"FAIL: {fn} {metric} tested by the collector, not in the shares")
        x = res[k]
        seen.add(k)
        checks = [("u", u, x["u"], 0), ("p", p, x["p"], 1e-9), ("p_adjusted", adj, x["adj"], 1e-9),
                  ("base_pct", base_pct, x["ma"] * 100, 1e-9),
                  ("cand_pct", cand_pct, x["mb"] * 100, 1e-9)]
        for name, got, want, tol in checks:
            if abs(got - want) > tol * max(abs(want), 1e-300) and not (got == want):
                sys.exit(f"FAIL: {fn} {metric} {name}: ours {got!r}, scipy {want!r}")
        if verdict != x["verdict"]:
            sys.exit(f"FAIL: {fn} {metric}: verdict ours {verdict}, reference {x['verdict']}")
    if seen != set(keys):
        sys.exit(f"FAIL: tests not run by the collector: {sorted(set(keys) - seen)[:5]}")
    print(f"ok {m} tests, {findings} findings, {nb} base devices, {nc} candidate devices, "
          f"scipy_seconds={stat_s:.3f} (the tests and BH on the shares)")


main()
