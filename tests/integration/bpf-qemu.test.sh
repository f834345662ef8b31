#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Under qemu-user there is no bpf(): the aarch64 sampler says so in one line and exits cleanly
# (no crash, no libbpf dump). Needs the gateway-arm64 build (make BOARD=gateway-arm64 all-tests).
set -u
probe=$EP_TOP/build/gateway-arm64/tests/bpf-probe
command -v qemu-aarch64 >/dev/null || { echo "no qemu-aarch64 (make test-arm sets it up and runs this)"; exit 77; }
[ -x "$probe" ] || { echo "gateway-arm64 not built (make test-arm builds it and runs this)"; exit 77; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
timeout 60 qemu-aarch64 "$probe" --seconds 1 >"$out" 2>&1
rc=$?
cat "$out"
[ "$rc" = 3 ] || { echo "expected exit 3 (sampler unavailable), got $rc"; exit 1; }
[ "$(wc -l <"$out")" = 1 ] || { echo "expected exactly one line"; exit 1; }
grep -q "BPF sampler unavailable: no bpf() syscall" "$out" || { echo "no clear reason"; exit 1; }
# The agent too: one warning line, the SIGPROF path only, a clean exit.
agent=$EP_TOP/build/gateway-arm64/edgeprof-agent
if [ -x "$agent" ]; then
	dir=$(mktemp -d)
	timeout 120 qemu-aarch64 "$agent" --once --seconds 1 --output-dir "$dir" >"$out" 2>&1
	rc=$?
	rm -rf "$dir"
	cat "$out"
	[ "$rc" = 0 ] || { echo "agent under qemu-user exited $rc"; exit 1; }
	[ "$(grep -c 'no bpf() syscall' "$out")" = 1 ] || { echo "agent: no single BPF line"; exit 1; }
fi
echo "bpf under qemu-user: ok"
