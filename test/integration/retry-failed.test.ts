/**
 * `retryFailedEvents` (issue 26, defect 1): one failed row that still breaks a rule of the table never
 * blocks the retry of the others. Migration 17 left such a row failed; putting it back to pending is
 * refused (23514), so it stays failed with the constraint named in last_error, and the rest are retried.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import { migrate } from '../../src/index.js';
import { readStatus, retryFailedEvents } from '../../src/ops/index.js';
import { migrateTo } from '../support/migrate-to.js';
import { after, before, connectPostgres, describe, test, uniqueName } from '../support/rig.js';

const RETRY_REFUSED =
  'CONVERGE_OUTBOX_ROW_REFUSED: constraint outbox_envelope_event_type (SQLSTATE 23514) on outbox retry';

/**
 * A schema upgraded over an old pending row that breaks the event-type rule (migration 17 marks it
 * failed), beside two failed rows that are fine and a later version of the bad row's aggregate.
 */
async function seeded(pool: pg.Pool): Promise<string> {
  const schema = uniqueName('cvt_retry');
  await migrateTo(pool, schema, 16);
  await pool.query(`ALTER TABLE "${schema}".outbox DROP CONSTRAINT outbox_envelope_event_type`);
  await pool.query(
    `INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
     VALUES ('bad-1', 'order', 'o-bad', 1, 'Order Paid', '{"card":"4111-SECRET"}')`,
  );
  await migrate(pool, { schema });
  await pool.query(
    `INSERT INTO "${schema}".outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, attempts, broker_retries, last_error)
     VALUES ('good-1', 'order', 'o-1', 1, 'OrderPaid', '{"card":"4111-SECRET"}', 'failed', 10, 3, 'CONVERGE_PUBLISH_RETURNED'),
            ('good-2', 'order', 'o-2', 1, 'OrderPaid', '{"card":"4111-SECRET"}', 'failed', 10, 0, 'CONVERGE_PUBLISH_RETURNED')`,
  );
  return schema;
}

async function rows(pool: pg.Pool, schema: string): Promise<[string, string, number, string | null][]> {
  const { rows } = await pool.query<{ event_id: string; status: string; attempts: number; last_error: string | null }>(
    `SELECT event_id, status, attempts, last_error FROM "${schema}".outbox ORDER BY event_id`,
  );
  return rows.map((row) => [row.event_id, row.status, row.attempts, row.last_error]);
}

