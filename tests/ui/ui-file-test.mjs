// SPDX-License-Identifier: MIT
// Ad-hoc files in the web UI, in Debian's headless Chromium: a gzipped pprof chosen with the
// file input, a raw pprof and a folded-text file dropped on the page, each shown as a flame
// graph and top table; a bad file and one over --max-body give a clear error.
//   node ui-file-test.mjs BASE_URL TOKEN OUT_DIR GZIP_PPROF RAW_PPROF FOLDED BAD BIG
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { chromium } from 'playwright-core';

const [base, token, out, gz, raw, folded, bad, big] = process.argv.slice(2);
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
	await page.goto(base + '/?token=' + encodeURIComponent(token));
	// nothing is stored: the page's own query finds nothing
	await page.waitForFunction(() => /no profiles/.test(document.querySelector('#summary').textContent));

	const shown = async (file, want) => {
		await page.waitForFunction((n) => document.querySelector('#summary').textContent.startsWith(n + ' (not stored)'), basename(file));
		const summary = await page.textContent('#summary');
		const names = (await page.evaluate(() => window.edgeprofUI.flameFrames())).map((f) => f.name);
		const top = await page.textContent('#top');
		for (const n of want) {
			if (!names.includes(n)) fail(`${basename(file)}: ${n} not in the flame graph: ${names.join(',')}`);
			if (!top.includes(n)) fail(`${basename(file)}: ${n} not in the top table`);
		}
		console.log(`${basename(file)}: ${summary} · ${names.length} frames`);
		return summary;
	};

	// 1. chosen with the file input: a gzipped pprof (CPU, 0.55 s: checksum 250 ms self)
	await page.setInputFiles('#open-file', gz);
	let s = await shown(gz, ['main', 'checksum', 'other']);
	if (!/cpu · total 550(\.0+)? ?ms/.test(s)) fail('gzip pprof summary: ' + s);
	const rows = await page.$$eval('#top tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
	const checksum = rows.find((r) => r[4] === 'checksum');
	if (!checksum || !/^250(\.0+)? ?ms$/.test(checksum[0])) fail('top table checksum row: ' + JSON.stringify(rows));
	await page.screenshot({ path: `${out}/ui-file-pprof.png` });

	// 2. dropped on the page: a raw pprof, then folded text
	const drop = async (file, type) => {
		const bytes = [...readFileSync(file)];
		const dt = await page.evaluateHandle(([b, name, t]) => {
			const d = new DataTransfer();
			d.items.add(new File([new Uint8Array(b)], name, { type: t }));
			return d;
		}, [bytes, basename(file), type]);
		await page.dispatchEvent('body', 'drop', { dataTransfer: dt });
	};
	await drop(raw, 'application/octet-stream');
	await shown(raw, ['main', 'checksum', 'other']);
	await drop(folded, 'text/plain');
	s = await shown(folded, ['main', 'work', 'spin', 'idle']);
	if (!/samples · total 100/.test(s)) fail('folded summary: ' + s);
	await page.screenshot({ path: `${out}/ui-file-folded.png` });

	// 3. errors are shown, the last good graph stays
	await drop(bad, 'text/plain');
	await page.waitForFunction(() => !document.querySelector('#error').hidden);
	let err = await page.textContent('#error');
	console.log('bad file: ' + err);
	if (!/invalid profile: line 2: expected/.test(err)) fail('bad file error: ' + err);
	await page.setInputFiles('#open-file', big);
	await page.waitForFunction(() => /413|larger|limit/.test(document.querySelector('#error').textContent));
	err = await page.textContent('#error');
	console.log('big file: ' + err);

	if (errors.length) fail('page errors: ' + errors.join('; '));
	console.log('ui-file-test: ok');
} finally {
	await browser.close();
}
