#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make demo: the whole loop on this machine, in plain words.
#   certificates -> collector on loopback -> agent rounds pushed over mutual TLS
#   -> merged profile pulled back with `edgeprof query` -> build/demo/profile.pb.gz + flame.svg
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

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }
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

say "1/7  Checking the build"
for f in edgeprof edgeprof-collector edgeprof-agent; do
	[ -x "$B/$f" ] || die "$B/$f is missing: run 'make' first (make demo does)"
done
echo "Building the small push driver the demo uses to hand profiles to the transport."
make -s --no-print-directory O="$B" BOARD=host-x86_64 "$B/tests/drivers/push-dir" >/dev/null ||
	die "could not build $B/tests/drivers/push-dir"
rm -rf "$D"
mkdir -p "$D/rounds"

say "2/7  Making development certificates in $D/certs"
echo "A private CA, a certificate for the collector (localhost, 127.0.0.1), one for the"
echo "device 'demo-gw-1' (it may upload) and one for you, the operator (you may read). The"
echo "collector trusts only certificates signed by this CA, and the device trusts only a"
echo "collector signed by it (mutual TLS)."
"$B/edgeprof" certs init "$D/certs" | sed 's/^/    /'
"$B/edgeprof" certs device "$D/certs" demo-gw-1 | sed 's/^/    /'
"$B/edgeprof" certs operator "$D/certs" demo-operator | sed 's/^/    /'

say "3/7  Starting the collector on loopback"
port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$B/edgeprof-collector" --listen "127.0.0.1:$port" --tls-ca "$D/certs/ca.crt" \
	--tls-cert "$D/certs/server.crt" --tls-key "$D/certs/server.key" \
	--ring "$D/collector.ring" --ring-size 64M >"$D/collector.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
	grep -q "port $port)" "$D/collector.log" 2>/dev/null && break
	kill -0 "${PIDS[-1]}" 2>/dev/null || { cat "$D/collector.log"; die "the collector did not start"; }
	run sleep 0.1
done
echo "Listening on https://127.0.0.1:$port; profiles go to the ring file $D/collector.ring (64 MiB)."

TLS=(--tls-ca "$D/certs/ca.crt" --tls-cert "$D/certs/demo-gw-1.crt" --tls-key "$D/certs/demo-gw-1.key")
push_round() { # DIR ROUND KEY-ROUND: hand a round's profiles to the transport (spool on failure)
	"$B/tests/drivers/push-dir" --upload "https://127.0.0.1:$port" "${TLS[@]}" \
		--service demo --labels "host=$(hostname | tr -c 'A-Za-z0-9_.\n-' _)" \
		--device demo-gw-1 --round "$3" --spool "$D/spool.ring" --spool-size 1M "$1" \
		>"$D/push-$2.log" 2>&1 || { cat "$D/push-$2.log"; die "push of round $2 failed"; }
	echo "    round $2: $(grep -c '^accepted \|^spooled ' "$D/push-$2.log") profile(s) pushed over mutual TLS"
}

say "4/7  Profiling: $ROUNDS rounds of ${ROUND_S}s, each starting after a random jitter"
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
	[ -x "$workload" ] || make -s --no-print-directory O="$B" BOARD=host-x86_64 "$workload" >/dev/null 2>&1 || true
	[ -x "$workload" ] || die "the demo workload $workload is missing (make all-tests builds it)"
	mkdir -p "$D/probe" "$D/registry"
	if [ "$(id -u)" = 0 ] && "$B/edgeprof-agent" --version | grep -q '+sampler-bpf' &&
	   timeout 20 "$B/edgeprof-agent" --once --seconds 1 --sampler bpf --bpf-service probe \
		--registry "$D/registry" --output-dir "$D/probe" >"$D/bpf-probe.log" 2>&1; then
		sampler=bpf
		echo "We are root and the kernel runs BPF: edgeprof-agent samples the whole system"
		echo "with its eBPF sampler while the demo workload (tests/workloads/split: work_a, work_b,"
		echo "work_c at 50/30/20 % of its CPU) runs alongside."
	else
		echo "No BPF here (not root, or the kernel refused): edgeprof-agent reads the SIGPROF"
		echo "sampler (libedgeprof.so, LD_PRELOAD) inside the demo workload tests/workloads/split"
		echo "(work_a, work_b, work_c at 50/30/20 % of its CPU)."
	fi
	rm -rf "$D/probe"
else
	echo "This build's edgeprof-agent cannot write profiles, so each round profiles the bundled Go"
	echo "workload (tests/oracle) with Go's own runtime profiler. Transport, collector and query"
	echo "are the real ones."
	command -v go >/dev/null || die "go is missing (tools/setup.sh installs golang-go)"
	export GOCACHE="$top/$B/go-cache" HOME="$top/$D" GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local
	(cd tests/oracle && go build -o "$top/$D/oracle" .) || die "could not build tests/oracle"
fi

agent_round() { # OUTDIR: one round of the agent, the workload running through it
	local lib=$top/$B/libedgeprof.so
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
	run timeout $((ROUND_S + 30)) "$B/edgeprof-agent" "${args[@]}" >"$D/agent.log" 2>&1 ||
		{ cat "$D/agent.log"; die "the agent failed"; }
	wait "$wl" 2>/dev/null || true
}

for r in $(seq 1 "$ROUNDS"); do
	jitter_ms=$((RANDOM % 1000))
	echo "    round $r: waiting ${jitter_ms} ms of jitter, then profiling"
	run sleep "$(printf "0.%03d" "$jitter_ms")"
	out="$D/rounds/$r"
	mkdir -p "$out"
	if [ "$mode" = oracle ]; then
		run "$D/oracle" "$out" "$((r - 1))" >/dev/null
		find "$out" -type f ! -name cpu.pb.gz -delete
		mv "$out/cpu.pb.gz" "$out/demo-cpu-$(date +%s).pb.gz"
	else
		agent_round "$out"
		[ "$mode" = agent-upload ] && { echo "    round $r: the agent pushed its profile over mutual TLS"; continue; }
	fi
	push_round "$out" "$r" "$(date +%s)"
done

say "5/7  Pulling the merged profile back with 'edgeprof query'"
export EDGEPROF_COLLECTOR="https://127.0.0.1:$port" EDGEPROF_TLS_CA="$D/certs/ca.crt" \
	EDGEPROF_TLS_CERT="$D/certs/demo-operator.crt" EDGEPROF_TLS_KEY="$D/certs/demo-operator.key"
"$B/edgeprof" ls 'demo{device="demo-gw-1"}' --from now-1h | sed 's/^/    /'
"$B/edgeprof" query 'demo{device="demo-gw-1"}' --from now-1h -o "$D/profile.pb.gz"
[ -s "$D/profile.pb.gz" ] || die "the query returned nothing"

say "6/7  Drawing the flame graph"
"$B/edgeprof" flame -o "$D/flame.svg" --title "edgeprof demo: $ROUNDS rounds, device demo-gw-1" \
	"$D/profile.pb.gz"

say "7/7  Top functions of the merged profile"
"$B/edgeprof" top -n 12 "$D/profile.pb.gz"

say "Done."
echo "  merged profile: $top/$D/profile.pb.gz   (go tool pprof -top $D/profile.pb.gz)"
echo "  flame graph:    $top/$D/flame.svg        (open it in a browser)"
echo "  collector log:  $top/$D/collector.log"
echo "The collector and everything else the demo started are being stopped now."
