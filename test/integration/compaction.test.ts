/**
 * Inbox compaction against the real PostgreSQL: rows at or below an aggregate's applied
 * projection version become one watermark; a redelivered compacted event is acked without
 * effect; gaps keep the watermark at the contiguous version; concurrent compactors share the work.
 */
import assert from 'node:assert/strict';
import {
  type Settlement,
  applyIncrement,
  applyIncrements,
  silentLogger,
  type EventEnvelope,
  type EventHandler,
  type Logger,
} from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { compactInbox, type CompactionOptions, type CompactionResult } from '../../src/ops/index.js';
import { DeliveryProcessor, type ProcessorOptions, type RawDelivery } from '../../src/internal/index.js';
import { describe, it, createTestSchema, type TestDatabase, orderEvent, deliveryOf } from '../support/rig.js';

const PROJECTION = 'order_totals';
const CONSUMER = 'totals';
const HOUR = 3_600_000;

interface Fixture {
  db: TestDatabase;
  /** The schema, quoted for SQL. */
  q: string;
  processor(options?: Partial<ProcessorOptions>): DeliveryProcessor;
  /** The counts of a compaction without a broker (checked to say so; test/integration/retention-broker.test.ts has one). */
  compact(options?: Partial<CompactionOptions>): Promise<Omit<CompactionResult, 'broker'>>;
  /** Makes inbox rows of this consumer (all, or those matching `where`) look received two hours ago; the default window is one hour. */
  age(where?: string): Promise<void>;
  total(aggregateId: string): Promise<{ total: number; events: number } | undefined>;
  version(aggregateId: string): Promise<number | null>;
  watermark(aggregateId: string): Promise<number | null>;
  inboxVersions(aggregateId: string): Promise<number[]>;
  count(table: string): Promise<number>;
}

