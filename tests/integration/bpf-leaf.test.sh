#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Leaves that do not link their frame (bpf/leaf.h): libc's memcpy and read() (Debian builds
# libc without frame pointers) and a frameless tiny function. A frame-pointer walk alone goes
# from such a leaf straight to its caller's caller; the agent puts the caller back from the
# leaf pc's .eh_frame rules and the user stack words the BPF program copied. Checked through
# go tool pprof on the agent's own output: the caller is present in (nearly) every sample,
# under user-mode samples and (x86_64) under the kernel frames of read(2), and the leaf
# itself stays the leaf. The same workload linked -static runs beside it: gcc gives static
# programs no .eh_frame_hdr, so there the agent indexes .eh_frame itself.
set -u
agent=$EP_BUILD/edgeprof-agent
probe=$EP_BUILD/tests/bpf-probe
work=$EP_BUILD/tests/workloads/bpf-work
static=$EP_BUILD/tests/workloads/bpf-work-static
[ -x "$probe" ] && [ -x "$work" ] && [ -x "$static" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
wpid= spid=
cleanup() { kill $wpid $spid 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
fi
"$work" leaf 10 &
wpid=$!
"$static" leaf 10 &
spid=$!
sleep 0.3
"$agent" --once --seconds 5 --sampler bpf --hz 499 --output-dir "$tmp" 2>"$tmp/err" ||
	{ cat "$tmp/err"; exit 1; }
cat "$tmp/err"
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp"/*.pb.gz "$(uname -m)" \
	"$wpid" dynamic "$spid" static <<'PY'
import sys, re
import pprof_traces as pt
path, arch, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
CALLERS = ("leaf_copy", "leaf_read", "leaf_tiny")
LIBC = lambda f: f in ("[libc.so.6]", "read") or f.startswith(("__mem", "__read", "__libc_read"))
samples = pt.samples(path)
head = [l for l in pt.header(path) if "leaf_fixed" in l]
fixed = int(re.search(r"leaf_fixed=(\d+)", head[0]).group(1)) if head else 0
pc = lambda a, b: 100.0 * a / b if b else 0.0
def libc_caller(fr):  # the frame under the first libc one
    i = next(i for i, f in enumerate(fr) if LIBC(f))
    return fr[i + 1] if i + 1 < len(fr) else ""
def check(pid, name):
    ours = [s for s in samples if s.labels.get("pid") == pid and "leaf_thread" in s.frames]
    total = sum(s.value for s in ours)
    weight = lambda pred: sum(s.value for s in ours if pred(s.frames))
    complete = weight(lambda fr: fr[0] == "leaf_thread" or any(c in fr for c in CALLERS))
    tiny = weight(lambda fr: fr[0] == "tiny")
    tiny_ok = weight(lambda fr: fr[:2] == ["tiny", "leaf_tiny"])
    above = lambda fr: fr[:fr.index("leaf_thread")]  # not main's callers, in libc too
    in_libc = weight(lambda fr: any(LIBC(f) for f in above(fr)))
    libc_ok = weight(lambda fr: any(LIBC(f) for f in above(fr)) and libc_caller(fr) in CALLERS)
    syscall = lambda fr: any(f.startswith(("entry_SYSCALL", "el0_svc")) for f in fr)
    kern_w = weight(syscall)
    kern_ok = weight(lambda fr: syscall(fr) and "leaf_read" in fr)
    print(f"{name}: samples of leaf_thread: {len(ours)} stacks ({total / 1e9:.2f} s); caller "
          f"present {pc(complete, total):.1f}%; tiny with leaf_tiny under it "
          f"{pc(tiny_ok, tiny):.1f}%; libc leaf with its caller under it "
          f"{pc(libc_ok, in_libc):.1f}%; kernel samples under leaf_read {pc(kern_ok, kern_w):.1f}%")
    # CPU-seconds of leaf_thread: ~2.5 each in the 5 s round when idle, 0.7 at load average 7;
    # a quarter second (~125 samples at 499 Hz) is enough to judge the shares below
    ok = total >= 0.25e9
    ok &= pc(complete, total) >= 95.0
    ok &= tiny > 0 and pc(tiny_ok, tiny) >= 95.0
    ok &= in_libc > 0 and pc(libc_ok, in_libc) >= 90.0
    if arch == "x86_64":  # aarch64 samples in a system call carry no user registers
        ok &= kern_w > 0 and pc(kern_ok, kern_w) >= 90.0
    return ok
ok = fixed > 0
for pid, name in zip(runs[::2], runs[1::2]):
    ok &= check(pid, name)
print(f"leaf_fixed={fixed}")
sys.exit(0 if ok else 1)
PY
