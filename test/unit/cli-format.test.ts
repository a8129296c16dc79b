import assert from 'node:assert/strict';
import { test } from 'node:test';
import { retryReport } from '../../src/cli/format.js';

test('retryReport: the count alone when nothing was refused', () => {
  assert.equal(retryReport({ retried: ['e-1', 'e-2'], refused: [] }), 'requeued 2 event(s)');
});

test('retryReport: each refused row with its position, eventId, constraint and SQLSTATE, and what to do', () => {
  const reason = 'CONVERGE_OUTBOX_ROW_REFUSED: constraint outbox_envelope_event_type (SQLSTATE 23514) on outbox retry';
  const report = retryReport({
    retried: ['e-1'],
    refused: [
      { position: '7', eventId: 'bad-1', constraint: 'outbox_envelope_event_type', sqlState: '23514', reason },
      { position: '12', eventId: 'bad-2', constraint: null, sqlState: '23502', reason },
    ],
  });
  assert.equal(
    report,
    [
      'requeued 1 event(s)',
      "refused 2 event(s): the table's rules refuse them as pending, so they stay failed; fix each row's data, then retry",
      'position  event id  constraint                  SQLSTATE',
      '7         bad-1     outbox_envelope_event_type  23514',
      '12        bad-2     (not named)                 23502',
    ].join('\n'),
  );
});
