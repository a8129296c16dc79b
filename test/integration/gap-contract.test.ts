/**
 * The gap/stale contract: a version gap or stale version reached by applyIncrement(s) on
 * the consumer's transaction fails that transaction even when the user's handler catches
 * the error. The inbox row is not committed, the projection is unchanged, the event waits
 * (parked or retried) or is quarantined as stale, and a later predecessor still drains it.
 */
import assert from 'node:assert/strict';
import {
  applyIncrement,
  applyIncrements,
  silentLogger,
  type BatchHandler,
  type EventEnvelope,
  type EventHandler,
  type Executor,
  type QueryResultLike,
  type Settlement,
} from '../../src/index.js';
import { DeliveryProcessor, type ProcessorOptions, type RawDelivery } from '../../src/internal/index.js';
import { describe, it, createTestSchema, deliveryOf, orderEvent, type TestDatabase } from '../support/rig.js';

const PROJECTION = 'order_totals';
const CONSUMER = 'totals';

interface Fixture {
  db: TestDatabase;
  processor(options: Partial<ProcessorOptions>): DeliveryProcessor;
  /** Total and number of applied events of the order, null if it has none. */
  total(aggregateId: string): Promise<number | null>;
  version(aggregateId: string): Promise<number | null>;
  inboxIds(): Promise<string[]>;
  parkedIds(): Promise<string[]>;
  /** Rows the handlers wrote after swallowing an error (never committed if the contract holds). */
  swallowed(): Promise<number>;
}

