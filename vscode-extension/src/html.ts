/**
 * A webview's page: media/NAME.html with its content security policy's
 * nonce, the webview's CSP source and its script (dist/webview/NAME.js)
 * filled in. The webview's own test fills in the same page.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as vscode from 'vscode';

export function webviewHtml(webview: vscode.Webview, extensionUri: vscode.Uri, name: 'timeline' | 'compare'): string {
	const nonce = crypto.randomBytes(16).toString('base64');
	const script = webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, 'dist', 'webview', `${name}.js`));
	const page = fs.readFileSync(vscode.Uri.joinPath(extensionUri, 'media', `${name}.html`).fsPath, 'utf8');
	return page
		.replace(/\{\{nonce\}\}/g, nonce)
		.replace(/\{\{cspSource\}\}/g, webview.cspSource)
		.replace(/\{\{script\}\}/g, script.toString());
}
