#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent's scraping (--scrape, issue 22) against real Go programs (tests/workloads/gopprof,
# net/http/pprof, standard library only):
#   tests/bench/scrape-bench.sh [--build build/host-x86_64] [--rounds 10] [--reps 1]
#
# 1. Accuracy of the heap deltas: gopprof allocates exactly TOTAL bytes in allocKnown, spread
#    over --rounds one-second rounds, starting right after the agent's first heap fetch (the
#    baseline); runtime.MemProfileRate = 4096 so that sampling error (~1/sqrt(samples)) is far
#    below the goal. The agent scrapes it (1 s rounds); `edgeprof merge` of every heap delta it
#    wrote gives allocKnown's alloc_space, compared with TOTAL (goal: within 2 %).
# 2. CPU shares: the merged scraped CPU profiles' share of spinA (spinA:spinB burn 2:1 of a whole
#    core) against a direct `go tool pprof` fetch of the same program right after, as long (goal:
#    within 2 pp; ~1,000 samples each at Go's 100 Hz: about 1.5 pp of sampling noise apiece).
# 3. RSS and CPU: the agent's peak RSS (VmHWM) scraping three gopprof targets (every type, 2 s
#    rounds, 6 rounds) minus the same agent scraping none (goal: <= 1 MiB); CPU of the scrape
#    thread per fetch (its own counter) and the whole agent's extra CPU per fetch.
# Medians over --reps. Noisy while others build: prefer --reps 3 on a quiet machine.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/build/host-x86_64 rounds=10 reps=1
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--rounds N] [--reps N]" >&2; exit 2 ;;
	esac
done
agent=$build/edgeprof-agent
"$agent" --help | grep -q -- "--scrape " || { echo "agent built without CONFIG_AGENT_SCRAPE"; exit 1; }
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
export HOME=$tmp GOCACHE=$build/tests/go-cache
gopprof=$("$top/tests/workloads/gopprof/build.sh" "$build")

