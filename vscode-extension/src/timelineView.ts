/**
 * The Timeline view (a webview in the panel under the editor): posts the
 * session's timeline, position, lanes and check results to the page and
 * turns its clicks into `rewind/goto`.
 */
import * as vscode from 'vscode';
import { webviewHtml } from './html';
import type { FromTimeline, Lanes, ToTimeline } from './protocol';
import type { RewindState } from './state';

export class TimelineViewProvider implements vscode.WebviewViewProvider {
	public static readonly viewType = 'rewind.timeline';
	private view?: vscode.WebviewView;

	constructor(
		private readonly extensionUri: vscode.Uri,
		private readonly state: RewindState,
		private readonly pickCheckRun: (run: string) => Promise<void>,
	) {
		state.onDidChange((what) => this.push(what));
	}

	public resolveWebviewView(webviewView: vscode.WebviewView): void {
		this.view = webviewView;
		webviewView.webview.options = {
			enableScripts: true,
			localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, 'dist', 'webview')],
		};
		webviewView.webview.html = webviewHtml(webviewView.webview, this.extensionUri, 'timeline');
		webviewView.webview.onDidReceiveMessage((m: FromTimeline) => this.onMessage(m));
		webviewView.onDidDispose(() => (this.view = undefined));
	}

	private post(m: ToTimeline): void {
		void this.view?.webview.postMessage(m);
	}

	private push(what: 'timeline' | 'position' | 'lanes' | 'check' | 'end' | 'all'): void {
		const s = this.state;
		if (what === 'end') {
			return;
		}
		if ((what === 'timeline' || what === 'all') && s.timeline) {
			this.post({ type: 'timeline', timeline: s.timeline });
		}
		if ((what === 'lanes' || what === 'all') && s.lanes) {
			this.post({ type: 'lanes', lanes: s.lanes });
		}
		if ((what === 'position' || what === 'all') && s.position) {
			this.post({ type: 'position', position: s.position });
		}
		if ((what === 'check' || what === 'all') && s.check) {
			this.post({ type: 'checkResults', from: s.check.from, results: s.check.results, done: s.check.done });
		}
	}

	private async onMessage(m: FromTimeline): Promise<void> {
		try {
			switch (m.type) {
				case 'ready':
					this.push('all');
					break;
				case 'goto':
					await this.state.requireSession().customRequest('rewind/goto', { step: m.step });
					break;
				case 'lanes': {
					const lanes = (await this.state.requireSession().customRequest('rewind/lanes', { from: m.from, to: m.to, max: m.max })) as Lanes;
					this.post({ type: 'lanes', lanes });
					break;
				}
				case 'pickCheck':
					await this.pickCheckRun(m.run);
					break;
				case 'command':
					await vscode.commands.executeCommand(m.command);
					break;
			}
		} catch (e) {
			void vscode.window.showErrorMessage(`Rewind: ${e instanceof Error ? e.message : String(e)}`);
		}
	}
}
