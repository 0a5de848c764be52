// The debug core inside `rewind dap`, driven by the DebugClient of
// @vscode/debugadapter-testsupport: line and instruction steps both ways,
// source, function, conditional, hit-count and data breakpoints,
// logpoints, gotoTargets, memory, disassembly, sources and modules, on
// tests' `stepper` (a C pthread program built with -g at -O0). Needs
// REWIND_BIN and STEPPER; every run is replayed at the end.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { session as openSession, open, stopAfter, top, vars, scratchHome, lineFinder } from './session.mjs';

const BIN = process.env.REWIND_BIN;
const STEPPER = process.env.STEPPER;
const SOURCE = process.env.STEPPER_SOURCE;
assert.ok(BIN && STEPPER && SOURCE, 'REWIND_BIN, STEPPER and STEPPER_SOURCE must be set');
const home = scratchHome('rewind-dap-lines-');
const env = home.env;
const lineOf = lineFinder(SOURCE);
const LINE_SQUARE_CALL = lineOf('long s = square(');
const LINE_TOTAL = lineOf('total += s;');
const LINE_SQUARE_BODY = lineOf('long r = x * x;');
const LINE_CLEAR = lineOf('queue = NULL;');
/** A data symbol's address, from the program's symbol table. */
function symbol(name) {
  const out = execFileSync('nm', [STEPPER], { encoding: 'utf8' });
  const m = out.split('\n').find((l) => l.endsWith(` ${name}`));
  assert.ok(m, `nm finds ${name}`);
  return BigInt('0x' + m.split(' ')[0]);
}
const TOTAL = symbol('total');
const QUEUE = symbol('queue');
const hex = (n) => '0x' + n.toString(16);

let run;

before(() => {
  run = home.record(STEPPER).id;
});

after(() => home.finish());

const session = () => openSession(env);

test('capabilities say what is supported', async () => {
  const dc = await session();
  try {
    const caps = (await dc.initializeRequest()).body;
    for (const c of ['supportsStepBack', 'supportsConditionalBreakpoints', 'supportsHitConditionalBreakpoints',
      'supportsLogPoints', 'supportsDataBreakpoints', 'supportsGotoTargetsRequest', 'supportsReadMemoryRequest',
      'supportsWriteMemoryRequest', 'supportsDisassembleRequest', 'supportsLoadedSourcesRequest',
      'supportsModulesRequest', 'supportsSteppingGranularity', 'supportsInstructionBreakpoints',
      'supportsFunctionBreakpoints']) {
      assert.equal(caps[c], true, c);
    }
  } finally {
    await dc.stop();
  }
});

test('line steps both ways, into and out of calls, and a source breakpoint', async () => {
  const dc = await session();
  try {
    await open(dc, { run, step: 0 });
    const set = (await dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: [{ line: LINE_SQUARE_CALL }] })).body;
    assert.equal(set.breakpoints[0].verified, true, JSON.stringify(set));
    assert.equal(set.breakpoints[0].line, LINE_SQUARE_CALL);
    const [bp, bpPos] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    assert.equal(bp.reason, 'breakpoint');
    assert.deepEqual(bp.hitBreakpointIds, [set.breakpoints[0].id]);
    assert.ok(bpPos.inStep && /^0x/.test(bpPos.inStep.pc), JSON.stringify(bpPos));
    const tid = bp.threadId;
    let f = await top(dc, tid);
    assert.equal(f.name, 'worker');
    assert.equal(f.line, LINE_SQUARE_CALL);
    await dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: [] });

    // next steps over square() to the next line.
    const [n] = await stopAfter(dc, () => dc.nextRequest({ threadId: tid }));
    assert.equal(n.reason, 'step');
    f = await top(dc, tid);
    assert.equal(f.line, LINE_TOTAL, JSON.stringify(f));
    // stepBack returns to the line before.
    const [b] = await stopAfter(dc, () => dc.stepBackRequest({ threadId: tid }));
    assert.equal(b.reason, 'step');
    f = await top(dc, tid);
    assert.equal(f.line, LINE_SQUARE_CALL);
    assert.equal(f.name, 'worker');
    // stepIn goes into square, past its prologue; stepOut comes back.
    await stopAfter(dc, () => dc.stepInRequest({ threadId: tid }));
    f = await top(dc, tid);
    assert.equal(f.name, 'square');
    assert.equal(f.line, LINE_SQUARE_BODY);
    await stopAfter(dc, () => dc.stepOutRequest({ threadId: tid }));
    f = await top(dc, tid);
    assert.equal(f.name, 'worker');
    assert.equal(f.line, LINE_SQUARE_CALL);
    // By instruction, forward and back to the same place.
    const before = f.instructionPointerReference;
    await stopAfter(dc, () => dc.nextRequest({ threadId: tid, granularity: 'instruction' }));
    const after1 = (await top(dc, tid)).instructionPointerReference;
    assert.notEqual(after1, before);
    await stopAfter(dc, () => dc.stepBackRequest({ threadId: tid, granularity: 'instruction' }));
    assert.equal((await top(dc, tid)).instructionPointerReference, before);
  } finally {
    await dc.stop();
  }
});

