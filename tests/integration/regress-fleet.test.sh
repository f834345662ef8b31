#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fleet regression detection (issue 39) end to end on a simulated staged roll-out: 200 devices,
# 10 % on firmware 1.5 (tests/drivers/regress-fleet: 40 functions, per-device log-normal noise
# sigma 0.05 on every function's weight, 2 profiles of 5,000 samples per device), where
# crc32_update (3 % of the CPU) is 20 % slower and tls_renegotiate is new at 1 %. Through a
# collector on that ring over mutual TLS (`edgeprof regressions`):
#   - crc32_update is reported as a regression (positive change), tls_renegotiate as new, and
#     nothing else (the other shares shrink by < 1 %); each with the stack that changed, its
#     callers (main > its task, as generated) holding its whole share, in the JSON and the table;
#   - an A/A comparison (the base's devices split in two by their number) reports nothing;
#   - a device certificate gets 403, an unknown selector 400, an empty selection 404;
#   - a standing rule (--regression-rule 'fw=fw by version') exports the same findings at
#     /metrics (edgeprof_regression{...}) and lists them at /api/0/regressions/rules;
#   - the statistics agree with scipy.stats on the same per-device shares (tests/lib/regress-ref.py),
#     and the collector's answer (HTTP) with the in-process comparison.
. "$(dirname "$0")/../lib/collector-lib.sh"
FLEET=$EP_BUILD/tests/drivers/regress-fleet
REF=$(dirname "$0")/../lib/regress-ref.py
[ -x "$FLEET" ] || { echo "regress-fleet not built"; exit 77; }
/usr/bin/python3 -c 'import scipy.stats' 2>/dev/null ||
	{ echo "python3-scipy not installed (tools/deps/oracles.list)"; exit 77; }

BASE='fw{version="1.4"}'
CAND='fw{version="1.5"}'
"$FLEET" fill "$T/ring" --ring-mb 32 --devices 200 --cand-frac 0.1 --noise 0.05 --samples 5000 \
	--profiles 2 --seed 39 --effect crc32_update=1.2 --new tls_renegotiate=0.01 ||
	fail "regress-fleet fill"

# The reference first (no collector holds the ring yet): every test, scipy's numbers.
"$FLEET" compare "$T/ring" "$BASE" "$CAND" --all --shares "$T/shares" >"$T/all" ||
	fail "regress-fleet compare"
/usr/bin/python3 "$REF" "$T/shares" "$T/all" || fail "statistics differ from scipy's"
# The reference must be able to fail: one p-value off by 1e-6 relative.
awk '$1 != "devices_base=" && NR == 3 { $7 = $7 * 1.000001 } 1' "$T/all" >"$T/all.bad"
/usr/bin/python3 "$REF" "$T/shares" "$T/all.bad" >/dev/null 2>&1 && fail "the reference passes a wrong p"

make_pki
start_collector
ep() {
	"$EP" regressions --collector "https://localhost:$TLS_PORT" --tls-ca "$T/pki/ca.crt" \
		--tls-cert "$T/pki/op.crt" --tls-key "$T/pki/op.key" --from now-1d "$@"
}
ep "$BASE" "$CAND" --json >"$T/found.json" || fail "edgeprof regressions --json"
/usr/bin/python3 - "$T/found.json" "$T/all" <<'PY' || fail "findings"
import json, sys
f = json.load(open(sys.argv[1]))
got = {(x["function"], x["metric"]): x for x in f}
assert set(got) == {("crc32_update", "self"), ("tls_renegotiate", "self")}, sorted(got)
crc, tls = got[("crc32_update", "self")], got[("tls_renegotiate", "self")]
assert crc["verdict"] == "regression" and crc["delta_pct"] > 10, crc
assert 2.5 < crc["base_pct"] < 3.5 and crc["diff_lo_pct"] > 0, crc
assert crc["p_adjusted"] < 0.001 and crc["p_value"] <= crc["p_adjusted"], crc
assert crc["devices_cand"] > 5 and crc["devices_base"] + crc["devices_cand"] == 200, crc
assert tls["verdict"] == "new" and tls["delta_pct"] is None and tls["present_base"] == 0, tls
assert 0.5 < tls["cand_pct"] < 1.5, tls
for k in ("function", "base_pct", "cand_pct", "delta_pct", "p_value", "devices_base",
          "devices_cand", "verdict"):
    assert k in crc, k
