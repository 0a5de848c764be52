/**
 * The Timeline webview: a scrubber over the run's steps (event ticks by
 * kind, bookmarks, perturbations, the deciding step dashed, the first
 * difference solid, the playhead) and below it the thread lanes of this run
 * and of the compared run, drawn on one canvas. Ctrl+wheel zooms around the
 * pointer, Shift+wheel pans, a click asks the extension for `rewind/goto`.
 */
import type { CheckResult, FromTimeline, Lanes, Position, Timeline, ToTimeline, RunEvent } from '../protocol';

const vscode = acquireVsCodeApi();
const post = (m: FromTimeline) => vscode.postMessage(m);

const GUTTER = 150;
const RULER = 34;
const LANE = 16;
const LANE_GAP = 3;
const SECTION = 18;
const RIGHT = 10;

interface View {
	from: number;
	to: number;
}

let timeline: Timeline | undefined;
let position: Position | undefined;
/** The whole run's lanes, and the last window asked for while zoomed. */
let baseLanes: Lanes | undefined;
let windowLanes: Lanes | undefined;
let view: View = { from: 0, to: 1 };
let check: { from: number; results: CheckResult[]; done: boolean } | undefined;
let lanesTimer: ReturnType<typeof setTimeout> | undefined;
/** Each kind's event steps, sorted, for drawing a window quickly. */
let ticks = new Map<string, number[]>();

const canvas = document.getElementById('timeline') as HTMLCanvasElement;
const header = document.getElementById('header') as HTMLElement;
const marks = document.getElementById('marks') as HTMLElement;
const cells = document.getElementById('cells') as HTMLElement;
const checkTitle = document.getElementById('check-title') as HTMLElement;
const tooltip = document.getElementById('tooltip') as HTMLElement;

function css(name: string, fallback: string): string {
	const v = getComputedStyle(document.body).getPropertyValue(name).trim();
	return v !== '' ? v : fallback;
}

function kindColor(kind: string): string {
	switch (kind) {
		case 'threadStart':
			return css('--vscode-charts-green', '#89d185');
		case 'threadExit':
			return css('--vscode-descriptionForeground', '#999');
		case 'signal':
			return css('--vscode-charts-red', '#f14c4c');
		case 'exit':
			return css('--vscode-charts-purple', '#b180d7');
		case 'sdk':
			return css('--vscode-charts-blue', '#3794ff');
		default:
			return css('--vscode-charts-foreground', '#ccc');
	}
}

function steps(): number {
	return Math.max(timeline?.steps ?? 1, 1);
}

function firstDifference(): number | null {
	const c = timeline?.compare;
	return c && !c.identical ? c.step : null;
}

/** The x of a step in the canvas' CSS pixels. */
function xOf(step: number, width: number): number {
	return GUTTER + ((step - view.from) / (view.to - view.from)) * (width - GUTTER - RIGHT);
}

function stepAt(x: number, width: number): number {
	const s = view.from + ((x - GUTTER) / (width - GUTTER - RIGHT)) * (view.to - view.from);
	return Math.max(0, Math.min(steps(), Math.round(s)));
}

/** The lanes to draw: the window's when it covers the view, else the whole run's. */
function lanesForView(): Lanes | undefined {
	if (windowLanes && windowLanes.run === timeline?.run && windowLanes.from <= view.from && windowLanes.to >= view.to) {
		return windowLanes;
	}
	return baseLanes;
}

