// SPDX-License-Identifier: MIT
// A Node service exposing the Pyroscope SDK's pull endpoints (/debug/pprof/profile: wall time,
// /debug/pprof/heap) through its express middleware; busyKnown burns 40 ms of every 50 ms.
// Prints "listening PORT".
const express = require('express');
const Pyroscope = require('@pyroscope/nodejs').default;

Pyroscope.init({ appName: 'nodeapp' });
const app = express();
app.use(Pyroscope.expressMiddleware());
const keep = [];
function busyKnown(ms) {
	const end = Date.now() + ms;
	let x = 0;
	while (Date.now() < end)
		x += Math.sqrt(x + 1);
	keep.push(new Array(1000).fill(x));
	if (keep.length > 200)
		keep.shift();
	return x;
}
setInterval(function tick() {
	busyKnown(40);
}, 50);
const srv = app.listen(0, '127.0.0.1', () => console.log('listening ' + srv.address().port));
