#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Heap profiles end to end over real mutual TLS: a producer with EDGEPROF_PROFILES=cpu,heap
# (tests/workloads/heapsplit leak: leak_here leaks 64 KiB every 10 ms), two --once rounds of
# edgeprof-agent with --upload, then from the collector: `edgeprof ls --type heap` lists the two
# heap profiles beside the CPU ones, `edgeprof query --type heap` merges them, and
# `go tool pprof -sample_index=inuse_space` shows leak_here holding in-use memory. The same
# producer records wall time (EDGEPROF_PROFILES=cpu,heap,wall): each round uploads a wall
# profile too (type wall), which `edgeprof ls --type wall` lists and whose merge spends most of
# its time under leak_main's nanosleep. ~12 s.
. "$EP_TOP/tests/lib/transport-lib.sh"

AGENT=$B/edgeprof-agent
W8=$B/tests/workloads/heapsplit
LIB=$B/libedgeprof.so
for f in "$AGENT" "$W8" "$LIB"; do
	[ -e "$f" ] || { echo "skip: $f is not built"; exit 77; }
done
grep -q '^CONFIG_PROFILE_HEAP=y' "$B/.config" || { echo "skip: CONFIG_PROFILE_HEAP off"; exit 77; }
grep -q '^CONFIG_UPLOAD_MTLS=y' "$B/.config" || { echo "skip: CONFIG_UPLOAD_MTLS off"; exit 77; }
command -v go >/dev/null || { echo "skip: go (go tool pprof) is not installed"; exit 77; }
if ldd "$LIB" | grep libasan >/dev/null; then
	echo "skip: sanitizer build (LD_PRELOAD of an ASan library into the workload)"
	exit 77
fi

make_certs
port=$(free_port)
start_collector "$port"
mkdir -p "$W/reg"
TLS=(--tls-ca "$W/certs/ca.crt" --tls-cert "$W/certs/dev-1.crt" --tls-key "$W/certs/dev-1.key")
EDGEPROF_REGISTRY="$W/reg" EDGEPROF_SERVICE=leak-e2e EDGEPROF_PROFILES=cpu,heap,wall \
	EDGEPROF_HEAP_RATE=16384 LD_PRELOAD="$LIB" "$W8" leak 8 >/dev/null &
PIDS+=($!)
sleep 0.5
for round in 1 2; do
	timeout 120 "$AGENT" --once --seconds 2 --sampler sigprof --registry "$W/reg" \
		--upload "https://127.0.0.1:$port" "${TLS[@]}" --spool "$W/spool" \
		>"$W/agent$round.log" 2>&1 || { cat "$W/agent$round.log"; fail "agent round $round"; }
	grep -q "heap profile of leak-e2e handed to the transport" "$W/agent$round.log" ||
		{ cat "$W/agent$round.log"; fail "round $round submitted no heap profile"; }
	if grep -q '^CONFIG_PROFILE_WALL=y' "$B/.config"; then
		grep -q "wall profile of leak-e2e handed to the transport" "$W/agent$round.log" ||
			{ cat "$W/agent$round.log"; fail "round $round submitted no wall profile"; }
	fi
done
wait "${PIDS[-1]}" || true

export EDGEPROF_COLLECTOR="https://127.0.0.1:$port" EDGEPROF_TLS_CA="$W/certs/ca.crt" \
	EDGEPROF_TLS_CERT="$W/certs/op.crt" EDGEPROF_TLS_KEY="$W/certs/op.key"
"$B/edgeprof" ls 'leak-e2e{device="dev-1"}' --type heap --from now-1h >"$W/ls.txt"
cat "$W/ls.txt"
[ "$(grep -c leak-e2e "$W/ls.txt")" = 2 ] || fail "expected the 2 rounds' heap profiles"
"$B/edgeprof" query 'leak-e2e{device="dev-1"}' --type heap --from now-1h -o "$W/heap.pb.gz" ||
	fail "query --type heap"
HOME=$W GOCACHE=$W/go-cache go tool pprof -top -sample_index=inuse_space "$W/heap.pb.gz" \
	>"$W/top.txt" 2>/dev/null || fail "go tool pprof cannot read the merged heap profile"
head -n 14 "$W/top.txt"
grep -q '^Type: inuse_space' "$W/top.txt" || fail "the merged profile has no inuse_space"
awk '$NF == "leak_here" && $4 + 0 > 0 {found = 1} END {exit !found}' "$W/top.txt" ||
	fail "leak_here holds no in-use memory in the merged heap profile"
if grep -q '^CONFIG_PROFILE_WALL=y' "$B/.config"; then
	"$B/edgeprof" ls 'leak-e2e{device="dev-1"}' --type wall --from now-1h >"$W/lsw.txt"
	[ "$(grep -c leak-e2e "$W/lsw.txt")" = 2 ] || { cat "$W/lsw.txt"; fail "expected 2 wall profiles"; }
	"$B/edgeprof" query 'leak-e2e{device="dev-1"}' --type wall --from now-1h -o "$W/wall.pb.gz" ||
		fail "query --type wall"
	HOME=$W GOCACHE=$W/go-cache go tool pprof -top "$W/wall.pb.gz" >"$W/wtop.txt" 2>/dev/null ||
		fail "go tool pprof cannot read the merged wall profile"
	grep -q '^Type: wall' "$W/wtop.txt" || fail "the merged wall profile is not of type wall"
	# most of its time waits in nanosleep, under leak_main (inlined into main; cum%, column 5)
	awk '($NF == "leak_main" || $NF == "main") && $5 + 0 > 50 {found = 1} END {exit !found}' "$W/wtop.txt" ||
		{ head -n 20 "$W/wtop.txt"; fail "leak_main holds under half of the wall time"; }
fi
echo "ok"