# The stacks that changed: the generator runs function i under task i % 5, under main (the
# truth); one chain each, holding all of the function's share.
for x, task in ((crc, "storage_task"), (tls, "net_task")):
    st = x["stacks"]
    assert len(st) == 1 and st[0]["callers"] == ["main", task] and not st[0]["cut"], st
    assert abs(st[0]["base_pct"] - x["base_pct"]) < 1e-9, (st, x)
    assert abs(st[0]["cand_pct"] - x["cand_pct"]) < 1e-9, (st, x)
# The collector's answer is the in-process comparison's (same code, same ring).
for line in open(sys.argv[2]):
    v = line.split()
    if len(v) == 9 and (v[2], v[1]) in got:
        assert float(v[6]) == got[(v[2], v[1])]["p_value"], (v, got[(v[2], v[1])])
print("found:", crc["function"], "%+.1f%%" % crc["delta_pct"], "p_adj %.2g" % crc["p_adjusted"],
      "and", tls["function"], "new at %.2f%%" % tls["cand_pct"])
PY
ep "$BASE" "$CAND" >"$T/table" || fail "edgeprof regressions (table)"
grep -q '^regression .* crc32_update$' "$T/table" || { cat "$T/table"; fail "table"; }
grep -A1 '^regression .* crc32_update$' "$T/table" | grep -q '^ *from main > storage_task: 2\.[0-9]*% -> 3\.[0-9]*%$' ||
	{ cat "$T/table"; fail "table: crc32_update's stack"; }

# A/A: the base's even-numbered devices against its odd-numbered ones.
ep 'fw{version="1.4",device=~".*[02468]"}' 'fw{version="1.4",device=~".*[13579]"}' --json \
	>"$T/aa.json" || fail "A/A"
[ "$(cat "$T/aa.json")" = "[]" ] || fail "A/A reports $(cat "$T/aa.json")"

# The defaults the answer says it applied (adjusted p < 0.001, |change| >= 5 %).
dcurl op "$(URL "/api/0/regressions?base=fw&cand=fw&from=now-1d")" |
	grep -q '"alpha":0.001,"min_change":0.05' || fail "default thresholds"
# Roles and errors.
dcurl dev-1 "$(URL "/api/0/regressions?base=fw&cand=fw")" | grep -q 'HTTP 403' ||
	fail "a device may read regressions"
dcurl op "$(URL "/api/0/regressions?base=fw%7B&cand=fw")" | grep -q 'HTTP 400' ||
	fail "a bad selector is not a 400"
dcurl op "$(URL "/api/0/regressions?base=nosuch&cand=fw")" | grep -q 'HTTP 404' ||
	fail "an empty selection is not a 404"
stop_collector

# A standing rule: 'fw=fw by version' compares the newest version (first seen last: the
# candidate devices' profiles start 10 s later) with the previous one, since the newest
# appeared, and exports the findings at /metrics.
"$FLEET" fill "$T/ring2" --ring-mb 32 --devices 200 --cand-frac 0.1 --noise 0.05 --samples 5000 \
	--profiles 2 --spacing-s 30 --cand-delay-s 10 --time-s $(($(date +%s) - 120)) --seed 40 \
	--effect crc32_update=1.2 --new tls_renegotiate=0.01 || fail "regress-fleet fill (rule)"
start_collector --ring "$T/ring2" --regression-rule 'fw=fw by version' --regression-interval 1
for _ in $(seq 100); do
	dcurl op "$(URL /metrics)" >"$T/metrics"
	grep -q '^edgeprof_regression_rule_runs_total{rule="fw"} [1-9]' "$T/metrics" && break
	sleep 0.2
done
grep '^edgeprof_regression' "$T/metrics"
grep -q '^edgeprof_regression{rule="fw",label="version",base="1.4",cand="1.5",function="crc32_update",metric="self",verdict="regression"} [0-9]' \
	"$T/metrics" || fail "the rule does not export crc32_update's regression"
grep -q 'function="tls_renegotiate",metric="self",verdict="new"} +Inf' "$T/metrics" ||
	fail "the rule does not export tls_renegotiate as new"
dcurl op "$(URL /api/0/regressions/rules)" | grep -q '"rule":"fw".*"status":"ok"' ||
	fail "GET /api/0/regressions/rules"
stop_collector
echo "PASS"
