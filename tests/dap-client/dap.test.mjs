// `rewind dap` driven by a real DAP client: the DebugClient of
// @vscode/debugadapter-testsupport (what VS Code's own adapters are tested
// with). Needs REWIND_BIN (the built `rewind`); each test file run uses its
// own REWIND_HOME. `cargo test -p rewind-tests --test dap` runs this.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { createConnection } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DebugClient } from '@vscode/debugadapter-testsupport';
import { lineFinder, top } from './session.mjs';

const BIN = process.env.REWIND_BIN;
assert.ok(BIN, 'REWIND_BIN must name the built rewind binary');
const HOME = mkdtempSync(join(tmpdir(), 'rewind-dap-'));
const env = { ...process.env, REWIND_HOME: HOME };

function rewind(...args) {
  try {
    return execFileSync(BIN, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    // `rewind check` exits 1 when it finds a failure: that is its answer.
    if (e.status === 1 && e.stdout) return e.stdout;
    throw new Error(`rewind ${args.join(' ')}: ${e.stderr || e.message}`);
  }
}

/** Every file of the store with its size and modification time. */
function storeState() {
  const out = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else {
        const st = statSync(p);
        out.push(`${p.slice(HOME.length)} ${st.size} ${st.mtimeMs}`);
      }
    }
  };
  walk(HOME);
  return out.sort();
}

function runs() {
  return rewind('ls', '--json').trim().split('\n').filter(Boolean).map(JSON.parse);
}

let pool; // { failing, passing }
let bank;

before(() => {
  const p = JSON.parse(rewind('check', '--points', 'syscalls', '--example', 'pool', '--json'));
  // Check labels the two runs by outcome: the failing one is the one killed.
  const killed = /^killed/.test(p.narrowed.with.status);
  pool = killed
    ? { failing: p.narrowed.with.run, passing: p.narrowed.without.run }
    : { failing: p.narrowed.without.run, passing: p.narrowed.with.run };
  const b = JSON.parse(rewind('check', '--points', 'syscalls', '--example', 'bank', '--json'));
  bank = {
    failing: b.narrowed.with.run,
    passing: b.narrowed.without.run,
    deciding: b.narrowed.deciding[0].step,
  };
});

/** Asserts that `rewind replay ID` reports identical. */
function replayIdentical(id) {
  const out = execFileSync(BIN, ['replay', id], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  assert.match(out, /^identical/, `replay of ${id}: ${out}`);
}

after(() => {
  // Every run the sessions saw or made still replays identically (a run
  // removed on purpose was replayed before it went).
  for (const r of runs()) {
    replayIdentical(r.id);
  }
  rmSync(HOME, { recursive: true, force: true });
});

async function session() {
  const dc = new DebugClient(BIN, 'dap', 'rewind', { env });
  dc.defaultTimeout = 240000; // a debug build records, forks and checks slower
  await dc.start();
  return dc;
}

/** Launches and waits for the first stop; returns [stopped, position, timeline]. */
async function open(dc, args) {
  // A check first (memory scheduling points by default) takes a while on a loaded machine.
  const stopped = dc.waitForEvent('stopped', 240000);
  const position = dc.waitForEvent('rewind/position', 240000);
  const timeline = dc.waitForEvent('rewind/timeline', 240000);
  await Promise.all([dc.configurationSequence(), dc.launch(args)]);
  return [(await stopped).body, (await position).body, (await timeline).body];
}

async function stopAfter(dc, request) {
  const stopped = dc.waitForEvent('stopped', 30000);
  const position = dc.waitForEvent('rewind/position', 30000);
  await request();
  return [(await stopped).body, (await position).body];
}

/** pool.queue, named as the program names it: its value, and a data
 * breakpoint on it of an access type (which gives the breakpoint's id). */
async function poolQueue(dc, frameId) {
  const info = (await dc.customRequest('dataBreakpointInfo', { name: 'pool.queue', frameId })).body;
  assert.match(info.dataId, /^0x[0-9a-f]+\/8$/, JSON.stringify(info));
  assert.deepEqual(info.accessTypes, ['write', 'read', 'readWrite']);
  const addr = info.dataId.split('/')[0];
  const queue = async () =>
    Buffer.from((await dc.customRequest('readMemory', { memoryReference: addr, count: 8 })).body.data, 'base64').readBigUInt64LE();
  const watch = async (accessType) => {
    const w = (await dc.customRequest('setDataBreakpoints', { breakpoints: [{ dataId: info.dataId, accessType }] })).body;
    assert.equal(w.breakpoints[0].verified, true, JSON.stringify(w));
    return w.breakpoints[0].id;
  };
  return { queue, watch };
}

/** With a write watch on pool.queue (`writeId`), reverseContinue from the
 * crash: main clears the queue. One instruction back is the store itself,
 * the queue still set; forward again, the same stop. */
async function backToTheClear(dc, { crashTid, writeId, queue, lineClear }) {
  const [clear, clearPos] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: crashTid }));
  assert.equal(clear.reason, 'data breakpoint');
  assert.deepEqual(clear.hitBreakpointIds, [writeId]);
  assert.match(clear.description, /^write of/);
  assert.notEqual(clear.threadId, crashTid);
  const after = await top(dc, clear.threadId);
  assert.equal(after.name, 'main');
  // Just after the store: the clear's line or the next with code.
  assert.ok(after.line >= lineClear && after.line <= lineClear + 2, JSON.stringify(after));
  assert.equal(await queue(), 0n);
  await stopAfter(dc, () => dc.stepBackRequest({ threadId: clear.threadId, granularity: 'instruction' }));
  const store = await top(dc, clear.threadId);
  assert.deepEqual([store.name, store.line], ['main', lineClear]);
  assert.notEqual(await queue(), 0n);
  const [clear2, clear2Pos] = await stopAfter(dc, () => dc.continueRequest({ threadId: clear.threadId }));
  assert.equal(clear2.reason, 'data breakpoint');
  assert.deepEqual(clear2Pos.inStep, clearPos.inStep);
  return clearPos;
}

