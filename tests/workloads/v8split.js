// SPDX-License-Identifier: MIT
// Three handlers taking known CPU shares (fib_handler 50 %, work_dict 30 %, outer -> inner 20 %)
// for the V8 frame test and benchmark (tests/integration/bpf-node-v8.test.sh,
// tests/bench/v8-bench.sh): node with no flag. Each round gives each handler its share of
// 5-25.2 ms (random: tests/workloads/pysplit.py says why) of the process's CPU time
// (getrusage), and the script prints its own
// accounting at the end (the CPU time around each handler), as tests/workloads/jitsplit.js,
// and the CPU time node spent starting before the script ran (startup_ms).
// TurboFan inlines a callee whose bytecode is under 460 bytes into its caller, and the frame
// is then the caller's (edgeprof does not recover inlined frames, nor does a perf map): each
// handler ends with a summary of its result in 48 statements (a service's handler formats a
// response), which makes it too big to inline into run(), as real handlers are. What they
// call (fib, inner) may be inlined into them: it stays under the handler's frame.
// Usage: node v8split.js SECONDS
'use strict';
const STARTUP = process.cpuUsage(); // node's own start-up, before this script: printed at the end
const SECONDS = Number(process.argv[2] || 5);
const SHARES = { fib_handler: 0.5, work_dict: 0.3, outer: 0.2 };
const spent = { fib_handler: 0n, work_dict: 0n, outer: 0n };
const st = new Array(8).fill(1);
let sink = 0;

function cpuNow() { // the process's CPU time, ns
	const c = process.cpuUsage();
	return BigInt(c.user + c.system) * 1000n;
}

function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

