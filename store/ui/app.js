// SPDX-License-Identifier: MIT
// edgeprof web UI: timeline, flame graph, top table and differential flame graph.
// No framework, no network beyond the collector's own JSON endpoints:
//   GET /api/0/services                          -> {"code":200,"body":["svc",...]}
//   GET /api/0/timeline?query=&type=&from=&to=   -> {"from":s,"step":s,"values":[n,...]}
//   GET /api/0/render?query=&type=&from=&to=&format=json&index=
//        -> {"total":n,"profiles":n,"type":"..","unit":"..","types":[[type,unit],..],"names":[..],
//            "runtimes":["native","kernel","python","lua","jit"],
//            "nodes":[[name,parent,self,total,runtime],..]}   (index: which sample type, e.g. a heap
//            profile's inuse_space or alloc_space; "" the profiles' default)
//   POST /api/0/render?format=json&index=, body: a pprof or folded file -> the same, nothing stored
// Nodes come in pre-order (parents before children), node 0 is the root.
'use strict';

const $ = (id) => document.getElementById(id);
const state = { tree: null, zoom: 0, search: '', from: null, to: null, diff: null, diffZoom: 0, index: '' };
const ROW = 18;
const MIN_PX = 0.4; // narrower frames are not drawn: bounded work at any profile size

function params(q, from, to) {
	const p = new URLSearchParams();
	p.set('query', q || selector());
	p.set('type', $('type').value);
	if (state.index) p.set('index', state.index);
	p.set('from', from || $('from').value || 'now-1h');
	p.set('to', to || $('to').value || 'now');
	return p;
}

function selector() {
	const q = $('query').value.trim();
	if (q) return q;
	return $('service').value || '';
}

async function getJSON(url) {
	const r = await fetch(url, { credentials: 'same-origin' });
	const text = await r.text();
	if (r.status === 204) return null;
	let body;
	try { body = JSON.parse(text); } catch (e) { throw new Error(`${r.status}: ${text.slice(0, 200)}`); }
	if (!r.ok) throw new Error(body.error || `${r.status}`);
	return body;
}

function showError(msg) {
	const e = $('error');
	e.textContent = msg || '';
	e.hidden = !msg;
}

// ---- tree model --------------------------------------------------------------------------

// Lays the pre-order node list out: x (fraction of root, left edge) and depth per node, with
// children sorted by name so the same stacks sit in the same place across reloads.
function layout(tree) {
	const n = tree.nodes.length;
	const kids = Array.from({ length: n }, () => []);
	for (let i = 1; i < n; i++) kids[tree.nodes[i][1]].push(i);
	const x = new Float64Array(n), depth = new Int32Array(n);
	const rootTotal = tree.nodes[0] ? tree.nodes[0][3] : 0;
	const order = [];
	const stack = [0];
	while (stack.length) {
		const i = stack.pop();
		order.push(i);
		const c = kids[i].sort((a, b) => tree.names[tree.nodes[a][0]].localeCompare(tree.names[tree.nodes[b][0]]));
		let cx = x[i];
		for (const k of c) {
			x[k] = cx;
			depth[k] = depth[i] + 1;
			cx += rootTotal ? tree.nodes[k][3] / rootTotal : 0;
		}
		for (let j = c.length - 1; j >= 0; j--) stack.push(c[j]);
	}
	let maxDepth = 0;
	for (let i = 0; i < n; i++) if (depth[i] > maxDepth) maxDepth = depth[i];
	return { tree, x, depth, kids, order, maxDepth, rootTotal };
}

function nameOf(model, i) { return model.tree.names[model.tree.nodes[i][0]]; }