let pool: pg.Pool;
const schemas: string[] = [];
before(async () => {
  pool = await connectPostgres();
});
after(async () => {
  for (const schema of schemas) await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

/** The two good rows are pending again; the bad one stays failed, its refusal on retry named. */
async function assertGoodRowsRetried(schema: string): Promise<void> {
  assert.deepEqual(
    (await rows(pool, schema)).map(([id, status, , error]) => [id, status, error]),
    [
      ['bad-1', 'failed', RETRY_REFUSED],
      ['good-1', 'pending', 'CONVERGE_PUBLISH_RETURNED'],
      ['good-2', 'pending', 'CONVERGE_PUBLISH_RETURNED'],
    ],
  );
}

describe('retryFailedEvents: a failed row the table still refuses as pending', () => {
  test('on a pool: the others are retried, the refused row stays failed with its constraint named, and is retried once fixed', async () => {
    const schema = await seeded(pool);
    schemas.push(schema);
    const before = await rows(pool, schema);
    assert.equal(before[0]![3], 'CONVERGE_OUTBOX_ROW_REFUSED: constraint outbox_envelope_event_type (migration 17)');

    const result = await retryFailedEvents(pool, { schema });
    assert.deepEqual([...result.retried].sort(), ['good-1', 'good-2']);
    assert.deepEqual(
      result.refused.map(({ eventId, constraint, sqlState, reason }) => ({ eventId, constraint, sqlState, reason })),
      [{ eventId: 'bad-1', constraint: 'outbox_envelope_event_type', sqlState: '23514', reason: RETRY_REFUSED }],
    );
    assert.match(result.refused[0]!.position, /^[0-9]+$/);
    assert.doesNotMatch(JSON.stringify(result), /SECRET|Order Paid/, 'no value of the row in the result');
    assert.deepEqual(await rows(pool, schema), [
      ['bad-1', 'failed', 0, RETRY_REFUSED],
      ['good-1', 'pending', 0, 'CONVERGE_PUBLISH_RETURNED'],
      ['good-2', 'pending', 0, 'CONVERGE_PUBLISH_RETURNED'],
    ]);
    const status = await readStatus(pool, { schema });
    assert.deepEqual(status.outbox.failedReasons, { [RETRY_REFUSED]: 1 });

    // What docs/reference/outbox-table.md says to do: fix the row's data, then retry.
    await pool.query(`UPDATE "${schema}".outbox SET event_type = 'OrderPaid' WHERE event_id = 'bad-1'`);
    const again = await retryFailedEvents(pool, { schema });
    assert.deepEqual(again, { retried: ['bad-1'], refused: [] });
    assert.equal((await readStatus(pool, { schema })).outbox.failed, 0);
  });

  test("inside the caller's transaction: each row under a savepoint, so the transaction stays usable and commits the good rows", async () => {
    const schema = await seeded(pool);
    schemas.push(schema);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await retryFailedEvents(client, { schema });
      assert.deepEqual([...result.retried].sort(), ['good-1', 'good-2']);
      assert.deepEqual(
        result.refused.map((row) => row.eventId),
        ['bad-1'],
      );
      await client.query('COMMIT');
    } catch (err) {
      await client.query('ROLLBACK');
      throw err;
    } finally {
      client.release();
    }
    await assertGoodRowsRetried(schema);
  });

  test('on a client outside any transaction: no savepoint can be opened, each statement commits on its own', async () => {
    const schema = await seeded(pool);
    schemas.push(schema);
    const client = await pool.connect();
    try {
      const result = await retryFailedEvents(client, { schema });
      assert.deepEqual([...result.retried].sort(), ['good-1', 'good-2']);
      assert.deepEqual(
        result.refused.map((row) => row.eventId),
        ['bad-1'],
      );
    } finally {
      client.release();
    }
    await assertGoodRowsRetried(schema);
  });

  test('one event by id: a refused one is reported, not thrown; a good one is retried alone', async () => {
    const schema = await seeded(pool);
    schemas.push(schema);
    const refused = await retryFailedEvents(pool, { schema, eventId: 'bad-1' });
    assert.deepEqual(refused.retried, []);
    assert.deepEqual(
      refused.refused.map((row) => [row.eventId, row.constraint]),
      [['bad-1', 'outbox_envelope_event_type']],
    );
    assert.deepEqual(await retryFailedEvents(pool, { schema, eventId: 'good-2' }), {
      retried: ['good-2'],
      refused: [],
    });
    assert.deepEqual(
      (await rows(pool, schema)).map(([id, status]) => [id, status]),
      [
        ['bad-1', 'failed'],
        ['good-1', 'failed'],
        ['good-2', 'pending'],
      ],
    );
  });

  test('a rule that binds failed rows too: the row cannot even be marked, so it stays as it was and is still reported', async () => {
    const schema = await seeded(pool);
    schemas.push(schema);
    await pool.query(
      `ALTER TABLE "${schema}".outbox ADD CONSTRAINT test_no_bad CHECK (aggregate_id <> 'o-bad') NOT VALID`,
    );
    const result = await retryFailedEvents(pool, { schema });
    assert.deepEqual([...result.retried].sort(), ['good-1', 'good-2']);
    assert.deepEqual(
      result.refused.map((row) => [row.eventId, row.sqlState]),
      [['bad-1', '23514']],
    );
    const bad = (await rows(pool, schema)).find(([id]) => id === 'bad-1');
    assert.deepEqual(bad, [
      'bad-1',
      'failed',
      0,
      'CONVERGE_OUTBOX_ROW_REFUSED: constraint outbox_envelope_event_type (migration 17)',
    ]);
  });
});
