-- SPDX-License-Identifier: MIT
-- A coroutine's frames among its resumer's, for tests/integration/sigprof-lua.test.sh: driver
-- resumes gen (coroutine.wrap) which runs leaf, for half of the CPU time; plain runs leaf
-- directly for the other half. Prints "true true".
-- Usage: lua5.4 luaco.lua SECONDS
local function leaf(n)
	local x = 0
	for i = 1, n do
		x = (x * 31 + i) % 1000003
	end
	return x
end

local function gen()
	while true do
		coroutine.yield(leaf(3000))
	end
end

local function driver(till)
	local co = coroutine.wrap(gen)
	local s = 0
	while os.clock() < till do
		s = s + co()
	end
	return s
end

local function plain(till)
	local s = 0
	while os.clock() < till do
		s = s + leaf(3000)
	end
	return s
end

local half = tonumber(arg[1] or "2") / 2
local t = os.clock()
print(driver(t + half) > 0, plain(t + 2 * half) > 0)