function hashColor(name) {
	// Colour by module/package: the part before the first '.', '::' or '(' decides the hue.
	const key = name.split(/::|\.|\(| /)[0];
	let h = 0;
	for (let i = 0; i < key.length; i++) h = (h * 31 + key.charCodeAt(i)) >>> 0;
	const hue = 10 + (h % 50), light = 55 + (h >> 8) % 15;
	return `hsl(${hue}, 80%, ${light}%)`;
}

// Frames of an interpreter or a JIT (the node's runtime: its mapping, pprof/view/stacks.h) take
// a hue of their own, so a script's functions stand out from the native code around them;
// native and kernel frames keep the warm hues of hashColor. Within a runtime the name varies
// the hue a little and the lightness, as hashColor does.
const RUNTIME_HUES = { python: 210, lua: 275, jit: 150 };

function runtimeOf(model, i) {
	const t = model.tree, r = t.nodes[i][4];
	return (t.runtimes && t.runtimes[r]) || 'native';
}

function frameColor(model, i) {
	const name = nameOf(model, i), base = RUNTIME_HUES[runtimeOf(model, i)];
	if (base === undefined) return hashColor(name);
	let h = 0;
	for (let k = 0; k < name.length; k++) h = (h * 31 + name.charCodeAt(k)) >>> 0;
	return `hsl(${base + (h % 20)}, 65%, ${62 + (h >> 8) % 14}%)`;
}

// The runtimes a tree holds beside native code, as a legend of their colours.
function showRuntimes(tree) {
	const seen = new Set(tree.nodes.map((nd) => (tree.runtimes || [])[nd[4]]));
	$('runtimes').innerHTML = Object.keys(RUNTIME_HUES).filter((r) => seen.has(r))
		.map((r) => `<i style="background: hsl(${RUNTIME_HUES[r] + 10}, 65%, 68%)"></i> ${r}`).join(' ');
}

// ---- flame graph drawing -----------------------------------------------------------------

function setupCanvas(canvas, rows) {
	const dpr = window.devicePixelRatio || 1;
	const w = canvas.clientWidth || canvas.parentElement.clientWidth;
	const h = Math.max(rows, 1) * ROW + 2;
	canvas.style.height = h + 'px';
	canvas.width = Math.round(w * dpr);
	canvas.height = Math.round(h * dpr);
	const ctx = canvas.getContext('2d');
	ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
	return { ctx, w, h };
}

// Draws model rooted at zoom; colorOf(i) gives the fill. Returns the rectangles drawn (for
// hit-testing), so hover and click cost O(drawn frames), never O(profile).
function drawFlame(canvas, model, zoom, colorOf, search) {
	const { ctx, w } = setupCanvas(canvas, model.maxDepth + 1);
	ctx.font = '12px monospace';
	ctx.textBaseline = 'middle';
	const z0 = model.x[zoom];
	const zw = model.rootTotal ? model.tree.nodes[zoom][3] / model.rootTotal : 1;
	const scale = zw > 0 ? w / zw : 0;
	const rects = [];
	const re = search ? safeRegex(search) : null;
	for (const i of model.order) {
		const total = model.tree.nodes[i][3];
		const fw = model.rootTotal ? total / model.rootTotal : 0;
		let px, pw;
		if (isAncestorOrSelf(model, i, zoom)) { px = 0; pw = w; }
		else {
			px = (model.x[i] - z0) * scale;
			pw = fw * scale;
			if (px + pw <= 0 || px >= w) continue;
			if (model.depth[i] < model.depth[zoom]) continue;
		}
		if (pw < MIN_PX) continue;
		const y = model.depth[i] * ROW;
		const name = nameOf(model, i);
		ctx.fillStyle = re && re.test(name) ? '#d0f' : colorOf(i);
		ctx.fillRect(px, y, Math.max(pw - 0.5, 0.5), ROW - 1);
		if (pw > 30) {
			ctx.fillStyle = '#111';
			const maxChars = Math.floor((pw - 6) / 7.2);
			ctx.fillText(name.length > maxChars ? name.slice(0, maxChars - 1) + '…' : name, px + 3, y + ROW / 2);
		}
		rects.push([px, y, pw, i]);
	}
	return rects;
}

function isAncestorOrSelf(model, i, zoom) {
	if (i === zoom) return true;
	// Ancestors of the zoom root: lower depth and covering its x.
	if (model.depth[i] >= model.depth[zoom]) return false;
	const fw = model.rootTotal ? model.tree.nodes[i][3] / model.rootTotal : 0;
	return model.x[i] <= model.x[zoom] + 1e-12 && model.x[zoom] < model.x[i] + fw - 1e-12;
}

function safeRegex(s) {
	try { return new RegExp(s, 'i'); } catch (e) { return null; }
}

function hit(rects, ev, canvas) {
	const r = canvas.getBoundingClientRect();
	const mx = ev.clientX - r.left, my = ev.clientY - r.top;
	for (const [x, y, w, i] of rects)
		if (mx >= x && mx < x + w && my >= y && my < y + ROW) return i;
	return -1;
}

function fmt(v, unit) {
	if (unit === 'nanoseconds') {
		if (v >= 3600e9) return (v / 3600e9).toFixed(2) + ' h';
		if (v >= 1e9) return (v / 1e9).toFixed(2) + ' s';
		if (v >= 1e6) return (v / 1e6).toFixed(1) + ' ms';
		return (v / 1e3).toFixed(0) + ' µs';
	}
	if (unit === 'bytes') {
		if (v >= 1 << 20) return (v / (1 << 20)).toFixed(1) + ' MiB';
		if (v >= 1024) return (v / 1024).toFixed(1) + ' KiB';
		return v + ' B';
	}
	if (unit === 'count' && v >= 1e4) return (v >= 1e6 ? (v / 1e6).toFixed(2) + ' M' : (v / 1e3).toFixed(1) + ' k');
	return String(v);
}

function tooltip(ev, text) {
	const t = $('tooltip');
	if (!text) { t.hidden = true; return; }
	t.textContent = text;
	t.style.left = Math.min(ev.clientX + 12, window.innerWidth - 320) + 'px';
	t.style.top = ev.clientY + 14 + 'px';
	t.hidden = false;
}

// ---- single view -------------------------------------------------------------------------

let flameRects = [];

function renderSingle() {
	const model = state.tree;
	if (!model) return;
	flameRects = drawFlame($('flame'), model, state.zoom, (i) => frameColor(model, i), state.search);
	renderTop(model);
}

function renderTop(model) {
	// flat = self; cum counts a function once per stack even when it recurses.
	const self = new Map(), cum = new Map();
	const onPath = new Map();
	const walk = (i) => {
		const name = nameOf(model, i);
		const node = model.tree.nodes[i];
		if (i !== 0) {
			self.set(name, (self.get(name) || 0) + node[2]);
			if (!onPath.get(name)) cum.set(name, (cum.get(name) || 0) + node[3]);
			onPath.set(name, (onPath.get(name) || 0) + 1);
		}
		for (const k of model.kids[i]) walk(k);
		if (i !== 0) onPath.set(name, onPath.get(name) - 1);
	};
	if (model.tree.nodes.length) walk(0);
	const rows = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 50);
	const total = model.rootTotal || 1, unit = model.tree.unit;
	const tb = $('top').tBodies[0];
	tb.innerHTML = '';
	for (const [name, s] of rows) {
		const c = cum.get(name) || 0;
		const tr = document.createElement('tr');
		for (const v of [fmt(s, unit), (100 * s / total).toFixed(2) + '%', fmt(c, unit), (100 * c / total).toFixed(2) + '%', name]) {
			const td = document.createElement('td');
			td.textContent = v;
			tr.appendChild(td);
		}
		tb.appendChild(tr);
	}
}

