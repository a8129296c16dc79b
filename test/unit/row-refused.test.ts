import assert from 'node:assert/strict';
import { test } from 'node:test';
import { eachUnlessRefused, isRowRefused, refusalReason } from '../../src/runtime/row-refused.js';

test('class 23 (integrity constraint violations) is a refused row; other errors are not', () => {
  for (const code of ['23514', '23505', '23503', '23502', '23P01', '23000']) assert.ok(isRowRefused({ code }), code);
  for (const err of [{ code: '40001' }, { code: '57P01' }, { code: '08006' }, { code: 23514 }, {}, null, undefined])
    assert.equal(isRowRefused(err), false, JSON.stringify(err));
  assert.equal(isRowRefused({ code: 'ECONNREFUSED' }), false);
});

test('the reason names the constraint and SQLSTATE, never the message or the failing row', () => {
  const err = Object.assign(new Error('new row violates check constraint "outbox_envelope_event_type"'), {
    code: '23514',
    constraint: 'outbox_envelope_event_type',
    detail: 'Failing row contains (1, ev, order, o-1, 1, Order Paid, {"email": "a@b.example"}).',
  });
  assert.equal(
    refusalReason(err),
    'CONVERGE_OUTBOX_ROW_REFUSED: constraint outbox_envelope_event_type (SQLSTATE 23514)',
  );
  assert.doesNotMatch(refusalReason(err), /a@b|Failing/);
  assert.equal(refusalReason({ code: '23502' }), 'CONVERGE_OUTBOX_ROW_REFUSED: an integrity rule (SQLSTATE 23502)');
  // A name that is no identifier is left out rather than written into last_error.
  assert.equal(
    refusalReason({ code: '23514', constraint: 'x"; DROP' }),
    'CONVERGE_OUTBOX_ROW_REFUSED: an integrity rule (SQLSTATE 23514)',
  );
});

test('a statement over rows the table refuses one of is run row by row: the others go through, the refused are named', async () => {
  const runs: number[][] = [];
  const { rows, refused } = await eachUnlessRefused([1, 2, 3], (items) => {
    runs.push(items);
    if (items.includes(2)) return Promise.reject(Object.assign(new Error('check'), { code: '23514' }));
    return Promise.resolve(items.map((item) => item * 10));
  });
  assert.deepEqual(runs, [[1, 2, 3], [1], [2], [3]]);
  assert.deepEqual(rows, [10, 30]);
  assert.deepEqual(
    refused.map((r) => r.item),
    [2],
  );
  await assert.rejects(
    eachUnlessRefused([1], () => Promise.reject(Object.assign(new Error('gone'), { code: '08006' }))),
    /gone/,
    'a failing database is not a refused row',
  );
});