async function withFixture(work: (f: Fixture) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvt_gapc');
  const q = `"${db.schema}"`;
  const processors: DeliveryProcessor[] = [];
  try {
    await db.pool.query(`CREATE TABLE ${q}.order_totals (id text PRIMARY KEY, total integer NOT NULL)`);
    await db.pool.query(`CREATE TABLE ${q}.swallowed (event_id text NOT NULL)`);
    await work({
      db,
      processor(options) {
        const processor = new DeliveryProcessor({
          consumer: CONSUMER,
          pool: db.pool,
          schema: db.schema,
          logger: silentLogger,
          ...options,
        });
        processors.push(processor);
        return processor;
      },
      async total(aggregateId) {
        const { rows } = await db.pool.query<{ total: string }>(`SELECT total FROM ${q}.order_totals WHERE id = $1`, [
          aggregateId,
        ]);
        return rows[0] ? Number(rows[0].total) : null;
      },
      async version(aggregateId) {
        const { rows } = await db.pool.query<{ version: string }>(
          `SELECT version FROM ${q}.projection_state WHERE projection = $1 AND aggregate_id = $2`,
          [PROJECTION, aggregateId],
        );
        return rows[0] ? Number(rows[0].version) : null;
      },
      async inboxIds() {
        const { rows } = await db.pool.query<{ event_id: string }>(
          `SELECT event_id FROM ${q}.inbox WHERE consumer = $1 ORDER BY event_id`,
          [CONSUMER],
        );
        return rows.map((r) => r.event_id);
      },
      async parkedIds() {
        const { rows } = await db.pool.query<{ event_id: string }>(
          `SELECT event_id FROM ${q}.parked WHERE consumer = $1 ORDER BY event_id`,
          [CONSUMER],
        );
        return rows.map((r) => r.event_id);
      },
      async swallowed() {
        const { rows } = await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q}.swallowed`);
        return rows[0]!.n;
      },
    });
  } finally {
    for (const processor of processors) await processor.close();
    await db.close();
  }
}

const envelope = (eventId: string, aggregateId: string, version: number, delta = 10): EventEnvelope =>
  orderEvent(eventId, aggregateId, version, { payload: { delta } });

const delivery = (e: EventEnvelope): RawDelivery => deliveryOf(e, { exchange: 'converge.events' });

async function addTotal(
  tx: Executor,
  schema: string,
  aggregateId: string,
  delta: number,
): Promise<QueryResultLike<unknown>> {
  return tx.query(
    `INSERT INTO "${schema}".order_totals (id, total) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET total = order_totals.total + EXCLUDED.total`,
    [aggregateId, delta],
  );
}

/** A handler that catches every error, writes a row saying so, and returns normally. */
function swallowingHandler(schema: string): EventHandler {
  return async (event, { tx }) => {
    try {
      await applyIncrement(tx, { projection: PROJECTION, event, schema }, () =>
        addTotal(tx, schema, event.aggregateId, (event.payload as { delta: number }).delta),
      );
    } catch {
      await tx.query(`INSERT INTO "${schema}".swallowed (event_id) VALUES ($1)`, [event.eventId]);
    }
  };
}

/** The same for a batch, with the set-based applyIncrements. */
function swallowingBatchHandler(schema: string): BatchHandler {
  return async (events, { tx }) => {
    try {
      await applyIncrements(tx, { projection: PROJECTION, events, schema }, async (applied) => {
        let rows = 0;
        for (const event of applied)
          rows += (await addTotal(tx, schema, event.aggregateId, (event.payload as { delta: number }).delta)).rowCount!;
        return rows;
      });
    } catch {
      await tx.query(`INSERT INTO "${schema}".swallowed (event_id) VALUES ($1)`, [events[0]!.eventId]);
    }
  };
}

function outcome(settlement: Settlement): string {
  return settlement.action === 'retry'
    ? `retry:${settlement.reason}`
    : settlement.outcome === 'quarantined'
      ? `quarantined:${settlement.reason}`
      : settlement.outcome;
}

describe('gap contract: a handler cannot swallow a version gap', () => {
  it('single handler: the early event is parked, nothing of it commits, and the predecessor still drains it', async () => {
    await withFixture(async (f) => {
      const processor = f.processor({ handlers: { AmountAdded: swallowingHandler(f.db.schema) } });
      assert.equal(outcome(await processor.process(delivery(envelope('E1', 'o1', 1, 10)))), 'applied');
      assert.equal(outcome(await processor.process(delivery(envelope('E3', 'o1', 3, 30)))), 'parked');
      assert.deepEqual(await f.inboxIds(), ['E1'], 'no inbox row for the gapped event');
      assert.deepEqual(await f.parkedIds(), ['E3']);
      assert.equal(await f.version('o1'), 1);
      assert.equal(await f.total('o1'), 10, 'projection unchanged');
      assert.equal(await f.swallowed(), 0, 'what the handler wrote after catching was rolled back');

      assert.equal(outcome(await processor.process(delivery(envelope('E2', 'o1', 2, 20)))), 'applied');
      assert.deepEqual(await f.inboxIds(), ['E1', 'E2', 'E3']);
      assert.deepEqual(await f.parkedIds(), []);
      assert.equal(await f.version('o1'), 3);
      assert.equal(await f.total('o1'), 60);
      assert.equal(await f.swallowed(), 0);
    });
  });

  it('single handler without the reorder buffer: the early event is retried (version-gap), not acked', async () => {
    await withFixture(async (f) => {
      const processor = f.processor({
        handlers: { AmountAdded: swallowingHandler(f.db.schema) },
        reorderBuffer: false,
      });
      assert.equal(outcome(await processor.process(delivery(envelope('E1', 'o1', 1, 10)))), 'applied');
      assert.equal(outcome(await processor.process(delivery(envelope('E3', 'o1', 3, 30)))), 'retry:version-gap');
      assert.deepEqual(await f.inboxIds(), ['E1']);
      assert.equal(await f.total('o1'), 10);
      assert.equal(await f.swallowed(), 0);
      assert.equal(outcome(await processor.process(delivery(envelope('E2', 'o1', 2, 20)))), 'applied');
      assert.equal(
        outcome(await processor.process(delivery(envelope('E3', 'o1', 3, 30)))),
        'applied',
        'the retried copy applies once its predecessor did',
      );
      assert.equal(await f.total('o1'), 60);
    });
  });

  it('batch handler with applyIncrements: the batch rolls back, each delivery keeps its own outcome, the gapped one parks and drains later', async () => {
    await withFixture(async (f) => {
      const processor = f.processor({ batchHandler: swallowingBatchHandler(f.db.schema) });
      const settlements = await processor.processBatch(
        [envelope('E1', 'o1', 1, 10), envelope('E3', 'o1', 3, 30), envelope('P1', 'o2', 1, 5)].map(delivery),
      );
      assert.deepEqual(settlements.map(outcome), ['applied', 'parked', 'applied']);
      assert.deepEqual(await f.inboxIds(), ['E1', 'P1']);
      assert.deepEqual(await f.parkedIds(), ['E3']);
      assert.equal(await f.total('o1'), 10);
      assert.equal(await f.version('o1'), 1);
      assert.equal(await f.swallowed(), 0);

      assert.deepEqual((await processor.processBatch([delivery(envelope('E2', 'o1', 2, 20))])).map(outcome), [
        'applied',
      ]);
      assert.deepEqual(await f.inboxIds(), ['E1', 'E2', 'E3', 'P1']);
      assert.deepEqual(await f.parkedIds(), []);
      assert.equal(await f.total('o1'), 60);
      assert.equal(await f.version('o1'), 3);
    });
  });

  it('a swallowed stale version is quarantined as stale, never applied', async () => {
    await withFixture(async (f) => {
      const processor = f.processor({ handlers: { AmountAdded: swallowingHandler(f.db.schema) } });
      assert.equal(outcome(await processor.process(delivery(envelope('E1', 'o1', 1, 10)))), 'applied');
      assert.equal(
        outcome(await processor.process(delivery(envelope('X1', 'o1', 1, 99)))),
        'quarantined:stale-version',
      );
      assert.deepEqual(await f.inboxIds(), ['E1']);
      assert.equal(await f.total('o1'), 10);
      assert.equal(await f.swallowed(), 0);
    });
  });

  it('a handler that turns the gap into another error still parks the event (the gap is the cause, not a handler failure)', async () => {
    await withFixture(async (f) => {
      const schema = f.db.schema;
      const processor = f.processor({
        maxAttempts: 1,
        handlers: {
          AmountAdded: async (event, { tx }) => {
            try {
              await applyIncrement(tx, { projection: PROJECTION, event, schema }, () =>
                addTotal(tx, schema, event.aggregateId, 1),
              );
            } catch {
              throw new Error('wrapped by the application');
            }
          },
        },
      });
      assert.equal(
        outcome(await processor.process(delivery(envelope('E2', 'o1', 2)))),
        'parked',
        'not handler-failed, although maxAttempts is 1',
      );
      assert.deepEqual(await f.inboxIds(), []);
      assert.equal(outcome(await processor.process(delivery(envelope('E1', 'o1', 1)))), 'applied');
      assert.deepEqual(await f.inboxIds(), ['E1', 'E2']);
      assert.equal(await f.total('o1'), 2);
    });
  });
});
