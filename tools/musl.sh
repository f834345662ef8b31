#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The musl toolchain of the static boards (CONFIG_LIBC_MUSL): Debian's musl-dev for the target
# (the host's package for x86_64, the target's .deb unpacked for arm64/armhf), a gcc specs file
# that points the board's gcc at it, and the libraries the device agent links, built from
# Debian's source packages (apt-get source, the versions of the -dev packages installed here)
# with that toolchain into build/musl-<arch>/:
#
#   zlib, the nanopb runtime, cmocka (unit tests) always; libelf (elfutils, without zstd) and
#   libbpf for x86_64 and arm64 (the BPF sampler's architectures). mbedtls is only unpacked:
#   each board's build compiles it with a configuration from its Kconfig (port/Build-net.mk,
#   tools/mbedtls.sh).
#
#   tools/musl.sh --arch x86_64|arm64|armhf      (no root needed once setup.sh ran)
#
# Cached by version: build/musl-<arch>/.complete names every source package and version and
# this script's hash; a matching stamp makes this a no-op. Sources are kept in build/src/.
set -euo pipefail

arch=
while [ $# -gt 0 ]; do
	case "$1" in
	--arch) arch="$2"; shift 2 ;;
	-h|--help) sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "musl: unknown argument $1" >&2; exit 2 ;;
	esac
done
top=$(cd "$(dirname "$0")/.." && pwd)
case "$arch" in
x86_64) gnu=x86_64-linux-gnu; mtriple=x86_64-linux-musl; cross=; deb=amd64
	kinc=(/usr/include/linux /usr/include/asm-generic /usr/include/x86_64-linux-gnu/asm) ;;
arm64)	gnu=aarch64-linux-gnu; mtriple=aarch64-linux-musl; cross=$gnu-; deb=arm64
	kinc=("/usr/$gnu/include/linux" "/usr/$gnu/include/asm-generic" "/usr/$gnu/include/asm") ;;
armhf)	gnu=arm-linux-gnueabihf; mtriple=arm-linux-musleabihf; cross=$gnu-; deb=armhf
	kinc=("/usr/$gnu/include/linux" "/usr/$gnu/include/asm-generic" "/usr/$gnu/include/asm") ;;
*) echo "musl: --arch x86_64|arm64|armhf" >&2; exit 2 ;;
esac
out=$top/build/musl-$arch
src=$top/build/src

# Source package = version of what the glibc builds link (dpkg's ${source:Version}).
srcver() { dpkg-query -W -f='${source:Package}=${source:Version}' "$1"; }
pkgs="$(srcver musl-dev) $(srcver zlib1g-dev) $(srcver libnanopb-dev) $(srcver libcmocka-dev) \
$(srcver libmbedtls-dev)"
# The BPF sampler's libraries where bpf/Build.mk can build it (not armhf).
[ "$arch" = armhf ] || pkgs="$pkgs $(srcver libelf-dev) $(srcver libbpf-dev)"
want="$pkgs script=$(sha1sum "$0" | cut -c1-12)"
[ "$(cat "$out/.complete" 2>/dev/null)" = "$want" ] && exit 0

mkdir -p "$top/build"
exec 9>"$top/build/.musl.lock"
flock 9
[ "$(cat "$out/.complete" 2>/dev/null)" = "$want" ] && exit 0
echo "musl: building $out from Debian sources: $pkgs"
t0=$(date +%s)

