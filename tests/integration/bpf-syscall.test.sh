#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A syscall-heavy workload (reads /dev/zero in sys_reader()): its samples carry kernel frames
# (named from /proc/kallsyms) on top of the right user frames, and the read path is in them.
set -u
probe=$EP_BUILD/tests/bpf-probe
work=$EP_BUILD/tests/workloads/bpf-work
[ -x "$probe" ] && [ -x "$work" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
tmp=$(mktemp -d)
wpid=
cleanup() { [ -n "$wpid" ] && kill "$wpid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
fi
if [ "$(cat /proc/sys/kernel/kptr_restrict)" != 0 ] && [ "$(id -u)" != 0 ]; then
	echo "kernel addresses hidden"; exit 77
fi

"$work" syscall 8 &
wpid=$!
sleep 0.5
"$probe" --seconds 4 --hz 1999 --pid "$wpid" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
cat "$tmp/err"
PYTHONPATH="$EP_TOP/bpf" /usr/bin/python3 - "$tmp/out" "$work" "$wpid" <<'PY'
import sys, collections
import probe_report as pr
out, exe, pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
samples = [s for s in pr.load(out) if s.pid == pid]
nm = pr.Nm(exe)
n = len(samples)
with_k = [s for s in samples if s.kernel]
under_reader = [s for s in with_k if "sys_reader" in nm.frames(s)]
read_path = [s for s in under_reader
             if any(k in ("ksys_read", "vfs_read", "__x64_sys_read", "__arm64_sys_read")
                    for k in s.kernel)]
unnamed = sum(1 for s in with_k for k in s.kernel if k.startswith("0x"))
top = collections.Counter(s.kernel[-1] for s in with_k)
print(f"samples={n} with kernel frames={len(with_k)} under sys_reader={len(under_reader)} "
      f"through read()={len(read_path)} unnamed kernel frames={unnamed}")
print("kernel leaves:", dict(top.most_common(5)))
ok = n >= 200 and len(with_k) >= 0.5 * n
ok &= len(under_reader) >= 0.9 * len(with_k)
ok &= len(read_path) >= 0.9 * len(under_reader)
ok &= unnamed == 0
sys.exit(0 if ok else 1)
PY
