#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The harm suite: libedgeprof.so must not change what a program does. Each case runs a program
# without the profiler and with it (LD_PRELOAD, 999 Hz, agent mode: rings in a private
# registry) and compares exit status and a checksum of stdout; wall times give the overhead.
#
#   cases: tests/workloads/harm (one mode each: see harm.c) — a stale module table under
#   iconv+dlopen, signal resets, the program's own ITIMER_PROF, a SA_ONSTACK handler on a small
#   alternate stack, a thread with 4 KiB of stack left, deadlock hunters (dlopen/dlclose,
#   pthread_cancel unwinding, backtrace(), thread churn, fork/exec, exec chains), C++
#   exceptions; Debian's sort (SIGPROF handler), xz -T2, gzip, python3, sqlite3 and a bash
#   loop of 300 commands; lua5.4, lua5.1, luajit, a single-threaded python3 whose brk heap
#   grows and shrinks, node; also with EDGEPROF_SIGNAL=prof (the sampler steps aside).
#   Then: the handler's stack use beyond the kernel's frame (<= 1 KiB), the time the library
#   adds to a process (/bin/true, agent mode <= 1 ms; standalone, which writes a profile at
#   exit, <= 10 ms: it was 20 ms more before the drain thread was woken at exit), and no ring
#   file left behind by processes without samples. The ARM boards, when built beside the host
#   board (build/gateway-arm64, build/gateway-armv7), run the signal and stack cases and the
#   stack measure under qemu-user.
# Prints a table: case, runs, failures, overhead. ~1.5 minutes (~2 with the ARM boards).
set -u
lib=$EP_BUILD/libedgeprof.so
harm=$EP_BUILD/tests/workloads/harm
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
tmp=$(mktemp -d)
# rings where they live by default: tmpfs
reg=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$tmp" "$reg"' EXIT
hz=${HARM_HZ:-999}
rc=0
rows=()

now_ns() { date +%s%N; }

# one run: "rc md5 wall_ns" of CMD (stdout checksummed, stderr kept in $tmp/err)
run1() {
	local t0 t1 st sum
	t0=$(now_ns)
	timeout 120 "$@" >"$tmp/out" 2>"$tmp/err"
	st=$?
	t1=$(now_ns)
	sum=$(md5sum <"$tmp/out" | cut -c1-12)
	echo "$st $sum $((t1 - t0))"
}