// The value picker: the sample types of the profiles shown (a heap profile's inuse_space,
// inuse_objects, alloc_space, alloc_objects), the one rendered selected.
function fillIndex(tree) {
	const sel = $('index'), types = tree.types || [];
	sel.innerHTML = '';
	for (const [name, unit] of types) {
		const o = document.createElement('option');
		o.value = name;
		o.textContent = `${name} (${unit})`;
		sel.appendChild(o);
	}
	sel.value = tree.type;
	sel.disabled = types.length < 2;
}

async function loadFlame() {
	const p = params(null, state.from, state.to);
	p.set('format', 'json');
	$('download').href = '/api/0/profiles/merge?' + params(null, state.from, state.to).toString();
	const tree = await getJSON('/api/0/render?' + p.toString());
	if (!tree || !tree.nodes || !tree.nodes.length) {
		state.tree = null;
		$('runtimes').textContent = '';
		$('summary').textContent = 'no profiles in this range';
		setupCanvas($('flame'), 1);
		$('top').tBodies[0].innerHTML = '';
		return;
	}
	fillIndex(tree);
	showRuntimes(tree);
	state.tree = layout(tree);
	state.zoom = 0;
	$('summary').textContent = `${tree.profiles} profiles · total ${fmt(tree.total, tree.unit)}` +
		(tree.skipped ? ` · ${tree.skipped} skipped (types that cannot merge with the rest)` : '');
	renderSingle();
}

// ---- timeline ----------------------------------------------------------------------------

const tl = { data: null, dragStart: null, dragEnd: null };

