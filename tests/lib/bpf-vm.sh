#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The BPF sampler on a real kernel of another version or architecture, in a VM: qemu-user has no
# bpf(), and this machine runs one kernel. Boots one of Debian's cloud kernels under
# qemu-system (TCG: arm64 -M virt, x86_64 -M pc) from an
# initramfs (busybox, the board's binaries, their libc) and runs, inside it:
#   1. bpf-probe beside `bpf-work split`: the program loads and work_a/b/c get 50/30/20
#      (±10 pp: TCG's timing is coarse), named on this host with nm from the probe's addresses;
#   2. edgeprof-agent --sampler bpf beside `bpf-work leaf`: its pprof, copied out over the
#      console in base64, read with go tool pprof: leaf_fixed > 0 and libc's memcpy (a frameless
#      leaf: on aarch64 the caller is only in the link register the BPF program records) has
#      leaf_copy under it;
#   3. bpf-probe beside bpf-work-nofp (-O2 -fomit-frame-pointer): whole stacks by the unwind
#      tables the program walks (bpf/cfitab.h): _start .. main > nest x21 > fixed_rounds > work_*.
#   4. edgeprof-agent --profiles offcpu beside wallsplit (tracefs mounted): each thread's
#      blocked time within 12 % of what it measured (TCG: see there), read_e's one long block
#      within 3 % and under read_e's stack.
# bpf-work is the board's dynamic build and runs on the libc it was linked with: the static
# binaries gcc links carry no .eh_frame_hdr, and the leaf rules need one.
#
#   tests/lib/bpf-vm.sh ARCH VMDIR   (from a tests/integration/bpf-*-vm*.test.sh, EP_TOP set)
#     arm64:  the gateway-arm64 build, the cross toolchain's libc
#     x86_64: the host-x86_64 build, with the shared libraries it links copied from this machine
#     VMDIR:  build/vm-arm64 (Debian 12's 6.1), build/vm-5.10-<arch> (Debian 11's 5.10): what
#             tools/setup.sh fetches (vmlinuz, config, busybox)
# Each VM run is bounded (VM_TIMEOUT, 300 s); the console is kept in test-logs.
set -u
arch=$1
vm=$EP_TOP/build/$2
name=bpf-$arch-$2
case $arch in
arm64)
	gw=$EP_TOP/build/gateway-arm64 libc=/usr/aarch64-linux-gnu/lib
	ldso=ld-linux-aarch64.so.1 ldso_dir=lib multiarch=aarch64-linux-gnu
	setup="make test-arm sets it up and runs this"
	# pauth-impdef: TCG's architected pointer-auth cipher is slow; the cheaper one is the same.
	qemu=(qemu-system-aarch64 -M virt -cpu "max,pauth-impdef=on") tty=ttyAMA0 ;;
x86_64)
	gw=$EP_TOP/build/host-x86_64 libc=/lib/x86_64-linux-gnu
	ldso=ld-linux-x86-64.so.2 ldso_dir=lib64 multiarch=x86_64-linux-gnu
	setup="tools/setup.sh, as make test runs it, fetches it"
	# TCG, not KVM: this machine's KVM (nested) stops the 5.10 guest at boot ("KVM internal
	# error", an emulation failure on a lock cmpxchg16b) and qemu then waits for the timeout;
	# TCG boots and runs all three cases in ~70 s. X86_QEMU='-accel kvm -cpu host' where KVM works.
	# shellcheck disable=SC2206
	qemu=(qemu-system-x86_64 -M pc ${X86_QEMU:--accel tcg -cpu max}) tty=ttyS0 ;;
*) echo "bpf-vm.sh: ARCH is arm64 or x86_64"; exit 2 ;;
esac
need_files=("$gw/tests/bpf-probe" "$gw/edgeprof-agent" "$gw/tests/workloads/bpf-work"
	    "$gw/tests/workloads/bpf-work-nofp" "$gw/tests/workloads/wallsplit")
