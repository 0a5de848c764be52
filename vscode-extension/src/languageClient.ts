/**
 * `rewind lsp` as the language server of C, C++ and Rust documents: what the
 * recorded runs found (a deciding step, a crash, a deadlock, an SDK
 * assertion) appears in the Problems panel, with code lenses, hovers and
 * inlay hints; its code actions run `rewind.open` (registered in
 * commands.ts). The server is started with the same binary and store as the
 * debug adapter, and again when those settings change.
 */
import * as vscode from 'vscode';
import { LanguageClient, TransportKind, type LanguageClientOptions, type ServerOptions } from 'vscode-languageclient/node';
import { rewindBinary, rewindEnv } from './rewind';

/** What `rewind.record` and `rewind.check` answer (docs/lsp.md). */
interface CommandOutcome {
	exit: number | null;
	cancelled: boolean;
	stdout: string;
	stderr: string;
}

const RUN_COMMANDS = new Set(['rewind.record', 'rewind.check']);

function isOutcome(v: unknown): v is CommandOutcome {
	return typeof v === 'object' && v !== null && 'cancelled' in v && 'stdout' in v;
}

/** One line saying how a lens's record or check ended. */
function describeOutcome(command: string, r: CommandOutcome): string {
	const what = command === 'rewind.check' ? 'check' : 'recording';
	if (r.cancelled) {
		return `Rewind: the ${what} was cancelled.`;
	}
	const text = `${r.stdout}\n${r.stderr}`;
	const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '');
	const verdict = lines.find((l) => / of \d+ .* (ended differently|violated)/.test(l)) ?? lines.find((l) => l.startsWith('rewind: run ')) ?? lines[lines.length - 1] ?? `exit ${r.exit}`;
	return `Rewind: ${verdict.replace(/^rewind: /, '')}`;
}

export class RewindLanguageClient implements vscode.Disposable {
	private client: LanguageClient | undefined;
	private readonly output = vscode.window.createOutputChannel('Rewind Language Server', { log: true });
	private readonly disposables: vscode.Disposable[] = [this.output];

	constructor() {
		this.disposables.push(
			vscode.workspace.onDidChangeConfiguration((e) => {
				if (e.affectsConfiguration('rewind.path') || e.affectsConfiguration('rewind.home') || e.affectsConfiguration('rewind.languageServer')) {
					void this.restart();
				}
			}),
		);
	}

	/**
	 * Starts the server unless the `rewind.languageServer` setting is off or
	 * the workspace is not trusted (the extension starts it when it is).
	 */
	async start(): Promise<void> {
		if (!vscode.workspace.isTrusted || !vscode.workspace.getConfiguration('rewind').get<boolean>('languageServer', true)) {
			return;
		}
		const env: { [key: string]: string } = {};
		for (const [k, v] of Object.entries(rewindEnv())) {
			if (v !== undefined) {
				env[k] = v;
			}
		}
		const serverOptions: ServerOptions = {
			command: rewindBinary(),
			args: ['lsp'],
			transport: TransportKind.stdio,
			options: { env },
		};
		const clientOptions: LanguageClientOptions = {
			documentSelector: [
				{ scheme: 'file', language: 'c' },
				{ scheme: 'file', language: 'cpp' },
				{ scheme: 'file', language: 'rust' },
			],
			outputChannel: this.output,
			middleware: {
				// The Record and Check lenses: say how the command ended.
				executeCommand: async (command, args, next) => {
					const result: unknown = await next(command, args);
					if (RUN_COMMANDS.has(command) && isOutcome(result)) {
						void vscode.window.showInformationMessage(describeOutcome(command, result));
					}
					return result;
				},
			},
		};
		const client = new LanguageClient('rewind', 'Rewind', serverOptions, clientOptions);
		this.client = client;
		try {
			await client.start();
		} catch (e) {
			this.client = undefined;
			this.output.error(`rewind lsp did not start: ${e instanceof Error ? e.message : String(e)}`);
			void vscode.window.showWarningMessage(`Rewind: the language server (${rewindBinary()} lsp) did not start; set rewind.path. Debug sessions still work.`);
		}
	}

	async stop(): Promise<void> {
		const client = this.client;
		this.client = undefined;
		if (client) {
			await client.stop().catch(() => undefined);
		}
	}

	async restart(): Promise<void> {
		await this.stop();
		await this.start();
	}

	dispose(): void {
		void this.stop();
		this.disposables.forEach((d) => d.dispose());
	}
}
