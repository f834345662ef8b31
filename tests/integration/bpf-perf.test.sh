#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# perf keeps working while the agent runs: `perf record -g` then `perf script`, three times,
# with edgeprof-agent (BPF sampler, mmap records on) running. The agent asked the kernel for
# build-ids in its mmap records, and a kernel bug (bpf/README.md, "Other perf sessions") then
# flagged perf's own MMAP2 records as carrying build-ids: Debian 12's perf aborted. Also counts
# the flagged MMAP2 records in perf's data (recorded with -B, so perf itself survives them):
# none with the agent's defaults, some with EDGEPROF_BPF_MMAP_BUILD_IDS=1 (the old behaviour:
# what shows the test can fail). Another process on the machine that asks for build-ids flags
# records too: checked first, without the agent, and the test is skipped then.
set -u
agent=$EP_BUILD/edgeprof-agent
[ -x "$agent" ] || { echo "agent not built"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
command -v perf >/dev/null || { echo "perf not installed (linux-perf)"; exit 77; }
"$agent" --help 2>&1 | grep -q -- "--sampler" || { echo "agent without --sampler"; exit 77; }
tmp=$(mktemp -d)
apid=
cleanup() {
	[ -n "$apid" ] && kill "$apid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
# Other processes with perf events open (other users' agents or perf sessions on a shared
# machine): one that asks for build-ids flags perf's records as the agent did.
others() {
	local p
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = "$apid" ] && continue
		ls -l "$p/fd" 2>/dev/null | grep -q 'perf_event' && echo -n "${p#/proc/}:$(cat "$p/comm") "
	done
}
fail() {
	local o
	o=$(others)
	[ -n "$o" ] && { echo "inconclusive, other processes hold perf events ($o): $*"; exit 77; }
	echo "FAIL: $*"
	exit 1
}

# MMAP2 records (type 10) of perf.data whose misc has PERF_RECORD_MISC_MMAP_BUILD_ID (0x4000),
# from perf's raw dump: "flagged total"
flagged() {
	perf script -D -i "$1" 2>/dev/null | awk '
		/^\. +0000: +0a 00 00 00/ { n++; if ($8 ~ /^[4-7c-f]/) f++ }
		END { print f + 0, n + 0 }'
}
# perf record -B (no build-id pass at its end) of a few short programs: flagged total
record_b() {
	perf record -q -B -g -o "$tmp/b.data" -- sh -c 'for i in 1 2 3 4 5; do ls / >/dev/null; done' \
		>/dev/null 2>&1 || { echo "x x"; return; }
	flagged "$tmp/b.data"
}
start_agent() { # env...
	env "$@" "$agent" --once --seconds 30 --sampler bpf --output-dir "$tmp/out" \
		--registry "$tmp/reg" >"$tmp/agent.log" 2>&1 &
	apid=$!
	sleep 2 # loaded and attached (~0.5 s idle)
	kill -0 "$apid" 2>/dev/null || fail "agent exited: $(tail -3 "$tmp/agent.log")"
}
stop_agent() {
	kill "$apid" 2>/dev/null
	wait "$apid" 2>/dev/null
	apid=
}

read -r f n <<<"$(record_b)"
[ "$n" != x ] && [ "$n" -gt 0 ] || fail "perf record alone: no MMAP2 records ($f $n)"
[ "$f" = 0 ] || { echo "another process flags MMAP2 records already ($f of $n): skipped"; exit 77; }

start_agent
for i in 1 2 3; do
	perf record -q -g -o "$tmp/g.data" -- sh -c 'ls / >/dev/null; sleep 0.1' >"$tmp/rec.log" 2>&1 \
		|| fail "perf record -g (run $i) with the agent running: $(tail -3 "$tmp/rec.log")"
	perf script -i "$tmp/g.data" >"$tmp/script.out" 2>"$tmp/script.err" \
		|| fail "perf script (run $i): $(tail -3 "$tmp/script.err")"
	grep -q "ls\|sleep" "$tmp/script.out" || fail "perf script shows no samples of ls/sleep"
done
read -r f n <<<"$(record_b)"
stop_agent
echo "agent defaults: $f of $n MMAP2 records flagged"
[ "$n" != x ] && [ "$n" -gt 0 ] || fail "no MMAP2 records with the agent running"
[ "$f" = 0 ] || fail "$f of $n of perf's MMAP2 records flagged with a build-id"

# the old behaviour, for contrast: the flag leaks (the kernel serves its events in list order,
# so not every record: up to 5 tries)
for ((i = 0; i < 5; i++)); do
	start_agent EDGEPROF_BPF_MMAP_BUILD_IDS=1
	read -r f n <<<"$(record_b)"
	stop_agent
	[ "$f" != x ] && [ "$f" -gt 0 ] && break
done
echo "EDGEPROF_BPF_MMAP_BUILD_IDS=1: $f of $n MMAP2 records flagged"
[ "$f" != x ] && [ "$f" -gt 0 ] || echo "note: the kernel did not leak the flag here (fixed kernel?)"
echo "PASS: perf record -g and perf script succeed while the agent runs"
