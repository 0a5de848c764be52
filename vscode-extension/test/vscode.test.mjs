// The extension in a real VS Code: code-server (CODE_SERVER, run by the
// Node.js in NODE24_BIN) with the built .vsix installed, driven through
// Debian's Chromium with playwright-core. The workspace
// (REWIND_TEST_WORKSPACE) holds bank.c and its program `bank` built there
// with -g, a launch.json that checks it, and a .rwd exported from another
// store (REWIND_TEST_RWD, run REWIND_TEST_RWD_RUN). The session opens the
// failing run at the deciding step beside the passing run; then what a user
// does from there: the lanes, Check from here, Compare and Swap, the
// Problems panel (`rewind lsp`) and its code action, Go to Step, picking a
// check cell, a bookmark, a fork (Restart Frame, and Fork from Here), Open
// Run from the timeline's context menu, a vscode:// link, opening the .rwd,
// Export Run (the .rwd imports and replays in another store) and Remove Run
// from the Runs view. Screenshots of
// each state go to REWIND_ARTIFACTS.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { startCodeServer } from './codeServer.mjs';

const artifacts = process.env.REWIND_ARTIFACTS ?? join(process.cwd(), 'artifacts');
const codeServer = process.env.CODE_SERVER;
const workspace = process.env.REWIND_TEST_WORKSPACE;
const rwd = process.env.REWIND_TEST_RWD;
const rwdRun = process.env.REWIND_TEST_RWD_RUN;
const schedules = 6;
mkdirSync(artifacts, { recursive: true });

const figures = {};
const started = Date.now();
let code;
let page;

before(async () => {
	assert.ok(workspace && rwd && rwdRun, 'REWIND_TEST_WORKSPACE, REWIND_TEST_RWD and REWIND_TEST_RWD_RUN are set');
	mkdirSync(join(workspace, '.vscode'), { recursive: true });
	writeFileSync(join(workspace, '.vscode', 'settings.json'), JSON.stringify({ 'rewind.checkSchedules': schedules }, null, 2));
	writeFileSync(
		join(workspace, '.vscode', 'launch.json'),
		JSON.stringify(
			{
				version: '0.2.0',
				configurations: [{ type: 'rewind', request: 'launch', name: 'Rewind: check bank', check: { program: '${workspaceFolder}/bank', schedules: 16, points: 'syscalls' } }],
			},
			null,
			2,
		),
	);
	// rewind.path and rewind.home are machine settings: a workspace's are ignored.
	code = await startCodeServer({ workspace, machine: { 'rewind.path': process.env.REWIND_BIN, 'rewind.home': process.env.REWIND_HOME } });
	page = code.page;
	Object.assign(figures, code.figures);
});

after(async () => {
	figures.totalMs = Date.now() - started;
	console.log(`# vscode figures: ${JSON.stringify(figures)}`);
	// The workspace is the caller's: its program is what the runs replay from.
	await code?.stop();
});

const shot = (name) => page.screenshot({ path: join(artifacts, `code-server-${name}.png`) });

/** Runs a command from the palette (F1), by its title. */
async function palette(title) {
	const input = page.locator('.quick-input-widget input');
	// On a loaded machine the palette can be caught opening or closing
	// (the input not editable yet): close it and open it again.
	for (let tries = 0; ; tries++) {
		await page.keyboard.press('F1');
		try {
			await input.waitFor({ state: 'visible', timeout: 10000 });
			await input.fill(`>${title}`, { timeout: 10000 });
			break;
		} catch (e) {
			if (tries === 2) {
				await shot(`failed-palette-open-${title.replace(/\W+/g, '-')}`);
				throw e;
			}
			await page.keyboard.press('Escape');
		}
	}
	try {
		await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor({ timeout: 20000 });
	} catch (e) {
		await shot(`failed-palette-${title.replace(/\W+/g, '-')}`);
		throw e;
	}
	await page.keyboard.press('Enter');
}

