#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The transport on the target architectures: push-dir cross-built (static) for gateway-arm64 and
# gateway-armv7 runs under qemu-user and pushes over mutual TLS to the host's collector, spooling
# first while the collector is down, then draining on one connection, then uploading directly
# with resumed TLS sessions. The collector is named "localhost": the static musl build resolves it
# (musl reads /etc/hosts itself).
. "$EP_TOP/tests/lib/transport-lib.sh"

make_certs
make_profiles "$W/in" 3
ran=0
for board in gateway-arm64 gateway-armv7; do
	case $board in
	gateway-arm64) qemu=qemu-aarch64 cc=aarch64-linux-gnu-gcc sysroot=arm64 ;;
	gateway-armv7) qemu=qemu-arm cc=arm-linux-gnueabihf-gcc sysroot=armhf ;;
	esac
	if ! command -v "$qemu" >/dev/null || ! command -v "$cc" >/dev/null ||
	   [ ! -d "$EP_TOP/build/sysroot-$sysroot" ]; then
		echo "-- $board: no $qemu, $cc or sysroot (tools/setup.sh --arch $sysroot); skipped"
		continue
	fi
	drv=$EP_TOP/build/$board/tests/drivers/push-dir
	echo "-- $board: cross-building push-dir"
	make -s -C "$EP_TOP" BOARD="$board" "build/$board/tests/drivers/push-dir" >"$W/$board.make" 2>&1 ||
		{ tail -n 20 "$W/$board.make"; fail "$board: cross build failed"; }
	file "$drv" | grep "statically linked" >/dev/null || fail "$board: push-dir is not static"

	port=$(free_port)
	args=(--upload "https://localhost:$port" --tls-ca "$W/certs/ca.crt"
	      --tls-cert "$W/certs/dev-1.crt" --tls-key "$W/certs/dev-1.key"
	      --service "qemu-$board" --round "$board" --seq-label seq --spool "$W/$board.spool"
	      --spool-size 64K --timeout-ms 20000)
	rc=0
	"$qemu" "$drv" "${args[@]}" --no-drain "$W/in" >"$W/$board.off" 2>&1 || rc=$?
	[ "$rc" = 3 ] || { cat "$W/$board.off"; fail "$board: expected the profiles spooled (exit 3), got $rc"; }
	start_collector "$port"
	timeout 300 "$qemu" "$drv" "${args[@]}" --drain-timeout 200 "$W/in" >"$W/$board.on" 2>&1 ||
		{ cat "$W/$board.on"; fail "$board: push under qemu failed"; }
	grep -E '^(uploaded|from_spool|handshakes|resumed)=' "$W/$board.on" | tr '\n' ' '
	echo
	[ "$(stat_of "$W/$board.on" from_spool)" = 6 ] || fail "$board: spool not drained"
	list_seq "$port" "qemu-$board" | cut -d' ' -f1 >"$W/$board.got"
	printf '%s\n' "$board-000000" "$board-000001" "$board-000002" "$board-000000" \
		"$board-000001" "$board-000002" | head -n 3 >"$W/$board.want1"
	[ "$(wc -l <"$W/$board.got")" = 3 ] || { cat "$W/$board.got"; fail "$board: expected 3 (same keys twice)"; }
	diff "$W/$board.want1" "$W/$board.got" || fail "$board: wrong order"
	# direct uploads, a connection each: the second and third resume the TLS session
	timeout 300 "$qemu" "$drv" "${args[@]}" --round "$board-b" "$W/in" >"$W/$board.direct" 2>&1 ||
		{ cat "$W/$board.direct"; fail "$board: direct push failed"; }
	echo "direct: $(grep -E '^(uploaded|handshakes|resumed|full_cpu_ns|resumed_cpu_ns)=' "$W/$board.direct" | tr '\n' ' ')"
	[ "$(stat_of "$W/$board.direct" resumed)" = 2 ] || fail "$board: sessions not resumed"
	stop_collector
	ran=1
done
if [ "$ran" = 0 ]; then
	echo "gateway boards not built or no qemu-user (make test-arm builds them and runs this)"
	exit 77
fi
echo "ok"