# check NAME RUNS [ENV=V ...] -- CMD...: compares RUNS runs without and with the profiler
# ($qemu set: CMD is an ARM binary run under qemu-user, with $qlib preloaded)
qemu=()
check() {
	local name=$1 runs=$2 fail=0 tw=0 tp=0 envs=() with=()
	shift 2
	while [ "$1" != "--" ]; do envs+=("$1"); shift; done
	shift
	if [ ${#qemu[@]} = 0 ]; then
		with=(env LD_PRELOAD="$lib" EDGEPROF_REGISTRY="$reg" EDGEPROF_HZ="$hz" "${envs[@]}")
	else
		with=("${qemu[@]}" -E LD_PRELOAD="$qlib" -E EDGEPROF_REGISTRY="$reg" -E EDGEPROF_HZ="$hz")
		for e in "${envs[@]}"; do with+=(-E "$e"); done
	fi
	for ((i = 0; i < runs; i++)); do
		read -r st0 sum0 w0 < <(run1 "${qemu[@]}" "$@")
		read -r st1 sum1 w1 < <(run1 "${with[@]}" "$@")
		tw=$((tw + w0))
		tp=$((tp + w1))
		if [ "$st0" != 0 ] || [ "$st1" != "$st0" ] || [ "$sum1" != "$sum0" ]; then
			fail=$((fail + 1))
			echo "!! $name: without rc=$st0 out=$sum0, with rc=$st1 out=$sum1"
			tail -n 3 "$tmp/err" | sed 's/^/   /'
		fi
	done
	[ $fail = 0 ] || rc=1
	rows+=("$(printf '%-30s %4d %8d %+8.1f%%' "$name" "$runs" "$fail" \
		"$(awk -v a="$tp" -v b="$tw" 'BEGIN {print b ? 100 * (a - b) / b : 0}')")")
}

# ---- the harms of issue 23, and deadlock hunters ---------------------------------------------
check iconv+dlopen 2 -- "$harm" iconv 2
check sigreset 2 -- "$harm" sigreset
check sigreset/prof 1 EDGEPROF_SIGNAL=prof -- "$harm" sigreset
check itimer 2 -- "$harm" itimer
check itimer/prof 1 EDGEPROF_SIGNAL=prof -- "$harm" itimer
check altstack-10k 2 -- "$harm" altstack 10240
check stack-4k-left 2 -- "$harm" stackmargin 4096
check dlopen-loop 1 -- "$harm" dlloop 1
check cancel-unwind 1 -- "$harm" cancel 1
check backtrace 1 -- "$harm" backtrace 1
check thread-churn 1 -- "$harm" threads 800
check fork-exec 1 -- "$harm" forkexec 200
check exec-chain 1 -- "$harm" execchain 100

if command -v g++ >/dev/null; then
	cat >"$tmp/exc.cc" <<'EOF'
// C++ exceptions thrown through 20 frames in 3 threads: libgcc's unwinder beside ours
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>
static int deep(int n) { if (!n) throw std::runtime_error("x"); return deep(n - 1) + 1; }
int main() {
	std::vector<std::thread> ts; long caught[3] = {};
	for (int t = 0; t < 3; t++)
		ts.emplace_back([&caught, t] { for (int i = 0; i < 60000; i++)
			try { deep(20); } catch (const std::exception &) { caught[t]++; } });
	for (auto &t : ts) t.join();
	std::printf("caught %ld\n", caught[0] + caught[1] + caught[2]);
	return caught[0] + caught[1] + caught[2] != 180000;
}
EOF
	g++ -O2 -pthread -o "$tmp/exc" "$tmp/exc.cc" && check cxx-exceptions 1 -- "$tmp/exc"
	cat >"$tmp/cxxnew.cc" <<'EOF'
// new/delete, containers and strings in 4 threads: libstdc++'s operator new reaches our malloc
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>
int main() {
	std::vector<std::thread> ts; unsigned long sums[4] = {};
	for (int t = 0; t < 4; t++)
		ts.emplace_back([&sums, t] { std::map<int, std::string> m;
			for (int i = 0; i < 200000; i++) {
				m[i % 5000] = std::string(16 + i % 300, 'a' + t);
				auto *v = new std::vector<int>(i % 1000, i); sums[t] += v->size(); delete v;
			}
			for (auto &kv : m) sums[t] += kv.second.size(); });
	for (auto &t : ts) t.join();
	std::printf("%lu %lu %lu %lu\n", sums[0], sums[1], sums[2], sums[3]);
}
EOF
	g++ -O2 -pthread -o "$tmp/cxxnew" "$tmp/cxxnew.cc" && check cxx-new 1 -- "$tmp/cxxnew"
fi

# ---- real Debian programs ----------------------------------------------------------------------
head -c 4000000 /dev/urandom >"$tmp/rand"
seq 300000 | awk '{print ($1 * 7919) % 300007}' >"$tmp/nums"
check sort 2 -- sort -n "$tmp/nums"
check sort/prof 1 EDGEPROF_SIGNAL=prof -- sort -n "$tmp/nums"
command -v xz >/dev/null && check xz-T2 1 -- xz -T2 -c "$tmp/rand"
check gzip 1 -- gzip -c "$tmp/rand"
if [ -x /usr/bin/python3 ]; then
	check python3 2 -- /usr/bin/python3 -c '
import hashlib, json, threading
out = []
def work(i):
    h = hashlib.sha256()
    for j in range(60000): h.update(json.dumps({"i": i, "j": j}).encode())
    out.append((i, h.hexdigest()))
ts = [threading.Thread(target=work, args=(i,)) for i in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sorted(out))'
fi
command -v sqlite3 >/dev/null && check sqlite3 1 -- sqlite3 :memory: \
	"create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 from c
	 where x < 200000) insert into t select x, x % 97 from c;
	 select b, count(*), sum(a) from t group by b order by b;"
check bash-300-cmds 1 -- bash -c 'for i in $(seq 300); do /bin/true; done; echo done'

# ---- interpreters: their frames are read in the handler, from the brk heap directly when the
# program has one thread (agent/lib/selfread.c); heaps that grow and shrink under the samples --
churn='local s, t = 0, {}
for r = 1, 30 do
  for i = 1, 20000 do t[i] = string.rep("x", i % 64) .. i end
  t = {}
  collectgarbage()
end
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
for i = 1, 2000000 do s = (s + i * 7) % 1000003 end
print(s, fib(24))'
for lua in lua5.4 lua5.1 luajit; do
	command -v $lua >/dev/null && check "$lua" 1 -- $lua -e "$churn"
done
if [ -x /usr/bin/python3 ]; then
	check python3-heap-trim 2 -- /usr/bin/python3 -c '
import gc
s = 0
for r in range(30):
    big = [bytes(200) * (i % 7 + 1) for i in range(60000)]  # malloc above 512 B: the brk heap
    s += sum(len(b) for b in big)
    del big
    gc.collect()  # and its top given back
def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)
print(s, fib(24))'
fi
command -v node >/dev/null && check node 1 -- node -e '
let s = 0;
for (let r = 0; r < 20; r++) {
  const a = [];
  for (let i = 0; i < 100000; i++) a.push({ i, s: "x".repeat(i % 50) });
  s += a.length;
}
console.log(s);'

