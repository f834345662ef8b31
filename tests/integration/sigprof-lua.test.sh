#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Debian's lua5.4 under LD_PRELOAD=libedgeprof.so (standalone): the samples carry the script's
# own Lua functions (agent/lib/luaframes.h) in place of luaV_execute, with file and line.
# tests/workloads/luasplit.lua runs three handlers (fibs -> fib, work_str -> a gsub callback,
# outer -> inner) and prints its own CPU accounting (os.clock): >= 95 % of the samples carry
# a handler's frame, the handlers' shares are within 3 pp of the script's, >= 95 % of the
# chains are whole (main chunk -> main -> run -> handler, between __libc_start_main and the
# leaf, in order), and the script's output and exit status are those of a run without the
# library. A coroutine's frames sit above lua_resume, its resumer's below (luaco.lua).
# EP_LUA: another interpreter (sigprof-lua51 runs these checks with lua5.1; LuaJIT: sigprof-luajit).
set -u
lib=$EP_BUILD/libedgeprof.so
lua=${EP_LUA:-/usr/bin/lua5.4}
work=$EP_TOP/tests/workloads/luasplit.lua
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
grep -q "^CONFIG_LUAFRAMES=y" "$EP_BUILD/include/config/auto.conf" || { echo "CONFIG_LUAFRAMES off"; exit 77; }
[ -x "$lua" ] || { echo "$lua not installed"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$lua" "$work" 1 3 >"$tmp/plain.out"
plain_rc=$?
env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/cpu.pb.gz" EDGEPROF_HZ=997 "$lua" "$work" 8 3 \
	>"$tmp/prof.out"
prof_rc=$?
[ "$plain_rc" = 3 ] && [ "$prof_rc" = 3 ] || fail "exit status $prof_rc under the library, $plain_rc without"
[ "$(cut -d' ' -f1 "$tmp/plain.out")" = "$(cut -d' ' -f1 "$tmp/prof.out")" ] ||
	fail "output differs: $(cat "$tmp/prof.out")"
cat "$tmp/prof.out"
line=$(grep -n "^local function inner" "$work" | cut -d: -f1)
body=$((line + 2)) # x = (x * 31 + i) % 1000003: where inner spends its time
go tool pprof -lines -top -symbolize=none "$tmp/cpu.pb.gz" 2>/dev/null |
	grep -m1 -E "luasplit.lua:$line> .*luasplit.lua:$body\$" ||
	fail "no inner location with the script's file, first line and current line"
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/cpu.pb.gz" "$tmp/prof.out" "$work" <<'PY'
import re, sys
import pprof_traces as pt
path, out, work = sys.argv[1:4]
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
whole = 0.0
for s in ss:
    names = [name(f) for f in s.frames]
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
print(f"samples {len(ss)} stacks, {tot / 1e9:.2f} s; handler frame {100 * htot / tot:.1f}%; "
      f"whole chains __libc_start_main..chunk..main..run..handler {100 * whole / tot:.1f}%")
print("shares " + " ".join(f"{h} {shares[h]:.1f} (script {truth[h]:.1f})" for h in H) +
      f"; max gap {gap:.1f} pp")
for l in pt.header(path):
    if "lua" in l and "edgeprof" in l or l.startswith("lua names"):
        print(l.strip())
ok = tot > 1e9 and 100 * htot / tot >= 95 and gap <= 3 and 100 * whole / tot >= 95
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || fail "Lua frames below the goals"

# A coroutine (tests/workloads/luaco.lua): its frames (leaf <- gen) above lua_resume, the
# resumer's (driver <- main chunk) below, in >= 95 % of the samples under driver.
co=$EP_TOP/tests/workloads/luaco.lua
env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/co.pb.gz" EDGEPROF_HZ=997 "$lua" "$co" 3 >"$tmp/co.out"
[ "$(cat "$tmp/co.out")" = "$(printf 'true\ttrue')" ] || fail "luaco.lua output: $(cat "$tmp/co.out")"
PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/co.pb.gz" "$co" <<'PY'
import re, sys
import pprof_traces as pt
path, co = sys.argv[1:3]
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
    if script[-2:] == ["leaf", "gen"] and "lua_resume" in names[names.index("gen"):i]:
        whole += s.value
print(f"coroutine: under driver {under / 1e9:.2f} s, leaf <- gen <- lua_resume <- driver "
      f"{100 * whole / max(under, 1):.1f}%")
sys.exit(0 if under > 0.5e9 and whole >= 0.95 * under else 1)
PY
[ $? = 0 ] || fail "coroutine frames not in place"

echo PASS