for c in "${qemu[0]}" cpio gzip go; do
	command -v "$c" >/dev/null || { echo "no $c ($setup)"; exit 77; }
done
if [ ! -f "$vm/vmlinuz" ] || [ ! -x "$vm/busybox" ]; then
	echo "no kernel in $vm ($setup)"; exit 77
fi
for f in "${need_files[@]}"; do
	[ -x "$f" ] || { echo "$(basename "$gw") not built ($setup)"; exit 77; }
done
[ -f "$libc/libc.so.6" ] || { echo "no $libc/libc.so.6 ($setup)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
console=$EP_BUILD/test-logs/$name.console
mkdir -p "$(dirname "$console")"

# The initramfs: busybox applets, our binaries in /bin, libc where the loader looks for it.
root=$tmp/root
lib=$root/lib/$multiarch
mkdir -p "$root"/{bin,dev,proc,sys,tmp,$ldso_dir} "$lib"
cp "$vm/busybox" "${need_files[@]}" "$root/bin/"
cp -L "$libc/$ldso" "$root/$ldso_dir/"
cp -L "$libc/libc.so.6" "$lib/"
# A dynamic build (host-x86_64) brings the libraries it links from this machine.
for f in "${need_files[@]}"; do
	ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
		while read -r l; do [ -e "$lib/$(basename "$l")" ] || cp -L "$l" "$lib/"; done
done
cat >"$root/init" <<'EOF'
#!/bin/busybox sh
# PID 1: mount, run both cases with markers the host looks for, power off. Exiting would panic.
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
echo 1 >/proc/sys/kernel/printk # no kernel lines inside our output
echo "@@vm up $(uname -r) $(uname -m) cpus=$(nproc) uptime=$(cut -d' ' -f1 /proc/uptime)"
up() { cut -d' ' -f1 /proc/uptime; }
# SIGINT to agent PID, then 60 s for it to end: one still running is shown (each thread's
# state and wait channel, the kernel stack, its log's end) and killed, so that a stuck step
# says where it was and leaves the VM time for the rest (once, CI's VM stopped in the off-CPU
# step until the 300 s timeout with nothing said).
stop_agent() { # PID LOG
	kill -INT "$1"
	n=0
	while kill -0 "$1" 2>/dev/null && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
	if kill -0 "$1" 2>/dev/null; then
		echo "@@stuck pid $1 at uptime $(up)"
		for t in /proc/"$1"/task/*; do
			echo "  task ${t##*/}: $(cut -d' ' -f3 "$t/stat") $(cat "$t/wchan" 2>/dev/null)"
			cat "$t/stack" 2>/dev/null | sed 's/^/    /'
		done
		tail -n 5 "$2"
		kill -9 "$1"
	fi
	wait "$1"
}

# The workloads run until the profiler is done: loading the BPF programs takes seconds under
# TCG (the verifier's work), more when the host is busy.
bpf-work split 120 &
wpid=$!
sleep 0.5
bpf-probe --seconds 4 --hz 99 --comm bpfw- >/tmp/probe.out 2>/tmp/probe.err
echo "@@probe rc=$? split_pid=$wpid"
kill $wpid
cat /tmp/probe.err
echo "@@probe-out"
cat /tmp/probe.out
echo "@@probe-end"
wait

mkdir /tmp/x
# Four seconds of sampling once the programs are in, ended by SIGINT: a
# fixed --seconds round counts the load too (2-20 s under TCG), and left ~1.7 s on a quick run.
edgeprof-agent --once --seconds 120 --sampler bpf --hz 99 --output-dir /tmp/x >/tmp/agent.log 2>&1 &
apid=$!
# Sampling has begun when the sampler's CPU events are open beside the mmap records' (one each
# per CPU): the first BPF program's fd comes seconds before the last program is verified.
i=0
while [ "$(ls -l /proc/$apid/fd 2>/dev/null | grep -c 'perf_event')" -lt $((2 * $(nproc))) ] &&
	[ $i -lt 1200 ]; do
	sleep 0.1
	i=$((i + 1))