test('the failing pool run opens at the crash, and steps both ways', async () => {
  const dc = await session();
  try {
    const [stopped, pos, tl] = await open(dc, { run: pool.failing });
    assert.equal(stopped.reason, 'exception');
    assert.match(stopped.description, /killed:SIGSEGV/);
    assert.equal(pos.run, pool.failing);
    assert.equal(pos.step, tl.steps, 'the crash is the last step');
    assert.ok(pos.events.some((e) => e.kind === 'signal' && /SIGSEGV/.test(e.text)));
    assert.ok(tl.events.some((e) => e.kind === 'signal'));
    const crashTid = stopped.threadId;

    const threads = (await dc.threadsRequest()).body.threads;
    assert.ok(threads.length >= 2, JSON.stringify(threads));
    for (const t of threads) assert.match(t.name, /^1000\/\d+ \S+/);
    assert.ok(threads.some((t) => t.id === crashTid));

    const st = (await dc.stackTraceRequest({ threadId: crashTid })).body;
    // The symbols crate's unwinding: the crashing thread is in `worker`, at a line of pool.c.
    assert.ok(st.stackFrames.length >= 2, JSON.stringify(st));
    assert.match(st.stackFrames[0].instructionPointerReference, /^0x[0-9a-f]+$/);
    const worker = st.stackFrames.find((f) => f.name === 'worker');
    assert.ok(worker, JSON.stringify(st.stackFrames.map((f) => f.name)));
    assert.match(worker.source.path, /pool\.c$/);
    assert.ok(worker.line > 0);
    assert.equal(worker.presentationHint, 'normal');
    // A page of the stack (startFrame, levels), with the whole stack's size.
    assert.equal(st.totalFrames, st.stackFrames.length);
    const paged = (await dc.stackTraceRequest({ threadId: crashTid, startFrame: 1, levels: 1 })).body;
    assert.deepEqual(paged.stackFrames, [st.stackFrames[1]]);
    assert.equal(paged.totalFrames, st.stackFrames.length);

    const scopes = (await dc.scopesRequest({ frameId: st.stackFrames[0].id })).body.scopes;
    assert.deepEqual(scopes.map((s) => s.name), ['Locals', 'Arguments', 'Globals', 'Step', 'Registers']);
    const registers = scopes.find((s) => s.name === 'Registers');
    const regs = (await dc.variablesRequest({ variablesReference: registers.variablesReference })).body.variables;
    const rip = regs.find((v) => v.name === 'rip');
    assert.equal(rip.value, st.stackFrames[0].instructionPointerReference);
    const ev = (await dc.evaluateRequest({ expression: '$rip', frameId: st.stackFrames[0].id })).body;
    assert.equal(ev.result, rip.value);

    // The crash is the faulting instruction itself, inside the step before it.
    assert.equal(pos.inStep.step, pos.step - 1);
    assert.equal(pos.inStep.pc, st.stackFrames[0].instructionPointerReference);
    // stepBack: the line before the crash, in the crashing thread.
    const [back, backPos] = await stopAfter(dc, () => dc.stepBackRequest({ threadId: crashTid }));
    assert.equal(back.reason, 'step');
    assert.ok(backPos.step < pos.step);
    const backTop = (await dc.stackTraceRequest({ threadId: crashTid })).body.stackFrames[0];
    assert.equal(backTop.name, 'worker');
    assert.ok(backTop.line < worker.line, `${backTop.line} is before the crash's ${worker.line}`);
    // next, line by line: forward again to the crash.
    let fwd;
    let fwdPos;
    for (let i = 0; i < 5; i++) {
      [fwd, fwdPos] = await stopAfter(dc, () => dc.nextRequest({ threadId: crashTid }));
      if (fwd.reason !== 'step') break;
    }
    assert.equal(fwd.reason, 'exception');
    assert.equal(fwdPos.step, pos.step);

    // reverseContinue to a function breakpoint on a system call.
    const bps = (await dc.setFunctionBreakpointsRequest({ breakpoints: [{ name: 'write' }] })).body.breakpoints;
    assert.equal(bps[0].verified, true);
    const [rc, rcPos] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: crashTid }));
    assert.equal(rc.reason, 'function breakpoint');
    assert.ok(rcPos.events.some((e) => /^write\(/.test(e.text)), JSON.stringify(rcPos));
    const [rc2, rc2Pos] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: crashTid }));
    assert.equal(rc2.reason, 'function breakpoint');
    assert.ok(rc2Pos.step < rcPos.step);
    const [c, cPos] = await stopAfter(dc, () => dc.continueRequest({ threadId: crashTid }));
    assert.equal(c.reason, 'function breakpoint');
    assert.equal(cPos.step, rcPos.step);

    // goto a step, by the custom request and by `goto`'s target id.
    const [g, gPos] = await stopAfter(dc, () => dc.customRequest('rewind/goto', { step: 3 }));
    assert.equal(g.reason, 'goto');
    assert.equal(gPos.step, 3);
    const [, g2Pos] = await stopAfter(dc, () => dc.gotoRequest({ threadId: crashTid, targetId: 10 }));
    assert.equal(g2Pos.step, 10);
    await dc.setFunctionBreakpointsRequest({ breakpoints: [] });
    const [, endPos] = await stopAfter(dc, () => dc.continueRequest({ threadId: crashTid }));
    assert.equal(endPos.step, pos.step);
    const [entry, startPos] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: crashTid }));
    assert.equal(entry.reason, 'entry');
    assert.equal(startPos.step, 0);
    await assert.rejects(dc.stepBackRequest({ threadId: 1000 }), /step 0/);
  } finally {
    await dc.stop();
  }
});

