// A minimal DAP client over a `rewind dap` child's stdio, for the tests to
// fetch what the adapter really sends (rewind/timeline, rewind/lanes).
import { spawn } from 'node:child_process';

export class Dap {
	constructor(bin, env) {
		this.child = spawn(bin, ['dap'], { env, stdio: ['pipe', 'pipe', 'inherit'] });
		this.seq = 0;
		this.buffer = Buffer.alloc(0);
		this.pending = new Map();
		this.events = [];
		this.waiters = [];
		this.child.stdout.on('data', (d) => this.onData(d));
	}

	onData(d) {
		this.buffer = Buffer.concat([this.buffer, d]);
		for (;;) {
			const end = this.buffer.indexOf('\r\n\r\n');
			if (end < 0) return;
			const len = Number(/Content-Length: *(\d+)/i.exec(this.buffer.subarray(0, end).toString())[1]);
			if (this.buffer.length < end + 4 + len) return;
			const msg = JSON.parse(this.buffer.subarray(end + 4, end + 4 + len).toString());
			this.buffer = this.buffer.subarray(end + 4 + len);
			if (msg.type === 'response') {
				const p = this.pending.get(msg.request_seq);
				this.pending.delete(msg.request_seq);
				if (msg.success) p?.resolve(msg.body ?? {});
				else p?.reject(new Error(`${msg.command}: ${msg.message}`));
			} else if (msg.type === 'event') {
				this.events.push(msg);
				this.waiters = this.waiters.filter((w) => !w(msg));
			}
		}
	}

	request(command, args = {}) {
		const seq = ++this.seq;
		const body = Buffer.from(JSON.stringify({ seq, type: 'request', command, arguments: args }));
		this.child.stdin.write(`Content-Length: ${body.length}\r\n\r\n`);
		this.child.stdin.write(body);
		return new Promise((resolve, reject) => this.pending.set(seq, { resolve, reject }));
	}

	/** The first event named `name` (already received or to come). */
	event(name, timeoutMs = 30000) {
		const got = this.events.find((e) => e.event === name);
		if (got) return Promise.resolve(got.body);
		return new Promise((resolve, reject) => {
			const timer = setTimeout(() => reject(new Error(`no ${name} event`)), timeoutMs);
			this.waiters.push((e) => {
				if (e.event !== name) return false;
				clearTimeout(timer);
				resolve(e.body);
				return true;
			});
		});
	}

	/** Opens a run: initialize, launch, configurationDone, the first stop. */
	async open(args) {
		try {
			await this.request('initialize', { adapterID: 'rewind', clientID: 'rewind-test', supportsProgressReporting: true });
			await this.request('launch', args);
			await this.request('configurationDone');
			await this.event('stopped');
			return { timeline: await this.event('rewind/timeline'), position: await this.event('rewind/position') };
		} catch (e) {
			// A failed open must fail the test, not leave the adapter holding node --test open.
			this.child.kill();
			throw e;
		}
	}

	async close() {
		await this.request('disconnect').catch(() => undefined);
		this.child.stdin.end();
		await new Promise((r) => (this.child.exitCode !== null ? r() : this.child.on('close', r)));
	}
}
