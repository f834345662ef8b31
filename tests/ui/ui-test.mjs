// SPDX-License-Identifier: MIT
// Drives the collector's web UI in Debian's headless Chromium: token login, timeline range,
// label selector, flame graph frames, top table, comparison view colours, the type and value
// pickers (heap: in use / allocated, bytes / objects; wall: time), screenshots.
//   node ui-test.mjs BASE_URL TOKEN OUT_DIR
import { chromium } from 'playwright-core';

const [base, token, out] = process.argv.slice(2);
const fail = (msg) => { console.error('FAIL: ' + msg); process.exit(1); };
const browser = await chromium.launch({
	executablePath: '/usr/bin/chromium',
	args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
	       '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
	const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
	const errors = [];
	page.on('pageerror', (e) => errors.push(e.message));
	page.setDefaultTimeout(30000);

	// Without the token the page is a login form; with it, a cookie opens the UI.
	await page.goto(base + '/');
	if (!(await page.locator('input[name=token]').count())) fail('no login form without a token');
	await page.goto(base + '/?token=' + encodeURIComponent(token));
	await page.waitForFunction(() => /profiles/.test(document.querySelector('#summary').textContent));
	const summary = await page.textContent('#summary');
	console.log('summary: ' + summary);
	if (!/^4 profiles/.test(summary)) fail('expected 4 profiles in the last hour: ' + summary);

	// Whole hour: both workloads are in the flame graph.
	let names = (await page.evaluate(() => window.edgeprofUI.flameFrames())).map((f) => f.name);
	for (const n of ['work_a', 'work_b', 'do_cpu'])
		if (!names.includes(n)) fail(`${n} missing from the flame graph: ${names.join(',')}`);
	await page.screenshot({ path: `${out}/ui-flame.png` });

	// Label selector: region="eu" holds only the split workload.
	await page.fill('#query', 'demo{region="eu"}');
	await page.press('#query', 'Enter');
	await page.waitForFunction(() => /^2 profiles/.test(document.querySelector('#summary').textContent));
	names = (await page.evaluate(() => window.edgeprofUI.flameFrames())).map((f) => f.name);
	if (!names.includes('work_a') || names.includes('do_cpu')) fail('label filter: ' + names.join(','));
	const top = await page.textContent('#top');
	if (!/work_a/.test(top)) fail('top table lacks work_a');

	// Timeline: drag over the second half (the torture profiles, 5 minutes ago) with no label.
	await page.fill('#query', 'demo');
	await page.press('#query', 'Enter');
	await page.waitForFunction(() => /^4 profiles/.test(document.querySelector('#summary').textContent));
	const tl = await page.locator('#timeline').boundingBox();
	await page.mouse.move(tl.x + tl.width * 0.75, tl.y + 30);
	await page.mouse.down();
	await page.mouse.move(tl.x + tl.width * 0.99, tl.y + 30, { steps: 5 });
	await page.mouse.up();
	await page.waitForFunction(() => /^2 profiles/.test(document.querySelector('#summary').textContent));
	names = (await page.evaluate(() => window.edgeprofUI.flameFrames())).map((f) => f.name);
	if (!names.includes('do_cpu') || names.includes('work_a')) fail('timeline range: ' + names.join(','));
	await page.screenshot({ path: `${out}/ui-range.png` });

	// Search highlights; click zooms.
	await page.fill('#search', 'do_cpu');

	// Compare: A = region eu (split), B = region us (torture): work_a shrank, do_cpu grew.
	await page.click('button[data-tab=compare]');
	await page.fill('#a-query', 'demo{region="eu"}');
	await page.fill('#b-query', 'demo{region="us"}');
	for (const id of ['#a-from', '#b-from']) await page.fill(id, 'now-1h');
	for (const id of ['#a-to', '#b-to']) await page.fill(id, 'now');
	await page.click('#compare-apply');
	await page.waitForFunction(() => /^A: 2 profiles · B: 2 profiles/.test(document.querySelector('#summary').textContent));
	const diff = await page.evaluate(() => window.edgeprofUI.diffFrames());
	const byName = Object.fromEntries(diff.map((f) => [f.name, f]));
	const hue = (c) => Number((/hsl\((\d+)/.exec(c) || [])[1]);
	if (!byName.work_a || hue(byName.work_a.color) !== 135) fail('work_a should be green (shrank): ' + JSON.stringify(byName.work_a));
	if (!byName.do_cpu || hue(byName.do_cpu.color) !== 3) fail('do_cpu should be red (grew): ' + JSON.stringify(byName.do_cpu));
	await page.screenshot({ path: `${out}/ui-diff.png` });

	// Download link points at the merge endpoint of the current selection.
	const href = await page.getAttribute('#download', 'href');
	if (!/\/api\/0\/profiles\/merge\?/.test(href)) fail('download link: ' + href);
	const dl = await page.request.get(base + href);
	if (dl.status() !== 200) fail('download returned ' + dl.status());

	// Types: a heap profile in bytes, its value picker (in use vs allocated), a wall profile.
	await page.click('button[data-tab=single]');
	await page.fill('#query', 'mem');
	await page.selectOption('#type', 'heap');
	await page.waitForFunction(() => /MiB/.test(document.querySelector('#summary').textContent));
	const inuse = await page.textContent('#summary');
	const values = await page.$$eval('#index option', (os) => os.map((o) => o.value));
	console.log('heap: ' + inuse + ' · values: ' + values.join(','));
	for (const v of ['inuse_space', 'inuse_objects', 'alloc_space', 'alloc_objects'])
		if (!values.includes(v)) fail(`value picker lacks ${v}: ${values}`);
	if ((await page.inputValue('#index')) !== 'inuse_space') fail('heap should open on inuse_space');
	names = (await page.evaluate(() => window.edgeprofUI.flameFrames())).map((f) => f.name);
	if (!names.includes('alloc_a')) fail('heap flame graph lacks alloc_a: ' + names.join(','));
	await page.selectOption('#index', 'alloc_space');
	await page.waitForFunction((s) => document.querySelector('#summary').textContent !== s, inuse);
	const alloc = await page.textContent('#summary');
	const mib = (s) => Number((/total ([0-9.]+) MiB/.exec(s) || [])[1]);
	console.log('alloc_space: ' + alloc);
	if (!(mib(alloc) > mib(inuse))) fail(`alloc_space (${alloc}) should exceed inuse_space (${inuse})`);
	await page.selectOption('#index', 'alloc_objects');
	await page.waitForFunction(() => !/MiB/.test(document.querySelector('#summary').textContent));
	await page.screenshot({ path: `${out}/ui-heap.png` });
	const objects = await page.textContent('#summary');
	await page.fill('#query', 'wait');
	await page.selectOption('#type', 'wall');
	await page.waitForFunction((o) => document.querySelector('#summary').textContent !== o, objects);
	const wall = await page.textContent('#summary');
	console.log('wall: ' + wall);
	if (!/^1 profiles · total [0-9.]+ s$/.test(wall)) fail('wall summary in seconds: ' + wall);
	if ((await page.inputValue('#index')) !== 'wall') fail('wall should render wall/nanoseconds');
	names = (await page.evaluate(() => window.edgeprofUI.flameFrames())).map((f) => f.name);
	for (const n of ['read_e', 'select_d', 'sleep_a'])
		if (!names.includes(n)) fail(`wall flame graph lacks ${n}: ${names.join(',')}`);
	await page.screenshot({ path: `${out}/ui-wall.png` });

	// Runtimes: a Python profile's script frames in the python hues (210-229), the native
	// frames around them in the warm ones (10-59), as drawn (the canvas's pixel), and a legend.
	await page.fill('#query', 'py');
	await page.selectOption('#type', 'cpu');
	await page.waitForFunction((w) => document.querySelector('#summary').textContent !== w, wall);
	const frames = await page.evaluate(() => window.edgeprofUI.flameFrames());
	const fhue = (c) => Number((/hsl\((\d+)/.exec(c) || [])[1]);
	const fib = frames.find((f) => f.name === 'fib');
	const native = frames.find((f) => f.name === 'Py_RunMain');
	if (!fib || fib.runtime !== 'python' || !(fhue(fib.color) >= 210 && fhue(fib.color) < 230))
		fail('fib should be a python frame in blue: ' + JSON.stringify(fib));
	if (!native || native.runtime !== 'native' || !(fhue(native.color) >= 10 && fhue(native.color) < 60))
		fail('Py_RunMain should be a native frame in a warm hue: ' + JSON.stringify(native));
	const pixel = (f) => page.evaluate(([x, y]) => {
		const c = document.querySelector('#flame'), dpr = window.devicePixelRatio || 1;
		return Array.from(c.getContext('2d').getImageData(Math.round((x + 1) * dpr), Math.round((y + 2) * dpr), 1, 1).data);
	}, [f.x, f.y]);
	const [fr, , fb] = await pixel(fib), [nr, , nb] = await pixel(native);
	if (!(fb > fr && nr > nb)) fail(`drawn colours: fib rgb ${fr},${fb} (blue expected), Py_RunMain ${nr},${nb} (warm expected)`);
	const legend = await page.textContent('#runtimes');
	if (!/python/.test(legend)) fail('runtime legend: ' + legend);
	console.log(`runtimes: fib ${fib.color}, Py_RunMain ${native.color}; legend "${legend.trim()}"`);
	await page.screenshot({ path: `${out}/ui-runtimes.png` });

	if (errors.length) fail('page errors: ' + errors.join('; '));
	console.log('ui-test: ok');
} finally {
	await browser.close();
}