test('pool: reverseContinue to a source breakpoint in worker; write, read and readWrite watches on pool.queue', async () => {
  const dc = await session();
  try {
    const [stopped, pos] = await open(dc, { run: pool.failing });
    const crashTid = stopped.threadId;
    const crash = await top(dc, crashTid);
    assert.equal(crash.name, 'worker');
    // The example's source, as its debug info names it (built on this host).
    const source = crash.source.path;
    const lineOf = lineFinder(source);
    // worker's, the first in the file (the line before it calls `say`, inlined at -O1).
    const LINE_LOCK = lineOf('pthread_mutex_lock(&pool.lock);');
    const LINE_FREE = lineOf('free(pool.queue);');
    const LINE_CLEAR = lineOf('pool.queue = NULL;');
    const LINE_CALLOC = lineOf('pool.queue = calloc(');
    const LINE_COUNT = lineOf('cost += pool.queue[i].cost;');

    // Back from the crash to where the crashing worker takes the lock for its last pass.
    const set = (await dc.setBreakpointsRequest({ source: { path: source }, breakpoints: [{ line: LINE_LOCK }] })).body;
    assert.equal(set.breakpoints[0].verified, true, JSON.stringify(set));
    const [bp, bpPos] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: crashTid }));
    assert.equal(bp.reason, 'breakpoint');
    assert.deepEqual(bp.hitBreakpointIds, [set.breakpoints[0].id]);
    assert.equal(bp.threadId, crashTid, 'the last lock taken before the crash is the crashing worker\'s');
    assert.ok(bpPos.step < pos.step);
    const here = await top(dc, crashTid);
    assert.deepEqual([here.name, here.line], ['worker', LINE_LOCK]);
    // Its locals: which worker, and which pass.
    const me = Number((await dc.evaluateRequest({ expression: 'me', frameId: here.id, context: 'watch' })).body.result);
    assert.ok(me === 0 || me === 1, `me = ${me}`);
    const pass = Number((await dc.evaluateRequest({ expression: 'pass', frameId: here.id, context: 'hover' })).body.result);
    assert.ok(pass >= 1, `pass = ${pass}`);
    await dc.setBreakpointsRequest({ source: { path: source }, breakpoints: [] });

    const { queue, watch } = await poolQueue(dc, here.id);
    // A write watch, backwards from there: main cleared the queue between the
    // worker's read of the stop flag and its lock.
    const writeId = await watch('write');
    const clearPos = await backToTheClear(dc, { crashTid, writeId, queue, lineClear: LINE_CLEAR });
    assert.ok(clearPos.step <= bpPos.step, JSON.stringify(clearPos));

    // A read watch, forward from the clear: the crashing worker loads the cleared pointer.
    const readId = await watch('read');
    const [load, loadPos] = await stopAfter(dc, () => dc.continueRequest({ threadId: crashTid }));
    assert.equal(load.reason, 'data breakpoint');
    assert.deepEqual(load.hitBreakpointIds, [readId]);
    assert.match(load.description, /^read of/);
    assert.equal(load.threadId, crashTid);
    assert.ok(loadPos.step <= pos.step);
    const loading = await top(dc, crashTid);
    assert.equal(loading.name, 'worker');
    assert.ok(loading.line >= LINE_COUNT - 1 && loading.line <= LINE_COUNT, JSON.stringify(loading));
    assert.equal(await queue(), 0n);
    // readWrite, backwards from that load: the last access before it is main's clear.
    await watch('readWrite');
    const [rw, rwPos] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: crashTid }));
    assert.equal(rw.reason, 'data breakpoint');
    assert.deepEqual(rwPos.inStep, clearPos.inStep);
    // A read watch backwards passes the clear (a write) and stops at main's free(pool.queue).
    await watch('read');
    const [freeing] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: crashTid }));
    assert.equal(freeing.reason, 'data breakpoint');
    const f = await top(dc, freeing.threadId);
    assert.deepEqual([f.name, f.line], ['main', LINE_FREE]);
    // A write watch backwards: the calloc that made the queue.
    await watch('write');
    const [made] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: crashTid }));
    assert.equal(made.reason, 'data breakpoint');
    const m = await top(dc, made.threadId);
    assert.equal(m.name, 'main');
    assert.ok(m.line >= LINE_CALLOC && m.line <= LINE_CALLOC + 2, JSON.stringify(m));
    assert.notEqual(await queue(), 0n);
  } finally {
    await dc.stop();
  }
});