/** The frame of the webview page that has `selector`. */
async function webviewFrame(selector, timeout = 60000) {
	const start = Date.now();
	for (;;) {
		for (const f of page.frames()) {
			if (await f.$(selector).catch(() => null)) return f;
		}
		assert.ok(Date.now() - start < timeout, `no webview with ${selector}`);
		await new Promise((r) => setTimeout(r, 250));
	}
}

async function statusStep() {
	const item = page.locator('.statusbar-item', { hasText: /step \d+\/\d+/ }).first();
	await item.waitFor({ timeout: 60000 });
	return Number(/step (\d+)\//.exec(await item.textContent())[1]);
}

/**
 * Waits for the status bar's step to be `step`: it follows the session a
 * moment after the Timeline's playhead (each hears the session on its own).
 */
async function statusStepIs(step, what) {
	const start = Date.now();
	let now = await statusStep();
	while (now !== step && Date.now() - start < 30000) {
		await new Promise((r) => setTimeout(r, 100));
		now = await statusStep();
	}
	assert.equal(now, step, `${what}: the status bar's step`);
}

/** The line of the editor's cursor, from the status bar. */
async function cursorLine() {
	const item = page.locator('.statusbar-item', { hasText: /Ln \d+/ }).first();
	await item.waitFor({ timeout: 30000 });
	return Number(/Ln (\d+)/.exec(await item.textContent())[1]);
}

/** `rewind ARGS...` in the tests' store. */
const rewind = (...args) => execFileSync(process.env.REWIND_BIN, args, { env: process.env }).toString();

/** `rewind ARGS... --json`, parsed: one object per line. */
const rewindJson = (...args) =>
	rewind(...args, '--json')
		.split('\n')
		.filter((l) => l.trim() !== '')
		.map((l) => JSON.parse(l));

let timelineFrame;
let opened;
/** The fork Restart Frame made. */
let restartFork;

/** The Timeline's data attributes: run, compare, playhead, deciding, marks... */
async function timelineData() {
	timelineFrame = await webviewFrame('#timeline');
	return timelineFrame.$eval('#timeline', (c) => ({ ...c.dataset, marks: document.querySelector('#marks').textContent }));
}

/** Waits for the Timeline to show `run` with the playhead at `step` (a new session). */
async function sessionAt(run, step, what) {
	timelineFrame = await webviewFrame('#timeline');
	try {
		await timelineFrame.waitForFunction(
			([r, s]) => {
				const d = document.querySelector('#timeline').dataset;
				return d.run === r && d.playhead === String(s);
			},
			[run, step],
			{ timeout: 120000 },
		);
	} catch (e) {
		await shot(`failed-${what}`);
		throw e;
	}
	await statusStepIs(step, what);
	return timelineData();
}

/** The item `label` of the context menu open now (a screenshot `failed-WHAT-menu` when it never shows). */
async function menuItemOf(label, what) {
	const item = page.locator('.monaco-menu .action-item', { hasText: label }).first();
	try {
		await item.waitFor({ timeout: 10000 });
	} catch (e) {
		await shot(`failed-${what}-menu`);
		throw e;
	}
	return item;
}

/** Clicks a context menu's item; waits for the menu to close. */
async function clickMenuItem(item) {
	// A click that lands while the menu is still opening is lost (the menu
	// stays up with the item highlighted): then Enter takes the item.
	await item.hover();
	await item.click();
	const menu = page.locator('.monaco-menu').first();
	try {
		await menu.waitFor({ state: 'hidden', timeout: 3000 });
	} catch {
		await page.keyboard.press('Enter');
		await menu.waitFor({ state: 'hidden', timeout: 10000 });
	}
}

/** Clicks `label` in the context menu open now. */
async function menuItem(label, what) {
	await clickMenuItem(await menuItemOf(label, what));
}

/**
 * Waits (`timeout` ms) for the session to go on in a new run, a fork of
 * `parent` at `step`, and for `rewind ls --forks-of` to list it; its
 * Timeline data.
 */
async function forkedAt(parent, step, what, timeout) {
	timelineFrame = await webviewFrame('#timeline');
	try {
		await timelineFrame.waitForFunction((p) => /^[0-9a-f]{16}$/.test(document.querySelector('#timeline').dataset.run) && document.querySelector('#timeline').dataset.run !== p, parent, { timeout });
	} catch (e) {
		await shot(`failed-${what}`);
		throw e;
	}
	const d = await timelineData();
	assert.match(d.marks, new RegExp(`fork of ${parent.slice(0, 8)} at step ${step}`));
	assert.equal(d.playhead, String(step), 'the session goes on at the same step');
	const forks = rewindJson('ls', '--forks-of', parent).map((r) => r.id);
	assert.ok(forks.includes(d.run), `rewind ls --forks-of ${parent}: ${forks}`);
	return d;
}

test('a rewind session opens the failing run: the toolbar has Step Back and Reverse', async () => {
	const t = Date.now();
	// The Run and Debug view's start button runs launch.json's configuration.
	await page.locator('.activitybar [aria-label^="Run and Debug"]').first().click();
	await page.locator('[aria-label^="Start Debugging"]').first().click();
	try {
		await page.waitForSelector('.debug-toolbar', { timeout: 120000 });
	} catch (e) {
		await shot('failed-start');
		throw e;
	}
	figures.sessionMs = Date.now() - t;
	await page.waitForSelector('.debug-toolbar .codicon-debug-step-back');
	await page.waitForSelector('.debug-toolbar .codicon-debug-reverse-continue');
	timelineFrame = await webviewFrame('#timeline');
	await timelineFrame.waitForFunction(() => document.querySelector('#timeline').dataset.deciding !== '', null, { timeout: 60000 });
	figures.timelineMs = Date.now() - t;
	opened = await timelineData();
	assert.match(opened.run, /^[0-9a-f]{16}$/);
	assert.match(opened.compare, /^[0-9a-f]{16}$/);
	await statusStepIs(Number(opened.deciding), 'the session stops at the deciding step');
	await shot('1-session-at-deciding-step');
});

test('the timeline shows the deciding and divergence marks and both runs\' lanes', async () => {
	assert.notEqual(opened.firstDifference, '');
	assert.equal(opened.playhead, opened.deciding);
	assert.ok(Number(opened.lanes) >= 3, `bank has three threads: ${opened.lanes}`);
	assert.ok(Number(opened.compareLanes) >= 3);
	const marks = await timelineFrame.textContent('#marks');
	assert.match(marks, new RegExp(`deciding step ${opened.deciding}`));
	assert.match(marks, new RegExp(`first difference at step ${opened.firstDifference}`));
	const header = await timelineFrame.textContent('#header');
	assert.match(header, /exited:2/);
	await shot('2-timeline-marks');
});

test('the Runs view shows the run', async () => {
	const header = (await timelineFrame.textContent('#header')).split(' · ')[0];
	const id = header.split(' ')[1];
	const runsHeader = page.locator('.pane-header', { hasText: 'Rewind Runs' });
	await runsHeader.waitFor({ timeout: 30000 });
	if ((await runsHeader.getAttribute('aria-expanded')) !== 'true') {
		await runsHeader.click();
	}
	await page.locator('.monaco-list-row', { hasText: id.slice(0, 8) }).first().waitFor({ timeout: 30000 });
	await shot('3-runs-view');
});

test('clicking a lane bar moves the session: the step, the stack and the line change', async () => {
	const before = await statusStep();
	const stackBefore = await page.locator('.debug-call-stack .monaco-list-row').allTextContents();
	const box = await timelineFrame.$eval('#timeline', (c) => ({ w: c.clientWidth, h: c.clientHeight }));
	const from = Number(opened.viewFrom);
	const to = Number(opened.viewTo);
	// Step 48: thread 1000/1000 (main, the first lane) holds the CPU then,
	// in printf called from main in bank.c, after the tellers' line 26.
	const target = 48;
	const lineBefore = await cursorLine();
	const x = 150 + ((target - from) / (to - from)) * (box.w - 160);
	// The first lane's bar: ruler 34, section title, then the lane.
	await timelineFrame.click('#timeline', { position: { x, y: 34 + 4 + 12 + 8 } });
	await timelineFrame.waitForFunction((s) => document.querySelector('#timeline').dataset.playhead === String(s), target, { timeout: 30000 });
	await statusStepIs(target, 'a lane bar clicked');
	assert.notEqual(target, before);
	await page.waitForFunction(
		(old) => {
			const rows = [...document.querySelectorAll('.debug-call-stack .monaco-list-row')].map((r) => r.textContent);
			return rows.length > 0 && rows.join('\n') !== old;
		},
		stackBefore.join('\n'),
		{ timeout: 30000 },
	);
	const start = Date.now();
	while ((await cursorLine()) === lineBefore) {
		assert.ok(Date.now() - start < 30000, `the highlighted line stays ${lineBefore}`);
		await new Promise((r) => setTimeout(r, 250));
	}
	await shot('4-after-timeline-click');
});

test('Check from here fills a cell per schedule', async () => {
	await palette('Rewind: Check from Here');
	const t = Date.now();
	await timelineFrame.waitForFunction((n) => document.querySelectorAll('#cells .cell').length === n && /schedules, \d+ ended/.test(document.querySelector('#check-title').textContent) && !/so far/.test(document.querySelector('#check-title').textContent), schedules, { timeout: 180000 });
	figures.checkMs = Date.now() - t;
	await shot('5-check-from-here');
});

test('the Compare view shows the first difference', async () => {
	await palette('Rewind: Focus on Compare View');
	const compare = await webviewFrame('#compare .summary');
	await compare.waitForFunction(() => /first difference/.test(document.querySelector('#compare .summary')?.textContent ?? ''), null, { timeout: 30000 });
	assert.ok((await compare.$$('tr.differs')).length > 0, 'the differing events are highlighted');
	await shot('6-compare-view');
});

test('Go to Step from the palette moves the session there', async () => {
	const before = await statusStep();
	const target = 30;
	assert.notEqual(before, target);
	await palette('Rewind: Go to Step…');
	const input = page.locator('.quick-input-widget input');
	await input.waitFor({ state: 'visible' });
	await input.fill(String(target));
	await page.keyboard.press('Enter');
	timelineFrame = await webviewFrame('#timeline');
	await timelineFrame.waitForFunction((s) => document.querySelector('#timeline').dataset.playhead === String(s), target, { timeout: 30000 });
	await statusStepIs(target, 'Go to Step');
	await shot('6b-go-to-step');
});

test('picking a check cell compares with its run', async () => {
	timelineFrame = await webviewFrame('#timeline');
	// From step 48 the balance is printed already: every schedule ends as
	// this run did (grey cells), and each is a run of its own to compare with.
	const cell = await timelineFrame.$('#cells .cell');
	assert.ok(cell, 'the check from here left its cells');
	const run = await cell.getAttribute('data-run');
	assert.notEqual(run, opened.compare);
	await cell.click();
	const choice = page.locator('.quick-input-list .monaco-list-row', { hasText: 'Compare with this run' }).first();
	await choice.waitFor({ timeout: 20000 });
	await choice.click();
	// The Compare view (where they differ, or that they are identical), and
	// the timeline's compared run, are the cell's run.
	const compare = await webviewFrame('#compare .summary');
	try {
		await compare.waitForFunction((r) => (document.querySelector('#compare .summary')?.textContent ?? '').includes(r), run.slice(0, 8), { timeout: 30000 });
		await timelineFrame.waitForFunction((r) => document.querySelector('#timeline').dataset.compare === r, run, { timeout: 30000 });
	} catch (e) {
		await shot('failed-check-cell');
		throw e;
	}
	await shot('6c-check-cell-compared');
});

test('the Problems panel lists what the check found on bank.c:26; its code action opens the run at the deciding step', async () => {
	const deciding = Number(opened.deciding);
	const t = Date.now();
	await palette('Focus on Problems View');
	// `rewind lsp`, started by the extension, read the check the session ran.
	const finding = page.locator('.markers-panel .monaco-list-row', { hasText: 'a reschedule after this line' }).first();
	try {
		await finding.waitFor({ timeout: 120000 });
	} catch (e) {
		await shot('failed-problems');
		throw e;
	}
	figures.problemsMs = Date.now() - t;
	const text = await finding.textContent();
	assert.match(text, /\[Ln 26, Col \d+\]/, `the finding is on bank.c:26: ${text}`);
	assert.match(text, new RegExp(`the run ends exited:2 instead of exited:0 \\(check of bank, schedule \\d+, step ${deciding}\\)`), text);
	const rows = await page.locator('.markers-panel .monaco-list-row').allTextContents();
	assert.ok(rows.some((r) => /^bank\.c/.test(r.trim())), `the finding is under bank.c: ${rows.join(' | ')}`);
	assert.equal(rows.filter((r) => /a reschedule after this line/.test(r)).length, 1, rows.join(' | '));
	await shot('7-problems-panel');

	// Double-click: the editor at the line; Ctrl+. offers the code action.
	await finding.dblclick();
	const start = Date.now();
	while ((await cursorLine()) !== 26) {
		assert.ok(Date.now() - start < 30000, 'the editor goes to bank.c:26');
		await new Promise((r) => setTimeout(r, 250));
	}
	// The light bulb on the line says the server offers a fix; Ctrl+. shows it.
	const action = page.locator('.action-widget .monaco-list-row', { hasText: `Open in debugger at step ${deciding}` }).first();
	try {
		await page.locator('.monaco-editor .lightBulbWidget').first().waitFor({ timeout: 30000 });
		for (let tries = 0; ; tries++) {
			await page.keyboard.press('Control+Period');
			try {
				await action.waitFor({ timeout: 10000 });
				break;
			} catch (e) {
				if (tries === 2) throw e;
				await page.keyboard.press('Escape');
			}
		}
	} catch (e) {
		await shot('failed-code-action');
		throw e;
	}
	await shot('7b-code-action');
	const t2 = Date.now();
	await action.click();
	// A new session on the failing run at the step, beside the passing run,
	// with the deciding mark although it was opened by id, not by a check.
	const d = await sessionAt(opened.run, deciding, 'code-action');
	figures.codeActionMs = Date.now() - t2;
	assert.equal(d.compare, opened.compare);
	assert.equal(d.deciding, String(deciding), 'the deciding mark');
	assert.match(d.marks, new RegExp(`deciding step ${deciding}`));
	await shot('7c-opened-from-code-action');
});

test('Swap in the Compare view opens the compared run at the matching step', async () => {
	const deciding = Number(opened.deciding);
	await statusStepIs(deciding, 'the swap starts at the deciding step');
	assert.ok(deciding < Number(opened.firstDifference), 'the deciding step is before the first difference: the same step in both runs');
	await palette('Rewind: Focus on Compare View');
	const compare = await webviewFrame('#compare #swap');
	await compare.waitForFunction((r) => document.querySelector('#compare .summary')?.textContent.includes(`of ${r}`), opened.run.slice(0, 8), { timeout: 30000 });
	await compare.click('#swap');
	const d = await sessionAt(opened.compare, deciding, 'swap');
	assert.equal(d.compare, opened.run, 'the run it came from is the compared one now');
	assert.match(await timelineFrame.textContent('#header'), /exited:0/);
	await shot('8-swapped-to-passing-run');
});

test('Add Bookmark keeps a note at the step, with the run', async () => {
	const step = await statusStep();
	await palette('Rewind: Add Bookmark');
	const input = page.locator('.quick-input-widget input');
	await input.waitFor({ state: 'visible' });
	await input.fill('alice still reads 1000');
	await page.keyboard.press('Enter');
	timelineFrame = await webviewFrame('#timeline');
	await timelineFrame.waitForFunction((m) => document.querySelector('#marks').textContent.includes(m), `bookmark ${step}: alice still reads 1000`, { timeout: 30000 });
	const kept = rewindJson('bookmarks', opened.compare);
	assert.deepEqual(
		kept.map((b) => [b.step, b.note]),
		[[step, 'alice still reads 1000']],
	);
	await shot('9-bookmark');
});

test('Restart Frame forks the run at the step and goes on in the fork', async () => {
	const parent = (await timelineData()).run;
	const step = await statusStep();
	const frame = page.locator('.debug-call-stack .monaco-list-row .stack-frame').first();
	await frame.waitFor({ timeout: 30000 });
	await frame.click({ button: 'right' });
	const item = await menuItemOf('Restart Frame', 'restart-frame');
	const t = Date.now();
	await clickMenuItem(item);
	const d = await forkedAt(parent, step, 'restart-frame', 30000);
	figures.forkMs = Date.now() - t;
	restartFork = d.run;
	// The Runs view shows the fork under its parent.
	const runsView = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Rewind Runs' }) });
	const parentRow = runsView.locator('.monaco-list-row[aria-expanded]', { hasText: parent.slice(0, 8) }).first();
	await parentRow.waitFor({ timeout: 30000 });
	if ((await parentRow.getAttribute('aria-expanded')) !== 'true') {
		await parentRow.locator('.monaco-tl-twistie').click();
	}
	await runsView.locator('.monaco-list-row', { hasText: d.run.slice(0, 8) }).first().waitFor({ timeout: 30000 });
	await shot('10-restart-frame-fork');
});

test('Fork from Here from the palette forks at the step and goes on in the fork', async () => {
	const parent = (await timelineData()).run;
	const step = await statusStep();
	await palette('Rewind: Fork from Here');
	await forkedAt(parent, step, 'fork-from-here', 60000);
	await shot('10b-fork-from-here');
});

test('Open Run in the timeline\'s context menu opens the run picked', async () => {
	timelineFrame = await webviewFrame('#timeline');
	await timelineFrame.click('#timeline', { button: 'right', position: { x: 200, y: 10 } });
	await menuItem('Open Run…', 'timeline-context');
	// The passing run the session was opened beside: not a fork, so it opens at step 0.
	const input = page.locator('.quick-input-widget input');
	await input.waitFor({ state: 'visible' });
	await input.fill(opened.compare.slice(0, 8));
	const choice = page.locator('.quick-input-list .monaco-list-row', { hasText: opened.compare.slice(0, 8) }).first();
	try {
		await choice.waitFor({ timeout: 20000 });
	} catch (e) {
		await shot('failed-open-run-pick');
		throw e;
	}
	await page.keyboard.press('Enter');
	await sessionAt(opened.compare, 0, 'open-run');
	await shot('10c-open-run-from-timeline');
});

test('a link (what rewind open --editor code opens) opens the run at the step', async () => {
	// `rewind open` prints the vscode:// link; code-server's own scheme
	// (its product's urlProtocol) is what its Open URL hands to extensions.
	const printed = rewind('open', opened.run, '10', '--compare', opened.compare);
	const link = /'(vscode:\/\/rewind\.rewind\/open\?[^']+)'/.exec(printed)?.[1];
	assert.ok(link, printed);
	const product = JSON.parse(readFileSync(join(dirname(realpathSync(codeServer)), '..', '..', 'lib', 'vscode', 'product.json'), 'utf8'));
	await palette('Developer: Open URL');
	const input = page.locator('.quick-input-widget input');
	await input.waitFor({ state: 'visible' });
	await input.fill(link.replace(/^vscode:/, `${product.urlProtocol}:`));
	const t = Date.now();
	await page.keyboard.press('Enter');
	// VS Code asks before it hands a link to an extension.
	const allow = page.locator('.monaco-dialog-box', { hasText: "Allow 'Rewind' extension to open this URI?" });
	await allow.waitFor({ timeout: 30000 });
	await shot('11-link-confirmation');
	await allow.locator('.monaco-button', { hasText: /^Open$/ }).click();
	const d = await sessionAt(opened.run, 10, 'uri');
	figures.uriMs = Date.now() - t;
	assert.equal(d.compare, opened.compare);
	await shot('11-opened-by-link');
});