function lowerBound(a: number[], v: number): number {
	let lo = 0;
	let hi = a.length;
	while (lo < hi) {
		const mid = (lo + hi) >> 1;
		if (a[mid] < v) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	return lo;
}

function render(): void {
	const t0 = performance.now();
	const lanes = lanesForView();
	const rows = (lanes?.threads.length ?? 0) + (lanes?.compare ? lanes.compare.threads.length + 1 : 0);
	const width = Math.max(canvas.parentElement?.clientWidth ?? 600, GUTTER + 100);
	const height = RULER + SECTION + rows * (LANE + LANE_GAP) + 8;
	const dpr = window.devicePixelRatio || 1;
	if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
		canvas.width = Math.round(width * dpr);
		canvas.height = Math.round(height * dpr);
		canvas.style.width = `${width}px`;
		canvas.style.height = `${height}px`;
	}
	const g = canvas.getContext('2d');
	if (!g) {
		return;
	}
	g.setTransform(dpr, 0, 0, dpr, 0, 0);
	const fg = css('--vscode-editor-foreground', '#ccc');
	const muted = css('--vscode-descriptionForeground', '#999');
	const font = css('--vscode-font-family', 'sans-serif');
	g.clearRect(0, 0, width, height);
	g.font = `11px ${font}`;
	g.textBaseline = 'middle';

	// The ruler: a baseline, step labels, and the events of interest as ticks.
	g.strokeStyle = muted;
	g.lineWidth = 1;
	g.beginPath();
	g.moveTo(GUTTER, RULER - 6.5);
	g.lineTo(width, RULER - 6.5);
	g.stroke();
	g.fillStyle = muted;
	const span = view.to - view.from;
	const every = niceStep(span / Math.max((width - GUTTER) / 90, 1));
	for (let s = Math.ceil(view.from / every) * every; s <= view.to; s += every) {
		const x = xOf(s, width);
		g.fillRect(x, RULER - 9, 1, 5);
		g.fillText(String(s), x + 2, 8);
	}
	g.fillText(timeline ? `${timeline.name || 'run'} ${timeline.run.slice(0, 8)}` : 'no run', 6, 8);
	for (const [kind, list] of ticks) {
		g.fillStyle = kindColor(kind);
		let lastX = -1;
		for (let i = lowerBound(list, Math.floor(view.from)); i < list.length && list[i] <= view.to; i++) {
			const x = Math.round(xOf(list[i], width));
			if (x !== lastX) {
				g.fillRect(x, RULER - 20, 2, 12);
				lastX = x;
			}
		}
	}
	for (const p of timeline?.perturbations ?? []) {
		const x = xOf(p.step, width);
		g.fillStyle = css('--vscode-charts-yellow', '#cca700');
		g.beginPath();
		g.moveTo(x, RULER - 24);
		g.lineTo(x + 4, RULER - 20);
		g.lineTo(x, RULER - 16);
		g.lineTo(x - 4, RULER - 20);
		g.fill();
	}
	for (const b of timeline?.bookmarks ?? []) {
		const x = xOf(b.step, width);
		g.fillStyle = css('--vscode-charts-blue', '#3794ff');
		g.beginPath();
		g.moveTo(x, 14);
		g.lineTo(x + 7, 17);
		g.lineTo(x, 20);
		g.fill();
		g.fillRect(x, 14, 1, RULER - 14);
	}

	// The lanes: a row per thread, a bar wherever it held the CPU.
	let y = RULER + 4;
	const drawLanes = (l: Lanes, title: string, color: string) => {
		g.fillStyle = muted;
		g.fillText(title + (l.coarse ? ' (coarse)' : ''), 6, y + 6);
		y += SECTION - 6;
		for (const th of l.threads) {
			g.fillStyle = fg;
			g.fillText(th.name.length > 22 ? th.name.slice(0, 21) + '…' : th.name, 6, y + LANE / 2);
			g.fillStyle = color;
			for (const [a, b] of th.stretches) {
				if (b < view.from || a > view.to) {
					continue;
				}
				const x0 = Math.max(xOf(a, width), GUTTER);
				const x1 = Math.min(xOf(b + 1, width), width);
				g.fillRect(x0, y + 2, Math.max(x1 - x0 - 1, 1), LANE - 4);
			}
			y += LANE + LANE_GAP;
		}
	};
	if (lanes) {
		drawLanes(lanes, 'threads', css('--vscode-charts-blue', '#3794ff'));
		if (lanes.compare) {
			y += 2;
			drawLanes(lanes.compare, `compared: ${lanes.compare.run.slice(0, 8)}`, css('--vscode-charts-orange', '#d18616'));
		}
	}

	// The marks across ruler and lanes.
	const vline = (step: number, color: string, dash: number[], w: number) => {
		if (step < view.from || step > view.to) {
			return;
		}
		const x = Math.round(xOf(step, width)) + 0.5;
		g.strokeStyle = color;
		g.lineWidth = w;
		g.setLineDash(dash);
		g.beginPath();
		g.moveTo(x, RULER - 22);
		g.lineTo(x, height);
		g.stroke();
		g.setLineDash([]);
	};
	if (timeline?.deciding != null) {
		vline(timeline.deciding, css('--vscode-charts-orange', '#d18616'), [4, 3], 1.5);
	}
	const diff = firstDifference();
	if (diff != null) {
		vline(diff, css('--vscode-charts-red', '#f14c4c'), [], 1.5);
	}
	if (position) {
		vline(position.step, css('--vscode-focusBorder', '#007fd4'), [], 2.5);
	}

	const ms = performance.now() - t0;
	canvas.dataset.renderMs = ms.toFixed(2);
	canvas.dataset.viewFrom = String(view.from);
	canvas.dataset.viewTo = String(view.to);
	canvas.dataset.run = timeline?.run ?? '';
	canvas.dataset.compare = timeline?.compare?.run ?? '';
	canvas.dataset.playhead = position ? String(position.step) : '';
	canvas.dataset.deciding = timeline?.deciding != null ? String(timeline.deciding) : '';
	canvas.dataset.firstDifference = diff != null ? String(diff) : '';
	canvas.dataset.lanes = lanes ? String(lanes.threads.length) : '0';
	canvas.dataset.compareLanes = lanes?.compare ? String(lanes.compare.threads.length) : '0';
}

