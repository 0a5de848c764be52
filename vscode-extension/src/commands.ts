/**
 * The commands: open a run (also what the language server's code actions
 * and the URI handler call), check and fork from here, compare, bookmarks,
 * go to step, export, import and remove.
 */
import * as vscode from 'vscode';
import type { CompareViewProvider } from './compareView';
import type { BookmarksReply, CheckReply, Comparison, Forked } from './protocol';
import { describeRun, listRuns, runCliOk } from './rewind';
import { RunItem, type RunsProvider } from './runsView';
import type { RewindState } from './state';

/** The one argument of `rewind.open` (the contract with the language server). */
export interface OpenArgs {
	run: string;
	step?: number;
	compare?: string;
}

export class Commands {
	constructor(
		private readonly state: RewindState,
		private readonly runs: RunsProvider,
		private readonly compare: CompareViewProvider,
	) {}

	register(): vscode.Disposable[] {
		const wrap =
			<A extends unknown[]>(f: (...a: A) => Promise<unknown>) =>
			async (...a: A) => {
				try {
					await f(...a);
				} catch (e) {
					void vscode.window.showErrorMessage(`Rewind: ${e instanceof Error ? e.message : String(e)}`);
				}
			};
		return [
			vscode.commands.registerCommand('rewind.open', wrap((a: OpenArgs) => this.open(a))),
			vscode.commands.registerCommand('rewind.openRun', wrap((item?: RunItem) => this.openRun(item))),
			vscode.commands.registerCommand('rewind.checkFromHere', wrap(() => this.checkFromHere())),
			vscode.commands.registerCommand('rewind.forkFromHere', wrap(() => this.forkFromHere())),
			vscode.commands.registerCommand('rewind.compareWith', wrap((run?: string) => this.compareWith(run))),
			vscode.commands.registerCommand('rewind.swapCompared', wrap(() => this.swapCompared())),
			vscode.commands.registerCommand('rewind.addBookmark', wrap((note?: string) => this.addBookmark(note))),
			vscode.commands.registerCommand('rewind.gotoStep', wrap((step?: number) => this.gotoStep(step))),
			vscode.commands.registerCommand('rewind.exportRun', wrap((item?: RunItem) => this.exportRun(item))),
			vscode.commands.registerCommand('rewind.importRun', wrap((file?: vscode.Uri) => this.importRun(file))),
			vscode.commands.registerCommand('rewind.removeRun', wrap((item?: RunItem) => this.removeRun(item))),
			vscode.commands.registerCommand('rewind.refreshRuns', () => this.runs.refresh()),
		];
	}

	/** Opens `run` at `step` (beside `compare`) as a new `rewind` debug session. */
	async open(a: OpenArgs): Promise<void> {
		if (!a || typeof a.run !== 'string' || a.run === '') {
			throw new Error('rewind.open needs {"run": ID, "step": N?, "compare": ID?}');
		}
		const step = a.step === undefined || a.step === null ? undefined : Number(a.step);
		if (step !== undefined && (!Number.isInteger(step) || step < 0)) {
			throw new Error(`rewind.open: step ${String(a.step)} is not a step`);
		}
		for (const s of [this.state.session, vscode.debug.activeDebugSession]) {
			if (s?.type === 'rewind') {
				await vscode.debug.stopDebugging(s);
			}
		}
		const config: vscode.DebugConfiguration = {
			type: 'rewind',
			request: 'launch',
			name: `Rewind: ${a.run.slice(0, 8)}${step !== undefined ? ` at step ${step}` : ''}`,
			run: a.run,
		};
		if (step !== undefined) {
			config.step = step;
		}
		if (a.compare) {
			config.compare = a.compare;
		}
		const folder = vscode.workspace.workspaceFolders?.[0];
		if (!(await vscode.debug.startDebugging(folder, config))) {
			throw new Error(`could not start a debug session on run ${a.run}`);
		}
	}

