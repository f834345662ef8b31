#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Debian's luajit (2.1.0-beta3, GC64, the VM linked statically into /usr/bin/luajit) under
# LD_PRELOAD=libedgeprof.so (standalone): the samples carry the script's own Lua functions
# (agent/lib/ljframes.h) in place of the interpreter's native frames.
# tests/workloads/luasplit.lua's three handlers (fibs -> fib, work_str -> a gsub callback,
# outer -> inner) with its own CPU accounting (os.clock) as truth, once with the JIT on (the
# default) and once with -joff: >= 95 % of the samples carry a handler's frame, the handlers'
# shares are within 3 pp of the script's, >= 95 % of the chains are whole (main chunk -> main
# -> run -> handler, between __libc_start_main and the leaf, in order), the output and exit
# status are those of a run without the library, and the profile says LuaJIT was spliced.
# -joff: inner's location carries the script's file, first line and current line (the
# interpreter's PC). JIT on: the samples in traces are labelled "[LuaJIT trace]" (leaf) over
# the trace's starting function, which has no current line; >= 30 % of the samples are there.
# The coroutine case (tests/workloads/luaco.lua, both modes): the coroutine's frames (leaf <-
# gen) above the resumer's (driver).
set -u
lib=$EP_BUILD/libedgeprof.so
lua=/usr/bin/luajit
work=$EP_TOP/tests/workloads/luasplit.lua
co=$EP_TOP/tests/workloads/luaco.lua
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
grep -q "^CONFIG_LJFRAMES=y" "$EP_BUILD/include/config/auto.conf" ||
	{ echo "CONFIG_LJFRAMES off (x86_64 only)"; exit 77; }
