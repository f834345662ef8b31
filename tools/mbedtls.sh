#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds mbedtls for a musl board from the Debian source tools/musl.sh unpacked, with the
# configuration header a board's Kconfig generated (port/Build-net.mk), into one archive:
#
#   tools/mbedtls.sh MUSL_DIR CONFIG_H OUT.a CC...
#
# Cached by content: the archive of a configuration (sha1 of the header and the compiler) is
# kept in MUSL_DIR/mbedtls-cache/ and copied, so the per-feature builds of make size and make
# testconfigs compile mbedtls once per distinct configuration.
set -euo pipefail
[ $# -ge 4 ] || { echo "usage: $0 MUSL_DIR CONFIG_H OUT.a CC..." >&2; exit 2; }
musl=$1 config=$2 out=$3
shift 3
src=$musl/mbedtls
[ -d "$src/library" ] || { echo "mbedtls: no source in $src (tools/musl.sh)" >&2; exit 1; }
key=$({ cat "$config"; echo "$*"; sha1sum "$0"; } | sha1sum | cut -c1-16)
cache=$musl/mbedtls-cache/$key.a
if [ ! -f "$cache" ]; then
	tmp=$(mktemp -d "$musl/mbedtls-build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	cp "$config" "$tmp/edgeprof-mbedtls-config.h"
	# shellcheck disable=SC2016
	(cd "$src/library" && ls ./*.c) | CMD="$* -Os -ffunction-sections -fdata-sections -w" \
		T="$tmp" S="$src" xargs -P2 -n1 sh -c 'exec $CMD -I"$S/include" -I"$T" \
		-DMBEDTLS_CONFIG_FILE="\"edgeprof-mbedtls-config.h\"" \
		-c -o "$T/$(basename "$1" .c).o" "$S/library/$1"' sh
	mkdir -p "$musl/mbedtls-cache"
	"${1%gcc}ar" rcs "$tmp/lib.a" "$tmp"/*.o
	mv "$tmp/lib.a" "$cache"
fi
mkdir -p "$(dirname "$out")"
cp "$cache" "$out"
