#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make demo: the whole loop on this machine, on one screen.
#   certificates -> collector on loopback -> agent rounds pushed over mutual TLS
#   -> merged profile pulled back with `edgeprof query` -> build/demo/profile.pb.gz + flame.svg
# It says what ran, what was measured, what was lost (in words), where the files are and what to
# try next; the tools' own output goes to logs in build/demo/, named when something fails.
# Everything it starts is stopped on exit, also on Ctrl-C. Usage: tools/demo.sh BUILD_DIR
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
B=${1:-build/host-x86_64}
D=build/demo
ROUNDS=${DEMO_ROUNDS:-2}
ROUND_S=${DEMO_ROUND_SECONDS:-4}
PY=/usr/bin/python3
PIDS=()

step() { printf '%-4s %-13s %s\n' "$1" "$2" "$3"; }
die() { # MESSAGE [LOG]: what failed, in words, and the end of the log that says why
	echo "demo: $1" >&2
	[ -z "${2:-}" ] || { tail -n 15 "$2" | sed 's/^/    /' >&2; echo "    (all of it: $2)" >&2; }
	exit 1
}
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
# Long steps run in the background and are waited for, so that Ctrl-C (or a TERM) is handled at
# once and the step is stopped with everything else.
run() {
	"$@" &
	PIDS+=($!)
	wait "${PIDS[-1]}"
}
trap 'echo; echo "demo: interrupted; stopping what it started"; exit 130' INT TERM

for f in edgeprof edgeprof-collector edgeprof-agent tests/drivers/push-dir; do
	[ -x "$B/$f" ] || die "$B/$f is missing: run 'make demo' (it builds it)"
done
rm -rf "$D"
mkdir -p "$D/rounds"

# 1. Certificates: a private CA; the collector trusts only what it signed, the device only a
# collector it signed (mutual TLS). The device may upload, the operator may read.
{
	"$B/edgeprof" certs init "$D/certs" && "$B/edgeprof" certs device "$D/certs" demo-gw-1 &&
		"$B/edgeprof" certs operator "$D/certs" demo-operator
} >"$D/certs.log" 2>&1 || die "could not make the certificates" "$D/certs.log"
step 1/5 certificates "a dev CA; collector, device demo-gw-1, operator demo-operator: $D/certs/"

port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B/edgeprof-collector" --listen "127.0.0.1:$port" --tls-ca "$D/certs/ca.crt" \
	--tls-cert "$D/certs/server.crt" --tls-key "$D/certs/server.key" \
	--ring "$D/collector.ring" --ring-size 64M >"$D/collector.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
	grep -q "port $port)" "$D/collector.log" 2>/dev/null && break
	kill -0 "${PIDS[-1]}" 2>/dev/null || die "the collector did not start" "$D/collector.log"
	run sleep 0.1
done
step 2/5 collector "https://127.0.0.1:$port (mutual TLS), storing into $D/collector.ring"

TLS=(--tls-ca "$D/certs/ca.crt" --tls-cert "$D/certs/demo-gw-1.crt" --tls-key "$D/certs/demo-gw-1.key")
push_round() { # DIR ROUND KEY-ROUND: hand a round's profiles to the transport (spool on failure)
	"$B/tests/drivers/push-dir" --upload "https://127.0.0.1:$port" "${TLS[@]}" \
		--service demo --labels "host=$(hostname | tr -c 'A-Za-z0-9_.\n-' _)" \
		--device demo-gw-1 --round "$3" --spool "$D/spool.ring" --spool-size 1M "$1" \
		>"$D/push-$2.log" 2>&1 || die "the push of round $2 failed" "$D/push-$2.log"
	echo "       round $2: $(grep -c '^accepted \|^spooled ' "$D/push-$2.log") profile(s) pushed over mutual TLS"
}