test('pool as `rewind check` records it (memory points): data breakpoints on pool.queue both ways', async () => {
  // `rewind check`'s default points: memory. The queue pointer's page is
  // shared, so the engine hides it from ring 3 and each access is a step.
  const p = JSON.parse(rewind('check', '--example', 'pool', '--json'));
  const failing = /^killed/.test(p.narrowed.with.status) ? p.narrowed.with.run : p.narrowed.without.run;
  const dc = await session();
  try {
    const [stopped, pos] = await open(dc, { run: failing });
    assert.equal(stopped.reason, 'exception');
    const crashTid = stopped.threadId;
    const crash = await top(dc, crashTid);
    assert.equal(crash.name, 'worker');
    const lineOf = lineFinder(crash.source.path);
    const LINE_CLEAR = lineOf('pool.queue = NULL;');
    const LINE_COUNT = lineOf('cost += pool.queue[i].cost;');

    const { queue, watch } = await poolQueue(dc, crash.id);
    // Back from the crash with a write watch: main clears the queue.
    const writeId = await watch('write');
    const clearPos = await backToTheClear(dc, { crashTid, writeId, queue, lineClear: LINE_CLEAR });
    assert.ok(clearPos.step < pos.step);

    // readWrite, forward from the clear: the crashing worker loads the cleared pointer.
    const rwId = await watch('readWrite');
    const [load, loadPos] = await stopAfter(dc, () => dc.continueRequest({ threadId: crashTid }));
    assert.equal(load.reason, 'data breakpoint');
    assert.deepEqual(load.hitBreakpointIds, [rwId]);
    assert.match(load.description, /^access of/);
    assert.equal(load.threadId, crashTid);
    const loading = await top(dc, crashTid);
    assert.equal(loading.name, 'worker');
    assert.ok(loading.line >= LINE_COUNT - 1 && loading.line <= LINE_COUNT, JSON.stringify(loading));
    // reverseContinue from the load: the previous access is main's clear.
    const [rw, rwPos] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: crashTid }));
    assert.equal(rw.reason, 'data breakpoint');
    assert.deepEqual(rwPos.inStep, clearPos.inStep);
    // Without watches, on to the crash: at the step the recording made it.
    await dc.customRequest('setDataBreakpoints', { breakpoints: [] });
    const [end, endPos] = await stopAfter(dc, () => dc.continueRequest({ threadId: crashTid }));
    assert.equal(end.reason, 'exception');
    assert.equal(endPos.step, pos.step);
    assert.ok(loadPos.step <= pos.step);
  } finally {
    await dc.stop();
  }
});

test('with `stepping: "events"`, steps go from event to event', async () => {
  const dc = await session();
  try {
    const [stopped, pos] = await open(dc, { run: pool.failing, stepping: 'events' });
    const tid = stopped.threadId;
    const [back, backPos] = await stopAfter(dc, () => dc.stepBackRequest({ threadId: tid }));
    assert.equal(back.reason, 'step');
    assert.ok(backPos.step < pos.step);
    assert.ok(backPos.events.some((e) => e.tid === tid));
    const [fwd, fwdPos] = await stopAfter(dc, () => dc.nextRequest({ threadId: tid }));
    assert.equal(fwdPos.step, pos.step);
    assert.equal(fwd.reason, 'exception');
  } finally {
    await dc.stop();
  }
});

test('restartFrame forks the run, `rewind ls` shows the fork, and the session goes on in it', async () => {
  const dc = await session();
  try {
    const [stopped] = await open(dc, { run: bank.passing, step: bank.deciding });
    assert.equal(stopped.reason, 'entry');
    const st = (await dc.stackTraceRequest({ threadId: stopped.threadId })).body;
    const forked = dc.waitForEvent('rewind/forked', 60000);
    const invalidated = dc.waitForEvent('invalidated', 60000);
    const [again, pos] = await stopAfter(dc, () => dc.restartFrameRequest({ frameId: st.stackFrames[0].id }));
    const f = (await forked).body;
    assert.deepEqual((await invalidated).body.areas, ['all']);
    assert.equal(f.parent, bank.passing);
    assert.equal(f.step, bank.deciding);
    assert.equal(again.reason, 'restart');
    assert.equal(pos.run, f.run);
    assert.equal(pos.step, bank.deciding);
    const listed = runs().find((r) => r.id === f.run);
    assert.ok(listed, `rewind ls lists the fork ${f.run}`);
    assert.equal(listed.fork_of.parent, bank.passing);
    // The session continues in the fork.
    const threads = (await dc.threadsRequest()).body.threads;
    assert.ok(threads.length > 0);
    const [, next] = await stopAfter(dc, () => dc.nextRequest({ threadId: threads[0].id }));
    assert.equal(next.run, f.run);
    assert.ok(next.step > pos.step);
    // A second restart picks the next unused schedule.
    const forked2 = dc.waitForEvent('rewind/forked', 60000);
    await dc.restartFrameRequest({ frameId: threads[0].id << 8 });
    const f2 = (await forked2).body;
    assert.notEqual(f2.run, f.run);
  } finally {
    await dc.stop();
  }
});

test('restartFrame forks with the next unused seed when launched with `forkWith: "seed"`', async () => {
  const seeds = [];
  for (let i = 0; i < 2; i++) {
    const dc = await session();
    try {
      const [stopped] = await open(dc, { run: bank.passing, step: bank.deciding, forkWith: 'seed' });
      const st = (await dc.stackTraceRequest({ threadId: stopped.threadId })).body;
      const forked = dc.waitForEvent('rewind/forked', 60000);
      const [again, pos] = await stopAfter(dc, () => dc.restartFrameRequest({ frameId: st.stackFrames[0].id }));
      const f = (await forked).body;
      assert.equal(again.reason, 'restart');
      assert.equal(pos.run, f.run);
      assert.equal(f.parent, bank.passing);
      assert.ok(f.with.seed >= 1 && f.with.schedule === undefined, JSON.stringify(f.with));
      seeds.push(f.with.seed);
      const listed = runs().find((r) => r.id === f.run);
      assert.ok(listed, `rewind ls lists the fork ${f.run}`);
      assert.deepEqual(listed.fork_of, { parent: bank.passing, step: bank.deciding });
      assert.match(rewind('show', f.run), new RegExp(`rewind fork ${bank.passing} ${bank.deciding} --seed ${f.with.seed}`));
    } finally {
      await dc.stop();
    }
  }
  // The second session's seed is the next one no fork at that step used.
  assert.equal(seeds[1], seeds[0] + 1, JSON.stringify(seeds));
});

