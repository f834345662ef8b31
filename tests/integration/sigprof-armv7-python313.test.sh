#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPython 3.13 frames in gateway-armv7's libedgeprof.so under qemu-arm, with Debian trixie's armhf
# python3.13 (build/py313-root-armhf: `tools/setup.sh --arch armhf`, tools/deps/py313-armhf.target-list).
# What is checked and why: tests/lib/py313-qemu.py. Run by `make test-arm` (its ARM_HOST_TESTS
# match "sigprof-armv7").
set -u
command -v qemu-arm >/dev/null && [ -f "$EP_TOP/build/py313-root-armhf/.complete" ] ||
	{ echo "no qemu-arm or build/py313-root-armhf: tools/setup.sh --arch armhf fetches it; make test-arm runs this"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
make -s -C "$EP_TOP" BOARD=gateway-armv7 build/gateway-armv7/libedgeprof.so >/dev/null 2>&1 ||
	{ echo "gateway-armv7 libedgeprof.so does not build"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$EP_TOP/tests/lib/py313-qemu.py" "$EP_TOP" "$tmp" armhf
