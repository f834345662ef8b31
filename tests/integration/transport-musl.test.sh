#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The static device build on the wire: push-dir built for board tiny (static musl, the
# client-only mbedtls of CONFIG_TLS_MINIMAL, the agent's transport objects):
#   - resolves "localhost" in --upload by musl's own resolver (/etc/hosts, then DNS; no NSS)
#     and pushes to our collector, the second and third connections resuming the session;
#   - completes mutual TLS with a foreign server, openssl s_server with our certificates: it
#     must see our client certificate, an ECDHE-ECDSA AEAD suite and the decrypted POST.
. "$EP_TOP/tests/lib/transport-lib.sh"

grep -qE '^[^#]*[[:space:]]localhost([[:space:]]|$)' /etc/hosts ||
	{ echo "skip: /etc/hosts names no localhost"; exit 77; }
command -v openssl >/dev/null || { echo "skip: no openssl"; exit 77; }
make_certs
make_profiles "$W/in" 3
drv=$EP_TOP/build/tiny/tests/drivers/push-dir
echo "-- tiny: building push-dir (static musl, CONFIG_TLS_MINIMAL)"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j2 -C "$EP_TOP" BOARD=tiny \
	build/tiny/tests/drivers/push-dir >"$W/tiny.make" 2>&1 ||
	{ tail -n 20 "$W/tiny.make"; fail "tiny: build failed"; }
file "$drv" | grep "statically linked" >/dev/null || fail "tiny: push-dir is not static"
grep -qx 'CONFIG_TLS_MINIMAL=y' "$EP_TOP/build/tiny/.config" || fail "tiny: not CONFIG_TLS_MINIMAL"

certs=(--tls-ca "$W/certs/ca.crt" --tls-cert "$W/certs/dev-1.crt" --tls-key "$W/certs/dev-1.key")
port=$(free_port)
start_collector "$port"
timeout 60 "$drv" --upload "https://localhost:$port" "${certs[@]}" --service musl-tiny \
	--round musl --seq-label seq --timeout-ms 10000 "$W/in" >"$W/local.out" 2>&1 ||
	{ cat "$W/local.out"; fail "push to https://localhost:$port failed"; }
echo "localhost: $(grep -E '^(uploaded|handshakes|resumed)=' "$W/local.out" | tr '\n' ' ')"
[ "$(stat_of "$W/local.out" uploaded)" = 3 ] || fail "not 3 profiles uploaded by name"
[ "$(stat_of "$W/local.out" resumed)" = 2 ] || fail "sessions not resumed"
[ "$(list_seq "$port" musl-tiny | wc -l)" = 3 ] || fail "the collector does not list 3 profiles"
# A root with nothing but the binary, /etc/hosts and the files it is given (as root: chroot):
# no libc, no NSS modules, no /dev (mbedtls under musl would read /dev/urandom; port/tls.c
# gives it getrandom()).
if [ "$(id -u)" = 0 ]; then
	r=$W/root
	mkdir -p "$r/etc" "$r/c"
	printf '127.0.0.1\tlocalhost\n' >"$r/etc/hosts"
	cp "$drv" "$r/push-dir"
	cp "$W/certs/ca.crt" "$W/certs/dev-1.crt" "$W/certs/dev-1.key" "$r/c/"
	cp -r "$W/in" "$r/in"
	timeout 60 chroot "$r" /push-dir --upload "https://localhost:$port" --tls-ca /c/ca.crt \
		--tls-cert /c/dev-1.crt --tls-key /c/dev-1.key --service musl-chroot \
		--timeout-ms 10000 /in >"$W/chroot.out" 2>&1 ||
		{ cat "$W/chroot.out"; fail "push from a bare root failed"; }
	[ "$(stat_of "$W/chroot.out" uploaded)" = 3 ] ||
		{ cat "$W/chroot.out"; fail "bare root: not 3 profiles uploaded"; }
	echo "bare root (chroot): uploaded=3"
else
	echo "-- not root: no bare-root (chroot) case"
fi
stop_collector

# A name nobody has: a clear resolver error, nothing sent.
timeout 60 "$drv" --upload "https://no-such-host.invalid:$port" "${certs[@]}" --timeout-ms 5000 \
	"$W/in" >"$W/bad.out" 2>&1 || true
grep -q "no-such-host.invalid" "$W/bad.out" || { cat "$W/bad.out"; fail "no resolver error"; }
[ "$(stat_of "$W/bad.out" uploaded)" = 0 ] || fail "uploaded to no-such-host.invalid"

# The foreign server: one connection, whatever the client sends is printed decrypted. Its
# stdin stays open (a fifo we hold): s_server ends a connection at the end of its input.
port=$(free_port)
mkfifo "$W/s_server.in"
timeout 60 openssl s_server -accept "127.0.0.1:$port" -naccept 1 -Verify 2 \
	-CAfile "$W/certs/ca.crt" -cert "$W/certs/server.crt" -key "$W/certs/server.key" \
	<"$W/s_server.in" >"$W/s_server.out" 2>&1 &
SPID=$!
exec 8>"$W/s_server.in"
PIDS+=("$SPID")
for _ in $(seq 1 100); do
	grep -q ACCEPT "$W/s_server.out" && break
	sleep 0.1
done
timeout 60 "$drv" --upload "https://localhost:$port" "${certs[@]}" --timeout-ms 3000 \
	--backoff-ms 60000 "$W/in" >"$W/foreign.out" 2>&1 || true # s_server sends no HTTP reply
exec 8>&-
wait "$SPID" 2>/dev/null || true
{ grep -aE '^(CIPHER is|Protocol version|subject=|Shared)' "$W/s_server.out" || true; } | sed 's/^/s_server: /'
grep -aqE '^CIPHER is ECDHE-ECDSA-(CHACHA20-POLY1305|AES(128|256)-GCM-SHA(256|384))' \
	"$W/s_server.out" || { cat "$W/s_server.out"; fail "s_server: no ECDHE-ECDSA AEAD suite"; }
grep -aq 'CN *= *dev-1' "$W/s_server.out" || { cat "$W/s_server.out"; fail "s_server: no client cert"; }
grep -aq '^POST /' "$W/s_server.out" || { cat "$W/s_server.out"; fail "s_server: no POST decrypted"; }
echo "ok"