test('opening a .rwd file imports its run and opens it', async () => {
	await page.locator('.activitybar [aria-label^="Explorer"]').first().click();
	const file = page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'write-twice.rwd' }).first();
	await file.waitFor({ timeout: 30000 });
	const t = Date.now();
	await file.click();
	const d = await sessionAt(rwdRun, 0, 'rwd');
	figures.importMs = Date.now() - t;
	assert.match(await timelineFrame.textContent('#header'), /write-twice/);
	assert.equal((await timelineFrame.$$('#cells .cell')).length, 0, 'no check cells of another run');
	const runs = rewindJson('ls').map((r) => r.id);
	assert.ok(runs.includes(rwdRun), 'the run is in the store');
	await shot('12-rwd-imported');
});

test('Export Run in the timeline\'s context menu writes a .rwd that imports elsewhere', async () => {
	const run = (await timelineData()).run;
	const target = join(workspace, `${run}.rwd`);
	await timelineFrame.click('#timeline', { button: 'right', position: { x: 200, y: 10 } });
	await menuItem('Export Run…', 'export');
	// The save dialog (code-server's own) offers the workspace's RUN.rwd,
	// once it has filled the path in.
	const input = page.locator('.quick-input-widget input');
	await input.waitFor({ state: 'visible', timeout: 20000 });
	const start = Date.now();
	while (!(await input.inputValue()).endsWith(`/${run}.rwd`)) {
		assert.ok(Date.now() - start < 20000, `the save dialog offers ${await input.inputValue()}`);
		await new Promise((r) => setTimeout(r, 100));
	}
	assert.equal(await input.inputValue(), target);
	await page.keyboard.press('Enter');
	const done = page.locator('.notifications-toasts', { hasText: `exported run ${run}` }).first();
	try {
		await done.waitFor({ timeout: 30000 });
	} catch (e) {
		await shot('failed-export');
		throw e;
	}
	await shot('13-exported');
	const elsewhere = mkdtempSync(join(tmpdir(), 'rewind-import-'));
	try {
		const said = execFileSync(process.env.REWIND_BIN, ['import', target], { env: { ...process.env, REWIND_HOME: elsewhere } }).toString();
		assert.match(said, new RegExp(run), said);
		assert.match(execFileSync(process.env.REWIND_BIN, ['replay', run], { env: { ...process.env, REWIND_HOME: elsewhere } }).toString(), /identical/);
	} finally {
		rmSync(elsewhere, { recursive: true, force: true });
		rmSync(target, { force: true });
	}
});

