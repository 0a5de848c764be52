// Variables by name where the debug core stops, driven by the DebugClient
// of @vscode/debugadapter-testsupport on tests' `account` (a C pthread
// program at -O0: a global balance a thread overdraws, a static count, a
// thread-local, errno after a failed open): breakpoint conditions over
// variables both ways, the Globals scope, data breakpoints on a variable,
// thread-locals, logpoints printing as continue and reverseContinue pass
// them, errno with glibc and musl. Needs REWIND_BIN, ACCOUNT and
// ACCOUNT_SOURCE (ACCOUNT_MUSL when musl-gcc built it); every run is
// replayed at the end.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { session, open, stopAfter, top, vars, byName, scratchHome, lineFinder } from './session.mjs';

const { REWIND_BIN, ACCOUNT, ACCOUNT_MUSL, ACCOUNT_SOURCE: SOURCE } = process.env;
assert.ok(REWIND_BIN && ACCOUNT && SOURCE, 'REWIND_BIN, ACCOUNT and ACCOUNT_SOURCE must be set');
const home = scratchHome('rewind-dap-account-');
const env = home.env;
const lineOf = lineFinder(SOURCE);
const LINE_SPENT = lineOf('spent += amount;');
const LINE_MARK = lineOf('write(1, "mark');
const LINE_LOOP_CALL = lineOf('        withdraw(amount);');
const LINE_WITHDRAW_END = lineOf('withdrawals++;') + 1;
const LINE_COUNT = lineOf('withdrawals++;');
const LINE_CHARGE_END = lineOf('return amount;') + 1;

/** Records `prog`; its run id. */
function record(prog) {
  const { id, out } = home.record(prog);
  assert.match(out, /mark/);
  return id;
}

let run;
let musl;

before(() => {
  run = record(ACCOUNT);
  if (ACCOUNT_MUSL) musl = record(ACCOUNT_MUSL);
});

after(() => home.finish());

const breakAt = (dc, line, more = {}) =>
  dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: line ? [{ line, ...more }] : [] });

async function evaluate(dc, expression, frameId) {
  return (await dc.evaluateRequest({ expression, frameId, context: 'watch' })).body.result;
}

test('a condition over variables stops both ways; Globals; thread-locals per thread', async () => {
  const dc = await session(env);
  try {
    await open(dc, { run, step: 0 });
    const set = (await breakAt(dc, LINE_SPENT, { condition: 'balance < 0' })).body;
    assert.equal(set.breakpoints[0].verified, true, JSON.stringify(set));
    const [bp] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    assert.equal(bp.reason, 'breakpoint', JSON.stringify(bp));
    let f = await top(dc, bp.threadId);
    assert.equal(f.name, 'withdraw');
    assert.equal(f.line, LINE_SPENT);
    // The third withdrawal of the spender thread overdrew the account.
    assert.notEqual(bp.threadId, 1000);
    assert.equal(await evaluate(dc, 'balance', f.id), '-30');
    assert.equal(await evaluate(dc, 'amount', f.id), '40');
    assert.equal(await evaluate(dc, 'spent', f.id), '80');
    assert.equal(await evaluate(dc, 'withdrawals', f.id), '3');
    // Casts and sizeof.
    assert.equal(await evaluate(dc, 'sizeof(balance) + sizeof(int)', f.id), '12');
    assert.equal(await evaluate(dc, '*(long *)&balance', f.id), '-30');
    const asInt = (await dc.evaluateRequest({ expression: '(int)balance', frameId: f.id, context: 'repl' })).body;
    assert.equal(asInt.result, '-30');
    assert.equal(asInt.type, 'int');
    assert.equal(await evaluate(dc, '(unsigned char)balance == 226', f.id), '1');

    // The Globals scope: the unit's globals, statics and thread-locals.
    const scopes = (await dc.scopesRequest({ frameId: f.id })).body.scopes;
    assert.deepEqual(scopes.map((s) => s.name), ['Locals', 'Arguments', 'Globals', 'Step', 'Registers']);
    const globals = await vars(dc, byName(scopes, 'Globals').variablesReference);
    assert.equal(byName(globals, 'balance').value, '-30');
    assert.equal(byName(globals, 'withdrawals').value, '3');
    assert.equal(byName(globals, 'spent').value, '80');
    assert.equal(byName(globals, 'balance').type, 'long int');

    // Backwards, another condition: main's own withdrawal, where its own
    // thread-local is still 0.
    await breakAt(dc, LINE_SPENT, { condition: 'balance > 50 && amount == 10' });
    const [back] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: bp.threadId }));
    assert.equal(back.reason, 'breakpoint');
    assert.equal(back.threadId, 1000);
    f = await top(dc, back.threadId);
    assert.equal(f.line, LINE_SPENT);
    assert.equal(await evaluate(dc, 'balance', f.id), '90');
    assert.equal(await evaluate(dc, 'spent', f.id), '0');

    // A condition naming no variable stops and says why.
    await breakAt(dc, LINE_SPENT, { condition: 'nosuch > 1' });
    const [bad] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    assert.equal(bad.reason, 'breakpoint');
    assert.match(bad.description, /no variable `nosuch`/);
  } finally {
    await dc.stop();
  }
});

