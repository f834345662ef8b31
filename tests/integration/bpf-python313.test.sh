#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# CPython 3.13 in the BPF sampler (bpf/python.h): Debian trixie's python3.13 (build/py313-root,
# tools/setup.sh; run on that root's own loader) running tests/workloads/pysplit.py under
# edgeprof-agent --sampler bpf at its default settings. The agent reads the interpreter's own
# _Py_DebugOffsets from the file (agent/core/pydebug.h) and hands them to the program, which
# finds the thread in the interpreter's list and ends each activation at its entry shim. The
# process's samples: >= 95 % name a script function, >= 95 % of those under run() carry the
# whole chain run, main, <module> above Py_RunMain, the handlers' shares within 3 pp of the
# script's own accounting (tests/workloads/pysplit_check.py); fib with its file and lines.
# The agent samples the python's cgroup alone (--bpf-cgroup, where cgroup v2 is writable): what
# is tested is 3.13's reading; system-wide on a busy machine the native walk's CFI rows fill
# with the other processes' files and cut the chains (measured at load 6-8 beside three other
# builds: whole chains 59.7 % system-wide, 100 % in the cgroup; bpf-python (3.11) loses them the
# same way, 16.9 %).
set -u
agent=$EP_BUILD/edgeprof-agent
probe=$EP_BUILD/tests/bpf-probe
root=$EP_TOP/build/py313-root
work=$EP_TOP/tests/workloads
[ -x "$probe" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
grep -q "^CONFIG_BPF_PYTHON=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_BPF_PYTHON off"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
[ "$(uname -m)" = x86_64 ] || { echo "trixie's python3.13 is fetched for x86_64 only"; exit 77; }
[ -f "$root/.complete" ] ||
	{ echo "no build/py313-root: tools/setup.sh fetches Debian trixie's python3.13"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
[ -n "${EP_KEEP:-}" ] && echo "kept: $tmp" # EP_KEEP=1: the files stay, for a look
pids=
. "$EP_TOP/tests/lib/bpf-cgroup.sh"
trap bpf_test_cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
bpf_probe_or_skip
# at 99 Hz a share's sampling error is 0.9 pp with 3,000 samples (the 3 pp bound: 3.3 standard
# deviations): 30 s of one busy process, at nice -10 so that a busy machine leaves it a CPU
secs=${EP_PY_SECONDS:-30}
bpf_own_cgroup edgeprof-py313
# nice and env exec the loader: $! is the interpreter's pid
nice -n -10 env "PYTHONHOME=$root/usr" "$root/usr/lib64/ld-linux-x86-64.so.2" \
	--library-path "$root/usr/lib/x86_64-linux-gnu" "$root/usr/bin/python3.13" \
	"$work/pysplit.py" "$((secs + 3))" >"$tmp/py.out" &
py=$!
pids=$py
sleep 0.5
"$agent" --once --seconds "$secs" --sampler bpf $only --output-dir "$tmp/o" 2>"$tmp/err" &
apid=$!
pids="$pids $apid"
wait "$apid" || { cat "$tmp/err"; fail "agent"; }
wait "$py" || fail "python3.13 exited with $?"
pids=
prof=$(ls "$tmp"/o/*.pb.gz)
line=$(grep -n "^def fib" "$work/pysplit.py" | cut -d: -f1)
go tool pprof -raw -symbolize=none "$prof" 2>/dev/null | grep -m2 -E " fib .*pysplit.py:$((line + 1)) s=$line" ||
	fail "no fib location with the script's file and lines"
PYTHONPATH=$work /usr/bin/python3 "$work/pysplit_check.py" "$prof" "$tmp/py.out" 95 95 3 "$py" ||
	fail "shares or chains"
