// A real VS Code for the scenarios: code-server (CODE_SERVER, run by the
// Node.js in NODE24_BIN) with the built .vsix installed in a fresh user data
// directory, and a Chromium page (playwright-core) on a workspace.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { chromiumPath, root } from './page.mjs';

const codeServer = process.env.CODE_SERVER;
const node24 = process.env.NODE24_BIN;

function freePort() {
	return new Promise((resolve) => {
		const s = createServer();
		s.listen(0, '127.0.0.1', () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

const codeEnv = () => ({ ...process.env, PATH: `${node24}:${process.env.PATH}` });

/** The workbench settings every scenario wants: a quiet, plain window. */
const quiet = { 'workbench.startupEditor': 'none', 'workbench.tips.enabled': false, 'window.zoomLevel': 0, 'workbench.secondarySideBar.defaultVisibility': 'hidden', 'chat.disableAIFeatures': true, 'git.openRepositoryInParentFolders': 'never' };

/**
 * Starts code-server on `workspace` with the extension installed. `user`
 * and `machine` are settings added to the user and the machine settings
 * (where the machine-scoped `rewind.path` and `rewind.home` go); `trust`
 * false leaves workspace trust on, so the workspace opens restricted.
 * Returns { page, figures, stop }.
 */
export async function startCodeServer({ workspace, user = {}, machine = {}, trust = true }) {
	assert.ok(codeServer && node24, 'CODE_SERVER and NODE24_BIN are set');
	const figures = {};
	const dir = mkdtempSync(join(tmpdir(), 'rewind-code-'));
	const userData = join(dir, 'user');
	const extensions = join(dir, 'extensions');
	mkdirSync(join(userData, 'User'), { recursive: true });
	mkdirSync(join(userData, 'Machine'), { recursive: true });
	writeFileSync(join(userData, 'User', 'settings.json'), JSON.stringify({ ...quiet, 'security.workspace.trust.enabled': !trust, ...user }));
	writeFileSync(join(userData, 'Machine', 'settings.json'), JSON.stringify(machine));

	// Build and package the extension, then install the .vsix.
	let t = Date.now();
	execFileSync('npm', ['run', '--silent', 'package'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
	figures.packageMs = Date.now() - t;
	t = Date.now();
	const installed = execFileSync(codeServer, ['--user-data-dir', userData, '--extensions-dir', extensions, '--install-extension', join(root, 'dist', 'rewind.vsix')], { env: codeEnv() }).toString();
	figures.installMs = Date.now() - t;
	assert.match(installed, /successfully installed/i);
	const listed = execFileSync(codeServer, ['--user-data-dir', userData, '--extensions-dir', extensions, '--list-extensions'], { env: codeEnv() }).toString();
	assert.match(listed, /^rewind\.rewind$/m, 'the extension is installed as rewind.rewind (the URI handler\'s authority)');

	const port = await freePort();
	const trustFlag = trust ? ['--disable-workspace-trust'] : [];
	const server = spawn(
		codeServer,
		['--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry', '--disable-update-check', ...trustFlag, '--user-data-dir', userData, '--extensions-dir', extensions, workspace],
		{ env: codeEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
	);
	let log = '';
	server.stdout.on('data', (d) => (log += d));
	server.stderr.on('data', (d) => (log += d));
	t = Date.now();
	for (;;) {
		try {
			const r = await fetch(`http://127.0.0.1:${port}/healthz`);
			if (r.ok) break;
		} catch {
			// not listening yet
		}
		assert.ok(Date.now() - t < 60000, `code-server did not start:\n${log}`);
		await new Promise((r) => setTimeout(r, 250));
	}
	const browser = await chromium.launch({ executablePath: chromiumPath(), args: ['--no-sandbox'] });
	const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
	t = Date.now();
	await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`);
	await page.waitForSelector('.monaco-workbench', { timeout: 60000 });
	await page.waitForSelector('.statusbar', { timeout: 60000 });
	figures.workbenchMs = Date.now() - t;
	const stop = async () => {
		await browser.close();
		server.kill();
		await new Promise((r) => (server.exitCode === null ? server.on('close', r) : r()));
		rmSync(dir, { recursive: true, force: true });
	};
	return { page, figures, stop };
}
