#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds and runs libFuzzer targets for a bounded time (`make fuzz` calls this).
#
#   tools/run-fuzz.sh NAME...        (FUZZ_SECONDS=60 per target by default)
#
# How a target is declared: an area's Build.mk adds `fuzz-y += NAME` and the objects it links from
# its own lists, NAME-fuzz-objs (and NAME-fuzz-ldlibs); tests/fuzz/NAME.c defines
# LLVMFuzzerTestOneInput; `make fuzz-srcs` turns the objects into the sources built here with
# clang; tests/fuzz/NAME.corpus/ (optional) holds
# seeds. Targets are built with clang -fsanitize=fuzzer,address,undefined into $O/fuzz/. New
# corpus entries go to $O/fuzz/NAME.corpus (the committed seeds are not touched). A crash
# leaves its input in $O/fuzz/ (crash-*): turn it into a unit regression test in tests/unit/.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
board=$(cat build/.board 2>/dev/null || echo host-x86_64)
O=${O:-build/$board}
secs=${FUZZ_SECONDS:-60}
CLANG=${CLANG:-$(command -v clang || command -v clang-14)}
[ -n "$CLANG" ] || { echo "run-fuzz: clang is not installed"; exit 1; }
[ $# -gt 0 ] || { echo "run-fuzz: no fuzz targets declared (fuzz-y)"; exit 0; }

# Generated headers (nanopb, config) come from the normal build.
make --no-print-directory -s fuzz-generated
mkdir -p "$O/fuzz"
lists=$(make --no-print-directory -s fuzz-srcs)
status=0
for name in "$@"; do
	srcs=() libs=()
	for w in $(sed -n "s/^$name: //p" <<<"$lists"); do
		case $w in -l*) libs+=("$w") ;; *) srcs+=("$w") ;; esac
	done
	bin="$O/fuzz/$name"
	echo "  FUZZ-CC  $bin"
	"$CLANG" -g -O1 -std=c11 -D_GNU_SOURCE -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=undefined -I. -I"$O" -I"$O/include" \
		-include "$O/include/generated/autoconf.h" -include kconfig/kconfig.h \
		-o "$bin" "tests/fuzz/$name.c" "${srcs[@]}" "${libs[@]}"
	corpus="$O/fuzz/$name.corpus"
	mkdir -p "$corpus"
	seeds=()
	[ -d "tests/fuzz/$name.corpus" ] && seeds=("tests/fuzz/$name.corpus")
	echo "  FUZZ     $name for ${secs}s"
	if ! (cd "$O/fuzz" && "./$name" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
		-print_final_stats=1 "$(pwd)/$name.corpus" "${seeds[@]/#/$top/}" \
		>"$name.log" 2>&1); then
		status=1
		echo "!! $name found a crash; see $O/fuzz/$name.log and $O/fuzz/crash-*"
		tail -n 30 "$O/fuzz/$name.log"
	else
		grep -E "stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb" "$O/fuzz/$name.log" |
			sed "s/^/  $name: /"
	fi
done
exit $status
