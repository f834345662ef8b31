#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent's memory with the unwind tables of a process like python3 loaded (issue 16: <= 12
# MiB): Debian's python3.11 runs a loop (its stripped executable: 65 847 rows of .eh_frame)
# while edgeprof-agent --sampler bpf profiles the whole machine, with tables (the default) and
# then without (EDGEPROF_BPF_NO_CFI=1), each for one --once round. Printed per variant: peak
# VmRSS (polled every 0.2 s) and VmHWM, RssAnon/RssFile/RssShmem at the peak, the agent's CPU,
# python3's samples and the share of them walked to __libc_start_main, and the tables' counters
# from the profile's comment (cfi_listed: processes listed over the round, the machine's others
# too; cfi_rows: rows built).
#
#   tests/bench/bpf-rss.sh [SECONDS]     (root; after make BOARD=host-x86_64 all-tests;
#                                         default 10 s a variant, 999 Hz; HZ= to change)
#   EP_BUILD=build/host-x86_64 HZ=99 tests/bench/bpf-rss.sh 20
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${EP_BUILD:-$top/build/host-x86_64}
secs=${1:-10}
hz=${HZ:-999}
py=/usr/bin/python3.11 # Debian's (a pyenv shim first in PATH would be a shell script)
[ -x "$py" ] || py=/usr/bin/python3
[ -x "$build/edgeprof-agent" ] || { echo "no $build/edgeprof-agent: make BOARD=host-x86_64"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (BPF)"; exit 1; }
W=$(mktemp -d /tmp/bpf-rss.XXXXXX)
work=
cleanup() {
	[ -z "$work" ] || { kill "$work" 2>/dev/null; wait "$work" 2>/dev/null; } || true
	rm -rf "$W"
}
trap cleanup EXIT

# The loop of tests/bench/stacks-bench.py, long enough for both variants.
"$py" -c "
import time
def f(n):
    s = 0
    for i in range(n):
        s += i * i % 7
    return s
def g(n):
    return f(n)
end = time.time() + $((2 * secs + 20))
while time.time() < end:
    g(200000)
" &
work=$!
sleep 1 # exec'd: its comm is python3's
comm=$(cut -c1-15 </proc/$work/comm)
awk '{print $6}' /proc/$work/maps | grep '^/' | sort -u >"$W/py.files"

echo "agent RSS with tables, system-wide beside $py (pid $work); $hz Hz, $secs s a variant;" \
	"load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %9s %9s %8s %8s %9s %8s %10s %8s  %s\n' variant "peak RSS" VmHWM anon file shmem \
	"CPU s" "$comm n" "->start" "tables"
for v in tables none; do
	out=$W/$v
	mkdir -p "$out"
	env=
	[ "$v" = tables ] || env=EDGEPROF_BPF_NO_CFI=1
	# shellcheck disable=SC2086
	env $env "$build/edgeprof-agent" --once --seconds "$secs" --sampler bpf --hz "$hz" \
		--output-dir "$out" 2>"$W/$v.log" &
	a=$!
	sleep 0.3 # its own code and libraries, before it reads any other program's
	awk '{print $6}' /proc/$a/maps | grep '^/' | sort -u >"$W/$v.own"
	peak=0 hwm=0 parts='' cpu=0
	while kill -0 "$a" 2>/dev/null; do
		s=$(cat /proc/$a/status 2>/dev/null) || break
		r=$(echo "$s" | awk '$1 == "VmRSS:" {print $2}')
		h=$(echo "$s" | awk '$1 == "VmHWM:" {print $2}')
		[ -n "$h" ] && hwm=$h
		if [ -n "$r" ] && [ "$r" -gt "$peak" ]; then
			peak=$r
			parts=$(echo "$s" | awk '$1 ~ /^Rss(Anon|File|Shmem):$/ {printf "%s ", $2}')
			cp /proc/$a/smaps "$W/$v.smaps" 2>/dev/null || true
		fi
		c=$(awk '{print $14 + $15}' /proc/$a/stat 2>/dev/null) || true
		[ -z "$c" ] || cpu=$c
		sleep 0.2
	done
	wait "$a" || { tail -n 5 "$W/$v.log"; exit 1; }
	prof=$(ls "$out"/*.pb.gz)
	# python3's samples, and those whose stack reaches libc's __libc_start_main (whole)
	counts=$(PYTHONPATH="$top/tests/workloads" /usr/bin/python3 -c "
import sys, pprof_traces as pt
ss = [s for s in pt.samples(sys.argv[1], index='samples')
      if s.labels.get('comm', '').strip('[]') == sys.argv[2]]
n = sum(s.value for s in ss)
w = sum(s.value for s in ss if any('__libc_start_main' in f for f in s.frames))
print(f'{n:.0f} {100.0 * w / n if n else 0:.1f}%')" "$prof" "$comm")
	cfi=$(go tool pprof -comments "$prof" 2>/dev/null | tr ' ' '\n' |
		grep -E '^cfi_(listed|procs|rows|files|files_evicted)=' | tr '\n' ' ')
	# shellcheck disable=SC2086
	printf '%-8s %5.1f MiB %5.1f MiB %8s %8s %9s %8s %10s %8s  %s\n' "$v" "$(echo "$peak" |
		awk '{print $1 / 1024}')" "$(echo "$hwm" | awk '{print $1 / 1024}')" $parts \
		"$(echo "$cpu" | awk '{print $1 / 100}')" $counts "$cfi"
done
# Its own (code and libraries, mapped as it starts), python3's files (mapped for its tables
# or leaf rules), the rest: files of the machine's other programs the agent read the tables of.
for v in tables none; do
	awk '/^[0-9a-f]+-[0-9a-f]+ / { name = $6 ? $6 : "[anon]" }
		$1 == "Rss:" { rss[name] += $2 }
		END { for (n in rss) print rss[n], n }' "$W/$v.smaps" >"$W/$v.rss"
	awk -v own="$W/$v.own" -v py="$W/py.files" '
		BEGIN { while ((getline l <own) > 0) o[l] = 1; while ((getline l <py) > 0) p[l] = 1 }
		$2 !~ /^\// { a += $1; next }
		$2 in o { s += $1; next }
		$2 in p { q += $1; next }
		{ r += $1 }
		END { printf "%s at the peak, KiB: not files %d, its own files %d, python3'"'"'s %d, " \
			"other programs'"'"' %d\n", v, a, s, q, r }' v="$v" "$W/$v.rss"
done
for v in tables none; do
	echo "largest mappings at the peak, $v (KiB resident):"
	awk '/^[0-9a-f]+-[0-9a-f]+ / { name = $6 ? $6 : "[anon]" }
		$1 == "Rss:" { rss[name] += $2 }
		END { for (n in rss) if (rss[n] >= 256) printf "  %7d  %s\n", rss[n], n }' \
		"$W/$v.smaps" | sort -rn | head -8
done
echo "(anon/file/shmem: KiB at the peak; file: pages of mapped ELF files (the agent's own and the
sampled programs' whose .eh_frame it reads: clean page cache, shared); CPU: user+system ticks before" \
	"exit, start-up included; ->start: $comm's samples whose stack reaches __libc_start_main)"
