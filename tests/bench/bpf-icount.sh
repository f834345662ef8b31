#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Per-sample cost of the BPF sampler against perf's, in a machine whose clock is its instruction
# count: a VM (Debian's 6.1 cloud kernel, arm64 or x86_64) under qemu-system's TCG with -icount
# shift=0, one vCPU.
# Guest time then advances 1 ns per instruction executed, whatever the host is doing, so a fixed
# workload's CPU time (perf stat's task-clock, interrupts included) repeats to ~0.01% and the
# slowdown a profiler's sampling interrupts add to it is measured, not lost in a shared VM's
# +-15% noise (tests/bench/bpf-bench.sh, cost phase).
#
# What it counts is instructions, not cycles: TCG models no caches or pipeline, so a cache miss
# costs what an add does. The ratio ours/perf is the figure; the ns are instructions. On x86_64
# TCG counts each iteration of a rep movs/stos as one: the guest kernel is booted with
# clearcpuid=erms,fsrm,rep_good (X86_CMDLINE= to drop it), so its memset/memcpy are loops of
# 8-byte moves, as arm64's are of 16-byte pairs, not one "instruction" per byte.
#
#   tests/bench/bpf-icount.sh       (after: make BOARD=gateway-arm64 all-tests and
#                                    tools/setup.sh --arch arm64 --bench, as root)
#   ARCH=x86_64 tests/bench/bpf-icount.sh   (after: make BOARD=host-x86_64 all-tests and
#                                    tools/setup.sh --bench: the host board's build)
#   RUNS=3 WORK='fixed 100' HZ=4999 tests/bench/bpf-icount.sh
#   WORK='fixed 100 40' ...          (40 more frames under the work: deeper stacks)
#   WORK='fixed-syscall 20' ...      (reads from /dev/zero: samples with kernel stacks)
#   VARIANTS='ours perf ours:--no-kernel-stacks ours:EDGEPROF_BPF_PERFBUF=1 perf:--user-callchains'
#                                    (after a colon: arguments, or NAME=VALUE for the environment)
#   PEER_AGENT=/tmp/old/edgeprof-agent VARIANTS='ours peer' ...   (another build's agent: a
#                                    before/after of a change to the BPF program)
#   WORKBIN=bpf-work-nofp ...        (the workload built -O2 -fomit-frame-pointer, as distributions
#                                    build: whole stacks only by unwind tables; with
#                                    VARIANTS='ours ours:EDGEPROF_BPF_NO_CFI=1 perf
#                                    perf:--call-graph,dwarf' beside perf's own two ways)
#   WORK2='fixed 300' ...            (a longer run of the same workload after each: the whole
#                                    cost's marginal figures, (long - short) / (samples
#                                    long - short), one-time costs of every profiler cancelled)
#   CONSOLE=/tmp/c.txt ...           (keeps the VM's console: tests/bench/bpf-icount.py
#                                    /tmp/c.txt HZ VARIANTS COMM prints the tables again)
#   BPF_STATS=1 ...                  (kernel.bpf_stats_enabled: also our BPF program's own
#                                    instructions a run, helpers included, from the agent's
#                                    program fd; the stats' clock reads add to every sample,
#                                    so the per-sample figures of such a run are not perf's peers)
#
# Each run (its start shifted by up to 0.1 s: without that, runs are identical), in alternation: `bpf-work $WORK` alone, then beside each variant (ours: the
# agent's BPF sampler at HZ system-wide; perf: `perf record -a -g -F HZ`; after a colon, extra
# arguments). Reported per variant: the workload's task-clock (medians), the samples it took
# (counted in the profile), the slowdown per sample, the profiler's own task-clock, ratios.
# Then the whole cost of a sample, what a user pays to get stacks: the slowdown (in the kernel),
# plus the profiler's CPU from the workload's start to its exit (its start-up before that is
# apart), plus for perf `perf script` turning its records into symbolised stacks (for the dwarf
# mode: unwinding each copied stack); ours: the agent's pprof, symbolised, is the product.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
ARCH=${ARCH:-arm64}
RUNS=${RUNS:-3}
WORK=${WORK:-fixed 100}
HZ=${HZ:-4999}
VARIANTS=${VARIANTS:-ours perf}
WORKBIN=${WORKBIN:-bpf-work}
case $ARCH in
arm64)
	board=gateway-arm64 vm=$top/build/vm-arm64 libc=/usr/aarch64-linux-gnu/lib
	ldso=ld-linux-aarch64.so.1 ldso_dir=lib multiarch=aarch64-linux-gnu
	setup="tools/setup.sh --arch arm64 --bench"
	# pauth-impdef: TCG's architected pointer-auth cipher is slow; the cheaper one is the same.
	qemu="qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on" console=ttyAMA0 cmdline= ;;
