/**
 * The Compare webview: the last events both runs shared, then each run's
 * next events side by side, what differs highlighted.
 */
import type { Comparison, RunEvent } from '../protocol';

const vscode = acquireVsCodeApi();
const root = document.getElementById('compare') as HTMLElement;

function eventText(e: RunEvent | undefined): string {
	return e ? `${e.step}  ${e.pid}/${e.tid}  ${e.text}` : '';
}

function cell(tag: string, text: string, cls?: string): HTMLElement {
	const c = document.createElement(tag);
	c.textContent = text;
	if (cls) {
		c.className = cls;
	}
	return c;
}

function show(c: Comparison | undefined): void {
	root.replaceChildren();
	if (!c) {
		root.appendChild(cell('p', 'Nothing to compare: open a run beside another (a failing run from a check, a fork) or use Rewind: Compare with Run….', 'muted'));
		return;
	}
	const head = document.createElement('div');
	head.className = 'head';
	head.appendChild(cell('span', c.identical ? `${c.left.slice(0, 8)} and ${c.right.slice(0, 8)} are identical (${c.events} events)` : `first difference: step ${c.leftStep ?? '–'} of ${c.left.slice(0, 8)}, step ${c.rightStep ?? '–'} of ${c.right.slice(0, 8)}`, 'summary'));
	const swap = cell('button', 'Swap to the other run');
	swap.id = 'swap';
	swap.addEventListener('click', () => vscode.postMessage({ type: 'swap' }));
	head.appendChild(swap);
	root.appendChild(head);
	if (c.identical) {
		return;
	}
	const table = document.createElement('table');
	const hr = document.createElement('tr');
	hr.appendChild(cell('th', `this run ${c.left.slice(0, 8)}`));
	hr.appendChild(cell('th', `compared ${c.right.slice(0, 8)}`));
	table.appendChild(hr);
	for (const e of c.shared ?? []) {
		const tr = document.createElement('tr');
		tr.className = 'shared';
		const td = cell('td', eventText(e)) as HTMLTableCellElement;
		td.colSpan = 2;
		tr.appendChild(td);
		table.appendChild(tr);
	}
	const left = c.leftEvents ?? [];
	const right = c.rightEvents ?? [];
	for (let i = 0; i < Math.max(left.length, right.length); i++) {
		const l = left[i];
		const r = right[i];
		const differs = !l || !r || l.tid !== r.tid || l.kind !== r.kind || l.text !== r.text;
		const tr = document.createElement('tr');
		tr.className = differs ? 'differs' : 'same';
		tr.appendChild(cell('td', eventText(l)));
		tr.appendChild(cell('td', eventText(r)));
		table.appendChild(tr);
	}
	root.appendChild(table);
}

window.addEventListener('message', (e: MessageEvent<{ type: 'comparison'; comparison: Comparison | undefined }>) => {
	if (e.data.type === 'comparison') {
		show(e.data.comparison);
	}
});
show(undefined);
vscode.postMessage({ type: 'ready' });