# ---- with the heap profiler too (standalone, every 4 KiB: many samples, many frees checked) -----
heap=(EDGEPROF_PROFILES=cpu,heap EDGEPROF_HEAP_RATE=4096 "EDGEPROF_OUTPUT=$tmp/heap-%p-%t.pb.gz")
if grep -q '^CONFIG_PROFILE_HEAP=y' "$EP_BUILD/.config"; then
	check heap:iconv+dlopen 1 "${heap[@]}" -- "$harm" iconv 2
	check heap:dlopen-loop 1 "${heap[@]}" -- "$harm" dlloop 1
	check heap:cancel-unwind 1 "${heap[@]}" -- "$harm" cancel 1
	check heap:backtrace 1 "${heap[@]}" -- "$harm" backtrace 1
	check heap:thread-churn 1 "${heap[@]}" -- "$harm" threads 800
	check heap:fork-exec 1 "${heap[@]}" -- "$harm" forkexec 200
	check heap:exec-chain 1 "${heap[@]}" -- "$harm" execchain 100
	[ -x "$tmp/exc" ] && check heap:cxx-exceptions 1 "${heap[@]}" -- "$tmp/exc"
	[ -x "$tmp/cxxnew" ] && check heap:cxx-new 1 "${heap[@]}" -- "$tmp/cxxnew"
	check heap:sort 1 "${heap[@]}" -- sort -n "$tmp/nums"
	command -v xz >/dev/null && check heap:xz-T2 1 "${heap[@]}" -- xz -T2 -c "$tmp/rand"
	[ -x /usr/bin/python3 ] && check heap:python3 1 "${heap[@]}" -- /usr/bin/python3 -c '
import json; d = [json.dumps({"k": i, "v": [i] * (i % 50)}) for i in range(200000)]
print(sum(len(x) for x in d))'
	command -v sqlite3 >/dev/null && check heap:sqlite3 1 "${heap[@]}" -- sqlite3 :memory: \
		"create table t(a, b); with recursive c(x) as (select 1 union all select x + 1 from c
		 where x < 100000) insert into t select x, x % 97 from c;
		 select b, count(*), sum(a) from t group by b order by b;"
	check heap:bash-300-cmds 1 "${heap[@]}" -- bash -c 'for i in $(seq 300); do /bin/true; done; echo done'
	n=$(find "$tmp" -name 'heap-*-heap.pb.gz' | wc -l)
	echo "heap profiles written by the heap cases: $n"
	[ "$n" -gt 0 ] || rc=1
fi

