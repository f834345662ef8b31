// SPDX-License-Identifier: MIT
// Responsiveness of the collector's web UI with a large flame graph, in Debian's headless
// Chromium (tests/bench/ui-bench.sh uploads the profiles): long main-thread tasks (> 50 ms,
// PerformanceObserver 'longtask') during load, zoom, search and diff, and the paint timings.
//   node ui-bench.mjs BASE_URL OUT_DIR
// Prints one "phase=... longtasks=N max_ms=M" line per phase and the paint timings; exits 1
// when a task took over LIMIT_MS (default 200).
import { chromium } from 'playwright-core';

const [base, out] = process.argv.slice(2);
const limit = Number(process.env.LIMIT_MS || 200);
const browser = await chromium.launch({
	executablePath: '/usr/bin/chromium',
	args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
	       '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
let worst = 0;
try {
	const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
	page.setDefaultTimeout(120000);
	await page.addInitScript(() => {
		window.__tasks = [];
		new PerformanceObserver((l) => {
			for (const e of l.getEntries()) window.__tasks.push(e.duration);
		}).observe({ type: 'longtask', buffered: true });
	});
	const settle = () => page.evaluate(() => new Promise((r) =>
		requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(r, 100)))));
	const phase = async (name, fn) => {
		const before = await page.evaluate(() => (window.__tasks ? window.__tasks.length : 0));
		const t0 = Date.now();
		await fn();
		await settle();
		const tasks = await page.evaluate((b) => window.__tasks.slice(b), before);
		const max = tasks.length ? Math.max(...tasks) : 0;
		worst = Math.max(worst, max);
		console.log(`phase=${name} wall_ms=${Date.now() - t0} longtasks=${tasks.length} ` +
			`max_ms=${max.toFixed(0)}`);
	};

	await phase('load', async () => {
		await page.goto(base + '/');
		await page.waitForFunction(() => /profiles/.test(document.querySelector('#summary').textContent));
	});
	const info = await page.evaluate(() => ({
		frames: window.edgeprofUI.state.tree.tree.nodes.length,
		drawn: window.edgeprofUI.flameFrames().length,
		paint: Object.fromEntries(performance.getEntriesByType('paint').map((e) => [e.name, e.startTime])),
		flame: performance.now(),
	}));
	console.log(`frames=${info.frames} drawn=${info.drawn} first_paint_ms=${(info.paint['first-paint'] || 0).toFixed(0)} ` +
		`first_contentful_paint_ms=${(info.paint['first-contentful-paint'] || 0).toFixed(0)}`);
	await page.screenshot({ path: `${out}/ui-bench-flame.png` });

	const box = await page.locator('#flame').boundingBox();
	await phase('zoom', async () => { await page.mouse.click(box.x + box.width * 0.3, box.y + 18 * 3 + 9); });
	await phase('hover', async () => {
		for (let k = 0; k < 20; k++) await page.mouse.move(box.x + box.width * (0.05 + k * 0.045), box.y + 18 * 6 + 9);
	});
	await phase('reset', async () => { await page.click('#reset-zoom'); });
	await phase('search', async () => { await page.fill('#search', 'method_01'); });
	await phase('diff', async () => {
		await page.click('button[data-tab=compare]');
		await page.fill('#a-query', 'bench');
		await page.fill('#b-query', 'bench');
		await page.fill('#a-from', 'now-1h');
		await page.fill('#a-to', 'now-20m');
		await page.fill('#b-from', 'now-20m');
		await page.fill('#b-to', 'now');
		await page.click('#compare-apply');
		await page.waitForFunction(() => /^A: 1 profiles · B: 1 profiles/.test(document.querySelector('#summary').textContent));
	});
	await page.screenshot({ path: `${out}/ui-bench-diff.png` });
	console.log(`max_longtask_ms=${worst.toFixed(0)} limit_ms=${limit}`);
} finally {
	await browser.close();
}
process.exit(worst > limit ? 1 : 0);
