/**
 * The write-count rule of the projection helpers, through a real consumer: the README's old
 * sample (an UPDATE of a read-model row an aggregate's first event should have created) no
 * longer records the event as applied with no row. The delivery fails (nothing committed:
 * inbox row, projection version, read model), is retried and then quarantined; the corrected
 * sample (INSERT ... ON CONFLICT DO UPDATE) applies.
 */
import assert from 'node:assert/strict';
import {
  applyIncrement,
  applyIncrements,
  applySnapshot,
  readProjectionState,
  withTransaction,
  type EventHandler,
  type Settlement,
} from '../../src/index.js';
import { NoRowsWrittenError } from '../../src/errors.js';
import { withEnv, envelope, collect, quarantineRows, type Env } from '../support/consumer-env.js';
import { AGGREGATE_TYPE, PROJECTION as MODEL_PROJECTION, withReadModel } from '../support/read-model.js';
import { describe, test, settle, waitFor } from '../support/rig.js';

const PROJECTION = 'order_search';

async function createReadModel(env: Env): Promise<void> {
  await env.pool.query(`CREATE TABLE "${env.schema}".order_search (id text PRIMARY KEY, amount int NOT NULL)`);
}

/** The README's consumer sample as it was, with the one change the compiler now demands: return the write. */
function updateOnly(schema: string): EventHandler {
  return async (event, { tx }) => {
    await applyIncrement(tx, { projection: PROJECTION, event, schema }, async () =>
      tx.query(`UPDATE "${schema}".order_search SET amount = amount + $2 WHERE id = $1`, [
        event.aggregateId,
        (event.payload as { delta: number }).delta,
      ]),
    );
  };
}

/** The corrected sample: the first event creates the row. */
function upsert(schema: string): EventHandler {
  return async (event, { tx }) => {
    await applyIncrement(tx, { projection: PROJECTION, event, schema }, async () =>
      tx.query(
        `INSERT INTO "${schema}".order_search (id, amount) VALUES ($1, $2)
         ON CONFLICT (id) DO UPDATE SET amount = order_search.amount + EXCLUDED.amount`,
        [event.aggregateId, (event.payload as { delta: number }).delta],
      ),
    );
  };
}

function describeSettlement(s: Settlement): string {
  if (s.action === 'retry') return `retry:${s.reason}`;
  return s.outcome === 'quarantined' ? `quarantined:${s.reason}` : s.outcome;
}

async function readState(env: Env, aggregateId: string) {
  return readProjectionState(env.pool, {
    schema: env.schema,
    projection: PROJECTION,
    aggregateType: 'order',
    aggregateId,
  });
}

