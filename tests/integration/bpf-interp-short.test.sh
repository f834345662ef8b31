#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Many short-lived interpreter processes in one round of the BPF agent, at its default settings
# (agent/core/framename.h): 16 waves of three at once, each ~1 s of CPU: Debian's python3.11
# running tests/workloads/pysplit.py, lua5.4 running tests/workloads/luasplit.lua, and
# python3.11 -m pydoc rendering seven standard modules (a program we did not write: pydoc,
# inspect and the modules' imports, hundreds of functions a run). Their frames are named while
# they run; they have exited long before the round is written. When names were only cached,
# later processes' names pushed out earlier ones', which could not be read again (42 runs of
# each script, 2026-11-29: 7.7 % of the Lua samples with an unnamed frame). Names are now held
# until their round is written. Checked: at most 1 % of each script's samples has an unnamed
# interpreter frame (pydoc's: 6 %, see BOUND_UNNAMED), nothing held was dropped (the "python
# names:" and "lua names:" comments), and >= 90 % of each script's samples name a handler
# (pydoc's: >= 80 % come from runpy's _run_module_as_main). A process's first samples come
# before the agent has listed it: the bound is bpf-python's for a process started after the
# agent. Sampled in the test's own cgroup (tests/lib/bpf-cgroup.sh).
set -u
agent=$EP_BUILD/edgeprof-agent
probe=$EP_BUILD/tests/bpf-probe
py=/usr/bin/python3.11
lua=/usr/bin/lua5.4
auto=$EP_BUILD/include/config/auto.conf
[ -x "$probe" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
grep -q "^CONFIG_BPF_PYTHON=y" "$auto" || { echo "CONFIG_BPF_PYTHON off"; exit 77; }
grep -q "^CONFIG_BPF_LUA=y" "$auto" || { echo "CONFIG_BPF_LUA off"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
[ -x "$py" ] || { echo "python3.11 not installed"; exit 77; }
[ -x "$lua" ] || { echo "lua5.4 not installed"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
[ -n "${EP_KEEP:-}" ] && echo "kept: $tmp" # EP_KEEP=1: the files stay, for a look
pids=
. "$EP_TOP/tests/lib/bpf-cgroup.sh"
trap bpf_test_cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
bpf_probe_or_skip
runs=${EP_SHORT_RUNS:-16}
mods="typing argparse email.message http.client asyncio.base_events inspect collections"
bpf_own_cgroup edgeprof-bpf-short
"$agent" --once --seconds "$((2 * runs + 10))" --sampler bpf $only --output-dir "$tmp/o" 2>"$tmp/err" &
apid=$!
pids=$apid
bpf_wait_sampling "$apid"
sleep 1
: >"$tmp/py.pids"
: >"$tmp/lua.pids"
: >"$tmp/pydoc.pids"
for i in $(seq "$runs"); do
	nice -n -10 $py "$EP_TOP/tests/workloads/pysplit.py" 1 >"$tmp/py$i.out" &
	p=$!
	nice -n -10 $lua "$EP_TOP/tests/workloads/luasplit.lua" 1 >"$tmp/lua$i.out" &
	l=$!
	PAGER=cat nice -n -10 $py -m pydoc $mods >"$tmp/pydoc$i.out" 2>&1 &
	d=$!
	echo $p >>"$tmp/py.pids"
	echo $l >>"$tmp/lua.pids"
	echo $d >>"$tmp/pydoc.pids"
	pids="$apid $p $l $d"
	wait "$p" || fail "python run $i exited with $?"
	wait "$l" || fail "lua run $i exited with $?"
	wait "$d" || { tail -3 "$tmp/pydoc$i.out"; fail "pydoc run $i exited with $?"; }
done
alive=1
kill -0 "$apid" 2>/dev/null || alive=0
wait "$apid" || { cat "$tmp/err"; fail "agent"; }
pids=
[ "$alive" = 1 ] || fail "the round ended before the runs did (a slow machine): raise --seconds"
prof=$(ls "$tmp"/o/*.pb.gz)
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$prof" "$tmp" \
	"$EP_TOP/tests/workloads/luasplit.lua" <<'PY'
import re
import sys
import pprof_traces as pt
path, tmp, luasplit = sys.argv[1:4]
ss = pt.samples(path)
# an interpreter frame the writer could not name: its mapping's name, as pprof shows it
UNNAMED = {"py": re.compile(r"^\[\[python\]\]$"), "lua": re.compile(r"^\[\[lua5\.4\]\]$")}
UNNAMED["pydoc"] = UNNAMED["py"]
# pydoc: an import's module body, freed within milliseconds of running, is often gone when
# the agent reads it (3.6-3.9 % of the samples, with the reader woken every 5 or 20 ms); the
# interpreter's start and finalization (~4 %) and the samples before the agent lists a process
# (~3 %) run no handler
BOUND_UNNAMED = {"py": 1, "lua": 1, "pydoc": 6}
BOUND_NAMED = {"py": 90, "lua": 90, "pydoc": 80}
HANDLERS = {"py": ("fib", "work_dict", "outer", "inner"),
            "lua": ("fib", "fibs", "work_str", "outer", "inner"), "pydoc": ("_run_module_as_main",)}
lua_first = {re.match(r"local function (\w+)", l).group(1): str(n + 1)
             for n, l in enumerate(open(luasplit).read().splitlines())
             if re.match(r"local function (\w+)", l)}
lua_handler_lines = {lua_first[h] for h in HANDLERS["lua"] if h in lua_first}


def handler(rt, frame):
    if rt != "lua":
        return frame in HANDLERS[rt]
    m = re.match(r"function <.*luasplit\.lua:(\d+)>$", frame)
    return bool(m) and m.group(1) in lua_handler_lines


ok = True
for rt in ("py", "lua", "pydoc"):
    pids = set(open(f"{tmp}/{rt}.pids").read().split())
    mine = [s for s in ss if s.labels.get("pid") in pids]
    tot = sum(s.value for s in mine) or 1
    unnamed = sum(s.value for s in mine if any(UNNAMED[rt].match(f) for f in s.frames))
    named = sum(s.value for s in mine if any(handler(rt, f) for f in s.frames))
    seen = len({s.labels.get("pid") for s in mine})
    print(f"{rt}: {seen} of {len(pids)} runs sampled, {len(mine)} stacks, {tot / 1e9:.2f} s; "
          f"unnamed interpreter frame {100 * unnamed / tot:.2f}%; handler named {100 * named / tot:.1f}%")
    ok &= (seen >= len(pids) * 3 // 4 and 100 * unnamed / tot <= BOUND_UNNAMED[rt] and
           100 * named / tot >= BOUND_NAMED[rt])
for l in pt.header(path):
    if "python names:" in l or "lua names:" in l:
        print(l.strip())
        m = re.search(r"dropped=(\d+)", l)
        ok &= bool(m) and m.group(1) == "0"
sys.exit(0 if ok else 1)
PY