	private async openRun(item?: RunItem): Promise<void> {
		if (item instanceof RunItem) {
			const f = item.run.fork_of;
			await this.open(f ? { run: item.run.id, step: f.step, compare: f.parent } : { run: item.run.id });
			return;
		}
		const runs = await listRuns(100);
		const pick = await vscode.window.showQuickPick(
			runs.map((r) => ({ label: describeRun(r), description: `${r.steps} steps`, detail: r.argv.join(' '), run: r })),
			{ placeHolder: 'A recorded run to open' },
		);
		if (pick) {
			const f = pick.run.fork_of;
			await this.open(f ? { run: pick.run.id, step: f.step, compare: f.parent } : { run: pick.run.id });
		}
	}

	private async checkFromHere(): Promise<void> {
		const session = this.state.requireSession();
		const from = this.state.position?.step ?? 0;
		const schedules = vscode.workspace.getConfiguration('rewind').get<number>('checkSchedules', 16);
		this.state.beginCheck(from);
		void vscode.commands.executeCommand('rewind.timeline.focus');
		const body = await vscode.window.withProgress(
			{ location: vscode.ProgressLocation.Notification, title: `Rewind: checking ${schedules} schedules from step ${from}`, cancellable: true },
			async (progress, token) => {
				token.onCancellationRequested(() => {
					const progressId = this.state.checkProgressId;
					if (progressId) {
						void session.customRequest('cancel', { progressId });
					}
				});
				const sub = this.state.onDidChange((what) => {
					if (what === 'check' && this.state.check) {
						const r = this.state.check.results;
						const last = r[r.length - 1];
						progress.report({ increment: 100 / schedules, message: last ? `${last.label}: ${last.status}` : undefined });
					}
				});
				try {
					return (await session.customRequest('rewind/check', { from, schedules })) as CheckReply;
				} finally {
					sub.dispose();
				}
			},
		);
		this.state.endCheck(body.results);
		this.runs.refresh();
		const differ = body.results.filter((r) => !r.sameEnd).length;
		void vscode.window.showInformationMessage(
			`Rewind: ${body.results.length} schedules from step ${from}${body.cancelled ? ' (cancelled)' : ''}: ${differ} ended differently. Pick a cell in the Timeline to compare or open its run.`,
		);
	}

	/** What a check cell offers: compare with its run, or open it. */
	async pickCheckRun(run: string): Promise<void> {
		const current = this.state.timeline?.run;
		const step = this.state.check?.from;
		const pick = await vscode.window.showQuickPick(
			[
				{ label: 'Compare with this run', id: 'compare' },
				{ label: 'Open this run', id: 'open' },
			],
			{ placeHolder: `Run ${run.slice(0, 8)}` },
		);
		if (pick?.id === 'compare') {
			await this.compareWith(run);
		} else if (pick?.id === 'open') {
			await this.open({ run, step, compare: current });
		}
	}

	private async forkFromHere(): Promise<void> {
		const session = this.state.requireSession();
		const f = (await vscode.window.withProgress(
			{ location: vscode.ProgressLocation.Notification, title: `Rewind: forking at step ${this.state.position?.step ?? 0}` },
			() => session.customRequest('rewind/fork', { open: true }),
		)) as Forked;
		this.runs.refresh();
		void vscode.window.showInformationMessage(
			`Rewind: fork ${f.run.slice(0, 8)} of ${f.parent.slice(0, 8)} at step ${f.step}: ${f.status}, ${f.steps} steps${f.firstDifference !== null ? `, first difference at step ${f.firstDifference}` : ', identical so far'}.`,
		);
	}

	private async compareWith(run?: string): Promise<void> {
		this.state.requireSession();
		if (!run) {
			const current = this.state.timeline?.run;
			const runs = (await listRuns(100)).filter((r) => r.id !== current);
			const pick = await vscode.window.showQuickPick(
				runs.map((r) => ({ label: describeRun(r), description: `${r.steps} steps`, run: r.id })),
				{ placeHolder: 'Compare with which run?' },
			);
			if (!pick) {
				return;
			}
			run = pick.run;
		}
		await this.compare.refresh(run);
		const c: Comparison | undefined = this.compare.comparison;
		if (c && this.state.timeline) {
			this.state.setCompare({ run: c.right, identical: c.identical, step: c.leftStep ?? null, otherStep: c.rightStep ?? null });
			await this.state.refreshLanes();
		}
		await vscode.commands.executeCommand('rewind.compare.focus');
	}