# Which profile source this build has (see edgeprof-agent --help):
#   agent-upload  the agent pushes over mTLS itself (--upload ...)
#   agent-output  the agent writes <service>-cpu-<time>.pb.gz (--output-dir); push-dir pushes them
#   oracle        neither: the bundled Go workload profiles itself; push-dir pushes that
agent_help=$("$B/edgeprof-agent" --help 2>&1 || true)
has() { grep -q -- "$1" <<<"$agent_help"; }
mode=oracle
if has --once && has --seconds && has --output-dir; then
	mode=agent-output
	has --upload && has --tls-cert && mode=agent-upload
fi
workload=$B/tests/workloads/split
sampler=sigprof
if [ "$mode" != oracle ]; then
	[ -x "$workload" ] || die "the demo workload $workload is missing (make demo builds it)"
	mkdir -p "$D/probe" "$D/registry"
	if [ "$(id -u)" = 0 ] && "$B/edgeprof-agent" --version | grep -q '+sampler-bpf' &&
	   timeout 20 "$B/edgeprof-agent" --once --seconds 1 --sampler bpf --bpf-service probe \
		--registry "$D/registry" --output-dir "$D/probe" >"$D/bpf-probe.log" 2>&1; then
		sampler=bpf
		how="eBPF sampler, whole system (root)"
	else
		how="SIGPROF sampler in the workload (no BPF: $([ "$(id -u)" = 0 ] &&
			echo "see $D/bpf-probe.log" || echo "not root"))"
	fi
	how="$how; workload ${workload#"$B"/}: work_a/b/c at 50/30/20 %"
	rm -rf "$D/probe"
else
	how="this agent cannot write profiles: the bundled Go workload (tests/oracle) profiles itself"
	command -v go >/dev/null || die "go is missing (tools/setup.sh installs golang-go)"
	export GOCACHE="$top/$B/go-cache" HOME="$top/$D" GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
	(cd tests/oracle && go build -o "$top/$D/oracle" .) >"$D/oracle-build.log" 2>&1 ||
		die "could not build tests/oracle" "$D/oracle-build.log"
fi
step 3/5 profiling "$ROUNDS rounds of ${ROUND_S} s, each after a random jitter of up to 1 s"
echo "       $how"

agent_round() { # OUTDIR ROUND: one round of the agent, the workload running through it
	local lib=$top/$B/libedgeprof.so log=$D/agent-$2.log
	mkdir -p "$D/registry"
	if [ "$sampler" = bpf ]; then
		"$workload" --seconds $((ROUND_S + 2)) >/dev/null &
	else
		EDGEPROF_REGISTRY="$top/$D/registry" EDGEPROF_SERVICE=demo LD_PRELOAD="$lib" \
			"$workload" --seconds $((ROUND_S + 2)) >/dev/null &
	fi
	local wl=$!
	PIDS+=($wl)
	sleep 0.3
	local args=(--once --seconds "$ROUND_S" --sampler "$sampler" --registry "$D/registry")
	[ "$sampler" = bpf ] && args+=(--bpf-service demo)
	if [ "$mode" = agent-upload ]; then
		args+=(--upload "https://127.0.0.1:$port" "${TLS[@]}" --spool "$D/spool.ring" --spool-size 1M)
	else
		args+=(--output-dir "$1")
	fi
	run timeout $((ROUND_S + 30)) "$B/edgeprof-agent" "${args[@]}" >"$log" 2>&1 ||
		die "the agent failed in round $2" "$log"
	wait "$wl" 2>/dev/null || true
}

for r in $(seq 1 "$ROUNDS"); do
	run sleep "$(printf "0.%03d" $((RANDOM % 1000)))"
	out="$D/rounds/$r"
	mkdir -p "$out"
	if [ "$mode" = oracle ]; then
		run "$D/oracle" "$out" "$((r - 1))" >/dev/null
		find "$out" -type f ! -name cpu.pb.gz -delete
		mv "$out/cpu.pb.gz" "$out/demo-cpu-$(date +%s).pb.gz"
	else
		agent_round "$out" "$r"
		if [ "$mode" = agent-upload ]; then
			n=$(grep -c 'handed to the transport' "$D/agent-$r.log" || true)
			[ "$n" -gt 0 ] || die "round $r: the agent sent no profile" "$D/agent-$r.log"
			echo "       round $r: the agent pushed $n profile(s) over mutual TLS"
			continue
		fi
	fi
	push_round "$out" "$r" "$(date +%s)"