test('conditional, hit-count and function breakpoints, both ways', async () => {
  const dc = await session();
  try {
    await open(dc, { run, step: 0 });
    // total is 16, 25, 29 before the 2nd, 3rd, 4th item: the condition reads memory.
    const cond = `*(long*)${hex(TOTAL)} == 25`;
    const set = (await dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: [{ line: LINE_SQUARE_CALL, condition: cond }] })).body;
    const [c] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    assert.equal(c.reason, 'breakpoint');
    const mem = (await dc.customRequest('readMemory', { memoryReference: hex(TOTAL), count: 8 })).body;
    assert.equal(Buffer.from(mem.data, 'base64').readBigInt64LE(), 25n);
    assert.deepEqual(c.hitBreakpointIds, [set.breakpoints[0].id]);

    // Hit count: the 2nd time the line runs, counted from the position.
    await dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: [{ line: LINE_TOTAL, hitCondition: '2' }] });
    await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    const m2 = (await dc.customRequest('readMemory', { memoryReference: hex(TOTAL), count: 8 })).body;
    assert.equal(Buffer.from(m2.data, 'base64').readBigInt64LE(), 29n, 'the 2nd hit after total was 25');
    // reverseContinue with the hit count: two hits back.
    await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: 1000 }));
    const m3 = (await dc.customRequest('readMemory', { memoryReference: hex(TOTAL), count: 8 })).body;
    assert.equal(Buffer.from(m3.data, 'base64').readBigInt64LE(), 16n);

    // A function breakpoint on a symbol; event names keep working beside it.
    await dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: [] });
    const fb = (await dc.setFunctionBreakpointsRequest({ breakpoints: [{ name: 'square' }, { name: 'write' }] })).body;
    assert.equal(fb.breakpoints[0].verified, true, JSON.stringify(fb));
    const [s] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    assert.equal(s.reason, 'breakpoint');
    assert.equal((await top(dc, s.threadId)).name, 'square');
    assert.equal((await top(dc, s.threadId)).line, LINE_SQUARE_BODY);
    await dc.setFunctionBreakpointsRequest({ breakpoints: [{ name: 'write' }] });
    const [w] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    assert.equal(w.reason, 'function breakpoint');
  } finally {
    await dc.stop();
  }
});

test('a data breakpoint stops where main clears the queue, going backwards', async () => {
  const dc = await session();
  try {
    const first = await open(dc, { run });
    const info = (await dc.customRequest('dataBreakpointInfo', { name: hex(QUEUE) })).body;
    assert.equal(info.dataId, `${hex(QUEUE)}/8`);
    const set = (await dc.customRequest('setDataBreakpoints', { breakpoints: [{ dataId: info.dataId, accessType: 'write' }] })).body;
    assert.equal(set.breakpoints[0].verified, true);
    // From the end of the run backwards: the last write is main's `queue = NULL`.
    const end = (await dc.customRequest('rewind/runs', {})).body.runs.find((r) => r.id === run).steps;
    await stopAfter(dc, () => dc.customRequest('rewind/goto', { step: end }));
    const [d] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: first.threadId }));
    assert.equal(d.reason, 'data breakpoint');
    assert.deepEqual(d.hitBreakpointIds, [set.breakpoints[0].id]);
    const f = await top(dc, d.threadId);
    assert.equal(f.name, 'main');
    assert.ok(f.line === LINE_CLEAR || f.line === LINE_CLEAR + 1, JSON.stringify(f));
    const q = (await dc.customRequest('readMemory', { memoryReference: hex(QUEUE), count: 8 })).body;
    assert.equal(Buffer.from(q.data, 'base64').readBigInt64LE(), 0n);
    // Forward from the start: the first write is main filling the queue.
    await stopAfter(dc, () => dc.customRequest('rewind/goto', { step: 0 }));
    const [d2] = await stopAfter(dc, () => dc.continueRequest({ threadId: first.threadId }));
    assert.equal(d2.reason, 'data breakpoint');
    assert.equal((await top(dc, d2.threadId)).name, 'main');
  } finally {
    await dc.stop();
  }
});

