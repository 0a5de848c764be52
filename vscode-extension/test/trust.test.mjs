// Workspace trust in a real VS Code (code-server and Chromium, see
// codeServer.mjs): a cloned workspace whose .vscode/settings.json points
// rewind.path at a script of its own, opened with workspace trust on. While
// it is untrusted the extension starts nothing, whatever the user opens or
// asks; once trusted it starts the machine's rewind.path, never the
// workspace's. Each script leaves a marker file when it runs.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startCodeServer } from './codeServer.mjs';

const artifacts = process.env.REWIND_ARTIFACTS ?? join(process.cwd(), 'artifacts');
mkdirSync(artifacts, { recursive: true });
let dir;
let code;
let page;
let markers;

/** A shell script at `path` that touches `marker`, then runs `then` if given. */
function script(path, marker, then) {
	writeFileSync(path, `#!/bin/sh\ntouch '${marker}'\n${then ? `exec '${then}' "$@"\n` : 'exit 0\n'}`);
	chmodSync(path, 0o755);
}

before(async () => {
	dir = mkdtempSync(join(tmpdir(), 'rewind-trust-'));
	const workspace = join(dir, 'cloned');
	mkdirSync(join(workspace, '.vscode'), { recursive: true });
	markers = { workspace: join(dir, 'workspace-path-ran'), machine: join(dir, 'machine-path-ran') };
	script(join(workspace, 'build.sh'), markers.workspace);
	script(join(dir, 'machine-rewind'), markers.machine, process.env.REWIND_BIN);
	writeFileSync(join(workspace, 'main.c'), 'int main(void) { return 0; }\n');
	writeFileSync(join(workspace, '.vscode', 'settings.json'), JSON.stringify({ 'rewind.path': join(workspace, 'build.sh'), 'rewind.home': join(workspace, 'store') }));
	code = await startCodeServer({
		workspace,
		trust: false,
		user: { 'security.workspace.trust.startupPrompt': 'never', 'security.workspace.trust.banner': 'always' },
		machine: { 'rewind.path': join(dir, 'machine-rewind'), 'rewind.home': process.env.REWIND_HOME },
	});
	page = code.page;
});

after(async () => {
	await code?.stop();
	if (dir) {
		rmSync(dir, { recursive: true, force: true });
	}
});

const shot = (name) => page.screenshot({ path: join(artifacts, `code-server-trust-${name}.png`) });

/** Runs a command from the palette (F1), by its title. */
async function palette(title) {
	await page.keyboard.press('F1');
	const input = page.locator('.quick-input-widget input');
	await input.waitFor({ state: 'visible', timeout: 30000 });
	await input.fill(`>${title}`);
	await page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first().waitFor({ timeout: 30000 });
	await page.keyboard.press('Enter');
}

test('an untrusted workspace starts no rewind; trusted, the machine path runs', async () => {
	// Restricted Mode: the status bar says so.
	await page.locator('.statusbar', { hasText: 'Restricted Mode' }).waitFor({ timeout: 60000 });
	// A C file activates the extension (onLanguage:c), which would start `rewind lsp`.
	await page.keyboard.press('Control+P');
	await page.locator('.quick-input-widget input').fill('main.c');
	await page.locator('.quick-input-list .monaco-list-row', { hasText: 'main.c' }).first().waitFor({ timeout: 30000 });
	await page.keyboard.press('Enter');
	await page.locator('.monaco-editor .view-lines', { hasText: 'int main' }).waitFor({ timeout: 60000 });
	// Asking for a run to open (which lists them with `rewind ls`) starts nothing either.
	await palette('Rewind: Open Run…');
	// The extension is active and says why it does nothing.
	await page.locator('.notifications-toasts', { hasText: 'this workspace is not trusted' }).first().waitFor({ timeout: 30000 });
	await page.waitForTimeout(3000);
	await shot('1-restricted');
	assert.ok(!existsSync(markers.workspace), 'the workspace\'s rewind.path ran in an untrusted workspace');
	assert.ok(!existsSync(markers.machine), 'rewind ran in an untrusted workspace');

	// Trust it: the language server starts, from the machine's rewind.path.
	await palette('Workspaces: Manage Workspace Trust');
	await page.getByRole('button', { name: /^Trust/ }).first().click({ timeout: 30000 });
	for (let t = Date.now(); !existsSync(markers.machine); ) {
		assert.ok(Date.now() - t < 60000, 'trusted, the extension never started the machine\'s rewind.path');
		await page.waitForTimeout(250);
	}
	await shot('2-trusted');
	assert.ok(!existsSync(markers.workspace), 'the workspace\'s rewind.path ran once trusted');
});