done

export EDGEPROF_COLLECTOR="https://127.0.0.1:$port" EDGEPROF_TLS_CA="$D/certs/ca.crt" \
	EDGEPROF_TLS_CERT="$D/certs/demo-operator.crt" EDGEPROF_TLS_KEY="$D/certs/demo-operator.key"
"$B/edgeprof" query 'demo{device="demo-gw-1"}' --from now-1h -o "$D/profile.pb.gz" \
	>"$D/query.log" 2>&1 || die "the query failed" "$D/query.log"
[ -s "$D/profile.pb.gz" ] || die "the query returned nothing" "$D/query.log"
step 4/5 query "edgeprof query wrote $(sed -n 's/^wrote //p' "$D/query.log" | tail -n 1)"

"$B/edgeprof" flame -o "$D/flame.svg" --title "edgeprof demo: $ROUNDS rounds, device demo-gw-1" \
	"$D/profile.pb.gz" >"$D/flame.log" 2>&1 || die "the flame graph failed" "$D/flame.log"
step 5/5 "flame graph" "$D/flame.svg: $(grep -o 'total [^<]*' "$D/flame.svg" | head -n 1)"

# What the agent counted (the profile's comments): all of it in a file, losses said in words.
"$B/edgeprof" info "$D/profile.pb.gz" | sed -n 's/^comment: *//p' >"$D/counters.txt" || true
# A counter is summed over the rounds within its line ("edgeprof bpf:"); lines that count the
# same thing (agent and bpf truncated=) are not added up: the largest is said.
losses=$(awk '{
	sec = $2
	for (i = 3; i <= NF; i++) {
		split($i, kv, "=")
		if (kv[1] ~ /^(dropped_|truncated$|torn$|mmap_lost$|lost)/ && kv[2] + 0 > 0)
			c[sec SUBSEP kv[1]] += kv[2]
	}
	}
	END {
		for (sk in c) {
			split(sk, p, SUBSEP)
			if (c[sk] > n[p[2]])
				n[p[2]] = c[sk]
		}
		w["truncated"] = "stacks cut at the depth limit (CONFIG_MAX_STACK_DEPTH)"
		w["dropped_table"] = "samples lost: stack table full (raise --stack-entries)"
		w["dropped_ringbuf"] = "samples lost: BPF ring buffer full (raise --bpf-ringbuf-kb)"
		w["dropped_full"] = "samples lost: a SIGPROF ring was full"
		w["mmap_lost"] = "mmap records lost (those programs'\'' maps read from /proc)"
		for (k in n) printf "       %s: %d\n", (k in w) ? w[k] : k " (see agent/README.md)", n[k]
	}' "$D/counters.txt")
if [ -n "$losses" ]; then
	echo "Losses the agent counted (all counters: $D/counters.txt):"
	echo "$losses"
else
	echo "The agent counted no loss (all counters: $D/counters.txt)."
fi

echo
echo "Top functions (edgeprof top -n 10 $D/profile.pb.gz):"
"$B/edgeprof" top -n 10 "$D/profile.pb.gz" 2>&1 | sed -n '/flat  *flat%/,$p'
echo
echo "Files: $D/ (profile.pb.gz, flame.svg, counters.txt; logs: agent-*.log, collector.log)"
echo "Next:"
echo "  xdg-open $D/flame.svg                           # the flame graph, in a browser"
echo "  $B/edgeprof top --cum $D/profile.pb.gz"
echo "  sudo $B/edgeprof-agent --once --seconds 10 --output-dir /tmp/prof   # this machine"
echo "  make test        # the suite: installs its tools (tools/deps/*.list) first"