test('rewind/fork: beside the session (open false) and continuing in the fork (open true)', async () => {
  const dc = await session();
  try {
    const [stopped, pos] = await open(dc, { run: bank.passing, step: bank.deciding });
    const tid = stopped.threadId;
    // Beside: the response and the event say what was made; the session stays in the parent.
    const forked = dc.waitForEvent('rewind/forked', 60000);
    const beside = (await dc.customRequest('rewind/fork', { step: 30, schedule: 3, open: false })).body;
    assert.deepEqual((await forked).body, beside);
    assert.equal(beside.parent, bank.passing);
    assert.equal(beside.step, 30);
    assert.deepEqual(beside.with, { schedule: 3 });
    assert.match(beside.run, /^[0-9a-f]{16}$/);
    assert.match(beside.status, /^exited:/);
    const made = runs().find((r) => r.id === beside.run);
    assert.deepEqual(made.fork_of, { parent: bank.passing, step: 30 });
    assert.equal(made.steps, beside.steps);
    const [, still] = await stopAfter(dc, () => dc.nextRequest({ threadId: tid }));
    assert.equal(still.run, bank.passing);
    // Continuing in it: continued, invalidated, a restart stop in the fork at that step.
    const continued = dc.waitForEvent('continued', 60000);
    const invalidated = dc.waitForEvent('invalidated', 60000);
    const forked2 = dc.waitForEvent('rewind/forked', 60000);
    const [s, inFork] = await stopAfter(dc, () => dc.customRequest('rewind/fork', { seed: 7, open: true }));
    const f = (await forked2).body;
    assert.equal((await continued).body.allThreadsContinued, true);
    assert.deepEqual((await invalidated).body.areas, ['all']);
    assert.equal(s.reason, 'restart');
    assert.deepEqual(f.with, { seed: 7 });
    assert.equal(f.step, still.step);
    assert.equal(inFork.run, f.run);
    assert.equal(inFork.step, still.step);
    assert.ok(runs().some((r) => r.id === f.run));
    await assert.rejects(dc.customRequest('rewind/fork', { schedule: 1, seed: 1 }), /`schedule` or `seed`, not both/);
    await assert.rejects(dc.customRequest('rewind/fork', { schedule: 'x' }), /`schedule`/);
    void pos;
  } finally {
    await dc.stop();
  }
});

