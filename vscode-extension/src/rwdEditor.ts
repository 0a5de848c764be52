/**
 * Opening a `.rwd` file imports it (`rewind import`, verified first) and
 * opens its run.
 */
import * as vscode from 'vscode';
import type { Commands } from './commands';

export class RwdEditorProvider implements vscode.CustomReadonlyEditorProvider {
	public static readonly viewType = 'rewind.rwd';

	constructor(private readonly commands: Commands) {}

	openCustomDocument(uri: vscode.Uri): vscode.CustomDocument {
		return { uri, dispose: () => undefined };
	}

	async resolveCustomEditor(document: vscode.CustomDocument, panel: vscode.WebviewPanel): Promise<void> {
		const say = (text: string) => {
			const escaped = text.replace(/&/g, '&amp;').replace(/</g, '&lt;');
			panel.webview.html = `<!DOCTYPE html><html><body style="font-family: var(--vscode-font-family)"><p>${escaped}</p></body></html>`;
		};
		say(`Importing ${document.uri.fsPath}…`);
		try {
			const said = await this.commands.importRun(document.uri);
			say(said ?? 'imported');
		} catch (e) {
			say(`Cannot import ${document.uri.fsPath}: ${e instanceof Error ? e.message : String(e)}`);
		}
	}
}
