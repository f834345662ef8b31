#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Lua 5.1 under LD_PRELOAD=libedgeprof.so (standalone).
# Debian's lua5.1 (5.1.5; the interpreter links Lua statically) and a program embedding
# liblua5.1.so.0 (tests/workloads/luahost.c, built here): sigprof-lua's checks run with each
# (EP_LUA): the script's own frames in place of luaV_execute (agent/lib/lua51frames.c), >= 95 %
# of the samples with a handler's frame, shares within 3 pp of the script's accounting, >= 95 %
# whole chains, the coroutine case, the output and exit status unchanged; and the profile says
# 5.1 was spliced.
# LuaJIT: tests/integration/sigprof-luajit.test.sh.
set -u
lib=$EP_BUILD/libedgeprof.so
work=$EP_TOP/tests/workloads/luasplit.lua
[ -f "$lib" ] || { echo "libedgeprof.so not built (CONFIG_SAMPLER_SIGPROF off)"; exit 77; }
grep -q "^CONFIG_LUA51FRAMES=y" "$EP_BUILD/include/config/auto.conf" ||
	{ echo "CONFIG_LUA51FRAMES off"; exit 77; }
[ -x /usr/bin/lua5.1 ] || { echo "/usr/bin/lua5.1 not installed (tools/deps/agent.list)"; exit 77; }
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

echo PASS