x86_64)
	board=host-x86_64 vm=$top/build/vm-amd64 libc=/lib/x86_64-linux-gnu
	ldso=ld-linux-x86-64.so.2 ldso_dir=lib64 multiarch=x86_64-linux-gnu
	setup="tools/setup.sh --bench"
	qemu="qemu-system-x86_64 -M pc -cpu max" console=ttyS0
	cmdline=${X86_CMDLINE-clearcpuid=erms,fsrm,rep_good} ;;
*) echo "ARCH is arm64 or x86_64"; exit 2 ;;
esac
gw=$top/build/$board

for c in ${qemu%% *} cpio gzip go; do
	command -v "$c" >/dev/null || { echo "no $c: run $setup"; exit 1; }
done
[ -f "$vm/vmlinuz" ] && [ -x "$vm/perf/bin/perf" ] ||
	{ echo "no $ARCH VM kernel or perf in $vm: run $setup"; exit 1; }
[ -x "$gw/edgeprof-agent" ] && [ -x "$gw/tests/workloads/$WORKBIN" ] ||
	{ echo "$board not built: make BOARD=$board all-tests"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
lib=$root/lib/$multiarch
mkdir -p "$root"/{bin,dev,proc,sys,tmp,$ldso_dir} "$lib"
cp "$vm/busybox" "$gw/edgeprof-agent" "$vm/perf/bin/perf" "$root/bin/"
cp "$gw/tests/workloads/$WORKBIN" "$root/bin/bpf-work"
[ -z "${PEER_AGENT:-}" ] || cp "$PEER_AGENT" "$root/bin/edgeprof-agent-peer"
cp -P "$vm"/perf/lib/* "$lib/"
cp -L "$libc/$ldso" "$root/$ldso_dir/"
cp -L "$libc"/{libc.so.6,libm.so.6} "$lib/"
# A dynamic build (host-x86_64) brings the libraries it links from this machine.
for f in "$root"/bin/edgeprof-agent*; do
	ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
		while read -r l; do [ -e "$lib/$(basename "$l")" ] || cp -L "$l" "$lib/"; done
done
{
	echo "RUNS=$RUNS HZ=$HZ BPF_STATS=${BPF_STATS:-0}"
	printf 'WORK=%q\n' "$WORK"
	printf 'WORK2=%q\n' "${WORK2:-}"
	printf 'VARIANTS=%q\n' "$VARIANTS"
	cat <<'EOF'
# PID 1: mount, run the variants in alternation with markers the host reads, power off.
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
echo 1 >/proc/sys/kernel/printk
# ASLR off in the guest (as tests/bench/stacks-bench.py runs perf): with it on, perf 6.1's
# perf script unwound no user frame of any dwarf record in 1 run of 4 (post-processing that
# does nothing is cheap); ours does not care
echo 0 >/proc/sys/kernel/randomize_va_space
[ "$BPF_STATS" = 1 ] && echo 1 >/proc/sys/kernel/bpf_stats_enabled
echo "@@vm up $(uname -r) $(uname -m) cpus=$(nproc)"
cd /tmp
comm=$(echo "bpfw-${WORK%% *}" | cut -c1-15) # the workload's, as the kernel keeps it
# The workload under perf stat: its task-clock (ns of guest time = instructions) and count.
work() {
	perf stat -x, -e task-clock -o /tmp/work.stat -- bpf-work $W || echo "@@error work"
	echo "@@task-clock $1 $2 $(sed -n 's/^\([0-9.]*\),msec,task-clock.*/\1/p' /tmp/work.stat)"
}
# SIGINT to the profiler (not to the perf stat around it): both write what they sampled.
stop_profiler() {
	for p in $(pidof edgeprof-agent edgeprof-agent-peer perf); do
		case "$(tr '\0' ' ' </proc/$p/cmdline)" in
		"edgeprof-agent"*|"perf record "*) kill -INT "$p" ;;
		esac
	done
}
# Our sampling program's run time and runs (fdinfo of the agent's program fds; under -icount
# its ns are instructions).
bpf_stats() {
	for p in $(pidof edgeprof-agent edgeprof-agent-peer); do
		cat /proc/$p/fdinfo/* 2>/dev/null | awk -v tag="@@bpf-stats $1 $2" '
			$1 == "run_time_ns:" { t = $2 } $1 == "run_cnt:" && $2 > 0 { print tag, t, $2 }'
	done
}
# A process's CPU so far, ns: its threads' run time (schedstat; under -icount instructions),
# else its user+system ticks (USER_HZ 100).
cpu_ns() {
	s=$(cat /proc/$1/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }')
	[ -n "$s" ] && [ "$s" != 0 ] && { echo "$s"; return; }
	awk '{ printf "%.0f", ($14 + $15) * 1e7 }' /proc/$1/stat
}
# The profiler's pid (not the perf stat around it).
prof_pid() {
	for p in $(pidof edgeprof-agent edgeprof-agent-peer perf); do
		case "$(tr '\0' ' ' </proc/$p/cmdline)" in
		"edgeprof-agent"*|"perf record "*) echo "$p"; return ;;
		esac
	done
}
# perf's second half: the samples turned into stacks (`perf script`, symbolised, as a user
# reads them; perf report unwinds the same way), all of them and the workload's alone
# (--comm: the other samples are read but not unwound), each under perf stat. --no-inline:
# the guest has no addr2line, which perf runs for inlined frames: writing to it killed perf
# script with SIGPIPE part way (its cost then did not grow with the samples; perf stat
# said nothing); on a machine with addr2line, inline frames cost perf script more.
script_timed() {
	tag=$1; shift
	perf stat -x, -e task-clock -o /tmp/script.stat -- sh -c \
		'perf script --no-inline -i /tmp/p.data "$@" >/dev/null 2>>/tmp/script.log;
		echo $? >/tmp/script.rc' sh "$@"
	[ "$(cat /tmp/script.rc)" = 0 ] ||
		echo "@@log $name $i: perf script ($tag) exited $(cat /tmp/script.rc): its time is not whole"
	echo "@@script $name $i $tag $(sed -n 's/^\([0-9.]*\),msec,task-clock.*/\1/p' /tmp/script.stat)"
}
post_process() {
	: >/tmp/script.log
	script_timed all
	script_timed comm --comm "$comm"
	echo "@@records $1 $2 $(perf script -i /tmp/p.data -F comm 2>/dev/null | wc -l)"
	# what perf script made of them: user frames a workload sample (a dwarf record unwound
	# only to its leaf would make perf script cheap and wrong), and its complaints
	echo "@@depth $1 $2 $(perf script --no-inline -i /tmp/p.data --comm "$comm" -F comm,ip,dso 2>/dev/null |
		awk '/^[^ \t]/ { n++ } /^\t/ && !/kernel/ { f++ } END { printf "%.1f", n ? f / n : 0 }')"
	sort /tmp/script.log | uniq -c | sort -rn | head -3 | sed "s/^/@@log $1 $2: perf script: /"
}
# The profiler under perf stat too (its own task-clock), started before the workload and
# stopped after it, as a profiler that is already running when work arrives. Its CPU is also
# read when the workload starts and ends: before, its start-up; between, its steady state
# (over the window's length in guest time, /proc/uptime); after, its finish (ours: naming and
# writing the profile; perf record: its pass over the data for build-ids).
profiled() {
	name=$1 kind=$2 i=$3 args= envs=
	for a in $4; do # NAME=VALUE words set the profiler's environment, the others are arguments
		case $a in [A-Z]*=*) envs="$envs $a" ;; *) args="$args $a" ;; esac
	done
	rm -rf /tmp/out /tmp/p.data; mkdir /tmp/out
	case $kind in
	ours|peer) agent=edgeprof-agent; [ "$kind" = ours ] || agent=edgeprof-agent-peer
		perf stat -x, -e task-clock -o /tmp/prof.stat -- env $envs $agent --once --seconds 600 \
		--sampler bpf --hz "$HZ" --output-dir /tmp/out $args >/tmp/prof.log 2>&1 & ;;
	perf) perf stat -x, -e task-clock -o /tmp/prof.stat -- perf record -a -g -F "$HZ" \
		-o /tmp/p.data $args >/tmp/prof.log 2>&1 & ;;
	esac
	sleep 2
	# Under -icount every run would repeat the last one instruction for instruction: a shift
	# of the workload's start against the sampling timer and the profiler's wake-ups makes
	# the runs differ, so their spread shows how much one small change of timing moves a figure.
	usleep $(( (i * 37591) % 100003 ))
	pp=$(prof_pid)
	c0=$(cpu_ns "$pp") u0=$(cut -d' ' -f1 /proc/uptime)
	work "$name" "$i"
	c1=$(cpu_ns "$pp") u1=$(cut -d' ' -f1 /proc/uptime)
	echo "@@prof-window $name $i $c0 $c1 $u0 $u1"
	[ "$BPF_STATS" = 1 ] && bpf_stats "$name" "$i"
	stop_profiler
	wait
	echo "@@prof-clock $name $i $(sed -n 's/^\([0-9.]*\),msec,task-clock.*/\1/p' /tmp/prof.stat)"
	case $kind in
	ours|peer) echo "@@pprof $name $i"; cat /tmp/out/*.pb.gz 2>/dev/null | base64; echo "@@end" ;;
	perf) echo "@@samples $name $i $(perf script -i /tmp/p.data -F comm 2>/dev/null |
		awk -v c="$comm" '$1 == c' | wc -l)"
		post_process "$name" "$i" ;;
	esac
	grep -i -E 'error|warn|lost|drop' /tmp/prof.log | sed "s/^/@@log $name $i: /" | head -5
}
for i in $(seq 1 "$RUNS"); do
	for W in "$WORK" "$WORK2"; do # names of WORK2's runs end in @2
		[ -n "$W" ] || continue
		sfx=; [ "$W" = "$WORK" ] || sfx=@2
		work "base$sfx" "$i"
		for v in $VARIANTS; do
			kind=${v%%:*}; args=; [ "$kind" = "$v" ] || args=$(echo "${v#*:}" | tr ',' ' ')
			profiled "$v$sfx" "$kind" "$i" "$args"
		done
	done
done
echo "@@vm done"
poweroff -f
EOF
} >"$tmp/init.body"
{ echo '#!/bin/busybox sh'; cat "$tmp/init.body"; } >"$root/init"
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$tmp/initrd.gz"

echo "== per-sample cost, counted in instructions: $ARCH VM under qemu -icount shift=0 (1 vCPU);"
echo "   $WORKBIN $WORK${WORK2:+ and $WORK2} alone and beside: $VARIANTS; $HZ Hz; $RUNS alternating runs"
start=$(date +%s)
# sleep=off: idle guest time is skipped, not waited for (the clock stays instruction-driven).
# shellcheck disable=SC2086
timeout 3600 $qemu -smp 1 -m 1024 \
	-icount shift=0,sleep=off -nographic -no-reboot -nic none -kernel "$vm/vmlinuz" \
	-initrd "$tmp/initrd.gz" -append "console=$console panic=-1 quiet $cmdline" </dev/null 2>&1 |
	tr -d '\r' >"$tmp/console"
echo "   qemu ran $(( $(date +%s) - start )) s"
grep -q '^@@vm done' "$tmp/console" ||
	{ tail -n 30 "$tmp/console"; echo "the VM did not finish"; exit 1; }
[ -z "${CONSOLE:-}" ] || cp "$tmp/console" "$CONSOLE" # kept for bpf-icount.py again
PYTHONPATH="$top/tests/workloads" /usr/bin/python3 "$top/tests/bench/bpf-icount.py" \
	"$tmp/console" "$HZ" "$VARIANTS" "bpfw-${WORK%% *}"
