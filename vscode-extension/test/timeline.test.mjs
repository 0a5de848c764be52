// The Timeline webview on its own in headless Chromium (playwright-core),
// fed what `rewind dap` sent for the failing run a check of the compiled
// bank program found (REWIND_BIN, REWIND_HOME, REWIND_TEST_PROGRAM from
// tests/tests/vscode.rs), then a synthetic 1,000,000-step run for timing.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { Dap } from './dap.mjs';
import { chromiumPath, stubVsCodeApi, webviewPage } from './page.mjs';

const artifacts = process.env.REWIND_ARTIFACTS ?? join(process.cwd(), 'artifacts');
mkdirSync(artifacts, { recursive: true });

let browser;
let recorded;

before(async () => {
	const program = process.env.REWIND_TEST_PROGRAM;
	assert.ok(program, 'REWIND_TEST_PROGRAM names the program to check');
	const dap = new Dap(process.env.REWIND_BIN ?? 'rewind', process.env);
	const { timeline, position } = await dap.open({ check: { program, schedules: 16, points: 'syscalls' } });
	const lanes = await dap.request('rewind/lanes', { max: 500 });
	await dap.close();
	recorded = { timeline, position, lanes };
	browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
});

after(async () => {
	await browser?.close();
});

async function openTimeline(width = 900) {
	const page = await browser.newPage({ viewport: { width, height: 400 } });
	await page.addInitScript(stubVsCodeApi);
	await page.goto(webviewPage('timeline'));
	await page.waitForFunction(() => window.__posted.some((m) => m.type === 'ready'));
	return page;
}

async function feed(page, messages) {
	await page.evaluate((ms) => {
		for (const m of ms) window.postMessage(m, '*');
	}, messages);
	// Messages are delivered as tasks: wait until the last one is drawn.
	await page.evaluate(() => new Promise((r) => setTimeout(r, 0)));
}

/** Feeds the page a run: its timeline, lanes and position, as the extension sends them. */
const feedRun = (page, { timeline, lanes, position }) =>
	feed(page, [
		{ type: 'timeline', timeline },
		{ type: 'lanes', lanes },
		{ type: 'position', position },
	]);

const data = (page, key) => page.$eval('#timeline', (c, k) => c.dataset[k], key);

test('the timeline shows the recorded run with its deciding and divergence marks', async () => {
	const { timeline, position, lanes } = recorded;
	const page = await openTimeline();
	await feedRun(page, recorded);
	assert.equal(await data(page, 'playhead'), String(position.step));
	assert.equal(typeof timeline.deciding, 'number', 'a check opens at its deciding step');
	assert.equal(position.step, timeline.deciding);
	assert.equal(await data(page, 'deciding'), String(timeline.deciding));
	assert.equal(typeof timeline.compare.step, 'number', 'the first difference from the passing run');
	assert.equal(await data(page, 'firstDifference'), String(timeline.compare.step));
	assert.equal(Number(await data(page, 'lanes')), lanes.threads.length);
	assert.ok(Number(await data(page, 'compareLanes')) > 0, 'the compared run has lanes');
	const header = await page.textContent('#header');
	assert.match(header, new RegExp(timeline.run));
	assert.match(header, new RegExp(`step ${position.step} / ${timeline.steps}`));
	const marks = await page.textContent('#marks');
	assert.match(marks, new RegExp(`deciding step ${timeline.deciding}`));
	assert.match(marks, new RegExp(`first difference at step ${timeline.compare.step}`));
	await page.screenshot({ path: join(artifacts, 'timeline-webview-recorded.png') });
	await page.close();
});

test('a click sends the rewind/goto of the step under the pointer', async () => {
	const { timeline } = recorded;
	const page = await openTimeline();
	await feedRun(page, recorded);
	const box = await page.$eval('#timeline', (c) => ({ w: c.clientWidth, h: c.clientHeight }));
	const gutter = 150;
	for (const target of [0, 10, timeline.steps]) {
		const x = gutter + (target / timeline.steps) * (box.w - gutter - 10);
		await page.click('#timeline', { position: { x: Math.min(x, box.w - 1), y: box.h - 10 } });
		const posted = await page.evaluate(() => window.__posted.filter((m) => m.type === 'goto').pop());
		assert.deepEqual(posted, { type: 'goto', step: target });
	}
	await page.close();
});