done
echo "@@agent sampling after $i waits"
sleep 1
bpf-work leaf 120 &
wpid=$!
sleep 4
stop_agent $apid /tmp/agent.log
echo "@@agent rc=$? leaf_pid=$wpid uptime=$(up)"
kill $wpid
cat /tmp/agent.log
wait
echo "@@pprof-sum $(cat /tmp/x/*.pb.gz | md5sum | cut -d' ' -f1) $(ls /tmp/x | wc -l) files"
echo "@@pprof-b64"
# uuencode -m: base64 in bullseye's busybox too (its applets have no base64)
cat /tmp/x/*.pb.gz | uuencode -m p | sed '1d;$d'
echo "@@pprof-end"

bpf-work-nofp fixed 1000000 20 &
wpid=$!
sleep 0.5
bpf-probe --seconds 4 --hz 99 --comm bpfw- >/tmp/cfi.out 2>/tmp/cfi.err
echo "@@cfi rc=$? nofp_pid=$wpid uptime=$(up)"
kill $wpid
cat /tmp/cfi.err
echo "@@cfi-out"
cat /tmp/cfi.out
echo "@@cfi-end"
# Off-CPU (tracepoint and raw tracepoint programs): wallsplit's threads blocked for known times.
mount -t tracefs nodev /sys/kernel/tracing
mkdir /tmp/o
# The round is ended by SIGINT once wallsplit is done: opening the sampler takes 7-20 s under
# TCG (the verifier), and a fixed --seconds round ended before wallsplit did when it took longer.
edgeprof-agent --once --seconds 120 --sampler bpf --profiles offcpu --output-dir /tmp/o \
	>/tmp/off.log 2>&1 &
apid=$!
i=0
while ! grep -q "off-CPU time on" /tmp/off.log && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
echo "@@offcpu sampling after $i waits, uptime $(up)"
sleep 1
wallsplit 1.2 >/tmp/wall.out
echo "@@wallsplit done, uptime $(up)"
sleep 1
stop_agent $apid /tmp/off.log
echo "@@offcpu rc=$? uptime=$(up)"
cat /tmp/off.log
echo "@@wall-out"
cat /tmp/wall.out
echo "@@wall-end"
echo "@@offcpu-sum $(cat /tmp/o/*-offcpu-*.pb.gz | md5sum | cut -d' ' -f1) $(ls /tmp/o | wc -l) files"
echo "@@offcpu-b64"
cat /tmp/o/*-offcpu-*.pb.gz | uuencode -m p | sed '1d;$d'
echo "@@offcpu-end"
echo "@@vm done uptime=$(cut -d' ' -f1 /proc/uptime)"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$tmp/initrd.gz" || exit 1

start=$(date +%s)
timeout "${VM_TIMEOUT:-300}" "${qemu[@]}" -smp 2 -m 1024 \
	-nographic -no-reboot -nic none -kernel "$vm/vmlinuz" -initrd "$tmp/initrd.gz" \
	-append "console=$tty panic=-1 quiet" </dev/null 2>&1 | tr -d '\r' >"$console"
echo "qemu (${qemu[*]}) exited after $(( $(date +%s) - start )) s (console in $console)"
grep -q '^@@vm done' "$console" || { tail -n 40 "$console"; echo "the VM did not finish"; exit 1; }
section() { sed -n "/^@@$1\$/,/^@@$2\$/p" "$console" | sed '1d;$d'; }
sed -e '/^@@probe-out$/,/^@@probe-end$/d' -e '/^@@pprof-b64$/,/^@@pprof-end$/d' \
	-e '/^@@cfi-out$/,/^@@cfi-end$/d' -e '/^@@offcpu-b64$/,/^@@offcpu-end$/d' "$console"
section probe-out probe-end >"$tmp/probe.out"
section cfi-out cfi-end >"$tmp/cfi.out"
section pprof-b64 pprof-end | base64 -d >"$tmp/leaf.pb.gz" 2>/dev/null
section wall-out wall-end >"$tmp/wall.out"
section offcpu-b64 offcpu-end | base64 -d >"$tmp/offcpu.pb.gz" 2>/dev/null
# A profile that did not come through whole is said as such, with the agent's log, not as a
# reader's error on a broken file (CI shows a failed test's last lines only).
received() { # NAME FILE
	local want got
	want=$(sed -n "s/^@@$1-sum \([0-9a-f]*\) .*/\1/p" "$console")
	got=$(md5sum <"$2" | cut -d' ' -f1)
	[ -s "$2" ] && [ "$want" = "$got" ] && return 0
	echo "the $1 profile did not come out of the VM whole: $(grep "^@@$1-sum" "$console"), received $(wc -c <"$2") bytes md5 $got"
	return 1
}
if grep -q "BPF sampler unavailable" "$console"; then
	echo "the BPF sampler did not load ($name)"; exit 1
