/**
 * The Compare view: `rewind/compare` of the session's run and the compared
 * run, asked again whenever the session opens a run that has one.
 */
import * as vscode from 'vscode';
import { webviewHtml } from './html';
import type { Comparison } from './protocol';
import type { RewindState } from './state';

export class CompareViewProvider implements vscode.WebviewViewProvider {
	public static readonly viewType = 'rewind.compare';
	private view?: vscode.WebviewView;
	comparison: Comparison | undefined;

	constructor(
		private readonly extensionUri: vscode.Uri,
		private readonly state: RewindState,
	) {
		state.onDidChange((what) => {
			if (what === 'timeline') {
				void this.refresh();
			}
		});
	}

	public resolveWebviewView(webviewView: vscode.WebviewView): void {
		this.view = webviewView;
		webviewView.webview.options = {
			enableScripts: true,
			localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, 'dist', 'webview')],
		};
		webviewView.webview.html = webviewHtml(webviewView.webview, this.extensionUri, 'compare');
		webviewView.webview.onDidReceiveMessage((m: { type: string }) => {
			if (m.type === 'ready') {
				this.post();
			} else if (m.type === 'swap') {
				void vscode.commands.executeCommand('rewind.swapCompared');
			}
		});
		webviewView.onDidDispose(() => (this.view = undefined));
	}

	/** Asks the adapter again (with `run`: compare with that run from now on). */
	async refresh(run?: string): Promise<void> {
		const t = this.state.timeline;
		if (!run && !t?.compare) {
			this.comparison = undefined;
			this.post();
			return;
		}
		const s = this.state.requireSession();
		this.comparison = (await s.customRequest('rewind/compare', run ? { run } : {})) as Comparison;
		this.post();
	}

	private post(): void {
		void this.view?.webview.postMessage({ type: 'comparison', comparison: this.comparison });
	}
}
