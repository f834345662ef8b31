// SPDX-License-Identifier: MIT
// The web UI's Regressions tab in Debian's headless Chromium: A and B set to the two firmware
// versions of tests/drivers/regress-fleet's roll-out, the table lists crc32_update as a
// regression (with its stack that changed: main › storage_task) and tls_renegotiate as new,
// and a click on crc32_update opens the diff flame
// graph with its frames searched (highlighted).
//   node regress-ui-test.mjs BASE_URL TOKEN OUT_DIR
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
	await page.goto(base + '/?token=' + encodeURIComponent(token));
	await page.waitForFunction(() => /profiles/.test(document.querySelector('#summary').textContent));
	await page.click('button.tab[data-tab=regressions]');
	await page.evaluate(() => {
		const set = (id, v) => { document.getElementById(id).value = v; };
		set('a-query', 'fw{version="1.4"}'); set('b-query', 'fw{version="1.5"}');
		for (const s of ['a', 'b']) { set(s + '-from', 'now-1d'); set(s + '-to', 'now'); }
	});
	await page.click('#regress-apply');
	await page.waitForFunction(() => /found/.test(document.querySelector('#regress-summary').textContent));
	// each row's cells (a function's cell: its link), then its stacks that changed
	const rows = await page.$$eval('#regress-table tbody tr', (trs) =>
		trs.map((tr) => [...[...tr.children].map((td) => (td.querySelector('a') || td).textContent),
			[...tr.querySelectorAll('.regress-stack')].map((d) => d.textContent)]));
	console.log('rows: ' + JSON.stringify(rows));
	const byFn = Object.fromEntries(rows.map((r) => [r[8], r]));
	if (!byFn.crc32_update || byFn.crc32_update[0] !== 'regression' || !/^\+/.test(byFn.crc32_update[4]))
		fail('crc32_update is not listed as a regression');
	if (!byFn.tls_renegotiate || byFn.tls_renegotiate[0] !== 'new') fail('tls_renegotiate is not new');
	// the generator runs crc32_update under storage_task under main: that one chain moved
	const st = byFn.crc32_update[9];
	if (st.length !== 1 || !/^from main › storage_task: 2\.\d+ → 3\.\d+ %$/.test(st[0]))
		fail('crc32_update\'s stack that changed: ' + JSON.stringify(st));
	if (rows.length !== 2) fail('expected two findings, got ' + rows.length);
	await page.screenshot({ path: `${out}/ui-regressions.png` });
	await page.click('#regress-table a.regression');
	await page.waitForFunction(() => !document.getElementById('compare').hidden &&
		window.edgeprofUI.diffFrames().some((f) => f.name === 'crc32_update'));
	const search = await page.inputValue('#search');
	if (search !== '^crc32_update$') fail('the function is not searched in the diff: ' + search);
	await page.screenshot({ path: `${out}/ui-regressions-diff.png` });

	// The standing rule's row: 1.4 -> 1.5, crc32_update listed, its link opens the diff of the
	// rule's two selections.
	await page.click('button.tab[data-tab=regressions]');
	await page.waitForFunction(() => /fw/.test(document.querySelector('#rules-table tbody').textContent));
	const rule = await page.textContent('#rules-table tbody');
	console.log('rule: ' + rule);
	const status = await page.$eval('#rules-table tbody tr', (tr) => tr.children[3].textContent);
	if (!/1\.4 → 1\.5/.test(rule) || !/crc32_update \(\+/.test(rule) || status !== 'ok')
		fail('the standing rule row: ' + rule);
	await page.click('#rules-table a.regression');
	await page.waitForFunction(() => !document.getElementById('compare').hidden &&
		window.edgeprofUI.diffFrames().some((f) => f.name === 'crc32_update'));
	if ((await page.inputValue('#b-query')) !== 'fw{version="1.5"}') fail('the rule link\'s B selector');
	if (errors.length) fail('page errors: ' + errors.join('; '));
	console.log('ok');
} finally {
	await browser.close();
}
