#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Lua 5.4 frames in the BPF sampler (bpf/lua.h): Debian's lua5.4 (Lua linked in, stripped:
# luaV_execute has no symbol) running tests/workloads/luasplit.lua (three handlers; the script
# prints its own os.clock accounting, the truth) under edgeprof-agent --sampler bpf at its
# default settings. Processes: two started before the agent (the main check: >= 95 % of their
# samples carry a handler's frame, the handlers' shares within 3 pp of their accounting, the
# chain __libc_start_main .. main chunk -> main -> run -> handler whole in >= 95 %), one
# started after it (>= 90 % with a handler: its first samples come before it is listed), and
# a short-lived one (0.4 s: at least half of its samples with a handler). Then a coroutine
# (tests/workloads/luaco.lua): its frames (leaf <- gen) above lua_resume, its resumer's
# (driver) below, in >= 90 % of the samples under driver. The inner frame carries the
# script's file, its first line and its body's line.
set -u
agent=$EP_BUILD/edgeprof-agent
probe=$EP_BUILD/tests/bpf-probe
lua=/usr/bin/lua5.4
work=$EP_TOP/tests/workloads/luasplit.lua
co=$EP_TOP/tests/workloads/luaco.lua
[ -x "$probe" ] || { echo "bpf-probe not built (CONFIG_SAMPLER_BPF off)"; exit 77; }
grep -q "^CONFIG_BPF_LUA=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_BPF_LUA off"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "needs root for bpf()"; exit 77; }
[ -x $lua ] || { echo "lua5.4 not installed"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
[ -n "${EP_KEEP:-}" ] && echo "kept: $tmp" # EP_KEEP=1: the files stay, for a look
pids=
. "$EP_TOP/tests/lib/bpf-cgroup.sh"
trap bpf_test_cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
bpf_probe_or_skip
secs=${EP_LUA_SECONDS:-20}
bpf_own_cgroup edgeprof-bpf-lua # sampled alone: tests/lib/bpf-cgroup.sh says why
# The scripts count CPU time; at -10 (root) they get the CPUs on a machine busy with other
# work, so that they end while the agent samples and their shares rest on enough samples.
lua="nice -n -10 $lua"
$lua "$work" "$((secs + 4))" >"$tmp/before1.out" &
b1=$!
$lua "$work" "$((secs + 4))" >"$tmp/before2.out" &
b2=$!
pids="$b1 $b2"
sleep 0.5
# (10 s more than the scripts' share: a loaded machine takes seconds to load the program)
"$agent" --once --seconds "$((secs + 10))" --sampler bpf $only --output-dir "$tmp/o" 2>"$tmp/err" &
apid=$!
pids="$pids $apid"
bpf_wait_sampling "$apid"
sleep 1
# (the scripts count CPU time: on a busy machine they take longer; all end well before the agent)
$lua "$work" "$((secs / 5))" >"$tmp/after.out" &
after=$!
$lua "$co" 2 >"$tmp/co.out" &
cop=$!
pids="$pids $after $cop"
sleep 1
$lua "$work" 0.4 >"$tmp/short.out" &
short=$!
pids="$pids $short"
wait "$short" || fail "the short lua exited with $?"
wait "$after" || fail "the lua started after the agent exited with $?"
wait "$cop" || fail "luaco.lua exited with $?"
kill -0 "$apid" 2>/dev/null || { cat "$tmp/err"; fail "the agent ended before the scripts (a busy machine?)"; }
[ "$(cat "$tmp/co.out")" = "$(printf 'true\ttrue')" ] || fail "luaco.lua output: $(cat "$tmp/co.out")"
wait "$apid" || { cat "$tmp/err"; fail "agent"; }
wait "$b1" || fail "a lua started before the agent exited with $?"
wait "$b2" || fail "a lua started before the agent exited with $?"
pids=
prof=$(ls "$tmp"/o/*.pb.gz)
line=$(grep -n "^local function inner" "$work" | cut -d: -f1)
go tool pprof -lines -top -symbolize=none "$prof" 2>/dev/null |
	grep -m1 -E "luasplit.lua:$line> .*luasplit.lua:($((line + 2))|$((line + 3)))\$" ||
	fail "no inner location with the script's file, first line and current line"
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$prof" "$tmp" "$work" "$co" "$b1" "$b2" \
	"$after" "$short" "$cop" <<'PY'
import collections, re, sys
import pprof_traces as pt
path, tmp, work, co, b1, b2, after, short, cop = sys.argv[1:10]
H = ("fib", "work_str", "outer")
ss = pt.samples(path)


def firsts(script):
    return {re.match(r"local function (\w+)", l).group(1): n + 1
            for n, l in enumerate(open(script).read().splitlines())
            if re.match(r"local function (\w+)", l)}


by_line = {str(v): k for k, v in firsts(work).items()}


def name(frame):
    """The script function a frame is (by its first line), or None."""
    if frame.startswith("main chunk <") and frame.endswith("luasplit.lua>"):
        return "<chunk>"
    m = re.match(r"function <.*luasplit\.lua:(\d+)>$", frame)
    return by_line.get(m.group(1)) if m else None


def judge(what, pids, outs):
    main = [s for s in ss if s.labels.get("pid") in pids]
    missing = collections.Counter()  # samples without a handler, by their frames
    tot = sum(s.value for s in main) or 1
    per = dict.fromkeys(H, 0.0)
    whole = 0.0
    for s in main:
        names = [name(f) for f in s.frames]
        h = next(({"fibs": "fib", "inner": "outer"}.get(n, n) for n in names
                  if n in H or n in ("fibs", "inner")), None)
        if h:
            per[h] += s.value
        else:
            missing[" <- ".join(s.frames[:6]) + (" ... " + " <- ".join(s.frames[-3:])
                                                  if len(s.frames) > 6 else "")] += s.value
        top = [n for n in names if n][-4:]
        ok = (h and top[1:] == ["run", "main", "<chunk>"] and "__libc_start_main" in s.frames
              and s.frames.index("__libc_start_main") > max(i for i, n in enumerate(names) if n))
        whole += s.value if ok else 0
    truth = dict.fromkeys(H, 0.0)
    for out in outs:
        for l in open(out):
            if l.split()[0] in H:
                truth[l.split()[0]] += float(l.split()[1]) / len(outs)
    htot = sum(per.values()) or 1
    gap = max(abs(100 * per[h] / htot - truth[h]) for h in H)
    named = 100 * htot / tot
    print(f"{what}: {len(main)} stacks, {tot / 1e9:.2f} s; handler frame {named:.1f}%; whole "
          f"chains __libc_start_main..chunk..main..run..handler {100 * whole / tot:.1f}%; shares " +
          " ".join(f"{h} {100 * per[h] / htot:.1f} (script {truth[h]:.1f})" for h in H) +
          f"; max gap {gap:.1f} pp")
    for frames, v in missing.most_common(3 if htot < 0.97 * tot else 0):
        print(f"    without a handler, {100 * v / tot:.1f}%: {frames}")
    return tot, named, 100 * whole / tot, gap


ok = True
tot, named, whole, gap = judge("before the agent", (b1, b2),
                               (tmp + "/before1.out", tmp + "/before2.out"))
ok &= tot >= 5e9 and named >= 95 and whole >= 95 and gap <= 3
tot, named, whole, gap = judge("after the agent", (after,), (tmp + "/after.out",))
ok &= tot >= 1e9 and named >= 90
tot, named, whole, gap = judge("short-lived", (short,), (tmp + "/short.out",))
ok &= tot > 0 and named >= 50
# the coroutine: leaf <- gen above lua_resume, driver below
fn = {f"function <{co}:{v}>": k for k, v in firsts(co).items()}
under = good = 0.0
for s in ss:
    if s.labels.get("pid") != cop:
        continue
    names = [fn.get(f, f) for f in s.frames]
    if "driver" not in names:
        continue
    under += s.value
    i = names.index("driver")
    script = [n for n in names[:i] if n in fn.values()]
    if script[-2:] == ["leaf", "gen"] and "lua_resume" in names[names.index("gen"):i]:
        good += s.value
print(f"coroutine: under driver {under / 1e9:.2f} s, leaf <- gen <- lua_resume <- driver "
      f"{100 * good / max(under, 1):.1f}%")
ok &= under > 0.2e9 and good >= 0.9 * under
for l in pt.header(path):
    if "lua_" in l:
        print(" ".join(w for w in l.split() if w.startswith("lua_")))
    if "cfi_" in l:
        print(" ".join(w for w in l.split() if w.startswith("cfi_")))
    elif l.startswith("lua names"):
        print(l.strip())
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || fail "Lua frames below the goals"
echo PASS
