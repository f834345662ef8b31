#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The BPF sampler finds a known 50/30/20 CPU split system-wide (filtered afterwards by pid),
# one thread and two threads, each share within ±3 pp; both threads appear with their share.
set -u
probe=$EP_BUILD/tests/bpf-probe
work=$EP_BUILD/tests/workloads/bpf-work
[ -x "$probe" ] && [ -x "$work" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# Refuse (skip) when this kernel cannot run the sampler at all; report the line it printed.
if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
fi

run_case() { # threads
	local threads=$1
	"$work" split 10 "$threads" &
	local wpid=$!
	pids+=("$wpid")
	sleep 0.5
	# 2999 Hz for 6 s: thousands of samples even when a loaded machine leaves the workload a
	# third of a CPU, so ±3 pp stays several standard deviations wide.
	"$probe" --seconds 6 --hz 2999 --ring-kb 8192 >"$tmp/out.$threads" 2>"$tmp/err.$threads" || {
		cat "$tmp/err.$threads"; return 1; }
	cat "$tmp/err.$threads"
	kill "$wpid" 2>/dev/null
	wait "$wpid" 2>/dev/null
	PYTHONPATH="$EP_TOP/bpf" /usr/bin/python3 - "$tmp/out.$threads" "$work" "$wpid" "$threads" <<'PY'
import sys, collections
import probe_report as pr
out, exe, pid, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
samples = pr.load(out)
nm = pr.Nm(exe)
mine = [s for s in samples if s.pid == pid]
others = len(samples) - len(mine)
leaf = collections.Counter(nm.leaf(s) for s in mine)
work = sum(leaf[f] for f in ("work_a", "work_b", "work_c"))
print(f"threads={threads} samples={len(samples)} workload={len(mine)} other_processes={others}")
print("leaf functions:", dict(leaf.most_common(6)))
ok = len(mine) >= 1500 and work >= 0.95 * len(mine)
ok &= pr.split_shares_ok(leaf, 3)
tids = collections.Counter(s.tid for s in mine)
print("per thread:", dict(tids))
if threads > 1:
    ok &= len(tids) == threads
    for t, n in tids.items():
        share = 100.0 * n / len(mine)
        ok &= abs(share - 100.0 / threads) <= 10
ok &= all(s.comm.startswith("bpfw-split") for s in mine)
# The leaf's caller is on the stack (frame pointers, -O1): the chain is complete.
chained = sum(1 for s in mine if "split_thread" in nm.frames(s))
print(f"stacks with the leaf's caller: {100.0 * chained / max(len(mine), 1):.1f}%")
ok &= chained >= 0.9 * len(mine)
sys.exit(0 if ok else 1)
PY
}

run_case 1 || exit 1
run_case 2 || exit 1
echo "bpf split: ok"
