#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Whole user stacks for what a gateway runs (issue 35), through the agent at its defaults
# (99 Hz, mmap records), on code built without frame pointers (bpf-work.c at -O2
# -fomit-frame-pointer): "whole" = the chain holds main.
#  - big: the program linked to Debian's libcrypto.so.3 (85 929 rows: over a quarter of the
#    rows array, which had left every process that maps it on frame pointers: 0 % whole), hot
#    in its own code for 3 s: >= 90 % whole;
#  - short: 30 processes of 60 ms each (~6 samples each at 99 Hz; a process was listed for
#    tables at its 4th sample, and before that walked by frame pointers: ~5 % whole): their
#    first samples carry a copy of the stack the agent walks: >= 85 % whole over all of them.
set -u
agent=$EP_BUILD/edgeprof-agent
nofp=$EP_BUILD/tests/workloads/bpf-work-nofp
[ -x "$agent" ] && [ -x "$nofp" ] || { echo "agent or bpf-work-nofp not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
grep -q '^CONFIG_BPF_CFI=y' "$EP_BUILD/include/config/auto.conf" 2>/dev/null ||
	{ echo "CONFIG_BPF_CFI off"; exit 77; }
tmp=$(mktemp -d)
trap 'wait 2>/dev/null; rm -rf "$tmp"' EXIT
# the workload linked to libcrypto (not called: merely mapped, as a TLS client's own code is)
gcc -O2 -g -fomit-frame-pointer -fno-inline -fno-optimize-sibling-calls -no-pie -pthread \
	-o "$tmp/bpfw-ssl" "$EP_TOP/tests/workloads/bpf-work.c" -Wl,--no-as-needed -lcrypto \
	2>"$tmp/cc" || { cat "$tmp/cc"; echo "no gcc or libcrypto to link with"; exit 77; }
ldd "$tmp/bpfw-ssl" | grep -q libcrypto || { echo "not linked to libcrypto"; exit 77; }

# $1: name; the rest: the workload's command, run while the agent samples (6 s round)
run_case() {
	local name=$1 out=$tmp/$1
	shift
	mkdir -p "$out"
	"$agent" --once --seconds 6 --sampler bpf --output-dir "$out" >"$tmp/$name.log" 2>&1 &
	local apid=$!
	sleep 1.5 # loaded and attached
	"$@"
	wait "$apid" || { cat "$tmp/$name.log"; return 1; }
	grep -q "BPF sampler unavailable" "$tmp/$name.log" && { cat "$tmp/$name.log"; return 77; }
	return 0
}

# $1: name, $2: the program's file name (exe label), $3: least share whole (%), $4: least samples
judge() {
	PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/$1" "$1" "$2" "$3" "$4" <<'PY'
import glob, re, sys
import pprof_traces as pt
out, name, exe, least, least_n = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), \
    int(sys.argv[5])
path = glob.glob(out + "/*.pb.gz")[0]
ss = [s for s in pt.samples(path, index="samples") if s.labels.get("exe", "").endswith("/" + exe)]
# samples with user frames (one in the kernel during exec or exit has none: [kernel] only)
ss = [s for s in ss if any(not f.startswith("[") for f in s.frames)]
n = sum(s.value for s in ss)
whole = sum(s.value for s in ss if "main" in s.frames)
com = " ".join(pt.header(path))
counts = {k: v for k, v in re.findall(r"\b(stack_copies\w*|cfi_partial|cfi_files_unfit|"
                                      r"cfi_walks|cfi_whole|cfi_unfit)=(\d+)", com)}
share = 100.0 * whole / n if n else 0.0
print(f"{name}: {int(n)} samples of {exe}, whole {share:.1f}% (at least {least}%); {counts}")
for s in sorted((s for s in ss if "main" not in s.frames), key=lambda s: -s.value)[:3]:
    print(f"    {int(s.value)} x " + " < ".join(s.frames[:8]))
sys.exit(0 if n >= least_n and share >= least else 1)
PY
}

rc=0
run_case big "$tmp/bpfw-ssl" split 3.0 || rc=$?
[ $rc = 77 ] && exit 77
[ $rc = 0 ] && { judge big bpfw-ssl 90 80 || rc=1; }
short() { for _ in $(seq 30); do "$nofp" split 0.06; done; }
run_case short short || rc=1
judge short bpf-work-nofp 85 40 || rc=1
exit $rc
