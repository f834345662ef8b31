#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPython 3.13 frames in gateway-arm64's libedgeprof.so under qemu-aarch64, with Debian trixie's arm64
# python3.13 (build/py313-root-arm64: `tools/setup.sh --arch arm64`, tools/deps/py313-arm64.target-list).
# What is checked and why: tests/lib/py313-qemu.py. Run by `make test-arm` (its ARM_HOST_TESTS
# match "sigprof-arm64").
set -u
command -v qemu-aarch64 >/dev/null && [ -f "$EP_TOP/build/py313-root-arm64/.complete" ] ||
	{ echo "no qemu-aarch64 or build/py313-root-arm64: tools/setup.sh --arch arm64 fetches it; make test-arm runs this"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
make -s -C "$EP_TOP" BOARD=gateway-arm64 build/gateway-arm64/libedgeprof.so >/dev/null 2>&1 ||
	{ echo "gateway-arm64 libedgeprof.so does not build"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$EP_TOP/tests/lib/py313-qemu.py" "$EP_TOP" "$tmp" arm64
