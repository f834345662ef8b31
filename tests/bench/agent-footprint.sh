#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run-time footprint of each static board's agent in steady state: resident memory (VmRSS,
# sampled once a second after the first rounds, and VmHWM) and the bytes it writes.
#
#   tests/bench/agent-footprint.sh [SECONDS]        (default 30 s per phase)
#
# Builds from build/<board> (TINY=, GW64=, GW32= name other build directories, e.g. make size's
# build/size/<board>/base; NO_VM=1 skips the ARM boards, NO_NATIVE=1 tiny and the host).
#
#   tiny           natively (x86_64): the musl agent, SIGPROF sampler, a `split` workload
#                  preloaded with libedgeprof.so, a round every 2 s uploaded over mutual TLS
#                  to a real collector on loopback ("online"), then with the collector
#                  stopped ("offline": tiny has no spool, profiles are dropped and counted).
#   gateway-arm64  in the arm64 VM of tests/integration/bpf-arm64-vm.test.sh (a real arm64
#   gateway-armv7  kernel under qemu-system, TCG; armv7 runs in its 32-bit compat mode): the
#                  agent with its spool (default 1 MiB) on the VM's tmpfs, --sampler sigprof
#                  beside a preloaded `split`, offline (the VM has no network: every upload
#                  fails to connect, every profile goes to the spool); arm64 again with
#                  --sampler bpf (its ring buffer and maps are the "BPF tables").
#   flash          the host agent (default Kconfig: spool 1 MiB) on this machine's disk:
#                  write_bytes of /proc/PID/io (what reaches the block layer) online and
#                  offline, and the bytes of its log; scaled to a day of 1,440 rounds.
#
# Rounds are 2 s (the default is one round a minute: per-profile figures scale, RSS does not).
# Needs build/{tiny,host-x86_64,gateway-arm64,gateway-armv7} (make BOARD=... all-tests) and,
# for the ARM boards, build/vm-arm64 (tools/setup.sh --arch arm64). Noisy on a shared machine:
# RSS is not, CPU time is not reported.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-30}
host=$top/build/host-x86_64
tiny=${TINY:-$top/build/tiny}
W=$(mktemp -d /tmp/edgeprof-footprint.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT
for f in "$host/edgeprof" "$host/edgeprof-collector" "$host/edgeprof-agent" \
	"$host/tests/workloads/split" "$tiny/edgeprof-agent" "$tiny/libedgeprof.so"; do
	[ -x "$f" ] || { echo "agent-footprint: $f not built (make BOARD=... all-tests)" >&2; exit 1; }
done

free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
io_of() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/io"; }

# watch PID SECONDS: "rss_min rss_max hwm" in KiB over SECONDS, one sample a second
watch_rss() {
	local pid=$1 n=$2 i r lo=999999999 hi=0
	for ((i = 0; i < n; i++)); do
		sleep 1
		r=$(status_kb "$pid" VmRSS) || break
		[ "$r" -lt "$lo" ] && lo=$r
		[ "$r" -gt "$hi" ] && hi=$r
	done
	echo "$lo $hi $(status_kb "$pid" VmHWM)"
}

"$host/edgeprof" certs init "$W/certs" >/dev/null
"$host/edgeprof" certs device "$W/certs" dev-1 >/dev/null
start_collector() {
	"$host/edgeprof-collector" --listen "127.0.0.1:$1" --tls-ca "$W/certs/ca.crt" \
		--tls-cert "$W/certs/server.crt" --tls-key "$W/certs/server.key" \
		--ring "$W/collector.ring" --ring-size 16M >>"$W/collector.log" 2>&1 &
	COLL=$!
	PIDS+=("$COLL")
	for _ in $(seq 1 100); do grep -q "port $1)" "$W/collector.log" && return 0; sleep 0.1; done
	echo "agent-footprint: the collector did not start" >&2; cat "$W/collector.log" >&2; exit 1
}
tls=(--tls-ca "$W/certs/ca.crt" --tls-cert "$W/certs/dev-1.crt" --tls-key "$W/certs/dev-1.key")
rounds=(--round-seconds 2 --period-seconds 2 --jitter-percent 0)

# A workload the agent samples through its ring, for the whole run.
EDGEPROF_REGISTRY=$W/reg EDGEPROF_SERVICE=split LD_PRELOAD=$tiny/libedgeprof.so \
	"$host/tests/workloads/split" --seconds $((4 * secs + 60)) >/dev/null 2>&1 &
PIDS+=("$!")

# phase NAME STATE PID LOG: RSS over SECONDS, and what the agent wrote meanwhile
phase() {
	local w0 l0 lo hi hwm
	w0=$(io_of "$3" write_bytes)
	l0=$(stat -c %s "$4")
	read -r lo hi hwm <<<"$(watch_rss "$3" "$secs")"
	printf '%-14s %-8s rss_kib_min_max=%s-%s hwm_kib=%s write_bytes=%s log_bytes=%s seconds=%s\n' \
		"$1" "$2" "$lo" "$hi" "$hwm" $(($(io_of "$3" write_bytes) - w0)) \
		$(($(stat -c %s "$4") - l0)) "$secs"
}

# native AGENT NAME [agent options]: online, then offline (the collector stopped)
native() {
	local agent=$1 name=$2 port pid
	shift 2
	port=$(free_port)
	start_collector "$port"
	"$agent" --registry "$W/reg" --sampler sigprof "${rounds[@]}" \
		--upload "https://localhost:$port" "${tls[@]}" "$@" >"$W/$name.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	sleep 5 # first rounds, first handshake
	phase "$name" online "$pid" "$W/$name.log"
	kill -TERM "$COLL"
	wait "$COLL" 2>/dev/null || true
	sleep 3
	phase "$name" offline "$pid" "$W/$name.log"
	kill -TERM "$pid"
	wait "$pid" 2>/dev/null || true
	cp "$W/$name.log" "$top/build/footprint/$name.log" # what it logged, to read
}

echo "agent-footprint: ${secs} s per phase, rounds of 2 s (logs in build/footprint/)"
mkdir -p "$top/build/footprint"
if [ -z "${NO_NATIVE:-}" ]; then
	native "$tiny/edgeprof-agent" tiny
	# The flash figures: the host agent has the default spool; on this machine's disk (not
	# tmpfs).
	rm -f "$top/build/footprint/spool"
	native "$host/edgeprof-agent" host-flash --spool "$top/build/footprint/spool"
	echo "host-flash     spool file $(stat -c %s "$top/build/footprint/spool") bytes"
	rm -f "$top/build/footprint/spool"
fi

# The ARM boards in the arm64 VM.
vm=$top/build/vm-arm64
gw64=${GW64:-$top/build/gateway-arm64}
gw32=${GW32:-$top/build/gateway-armv7}
if [ -n "${NO_VM:-}" ] || [ ! -f "$vm/vmlinuz" ] || ! command -v qemu-system-aarch64 >/dev/null ||
   [ ! -x "$gw64/edgeprof-agent" ] || [ ! -x "$gw32/edgeprof-agent" ]; then
	echo "agent-footprint: no arm64 VM or ARM builds: ARM boards skipped"
	exit 0
fi
root=$W/root
mkdir -p "$root"/{bin,dev,proc,sys,tmp,c,lib/aarch64-linux-gnu,lib/arm-linux-gnueabihf,a64,a32}
cp "$vm/busybox" "$root/bin/"
cp "$gw64/edgeprof-agent" "$gw64/libedgeprof.so" "$gw64/tests/workloads/split" "$root/a64/"
cp "$gw32/edgeprof-agent" "$gw32/libedgeprof.so" "$gw32/tests/workloads/split" "$root/a32/"
# The workloads and libedgeprof.so are glibc programs: their loader and libraries.
cp -L /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 /usr/arm-linux-gnueabihf/lib/ld-linux-armhf.so.3 \
	"$root/lib/"
cp -L /usr/aarch64-linux-gnu/lib/{libc,libm}.so.6 "$root/lib/aarch64-linux-gnu/"
cp -L /usr/arm-linux-gnueabihf/lib/{libc,libm}.so.6 "$root/lib/arm-linux-gnueabihf/"
cp "$W/certs/ca.crt" "$W/certs/dev-1.crt" "$W/certs/dev-1.key" "$root/c/"
cat >"$root/init" <<EOF
#!/bin/busybox sh
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
echo 1 >/proc/sys/kernel/printk
echo "@@vm up \$(uname -m) cpus=\$(nproc)"
run() { # NAME DIR SAMPLER
	rm -rf /tmp/reg /tmp/spool
	EDGEPROF_REGISTRY=/tmp/reg EDGEPROF_SERVICE=split LD_PRELOAD=/\$2/libedgeprof.so \\
		/\$2/split --seconds $((secs + 30)) >/dev/null 2>&1 &
	w=\$!
	/\$2/edgeprof-agent --registry /tmp/reg --sampler \$3 ${rounds[*]} \\
		--upload https://127.0.0.1:9 --tls-ca /c/ca.crt --tls-cert /c/dev-1.crt \\
		--tls-key /c/dev-1.key --spool /tmp/spool/spool >/tmp/\$1.log 2>&1 &
	a=\$!
	sleep 8
	lo=999999999; hi=0; i=0
	while [ \$i -lt $secs ]; do
		sleep 1
		r=\$(awk '\$1 == "VmRSS:" { print \$2 }' /proc/\$a/status)
		[ "\$r" -lt "\$lo" ] && lo=\$r
		[ "\$r" -gt "\$hi" ] && hi=\$r
		i=\$((i + 1))
	done
	hwm=\$(awk '\$1 == "VmHWM:" { print \$2 }' /proc/\$a/status)
	printf '@@%-14s %-8s rss_kib_min_max=%s-%s hwm_kib=%s spool_bytes=%s seconds=%s\\n' \\
		"\$1" offline \$lo \$hi \$hwm "\$(wc -c </tmp/spool/spool)" $secs
	kill \$a \$w; wait
}
run gateway-arm64 a64 sigprof
run gateway-armv7 a32 sigprof
run arm64-bpf a64 bpf
echo "@@vm done"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$W/initrd.gz"
timeout $((6 * secs + 300)) qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -smp 2 -m 512 \
	-nographic -no-reboot -nic none -kernel "$vm/vmlinuz" -initrd "$W/initrd.gz" \
	-append "console=ttyAMA0 panic=-1 quiet" </dev/null 2>&1 | tr -d '\r' >"$W/console"
grep -q '^@@vm done' "$W/console" || { tail -n 30 "$W/console"; echo "agent-footprint: VM failed"; exit 1; }
sed -n 's/^@@//p' "$W/console" | grep -v '^vm '
