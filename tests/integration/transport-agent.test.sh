#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The agent end to end over real mutual TLS: edgeprof-agent samples the known-split workload
# (tests/workloads/split: work_a/b/c at 50/30/20 % of its CPU, SIGPROF sampler via
# libedgeprof.so), its profiles reach the collector (pushed by the agent itself when it has
# --upload, else from its --output-dir by agent/transport's push-dir), `edgeprof query` pulls the
# merge back and `go tool pprof -top` shows the split within a few points.
. "$EP_TOP/tests/lib/transport-lib.sh"

AGENT=$B/edgeprof-agent
SPLIT=$B/tests/workloads/split
LIB=$B/libedgeprof.so
for f in "$AGENT" "$SPLIT" "$LIB"; do
	[ -e "$f" ] || { echo "skip: $f is not built"; exit 77; }
done
command -v go >/dev/null || { echo "skip: go (go tool pprof) is not installed"; exit 77; }
if ldd "$LIB" | grep libasan >/dev/null; then
	echo "skip: sanitizer build (LD_PRELOAD of an ASan library into the workload)"
	exit 77
fi
help=$("$AGENT" --help 2>&1 || true)
grep -q -- "--once" <<<"$help" || { echo "skip: this agent has no --once rounds"; exit 77; }

make_certs
port=$(free_port)
start_collector "$port"
mkdir -p "$W/reg" "$W/out"
TLS=(--tls-ca "$W/certs/ca.crt" --tls-cert "$W/certs/dev-1.crt" --tls-key "$W/certs/dev-1.key")

for round in 1 2; do
	EDGEPROF_REGISTRY="$W/reg" EDGEPROF_SERVICE=split-e2e EDGEPROF_HZ=199 LD_PRELOAD="$LIB" \
		"$SPLIT" --seconds 8 >/dev/null &
	PIDS+=($!)
	sleep 0.5
	args=(--once --seconds 5 --sampler sigprof --registry "$W/reg")
	if grep -q -- "--upload" <<<"$help"; then
		args+=(--upload "https://127.0.0.1:$port" "${TLS[@]}" --spool "$W/spool")
	else
		args+=(--output-dir "$W/out/$round")
		mkdir -p "$W/out/$round"
	fi
	timeout 120 "$AGENT" "${args[@]}" >"$W/agent$round.log" 2>&1 ||
		{ cat "$W/agent$round.log"; fail "agent round $round"; }
	if ! grep -q -- "--upload" <<<"$help"; then
		push "$port" --service split-e2e --spool "$W/spool" "$W/out/$round" >"$W/push$round.out" 2>&1 ||
			{ cat "$W/push$round.out"; fail "push of round $round"; }
	fi
	wait "${PIDS[-1]}" || true
done

export EDGEPROF_COLLECTOR="https://127.0.0.1:$port" EDGEPROF_TLS_CA="$W/certs/ca.crt" \
	EDGEPROF_TLS_CERT="$W/certs/op.crt" EDGEPROF_TLS_KEY="$W/certs/op.key"
"$B/edgeprof" ls 'split-e2e{device="dev-1"}' --from now-1h >"$W/ls.txt"
cat "$W/ls.txt"
[ "$(grep -c split-e2e "$W/ls.txt")" = 2 ] || fail "expected the 2 rounds' profiles"
"$B/edgeprof" query 'split-e2e{device="dev-1"}' --from now-1h -o "$W/merged.pb.gz"

HOME=$W GOCACHE=$W/go-cache go tool pprof -top "$W/merged.pb.gz" >"$W/top.txt" 2>/dev/null ||
	fail "go tool pprof cannot read the merged profile"
head -n 12 "$W/top.txt"
$PY - "$W/top.txt" <<'PYEOF'
import re, sys
flat = {}
for line in open(sys.argv[1]):
    m = re.match(r"\s*[\d.]+\w*\s+([\d.]+)%\s+[\d.]+%\s+[\d.]+\w*\s+[\d.]+%\s+(\S+)", line)
    if m:
        flat[m.group(2)] = float(m.group(1))
tot = sum(flat.get(f, 0) for f in ("work_a", "work_b", "work_c"))
if tot < 90:
    sys.exit("work_a/b/c hold only %.1f%% of the samples" % tot)
for f, want in (("work_a", 50), ("work_b", 30), ("work_c", 20)):
    got = 100 * flat.get(f, 0) / tot
    print("%s: %.1f%% of the split (want %d%%)" % (f, got, want))
    if abs(got - want) > 8:  # ~2000 samples (2 x 5 s at 199 Hz): a loose bound, 7 sigma
        sys.exit("%s is %.1f%%, want %d +/- 8" % (f, got, want))
PYEOF
echo "ok"
