/**
 * The `rewind` debug type: the adapter (`rewind dap` on stdio) and the
 * configuration provider, which offers the recent runs when there is no
 * launch.json.
 */
import * as vscode from 'vscode';
import { describeRun, listRuns, rewindBinary, rewindEnv } from './rewind';

export class RewindAdapterFactory implements vscode.DebugAdapterDescriptorFactory {
	createDebugAdapterDescriptor(): vscode.ProviderResult<vscode.DebugAdapterDescriptor> {
		const env: { [key: string]: string } = {};
		for (const [k, v] of Object.entries(rewindEnv())) {
			if (v !== undefined) {
				env[k] = v;
			}
		}
		return new vscode.DebugAdapterExecutable(rewindBinary(), ['dap'], { env });
	}
}

interface RunPick extends vscode.QuickPickItem {
	config: vscode.DebugConfiguration;
}

/** Recent runs as launch configurations, newest first. */
async function recentRunConfigurations(limit: number): Promise<RunPick[]> {
	const runs = await listRuns(limit);
	return runs.map((r) => ({
		label: describeRun(r),
		description: r.fork_of ? `fork of ${r.fork_of.parent.slice(0, 8)} at step ${r.fork_of.step}` : `${r.steps} steps`,
		detail: r.argv.join(' '),
		config: {
			type: 'rewind',
			request: 'launch',
			name: `Rewind: ${describeRun(r)}`,
			run: r.id,
			...(r.fork_of ? { compare: r.fork_of.parent, step: r.fork_of.step } : {}),
		},
	}));
}

export class RewindConfigurationProvider implements vscode.DebugConfigurationProvider {
	async provideDebugConfigurations(): Promise<vscode.DebugConfiguration[]> {
		try {
			return (await recentRunConfigurations(10)).map((p) => p.config);
		} catch {
			return [{ type: 'rewind', request: 'launch', name: 'Rewind: the newest run', run: '@' }];
		}
	}

	async resolveDebugConfiguration(_folder: vscode.WorkspaceFolder | undefined, config: vscode.DebugConfiguration): Promise<vscode.DebugConfiguration | undefined> {
		if (config.type && config.request) {
			return config;
		}
		// No launch.json: pick one of the recent runs.
		let picks: RunPick[];
		try {
			picks = await recentRunConfigurations(50);
		} catch (e) {
			void vscode.window.showErrorMessage(`Rewind: ${e instanceof Error ? e.message : String(e)}`);
			return undefined;
		}
		if (picks.length === 0) {
			void vscode.window.showInformationMessage('Rewind: no recorded runs yet. Record one with `rewind run`, or add a launch configuration that records a program.');
			return undefined;
		}
		const pick = await vscode.window.showQuickPick(picks, { placeHolder: 'A recorded run to open' });
		return pick?.config;
	}
}

export class RewindDynamicConfigurationProvider implements vscode.DebugConfigurationProvider {
	async provideDebugConfigurations(): Promise<vscode.DebugConfiguration[]> {
		try {
			return (await recentRunConfigurations(10)).map((p) => p.config);
		} catch {
			return [];
		}
	}
}