/** A run of `steps` steps with `threads` threads and `events` events of interest. */
function synthetic(steps, threads, events) {
	const evs = [];
	for (let i = 0; i < events; i++) {
		const step = Math.floor(((i + 0.5) * steps) / events);
		evs.push({ step, pid: 1000, tid: 1000 + (i % threads), kind: ['threadStart', 'threadExit', 'sdk', 'signal'][i % 4], text: `event ${i}` });
	}
	const lanes = { run: 'f'.repeat(16), from: 0, to: steps, coarse: true, threads: [] };
	for (let t = 0; t < threads; t++) {
		const stretches = [];
		const w = steps / 500;
		for (let k = 0; k < 500; k++) {
			if ((k + t) % threads === 0) stretches.push([Math.floor(k * w), Math.floor((k + 1) * w) - 1]);
		}
		lanes.threads.push({ pid: 1000, tid: 1000 + t, name: `1000/${1000 + t} worker`, stretches });
	}
	lanes.compare = { ...lanes, run: 'e'.repeat(16) };
	const timeline = {
		run: 'f'.repeat(16), name: 'synthetic', status: 'exited:2', steps, virtualNs: steps * 5000, forkOf: null,
		events: evs, bookmarks: [{ step: 400000, note: 'here', created: 0 }],
		perturbations: [{ step: 500000, what: 'a reschedule' }], deciding: 500000,
		compare: { run: 'e'.repeat(16), identical: false, step: 500001, otherStep: 500001 },
	};
	const position = { run: timeline.run, step: 700000, steps, stateStep: 700000, virtualNs: 0, events: [] };
	return { timeline, lanes, position };
}

test('zooming keeps the playhead in view; a 1,000,000-step run draws quickly', async () => {
	const run = synthetic(1_000_000, 8, 20_000);
	const { position } = run;
	const page = await openTimeline(1200);
	const t0 = Date.now();
	await feedRun(page, run);
	const firstMs = Date.now() - t0;
	const renderMs = Number(await data(page, 'renderMs'));
	// In the page: from a wheel event's creation to the next frame after its
	// handler drew (the driver's own round trips are not in it).
	await page.evaluate(() => {
		window.__toFrame = [];
		window.addEventListener('wheel', (e) => {
			requestAnimationFrame(() => window.__toFrame.push(performance.now() - e.timeStamp));
		});
	});
	// Zoom in hard at the left edge, far from the playhead at 700,000.
	const zooms = [];
	for (let i = 0; i < 10; i++) {
		const z0 = Date.now();
		await page.mouse.move(200, 60);
		await page.keyboard.down('Control');
		await page.mouse.wheel(0, -400);
		await page.keyboard.up('Control');
		await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
		zooms.push({ wall: Date.now() - z0, render: Number(await data(page, 'renderMs')) });
		const from = Number(await data(page, 'viewFrom'));
		const to = Number(await data(page, 'viewTo'));
		assert.ok(from <= position.step && position.step <= to, `zoom ${i}: the playhead ${position.step} is in view ${from}..${to}`);
	}
	const span = Number(await data(page, 'viewTo')) - Number(await data(page, 'viewFrom'));
	assert.ok(span < 100_000, `zoomed in (span ${span})`);
	// The page asks for the lanes of the window it shows.
	await page.waitForFunction(() => window.__posted.some((m) => m.type === 'lanes'));
	const ask = await page.evaluate(() => window.__posted.filter((m) => m.type === 'lanes').pop());
	assert.ok(ask.from <= position.step && position.step <= ask.to, JSON.stringify(ask));
	// Shift+wheel pans.
	const before = Number(await data(page, 'viewFrom'));
	await page.keyboard.down('Shift');
	await page.mouse.wheel(0, 300);
	await page.keyboard.up('Shift');
	await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
	assert.ok(Number(await data(page, 'viewFrom')) > before, 'Shift+wheel pans right');
	await page.screenshot({ path: join(artifacts, 'timeline-webview-1M-zoomed.png') });
	const worstRender = Math.max(...zooms.map((z) => z.render));
	const worstWall = Math.max(...zooms.map((z) => z.wall));
	const toFrame = await page.evaluate(() => window.__toFrame);
	assert.ok(toFrame.length >= 10, `a frame after every wheel event: ${toFrame}`);
	const worstToFrame = Math.max(...toFrame);
	console.log(
		`# timeline figures: 1000000 steps, 8+8 lanes, 20000 events: first render ${renderMs.toFixed(1)} ms (feed to drawn ${firstMs} ms), ` +
			`zoom render worst ${worstRender.toFixed(1)} ms, zoom event-to-frame worst ${worstToFrame.toFixed(1)} ms in the page ` +
			`(${worstWall} ms with the driver's round trips)`,
	);
	await page.close();
});
