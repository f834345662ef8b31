#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A round the fleet's duty cycle skips costs the device nothing with the BPF sampler: its perf
# events are disabled (the BPF program does not run), not left sampling into a profile that is
# thrown away. A collector with --duty-percent 50 and 1 s windows, a group of 2 devices (one
# uploads once, then the agent): the agent samples every other window. Its rounds are 1 s back
# to back for ~7 s, CPU and off-CPU profiles, while workloads keep a CPU busy and threads
# blocking. Each profile it writes carries, since the agent started, the samples the BPF ring
# delivered, the off-CPU records the BPF programs sent (their own count) and the kernel's time
# enabled of the CPU events; at the newest profile, all must be those of the rounds sampled so
# far (within 25 %), not of every window. Needs root; mounts tracefs on /sys/kernel/tracing
# for off-CPU if it is not (and unmounts it after; without it, CPU only). ~12 s.
. "$(dirname "$0")/../lib/collector-lib.sh"
agent=$EP_BUILD/edgeprof-agent work=$EP_BUILD/tests/workloads/bpf-work probe=$EP_BUILD/tests/bpf-probe
[ -x "$probe" ] && [ -x "$work" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
"$probe" --seconds 0.1 --quiet 2>"$T/check" >/dev/null || { tail -n 1 "$T/check"; exit 77; }
"$COLLECTOR" --help 2>&1 | grep -q -- --duty-percent ||
	{ echo "collector built without CONFIG_COLLECTOR_DUTY"; exit 77; }
"$agent" --help 2>&1 | grep -q -- --upload || { echo "agent built without uploads"; exit 77; }

make_pki
"$EP" certs device "$T/pki" dev-2 >/dev/null || fail "certs dev-2"
"$PPROF_TOOL" build "$T/b.pb.gz" >/dev/null || fail "pprof-tool build"
mounted=0 profiles=cpu,offcpu
cleanup() { [ $mounted = 1 ] && umount /sys/kernel/tracing; ep_cleanup; }
trap cleanup EXIT
if [ ! -e /sys/kernel/tracing/events/sched/sched_switch/id ]; then
	if mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null; then mounted=1; else profiles=cpu; fi
fi
start_collector --duty-percent 50 --duty-window 1 --duty-group-by fleet
# the other device of the group (1 slot of 2: the agent samples one window in two)
curl -sS --fail --cacert "$T/pki/ca.crt" --cert "$T/pki/dev-1.crt" --key "$T/pki/dev-1.key" \
	--data-binary @"$T/b.pb.gz" -o /dev/null \
	"https://localhost:$TLS_PORT/api/0/profiles?service=gw&type=cpu&labels=node=other" ||
	fail "upload from the other device"

"$work" split 10 >/dev/null &
wpid=$!
"$EP_BUILD/tests/workloads/wallsplit" 10 >/dev/null &
bpid=$!
mkdir -p "$T/out"
timeout -s INT 8 "$agent" --sampler bpf --profiles "$profiles" --hz 199 --bpf-service sys \
	--round-seconds 1 \
	--period-seconds 1 --jitter-percent 0 --output-dir "$T/out" \
	--upload "https://localhost:$TLS_PORT" --tls-ca "$T/pki/ca.crt" \
	--tls-cert "$T/pki/dev-2.crt" --tls-key "$T/pki/dev-2.key" 2>"$T/agent.err"
kill "$wpid" "$bpid" 2>/dev/null
wait "$wpid" "$bpid" 2>/dev/null
grep -q "BPF sampler unavailable" "$T/agent.err" && { grep "BPF sampler" "$T/agent.err"; exit 77; }
skipped=$(grep -c "skipped: not in this device's window" "$T/agent.err")
# per round (oldest first): its CPU and off-CPU samples, then the cumulative counters
# (<service>-<type>-<time>-<n>: a round's off-CPU profile is written just before its CPU one)
for f in $(cd "$T/out" && ls sys-cpu-*.pb.gz 2>/dev/null | sort -t- -k4n); do
	n=${f##*-} n=${n%.pb.gz} ts=${f#sys-cpu-} ts=${ts%-*}
	{ "$EP" info "$T/out/$f"; o=$T/out/sys-offcpu-$ts-$((n - 1)).pb.gz; [ -f "$o" ] && "$EP" info "$o"; } | awk '
		function val(k,   i) { for (i = 1; i <= NF; i++) if (index($i, k "=") == 1) return substr($i, length(k) + 2); return "" }
		/edgeprof agent: samples=/ { n = val("samples") }
		/edgeprof agent \(offcpu\): samples=/ { o = val("samples") }
		/edgeprof bpf: samples=/ { d = val("samples"); e = val("events_enabled_ms"); c = val("cpus") }
		/edgeprof offcpu: / { r = val("records") }
		END { print n + 0, o + 0, d + 0, (e == "" ? -1 : e), c + 0, r + 0 }'
done >"$T/rounds"
sent=$(wc -l <"$T/rounds")
cat "$T/rounds"
# (the comparison needs a skipped round before the newest profile)
before=$(awk '/skipped: not in this/ { n++ } /wrote .*sys-cpu-/ { b = n } END { print b + 0 }' "$T/agent.err")
[ "$sent" -ge 2 ] && [ "$before" -ge 1 ] ||
	{ tail -n 20 "$T/agent.err"; fail "$sent rounds sampled, $skipped skipped ($before before the newest profile)"; }
# newest profile: the samples of the rounds so far against what the BPF side sent since start
read -r cpu off delivered enabled cpus records < <(awk '{ n += $1; o += $2 }
	END { print n, o, $3, $4, $5, $6 }' "$T/rounds")
echo "agent ($profiles): $sent rounds sampled, $skipped skipped ($before before the newest profile); samples in the profiles $cpu CPU" \
	"+ $off off-CPU, delivered by the BPF ring $delivered; off-CPU records sent $records;" \
	"CPU events enabled $enabled ms over $cpus CPUs"
[ "$cpu" -ge 100 ] || fail "too few samples ($cpu) for the comparison"
[ "$delivered" -le $(((cpu + off) * 5 / 4 + 50)) ] ||
	fail "the BPF sampler delivered $delivered samples, the $sent rounds sampled hold $((cpu + off)): it sampled in the skipped rounds"
if [ "$profiles" = cpu,offcpu ]; then
	[ "$off" -ge 20 ] || fail "too few off-CPU samples ($off) for the comparison"
	[ "$records" -le $((off * 5 / 4 + 20)) ] ||
		fail "the off-CPU programs sent $records records, the $sent rounds sampled hold $off: they ran in the skipped rounds"
fi
[ "$enabled" -ge 0 ] || fail "no events_enabled_ms in the profile's comment"
[ "$enabled" -le $(((sent * 1000 * 5 / 4 + 300) * cpus)) ] ||
	fail "the CPU events ran $enabled ms on $cpus CPUs for $sent sampled rounds of 1 s"
grep -o "pauses=[0-9]* paused_ms=[0-9]*" <("$EP" info "$T/out/$f")
echo "bpf-duty: ok"
