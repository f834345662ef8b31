#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds workload.go (cached under BUILD/cli-go) and writes its Go profiles into OUTDIR:
# cpu1.pb.gz cpu2.pb.gz heap.pb.gz goroutine.pb.gz mutex.pb.gz.
#
#   tools/cli/testdata/go-profiles.sh BUILD OUTDIR
set -eu
build=$1 out=$2
src=$(cd "$(dirname "$0")" && pwd)/workload.go
cache="$build/cli-go"
mkdir -p "$cache/home" "$cache/gocache" "$out"
export HOME="$cache/home" GOCACHE="$cache/gocache" GOPATH="$cache/home/go" GO111MODULE=off \
	GOFLAGS= GOTOOLCHAIN=local CGO_ENABLED=0
command -v go >/dev/null || { echo "go is not installed (golang-go, tools/deps/oracles.list)"; exit 1; }
if ! cmp -s "$src" "$cache/workload.go" || [ ! -x "$cache/workload" ]; then
	cp "$src" "$cache/workload.go"
	(cd "$cache" && go build -o workload workload.go)
fi
"$cache/workload" "$out"