[ -x "$lua" ] || { echo "$lua not installed (tools/deps/agent.list)"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for mode in on off; do
	flags=$([ $mode = off ] && echo -joff)
	echo "== luajit, JIT $mode"
	"$lua" $flags "$work" 1 3 >"$tmp/plain.out"
	plain_rc=$?
	env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/cpu.pb.gz" EDGEPROF_HZ=997 \
		"$lua" $flags "$work" 6 3 >"$tmp/prof.out"
	prof_rc=$?
	[ "$plain_rc" = 3 ] && [ "$prof_rc" = 3 ] ||
		fail "exit status $prof_rc under the library, $plain_rc without"
	[ "$(cut -d' ' -f1 "$tmp/plain.out")" = "$(cut -d' ' -f1 "$tmp/prof.out")" ] ||
		fail "output differs: $(cat "$tmp/prof.out")"
	cat "$tmp/prof.out"
	go tool pprof -raw -symbolize=none "$tmp/cpu.pb.gz" 2>/dev/null |
		grep -m1 "edgeprof lua: version=LuaJIT-2.1.0-beta3 spliced=1 unknown_version=0" ||
		fail "the profile does not say LuaJIT was spliced"
	if [ $mode = off ]; then
		line=$(grep -n "^local function inner" "$work" | cut -d: -f1)
		# x = (x * 31 + i) % 1000003, the loop's body: where inner spends its time (its
		# FORL is on the line of the for, line + 2)
		body=$((line + 3))
		go tool pprof -lines -top -symbolize=none "$tmp/cpu.pb.gz" 2>/dev/null |
			grep -m1 -E "luasplit.lua:$line> .*luasplit.lua:$body\$" ||
			fail "no inner location with the script's file, first line and current line"
	fi
	PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/cpu.pb.gz" "$tmp/prof.out" \
		"$work" "$mode" <<'PY'
import re, sys
import pprof_traces as pt
path, out, work, mode = sys.argv[1:5]
H = ("fib", "work_str", "outer")
src = open(work).read().splitlines()
first = {re.match(r"local function (\w+)", l).group(1): n + 1
         for n, l in enumerate(src) if re.match(r"local function (\w+)", l)}
by_line = {str(v): k for k, v in first.items()}

def name(frame):
    """The script function a frame is (by its first line), or None."""
    if frame.startswith("main chunk <") and frame.endswith("luasplit.lua>"):
        return "<chunk>"
    m = re.match(r"function <.*luasplit\.lua:(\d+)>$", frame)
    return by_line.get(m.group(1)) if m else None

truth = {l.split()[0]: float(l.split()[1]) for l in open(out) if l.split()[0] in H}
ss = pt.samples(path)
tot = sum(s.value for s in ss)
per = dict.fromkeys(H, 0.0)
whole = traced = 0.0
for s in ss:
    names = [name(f) for f in s.frames]
    traced += s.value if s.frames and s.frames[0] == "[LuaJIT trace]" else 0
    # a handler's own frame, or the one it calls (fibs -> fib, outer -> inner)
    h = next(({"fibs": "fib", "inner": "outer"}.get(n, n) for n in names
              if n in H or n in ("fibs", "inner")), None)
    if h:
        per[h] += s.value
    script = [n for n in names if n]
    top = script[-4:] if len(script) >= 4 else []
    ok = (h and top[1:] == ["run", "main", "<chunk>"] and "__libc_start_main" in s.frames and
          s.frames.index("__libc_start_main") > max(i for i, n in enumerate(names) if n))
    whole += s.value if ok else 0
htot = sum(per.values())
shares = {h: 100 * per[h] / htot for h in H}
gap = max(abs(shares[h] - truth[h]) for h in H)
print(f"JIT {mode}: samples {len(ss)} stacks, {tot / 1e9:.2f} s; handler frame "
      f"{100 * htot / tot:.1f}%; whole chains __libc_start_main..chunk..main..run..handler "
      f"{100 * whole / tot:.1f}%; in JIT traces {100 * traced / tot:.1f}%")
print("shares " + " ".join(f"{h} {shares[h]:.1f} (script {truth[h]:.1f})" for h in H) +
      f"; max gap {gap:.1f} pp")
for l in pt.header(path):
    if "edgeprof lua" in l or l.startswith("lua names"):
        print(l.strip())
ok = tot > 1e9 and 100 * htot / tot >= 95 and gap <= 3 and 100 * whole / tot >= 95
ok = ok and (traced >= 0.3 * tot if mode == "on" else traced == 0)
sys.exit(0 if ok else 1)
PY
	[ $? = 0 ] || fail "LuaJIT frames below the goals (JIT $mode)"

	env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/co.pb.gz" EDGEPROF_HZ=997 "$lua" $flags "$co" 3 \
		>"$tmp/co.out"
	[ "$(cat "$tmp/co.out")" = "$(printf 'true\ttrue')" ] ||
		fail "luaco.lua output: $(cat "$tmp/co.out")"
	PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/co.pb.gz" "$co" "$mode" <<'PY'
import re, sys
import pprof_traces as pt
path, co, mode = sys.argv[1:4]
first = {re.match(r"local function (\w+)", l).group(1): n + 1
         for n, l in enumerate(open(co).read().splitlines()) if re.match(r"local function (\w+)", l)}
fn = {f"function <{co}:{v}>": k for k, v in first.items()}
under = whole = 0.0
for s in pt.samples(path):
    names = [fn.get(f, f) for f in s.frames]
    if "driver" not in names:
        continue
    under += s.value
    i = names.index("driver")
    script = [n for n in names[:i] if n in first]
    # JIT on: a trace started in gen's loop shows gen alone above driver (leaf is inlined)
    if script[-2:] == ["leaf", "gen"] or (mode == "on" and script[-1:] == ["gen"]):
        whole += s.value
print(f"coroutine, JIT {mode}: under driver {under / 1e9:.2f} s, the coroutine's frames above "
      f"driver {100 * whole / max(under, 1):.1f}%")
sys.exit(0 if under > 0.5e9 and whole >= 0.95 * under else 1)
PY
	[ $? = 0 ] || fail "coroutine frames not in place (JIT $mode)"
done
echo PASS
