// Program variables in `rewind dap`, by the DebugClient of
// @vscode/debugadapter-testsupport: the Locals and Arguments scopes,
// expanding a struct, a pointer and a Vec, paging an array, evaluate for
// hover, watch and REPL, setVariable. tests/tests/dap_variables.rs records
// the runs (guest/tests/values.c and values.rs), names them in VALUES_C and
// VALUES_RUST with the step of their mark, and replays them afterwards.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { session, open as openRun, vars, byName } from './session.mjs';

const BIN = process.env.REWIND_BIN;
assert.ok(BIN, 'REWIND_BIN must name the built rewind binary');
const [C_RUN, C_STEP] = (process.env.VALUES_C || '').split(':');
const [RUST_RUN, RUST_STEP] = (process.env.VALUES_RUST || '').split(':');
const POOL = process.env.POOL_FAILING;
assert.ok(C_RUN && RUST_RUN && POOL, 'VALUES_C, VALUES_RUST (run:step) and POOL_FAILING must be set');

/** Opens `run` at `step` (at its end without one); returns the stopped thread's frames. */
async function open(dc, run, step) {
  const args = step === undefined ? { run } : { run, step: Number(step) };
  const tid = (await openRun(dc, args)).threadId;
  return (await dc.stackTraceRequest({ threadId: tid })).body.stackFrames;
}

test('C: locals, arguments, a struct through a pointer, an array paged, expressions, setVariable', async () => {
  const dc = await session();
  try {
    const frames = await open(dc, C_RUN, C_STEP);
    const inspect = frames.find((f) => f.name === 'inspect');
    assert.ok(inspect, JSON.stringify(frames.map((f) => f.name)));
    const scopes = (await dc.scopesRequest({ frameId: inspect.id })).body.scopes;
    assert.deepEqual(scopes.map((s) => s.name), ['Locals', 'Arguments', 'Globals', 'Step', 'Registers']);

    const args = await vars(dc, scopes[1].variablesReference);
    assert.deepEqual(args.map((v) => v.name), ['head', 'count', 'label']);
    assert.equal(byName(args, 'count').value, '3');
    assert.match(byName(args, 'label').value, /^0x[0-9a-f]+ "list"$/);
    const head = byName(args, 'head');
    assert.equal(head.type, 'node_t *');
    assert.ok(head.variablesReference > 0);

    const locals = await vars(dc, scopes[0].variablesReference);
    assert.equal(byName(locals, 'inner').value, '300');
    assert.equal(byName(locals, 'origin').value, '{x = 3, y = -4}');
    assert.equal(byName(locals, 'word').value, '"hello"');
    assert.equal(byName(locals, 'shade').value, 'GREEN');
    const squares = byName(locals, 'squares');
    assert.equal(squares.indexedVariables, 8);
    assert.match(squares.memoryReference, /^0x[0-9a-f]+$/);

    // Expand the struct head points to, then its nested struct.
    const members = await vars(dc, head.variablesReference);
    assert.deepEqual(
      members.map((m) => m.name),
      ['value', 'name', 'next', 'at', 'grid', 'color', 'bits', 'flag', 'level'],
    );
    assert.equal(byName(members, 'value').value, '1');
    assert.equal(byName(members, 'level').value, '5');
    const at = byName(members, 'at');
    assert.equal(at.evaluateName, '(head)->at');
    const xy = await vars(dc, at.variablesReference);
    assert.deepEqual(xy.map((m) => `${m.name}=${m.value}`), ['x=10', 'y=11']);
    const next = await vars(dc, byName(members, 'next').variablesReference);
    assert.match(byName(next, 'name').value, /"second"$/);

    // Paging: elements 2..4 of squares.
    const page = await vars(dc, squares.variablesReference, { filter: 'indexed', start: 2, count: 3 });
    assert.deepEqual(page.map((e) => `${e.name}=${e.value}`), ['[2]=4', '[3]=9', '[4]=16']);

    // Expressions, for each context.
    const ev = async (expression, context = 'repl') =>
      (await dc.evaluateRequest({ expression, frameId: inspect.id, context })).body;
    assert.equal((await ev('head->next->next->value', 'hover')).result, '3');
    assert.equal((await ev('squares[3] + count * 2', 'watch')).result, '15');
    assert.equal((await ev('*&squares[5]')).result, '25');
    assert.equal((await ev('head->grid[1][2]')).result, '6');
    assert.equal((await ev('counter')).result, '7');
    assert.match((await ev('$rip')).result, /^0x[0-9a-f]+$/);
    const expanded = await ev('*head');
    assert.ok(expanded.variablesReference > 0);
    assert.equal(byName(await vars(dc, expanded.variablesReference), 'color').value, 'GREEN');
    // The evaluateName a child gives evaluates to the same value.
    assert.equal((await ev(at.evaluateName + '.y')).result, '11');
    await assert.rejects(ev('nosuch'), /no variable `nosuch`/);
    await assert.rejects(ev('head->'), /member name/);
    // The step's own names still evaluate.
    assert.equal((await ev('step')).result, C_STEP);

    // setVariable writes memory and says the run is no longer the recording.
    const said = dc.waitForEvent('output', 30000);
    const set = (await dc.setVariableRequest({
      variablesReference: scopes[0].variablesReference, name: 'total', value: '41',
    })).body;
    assert.equal(set.value, '41');
    assert.match((await said).body.output, /no longer the recording/);
    assert.equal((await ev('total + 1')).result, '42');
    await assert.rejects(
      dc.setVariableRequest({ variablesReference: scopes[0].variablesReference, name: 'total', value: 'x' }),
      /`value`/,
    );
    // Bad references are errors that name the field; the adapter keeps serving.
    await assert.rejects(dc.variablesRequest({ variablesReference: (5 * 2 ** 32) + 99999 }), /variablesReference/);
    await assert.rejects(dc.scopesRequest({ frameId: 'x' }), /bad arguments for `scopes`/);
    await assert.rejects(dc.variablesRequest({ variablesReference: 3 * 2 ** 32 + (99999 << 8) }), /frameId/);
    await assert.rejects(
      dc.setVariableRequest({ variablesReference: scopes[0].variablesReference, name: 'nosuch', value: '1' }),
      /`name`/,
    );
    assert.equal((await ev('count')).result, '3');
  } finally {
    await dc.stop();
  }
});

