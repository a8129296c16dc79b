import assert from 'node:assert/strict';
import { test } from 'node:test';
import type pg from 'pg';
import { HeldMarks } from '../../src/relay/cdc/held.js';
import { formatLsn, parseLsn } from '../../src/relay/cdc/lsn.js';
import type { PendingMark } from '../../src/relay/cdc/marks.js';
import { cdcSql } from '../../src/relay/sql.js';
import { schemaRef } from '../../src/runtime/identifier.js';
import { silentLogger } from '../../src/runtime/logger.js';

const refused = Object.assign(new Error('check'), { code: '23514', constraint: 'test_rule' });

/** A pool whose failed mark answers as told: the row's event id, nothing (marked by someone else), or a refusal. */
function poolAnswering(answer: () => { event_id: string }[]): { pool: pg.Pool; reasons: unknown[] } {
  const reasons: unknown[] = [];
  const pool = {
    query: (_text: string, values: unknown[]) => {
      reasons.push(values[1]);
      return Promise.resolve({ rows: answer() });
    },
  } as unknown as pg.Pool;
  return { pool, reasons };
}

function held(pool: pg.Pool): HeldMarks {
  return new HeldMarks(pool, cdcSql(schemaRef('converge')), {
    logger: silentLogger,
    relayId: 'r',
    backoff: { initialDelayMs: 200, maxDelayMs: 1000, factor: 2 },
  });
}

const mark = (position: string, commitLsn: string): PendingMark => ({
  position,
  eventId: `e${position}`,
  xid: 1,
  commitLsn,
});

test('a refused row the table lets be failed is marked failed with the constraint named, and holds nothing back', async () => {
  const { pool, reasons } = poolAnswering(() => [{ event_id: 'e1' }]);
  const marks = held(pool);
  await marks.setAside([{ item: mark('1', '0/200'), err: refused }]);
  assert.deepEqual(reasons, ['CONVERGE_OUTBOX_ROW_REFUSED: constraint test_rule (SQLSTATE 23514)']);
  assert.equal(marks.size, 0);
  assert.equal(marks.cap(0x300n), 0x300n);
});

test('a row refused even as failed is held: the slot is capped at its commit, it is tried again after its backoff', async () => {
  const { pool } = poolAnswering(() => {
    throw refused;
  });
  const marks = held(pool);
  await marks.setAside([
    { item: mark('2', '0/250'), err: refused },
    { item: mark('1', '0/200'), err: refused },
  ]);
  assert.equal(marks.size, 2);
  assert.equal(formatLsn(marks.cap(parseLsn('0/300'))), '0/200', 'the first held commit, resent from there');
  assert.equal(marks.cap(0x100n), 0x100n, 'never raised');
  assert.deepEqual(marks.due(performance.now()), [], 'inside the backoff');
  const due = marks.due(performance.now() + 60_000);
  assert.deepEqual(due.map((m) => m.position).sort(), ['1', '2']);
  assert.equal(marks.size, 0, 'taken out to be tried');
  assert.equal(marks.cap(0x300n), 0x300n);
  marks.restore(due);
  assert.equal(marks.size, 2, 'a failed flush puts them back');
});

test('a held row written on its next try is forgotten', async () => {
  let refuse = true;
  const { pool } = poolAnswering(() => {
    if (refuse) throw refused;
    return [];
  });
  const marks = held(pool);
  await marks.setAside([{ item: mark('1', '0/200'), err: refused }]);
  const due = marks.due(performance.now() + 60_000);
  refuse = false;
  marks.settle(due);
  assert.equal(marks.size, 0);
  assert.equal(marks.cap(0x300n), 0x300n);
});