# ---- with the wall-clock profiler too: blocking calls that EINTR under a signal (harm eintr,
# whose control fails when signalled: sigprof-wall), threads, processes, Debian programs ------
wall=(EDGEPROF_PROFILES=cpu,wall "EDGEPROF_OUTPUT=$tmp/wall-%p-%t.pb.gz")
if grep -q '^CONFIG_PROFILE_WALL=y' "$EP_BUILD/.config"; then
	check wall:eintr 2 "${wall[@]}" -- "$harm" eintr 2
	check wall:thread-churn 1 "${wall[@]}" -- "$harm" threads 800
	check wall:fork-exec 1 "${wall[@]}" -- "$harm" forkexec 200
	check wall:cancel-unwind 1 "${wall[@]}" -- "$harm" cancel 1
	check wall:sort 1 "${wall[@]}" -- sort -n "$tmp/nums"
	command -v xz >/dev/null && check wall:xz-T2 1 "${wall[@]}" -- xz -T2 -c "$tmp/rand"
	check wall:bash-300-cmds 1 "${wall[@]}" -- bash -c 'for i in $(seq 300); do /bin/true; done; echo done'
	n=$(find "$tmp" -name 'wall-*-wall.pb.gz' | wc -l)
	echo "wall profiles written by the wall cases: $n"
	[ "$n" -gt 0 ] || rc=1
fi

# ---- the ARM boards under qemu-user, where built (their sampler, unwinder, signals) -----------
for board in gateway-arm64:qemu-aarch64:aarch64-linux-gnu:sysroot-arm64:8192 \
	gateway-armv7:qemu-arm:arm-linux-gnueabihf:sysroot-armhf:4096; do
	IFS=: read -r b q triple sysroot left <<<"$board"
	bdir=$EP_BUILD/../$b
	qlib=$(cd "$bdir" 2>/dev/null && pwd)/libedgeprof.so
	if [ ! -f "$qlib" ] || [ ! -x "$bdir/tests/workloads/harm" ] || ! command -v "$q" >/dev/null; then
		echo "($b: not built or no $q: its cases skipped)"
		continue
	fi
	qemu=("$q" -L "/usr/$triple" -E "LD_LIBRARY_PATH=$(cd "$EP_BUILD/../$sysroot" && pwd)/usr/lib/$triple")
	qh=$bdir/tests/workloads/harm
	check "$b:sigreset" 1 -- "$qh" sigreset
	check "$b:itimer" 1 -- "$qh" itimer
	check "$b:altstack-16k" 1 -- "$qh" altstack 16384
	# the kernel's signal frame alone is 4.7 KiB on arm64 (qemu): 8 KiB left there
	check "$b:stack-${left}-left" 1 -- "$qh" stackmargin "$left"
	check "$b:thread-churn" 1 -- "$qh" threads 200
	# every sample with a stack snapshot (issue 36 item 3: armv7 only), the most it copies
	[ "$b" = gateway-armv7 ] && check "$b:snapshots" 1 EDGEPROF_SNAPSHOT_EVERY=1 \
		"EDGEPROF_OUTPUT=$tmp/q-%p-%t.pb.gz" -- "$qh" threads 200
	# (heap alone: qemu's -E takes a comma as the end of the value)
	grep -q '^CONFIG_PROFILE_WALL=y' "$bdir/.config" && check "$b:wall:eintr" 1 \
		EDGEPROF_PROFILES=wall "EDGEPROF_OUTPUT=$tmp/q-%p-%t.pb.gz" -- "$qh" eintr 2
	grep -q '^CONFIG_PROFILE_HEAP=y' "$bdir/.config" && check "$b:heap:thread-churn" 1 \
		EDGEPROF_PROFILES=heap EDGEPROF_HEAP_RATE=4096 "EDGEPROF_OUTPUT=$tmp/q-%p-%t.pb.gz" \
		-- "$qh" threads 200
	extra=$("${qemu[@]}" -E LD_PRELOAD="$qlib" -E EDGEPROF_REGISTRY="$reg" -E EDGEPROF_HZ="$hz" \
		"$qh" stackuse 2>/dev/null | sed -n 's/^handler_extra_bytes=//p')
	echo "$b: handler stack beyond the kernel's signal frame: ${extra:-?} B (target <= 1024)"
	[ -n "$extra" ] && [ "$extra" -le 1024 ] || rc=1
	if [ -x "$bdir/tests/workloads/harm-notables" ]; then # frames read from the code
		extra=$("${qemu[@]}" -E LD_PRELOAD="$qlib" -E EDGEPROF_REGISTRY="$reg" \
			-E EDGEPROF_HZ="$hz" "$bdir/tests/workloads/harm-notables" stackuse 2>/dev/null |
			sed -n 's/^handler_extra_bytes=//p')
		echo "$b: the same on code without tables: ${extra:-?} B (target <= 1024)"
		[ -n "$extra" ] && [ "$extra" -le 1024 ] || rc=1
	fi
	qemu=()
