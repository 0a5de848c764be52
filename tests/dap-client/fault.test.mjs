// At the fault (issue 24, item 6): a launch at the step of the SIGSEGV
// that ended the run stops where it was raised, and stepBack and next by
// statement move to another line (the line before, then the fault's line
// again); by instruction, stepBack stays in the fault's line. On tests'
// `served` (SERVED, its source SERVED_SOURCE), whose fault is in the middle
// of its line. Every run is replayed at the end.

import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { session, open, stopAfter, top, scratchHome, lineFinder } from './session.mjs';

const SERVED = process.env.SERVED;
const SOURCE = process.env.SERVED_SOURCE;
assert.ok(process.env.REWIND_BIN && SERVED && SOURCE, 'REWIND_BIN, SERVED and SERVED_SOURCE must be set');
const home = scratchHome('rewind-dap-fault-');
const lineOf = lineFinder(SOURCE);
const LINE_FAULT = lineOf('s->q->served++;');
const LINE_BEFORE = lineOf('printf("serving');

after(() => home.finish());

test('stepBack from the fault goes to the line before it', async () => {
  // The run ends killed by SIGSEGV: `rewind run` exits 139.
  try {
    execFileSync(process.env.REWIND_BIN, ['run', '-q', '--', SERVED], { env: home.env, stdio: 'ignore' });
    assert.fail('served exited 0');
  } catch (e) {
    assert.equal(e.status, 139, String(e));
  }
  const listed = execFileSync(process.env.REWIND_BIN, ['ls', '--json'], { env: home.env, encoding: 'utf8' });
  const run = JSON.parse(listed.trim().split('\n')[0]);
  const dc = await session(home.env);
  try {
    // A crashed run opens at its crash.
    const first = await open(dc, { run: run.id });
    assert.equal(first.reason, 'exception');
    const tid = first.threadId;
    const crash = await top(dc, tid);
    assert.equal(crash.name, 'serve');
    assert.equal(crash.line, LINE_FAULT);

    const [back] = await stopAfter(dc, () => dc.stepBackRequest({ threadId: tid }));
    assert.equal(back.reason, 'step');
    assert.equal((await top(dc, tid)).line, LINE_BEFORE);

    // next: the fault's line from its start, then the fault again.
    const [line] = await stopAfter(dc, () => dc.nextRequest({ threadId: tid }));
    assert.equal(line.reason, 'step');
    assert.equal((await top(dc, tid)).line, LINE_FAULT, 'next from the line before');
    const [fwd, fwdPos] = await stopAfter(dc, () => dc.nextRequest({ threadId: tid }));
    assert.equal(fwd.reason, 'exception');
    assert.equal(fwdPos.step, run.steps);
    assert.equal((await top(dc, tid)).instructionPointerReference, crash.instructionPointerReference);

    // By instruction: the load before the faulting one, in the same line.
    const [inst] = await stopAfter(dc, () => dc.stepBackRequest({ threadId: tid, granularity: 'instruction' }));
    assert.equal(inst.reason, 'step');
    const one = await top(dc, tid);
    assert.equal(one.line, LINE_FAULT, JSON.stringify(one));
    assert.notEqual(one.instructionPointerReference, crash.instructionPointerReference);
  } finally {
    await dc.stop();
  }
});