test('Rust: a Vec expands, String, &str, Option, enums and Box show as Rust writes them', async () => {
  const dc = await session();
  try {
    const frames = await open(dc, RUST_RUN, RUST_STEP);
    const inspect = frames.find((f) => f.name === 'values::inspect');
    assert.ok(inspect, JSON.stringify(frames.map((f) => f.name)));
    const scopes = (await dc.scopesRequest({ frameId: inspect.id })).body.scopes;
    const args = await vars(dc, scopes[1].variablesReference);
    const locals = await vars(dc, scopes[0].variablesReference);
    const numbers = byName(args, 'numbers');
    assert.equal(numbers.value, '&[10, 20, 30]');
    assert.equal(numbers.indexedVariables, 3);
    const items = await vars(dc, numbers.variablesReference);
    assert.deepEqual(items.map((e) => `${e.name}=${e.value}`), ['[0]=10', '[1]=20', '[2]=30']);
    assert.equal(byName(args, 'owner').value, '&"ada"');
    assert.equal(byName(args, 'name').value, '"hi"');
    assert.equal(byName(args, 'some').value, 'Some(42)');
    assert.equal(byName(locals, 'none').value, 'None');
    assert.equal(byName(locals, 'shape').value, 'Rect(3, 4)');
    assert.equal(byName(locals, 'circle').value, 'Circle {r: 1.5}');
    assert.equal(byName(locals, 'words').value, '["one", "two"]');
    const account = byName(args, 'account');
    assert.match(account.value, /^box \{id: 2, owner: "ada", balance: 100/);
    const fields = await vars(dc, account.variablesReference);
    assert.deepEqual(fields.map((f) => f.name), ['id', 'owner', 'balance', 'parent']);
    const ev = async (expression) =>
      (await dc.evaluateRequest({ expression, frameId: inspect.id, context: 'watch' })).body.result;
    assert.equal(await ev('numbers[2] + account.balance'), '130');
    assert.equal(await ev('account.parent.0.owner'), '"root"');
  } finally {
    await dc.stop();
  }
});

test('pool: at the crash, the worker\'s locals, and the queue main freed', async () => {
  const dc = await session();
  try {
    const frames = await open(dc, POOL);
    const worker = frames.find((f) => f.name === 'worker');
    assert.ok(worker, JSON.stringify(frames.map((f) => f.name)));
    const scopes = (await dc.scopesRequest({ frameId: worker.id })).body.scopes;
    const locals = await vars(dc, scopes[0].variablesReference);
    for (const name of ['cost', 'me', 'pass']) byName(locals, name);
    // The loop's index, when the position is inside its block: at -O1 it
    // lives in a register gcc gives no location for there.
    const i = locals.find((v) => v.name === 'i');
    if (i) assert.equal(i.value, '<optimized out>');
    assert.match(byName(locals, 'me').value, /^[01]$/);
    assert.match(byName(locals, 'pass').value, /^[1-9]\d*$/);
    const ev = async (expression) =>
      (await dc.evaluateRequest({ expression, frameId: worker.id, context: 'hover' })).body.result;
    assert.equal(await ev('pool.queue'), '0x0');
    assert.equal(await ev('pool.stop'), '1');
    assert.equal(await ev('pool.queue[0].cost'), '<unreadable 0x8>');
    await assert.rejects(ev('pool.queue[i].cost'), /optimized out|no variable `i`/);
    assert.match(await ev('pool'), /^\{lock = \{__data = /);
  } finally {
    await dc.stop();
  }
});