function drawTimeline() {
	const canvas = $('timeline');
	const dpr = window.devicePixelRatio || 1;
	const w = canvas.clientWidth, h = 90;
	canvas.width = w * dpr; canvas.height = h * dpr;
	const ctx = canvas.getContext('2d');
	ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
	ctx.clearRect(0, 0, w, h);
	const d = tl.data;
	if (!d || !d.values.length) {
		ctx.fillStyle = '#999';
		ctx.fillText('no data', 10, 40);
		return;
	}
	const max = Math.max(1, ...d.values);
	const bw = w / d.values.length;
	ctx.fillStyle = '#4a7fbf';
	d.values.forEach((v, i) => {
		const bh = (v / max) * (h - 14);
		ctx.fillRect(i * bw, h - 12 - bh, Math.max(bw - 1, 1), bh);
	});
	ctx.fillStyle = '#555';
	ctx.font = '10px sans-serif';
	ctx.fillText(new Date(d.from * 1000).toISOString().slice(0, 19) + 'Z', 2, h - 2);
	const endLabel = new Date((d.from + d.step * d.values.length) * 1000).toISOString().slice(0, 19) + 'Z';
	ctx.fillText(endLabel, w - ctx.measureText(endLabel).width - 2, h - 2);
	if (tl.dragStart !== null && tl.dragEnd !== null) {
		ctx.fillStyle = 'rgba(255, 160, 0, 0.3)';
		const a = Math.min(tl.dragStart, tl.dragEnd), b = Math.max(tl.dragStart, tl.dragEnd);
		ctx.fillRect(a, 0, Math.max(b - a, 2), h - 12);
	}
}

function xToTime(x) {
	const d = tl.data, w = $('timeline').clientWidth;
	return Math.round(d.from + (x / w) * d.step * d.values.length);
}

async function loadTimeline() {
	tl.data = await getJSON('/api/0/timeline?' + params().toString());
	tl.dragStart = tl.dragEnd = null;
	state.from = state.to = null;
	$('range-label').textContent = 'whole range';
	drawTimeline();
}

function setupTimeline() {
	const c = $('timeline');
	const pos = (ev) => ev.clientX - c.getBoundingClientRect().left;
	c.addEventListener('mousedown', (ev) => { if (tl.data) { tl.dragStart = tl.dragEnd = pos(ev); drawTimeline(); } });
	c.addEventListener('mousemove', (ev) => { if (tl.dragStart !== null && ev.buttons) { tl.dragEnd = pos(ev); drawTimeline(); } });
	c.addEventListener('mouseup', async (ev) => {
		if (tl.dragStart === null) return;
		tl.dragEnd = pos(ev);
		let a = Math.min(tl.dragStart, tl.dragEnd), b = Math.max(tl.dragStart, tl.dragEnd);
		if (b - a < 3) { a = Math.max(0, a - 10); b = a + 20; } // a click picks a small window
		state.from = String(xToTime(a));
		state.to = String(xToTime(b));
		$('range-label').textContent = `${new Date(state.from * 1000).toISOString()} → ${new Date(state.to * 1000).toISOString()}`;
		drawTimeline();
		await run(loadFlame);
		prefillCompare();
	});
}

// ---- compare view ------------------------------------------------------------------------

function prefillCompare() {
	const q = selector();
	if (!$('a-query').value) $('a-query').value = q;
	if (!$('b-query').value) $('b-query').value = q;
	const f = state.from || $('from').value, t = state.to || $('to').value;
	if (tl.data && !state.from) {
		const mid = Math.round(tl.data.from + tl.data.step * tl.data.values.length / 2);
		$('a-from').value = String(tl.data.from); $('a-to').value = String(mid);
		$('b-from').value = String(mid); $('b-to').value = String(tl.data.from + tl.data.step * tl.data.values.length);
	} else if (!$('a-from').value) {
		$('a-from').value = f; $('a-to').value = t; $('b-from').value = f; $('b-to').value = t;
	}
}