test('a data breakpoint on a variable by name, from Globals and from an expression', async () => {
  const dc = await session(env);
  try {
    await open(dc, { run, step: 0 });
    await breakAt(dc, LINE_SPENT);
    const [bp] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    const f = await top(dc, bp.threadId);
    assert.equal(await evaluate(dc, 'balance', f.id), '90');
    const scopes = (await dc.scopesRequest({ frameId: f.id })).body.scopes;
    const globals = byName(scopes, 'Globals').variablesReference;
    const info = (await dc.dataBreakpointInfoRequest({ variablesReference: globals, name: 'balance' })).body;
    assert.match(info.dataId, /^0x[0-9a-f]+\/8$/, JSON.stringify(info));
    assert.equal(byName(await vars(dc, globals), 'balance').memoryReference, info.dataId.split('/')[0]);
    const byExpr = (await dc.dataBreakpointInfoRequest({ name: 'balance', frameId: f.id })).body;
    assert.equal(byExpr.dataId, info.dataId);
    const local = byName((await vars(dc, byName(scopes, 'Arguments').variablesReference)), 'amount');
    const onArg = (await dc.dataBreakpointInfoRequest({ variablesReference: byName(scopes, 'Arguments').variablesReference, name: 'amount' })).body;
    assert.equal(onArg.dataId, `${local.memoryReference}/8`);

    await breakAt(dc, 0);
    await dc.setDataBreakpointsRequest({ breakpoints: [{ dataId: info.dataId, accessType: 'write' }] });
    const [w] = await stopAfter(dc, () => dc.continueRequest({ threadId: bp.threadId }));
    assert.equal(w.reason, 'data breakpoint', JSON.stringify(w));
    assert.notEqual(w.threadId, 1000);
    assert.equal(await evaluate(dc, 'balance', (await top(dc, w.threadId)).id), '50');
    // Back: main's write of 90.
    const [wb] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: w.threadId }));
    assert.equal(wb.reason, 'data breakpoint');
    assert.equal(wb.threadId, 1000);
    assert.equal(await evaluate(dc, 'balance', (await top(dc, 1000)).id), '90');
  } finally {
    await dc.stop();
  }
});

test('logpoints print what continue and reverseContinue pass, with variables', async () => {
  const dc = await session(env);
  const outputs = [];
  dc.on('output', (e) => outputs.push(e.body.output));
  try {
    await open(dc, { run, step: 0 });
    await dc.setBreakpointsRequest({ source: { path: SOURCE }, breakpoints: [
      { line: LINE_SPENT, logMessage: 'balance={balance} spent={spent} by {amount}' },
      { line: LINE_MARK },
    ] });
    const logged = () => outputs.filter((o) => o.includes('balance=')).map((o) => o.replace(/^step \d+ (\d+) \S*: /, '$1 ').trim());
    const want = ['1000 balance=90 spent=0 by 10', /^\d+ balance=50 spent=0 by 40$/, /^\d+ balance=10 spent=40 by 40$/, /^\d+ balance=-30 spent=80 by 40$/];
    const check = (lines) => {
      assert.equal(lines.length, 4, JSON.stringify(lines));
      assert.equal(lines[0], want[0]);
      want.slice(1).forEach((re, i) => assert.match(lines[i + 1], re));
    };
    // After the fact: every hit in the recording, in order.
    for (let i = 0; i < 50 && logged().length < 4; i++) await new Promise((r) => setTimeout(r, 100));
    check(logged());
    const listed = 4;
    const [bp] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    assert.equal(bp.reason, 'breakpoint');
    assert.equal((await top(dc, bp.threadId)).line, LINE_MARK);
    check(logged().slice(listed));
    const [back] = await stopAfter(dc, () => dc.reverseContinueRequest({ threadId: bp.threadId }));
    assert.equal(back.reason, 'entry');
    check(logged().slice(listed + 4));
  } finally {
    await dc.stop();
  }
});