test('gotoTargets list each time a line ran; goto travels there; a logpoint lists every hit', async () => {
  const dc = await session();
  try {
    await open(dc, { run, step: 0 });
    const t = (await dc.customRequest('gotoTargets', { source: { path: SOURCE }, line: LINE_TOTAL })).body;
    assert.equal(t.targets.length, 4, JSON.stringify(t));
    assert.equal(t.total, 4);
    const steps = t.targets.map((x) => Number(/^step (\d+)/.exec(x.label)[1]));
    assert.deepEqual([...steps].sort((a, b) => a - b), steps);
    const [g, gPos] = await stopAfter(dc, () => dc.gotoRequest({ threadId: 1000, targetId: t.targets[2].id }));
    assert.equal(g.reason, 'goto');
    assert.equal(gPos.step, steps[2]);
    const f = await top(dc, g.threadId);
    assert.equal(f.line, LINE_TOTAL);
    const mem = (await dc.customRequest('readMemory', { memoryReference: hex(TOTAL), count: 8 })).body;
    assert.equal(Buffer.from(mem.data, 'base64').readBigInt64LE(), 25n);

    // A logpoint set while paused prints every hit of the whole recording.
    const outputs = [];
    dc.on('output', (e) => outputs.push(e.body.output));
    const lp = (await dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: [{ line: LINE_TOTAL, logMessage: `total={*(long*)${hex(TOTAL)}}` }] })).body;
    assert.equal(lp.breakpoints[0].verified, true);
    await new Promise((r) => setTimeout(r, 200));
    const logged = outputs.filter((o) => /total=/.test(o));
    assert.deepEqual(logged.map((o) => /total=(\d+)/.exec(o)[1]), ['0', '16', '25', '29'], JSON.stringify(outputs));
    for (const [i, o] of logged.entries()) assert.match(o, new RegExp(`^step ${steps[i]} `));
    // Logpoints never stop: continue runs to the end.
    const [e] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    assert.equal(e.reason, 'step');
    assert.match(e.description, /ended/);
  } finally {
    await dc.stop();
  }
});

test('memory, disassembly, sources and modules; a write forks the session off the recording', async () => {
  const dc = await session();
  try {
    await open(dc, { run, step: 0 });
    await dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: [{ line: LINE_TOTAL }] });
    const [bp] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    const f = await top(dc, bp.threadId);
    const ip = BigInt(f.instructionPointerReference);
    const dis = (await dc.customRequest('disassemble', { memoryReference: f.instructionPointerReference, instructionOffset: -3, instructionCount: 8, resolveSymbols: true })).body.instructions;
    assert.equal(dis.length, 8);
    assert.equal(BigInt(dis[3].address), ip);
    assert.match(dis[3].symbol, /^worker\+0x/);
    assert.ok(dis.some((i) => i.line === LINE_TOTAL));
    const srcs = (await dc.customRequest('loadedSources', {})).body.sources;
    assert.ok(srcs.some((s) => s.path === SOURCE), JSON.stringify(srcs.slice(0, 5)));
    const mods = (await dc.customRequest('modules', {})).body;
    assert.equal(mods.totalModules, 1);
    assert.match(mods.modules[0].symbolStatus, /debug info/);
    // A page of them (startModule, moduleCount): past the one, none.
    const page = (await dc.customRequest('modules', { startModule: 1, moduleCount: 1 })).body;
    assert.deepEqual(page.modules, []);
    assert.equal(page.totalModules, 1);
    const src = (await dc.customRequest('source', { source: { path: SOURCE }, sourceReference: 0 })).body;
    assert.match(src.content, /static void \*worker/);

    const w = (await dc.customRequest('writeMemory', { memoryReference: hex(TOTAL), data: Buffer.from([7, 0, 0, 0, 0, 0, 0, 0]).toString('base64') })).body;
    assert.equal(w.bytesWritten, 8);
    const r = (await dc.customRequest('readMemory', { memoryReference: hex(TOTAL), count: 8 })).body;
    assert.equal(Buffer.from(r.data, 'base64').readBigInt64LE(), 7n);
    await assert.rejects(dc.stepBackRequest({ threadId: bp.threadId }), /no longer the recording/);
    // Forward still goes, in the fork; goto returns to the recording.
    await stopAfter(dc, () => dc.nextRequest({ threadId: bp.threadId }));
    await stopAfter(dc, () => dc.gotoRequest({ threadId: 1000, targetId: 1 }));
    await stopAfter(dc, () => dc.stepBackRequest({ threadId: 1000 }));

    // Bad arguments name the field, and the adapter keeps serving.
    await assert.rejects(dc.customRequest('readMemory', { memoryReference: 'xyz', count: 4 }), /memoryReference/);
    await assert.rejects(dc.customRequest('disassemble', { memoryReference: '0x401000', instructionCount: -1 }), /instructionCount/);
    await assert.rejects(dc.customRequest('disassemble', { memoryReference: '0x401000', instructionCount: 4, instructionOffset: -1e12 }), /instructionOffset/);
    const top64 = (await dc.customRequest('readMemory', { memoryReference: '0xffffffffffffffff', count: 16 })).body;
    assert.equal(top64.unreadableBytes, 16);
    const dis0 = (await dc.customRequest('disassemble', { memoryReference: '0xfffffffffffffff0', instructionCount: 2 })).body.instructions;
    assert.equal(dis0.length, 2);
    await assert.rejects(dc.customRequest('setDataBreakpoints', { breakpoints: [{ dataId: 'nonsense' }] }), /dataId/);
    await assert.rejects(dc.customRequest('writeMemory', { memoryReference: hex(TOTAL), data: '!!' }), /data/);
    await assert.rejects(dc.customRequest('gotoTargets', { source: { path: SOURCE }, line: 1 }), /line/);
    await assert.rejects(dc.customRequest('setBreakpoints', { breakpoints: [] }), /source/);
    assert.ok((await dc.threadsRequest()).body.threads.length > 0);
  } finally {
    await dc.stop();
  }
});

