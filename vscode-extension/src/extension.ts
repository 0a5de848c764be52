/**
 * Rewind for VS Code: recorded runs as reversible debug sessions of the
 * `rewind` debug type, with a Timeline (event ticks, marks, thread lanes),
 * a Compare view, a Runs view and the commands around them; and the
 * language server (`rewind lsp`) for C, C++ and Rust documents.
 */
import * as vscode from 'vscode';
import { Commands, type OpenArgs } from './commands';
import { CompareViewProvider } from './compareView';
import { RewindAdapterFactory, RewindConfigurationProvider, RewindDynamicConfigurationProvider } from './debug';
import { RewindLanguageClient } from './languageClient';
import { formatNs } from './rewind';
import { RunsProvider } from './runsView';
import { RwdEditorProvider } from './rwdEditor';
import { RewindState } from './state';
import { TimelineViewProvider } from './timelineView';

let languageClient: RewindLanguageClient | undefined;

export function activate(context: vscode.ExtensionContext): void {
	const state = new RewindState();
	const runs = new RunsProvider();
	const compare = new CompareViewProvider(context.extensionUri, state);
	const commands = new Commands(state, runs, compare);
	const timeline = new TimelineViewProvider(context.extensionUri, state, (run) => commands.pickCheckRun(run));
	// What the recordings found, in the Problems panel and on the lines (`rewind lsp`).
	languageClient = new RewindLanguageClient();
	void languageClient.start();
	// An untrusted workspace starts nothing (rewindBinary refuses) until trusted.
	const client = languageClient;
	context.subscriptions.push(
		vscode.workspace.onDidGrantWorkspaceTrust(() => {
			void client.start();
			runs.refresh();
		}),
	);

	context.subscriptions.push(
		state,
		languageClient,
		vscode.debug.registerDebugAdapterDescriptorFactory('rewind', new RewindAdapterFactory()),
		vscode.debug.registerDebugConfigurationProvider('rewind', new RewindConfigurationProvider()),
		vscode.debug.registerDebugConfigurationProvider('rewind', new RewindDynamicConfigurationProvider(), vscode.DebugConfigurationProviderTriggerKind.Dynamic),
		vscode.window.registerWebviewViewProvider(TimelineViewProvider.viewType, timeline, { webviewOptions: { retainContextWhenHidden: true } }),
		vscode.window.registerWebviewViewProvider(CompareViewProvider.viewType, compare),
		vscode.window.registerTreeDataProvider('rewind.runs', runs),
		vscode.window.registerCustomEditorProvider(RwdEditorProvider.viewType, new RwdEditorProvider(commands)),
		...commands.register(),
		vscode.window.registerUriHandler({
			// vscode://rewind.rewind/open?run=ID&step=N&compare=ID (what `rewind open --editor code` opens)
			handleUri: (uri: vscode.Uri) => {
				if (uri.path !== '/open') {
					void vscode.window.showErrorMessage(`Rewind: unknown link ${uri.toString(true)}`);
					return;
				}
				const q = new URLSearchParams(uri.query);
				const run = q.get('run');
				if (!run) {
					void vscode.window.showErrorMessage('Rewind: the link names no run');
					return;
				}
				const args: OpenArgs = { run };
				const step = q.get('step');
				if (step !== null && step !== '') {
					args.step = Number(step);
				}
				const other = q.get('compare');
				if (other) {
					args.compare = other;
				}
				void vscode.commands.executeCommand('rewind.open', args);
			},
		}),
	);

	// The step and virtual time in the status bar while a run is open.
	const status = vscode.window.createStatusBarItem('rewind.position', vscode.StatusBarAlignment.Left, 50);
	status.name = 'Rewind Position';
	status.command = 'rewind.gotoStep';
	context.subscriptions.push(
		status,
		state.onDidChange((what) => {
			if (what === 'end') {
				status.hide();
				return;
			}
			const p = state.position;
			if (p) {
				status.text = `$(history) step ${p.step}/${p.steps} · ${formatNs(p.virtualNs)}`;
				status.tooltip = `Rewind run ${p.run}${p.thread ? `, ${p.thread.name}` : ''}: go to step…`;
				status.show();
			}
		}),
		vscode.debug.onDidStartDebugSession((s) => {
			if (s.type === 'rewind') {
				runs.refresh();
				void vscode.commands.executeCommand('rewind.timeline.focus');
			}
		}),
		state.onDidFork(() => runs.refresh()),
	);
}

export function deactivate(): Thenable<void> | undefined {
	return languageClient?.stop();
}