test('Remove Run in the Runs view removes a fork with the runs forked from it', async () => {
	assert.ok(restartFork, 'Restart Frame made a fork');
	const below = rewindJson('ls', '--forks-of', restartFork).map((r) => r.id);
	assert.ok(below.length > 0, 'Fork from Here forked the fork');
	const runsView = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Rewind Runs' }) });
	await page.locator('.activitybar [aria-label^="Run and Debug"]').first().click();
	const row = runsView.locator('.monaco-list-row', { hasText: restartFork.slice(0, 8) }).first();
	try {
		await row.waitFor({ timeout: 30000 });
	} catch (e) {
		await shot('failed-remove-row');
		throw e;
	}
	// The runs about to go are replayed first, as every other run is at the end.
	for (const id of [restartFork, ...below]) {
		assert.match(rewind('replay', id), /^identical/, `replay of ${id}`);
	}
	await row.click({ button: 'right' });
	await menuItem('Remove Run', 'remove');
	const dialog = page.locator('.monaco-dialog-box', { hasText: `Remove run ${restartFork} and the runs forked from it?` });
	await dialog.waitFor({ timeout: 20000 });
	await shot('14-remove-confirmation');
	await dialog.locator('.monaco-button', { hasText: /^Remove$/ }).click();
	await row.waitFor({ state: 'detached', timeout: 30000 });
	const left = rewind('ls', '--json');
	for (const id of [restartFork, ...below]) {
		assert.ok(!left.includes(id), `${id} is still in the store`);
	}
	await shot('14-removed');
});
