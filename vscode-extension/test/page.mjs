// The extension's webview pages outside VS Code: media/NAME.html filled in
// as the extension fills it, with a stand-in for acquireVsCodeApi that keeps
// what the page posts in window.__posted.
import { mkdtempSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export function chromiumPath() {
	return process.env.CHROMIUM ?? '/usr/bin/chromium';
}

/** A directory with NAME.html and NAME.js; returns the page's file URL. */
export function webviewPage(name) {
	const dir = mkdtempSync(join(tmpdir(), `rewind-${name}-`));
	copyFileSync(join(root, 'dist', 'webview', `${name}.js`), join(dir, `${name}.js`));
	const html = readFileSync(join(root, 'media', `${name}.html`), 'utf8')
		.replace(/\{\{nonce\}\}/g, 'test')
		.replace(/\{\{cspSource\}\}/g, "'self'")
		.replace(/\{\{script\}\}/g, `${name}.js`);
	writeFileSync(join(dir, `${name}.html`), html);
	return `file://${join(dir, `${name}.html`)}`;
}

export function stubVsCodeApi() {
	window.__posted = [];
	window.acquireVsCodeApi = () => ({
		postMessage: (m) => window.__posted.push(m),
		getState: () => undefined,
		setState: () => undefined,
	});
}