	/** Opens the compared run at the step matching the position. */
	private async swapCompared(): Promise<void> {
		const t = this.state.timeline;
		const c = t?.compare;
		if (!t || !c) {
			throw new Error('this run is not compared with another');
		}
		const pos = this.state.position?.step ?? 0;
		let step = pos;
		if (!c.identical && c.step !== null && c.otherStep !== null && pos >= c.step) {
			step = c.otherStep + (pos - c.step);
		}
		await this.open({ run: c.run, step, compare: t.run });
	}

	private async addBookmark(note?: string): Promise<void> {
		const session = this.state.requireSession();
		const step = this.state.position?.step ?? 0;
		note ??= await vscode.window.showInputBox({ prompt: `A bookmark at step ${step}`, placeHolder: 'what happens here' });
		if (!note) {
			return;
		}
		const r = (await session.customRequest('rewind/bookmark', { action: 'add', step, note })) as BookmarksReply;
		this.state.setBookmarks(r.bookmarks);
	}

	private async gotoStep(step?: number): Promise<void> {
		const session = this.state.requireSession();
		if (step === undefined) {
			const steps = this.state.timeline?.steps ?? 0;
			const text = await vscode.window.showInputBox({
				prompt: `Go to step (0 to ${steps})`,
				validateInput: (v) => (/^\d+$/.test(v.trim()) && Number(v) <= steps ? undefined : `a step from 0 to ${steps}`),
			});
			if (text === undefined) {
				return;
			}
			step = Number(text.trim());
		}
		await session.customRequest('rewind/goto', { step });
	}

	private async exportRun(item?: RunItem): Promise<void> {
		const id = item instanceof RunItem ? item.run.id : this.state.timeline?.run;
		if (!id) {
			throw new Error('no run to export: pick one in the Rewind Runs view');
		}
		const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
		const target = await vscode.window.showSaveDialog({
			defaultUri: folder ? vscode.Uri.joinPath(folder, `${id}.rwd`) : undefined,
			filters: { 'Rewind run': ['rwd'] },
		});
		if (!target) {
			return;
		}
		const r = await runCliOk(['export', id, '--replayable', '-o', target.fsPath]);
		void vscode.window.showInformationMessage(`Rewind: ${(r.stdout + r.stderr).trim().split('\n')[0]}`);
	}

	/** Imports a .rwd file and opens its run. */
	async importRun(file?: vscode.Uri): Promise<string | undefined> {
		if (!file) {
			const picked = await vscode.window.showOpenDialog({ filters: { 'Rewind run': ['rwd'] }, canSelectMany: false });
			file = picked?.[0];
			if (!file) {
				return undefined;
			}
		}
		const r = await runCliOk(['import', file.fsPath]);
		const m = /run ([0-9a-f]{16})/.exec(r.stdout + r.stderr);
		if (!m) {
			throw new Error(`rewind import said nothing of a run: ${r.stdout.trim()}`);
		}
		this.runs.refresh();
		await this.open({ run: m[1] });
		return (r.stdout + r.stderr).trim();
	}

	private async removeRun(item?: RunItem): Promise<void> {
		if (!(item instanceof RunItem)) {
			return;
		}
		const forks = item.forks.length;
		const ok = await vscode.window.showWarningMessage(
			`Remove run ${item.run.id}${forks ? ` and the runs forked from it` : ''}?`,
			{ modal: true },
			'Remove',
		);
		if (ok !== 'Remove') {
			return;
		}
		await runCliOk(['remove', item.run.id]);
		this.runs.refresh();
	}
}