test('lanes, check from here with progress and cancel, and compare on bank', async () => {
  const dc = await session();
  try {
    const [, pos, tl] = await open(dc, { run: bank.failing, compare: bank.passing, step: bank.deciding });
    assert.equal(pos.step, bank.deciding);
    assert.equal(tl.compare.run, bank.passing);
    assert.equal(tl.compare.identical, false);

    const lanes = (await dc.customRequest('rewind/lanes', { from: 0, to: tl.steps })).body;
    assert.ok(lanes.threads.length >= 3, JSON.stringify(lanes));
    for (const t of lanes.threads) {
      assert.ok(t.stretches.length > 0);
      for (const [a, b] of t.stretches) assert.ok(a <= b && b <= tl.steps);
    }
    assert.equal(lanes.compare.run, bank.passing);
    const small = (await dc.customRequest('rewind/lanes', { max: 1 })).body;
    for (const t of small.threads) assert.ok(t.stretches.length <= 1);

    const cmp = (await dc.customRequest('rewind/compare', {})).body;
    assert.equal(cmp.identical, false);
    assert.equal(cmp.left, bank.failing);
    assert.equal(cmp.right, bank.passing);
    assert.ok(cmp.shared.length > 0);
    assert.ok(cmp.leftStep >= bank.deciding);

    const evs = (await dc.customRequest('rewind/events', { from: 0, to: 60, kinds: ['syscall'], text: 'write(' })).body;
    assert.ok(evs.events.length >= 2);
    for (const e of evs.events) assert.match(e.text, /write\(/);

    // Check from here: progress, one result per schedule.
    const starts = [];
    const updates = [];
    const results = [];
    dc.on('progressStart', (e) => starts.push(e.body));
    dc.on('progressUpdate', (e) => updates.push(e.body));
    dc.on('rewind/checkResult', (e) => results.push(e.body.result));
    const end = dc.waitForEvent('progressEnd', 120000);
    const check = (await dc.customRequest('rewind/check', { schedules: 3, from: 30 })).body;
    assert.equal(check.results.length, 3);
    assert.equal(check.cancelled, false);
    assert.equal(results.length, 3);
    assert.ok(starts.some((s) => s.cancellable === true));
    // One update per schedule as it ends, naming its run, the percentage rising to 100.
    const mine = updates.filter((u) => u.progressId === starts.at(-1).progressId);
    assert.equal(mine.length, 3, JSON.stringify(updates));
    for (const [i, u] of mine.entries()) {
      assert.ok(u.message.includes(check.results[i].run), `${u.message} names ${check.results[i].run}`);
      assert.ok(i === 0 || u.percentage > mine[i - 1].percentage);
    }
    assert.equal(mine.at(-1).percentage, 100);
    assert.match((await end).body.message, /of 3 schedules/);
    for (const r of check.results) assert.match(r.run, /^[0-9a-f]{16}$/);

    // Cancel a long check after its first result.
    results.length = 0;
    const first = dc.waitForEvent('rewind/checkResult', 120000);
    const long = dc.customRequest('rewind/check', { schedules: 200, from: 30 });
    await first;
    const seq = dc.sequence - 1; // the rewind/check request's seq
    await dc.customRequest('cancel', { requestId: seq });
    const done = (await long).body;
    assert.equal(done.cancelled, true);
    assert.ok(done.results.length < 200);

    // PCT from here draws its change points among the open run's steps, as
    // `rewind check --run` does: the same fork, so the same run id.
    const pct = (await dc.customRequest('rewind/check', { schedules: 1, from: 30, strategy: 'pct' })).body;
    const cli = JSON.parse(
      rewind('check', '--run', bank.failing, '--schedule-from', '30', '--strategy', 'pct', '--schedules', '1', '--no-narrow', '--json'),
    );
    assert.equal(pct.results[0].run, cli.tried[0].run);

    // Bookmarks: add, list, remove.
    const added = (await dc.customRequest('rewind/bookmark', { action: 'add', note: 'here it goes wrong' })).body;
    assert.equal(added.added.step, bank.deciding);
    assert.match(rewind('bookmarks', bank.failing), /here it goes wrong/);
    const removed = (await dc.customRequest('rewind/bookmark', { action: 'remove', step: bank.deciding })).body;
    assert.equal(removed.removed, 1);
    assert.equal(removed.bookmarks.length, 0);

    const listed = (await dc.customRequest('rewind/runs', { limit: 3 })).body.runs;
    assert.equal(listed.length, 3);
    assert.ok(listed[0].id && listed[0].status);
  } finally {
    await dc.stop();
  }
});

test('recording first and checking first', async () => {
  let dc = await session();
  try {
    const outputs = [];
    dc.on('output', (e) => outputs.push(e.body.output));
    const progress = dc.waitForEvent('progressEnd', 60000);
    const [stopped, pos] = await open(dc, { example: 'bank', runName: 'from-dap' });
    assert.match((await progress).body.message, /run [0-9a-f]{16} exited:0/);
    assert.equal(stopped.reason, 'entry');
    assert.equal(pos.step, 0);
    assert.match(outputs.join(''), /final balance/);
    assert.ok(runs().some((r) => r.name === 'from-dap'));
  } finally {
    await dc.stop();
  }
  dc = await session();
  try {
    const said = [];
    dc.on('output', (e) => said.push(e.body.output));
    const [stopped, pos, tl] = await open(dc, { check: { example: 'bank', schedules: 30, points: 'memory' } });
    assert.equal(stopped.reason, 'entry');
    assert.equal(tl.deciding, pos.step);
    assert.ok(tl.compare && tl.compare.identical === false);
    assert.match(stopped.description, /deciding/);
    // The debug console says what the check found: the deciding step, and
    // (memory points, pinned: the portfolio may find it with system-call
    // points, which record no accesses) the race on balance it interleaved.
    const console = said.join('');
    assert.match(console, new RegExp(`step ${pos.step} decides it: `));
    assert.match(console, /the interleaving: thread \d+\/\d+'s write of balance at step \d+, in teller \(bank\.c:\d+\), came between /);
  } finally {
    await dc.stop();
  }
});

test('bad launch arguments name the field', async () => {
  const cases = [
    [{ run: 'no-such-run' }, /`run`/],
    [{ run: bank.failing, step: 'x' }, /`step`/],
    [{ run: bank.failing, step: 1e9 }, /`step`.*past the end/],
    [{ run: bank.failing, compare: 7 }, /`compare`/],
    [{ program: '/no/such/program' }, /`program`/],
    [{ example: 'bank', mem: 'lots' }, /`mem`/],
    [{ example: 'bank', args: 'x' }, /`args`/],
    [{ check: 5 }, /`check`/],
    [{ run: bank.failing, forkWith: 'dice' }, /`forkWith`/],
    [{}, /`run`, `program`, `example` or `check`/],
  ];
  for (const [args, want] of cases) {
    const dc = await session();
    try {
      await dc.initializeRequest();
      await assert.rejects(dc.launchRequest(args), want, JSON.stringify(args));
      // The adapter keeps serving: a good launch after a bad one works.
      const stopped = dc.waitForEvent('stopped', 30000);
      await dc.configurationDoneRequest();
      await dc.launchRequest({ run: bank.failing });
      assert.ok((await stopped).body.reason);
    } finally {
      await dc.stop();
    }
  }
});

test('out-of-order and unknown requests get errors, and the adapter keeps serving', async () => {
  const dc = await session();
  try {
    await assert.rejects(dc.customRequest('threads'), /initialize/);
    await dc.initializeRequest();
    await assert.rejects(dc.nextRequest({ threadId: 1 }), /no run is open/);
    await assert.rejects(dc.customRequest('rewind/lanes', {}), /no run is open/);
    await assert.rejects(dc.customRequest('flyToMoon', {}), /unknown command `flyToMoon`/);
    await assert.rejects(dc.customRequest('rewind/nothing', {}), /unknown command/);
    await assert.rejects(dc.customRequest('next', { threadId: 'one' }), /bad arguments for `next`/);
    const stopped = dc.waitForEvent('stopped', 30000);
    await dc.configurationDoneRequest();
    await dc.launchRequest({ run: bank.failing, step: 5 });
    await stopped;
    await assert.rejects(dc.launchRequest({ run: bank.failing }), /already open/);
    await assert.rejects(dc.stackTraceRequest({ threadId: 99999 }), /not alive/);
    await assert.rejects(dc.customRequest('rewind/goto', { step: 'x' }), /`step`/);
    await assert.rejects(dc.customRequest('rewind/goto', {}), /`step` is required/);
    await assert.rejects(dc.customRequest('rewind/bookmark', { action: 'eat' }), /`action`/);
    const cat = (await dc.customRequest('rewind/cat', { path: '/nothing-here' })).body;
    assert.equal(cat.exists, false);
    const threads = (await dc.threadsRequest()).body.threads;
    assert.ok(threads.length > 0);
  } finally {
    await dc.stop();
  }
});

test('terminate stops the session: `terminated`, errors until disconnect, the store as it was', async () => {
  const before = storeState();
  const listed = rewind('ls', '--json');
  const dc = await session();
  let disconnected = false;
  try {
    // attach takes launch's arguments.
    const stopped = dc.waitForEvent('stopped', 30000);
    await dc.initializeRequest();
    await dc.attachRequest({ run: pool.failing, step: 20 });
    await dc.configurationDoneRequest();
    assert.equal((await stopped).body.reason, 'entry');
    const tid = (await dc.threadsRequest()).body.threads[0].id;
    // A session that moves about, breaks and watches, and writes nothing.
    const [, pos] = await stopAfter(dc, () => dc.nextRequest({ threadId: tid }));
    assert.ok(pos.step > 20);
    await dc.setFunctionBreakpointsRequest({ breakpoints: [{ name: 'worker' }, { name: 'write' }] });
    await stopAfter(dc, () => dc.continueRequest({ threadId: tid }));
    await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: tid }));
    await stopAfter(dc, () => dc.customRequest('rewind/goto', { step: 40 }));
    await dc.customRequest('rewind/lanes', {});
    await dc.customRequest('rewind/cat', { path: '/examples/pool' });

    const terminated = dc.waitForEvent('terminated', 30000);
    await dc.terminateRequest({});
    await terminated;
    await assert.rejects(dc.nextRequest({ threadId: tid }), /terminated/);
    await assert.rejects(dc.customRequest('rewind/goto', { step: 3 }), /terminated/);
    await assert.rejects(dc.launchRequest({ run: pool.failing }), /terminated/);
    assert.deepEqual((await dc.threadsRequest()).body.threads, []);
    await dc.disconnectRequest({});
    disconnected = true;
  } finally {
    // The adapter is gone after a disconnect: writing another would fail.
    if (disconnected) dc.stopAdapter();
    else await dc.stop();
  }
  assert.equal(rewind('ls', '--json'), listed);
  assert.deepEqual(storeState(), before);
});