fi
grep -q '^@@probe rc=0 ' "$console" || { echo "bpf-probe failed in the VM"; exit 1; }
grep -q '^@@agent rc=0 ' "$console" || { echo "edgeprof-agent failed in the VM"; exit 1; }

PYTHONPATH="$EP_TOP/bpf" /usr/bin/python3 - "$tmp/probe.out" "$gw/tests/workloads/bpf-work" <<'PY' || exit 1
import sys, collections
import probe_report as pr
samples = pr.load(sys.argv[1])
nm = pr.Nm(sys.argv[2])
mine = [s for s in samples if s.comm.startswith("bpfw-split")]
leaf = collections.Counter(nm.leaf(s) for s in mine)
work = sum(leaf[f] for f in ("work_a", "work_b", "work_c"))
print(f"split: samples={len(samples)} workload={len(mine)} in work_a/b/c={work}")
print("  leaf functions:", dict(leaf.most_common(6)))
# ~400 expected (4 s at 99 Hz); 200 keeps ±10 pp above three standard deviations.
ok = len(mine) >= 200 and work >= 0.9 * len(mine)
ok &= pr.split_shares_ok(leaf, 10)
# The frame-pointer walk goes on past the leaf to main. gcc omits leaf frame records on aarch64
# (-momit-leaf-frame-pointer), so the leaf's caller, split_thread, is only in the link register:
# not in the probe's raw stacks (the agent puts it back; case 2 checks that).
walked = sum(1 for s in mine if "main" in nm.frames(s))
chained = sum(1 for s in mine if "split_thread" in nm.frames(s))
print(f"  stacks reaching main: {100.0 * walked / max(len(mine), 1):.1f}%; "
      f"with the leaf's caller (raw, no leaf fix): {100.0 * chained / max(len(mine), 1):.1f}%")
ok &= walked >= 0.9 * len(mine)
sys.exit(0 if ok else 1)
PY

pid=$(sed -n 's/^@@agent rc=0 leaf_pid=\([0-9]*\) .*/\1/p' "$console")
received pprof "$tmp/leaf.pb.gz" || { sed -n '/^@@agent rc/,/^@@pprof-sum/p' "$console"; exit 1; }
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/leaf.pb.gz" "$pid" "$arch" <<'PY' || exit 1
import sys, re
import pprof_traces as pt
path, pid, arch = sys.argv[1], sys.argv[2], sys.argv[3]
ENTRY = ("el0", "entry_SYSCALL")  # the kernel's entry from user mode: arm64's, x86_64's
counters = [l.strip() for l in pt.header(path) if "leaf_fixed=" in l]
print("agent counters:", counters[0] if counters else "(no leaf_fixed= line)")
count = lambda k: int(re.search(k + r"=(\d+)", counters[0]).group(1)) if counters else 0
fixed, linked, deep = count("leaf_fixed"), count("leaf_linked"), count("leaf_deep")
# No stack words are copied on aarch64 (BPF_LEAF_WORDS=0): the frame pointer tells a linked
# frame, the link register a leaf's return address; bpf-work has no frameless non-leaf code.
# x86_64 has no link register: the caller is in the stack words copied (bpf-leaf.test.sh).
print(f"leaf: fixed={fixed} linked={linked} deep={deep}")
# bpf-work started after the agent: its maps came from the kernel's mmap records, not from
# /proc; the agent does not ask for the records' build-ids (bpf/README.md: it broke perf)
m = re.search(r"mmap_cpus=(\d+) mmap_build_ids=(\d+).* maps_from_records=(\d+)",
              counters[0] if counters else "")