# One unpacked tree per source package and version (dir printed).
fetch() { # name=version
	local name=${1%%=*} ver=${1#*=} d
	ver=${ver#*:}
	d=$src/$name-${ver%-*}
	if [ ! -f "$d.$ver.ok" ]; then
		mkdir -p "$src"
		rm -rf "$d"
		(cd "$src" && apt-get source -qq "$1" >/dev/null 2>&1) ||
			{ echo "musl: apt-get source $1 failed (deb-src entry: tools/setup.sh)" >&2; exit 1; }
		touch "$d.$ver.ok"
	fi
	echo "$d"
}

rm -rf "$out"
mkdir -p "$out/include" "$out/lib" "$out/kinclude" "$out/obj"

# musl itself: the host's musl-dev, or the target's .deb unpacked.
if [ "$arch" = x86_64 ]; then
	mroot=
else
	mkdir -p "$out/deb"
	(cd "$out/deb" && apt-get download -qq -o APT::Sandbox::User=root "musl-dev:$deb" \
		"musl:$deb" >/dev/null)
	for d in "$out"/deb/*.deb; do dpkg -x "$d" "$out/root"; done
	rm -rf "$out/deb"
	mroot=$out/root
fi
minc=$mroot/usr/include/$mtriple
mlib=$mroot/usr/lib/$mtriple
[ -f "$mlib/libc.a" ] || { echo "musl: no $mlib/libc.a (musl-dev)" >&2; exit 1; }
# The kernel's uapi headers (linux/, asm/): musl ships none; the cross toolchain's glibc does.
for k in "${kinc[@]}"; do ln -s "$k" "$out/kinclude/$(basename "$k")"; done

# gcc's own specs for musl (as musl's musl-gcc.specs.sh writes them): its headers and startup
# files instead of glibc's, then ours (include/, lib/), then the kernel's headers.
cat >"$out/musl-gcc.specs" <<EOF
%rename cpp_options old_cpp_options

*cpp_options:
-nostdinc -isystem $minc -isystem $out/include -isystem include%s -idirafter $out/kinclude %(old_cpp_options)

*cc1:
%(cc1_cpu) -nostdinc -isystem $minc -isystem $out/include -isystem include%s -idirafter $out/kinclude

*link_libgcc:
-L$mlib -L$out/lib -L .%s

*libgcc:
libgcc.a%s %:if-exists(libgcc_eh.a%s)

*startfile:
%{!shared: $mlib/Scrt1.o} $mlib/crti.o crtbeginS.o%s

*endfile:
crtendS.o%s $mlib/crtn.o

*link:
-dynamic-linker /lib/ld-musl-$arch.so.1 -nostdlib %{shared:-shared} %{static:-static} %{rdynamic:-export-dynamic} --build-id

EOF
cc="${cross}gcc -specs=$out/musl-gcc.specs"
ar=${cross}ar
cflags="-Os -ffunction-sections -fdata-sections -D_GNU_SOURCE -fPIE"

# compile LIB DIR FLAGS -- FILES...: objects into lib<LIB>.a (two at a time)
compile() {
	local lib=$1 dir=$2 flags=$3 o=$out/obj/$1
	shift 4
	mkdir -p "$o"
	# shellcheck disable=SC2016 # expanded by the sh that xargs runs
	printf '%s\n' "$@" | CMD="$cc $cflags $flags" O="$o" D="$dir" xargs -P2 -n1 sh -c \
		'exec $CMD -c -o "$O/$(basename "$1" .c).o" "$D/$1"' sh ||
		{ echo "musl: $lib failed to build" >&2; exit 1; }
	rm -f "$out/lib/lib$lib.a"
	$ar rcs "$out/lib/lib$lib.a" "$o"/*.o
}

for p in $pkgs; do
	[ "${p%%=*}" != musl ] || continue # the binary package above
	d=$(fetch "$p")
	case ${p%%=*} in
	zlib)
		# shellcheck disable=SC2046
		compile z "$d" "-DHAVE_UNISTD_H -DHAVE_STDARG_H" -- $(cd "$d" && ls ./*.c)
		cp "$d/zlib.h" "$d/zconf.h" "$out/include/" ;;
	nanopb)
		compile protobuf-nanopb "$d" "" -- pb_common.c pb_encode.c pb_decode.c
		cp "$d"/pb.h "$d"/pb_common.h "$d"/pb_encode.h "$d"/pb_decode.h "$out/include/" ;;
	cmocka)
		cat >"$out/obj/cmocka-config.h" <<-EOF
		#define HAVE_SIGNAL_H 1
		#define HAVE_SETJMP_H 1
		#define HAVE_MALLOC_H 1
		#define HAVE_INTTYPES_H 1
		#define HAVE_STDINT_H 1
		#define HAVE_STRSIGNAL 1
		#define HAVE_SIGLONGJMP 1
		#define HAVE_CLOCK_GETTIME 1
		#define HAVE_STRUCT_TIMESPEC 1
		#define HAVE_GCC_THREAD_LOCAL_STORAGE 1
		EOF
		# cmocka.h guesses uintptr_t from glibc's __WORDSIZE unless told it is defined.
		printf '%s\n' '#include <stdint.h>' '#define _UINTPTR_T_DEFINED 1' \
			'#include "cmocka-debian.h"' >"$out/include/cmocka.h"
		cp "$d"/include/cmocka.h "$out/include/cmocka-debian.h"
		compile cmocka "$d/src" "-include $out/obj/cmocka-config.h -D_UINTPTR_T_DEFINED \
			-I$d/include" -- cmocka.c ;;
	mbedtls)
		ln -s "$d" "$out/mbedtls" ;;
	elfutils)
		# libelf only (the tools need argp, fts, obstack: not musl's). Its config.h by hand:
		# configure checks for those for the tools and fails.
		mkdir -p "$out/obj/elfutils"
		cat >"$out/obj/elfutils/config.h" <<-EOF
		#define PACKAGE_NAME "elfutils"
		#define PACKAGE_VERSION "${d##*-}"
		#define HAVE_ERR_H 1
		#define HAVE_DECL_MEMRCHR 1
		#define HAVE_DECL_RAWMEMCHR 0
		#define HAVE_DECL_POWEROF2 0
		#define HAVE_DECL_MEMPCPY 1
		#define HAVE_DECL_REALLOCARRAY 1
		#define HAVE_VISIBILITY 1
		#define HAVE_GCC_STRUCT 1
		#define HAVE_FALLTHROUGH 1
		#include <eu-config.h>
		EOF
		# shellcheck disable=SC2046
		compile elf "$d/libelf" "-DHAVE_CONFIG_H -I$out/obj/elfutils \
			-I$d/lib -I$d/libelf -std=gnu99 -w" -- $(sed -n \
			'/^libelf_a_SOURCES/,/^$/p' "$d/libelf/Makefile.am" | tr -d '\134' |
			sed 's/libelf_a_SOURCES =//' | tr -s ' \t' '\n' | grep '\.c$')
		cp "$d"/libelf/libelf.h "$d"/libelf/gelf.h "$d"/libelf/nlist.h "$out/include/" ;;
	libbpf)
		mkdir -p "$out/include/bpf"
		# shellcheck disable=SC2046
		compile bpf "$d/src" "-I$d/include -I$d/include/uapi -std=gnu89 -w" -- \
			$(cd "$d/src" && ls ./*.c)
		cp "$d"/src/*.h "$out/include/bpf/" ;;
	esac
done
rm -rf "$out/obj"
echo "$want" >"$out/.complete"
echo "musl: $out ready in $(($(date +%s) - t0)) s"
