// SPDX-License-Identifier: MIT
// Three handlers taking known CPU shares (fib 50 %, work_dict 30 %, outer -> inner 20 %), for
// the perf-map benchmark: each round gives each handler its share of 5-25.2 ms (random: two
// periods of the BPF sampler's 99 Hz wide, tests/workloads/pysplit.py says why) of the
// process's CPU time (getrusage), and the script prints its own accounting at the end (the CPU
// time around each handler). CPU-time slices, not wall time: on a loaded machine wall-time
// slices start when the thread is scheduled back in, just after a tick (tests/workloads/
// pysplit.py says what that does to a tick-driven sampler).
// Usage: node --perf-basic-prof jitsplit.js SECONDS
'use strict';
const SECONDS = Number(process.argv[2] || 5);
const SHARES = { fib: 0.5, work_dict: 0.3, outer: 0.2 };
const spent = { fib: 0n, work_dict: 0n, outer: 0n };
let sink = 0;

function cpuNow() { // the process's CPU time, ns
	const c = process.cpuUsage();
	return BigInt(c.user + c.system) * 1000n;
}

function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

// The handlers loop until their deadline themselves: called once a slice, they are not inlined
// into run() (V8 would name the inlined code after its caller, in the perf map as in perf).
function work_dict(until) {
	const d = new Map();
	let s = 0;
	while (cpuNow() < until) {
		for (let i = 0; i < 2000; i++) {
			const k = 'k' + (i % 97);
			d.set(k, (d.get(k) || 0) + k.length);
			s += d.get(k);
		}
	}
	return s;
}

function inner(n) {
	let x = 0;
	for (let i = 0; i < n; i++)
		x = (x * 31 + i) % 1000003;
	return x;
}

function outer(until) {
	let s = 0;
	while (cpuNow() < until)
		s += inner(20000) + inner(10000);
	return s;
}

// Runs one handler for ms of the process's CPU time, counted as the handler's.
function run(name, ms) {
	const c0 = cpuNow(), until = c0 + BigInt(Math.round(ms * 1e6));

	if (name === 'fib')
		while (cpuNow() < until)
			sink += fib(18);
	else if (name === 'work_dict')
		sink += work_dict(until);
	else
		sink += outer(until);
	spent[name] += cpuNow() - c0;
}

const end = Date.now() + SECONDS * 1000;
while (Date.now() < end) {
	const period = 5 + 20.2 * Math.random(); // 2 sampling periods wide: see above
	for (const name of Object.keys(SHARES))
		run(name, period * SHARES[name]);
}
const total = Object.values(spent).reduce((a, b) => a + b, 0n);
for (const name of Object.keys(spent))
	console.log(`${name} ${(Number(spent[name]) * 100 / Number(total)).toFixed(2)}`);
console.log(`sink ${sink % 7}`);
