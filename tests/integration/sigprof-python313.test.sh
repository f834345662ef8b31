#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPython 3.13 under LD_PRELOAD=libedgeprof.so (standalone): Debian trixie's python3.13, unpacked
# with trixie's glibc into build/py313-root by tools/setup.sh (tools/deps/py313-amd64.target-list)
# and run with that root's loader. Its frames come from the interpreter's own _Py_DebugOffsets
# (agent/core/pydebug.h; the profile's comment says debug_offsets=used). tests/workloads/pysplit.py
# runs three handlers and prints its own CPU accounting: >= 95 % of the samples name a script
# function, >= 95 % of those under run() carry the whole chain run, main, <module> above the
# native Py_RunMain, the handlers' shares are within 3 pp of the script's, and the output and
# exit status are those of a run without the library. Then tests/workloads/pylines.py: the
# frames' lines from 3.13's location tables (>= 95 % of the samples under hot() on a HOT line).
# Then tests/workloads/pythreads.py: three threads, each in a function of its own, the GIL
# passed between them: >= 95 % of each thread's samples name its own function (its state found
# in the interpreter's list by its thread_id), no mismatch counted.
# Last, a copy of the interpreter whose _Py_DebugOffsets cookie is changed (CPython itself never
# reads it): the table is refused (debug_offsets=refused, unknown_version=1), no Python frame is
# spliced, and the script's output and exit status stay those of a run without the library.
set -u
lib=$EP_BUILD/libedgeprof.so
root=$EP_TOP/build/py313-root
work=$EP_TOP/tests/workloads
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
grep -q "^CONFIG_PYFRAMES=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_PYFRAMES off"; exit 77; }
[ "$(uname -m)" = x86_64 ] || { echo "trixie's python3.13 is fetched for x86_64 only"; exit 77; }
[ -f "$root/.complete" ] ||
	{ echo "no build/py313-root: tools/setup.sh fetches Debian trixie's python3.13"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# trixie's python on trixie's loader and libraries (the library path is the loader's argument,
# so no program it starts inherits it); env execs it: $! is the interpreter's pid
py313=(env "PYTHONHOME=$root/usr" "$root/usr/lib64/ld-linux-x86-64.so.2"
	--library-path "$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/python3.13")

"${py313[@]}" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' || fail "build/py313-root does not run 3.13"
"${py313[@]}" "$work/pysplit.py" 1 3 >"$tmp/plain.out"
plain_rc=$?
env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/cpu.pb.gz" EDGEPROF_HZ=997 "${py313[@]}" \
	"$work/pysplit.py" 10 3 cpu \
	>"$tmp/prof.out"
prof_rc=$?
[ "$plain_rc" = 3 ] && [ "$prof_rc" = 3 ] || fail "exit status $prof_rc under the library, $plain_rc without"
[ "$(cut -d' ' -f1 "$tmp/plain.out")" = "$(cut -d' ' -f1 "$tmp/prof.out")" ] ||
	fail "output differs: $(cat "$tmp/prof.out")"
cat "$tmp/prof.out"
go tool pprof -raw -symbolize=none "$tmp/cpu.pb.gz" 2>/dev/null | grep -E "^(Comment: )?edgeprof python: version=3.13 spliced=1 .*debug_offsets=used" ||
	fail "the 3.13 frames were not read from the debug offsets"
line=$(grep -n "^def fib" "$work/pysplit.py" | cut -d: -f1)
go tool pprof -raw -symbolize=none "$tmp/cpu.pb.gz" 2>/dev/null | grep -m2 -E " fib .*pysplit.py:$((line + 1)) s=$line" ||
	fail "no fib location with the script's file and lines"
PYTHONPATH=$work /usr/bin/python3 "$work/pysplit_check.py" "$tmp/cpu.pb.gz" "$tmp/prof.out" 95 95 3 ||
	fail "shares or chains"

env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/lines.pb.gz" "${py313[@]}" "$work/pylines.py" 4 >"$tmp/lines.out" &
pid=$!
wait "$pid" || fail "pylines.py exited with $?"
grep -q "^sink " "$tmp/lines.out" || fail "output: $(cat "$tmp/lines.out")"
PYTHONPATH=$work /usr/bin/python3 "$work/pylines_check.py" "$tmp/lines.pb.gz" "$work/pylines.py" \
	"$pid" 95 1 || fail "lines"

env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/thr.pb.gz" EDGEPROF_HZ=997 "${py313[@]}" \
	"$work/pythreads.py" 0.8 >"$tmp/thr.out" || fail "pythreads.py exited with $?"
grep -q "^threads done" "$tmp/thr.out" || fail "pythreads.py output: $(cat "$tmp/thr.out")"
go tool pprof -raw -symbolize=none "$tmp/thr.pb.gz" 2>/dev/null | grep -E "^(Comment: )?edgeprof python: .* mismatch=0 " ||
	fail "thread states not found as the threads' own"
PYTHONPATH=$work /usr/bin/python3 - "$tmp/thr.pb.gz" <<'PY' || fail "threads' frames"
import sys
import pprof_traces as pt
per = {}
for s in pt.samples(sys.argv[1]):
    work = next((f for f in s.frames if f.startswith("work_")), None)
    t = per.setdefault(s.labels.get("thread"), {"all": 0.0})
    t["all"] += s.value
    if work:
        t[work] = t.get(work, 0.0) + s.value
ok = 0
for tid, t in sorted(per.items()):
    own = max((k for k in t if k != "all"), key=t.get, default=None)
    share = 100 * t[own] / t["all"] if own else 0
    print(f"thread {tid}: {t['all'] / 1e6:.0f} ms, {own or 'no work_ function'} {share:.1f}%")
    ok += own is not None and share >= 95 and t["all"] >= 2e8
sys.exit(0 if ok == 3 else 1)
PY

# the cookie at _PyRuntime: "xdebugpy" followed by the version, 3.13.x
cp "$root/usr/bin/python3.13" "$tmp/python3.13"
/usr/bin/python3 - "$tmp/python3.13" <<'PY' || fail "no _Py_DebugOffsets cookie in python3.13"
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
at, i = [], d.find(b"xdebugpy")
while i >= 0:
    if struct.unpack_from("<Q", d, i + 8)[0] >> 16 == 0x30d:
        at.append(i)
    i = d.find(b"xdebugpy", i + 1)
if len(at) != 1:
    sys.exit(1)
d[at[0] + 7:at[0] + 8] = b"X"
open(sys.argv[1], "wb").write(d)
PY
bad=("${py313[@]:0:5}" "$tmp/python3.13") # its loader and libraries, the copy
"${bad[@]}" "$work/pysplit.py" 1 3 >"$tmp/bad-plain.out"
plain_rc=$?
env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/bad.pb.gz" EDGEPROF_HZ=997 "${bad[@]}" "$work/pysplit.py" 1 3 \
	>"$tmp/bad.out"
prof_rc=$?
[ "$plain_rc" = 3 ] && [ "$prof_rc" = 3 ] || fail "refused table: exit status $prof_rc, $plain_rc without the library"
[ "$(cut -d' ' -f1 "$tmp/bad-plain.out")" = "$(cut -d' ' -f1 "$tmp/bad.out")" ] ||
	fail "refused table: output differs: $(cat "$tmp/bad.out")"
go tool pprof -raw -symbolize=none "$tmp/bad.pb.gz" 2>/dev/null |
	grep -E "^(Comment: )?edgeprof python: version=3.13 spliced=0 unknown_version=1 samples=0 .*debug_offsets=refused" ||
	fail "a changed cookie was not refused"