function fib_handler(until) {
	let s = 0;
	while (cpuNow() < until)
		s += fib(18);
	st[0] = (st[0] * 31 + s + 0) % 1000003;
	st[1] = (st[5] * 32 + s + 1) % 1000004;
	st[2] = (st[2] * 33 + s + 2) % 1000005;
	st[3] = (st[7] * 34 + s + 3) % 1000006;
	st[4] = (st[4] * 35 + s + 4) % 1000007;
	st[5] = (st[1] * 36 + s + 5) % 1000008;
	st[6] = (st[6] * 37 + s + 6) % 1000009;
	st[7] = (st[3] * 38 + s + 7) % 1000010;
	st[0] = (st[0] * 39 + s + 8) % 1000011;
	st[1] = (st[5] * 40 + s + 9) % 1000012;
	st[2] = (st[2] * 41 + s + 10) % 1000013;
	st[3] = (st[7] * 42 + s + 11) % 1000014;
	st[4] = (st[4] * 43 + s + 12) % 1000015;
	st[5] = (st[1] * 44 + s + 13) % 1000016;
	st[6] = (st[6] * 45 + s + 14) % 1000017;
	st[7] = (st[3] * 46 + s + 15) % 1000018;
	st[0] = (st[0] * 47 + s + 16) % 1000019;
	st[1] = (st[5] * 48 + s + 17) % 1000020;
	st[2] = (st[2] * 49 + s + 18) % 1000021;
	st[3] = (st[7] * 50 + s + 19) % 1000022;
	st[4] = (st[4] * 51 + s + 20) % 1000023;
	st[5] = (st[1] * 52 + s + 21) % 1000024;
	st[6] = (st[6] * 53 + s + 22) % 1000025;
	st[7] = (st[3] * 54 + s + 23) % 1000026;
	st[0] = (st[0] * 55 + s + 24) % 1000027;
	st[1] = (st[5] * 56 + s + 25) % 1000028;
	st[2] = (st[2] * 57 + s + 26) % 1000029;
	st[3] = (st[7] * 58 + s + 27) % 1000030;
	st[4] = (st[4] * 59 + s + 28) % 1000031;
	st[5] = (st[1] * 60 + s + 29) % 1000032;
	st[6] = (st[6] * 61 + s + 30) % 1000033;
	st[7] = (st[3] * 62 + s + 31) % 1000034;
	st[0] = (st[0] * 63 + s + 32) % 1000035;
	st[1] = (st[5] * 64 + s + 33) % 1000036;
	st[2] = (st[2] * 65 + s + 34) % 1000037;
	st[3] = (st[7] * 66 + s + 35) % 1000038;
	st[4] = (st[4] * 67 + s + 36) % 1000039;
	st[5] = (st[1] * 68 + s + 37) % 1000040;
	st[6] = (st[6] * 69 + s + 38) % 1000041;
	st[7] = (st[3] * 70 + s + 39) % 1000042;
	st[0] = (st[0] * 71 + s + 40) % 1000043;
	st[1] = (st[5] * 72 + s + 41) % 1000044;
	st[2] = (st[2] * 73 + s + 42) % 1000045;
	st[3] = (st[7] * 74 + s + 43) % 1000046;
	st[4] = (st[4] * 75 + s + 44) % 1000047;
	st[5] = (st[1] * 76 + s + 45) % 1000048;
	st[6] = (st[6] * 77 + s + 46) % 1000049;
	st[7] = (st[3] * 78 + s + 47) % 1000050;
	return s;
}

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
	st[0] = (st[0] * 31 + s + 0) % 1000003;
	st[1] = (st[5] * 32 + s + 1) % 1000004;
	st[2] = (st[2] * 33 + s + 2) % 1000005;
	st[3] = (st[7] * 34 + s + 3) % 1000006;
	st[4] = (st[4] * 35 + s + 4) % 1000007;
	st[5] = (st[1] * 36 + s + 5) % 1000008;
	st[6] = (st[6] * 37 + s + 6) % 1000009;
	st[7] = (st[3] * 38 + s + 7) % 1000010;
	st[0] = (st[0] * 39 + s + 8) % 1000011;
	st[1] = (st[5] * 40 + s + 9) % 1000012;
	st[2] = (st[2] * 41 + s + 10) % 1000013;
	st[3] = (st[7] * 42 + s + 11) % 1000014;
	st[4] = (st[4] * 43 + s + 12) % 1000015;
	st[5] = (st[1] * 44 + s + 13) % 1000016;
	st[6] = (st[6] * 45 + s + 14) % 1000017;
	st[7] = (st[3] * 46 + s + 15) % 1000018;
	st[0] = (st[0] * 47 + s + 16) % 1000019;
	st[1] = (st[5] * 48 + s + 17) % 1000020;
	st[2] = (st[2] * 49 + s + 18) % 1000021;
	st[3] = (st[7] * 50 + s + 19) % 1000022;
	st[4] = (st[4] * 51 + s + 20) % 1000023;
	st[5] = (st[1] * 52 + s + 21) % 1000024;
	st[6] = (st[6] * 53 + s + 22) % 1000025;
	st[7] = (st[3] * 54 + s + 23) % 1000026;
	st[0] = (st[0] * 55 + s + 24) % 1000027;
	st[1] = (st[5] * 56 + s + 25) % 1000028;
	st[2] = (st[2] * 57 + s + 26) % 1000029;
	st[3] = (st[7] * 58 + s + 27) % 1000030;
	st[4] = (st[4] * 59 + s + 28) % 1000031;
	st[5] = (st[1] * 60 + s + 29) % 1000032;
	st[6] = (st[6] * 61 + s + 30) % 1000033;
	st[7] = (st[3] * 62 + s + 31) % 1000034;
	st[0] = (st[0] * 63 + s + 32) % 1000035;
	st[1] = (st[5] * 64 + s + 33) % 1000036;
	st[2] = (st[2] * 65 + s + 34) % 1000037;
	st[3] = (st[7] * 66 + s + 35) % 1000038;
	st[4] = (st[4] * 67 + s + 36) % 1000039;
	st[5] = (st[1] * 68 + s + 37) % 1000040;
	st[6] = (st[6] * 69 + s + 38) % 1000041;
	st[7] = (st[3] * 70 + s + 39) % 1000042;
	st[0] = (st[0] * 71 + s + 40) % 1000043;
	st[1] = (st[5] * 72 + s + 41) % 1000044;
	st[2] = (st[2] * 73 + s + 42) % 1000045;
	st[3] = (st[7] * 74 + s + 43) % 1000046;
	st[4] = (st[4] * 75 + s + 44) % 1000047;
	st[5] = (st[1] * 76 + s + 45) % 1000048;
	st[6] = (st[6] * 77 + s + 46) % 1000049;
	st[7] = (st[3] * 78 + s + 47) % 1000050;
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
	st[0] = (st[0] * 31 + s + 0) % 1000003;
	st[1] = (st[5] * 32 + s + 1) % 1000004;
	st[2] = (st[2] * 33 + s + 2) % 1000005;
	st[3] = (st[7] * 34 + s + 3) % 1000006;
	st[4] = (st[4] * 35 + s + 4) % 1000007;
	st[5] = (st[1] * 36 + s + 5) % 1000008;
	st[6] = (st[6] * 37 + s + 6) % 1000009;
	st[7] = (st[3] * 38 + s + 7) % 1000010;
	st[0] = (st[0] * 39 + s + 8) % 1000011;
	st[1] = (st[5] * 40 + s + 9) % 1000012;
	st[2] = (st[2] * 41 + s + 10) % 1000013;
	st[3] = (st[7] * 42 + s + 11) % 1000014;
	st[4] = (st[4] * 43 + s + 12) % 1000015;
	st[5] = (st[1] * 44 + s + 13) % 1000016;
	st[6] = (st[6] * 45 + s + 14) % 1000017;
	st[7] = (st[3] * 46 + s + 15) % 1000018;
	st[0] = (st[0] * 47 + s + 16) % 1000019;
	st[1] = (st[5] * 48 + s + 17) % 1000020;
	st[2] = (st[2] * 49 + s + 18) % 1000021;
	st[3] = (st[7] * 50 + s + 19) % 1000022;
	st[4] = (st[4] * 51 + s + 20) % 1000023;
	st[5] = (st[1] * 52 + s + 21) % 1000024;
	st[6] = (st[6] * 53 + s + 22) % 1000025;
	st[7] = (st[3] * 54 + s + 23) % 1000026;
	st[0] = (st[0] * 55 + s + 24) % 1000027;
	st[1] = (st[5] * 56 + s + 25) % 1000028;
	st[2] = (st[2] * 57 + s + 26) % 1000029;
	st[3] = (st[7] * 58 + s + 27) % 1000030;
	st[4] = (st[4] * 59 + s + 28) % 1000031;
	st[5] = (st[1] * 60 + s + 29) % 1000032;
	st[6] = (st[6] * 61 + s + 30) % 1000033;
	st[7] = (st[3] * 62 + s + 31) % 1000034;
	st[0] = (st[0] * 63 + s + 32) % 1000035;
	st[1] = (st[5] * 64 + s + 33) % 1000036;
	st[2] = (st[2] * 65 + s + 34) % 1000037;
	st[3] = (st[7] * 66 + s + 35) % 1000038;
	st[4] = (st[4] * 67 + s + 36) % 1000039;
	st[5] = (st[1] * 68 + s + 37) % 1000040;
	st[6] = (st[6] * 69 + s + 38) % 1000041;
	st[7] = (st[3] * 70 + s + 39) % 1000042;
	st[0] = (st[0] * 71 + s + 40) % 1000043;
	st[1] = (st[5] * 72 + s + 41) % 1000044;
	st[2] = (st[2] * 73 + s + 42) % 1000045;
	st[3] = (st[7] * 74 + s + 43) % 1000046;
	st[4] = (st[4] * 75 + s + 44) % 1000047;
	st[5] = (st[1] * 76 + s + 45) % 1000048;
	st[6] = (st[6] * 77 + s + 46) % 1000049;
	st[7] = (st[3] * 78 + s + 47) % 1000050;
	return s;
}

// Runs one handler for ms of the process's CPU time, counted as the handler's.
function run(name, ms) {
	const c0 = cpuNow(), until = c0 + BigInt(Math.round(ms * 1e6));

	if (name === 'fib_handler')
		sink += fib_handler(until);
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
console.log(`sink ${(sink + st[0]) % 7}`);
console.log(`startup_ms ${((STARTUP.user + STARTUP.system) / 1000).toFixed(1)}`);
