/**
 * Where the `rewind` binary is, and the two ways the extension asks it
 * things outside a debug session: its command line (remove, export, import)
 * and a short-lived `rewind dap` for `rewind/runs`.
 */
import * as cp from 'child_process';
import * as vscode from 'vscode';
import type { RunInfo, RunsReply } from './protocol';

/**
 * Thrown instead of starting `rewind` in an untrusted workspace: a launch
 * configuration, a properties file or a run there can name programs and
 * scripts, so nothing runs until the user trusts the workspace.
 */
export class UntrustedWorkspace extends Error {
	constructor() {
		super('this workspace is not trusted: Rewind starts nothing here until you trust it (Workspaces: Manage Workspace Trust)');
	}
}

/**
 * The adapter binary: the `rewind.path` setting (machine-scoped, so never a
 * workspace's), else `rewind` on PATH. Every process the extension starts
 * asks here first, and none starts in an untrusted workspace.
 */
export function rewindBinary(): string {
	if (!vscode.workspace.isTrusted) {
		throw new UntrustedWorkspace();
	}
	const configured = vscode.workspace.getConfiguration('rewind').get<string>('path', '').trim();
	return configured !== '' ? configured : 'rewind';
}

/** The environment for `rewind` (REWIND_HOME from the `rewind.home` setting). */
export function rewindEnv(): NodeJS.ProcessEnv {
	const home = vscode.workspace.getConfiguration('rewind').get<string>('home', '').trim();
	return home !== '' ? { ...process.env, REWIND_HOME: home } : { ...process.env };
}

export interface CliResult {
	code: number;
	stdout: string;
	stderr: string;
}

/** Runs `rewind ARGS...` to the end. */
export function runCli(args: string[]): Promise<CliResult> {
	return new Promise((resolve, reject) => {
		const child = cp.spawn(rewindBinary(), args, { env: rewindEnv() });
		let stdout = '';
		let stderr = '';
		child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
		child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
		child.on('error', (e) => reject(new Error(`cannot run ${rewindBinary()}: ${e.message}`)));
		child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
	});
}

/** Runs `rewind ARGS...` and fails with its last stderr line unless it exits 0. */
export async function runCliOk(args: string[]): Promise<CliResult> {
	const r = await runCli(args);
	if (r.code !== 0) {
		const why = r.stderr.trim().split('\n').pop() ?? `exit ${r.code}`;
		throw new Error(why);
	}
	return r;
}

/**
 * One custom request to a fresh `rewind dap` on stdio (`initialize`, then
 * the request), for what works before a run is open (`rewind/runs`).
 */
export function queryAdapter<T>(command: string, args: object, timeoutMs = 15000): Promise<T> {
	return new Promise((resolve, reject) => {
		const child = cp.spawn(rewindBinary(), ['dap'], { env: rewindEnv() });
		let buffer = Buffer.alloc(0);
		let settled = false;
		const finish = (err: Error | undefined, value?: T) => {
			if (settled) {
				return;
			}
			settled = true;
			clearTimeout(timer);
			child.kill();
			if (err) {
				reject(err);
			} else {
				resolve(value as T);
			}
		};
		const timer = setTimeout(() => finish(new Error(`rewind dap: no answer to ${command}`)), timeoutMs);
		const send = (seq: number, cmd: string, a: object) => {
			const body = Buffer.from(JSON.stringify({ seq, type: 'request', command: cmd, arguments: a }));
			child.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
			child.stdin.write(body);
		};
		child.on('error', (e) => finish(new Error(`cannot run ${rewindBinary()}: ${e.message}`)));
		child.on('close', () => finish(new Error(`rewind dap ended before answering ${command}`)));
		child.stdout.on('data', (d: Buffer) => {
			buffer = Buffer.concat([buffer, d]);
			for (;;) {
				const end = buffer.indexOf('\r\n\r\n');
				if (end < 0) {
					return;
				}
				const m = /Content-Length: *(\d+)/i.exec(buffer.subarray(0, end).toString());
				if (!m) {
					finish(new Error('rewind dap: a frame without Content-Length'));
					return;
				}
				const len = Number(m[1]);
				if (buffer.length < end + 4 + len) {
					return;
				}
				const msg = JSON.parse(buffer.subarray(end + 4, end + 4 + len).toString());
				buffer = buffer.subarray(end + 4 + len);
				if (msg.type === 'response' && msg.request_seq === 2) {
					if (msg.success) {
						finish(undefined, msg.body as T);
					} else {
						finish(new Error(msg.message ?? `${command} failed`));
					}
				}
			}
		});
		send(1, 'initialize', { adapterID: 'rewind', clientID: 'rewind-vscode' });
		send(2, command, args);
	});
}

/** Recorded runs, newest first. */
export async function listRuns(limit = 200): Promise<RunInfo[]> {
	const body = await queryAdapter<RunsReply>('rewind/runs', { limit });
	return body.runs;
}

/** `161d8167 bank exited:2` */
export function describeRun(r: RunInfo): string {
	return `${r.id.slice(0, 8)} ${r.name ?? r.program ?? ''} ${r.status}`.replace(/ +/g, ' ');
}

/** Nanoseconds as a person reads them. */
export function formatNs(ns: number): string {
	if (ns < 1000) {
		return `${ns} ns`;
	}
	if (ns < 1e6) {
		return `${(ns / 1e3).toFixed(ns < 1e4 ? 1 : 0)} µs`;
	}
	if (ns < 1e9) {
		return `${(ns / 1e6).toFixed(ns < 1e7 ? 2 : 1)} ms`;
	}
	return `${(ns / 1e9).toFixed(3)} s`;
}