async function expectFailedDelivery(env: Env, handler: EventHandler): Promise<void> {
  await createReadModel(env);
  const consumer = env.start({ maxAttempts: 2, handlers: { AmountAdded: handler } });
  const settled = collect(consumer);
  await consumer.ready();
  await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
  await waitFor(() => consumer.stats.quarantined === 1, 'the first event to end in quarantine');

  assert.deepEqual(settled.map(describeSettlement), ['retry:handler-error', 'quarantined:handler-failed']);
  assert.equal(consumer.stats.applied, 0);
  assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E1'`), 0, 'no inbox row');
  assert.equal(await readState(env, 'o1'), null, 'projection_state unchanged');
  assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.order_search`), 0);
  const [row] = await quarantineRows(env);
  assert.equal(row?.event_id, 'E1');
  assert.equal(row?.reason, 'handler-failed');
  assert.match(row?.detail ?? '', /order\/o1 version 1 in order_search changed 0 rows, expected at least 1/);
}

describe('projection writes must report the rows they changed', () => {
  test("the README's UPDATE-only sample fails the first event's delivery: retried, quarantined, never recorded as applied", async () => {
    await withEnv((env) => expectFailedDelivery(env, updateOnly(env.schema)));
  });

  test('a handler that catches the NoRowsWrittenError still cannot commit the event as applied', async () => {
    await withEnv(async (env) => {
      const inner = updateOnly(env.schema);
      await expectFailedDelivery(env, async (event, context) => {
        try {
          await inner(event, context);
        } catch {
          // Swallowed on purpose: the consumer's version watch still rolls the transaction back.
        }
      });
    });
  });

  test('the corrected sample (INSERT ... ON CONFLICT DO UPDATE) applies the first event and the next', async () => {
    await withEnv(async (env) => {
      await createReadModel(env);
      const consumer = env.start({ maxAttempts: 2, handlers: { AmountAdded: upsert(env.schema) } });
      await consumer.ready();
      await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
      await env.publish(envelope('E2', 'o1', 2, { delta: 5 }));
      await waitFor(() => consumer.stats.applied === 2, 'both events to apply');

      assert.equal(consumer.stats.quarantined + consumer.stats.retried, 0);
      assert.deepEqual(await readState(env, 'o1'), { version: 2, baselineVersion: null, deleted: false });
      const { rows } = await env.pool.query<{ amount: number }>(
        `SELECT amount FROM "${env.schema}".order_search WHERE id = 'o1'`,
      );
      assert.deepEqual(rows, [{ amount: 15 }]);
    });
  });

  test("an event that legitimately writes no row returns 'unchanged': applied, version advanced", async () => {
    await withEnv(async (env) => {
      await createReadModel(env);
      const consumer = env.start({
        handlers: {
          AmountAdded: upsert(env.schema),
          NoteAdded: async (event, { tx, schema }) => {
            await applyIncrement(tx, { projection: PROJECTION, event, schema }, async () => 'unchanged');
          },
        },
      });
      await consumer.ready();
      await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
      await env.publish(envelope('E2', 'o1', 2, { note: 'ignored by this read model' }, 'NoteAdded'));
      await waitFor(() => consumer.stats.applied === 2, 'both events to apply');
      assert.deepEqual(await readState(env, 'o1'), { version: 2, baselineVersion: null, deleted: false });
    });
  });
});

describe('the write-count rule for batches and snapshots', () => {
  const ev = (aggregateId: string, version: number) => ({
    aggregateType: AGGREGATE_TYPE,
    aggregateId,
    aggregateVersion: version,
  });

  test('applyIncrements: fewer rows than aggregates (one UPDATE missed a new aggregate) rolls back; at-least-one accepts it', async () => {
    await withReadModel('cvt_write', async (m) => {
      await m.pool.query(`INSERT INTO ${m.readModel} (id, amount) VALUES ('a', 0)`);
      const target = { projection: MODEL_PROJECTION, events: [ev('a', 1), ev('a', 2), ev('b', 1)], schema: m.schema };
      const update = (tx: { query: typeof m.pool.query }) => async (events: { aggregateId: string }[]) =>
        tx.query(`UPDATE ${m.readModel} SET amount = amount + 1 WHERE id = ANY($1)`, [
          events.map((e) => e.aggregateId),
        ]);

      const failure = await settle(withTransaction(m.pool, (tx) => applyIncrements(tx, target, update(tx))));
      assert.ok(!failure.ok && failure.error instanceof NoRowsWrittenError, 'one row for two aggregates');
      assert.equal(failure.error.rowCount, 1);
      assert.equal(failure.error.expected, 2);
      assert.deepEqual(failure.error.writtenFor, { aggregates: 2, events: 3 });
      assert.equal(await m.state('a'), null, 'versions rolled back with the write');

      const result = await withTransaction(m.pool, (tx) =>
        applyIncrements(tx, { ...target, expectRows: 'at-least-one' }, update(tx)),
      );
      assert.equal(result.applied.length, 3);
      assert.deepEqual(await m.state('b'), { version: 1, baselineVersion: null, deleted: false });
    });
  });

  test('applySnapshot: 0 rows throws for a live snapshot, and is fine for a tombstone (the row may never have existed)', async () => {
    await withReadModel('cvt_write', async (m) => {
      const target = { projection: MODEL_PROJECTION, event: ev('gone', 3), schema: m.schema };
      const remove = (tx: { query: typeof m.pool.query }) => async () =>
        tx.query(`DELETE FROM ${m.readModel} WHERE id = 'gone'`);

      const failure = await settle(withTransaction(m.pool, (tx) => applySnapshot(tx, target, remove(tx))));
      assert.ok(!failure.ok && failure.error instanceof NoRowsWrittenError);
      assert.equal(await m.state('gone'), null);

      const tombstone = await withTransaction(m.pool, (tx) =>
        applySnapshot(tx, { ...target, deleted: true }, remove(tx)),
      );
      assert.deepEqual(tombstone, { applied: true, version: 3 });
      assert.deepEqual(await m.state('gone'), { version: 3, baselineVersion: 3, deleted: true });
    });
  });
});