/** Each test gets its own migrated schema with a read model; processors are closed and the schema dropped afterwards. */
async function withFixture(work: (f: Fixture) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvt_compact');
  const processors: DeliveryProcessor[] = [];
  const q = `"${db.schema}"`;
  try {
    await db.pool.query(
      `CREATE TABLE ${q}.order_totals (id text PRIMARY KEY, total integer NOT NULL, events integer NOT NULL)`,
    );
    const fixture: Fixture = {
      db,
      q,
      processor(options = {}) {
        const handlers = options.batchHandler ? {} : { handlers: { AmountAdded: addAmount(db.schema) } };
        const processor = new DeliveryProcessor({
          consumer: CONSUMER,
          pool: db.pool,
          schema: db.schema,
          logger: silentLogger,
          ...handlers,
          ...options,
        });
        processors.push(processor);
        return processor;
      },
      async compact(options = {}) {
        const { broker, ...counts } = await compactInbox(db.pool, {
          schema: db.schema,
          consumer: CONSUMER,
          projection: PROJECTION,
          olderThanMs: HOUR,
          retryHorizonMs: 0,
          quarantineReplayWindowMs: 0,
          ...options,
        });
        assert.equal(broker.status, 'not-configured');
        assert.match(broker.warning ?? '', /no broker given/);
        return counts;
      },
      async age(where = 'true') {
        await db.pool.query(
          `UPDATE ${q}.inbox SET received_at = now() - interval '2 hours' WHERE consumer = $1 AND ${where}`,
          [CONSUMER],
        );
      },
      async total(aggregateId) {
        const { rows } = await db.pool.query<{ total: number; events: number }>(
          `SELECT total, events FROM ${q}.order_totals WHERE id = $1`,
          [aggregateId],
        );
        return rows[0];
      },
      async version(aggregateId) {
        const { rows } = await db.pool.query<{ version: string }>(
          `SELECT version FROM ${q}.projection_state WHERE projection = $1 AND aggregate_type = 'order' AND aggregate_id = $2`,
          [PROJECTION, aggregateId],
        );
        return rows[0] ? Number(rows[0].version) : null;
      },
      async watermark(aggregateId) {
        const { rows } = await db.pool.query<{ version: string }>(
          `SELECT version FROM ${q}.inbox_watermark WHERE consumer = $1 AND aggregate_type = 'order' AND aggregate_id = $2`,
          [CONSUMER, aggregateId],
        );
        return rows[0] ? Number(rows[0].version) : null;
      },
      async inboxVersions(aggregateId) {
        const { rows } = await db.pool.query<{ aggregate_version: string }>(
          `SELECT aggregate_version FROM ${q}.inbox WHERE consumer = $1 AND aggregate_id = $2 ORDER BY aggregate_version`,
          [CONSUMER, aggregateId],
        );
        return rows.map((r) => Number(r.aggregate_version));
      },
      async count(table) {
        const [row] = (await db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${q}.${table}`)).rows;
        assert.ok(row, 'count(*) returns one row');
        return row.n;
      },
    };
    await work(fixture);
  } finally {
    for (const processor of processors) await processor.close();
    await db.close();
  }
}

/** Settlements without the applied event's occurredAt, which the envelopes here set to now. */
function timeless(settlement: Settlement): Omit<Settlement, 'occurredAt'> {
  if (settlement.action !== 'ack' || settlement.outcome !== 'applied') return settlement;
  const { occurredAt: _occurredAt, ...rest } = settlement;
  return rest;
}

function envelope(eventId: string, aggregateId: string, version: number, delta = 10): EventEnvelope {
  return orderEvent(eventId, aggregateId, version, { payload: { delta } });
}

function delivery(e: EventEnvelope): RawDelivery {
  return deliveryOf(e, { exchange: 'converge.events' });
}

/** The read model: a running total and a count of applied events per order, versioned. */
function addAmount(schema: string): EventHandler {
  return async (event, { tx }) => {
    await applyIncrement(tx, { projection: PROJECTION, event, schema }, async () => {
      return tx.query(
        `INSERT INTO "${schema}".order_totals (id, total, events) VALUES ($1, $2, 1)
         ON CONFLICT (id) DO UPDATE SET total = order_totals.total + EXCLUDED.total, events = order_totals.events + 1`,
        [event.aggregateId, (event.payload as { delta: number }).delta],
      );
    });
  };
}

/** A logger that keeps every record, to check what reaches the logs. */
function capturingLogger(): Logger & { records: string[] } {
  const records: string[] = [];
  const keep = (obj: object, msg: string) => void records.push(JSON.stringify({ ...obj, msg }));
  return { records, debug: keep, info: keep, warn: keep, error: keep };
}

describe('compactInbox', () => {
  it('replaces applied rows by the watermark; a redelivered compacted event is acked as a duplicate without effect, and the next version still applies', async () => {
    await withFixture(async (f) => {
      const logger = capturingLogger();
      const processor = f.processor({ logger });
      for (let v = 1; v <= 3; v++)
        assert.deepEqual(timeless(await processor.process(delivery(envelope(`E${v}`, 'o1', v)))), {
          action: 'ack',
          outcome: 'applied',
          eventId: `E${v}`,
        });
      await f.age();
      assert.deepEqual(await f.compact({ olderThanMs: 1 }), { compacted: 3, watermarks: 1, batches: 1 });
      assert.deepEqual(await f.inboxVersions('o1'), []);
      assert.equal(await f.watermark('o1'), 3);

      assert.deepEqual(timeless(await processor.process(delivery(envelope('E2', 'o1', 2)))), {
        action: 'ack',
        outcome: 'duplicate',
        eventId: 'E2',
      });
      assert.deepEqual(await f.total('o1'), { total: 30, events: 3 }, 'no effect');
      assert.equal(await f.version('o1'), 3);
      assert.equal(await f.count('quarantine'), 0, 'nothing quarantined');
      assert.deepEqual(await f.inboxVersions('o1'), [], 'the inbox does not grow back');
      const seen = logger.records.filter((r) => r.includes('compacted event seen again'));
      assert.deepEqual(
        seen.map((r): unknown => JSON.parse(r)),
        [{ eventId: 'E2', msg: 'compacted event seen again; acknowledged without effect' }],
      );

      assert.deepEqual(timeless(await processor.process(delivery(envelope('E4', 'o1', 4, 5)))), {
        action: 'ack',
        outcome: 'applied',
        eventId: 'E4',
      });
      assert.deepEqual(await f.total('o1'), { total: 35, events: 4 });
      assert.deepEqual(await f.compact(), { compacted: 0, watermarks: 0, batches: 1 }, 'E4 is younger than the window');
    });
  });

  it('a batch handler using applyIncrements: a compacted copy in a batch is a duplicate, the other events of the batch apply', async () => {
    await withFixture(async (f) => {
      const processor = f.processor({
        batchHandler: async (events, { tx, schema }) => {
          await applyIncrements(tx, { projection: PROJECTION, events, schema }, async (applicable) => {
            let rows = 0;
            for (const event of applicable) {
              rows += (
                await tx.query(
                  `INSERT INTO "${schema}".order_totals (id, total, events) VALUES ($1, $2, 1)
                 ON CONFLICT (id) DO UPDATE SET total = order_totals.total + EXCLUDED.total, events = order_totals.events + 1`,
                  [event.aggregateId, (event.payload as { delta: number }).delta],
                )
              ).rowCount!;
            }
            return rows;
          });
        },
      });
      const first = await processor.processBatch([1, 2, 3].map((v) => delivery(envelope(`E${v}`, 'o1', v))));
      assert.deepEqual(
        first.map((s) => s.action === 'ack' && s.outcome),
        ['applied', 'applied', 'applied'],
      );
      await f.age();
      assert.equal((await f.compact()).compacted, 3);
      const second = await processor.processBatch([
        delivery(envelope('E2', 'o1', 2)),
        delivery(envelope('E4', 'o1', 4, 5)),
        delivery(envelope('P1', 'o2', 1, 7)),
      ]);
      assert.deepEqual(second.map(timeless), [
        { action: 'ack', outcome: 'duplicate', eventId: 'E2' },
        { action: 'ack', outcome: 'applied', eventId: 'E4' },
        { action: 'ack', outcome: 'applied', eventId: 'P1' },
      ]);
      assert.deepEqual(await f.total('o1'), { total: 35, events: 4 });
      assert.deepEqual(await f.total('o2'), { total: 7, events: 1 });
      assert.equal(await f.count('quarantine'), 0);
    });
  });

  it('with a gap the watermark stays at the contiguous applied version, never the highest seen; the parked event waits and applies after its predecessor', async () => {
    await withFixture(async (f) => {
      const processor = f.processor();
      assert.deepEqual(timeless(await processor.process(delivery(envelope('E1', 'o1', 1)))), {
        action: 'ack',
        outcome: 'applied',
        eventId: 'E1',
      });
      assert.deepEqual(timeless(await processor.process(delivery(envelope('E3', 'o1', 3)))), {
        action: 'ack',
        outcome: 'parked',
        eventId: 'E3',
      });
      // An inbox row above the applied version (as after a rebuild that moved the projection back) must stay too.
      await f.db.pool.query(
        `INSERT INTO ${f.q}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type) VALUES ($1, 'E7', 'f7', 'order', 'o1', 7, 'AmountAdded')`,
        [CONSUMER],
      );
      await f.age();
      assert.deepEqual(await f.compact(), { compacted: 1, watermarks: 1, batches: 1 });
      assert.equal(await f.watermark('o1'), 1);
      assert.deepEqual(await f.inboxVersions('o1'), [7]);
      assert.equal(await f.count('parked'), 1, 'E3 stays parked');

      assert.deepEqual(timeless(await processor.process(delivery(envelope('E2', 'o1', 2)))), {
        action: 'ack',
        outcome: 'applied',
        eventId: 'E2',
      });
      assert.equal(await f.version('o1'), 3, 'E3 drained after E2');
      assert.deepEqual(await f.total('o1'), { total: 30, events: 3 });
      assert.equal(await f.count('parked'), 0);
    });
  });

  it('keeps rows younger than the window and rows of aggregates the projection never applied; refuses a window inside the horizons, naming the field', async () => {
    await withFixture(async (f) => {
      const processor = f.processor();
      for (let v = 1; v <= 3; v++) await processor.process(delivery(envelope(`E${v}`, 'o1', v)));
      await f.db.pool.query(
        `INSERT INTO ${f.q}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type) VALUES ($1, 'X1', 'f', 'order', 'elsewhere', 1, 'AmountAdded')`,
        [CONSUMER],
      );
      await f.age("aggregate_version <= 2 OR aggregate_id = 'elsewhere'");

      await assert.rejects(
        f.compact({ olderThanMs: HOUR, retryHorizonMs: HOUR, quarantineReplayWindowMs: 60_000 }),
        (err: unknown) =>
          err instanceof ConfigError &&
          err.field === 'olderThanMs' &&
          /must exceed the broker retry horizon \(3600000 ms\)/.test(err.message),
      );
      await assert.rejects(
        f.compact({ olderThanMs: HOUR, retryHorizonMs: 0, quarantineReplayWindowMs: 2 * HOUR }),
        (err: unknown) => err instanceof ConfigError && err.field === 'olderThanMs',
      );
      await assert.rejects(
        f.compact({ consumer: '' }),
        (err: unknown) => err instanceof ConfigError && err.field === 'consumer',
      );
      await assert.rejects(
        f.compact({ schema: 'Bad"Schema' }),
        (err: unknown) => err instanceof ConfigError && err.field === 'schema',
      );
      assert.equal(await f.count('inbox'), 4, 'nothing compacted before the options were valid');

      assert.deepEqual(
        await f.compact({ olderThanMs: HOUR, retryHorizonMs: 60_000, quarantineReplayWindowMs: 60_000 }),
        { compacted: 2, watermarks: 1, batches: 1 },
      );
      assert.deepEqual(await f.inboxVersions('o1'), [3], 'the young row stays');
      assert.deepEqual(await f.inboxVersions('elsewhere'), [1], 'no applied version to stand for it');
      assert.equal(await f.watermark('o1'), 2);
      assert.equal(await f.watermark('elsewhere'), null);
    });
  });

  it('two compactors at once share the rows without errors; batches stop at maxBatches; watermarks never move down', async () => {
    await withFixture(async (f) => {
      // 40 orders with 25 recorded versions each; the projection has applied 20 of them.
      await f.db.pool.query(
        `INSERT INTO ${f.q}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, received_at)
         SELECT $1, 'o' || a || '-' || v, 'f', 'order', 'o' || a, v, 'AmountAdded', now() - interval '2 hours'
           FROM generate_series(1, 40) a, generate_series(1, 25) v`,
        [CONSUMER],
      );
      await f.db.pool.query(
        `INSERT INTO ${f.q}.projection_state (projection, aggregate_type, aggregate_id, version) SELECT $1, 'order', 'o' || a, 20 FROM generate_series(1, 40) a`,
        [PROJECTION],
      );
      const limited = await f.compact({ batchSize: 30, maxBatches: 1 });
      assert.deepEqual([limited.compacted, limited.batches], [30, 1]);
      const [a, b] = await Promise.all([f.compact({ batchSize: 37 }), f.compact({ batchSize: 37 })]);
      assert.equal(30 + a.compacted + b.compacted, 800);
      assert.equal(await f.count('inbox'), 200, 'versions 21..25 of every order stay');
      const { rows } = await f.db.pool.query(
        `SELECT min(version)::int AS min, max(version)::int AS max, count(*)::int AS n FROM ${f.q}.inbox_watermark WHERE consumer = $1`,
        [CONSUMER],
      );
      assert.deepEqual(rows[0], { min: 20, max: 20, n: 40 });

      // A lower version compacted later (it was younger before) leaves the watermark where it is.
      await f.db.pool.query(
        `INSERT INTO ${f.q}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, received_at)
         VALUES ($1, 'late', 'f', 'order', 'o1', 5, 'AmountAdded', now() - interval '2 hours')`,
        [CONSUMER],
      );
      assert.equal((await f.compact()).compacted, 1);
      assert.equal(await f.watermark('o1'), 20);
    });
  });

  it('a stale event is still quarantined as stale-version when there is no watermark, or when the watermark is below it', async () => {
    await withFixture(async (f) => {
      const processor = f.processor();
      for (const id of ['o1', 'o2']) {
        for (let v = 1; v <= 2; v++) await processor.process(delivery(envelope(`${id}-E${v}`, id, v)));
      }
      // o2: only version 1 is compacted, so its watermark (1) does not cover version 2.
      await f.age(`aggregate_id = 'o2' AND aggregate_version = 1`);
      assert.equal((await f.compact()).compacted, 1);
      assert.equal(await f.watermark('o2'), 1);

      for (const id of ['o1', 'o2']) {
        const settlement = await processor.process(delivery(envelope(`${id}-other`, id, 2, 99)));
        assert.ok(
          settlement.action === 'ack' && settlement.outcome === 'quarantined' && settlement.reason === 'stale-version',
          JSON.stringify(settlement),
        );
        assert.deepEqual(await f.total(id), { total: 20, events: 2 });
      }
      const { rows } = await f.db.pool.query(`SELECT event_id, reason FROM ${f.q}.quarantine ORDER BY id`);
      assert.deepEqual(rows, [
        { event_id: 'o1-other', reason: 'stale-version' },
        { event_id: 'o2-other', reason: 'stale-version' },
      ]);
    });
  });
});