// Merges two trees by stack path. Each node keeps A's and B's totals normalised to their
// profile totals; widths use the mean so children still fit inside parents.
function diffTrees(a, b) {
	const names = ['total'], nameIdx = new Map([['total', 0]]);
	const nodes = [[0, -1, 0, 0]], va = [0], vb = [0];
	const index = new Map();
	const ta = a && a.total ? a.total : 1, tb = b && b.total ? b.total : 1;
	const add = (tree, isB) => {
		if (!tree || !tree.nodes) return;
		const map = new Int32Array(tree.nodes.length);
		map[0] = 0;
		for (let i = 1; i < tree.nodes.length; i++) {
			const [n, parent, , total] = tree.nodes[i];
			const name = tree.names[n];
			const p = map[parent];
			const key = p + '\u0000' + name;
			let j = index.get(key);
			if (j === undefined) {
				let ni = nameIdx.get(name);
				if (ni === undefined) { ni = names.length; names.push(name); nameIdx.set(name, ni); }
				j = nodes.length;
				nodes.push([ni, p, 0, 0]);
				va.push(0); vb.push(0);
				index.set(key, j);
			}
			map[i] = j;
			if (isB) vb[j] += total / tb; else va[j] += total / ta;
		}
	};
	add(a, false);
	add(b, true);
	va[0] = 1; vb[0] = 1;
	// Scale to integers so layout() can treat it like any tree.
	const S = 1e9;
	for (let i = 0; i < nodes.length; i++) nodes[i][3] = Math.round(((va[i] + vb[i]) / 2) * S);
	return { tree: { names, nodes, total: S, unit: 'ratio' }, va, vb };
}

function diffColor(va, vb, i) {
	const a = va[i], b = vb[i], m = Math.max(a, b);
	if (m <= 0) return '#ccc';
	const d = (b - a) / m; // -1 .. 1
	const k = Math.min(1, Math.abs(d) * 1.5);
	if (Math.abs(d) < 0.02) return '#d8d8d8';
	const light = 85 - 35 * k;
	return d > 0 ? `hsl(3, 75%, ${light}%)` : `hsl(135, 50%, ${light}%)`;
}

let diffRects = [];

function renderDiff() {
	const d = state.diff;
	if (!d) return;
	diffRects = drawFlame($('diff'), d.model, state.diffZoom, (i) => diffColor(d.va, d.vb, i), state.search);
}

async function loadCompare() {
	const pa = params($('a-query').value, $('a-from').value, $('a-to').value);
	const pb = params($('b-query').value, $('b-from').value, $('b-to').value);
	pa.set('format', 'json'); pb.set('format', 'json');
	const [a, b] = await Promise.all([getJSON('/api/0/render?' + pa), getJSON('/api/0/render?' + pb)]);
	const merged = diffTrees(a, b);
	state.diff = { model: layout(merged.tree), va: merged.va, vb: merged.vb };
	state.diffZoom = 0;
	$('summary').textContent = `A: ${a ? a.profiles : 0} profiles · B: ${b ? b.profiles : 0} profiles`;
	renderDiff();
}

// ---- regressions: GET /api/0/regressions on the Compare tab's A and B --------------------

function regressParams() {
	const p = new URLSearchParams();
	p.set('base', $('a-query').value || selector());
	p.set('cand', $('b-query').value || selector());
	p.set('type', $('type').value);
	p.set('base_from', $('a-from').value || 'now-1h'); p.set('base_to', $('a-to').value || 'now');
	p.set('from', $('b-from').value || 'now-1h'); p.set('to', $('b-to').value || 'now');
	return p;
}

function regressRow(f) {
	const tr = document.createElement('tr');
	const pct = (v) => (v == null ? '' : v.toFixed(3));
	const change = f.delta_pct == null ? 'new' : `${f.delta_pct >= 0 ? '+' : ''}${f.delta_pct.toFixed(1)} %`;
	const cells = [f.verdict, f.metric, pct(f.base_pct), pct(f.cand_pct), change,
		`[${pct(f.diff_lo_pct)}, ${pct(f.diff_hi_pct)}]`, f.p_adjusted.toExponential(1),
		`${f.present_base}/${f.devices_base} · ${f.present_cand}/${f.devices_cand}`];
	for (const c of cells) {
		const td = document.createElement('td');
		td.textContent = c;
		tr.appendChild(td);
	}
	const td = document.createElement('td'), a = document.createElement('a');
	a.href = '#';
	a.textContent = f.function;
	a.className = f.verdict;
	a.onclick = (ev) => { ev.preventDefault(); showDiffOf(f.function); };
	td.appendChild(a);
	// the caller chains whose share moved most ("stacks": nearest callers, root first)
	for (const st of f.stacks || []) {
		const d = document.createElement('div');
		d.className = 'regress-stack';
		d.textContent = `from ${st.cut ? '… › ' : ''}${st.callers.length ? st.callers.join(' › ') : '(root)'}: ` +
			`${pct(st.base_pct)} → ${pct(st.cand_pct)} %`;
		td.appendChild(d);
	}
	tr.appendChild(td);
	return tr;
}