/** 1, 2, 5, 10, 20, 50... at least `raw`. */
function niceStep(raw: number): number {
	const p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
	for (const m of [1, 2, 5, 10]) {
		if (m * p >= raw) {
			return m * p;
		}
	}
	return 10 * p;
}

function describe(): void {
	if (!timeline) {
		header.textContent = 'No Rewind run is open. Open one from the Rewind Runs view or with Rewind: Open Run….';
		marks.textContent = '';
		return;
	}
	const parts = [`${timeline.name || 'run'} ${timeline.run}`, timeline.status];
	if (position) {
		parts.push(`step ${position.step} / ${timeline.steps}`);
		if (position.thread) {
			parts.push(position.thread.name);
		}
	} else {
		parts.push(`${timeline.steps} steps`);
	}
	header.textContent = parts.join(' · ');
	const m: string[] = [];
	if (timeline.deciding != null) {
		m.push(`deciding step ${timeline.deciding}`);
	}
	const c = timeline.compare;
	if (c) {
		m.push(c.identical ? `identical to ${c.run.slice(0, 8)}` : `first difference at step ${c.step} from ${c.run.slice(0, 8)}`);
	}
	if (timeline.forkOf) {
		m.push(`fork of ${timeline.forkOf.parent.slice(0, 8)} at step ${timeline.forkOf.step}`);
	}
	for (const b of timeline.bookmarks) {
		m.push(`bookmark ${b.step}: ${b.note}`);
	}
	for (const p of timeline.perturbations) {
		m.push(`perturbation ${p.step}: ${p.what}`);
	}
	marks.textContent = m.join(' · ');
}

function renderCheck(): void {
	cells.replaceChildren();
	if (!check) {
		checkTitle.textContent = '';
		return;
	}
	const differing = check.results.filter((r) => !r.sameEnd).length;
	checkTitle.textContent = `Check from step ${check.from}: ${check.results.length} schedules${check.done ? '' : ' so far'}, ${differing} ended differently`;
	for (const r of check.results) {
		const b = document.createElement('button');
		b.className = `cell ${r.sameEnd ? 'same' : 'differs'}`;
		b.textContent = String(r.index);
		b.title = `${r.label}: ${r.status}, ${r.steps} steps, run ${r.run}${r.violations.map((v) => `\n${v.property}: ${v.why}`).join('')}`;
		b.dataset.run = r.run;
		b.addEventListener('click', () => post({ type: 'pickCheck', run: r.run }));
		cells.appendChild(b);
	}
}