start_go() { # OUT ARGS... -> port in $port, pid appended to pids (run it in this shell)
	local out=$1
	shift
	"$gopprof" "$@" >"$out" 2>&1 &
	pids+=($!)
	for _ in $(seq 1 100); do grep -q listening "$out" && break; sleep 0.05; done
	port=$(awk '/listening/ {print $2}' "$out")
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

# 1 and 2: one run -> "alloc_err_pct n_deltas cpu_scraped_pct cpu_direct_pct"
accuracy() {
	local d=$tmp/acc.$1 total=$((rounds * 32 * 1048576)) a cs cd
	mkdir -p "$d/out"
	start_go "$d/go.out" -memprofilerate 4096 -alloc-rate $((32 * 1048576)) \
		-alloc-total $total -keep 64 -duty 1
	"$agent" --sampler sigprof --registry "$d/reg" --output-dir "$d/out" --round-seconds 1 \
		--period-seconds 1 --jitter-percent 0 --scrape-types cpu,heap \
		--scrape "go=http://127.0.0.1:$port" 2>"$d/agent.log" &
	local apid=$!
	for _ in $(seq 1 $((rounds * 40 + 200))); do grep -q alloc-done "$d/go.out" && break; sleep 0.05; done
	grep -q alloc-done "$d/go.out" || { echo "gopprof never finished its allocations" >&2; exit 1; }
	sleep 2.5 # two more rounds: the last heap delta after its final GC
	kill -INT $apid
	wait $apid || true
	total=$(awk '/alloc-done/ {print $2}' "$d/go.out")
	"$build/edgeprof" merge -o "$d/heap.pb.gz" "$d"/out/go-heap-* >/dev/null
	"$build/edgeprof" merge -o "$d/cpu.pb.gz" "$d"/out/go-cpu-* >/dev/null
	a=$(go tool pprof -top -nodecount=500 -sample_index=alloc_space -unit=B "$d/heap.pb.gz" \
		2>/dev/null | awk '$NF == "main.allocKnown" {print $1 + 0}')
	cs=$(go tool pprof -top -nodecount=500 "$d/cpu.pb.gz" 2>/dev/null |
		awk '$NF == "main.spinA" {a = $1 + 0} $NF == "main.spinB" {b = $1 + 0} END {print 100 * a / (a + b)}')
	cd=$(go tool pprof -top -nodecount=500 -seconds $((rounds < 5 ? 5 : rounds)) \
		"http://127.0.0.1:$port/debug/pprof/profile" 2>/dev/null |
		awk '$NF == "main.spinA" {a = $1 + 0} $NF == "main.spinB" {b = $1 + 0} END {print 100 * a / (a + b)}')
	kill "${pids[-1]}" 2>/dev/null || true
	echo "$(awk -v a="$a" -v t="$total" 'BEGIN {printf "%.3f", 100 * (a - t) / t}') \
$(ls "$d"/out/go-heap-* | wc -l) $cs $cd $a $total"
}

# 3: peak RSS (KiB) and CPU (ms) of an agent scraping N targets for 6 rounds of 2 s
footprint() { # N REP -> "hwm_kb cpu_ms fetches thread_cpu_ms"
	local n=$1 d=$tmp/rss.$1.$2 args=() i apid
	mkdir -p "$d/out"
	for i in $(seq 1 "$n"); do
		start_go "$d/go$i.out" -alloc-rate $((4 * 1048576))
		args+=(--scrape "svc$i=http://127.0.0.1:$port")
	done
	"$agent" --sampler sigprof --registry "$d/reg" --output-dir "$d/out" --round-seconds 2 \
		--period-seconds 2 --jitter-percent 0 "${args[@]}" 2>"$d/agent.log" &
	apid=$!
	sleep 12.5
	local hwm cpu
	hwm=$(awk '/VmHWM/ {print $2}' /proc/$apid/status)
	cpu=$(awk '{print ($14 + $15) * 1000 / '"$(getconf CLK_TCK)"'}' /proc/$apid/stat)
	kill -INT $apid
	wait $apid || true
	for i in $(seq 1 "$n"); do kill "${pids[-$i]}" 2>/dev/null || true; done
	echo "$hwm $cpu $(sed -n 's/.*scrape: fetches=\([0-9]*\).*cpu_ms=\([0-9]*\).*/\1 \2/p' "$d/agent.log")"
}

echo "== heap deltas and CPU shares: $rounds rounds of 1 s, $reps repetition(s)"
for r in $(seq 1 "$reps"); do
	accuracy "$r" >>"$tmp/acc"
	tail -n 1 "$tmp/acc"
done
echo "alloc_err_pct n_heap_deltas cpu_spinA_scraped_pct cpu_spinA_direct_pct allocKnown_bytes truth_bytes (columns above)"
awk '{print ($1 < 0 ? -$1 : $1)}' "$tmp/acc" | median | xargs printf "median |alloc_space error|: %s %% (goal <= 2 %%)\n"
awk '{d = $3 - $4; print (d < 0 ? -d : d)}' "$tmp/acc" | median |
	xargs printf "median |spinA share scraped - direct|: %s pp (goal <= 2 pp)\n"

echo "== footprint: 0 and 3 targets, 6 rounds of 2 s, every type"
for r in $(seq 1 "$reps"); do
	for n in 0 3; do
		footprint "$n" "$r" >"$tmp/fp1"
		echo "$n $(cat "$tmp/fp1")" | tee -a "$tmp/fp"
	done
done
echo "targets hwm_kb agent_cpu_ms fetches scrape_thread_cpu_ms (columns above)"
h0=$(awk '$1 == 0 {print $2}' "$tmp/fp" | median)
h3=$(awk '$1 == 3 {print $2}' "$tmp/fp" | median)
c0=$(awk '$1 == 0 {print $3}' "$tmp/fp" | median)
c3=$(awk '$1 == 3 {print $3}' "$tmp/fp" | median)
f3=$(awk '$1 == 3 {print $4}' "$tmp/fp" | median)
t3=$(awk '$1 == 3 {print $5}' "$tmp/fp" | median)
echo "median RSS added by scraping 3 targets: $((h3 - h0)) KiB (goal <= 1024 KiB; $h0 -> $h3)"
awk -v c0="$c0" -v c3="$c3" -v f="$f3" -v t="$t3" 'BEGIN {
	printf "CPU per fetch: scrape thread %.2f ms, whole agent %.2f ms (%d fetches)\n",
	       t / f, (c3 - c0) / f, f }'