done

echo
printf '%-30s %4s %8s %9s\n' case runs failures overhead
printf '%s\n' "${rows[@]}"
echo

# ---- the handler's stack ----------------------------------------------------------------------
extra=$(env LD_PRELOAD="$lib" EDGEPROF_REGISTRY="$reg" EDGEPROF_HZ="$hz" "$harm" stackuse \
	2>/dev/null | sed -n 's/^handler_extra_bytes=//p')
echo "handler stack beyond the kernel's signal frame: ${extra:-?} B (target <= 1024)"
[ -n "$extra" ] && [ "$extra" -le 1024 ] || rc=1

# ---- time added to a process (load, start, exit): median of 200 paired /bin/true runs ----------
added_us() { # ENV... -> "added base": microseconds the library adds per run, and what a run costs
	local d=() b=() t0 t1 t2
	for ((i = 0; i < 200; i++)); do
		# env(1) execs in both: the difference is the library's; pairs cancel the drift
		t0=$(now_ns)
		env X=1 /bin/true
		t1=$(now_ns)
		env "$@" /bin/true
		t2=$(now_ns)
		d+=($(((t2 - t1) - (t1 - t0))))
		b+=($((t1 - t0)))
	done
	echo "$(printf '%s\n' "${d[@]}" | sort -n | awk '{a[NR] = $1} END {print int(a[int(NR / 2) + 1] / 1000)}')" \
		"$(printf '%s\n' "${b[@]}" | sort -n | awk '{a[NR] = $1} END {print int(a[int(NR / 2) + 1] / 1000)}')"
}
# Within BOUND us, or within 3/4 of what a process costs here: on a machine where a bare
# /bin/true takes 2.2 ms (this VM on a slow day) every cost of loading a library is twice what it
# is where it takes 1 ms, and 0.35-0.8 ms (README) became 1.2-1.4 ms with the same library
# (2d65da7's). base spans two processes (date's, then env's /bin/true): 3/8 of it.
fits() { # BOUND "added base"
	local added=${2% *} base=${2#* }
	[ "$added" -le "$1" ] || [ $((8 * added)) -le $((3 * base)) ]
}
# best of up to 3 medians: a machine shared with builds can double any single one
best_us() { # BOUND ENV... -> "added base": the first that fits BOUND, else the smallest of 3
	local bound=$1 best="999999999 1" m
	shift
	for try in 1 2 3; do
		m=$(added_us "$@")
		[ "${m% *}" -lt "${best% *}" ] && best=$m
		fits "$bound" "$best" && break
	done
	echo "$best"
}
agent=$(best_us 1000 LD_PRELOAD="$lib" EDGEPROF_REGISTRY="$reg")
# (on tmpfs: the profile is written with fsync, which on a busy disk is what one measures)
alone=$(best_us 10000 LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$reg/true.pb.gz")
echo "time added per /bin/true: agent mode ${agent% *} us (<= 1000 or 3/8 of a run pair's" \
	"${agent#* } us), standalone ${alone% *} us (<= 10000 or 3/8 of ${alone#* } us)"
fits 1000 "$agent" || rc=1
fits 10000 "$alone" || rc=1

# ---- registry: processes without samples leave no ring file -----------------------------------
rm -f "$reg"/*.ring
for ((i = 0; i < 50; i++)); do env LD_PRELOAD="$lib" EDGEPROF_REGISTRY="$reg" /bin/true; done
left=$(find "$reg" -name '*.ring' | wc -l)
echo "ring files left by 50 /bin/true: $left (0 expected)"
[ "$left" = 0 ] || rc=1

[ $rc = 0 ] && echo PASS || echo FAIL
exit $rc
