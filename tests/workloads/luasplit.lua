-- SPDX-License-Identifier: MIT
-- Three handlers taking known CPU shares (fibs -> fib 50 %, work_str 30 %, outer -> inner 20 % of
-- slices of the process's CPU time), for the Lua frame tests and benchmark: the script prints
-- its own accounting (os.clock, the process's CPU time, around each handler) and exits with
-- EXIT (0). work_str calls string.gsub with a Lua callback, so its samples cross a C function
-- between two luaV_execute activations. Slices are CPU time and their lengths random (5-25.2 ms
-- a round), for the reasons tests/workloads/pysplit.py gives.
-- Usage: lua5.4 luasplit.lua SECONDS [EXIT]
local SHARES = { { "fib", 0.5 }, { "work_str", 0.3 }, { "outer", 0.2 } }
local spent = { fib = 0, work_str = 0, outer = 0 }
local sink = 0

local function fib(n)
	if n < 2 then return n end
	return fib(n - 1) + fib(n - 2)
end

local function fibs(till)
	local s = 0
	while os.clock() < till do
		s = s + fib(12)
	end
	return s
end

local function work_str(till)
	local s = 0
	while os.clock() < till do
		local t = {}
		for i = 1, 200 do
			t[#t + 1] = string.format("k%d", i % 97)
		end
		local line = table.concat(t, ",")
		line:gsub("k(%d+)", function(d)
			s = s + #d
		end)
	end
	return s
end

local function inner(n)
	local x = 0
	for i = 1, n do
		x = (x * 31 + i) % 1000003
	end
	return x
end

local function outer(till)
	local s = 0
	while os.clock() < till do
		s = s + inner(2000) + inner(1000)
	end
	return s
end

local function run(name, ms)
	local c0 = os.clock()
	local till = c0 + ms / 1000
	if name == "fib" then
		sink = sink + fibs(till)
	elseif name == "work_str" then
		sink = sink + work_str(till)
	else
		sink = sink + outer(till)
	end
	spent[name] = spent[name] + os.clock() - c0
end

local function main()
	local stop = os.clock() + tonumber(arg[1] or "5")
	while os.clock() < stop do
		local period = 5 + 20.2 * math.random() -- 2 sampling periods wide: see above
		for _, h in ipairs(SHARES) do
			run(h[1], period * h[2])
		end
	end
	local total = spent.fib + spent.work_str + spent.outer
	for _, h in ipairs(SHARES) do
		print(string.format("%s %.2f", h[1], 100 * spent[h[1]] / total))
	end
	print(string.format("sink %d", sink % 7))
	os.exit(tonumber(arg[2] or "0"))
end

main()
