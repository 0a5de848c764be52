// What the DebugClient tests share: a scratch REWIND_HOME whose runs are
// replayed at the end, starting `rewind dap`, opening a run, waiting for
// the stop a request makes, and reading frames, variables and lines.

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DebugClient } from '@vscode/debugadapter-testsupport';

/** A DebugClient on `rewind dap` (REWIND_BIN) with this environment. */
export async function session(env = process.env) {
  const bin = process.env.REWIND_BIN;
  assert.ok(bin, 'REWIND_BIN must name the built rewind binary');
  const dc = new DebugClient(bin, 'dap', 'rewind', { env });
  dc.defaultTimeout = 60000;
  await dc.start();
  return dc;
}

/** Opens a run with these launch arguments; returns the first stop's body. */
export async function open(dc, args) {
  const stopped = dc.waitForEvent('stopped', 30000);
  await Promise.all([dc.configurationSequence(), dc.launch(args)]);
  return (await stopped).body;
}

/** Sends a request that moves; returns the `stopped` and `rewind/position` bodies. */
export async function stopAfter(dc, request) {
  const stopped = dc.waitForEvent('stopped', 60000);
  const position = dc.waitForEvent('rewind/position', 60000);
  await request();
  return [(await stopped).body, (await position).body];
}

/** The innermost frame of a thread. */
export async function top(dc, threadId) {
  return (await dc.stackTraceRequest({ threadId })).body.stackFrames[0];
}

/** The variables of a reference. */
export async function vars(dc, variablesReference, more = {}) {
  return (await dc.variablesRequest({ variablesReference, ...more })).body.variables;
}

/** The one named `name` in a list of variables or scopes. */
export function byName(list, name) {
  const v = list.find((x) => x.name === name);
  assert.ok(v, `no ${name} in ${JSON.stringify(list.map((x) => x.name))}`);
  return v;
}

/**
 * A temporary REWIND_HOME for a scenario: `env` for the adapter, `record`
 * (runs a program there, returns the new run's id) and `finish` (every run
 * there must replay identically; then the directory goes).
 */
export function scratchHome(prefix) {
  const bin = process.env.REWIND_BIN;
  const home = mkdtempSync(join(tmpdir(), prefix));
  const env = { ...process.env, REWIND_HOME: home };
  const rewind = (...args) =>
    execFileSync(bin, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return {
    env,
    record(prog, ...args) {
      const out = rewind('run', '--', prog, ...args);
      const id = JSON.parse(rewind('ls', '--json').trim().split('\n')[0]).id;
      assert.match(id, /^[0-9a-f]{16}$/);
      return { id, out };
    },
    finish() {
      for (const r of rewind('ls', '--json').trim().split('\n').filter(Boolean).map(JSON.parse)) {
        assert.match(rewind('replay', r.id), /^identical/, `replay of ${r.id}`);
      }
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** `lineOf(s)`: the 1-based number of the first line of `path` holding `s`. */
export function lineFinder(path) {
  const text = readFileSync(path, 'utf8').split('\n');
  return (s) => {
    const i = text.findIndex((l) => l.includes(s));
    assert.ok(i >= 0, `${s} is not in ${path}`);
    return i + 1;
  };
}