async function loadRegressions() {
	const r = await getJSON('/api/0/regressions?' + regressParams());
	const body = r.body, tb = $('regress-table').querySelector('tbody');
	tb.innerHTML = '';
	for (const f of body.findings) tb.appendChild(regressRow(f));
	$('regress-summary').textContent = `A: ${body.base.devices} devices (${body.base.profiles} profiles) · ` +
		`B: ${body.cand.devices} devices (${body.cand.profiles} profiles) · ${body.tests} tests · ` +
		`${body.findings.length} found`;
}

// The standing rules' last results; a finding opens the diff of its rule's two values.
async function loadRules() {
	const r = await getJSON('/api/0/regressions/rules');
	const tb = $('rules-table').querySelector('tbody');
	tb.innerHTML = '';
	for (const rule of (r && r.body) || []) {
		const tr = document.createElement('tr');
		const when = rule.last_run ? new Date(rule.last_run * 1000).toISOString().slice(0, 19) + 'Z' : '';
		const cells = [rule.rule, `${rule.selector} by ${rule.label}`,
			rule.base ? `${rule.base} → ${rule.cand}` : '', rule.status, when];
		for (const c of cells) {
			const td = document.createElement('td');
			td.textContent = c;
			tr.appendChild(td);
		}
		const td = document.createElement('td');
		for (const f of rule.findings) {
			const a = document.createElement('a');
			a.href = '#';
			a.className = f.verdict;
			a.textContent = `${f.function} (${f.delta_pct == null ? 'new' : (f.delta_pct >= 0 ? '+' : '') + f.delta_pct.toFixed(1) + ' %'})`;
			a.onclick = (ev) => {
				ev.preventDefault();
				const sel = (v) => withLabel(rule.selector, rule.label, v);
				$('a-query').value = sel(rule.base); $('b-query').value = sel(rule.cand);
				showDiffOf(f.function);
			};
			td.appendChild(a);
			td.appendChild(document.createTextNode(' '));
		}
		tr.appendChild(td);
		tb.appendChild(tr);
	}
}

