#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Whole user stacks of code built without frame pointers (bpf/cfitab.h): the BPF program walks
# them by the .eh_frame rows the sampler loads. Two programs, sampled at once by bpf-probe:
#  - Debian's own xz (stripped, no frame pointers; liblzma and libc neither), ASLR off so its
#    load address is known: a whole stack ends in xz's entry point (_start), ~14 frames down;
#  - bpf-work-nofp (bpf-work.c at -O2 -fomit-frame-pointer, not inlined): main > nest x21 >
#    fixed_rounds > work_*, named by nm(1);
#  - bpf-work-nofp via: main > via_a > hub > spin_a and main > via_b > hub > spin_b in turn,
#    ~0.3 ms each, where hub's frame is the same (pc, sp) under both: the walk cache (the
#    thread's last walk, bpf/README.md) matches it and must see that its caller changed
#    (cache_changed), never put spin_a under via_b.
# A frame-pointer walk gives 2-3 frames under a junk root on both (checked with --no-cfi: it
# must fail there). The first samples of each process come before its tables are loaded: the
# bounds below leave room for them.
set -u
probe=$EP_BUILD/tests/bpf-probe
nofp=$EP_BUILD/tests/workloads/bpf-work-nofp
[ -x "$probe" ] && [ -x "$nofp" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
command -v xz >/dev/null && command -v setarch >/dev/null || { echo "xz or setarch missing"; exit 77; }
grep -q '^CONFIG_BPF_CFI=y' "$EP_BUILD/include/config/auto.conf" 2>/dev/null ||
	{ echo "CONFIG_BPF_CFI off"; exit 77; }
cache=$(sed -n 's/^CONFIG_BPF_CFI_WALK_CACHE=//p' "$EP_BUILD/include/config/auto.conf")
cache=${cache:-0}
tmp=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

if ! "$probe" --seconds 0.1 --quiet 2>"$tmp/check" >/dev/null; then
	cat "$tmp/check"; tail -n 1 "$tmp/check"; exit 77
fi
head -c $((12 << 20)) /dev/urandom >"$tmp/random"
entry=$(readelf -h "$(command -v xz)" | awk '/Entry point/ {print $4}')
# xz under a name the comm filter takes (the rest of the machine is not sampled)
ln -s "$(command -v xz)" "$tmp/bpfw-xz"

# One run: $1 = extra bpf-probe options; prints the verdict, returns 0 when stacks are whole.
run() {
	"$probe" --seconds 3 --hz 499 --comm bpfw $1 >"$tmp/out" 2>"$tmp/err" &
	local probe_pid=$!
	sleep 0.4
	setarch -R "$tmp/bpfw-xz" -9 -T1 -c "$tmp/random" >/dev/null &
	local xz_pid=$!
	"$nofp" fixed 100000 20 &
	local own_pid=$!
	# the last 2 s only: the other two keep more of the CPUs (a loaded CI machine)
	(sleep 0.8 && exec "$nofp" via 2.0) &
	local via_pid=$!
	pids=($probe_pid $xz_pid $own_pid $via_pid)
	wait $probe_pid || { cat "$tmp/err"; return 1; }
	kill $xz_pid $own_pid $via_pid 2>/dev/null
	wait $xz_pid $own_pid $via_pid 2>/dev/null
	pids=()
	tail -n 1 "$tmp/err"
	PYTHONPATH="$EP_TOP/bpf" /usr/bin/python3 - "$tmp/out" "$nofp" "$xz_pid" "$own_pid" \
		"$entry" "$via_pid" "$tmp/err" "$cache" <<'PY'
import re, sys, statistics
import probe_report as pr
out, nofp, xz_pid, own_pid, entry = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5], 16)
via_pid, err, cache = int(sys.argv[6]), sys.argv[7], int(sys.argv[8])
samples = pr.load(out)
nm = pr.Nm(nofp)
base = 0x555555554000  # a PIE's load address with ASLR off (x86_64, aarch64)
ok = True
xz = [s for s in samples if s.pid == xz_pid and s.user]
whole = [s for s in xz if 0 <= s.user[0] - base - entry < 0x40]
depth = statistics.median(len(s.user) for s in xz) if xz else 0
share = 100.0 * len(whole) / len(xz) if xz else 0.0
print(f"xz: {len(xz)} samples, root in _start {share:.1f}%, median depth {depth}")
ok &= len(xz) >= 150 and share >= 85.0 and depth >= 10
own = [nm.frames(s) for s in samples if s.pid == own_pid and s.user]
own = [f for f in own if f[-1] in ("work_a", "work_b", "work_c")]
good = [f for f in own if f[0] == "_start" and f.count("nest") == 21 and "main" in f and
        f[-2] == "fixed_rounds"]
share = 100.0 * len(good) / len(own) if own else 0.0
print(f"bpf-work-nofp: {len(own)} samples in work_*, whole (_start .. main > nest x21 > "
      f"fixed_rounds > work_*) {share:.1f}%")
if own and len(good) < len(own):
    bad = next(f for f in own if f not in good)
    print("  e.g. " + " > ".join(str(x) for x in bad))
ok &= len(own) >= 150 and share >= 85.0
via = [nm.frames(s) for s in samples if s.pid == via_pid and s.user]
via = [f for f in via if f[0] == "_start" and len(f) >= 4 and f[-2] == "hub" and
       f[-1] in ("spin_a", "spin_b")]
wrong = [f for f in via if f[-3] != "via_" + f[-1][-1]]
m = re.search(r"cache_changed=(\d+)", open(err).read())
changed = int(m.group(1)) if m else 0
print(f"bpf-work-nofp via: {len(via)} whole samples in spin_*, {len(wrong)} under the other "
      f"via_*; walks whose cached callers had changed: {changed}")
if wrong:
    print("  e.g. " + " > ".join(str(x) for x in wrong[0]))
ok &= len(via) >= 50 and not wrong and (changed > 0 or not cache)
sys.exit(0 if ok else 1)
PY
}

echo "== frame pointers only (--no-cfi): must not pass"
if run --no-cfi; then
	echo "FAIL: the frame-pointer walk gave whole stacks: this test cannot tell"
	exit 1
fi
echo "== by unwind tables"
run "" || exit 1
grep -o 'cfi: .*' "$tmp/err"