/** Asks for the lanes of the view once zooming settles. */
function askLanes(): void {
	if (lanesTimer) {
		clearTimeout(lanesTimer);
	}
	lanesTimer = setTimeout(() => {
		if (!timeline) {
			return;
		}
		const whole = view.from <= 0 && view.to >= steps();
		if (whole) {
			windowLanes = undefined;
			return;
		}
		const width = canvas.clientWidth - GUTTER;
		post({ type: 'lanes', from: Math.max(0, Math.floor(view.from)), to: Math.min(steps(), Math.ceil(view.to)), max: Math.max(50, Math.round(width / 2)) });
	}, 120);
}

/** Moves the view so it keeps its span and shows the playhead. */
function keepPlayhead(): void {
	if (!position) {
		return;
	}
	const span = view.to - view.from;
	const p = position.step;
	if (p < view.from || p > view.to) {
		view = { from: p - span / 2, to: p + span / 2 };
	}
	clampView();
}

function clampView(): void {
	const n = steps();
	const span = Math.min(Math.max(view.to - view.from, Math.min(10, n)), n);
	let from = Math.max(0, Math.min(view.from, n - span));
	if (!Number.isFinite(from)) {
		from = 0;
	}
	view = { from, to: from + span };
}

canvas.addEventListener(
	'wheel',
	(e) => {
		if (!timeline) {
			return;
		}
		const width = canvas.clientWidth;
		const span = view.to - view.from;
		if (e.ctrlKey || e.metaKey) {
			e.preventDefault();
			const anchor = Math.max(view.from, Math.min(view.to, view.from + ((e.offsetX - GUTTER) / (width - GUTTER - RIGHT)) * span));
			const factor = Math.exp(e.deltaY * 0.002);
			const newSpan = span * factor;
			const ratio = (anchor - view.from) / span;
			view = { from: anchor - ratio * newSpan, to: anchor - ratio * newSpan + newSpan };
			clampView();
			keepPlayhead();
			render();
			askLanes();
		} else if (e.shiftKey) {
			e.preventDefault();
			const delta = (e.deltaY !== 0 ? e.deltaY : e.deltaX) * (span / (width - GUTTER - RIGHT));
			view = { from: view.from + delta, to: view.to + delta };
			clampView();
			render();
			askLanes();
		}
	},
	{ passive: false },
);

canvas.addEventListener('click', (e) => {
	if (!timeline || e.offsetX < GUTTER) {
		return;
	}
	post({ type: 'goto', step: stepAt(e.offsetX, canvas.clientWidth) });
});

canvas.addEventListener('mousemove', (e) => {
	if (!timeline || e.offsetX < GUTTER) {
		tooltip.textContent = '';
		return;
	}
	const s = stepAt(e.offsetX, canvas.clientWidth);
	const near = timeline.events.filter((ev: RunEvent) => ev.step === s).map((ev) => ev.text);
	tooltip.textContent = `step ${s}${near.length ? ': ' + near.join('; ') : ''}`;
});

window.addEventListener('resize', () => render());
new MutationObserver(() => render()).observe(document.body, { attributes: true, attributeFilter: ['class'] });

window.addEventListener('message', (e: MessageEvent<ToTimeline>) => {
	const m = e.data;
	switch (m.type) {
		case 'timeline': {
			const same = timeline?.run === m.timeline.run;
			timeline = m.timeline;
			ticks = new Map();
			for (const ev of timeline.events) {
				const list = ticks.get(ev.kind) ?? [];
				list.push(ev.step);
				ticks.set(ev.kind, list);
			}
			if (!same) {
				view = { from: 0, to: steps() };
				baseLanes = undefined;
				windowLanes = undefined;
				// A check's cells belong to the run it was made from.
				check = undefined;
				renderCheck();
			}
			clampView();
			break;
		}
		case 'lanes':
			if (m.lanes.from <= 0 && m.lanes.to >= steps()) {
				baseLanes = m.lanes;
			} else {
				windowLanes = m.lanes;
			}
			break;
		case 'position':
			position = m.position;
			keepPlayhead();
			break;
		case 'checkResults':
			check = { from: m.from, results: m.results, done: m.done };
			renderCheck();
			break;
		case 'clear':
			timeline = undefined;
			position = undefined;
			baseLanes = undefined;
			windowLanes = undefined;
			check = undefined;
			renderCheck();
			break;
	}
	describe();
	render();
});

describe();
render();
post({ type: 'ready' });
