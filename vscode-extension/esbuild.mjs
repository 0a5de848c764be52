// Bundles the extension (Node.js, CommonJS, `vscode` external) and the
// webview scripts (browser, IIFE) into dist/.
import * as esbuild from 'esbuild';

const production = process.argv.includes('--production');
const watch = process.argv.includes('--watch');

const common = {
	bundle: true,
	minify: production,
	sourcemap: !production,
	sourcesContent: false,
	logLevel: 'warning',
};

const contexts = await Promise.all([
	esbuild.context({
		...common,
		entryPoints: ['src/extension.ts'],
		format: 'cjs',
		platform: 'node',
		target: 'node18',
		outfile: 'dist/extension.js',
		external: ['vscode'],
	}),
	esbuild.context({
		...common,
		entryPoints: ['src/webview/timeline.ts', 'src/webview/compare.ts'],
		format: 'iife',
		platform: 'browser',
		target: 'es2020',
		outdir: 'dist/webview',
	}),
]);

if (watch) {
	await Promise.all(contexts.map((c) => c.watch()));
} else {
	await Promise.all(contexts.map((c) => c.rebuild()));
	await Promise.all(contexts.map((c) => c.dispose()));
}