records_ok = bool(m) and m.group(1) == "2" and m.group(2) == "0" and int(m.group(3)) >= 1
print("mmap records:", m.group(0) if m else "(none)")
ours = [s for s in pt.samples(path) if s.labels.get("pid") == pid and "leaf_thread" in s.frames]
# memcpy's variants are not exported: the leaf is "[libc.so.6]" (or __mem* with symbols).
MEMCPY = lambda f: f == "[libc.so.6]" or f.startswith("__mem")
def user(fr):  # leaf_thread's frames above it, kernel frames dropped
    fr = fr[:fr.index("leaf_thread")]
    k = max((i for i, f in enumerate(fr) if f.startswith(ENTRY)), default=-1)
    return fr[k + 1:]
tick = 1e9 / 99  # one sample, in the cpu values (ns) pprof shows
total = sum(s.value for s in ours) / tick
memcpy = [s for s in ours if user(s.frames) and MEMCPY(user(s.frames)[0])]
n_memcpy = sum(s.value for s in memcpy) / tick
n_caller = sum(s.value for s in memcpy if user(s.frames)[1:2] == ["leaf_copy"]) / tick
print(f"leaf: samples of leaf_thread={total:.0f}; in libc memcpy={n_memcpy:.0f}, "
      f"leaf_copy under it={n_caller:.0f}; leaf_fixed={fixed}")
tops = {}
for s in ours:
    k = " <- ".join(user(s.frames))
    tops[k] = tops.get(k, 0) + s.value / tick
for k, n in sorted(tops.items(), key=lambda kv: -kv[1])[:6]:
    print(f"  {n:4.0f}  {k}")
# leaf_read's read(2) of /dev/zero: samples in the kernel have its frames under the user ones
# (the program asks for a kernel stack only where the sample was not taken in user mode)
n_kernel = sum(s.value for s in ours if "leaf_read" in s.frames and
               any(f.startswith(ENTRY) for f in s.frames)) / tick
print(f"samples in read(2) with kernel frames: {n_kernel:.0f}")
# >= 85 %: of 229 memcpy samples in 5 arm64 runs at load 7, 9 had no caller (3.9 %); one run's
# 6 of 48 fell under a 90 % bound that 4 % of runs would fail by chance alone
ok = records_ok and fixed > 0 and n_memcpy >= 5 and n_caller >= 0.85 * n_memcpy and n_kernel >= 5
if arch == "arm64":
    ok &= linked > 0 and deep <= 0.05 * (fixed + linked + deep)
# No cgroup2 is mounted in this VM, so /proc/<pid>/cgroup is empty: that answer is cached like
# any other (it was read again for every sample: an open, a read and a close each)
reads = count("cgroup_reads")
# one read per process sampled at most (the guest's own tools run beside the workload: the
# wait for the sampler spawns some), never one per sample
procs = len({s.labels.get("pid") for s in pt.samples(path)})
print(f"cgroup_reads={reads} for {count('samples')} samples of {procs} processes")
ok &= reads <= max(5, procs)
sys.exit(0 if ok else 1)
PY
echo "bpf on $(sed -n 's/.*@@vm up \([^ ]*\) .*/\1/p' "$console") ($arch): ok"

