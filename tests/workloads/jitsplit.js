// SPDX-License-Identifier: MIT
// Three handlers taking known CPU shares (fib 50 %, work_dict 30 %, outer -> inner 20 %), for
// the perf-map benchmark: each round gives each handler its share of 10 ms of wall time, and the
// script prints its own accounting at the end: the process's CPU time (getrusage) around each
// handler, so time the machine gave to others is not counted.
// Usage: node --perf-basic-prof jitsplit.js SECONDS
'use strict';
const SECONDS = Number(process.argv[2] || 5);
const SHARES = { fib: 0.5, work_dict: 0.3, outer: 0.2 };
const spent = { fib: 0n, work_dict: 0n, outer: 0n };
let sink = 0;

function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

// The handlers loop until their deadline themselves: called once a slice, they are not inlined
// into run() (V8 would name the inlined code after its caller, in the perf map as in perf).
function work_dict(until) {
	const d = new Map();
	let s = 0;
	while (process.hrtime.bigint() < until) {
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
	while (process.hrtime.bigint() < until)
		s += inner(20000) + inner(10000);
	return s;
}

// Runs one handler for ms of wall time; its CPU time (the process's) is the handler's.
function run(name, ms) {
	const until = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
	const c0 = process.cpuUsage();

	if (name === 'fib')
		while (process.hrtime.bigint() < until)
			sink += fib(18);
	else if (name === 'work_dict')
		sink += work_dict(until);
	else
		sink += outer(until);
	const c = process.cpuUsage(c0);
	spent[name] += BigInt(c.user + c.system);
}

const end = Date.now() + SECONDS * 1000;
while (Date.now() < end)
	for (const name of Object.keys(SHARES))
		run(name, 10 * SHARES[name]);
const total = Object.values(spent).reduce((a, b) => a + b, 0n);
for (const name of Object.keys(spent))
	console.log(`${name} ${(Number(spent[name]) * 100 / Number(total)).toFixed(2)}`);
console.log(`sink ${sink % 7}`);
