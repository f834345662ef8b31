#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the unit tests (under qemu-user for a cross build), then the integration tests on the
# host, and prints one closing line: "total: N passed, N failed".
#
#   tools/run-tests.sh BUILD_DIR ARCH "RUN_PREFIX" UNIT_TEST...
#
# ONLY="a b" runs only the integration tests whose names contain a or b; SKIP="c" skips those
# containing c (counted as skipped); UNIT_ONLY=1 runs no integration test. A test that skips
# itself (exit 77) says why in its last line; the closing summary lists every skip with it.
# NO_SKIP=1 (CI) counts such a skip as a failure: only SKIP may leave a test out.
set -u
build=$1 arch=$2 run=$3
shift 3
top=$(cd "$(dirname "$0")/.." && pwd)
logs="$build/test-logs"
mkdir -p "$logs"
passed=0 failed=0 skipped=0
failures=() skips=()

count_cmocka() { # log -> adds cmocka's per-test counts
	local p f
	p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$1" | awk '{s+=$1} END {print s+0}')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$1" | awk '{s+=$1} END {print s+0}')
	echo "$p $f"
}

matches() { # NAME PATTERN...: does NAME contain one of the patterns?
	local n=$1 p
	shift
	for p in "$@"; do [[ "$n" == *"$p"* ]] && return 0; done
	return 1
}

echo "== unit tests ($arch${run:+, under ${run%% *}})"
for t in "$@"; do
	name=$(basename "$t")
	# shellcheck disable=SC2086
	(cd "$top" && timeout 300 $run "$t") >"$logs/$name.log" 2>&1
	rc=$?
	cat "$logs/$name.log"
	read -r p f < <(count_cmocka "$logs/$name.log")
	passed=$((passed + p))
	failed=$((failed + f))
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
		failed=$((failed + 1)) # crashed or timed out before cmocka could count
		echo "!! $name exited $rc"
	fi
	[ "$rc" != 0 ] && failures+=("$name")
done

# Integration tests drive the real binaries on this machine: host builds only.
if [ "$arch" = "x86_64" ] && [ -z "${UNIT_ONLY:-}" ]; then
	echo "== integration tests"
	for t in "$top"/tests/integration/*.test.sh; do
		[ -e "$t" ] || continue
		name=$(basename "$t" .test.sh)
		if [ -n "${ONLY:-}" ] && ! matches "$name" $ONLY; then continue; fi
		if matches "$name" ${SKIP:-}; then
			skipped=$((skipped + 1)) skips+=("$name: in SKIP")
			echo "SKIP  $name: in SKIP"
			continue
		fi
		start=$(date +%s)
		EP_TOP="$top" EP_BUILD="$(cd "$build" && pwd)" timeout 900 bash "$t" >"$logs/$name.log" 2>&1
		rc=$?
		secs=$(( $(date +%s) - start ))
		case $rc in
		0) passed=$((passed + 1)); echo "PASS  $name (${secs}s)" ;;
		77) why=$(tail -n 1 "$logs/$name.log")
		    echo "SKIP  $name: $why"
		    if [ -n "${NO_SKIP:-}" ]; then
			failed=$((failed + 1)); failures+=("$name"); echo "      (NO_SKIP: a skip fails)"
		    else
			skipped=$((skipped + 1)) skips+=("$name: $why")
		    fi ;;
		*) failed=$((failed + 1)); failures+=("$name"); echo "FAIL  $name (exit $rc, ${secs}s); last lines of $logs/$name.log:"
		   tail -n 25 "$logs/$name.log" | sed 's/^/    /' ;;
		esac
	done
fi

echo
if [ ${#skips[@]} -gt 0 ]; then
	echo "skipped (why, and what runs it):"
	printf '  %s\n' "${skips[@]}"
fi
# CI shows a run's last lines: each failure's own last lines again, just above the summary
for name in "${failures[@]}"; do
	[ -f "$logs/$name.log" ] || continue
	echo "--- $name: last lines of $logs/$name.log"
	tail -n 12 "$logs/$name.log" | cut -c1-200 | sed 's/^/    /'
done
[ ${#failures[@]} -gt 0 ] && echo "failed: ${failures[*]}"
echo "total: $passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ ${#failures[@]} = 0 ]