// selector + label="value" (the rule's side), as the collector builds it.
function withLabel(sel, label, value) {
	const v = value.replace(/["\\]/g, '\\$&');
	let s = sel.trim();
	if (s.endsWith('{}')) s = s.slice(0, -2);
	return s.endsWith('}') ? `${s.slice(0, -1)},${label}="${v}"}` : `${s}{${label}="${v}"}`;
}

function showTab(name) {
	for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t.dataset.tab === name);
	for (const id of ['single', 'compare', 'regressions']) $(id).hidden = id !== name;
}

// The diff flame graph of A and B with the function's frames highlighted (search is a regex).
function showDiffOf(fn) {
	showTab('compare');
	state.search = '^' + fn.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$';
	$('search').value = state.search;
	run(loadCompare);
}

// ---- wiring ------------------------------------------------------------------------------

async function run(fn) {
	try { showError(''); await fn(); } catch (e) { showError(e.message); }
}

async function loadServices() {
	const r = await getJSON('/api/0/services');
	const list = (r && r.body) || [];
	const sel = $('service');
	sel.innerHTML = '';
	for (const s of list) {
		const o = document.createElement('option');
		o.textContent = s;
		sel.appendChild(o);
	}
}

async function applyAll() {
	await run(loadTimeline);
	await run(loadFlame);
	prefillCompare();
}

function wireFlame(canvas, getRects, getModel, onZoom, describe) {
	canvas.addEventListener('mousemove', (ev) => {
		const i = hit(getRects(), ev, canvas);
		tooltip(ev, i < 0 ? '' : describe(i));
	});
	canvas.addEventListener('mouseleave', () => tooltip(null, ''));
	canvas.addEventListener('click', (ev) => {
		const i = hit(getRects(), ev, canvas);
		if (i >= 0) onZoom(i);
	});
}

function init() {
	setupTimeline();
	wireFlame($('flame'), () => flameRects, () => state.tree, (i) => { state.zoom = i; renderSingle(); }, (i) => {
		const m = state.tree, node = m.tree.nodes[i];
		const pct = m.rootTotal ? (100 * node[3] / m.rootTotal).toFixed(2) : '0';
		const rt = runtimeOf(m, i);
		return `${nameOf(m, i)}${rt === 'native' ? '' : ` [${rt}]`}\ntotal ${fmt(node[3], m.tree.unit)} (${pct}%)  self ${fmt(node[2], m.tree.unit)}`;
	});
	wireFlame($('diff'), () => diffRects, () => state.diff && state.diff.model, (i) => { state.diffZoom = i; renderDiff(); }, (i) => {
		const d = state.diff;
		const a = (100 * d.va[i]).toFixed(2), b = (100 * d.vb[i]).toFixed(2);
		const delta = (100 * (d.vb[i] - d.va[i])).toFixed(2);
		return `${nameOf(d.model, i)}\nA ${a}%  B ${b}%  Δ ${delta >= 0 ? '+' : ''}${delta} pp`;
	});
	$('apply').onclick = applyAll;
	$('query').addEventListener('keydown', (ev) => { if (ev.key === 'Enter') applyAll(); });
	$('service').onchange = () => { $('query').value = ''; applyAll(); };
	$('type').onchange = () => { state.index = ''; applyAll(); };
	$('index').onchange = () => { state.index = $('index').value; applyAll(); };
	$('search').addEventListener('input', () => { state.search = $('search').value; renderSingle(); renderDiff(); });
	$('reset-zoom').onclick = () => { state.zoom = 0; state.diffZoom = 0; renderSingle(); renderDiff(); };
	$('compare-apply').onclick = () => run(loadCompare);
	$('regress-apply').onclick = () => run(loadRegressions);
	for (const tab of document.querySelectorAll('.tab')) {
		tab.onclick = () => {
			showTab(tab.dataset.tab);
			if (tab.dataset.tab === 'compare') { prefillCompare(); run(loadCompare); }
			if (tab.dataset.tab === 'regressions') { prefillCompare(); run(loadRules); }
		};
	}
	window.addEventListener('resize', () => { drawTimeline(); renderSingle(); renderDiff(); });
	run(async () => { await loadServices(); await applyAll(); });
}

// ---- ad-hoc files: a pprof (gzip or not) or folded text, chosen or dropped ----------------
// The collector renders it (POST /api/0/render: its reader, limits and symbols) and keeps
// nothing; the page shows it in the flame graph and top table until the next Apply.

async function openFile(file) {
	const r = await fetch('/api/0/render?format=json', { method: 'POST', body: file, credentials: 'same-origin' });
	const text = await r.text();
	let tree;
	try { tree = JSON.parse(text); } catch (e) { throw new Error(`${file.name}: ${r.status}: ${text.slice(0, 200)}`); }
	if (!r.ok) throw new Error(`${file.name}: ${tree.error || r.status}`);
	showTab('single');
	state.tree = layout(tree);
	state.zoom = 0;
	$('summary').textContent = `${file.name} (not stored) · ${tree.type} · total ${fmt(tree.total, tree.unit)}`;
	renderSingle();
}

function wireOpenFile() {
	$('open-file').onchange = () => {
		const f = $('open-file').files[0];
		if (f) run(() => openFile(f));
		$('open-file').value = '';
	};
	document.addEventListener('dragover', (ev) => { ev.preventDefault(); document.body.classList.add('dropping'); });
	document.addEventListener('dragleave', () => document.body.classList.remove('dropping'));
	document.addEventListener('drop', (ev) => {
		ev.preventDefault();
		document.body.classList.remove('dropping');
		const f = ev.dataTransfer && ev.dataTransfer.files[0];
		if (f) run(() => openFile(f));
	});
}

// What is on screen, for the browser test and for scripts driving the page.
window.edgeprofUI = {
	state,
	flameFrames: () => flameRects.map(([x, y, w, i]) => ({
		name: nameOf(state.tree, i), x, y, w, runtime: runtimeOf(state.tree, i),
		color: frameColor(state.tree, i),
	})),
	diffFrames: () => diffRects.map(([, , w, i]) => ({
		name: nameOf(state.diff.model, i), w, a: state.diff.va[i], b: state.diff.vb[i],
		color: diffColor(state.diff.va, state.diff.vb, i),
	})),
};

wireOpenFile();
init();
