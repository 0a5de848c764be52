/**
 * The Rewind Runs view: recorded runs newest first (`rewind/runs`), each
 * fork under the run it came from, an icon for how it ended.
 */
import * as vscode from 'vscode';
import type { RunInfo } from './protocol';
import { formatNs, listRuns } from './rewind';

export class RunItem extends vscode.TreeItem {
	constructor(
		public readonly run: RunInfo,
		public readonly forks: RunInfo[],
	) {
		super(
			`${run.name ?? run.program ?? 'run'} ${run.id.slice(0, 8)}`,
			forks.length > 0 ? vscode.TreeItemCollapsibleState.Collapsed : vscode.TreeItemCollapsibleState.None,
		);
		this.id = run.id;
		this.contextValue = 'run';
		const when = new Date(run.created * 1000).toLocaleString();
		this.description = run.fork_of ? `${run.status} · fork at step ${run.fork_of.step}` : `${run.status} · ${run.steps} steps`;
		this.tooltip = new vscode.MarkdownString(
			[
				`**${run.id}** ${run.name ?? ''}`,
				`${run.status}, ${run.steps} steps, ${formatNs(run.virtual_ns)} virtual, ${run.events} events`,
				`recorded ${when}`,
				run.fork_of ? `fork of ${run.fork_of.parent} at step ${run.fork_of.step}` : `\`${run.argv.join(' ')}\``,
			].join('\n\n'),
		);
		this.iconPath = statusIcon(run.status);
		this.command = { command: 'rewind.openRun', title: 'Open Run', arguments: [this] };
	}
}

function statusIcon(status: string): vscode.ThemeIcon {
	if (status === 'exited:0') {
		return new vscode.ThemeIcon('pass', new vscode.ThemeColor('testing.iconPassed'));
	}
	if (status.startsWith('exited:')) {
		return new vscode.ThemeIcon('error', new vscode.ThemeColor('testing.iconFailed'));
	}
	if (status.startsWith('killed')) {
		return new vscode.ThemeIcon('zap', new vscode.ThemeColor('testing.iconFailed'));
	}
	if (status === 'deadlocked') {
		return new vscode.ThemeIcon('lock', new vscode.ThemeColor('testing.iconErrored'));
	}
	return new vscode.ThemeIcon('watch', new vscode.ThemeColor('testing.iconQueued'));
}

export class RunsProvider implements vscode.TreeDataProvider<RunItem> {
	private readonly changed = new vscode.EventEmitter<RunItem | undefined>();
	readonly onDidChangeTreeData = this.changed.event;
	private runs: RunInfo[] | undefined;
	private error: string | undefined;

	refresh(): void {
		this.runs = undefined;
		this.changed.fire(undefined);
	}

	getTreeItem(item: RunItem): vscode.TreeItem {
		return item;
	}

	async getChildren(parent?: RunItem): Promise<RunItem[]> {
		if (!this.runs) {
			try {
				this.runs = await listRuns();
				this.error = undefined;
			} catch (e) {
				this.runs = [];
				this.error = e instanceof Error ? e.message : String(e);
				void vscode.window.showWarningMessage(`Rewind: cannot list runs: ${this.error}`);
			}
		}
		const all = this.runs;
		const ids = new Set(all.map((r) => r.id));
		const forksOf = (id: string) => all.filter((r) => r.fork_of?.parent === id);
		const items = (list: RunInfo[]) => list.map((r) => new RunItem(r, forksOf(r.id)));
		if (!parent) {
			// Top level: runs that are not forks of a run still in the store.
			return items(all.filter((r) => !r.fork_of || !ids.has(r.fork_of.parent)));
		}
		return items(parent.forks);
	}

	/** A run by id, from the last listing. */
	find(id: string): RunInfo | undefined {
		return this.runs?.find((r) => r.id === id);
	}
}