test('rewind/cat: a file the guest wrote, before and after it did', async () => {
  const FS_TOOL = process.env.FS_TOOL;
  assert.ok(FS_TOOL, 'FS_TOOL names the built guest/tests/fs-tool');
  rewind('run', '-q', '--', FS_TOOL, 'write', '/tmp/made.txt');
  const id = runs()[0].id;
  const dc = await session();
  try {
    await open(dc, { run: id, step: 0 });
    const ev = (await dc.customRequest('rewind/events', { kinds: ['syscall'], text: '/tmp/made.txt' })).body.events;
    const opened = ev.find((e) => /^openat\(/.test(e.text));
    assert.ok(opened, JSON.stringify(ev));
    const written = (await dc.customRequest('rewind/events', { from: opened.step, kinds: ['syscall'], text: 'write(3' })).body.events[0];
    const at = async (step) => (await dc.customRequest('rewind/cat', { path: '/tmp/made.txt', step })).body;
    assert.deepEqual(await at(opened.step - 1), { path: '/tmp/made.txt', step: opened.step - 1, exists: false });
    const empty = await at(opened.step);
    assert.equal(empty.exists, true);
    assert.equal(empty.size, 0);
    assert.deepEqual(await at(written.step), {
      path: '/tmp/made.txt', step: written.step, exists: true, size: 19, utf8: true, text: 'written by fs-tool\n',
    });
    // Without `step`, at the position.
    await stopAfter(dc, () => dc.customRequest('rewind/goto', { step: written.step }));
    assert.equal((await dc.customRequest('rewind/cat', { path: '/tmp/made.txt' })).body.text, 'written by fs-tool\n');
    await assert.rejects(dc.customRequest('rewind/cat', {}), /`path` is required/);
  } finally {
    await dc.stop();
  }
});

/** A raw client: frames written by hand, to send what no client library would. */
function raw() {
  const p = spawn(BIN, ['dap'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let buf = Buffer.alloc(0);
  const messages = [];
  const waiters = [];
  p.stdout.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      const h = buf.indexOf('\r\n\r\n');
      if (h < 0) break;
      const len = Number(/Content-Length: (\d+)/.exec(buf.slice(0, h).toString())[1]);
      if (buf.length < h + 4 + len) break;
      const m = JSON.parse(buf.slice(h + 4, h + 4 + len).toString());
      buf = buf.slice(h + 4 + len);
      messages.push(m);
      for (const w of [...waiters]) if (w.pred(m)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(m); }
    }
  });
  const exited = new Promise((r) => p.on('exit', (code, sig) => r({ code, sig })));
  return {
    p,
    exited,
    messages,
    sendBytes: (s) => p.stdin.write(`Content-Length: ${Buffer.byteLength(s)}\r\n\r\n${s}`),
    send: (o) => { const s = JSON.stringify(o); p.stdin.write(`Content-Length: ${Buffer.byteLength(s)}\r\n\r\n${s}`); },
    wait: (pred) => {
      const m = messages.find(pred);
      if (m) return Promise.resolve(m);
      return new Promise((resolve) => waiters.push({ pred, resolve }));
    },
  };
}