test('moves through the snapshots in memory stop where moves without them do', async () => {
  // The same moves in a session with the default snapshots and one with
  // none (snapshotMemory 0: keyframes on disk, then forward): every stop
  // at the same position, frame, locals and registers.
  const withSnaps = await session();
  const without = await session();
  /** Each stop of `moves` on `dc`: the position, the top frame and its scopes' values. */
  const trace = async (dc, launch) => {
    await open(dc, launch);
    const seen = [];
    const look = async ([stop, pos]) => {
      const f = await top(dc, stop.threadId);
      const scopes = (await dc.scopesRequest({ frameId: f.id })).body.scopes;
      const values = [];
      for (const s of scopes) {
        values.push([s.name, (await vars(dc, s.variablesReference)).map((v) => `${v.name}=${v.value}`)]);
      }
      seen.push({ reason: stop.reason, step: pos.step, inStep: pos.inStep, name: f.name, line: f.line, ip: f.instructionPointerReference, values });
      return stop.threadId;
    };
    const bps = (lines) => dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: lines.map((line) => ({ line })) });
    await bps([LINE_TOTAL]);
    let tid = await look(await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 })));
    await look(await stopAfter(dc, () => dc.continueRequest({ threadId: tid })));
    await bps([]);
    for (let i = 0; i < 2; i++) await look(await stopAfter(dc, () => dc.nextRequest({ threadId: tid })));
    for (let i = 0; i < 4; i++) await look(await stopAfter(dc, () => dc.stepBackRequest({ threadId: tid })));
    await look(await stopAfter(dc, () => dc.stepBackRequest({ threadId: tid, granularity: 'instruction' })));
    await bps([LINE_SQUARE_CALL]);
    await look(await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: tid })));
    await bps([]);
    const far = seen[1].step;
    await look(await stopAfter(dc, () => dc.customRequest('rewind/goto', { step: Math.max(1, far - 3) })));
    await look(await stopAfter(dc, () => dc.customRequest('rewind/goto', { step: far })));
    return seen;
  };
  try {
    const a = await trace(withSnaps, { run, step: 0 });
    const b = await trace(without, { run, step: 0, snapshotMemory: 0 });
    assert.ok(a.length >= 10 && a.every((s) => s.values.length > 0), JSON.stringify(a));
    assert.deepEqual(a, b);
    // A budget that is not a size is refused, naming the field.
    const bad = await session();
    try {
      await assert.rejects(bad.launch({ run, snapshotMemory: 'lots' }), /snapshotMemory/);
    } finally {
      await bad.stop();
    }
  } finally {
    await withSnaps.stop();
    await without.stop();
  }
});
