#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Lua 5.1 and LuaJIT under LD_PRELOAD=libedgeprof.so (standalone).
# Debian's lua5.1 (5.1.5; the interpreter links Lua statically) and a program embedding
# liblua5.1.so.0 (tests/workloads/luahost.c, built here): sigprof-lua's checks run with each
# (EP_LUA): the script's own frames in place of luaV_execute (agent/lib/lua51frames.c), >= 95 %
# of the samples with a handler's frame, shares within 3 pp of the script's accounting, >= 95 %
# whole chains, the coroutine case, the output and exit status unchanged; and the profile says
# 5.1 was spliced.
# LuaJIT (Debian's luajit 2.1, statically linked too) has no walker: what it gets is checked as
# it is, so that a change shows: the version counted (unknown_version=1), nothing spliced, no
# sample naming a script function, output and exit status unchanged; the share of samples in
# JIT traces (anonymous code: <unknown>) and in luajit's own code is printed, with the JIT on
# and off (-joff).
set -u
lib=$EP_BUILD/libedgeprof.so
work=$EP_TOP/tests/workloads/luasplit.lua
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
grep -q "^CONFIG_LUA51FRAMES=y" "$EP_BUILD/include/config/auto.conf" ||
	{ echo "CONFIG_LUA51FRAMES off"; exit 77; }
for bin in /usr/bin/lua5.1 /usr/bin/luajit; do
	[ -x "$bin" ] || { echo "$bin not installed (tools/deps/agent.list)"; exit 77; }
done
[ -f /usr/include/lua5.1/lua.h ] || { echo "liblua5.1-0-dev not installed"; exit 77; }
command -v go >/dev/null || { echo "go (go tool pprof) not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

${CC:-cc} -O2 -Wall -Wextra -Werror -o "$tmp/luahost" "$EP_TOP/tests/workloads/luahost.c" \
	-I/usr/include/lua5.1 -llua5.1 || fail "cannot build luahost.c against liblua5.1"
for host in /usr/bin/lua5.1 "$tmp/luahost"; do
	echo "== $host: sigprof-lua's checks"
	EP_LUA=$host bash "$EP_TOP/tests/integration/sigprof-lua.test.sh" >"$tmp/lua51.log" 2>&1
	rc=$?
	cat "$tmp/lua51.log"
	[ $rc = 0 ] || fail "$host below sigprof-lua's goals (rc $rc)"
	grep -q "edgeprof lua: version=5.1.5 spliced=1 unknown_version=0" "$tmp/lua51.log" ||
		fail "$host: the profile does not say Lua 5.1.5 was spliced"
done

echo "== luajit: profiled natively"
for mode in on off; do
	flags=$([ $mode = off ] && echo -joff)
	/usr/bin/luajit $flags "$work" 1 3 >"$tmp/plain.out"
	plain_rc=$?
	env LD_PRELOAD="$lib" EDGEPROF_OUTPUT="$tmp/jit.pb.gz" EDGEPROF_HZ=997 \
		/usr/bin/luajit $flags "$work" 3 3 >"$tmp/prof.out"
	prof_rc=$?
	[ "$plain_rc" = 3 ] && [ "$prof_rc" = 3 ] ||
		fail "luajit exit status $prof_rc under the library, $plain_rc without"
	[ "$(cut -d' ' -f1 "$tmp/plain.out")" = "$(cut -d' ' -f1 "$tmp/prof.out")" ] ||
		fail "luajit output differs: $(cat "$tmp/prof.out")"
	go tool pprof -raw -symbolize=none "$tmp/jit.pb.gz" 2>/dev/null |
		grep -m1 "edgeprof lua: version=LuaJIT spliced=0 unknown_version=1" ||
		fail "luajit not counted as an unknown version"
	PYTHONPATH="$EP_TOP/tests/workloads" /usr/bin/python3 - "$tmp/jit.pb.gz" "$mode" <<'PY' ||
import sys
import pprof_traces as pt
path, mode = sys.argv[1:3]
ss = pt.samples(path)
tot = sum(s.value for s in ss)
share = lambda f: 100 * sum(s.value for s in ss if f(s)) / tot
trace = share(lambda s: s.leaf == "<unknown>")
vm = share(lambda s: s.leaf == "[luajit]")
named = share(lambda s: any(f.startswith(("function <", "main chunk <")) for f in s.frames))
print(f"luajit jit={mode}: {tot / 1e9:.2f} s sampled; leaf in JIT traces (anonymous code) "
      f"{trace:.1f}%, in luajit's own code (interpreter, C library) {vm:.1f}%; samples naming a "
      f"script function {named:.1f}%")
sys.exit(0 if tot > 1e9 and named == 0 and (mode == "on" or trace == 0) else 1)
PY
		fail "luajit jit=$mode: not what the native profile gives"
done
echo PASS
