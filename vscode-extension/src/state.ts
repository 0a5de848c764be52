/**
 * What the views show of the active `rewind` debug session: its run's
 * timeline, the position, the lanes and the last check's results, kept from
 * the adapter's custom events so a view opened later still shows them.
 */
import * as vscode from 'vscode';
import type { Bookmark, CheckResult, CheckResultEvent, Forked, Lanes, Position, Timeline } from './protocol';

export class RewindState implements vscode.Disposable {
	session: vscode.DebugSession | undefined;
	timeline: Timeline | undefined;
	position: Position | undefined;
	lanes: Lanes | undefined;
	check: { from: number; results: CheckResult[]; done: boolean } | undefined;
	/** The progress id of the running `rewind/check`, from its `progressStart`. */
	checkProgressId: string | undefined;

	private readonly changed = new vscode.EventEmitter<'timeline' | 'position' | 'lanes' | 'check' | 'end'>();
	readonly onDidChange = this.changed.event;
	private readonly forked = new vscode.EventEmitter<Forked>();
	readonly onDidFork = this.forked.event;
	private readonly disposables: vscode.Disposable[] = [this.changed, this.forked];

	constructor() {
		this.disposables.push(
			vscode.debug.onDidReceiveDebugSessionCustomEvent((e) => this.onCustomEvent(e)),
			vscode.debug.onDidChangeActiveDebugSession((s) => {
				if (s?.type === 'rewind' && s !== this.session) {
					this.session = s;
				}
			}),
			vscode.debug.onDidTerminateDebugSession((s) => {
				if (s === this.session) {
					this.session = undefined;
					this.changed.fire('end');
				}
			}),
			vscode.debug.registerDebugAdapterTrackerFactory('rewind', {
				createDebugAdapterTracker: () => ({
					onDidSendMessage: (m: { type?: string; event?: string; body?: { progressId?: string } }) => {
						if (m.type === 'event' && m.event === 'progressStart' && m.body?.progressId?.startsWith('check-')) {
							this.checkProgressId = m.body.progressId;
						}
					},
				}),
			}),
		);
	}

	/** The active `rewind` session, or an error a command can show. */
	requireSession(): vscode.DebugSession {
		const s = vscode.debug.activeDebugSession;
		if (s?.type === 'rewind') {
			return s;
		}
		if (this.session) {
			return this.session;
		}
		throw new Error('No Rewind debug session: open a run first (Rewind: Open Run…).');
	}

	private onCustomEvent(e: vscode.DebugSessionCustomEvent): void {
		if (e.session.type !== 'rewind') {
			return;
		}
		this.session = e.session;
		switch (e.event) {
			case 'rewind/timeline': {
				const timeline = e.body as Timeline;
				if (this.timeline?.run !== timeline.run && this.check?.done) {
					// A check's results belong to the run it was made from.
					this.check = undefined;
				}
				this.timeline = timeline;
				this.lanes = undefined;
				this.changed.fire('timeline');
				void this.refreshLanes();
				break;
			}
			case 'rewind/position':
				this.position = e.body as Position;
				this.changed.fire('position');
				break;
			case 'rewind/checkResult': {
				const r = (e.body as CheckResultEvent).result;
				if (this.check && !this.check.done) {
					this.check.results.push(r);
					this.changed.fire('check');
				}
				break;
			}
			case 'rewind/forked':
				this.forked.fire(e.body as Forked);
				break;
		}
	}

	/** The whole run's lanes (the webview asks for windows as it zooms). */
	async refreshLanes(): Promise<void> {
		const s = this.session;
		if (!s) {
			return;
		}
		try {
			this.lanes = (await s.customRequest('rewind/lanes', { max: 500 })) as Lanes;
			this.changed.fire('lanes');
		} catch {
			// The session ended meanwhile; the next timeline asks again.
		}
	}

	beginCheck(from: number): void {
		this.check = { from, results: [], done: false };
		this.checkProgressId = undefined;
		this.changed.fire('check');
	}

	endCheck(results: CheckResult[] | undefined): void {
		if (this.check) {
			if (results) {
				this.check.results = results;
			}
			this.check.done = true;
			this.changed.fire('check');
		}
	}

	setBookmarks(bookmarks: Bookmark[]): void {
		if (this.timeline) {
			this.timeline.bookmarks = bookmarks;
			this.changed.fire('timeline');
		}
	}

	setCompare(compare: NonNullable<Timeline['compare']>): void {
		if (this.timeline) {
			this.timeline.compare = compare;
			this.changed.fire('timeline');
		}
	}

	dispose(): void {
		this.disposables.forEach((d) => d.dispose());
	}
}