PYTHONPATH="$EP_TOP/bpf" /usr/bin/python3 - "$tmp/cfi.out" "$gw/tests/workloads/bpf-work-nofp" <<'PY' || exit 1
import sys
import probe_report as pr
samples = pr.load(sys.argv[1])
nm = pr.Nm(sys.argv[2])
own = [nm.frames(s) for s in samples if s.comm.startswith("bpfw-fixed") and s.user]
own = [f for f in own if f[-1] in ("work_a", "work_b", "work_c")]
good = [f for f in own if f[0] == "_start" and f.count("nest") == 21 and "main" in f and
        f[-2] == "fixed_rounds"]
share = 100.0 * len(good) / len(own) if own else 0.0
# The first samples come before the process is listed for table walks (at its ~4th sample,
# read by the probe a poll later: under TCG on a busy machine, seconds; 31 % of the samples in
# one arm64 run): judged from the first whole one on, when the tables are in.
whole = [f in good for f in own]
first = whole.index(True) if True in whole else len(own)
late = whole[first:]
late_share = 100.0 * sum(late) / len(late) if late else 0.0
print(f"cfi: bpf-work-nofp samples in work_*: {len(own)}, whole {share:.1f}%; "
      f"from the first whole one (sample {first}) on: {len(late)}, whole {late_share:.1f}%")
if own and len(good) < len(own):
    print("  e.g. " + " > ".join(str(x) for x in next(f for f in own if f not in good)))
sys.exit(0 if len(late) >= 150 and late_share >= 95.0 else 1)
PY

grep -q '^@@offcpu rc=0' "$console" || { echo "edgeprof-agent --profiles offcpu failed in the VM"; exit 1; }
received offcpu "$tmp/offcpu.pb.gz" || exit 1
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/wall.out" "$tmp/offcpu.pb.gz" <<'PY'
import sys, collections
import pprof_traces as pt
truth, tids = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "tid":
        tids[f[1]] = f[2]
    else:
        truth[f[0]] = int(f[1])
ss = pt.samples(sys.argv[2], index="offcpu", symbolize=True)
by_tid = collections.Counter()
for s in ss:
    by_tid[s.labels.get("thread", "")] += s.value
want = collections.Counter()
for fn in ("sleep_a", "poll_b", "select_d", "read_e", "join_all"):
    want[tids[fn]] += truth[fn]
ok = bool(want)
# bpf-offcpu.test.sh checks each thread within 3 %. Under TCG the threads that block in many
# short calls (20-50 ms) come out 1-10 % short, more when this machine is busy (x86_64 5.10:
# -1.8 % and -5.9 % in two runs; arm64 6.1 and 5.10 alike), with nothing dropped or under the
# threshold counted, while read_e's one long block stays within 0.1 %: likely each call's own
# on-CPU part (entry, timer set-up, exit; not proven), which the workload's clock around the call
# counts and off-CPU time does not, slow under emulation. So: threads within 12 %, read_e 3 %.
tol = 12
for tid, ns in sorted(want.items()):
    got = by_tid.get(tid, 0)
    err = 100.0 * (got - ns) / ns
    fns = [f for f in truth if tids.get(f) == tid and f != "work_main"]
    print(f"offcpu: thread {tid} ({'+'.join(fns)}): {got/1e6:.1f} ms vs {ns/1e6:.1f} ms "
          f"measured ({err:+.2f}%, want within {tol}%)")
    ok &= abs(err) <= tol
head = " ".join(pt.header(sys.argv[2], "offcpu"))
print("offcpu counters:", ([l for l in head.split("edgeprof ") if l.startswith("offcpu")] + [""])[0][:200])
got = sum(s.value for s in ss if s.labels.get("thread") == tids["read_e"] and "read_e" in s.frames)
print(f"offcpu: stacks through read_e: {got/1e6:.1f} ms vs {truth['read_e']/1e6:.1f} ms")
ok &= abs(got - truth["read_e"]) <= 0.03 * truth["read_e"] + 25e6
sys.exit(0 if ok else 1)
PY