test('malformed JSON gets an error response and the adapter keeps serving', async () => {
  const c = raw();
  c.sendBytes('{this is not json');
  const bad = await c.wait((m) => m.type === 'response' && m.success === false);
  assert.match(bad.message, /malformed JSON/);
  c.sendBytes('{"type":"request","command":"initialize"}');
  const noSeq = await c.wait((m) => m.type === 'response' && /seq/.test(m.message || ''));
  assert.equal(noSeq.success, false);
  c.send({ seq: 3, type: 'request', command: 'initialize', arguments: { adapterID: 'rewind' } });
  const init = await c.wait((m) => m.request_seq === 3);
  assert.equal(init.success, true);
  assert.equal(init.body.supportsStepBack, true);
  c.send({ seq: 4, type: 'request', command: 'disconnect', arguments: {} });
  await c.wait((m) => m.request_seq === 4);
  const { code } = await c.exited;
  assert.equal(code, 0);
});

test('a client that leaves mid-request ends the adapter cleanly', async () => {
  const c = raw();
  c.send({ seq: 1, type: 'request', command: 'initialize', arguments: { adapterID: 'rewind' } });
  c.send({ seq: 2, type: 'request', command: 'launch', arguments: { run: bank.failing } });
  c.send({ seq: 3, type: 'request', command: 'configurationDone' });
  await c.wait((m) => m.event === 'stopped');
  c.send({ seq: 4, type: 'request', command: 'rewind/check', arguments: { schedules: 500, from: 30 } });
  await c.wait((m) => m.event === 'rewind/checkResult');
  c.p.stdin.end();
  const { code } = await c.exited;
  assert.equal(code, 0);
  // A framing error ends the session with `terminated`, never a hang.
  const d = raw();
  d.p.stdin.write('this is not a header\r\n\r\n');
  await d.wait((m) => m.event === 'terminated');
  d.p.stdin.end();
  assert.equal((await d.exited).code, 0);
});

test('a run removed under the session gives errors, not a crash', async () => {
  const made = JSON.parse(rewind('check', '--example', 'pool', '--json', '--schedules', '2', '--no-narrow'));
  const victim = made.base.run;
  const dc = await session();
  try {
    const [stopped] = await open(dc, { run: victim, step: 5 });
    replayIdentical(victim);
    rewind('remove', victim);
    await assert.rejects(dc.nextRequest({ threadId: stopped.threadId }), /removed|no such|not found/i);
    // What was already shown still answers.
    assert.ok((await dc.threadsRequest()).body.threads.length > 0);
  } finally {
    await dc.stop();
  }
});

test('TCP: --port serves sessions on loopback', async () => {
  const p = spawn(BIN, ['dap', '--port', '0'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  try {
    const [port, tokenFile] = await new Promise((resolve, reject) => {
      let err = '';
      p.stderr.on('data', (d) => {
        err += d;
        const m = /listening on 127\.0\.0\.1:(\d+); clients first send the line in (\S+)\n/.exec(err);
        if (m) resolve([Number(m[1]), m[2]]);
      });
      p.on('exit', () => reject(new Error(`rewind dap exited: ${err}`)));
    });
    const token = readFileSync(tokenFile, 'utf8');
    // What DebugClient.start(port) does, with the token's line sent first.
    const connect = async () => {
      const dc = new DebugClient(BIN, 'dap', 'rewind');
      dc.defaultTimeout = 240000;
      const sock = createConnection(port, '127.0.0.1');
      await once(sock, 'connect');
      sock.write(token);
      dc._socket = sock;
      dc.connect(sock, sock);
      return dc;
    };
    for (let i = 0; i < 2; i++) {
      const dc = await connect();
      try {
        const [stopped] = await open(dc, { run: bank.failing, step: 10 + i });
        assert.equal(stopped.reason, 'entry');
      } finally {
        await dc.stop();
      }
    }

    // Two sessions at once on one store, each forking and checking from the same run.
    const before = new Set(runs().map((r) => r.id));
    const [a, b] = await Promise.all([connect(), connect()]);
    try {
      await Promise.all([
        open(a, { run: bank.failing, step: bank.deciding }),
        open(b, { run: bank.failing, step: bank.deciding, forkWith: 'seed' }),
      ]);
      const work = async (dc, frameTid) => {
        const checked = dc.customRequest('rewind/check', { schedules: 3, from: 20 });
        const c = (await checked).body;
        const beside = (await dc.customRequest('rewind/fork', { step: 25, schedule: 2 })).body;
        const forked = dc.waitForEvent('rewind/forked', 240000);
        await dc.restartFrameRequest({ frameId: frameTid << 8 });
        const f = (await forked).body;
        return { checked: c.results.map((r) => r.run), fork: f.run, beside: beside.run };
      };
      const tidOf = async (dc) => (await dc.threadsRequest()).body.threads[0].id;
      const [wa, wb] = await Promise.all([work(a, await tidOf(a)), work(b, await tidOf(b))]);
      assert.notEqual(wa.fork, wb.fork, 'a schedule fork and a seed fork differ');
      // The same schedules and forks of the same run are the same runs, whichever session made them.
      assert.deepEqual(wa.checked, wb.checked);
      assert.equal(wa.beside, wb.beside);
      const after = runs();
      const ids = after.map((r) => r.id);
      assert.equal(new Set(ids).size, ids.length, 'no run is listed twice');
      for (const id of [...wa.checked, wa.fork, wb.fork, wa.beside]) assert.ok(ids.includes(id), `rewind ls lists ${id}`);
      assert.ok(after.filter((r) => !before.has(r.id)).length >= 3);
      // The after() hook replays every run of the store.
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  } finally {
    p.kill();
  }
});