test('rewind/reverseStepIn goes back into the call the previous line made', async () => {
  const dc = await session(env);
  try {
    await open(dc, { run, step: 0 });
    await breakAt(dc, LINE_LOOP_CALL);
    const [bp] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
    const tid = bp.threadId;
    assert.equal((await top(dc, tid)).line, LINE_LOOP_CALL);
    await breakAt(dc, 0);
    await stopAfter(dc, () => dc.nextRequest({ threadId: tid }));
    let f = await top(dc, tid);
    assert.equal(f.name, 'spender');
    assert.notEqual(f.line, LINE_LOOP_CALL);
    // stepBack goes over the call; reverseStepIn into it, at its last line.
    const [over] = await stopAfter(dc, () => dc.stepBackRequest({ threadId: tid }));
    assert.equal(over.reason, 'step');
    assert.equal((await top(dc, tid)).line, LINE_LOOP_CALL);
    await stopAfter(dc, () => dc.nextRequest({ threadId: tid }));
    const [into] = await stopAfter(dc, () => dc.customRequest('rewind/reverseStepIn', { threadId: tid }));
    assert.equal(into.reason, 'step');
    f = await top(dc, tid);
    assert.equal(f.name, 'withdraw');
    assert.equal(f.line, LINE_WITHDRAW_END);
    assert.equal(await evaluate(dc, 'withdrawals', f.id), '2');
    // A line without a call: as stepBack.
    await stopAfter(dc, () => dc.customRequest('rewind/reverseStepIn', { threadId: tid }));
    f = await top(dc, tid);
    assert.equal(f.line, LINE_COUNT);
    assert.equal(await evaluate(dc, 'withdrawals', f.id), '1');
    await stopAfter(dc, () => dc.customRequest('rewind/reverseStepIn', { threadId: tid }));
    assert.equal((await top(dc, tid)).line, LINE_SPENT);
    // balance -= charge(amount): into charge.
    await stopAfter(dc, () => dc.customRequest('rewind/reverseStepIn', { threadId: tid }));
    f = await top(dc, tid);
    assert.equal(f.name, 'charge');
    assert.equal(f.line, LINE_CHARGE_END);
    await assert.rejects(dc.customRequest('rewind/reverseStepIn', { threadId: 'x' }), /threadId/);
  } finally {
    await dc.stop();
  }
});

for (const [libc, which] of [['glibc', () => run], ['musl', () => musl]]) {
  test(`errno after a failed open (${libc})`, async (t) => {
    if (!which()) {
      t.skip('account-musl was not built (scripts/setup installs musl-tools)');
      return;
    }
    const dc = await session(env);
    try {
      await open(dc, { run: which(), step: 0 });
      await breakAt(dc, LINE_MARK);
      const [bp] = await stopAfter(dc, () => dc.continueRequest({ threadId: 1000 }));
      const f = await top(dc, bp.threadId);
      assert.equal(f.line, LINE_MARK);
      const errno = (await dc.evaluateRequest({ expression: 'errno', frameId: f.id, context: 'repl' })).body;
      assert.equal(errno.result, '2');
      assert.equal(errno.type, 'int');
      assert.equal(await evaluate(dc, 'errno == 2 && spent == 10', f.id), '1');
    } finally {
      await dc.stop();
    }
  });
}
