#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build.sh BUILD_DIR: builds tests/workloads/gopprof (standard library only, offline) into
# BUILD_DIR/tests/tools/gopprof once, and prints its path. Needs golang-go.
set -euo pipefail
b=$1
here=$(cd "$(dirname "$0")" && pwd)
out=$b/tests/tools/gopprof
if [ ! -x "$out" ] || [ "$here/main.go" -nt "$out" ]; then
	mkdir -p "$(dirname "$out")"
	HOME=${HOME:-/tmp} GOCACHE=$b/tests/go-cache GOFLAGS= GOPROXY=off GO111MODULE=off \
		go build -o "$out.tmp" "$here/main.go" >&2
	mv "$out.tmp" "$out"
fi
echo "$out"
