#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a --metrics-rule costs at ingest (issue 22: a rule over 1,000 ingested profiles adds at most
# 5% to ingest time). The same collector binary, ring on tmpfs (so the disk does not drown the
# difference), 1,000 uploads of a ~20 KB gzip pprof (1,400 samples, 130 stacks of 16 frames, ~2,000
# functions) over mutual TLS with keep-alive (tests/drivers/collector-load, 4 clients), with:
#
#   none      no rule (the peer)
#   selector  bench_cpu=bench by (device)
#   function  bench_fn=bench function="func_10" by (device)
#   regex     bench_re=bench function=~"func_1.*" by (device)
#
# Runs are interleaved (none, selector, function, regex, none, ...) REPS times; the medians of
# the wall time of the 1,000 uploads and of the collector's whole CPU time are printed, and the
# median of each rule's ratio to the "none" run of the same repetition. Then, in-process
# (tests/drivers/metrics-eval, thread CPU clock, median of REPS x 1,000): the decode each upload
# gets for validation and what the rule adds to it.
#
#   tests/bench/metrics-bench.sh [BUILD_DIR]     env: REPS (5), COUNT (1000)
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
B=$(cd "${1:-$top/build/host-x86_64}" && pwd)
REPS=${REPS:-5}
COUNT=${COUNT:-1000}
for b in edgeprof edgeprof-collector tests/pprof-tool tests/drivers/collector-load \
	tests/drivers/metrics-eval; do
	[ -x "$B/$b" ] || { echo "missing $B/$b: run make all-tests"; exit 1; }
done
T=$(mktemp -d /dev/shm/edgeprof-metrics-bench.XXXXXX)
CPID=
trap '[ -n "$CPID" ] && kill "$CPID" 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

"$B/edgeprof" certs init "$T/pki" >/dev/null
"$B/edgeprof" certs device "$T/pki" bench >/dev/null
"$B/edgeprof" certs operator "$T/pki" op >/dev/null
"$B/tests/pprof-tool" encode "$T/p.pb.gz" 1400 130 16 >/dev/null 2>&1

median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

declare -A RULE=(
	[none]=''
	[selector]='bench_cpu=bench by (device)'
	[function]='bench_fn=bench function="func_10" by (device)'
	[regex]='bench_re=bench function=~"func_1.*" by (device)'
)
KINDS="none selector function regex"

# The collector runs under a wrapper that prints its CPU time (user + system, getrusage of the
# child: microseconds, where /proc's ticks are 10 ms) when it exits: start (a 64 MiB ring on
# tmpfs), 1,000 uploads, the /metrics read, SIGTERM.
cat >"$T/rusage.py" <<'PY'
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, _, ru = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    print("%.6f" % (ru.ru_utime + ru.ru_stime), file=f)
PY

run() { # kind -> "wall_s cpu_s"
	local rule=${RULE[$1]} port out wpid
	rm -f "$T/ring" "$T/cpu"
	: >"$T/log"
	/usr/bin/python3 "$T/rusage.py" "$T/cpu" "$B/edgeprof-collector" --listen 127.0.0.1:0 \
		--tls-ca "$T/pki/ca.crt" --tls-cert "$T/pki/server.crt" \
		--tls-key "$T/pki/server.key" --ring "$T/ring" --ring-size 64M \
		${rule:+--metrics-rule "$rule"} >>"$T/log" 2>&1 &
	wpid=$!
	for _ in $(seq 200); do
		port=$(sed -n 's/.*mutual TLS, port \([0-9]*\)).*/\1/p' "$T/log")
		[ -n "$port" ] && break
		sleep 0.05
	done
	CPID=$(pgrep -P "$wpid" -x edgeprof-collec)
	out=$("$B/tests/drivers/collector-load" --url "https://localhost:$port" --ca "$T/pki/ca.crt" \
		--cert "$T/pki/bench.crt" --key "$T/pki/bench.key" --file "$T/p.pb.gz" \
		--clients 4 --count "$COUNT" --prefix "$1")
	if [ -n "$rule" ]; then # the rule did count (read as an operator)
		curl -s --cacert "$T/pki/ca.crt" --cert "$T/pki/op.crt" --key "$T/pki/op.key" \
			"https://localhost:$port/metrics" | grep -q "^${rule%%=*}_seconds_total{" ||
			{ echo "$1: the rule has no series" >&2; exit 1; }
	fi
	kill "$CPID"
	wait "$wpid"
	CPID=
	echo "$out" | tr ' ' '\n' | awk -v cpu="$(cat "$T/cpu")" -F= '$1 == "profiles" { p = $2 }
		$1 == "failed" { f = $2 } $1 == "seconds" { s = $2 }
		END { if (p != '"$COUNT"' || f != 0) { print "bad run: " p " " f > "/dev/stderr"; exit 1 }
		      print s, cpu }'
}

echo "load: $(uptime)"
echo "metrics rules at ingest: $COUNT uploads of $(stat -c %s "$T/p.pb.gz") bytes, 4 clients," \
	"ring on tmpfs, $REPS interleaved runs each"
for rep in $(seq "$REPS"); do
	for k in $KINDS; do
		read -r w c < <(run "$k")
		echo "$w" >>"$T/wall.$k"
		echo "$c" >>"$T/cpu.$k"
		echo "$w $c" >>"$T/pair.$k.$rep"
	done
done
printf '\n%-9s %-48s %8s %8s %9s %9s %10s %10s\n' rule text wall_s cpu_s wall/none \
	cpu/none decode_us rule_us
for k in $KINDS; do
	w=$(median <"$T/wall.$k") c=$(median <"$T/cpu.$k")
	# each run's ratio to the "none" run of the same repetition, then their median
	rw=$(for r in $(seq "$REPS"); do paste "$T/pair.$k.$r" "$T/pair.none.$r" |
		awk '{ print $1 / $3 }'; done | median)
	rc=$(for r in $(seq "$REPS"); do paste "$T/pair.$k.$r" "$T/pair.none.$r" |
		awk '{ print $2 / $4 }'; done | median)
	# in-process, thread CPU clock: the decode every upload gets, and the rule alone
	read -r d r < <("$B/tests/drivers/metrics-eval" "$T/p.pb.gz" "$COUNT" "$REPS" \
		${RULE[$k]:+"${RULE[$k]}"} 2>/dev/null | sed 's/[a-z_]*=//g')
	printf '%-9s %-48s %8.3f %8.3f %9.3f %9.3f %10s %10s\n' "$k" "${RULE[$k]:--}" "$w" "$c" \
		"$rw" "$rc" "$d" "$r"
done
