// test-files: plain-layout, seeds inbox rows of chosen ages and counts the rows deleted one by one
/**
 * Retention that knows about the broker, against real PostgreSQL and RabbitMQ: a message still
 * waiting in a consumer's queue (the consumer not running) keeps the inbox rows it could be a copy
 * of, for cleanup and for compaction; empty queues change nothing; a waiting message of unknown
 * age keeps every row. The pure bound is in test/unit/broker-retention.test.ts.
 */
import assert from 'node:assert/strict';
import type amqp from 'amqplib';
import { applyIncrement, silentLogger, type EventHandler } from '../../src/index.js';
import { cleanup, compactInbox } from '../../src/ops/index.js';
import { DeliveryProcessor } from '../../src/internal/index.js';
import {
  AMQP_URL,
  connectRabbit,
  createTestSchema,
  deliveryOf,
  describe,
  dropTestBroker,
  it,
  orderEvent,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '../support/rig.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const WINDOWS = { retryHorizonMs: HOUR, quarantineReplayWindowMs: DAY };

interface Fixture {
  db: TestDatabase;
  q: string;
  queue: string;
  channel: amqp.ConfirmChannel;
  /** Parks a message in the consumer's queue as the relay would send it, its event `ageMs` old (or no timestamp). */
  waiting(ageMs: number | null): Promise<void>;
  broker: { amqpUrl: string; queues: string[]; marginMs: number };
  /** Inbox rows per age in days, ascending. */
  inboxByAge(): Promise<{ days: number; n: number }[]>;
}

async function withFixture(work: (f: Fixture) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvrb');
  const connection = await connectRabbit();
  const queue = uniqueName('cvrb.q');
  try {
    const channel = await connection.createConfirmChannel();
    // The consumer is not running: only its queue is there, as it declared it.
    await channel.assertQueue(queue, { durable: true });
    const q = `"${db.schema}"`;
    await work({
      db,
      q,
      queue,
      channel,
      async waiting(ageMs) {
        const timestamp = ageMs === null ? undefined : Math.floor((Date.now() - ageMs) / 1000);
        channel.sendToQueue(queue, Buffer.from('{}'), { messageId: `m-${ageMs}`, persistent: true, timestamp });
        await channel.waitForConfirms();
      },
      broker: { amqpUrl: AMQP_URL, queues: [queue], marginMs: HOUR },
      async inboxByAge() {
        const { rows } = await db.pool.query<{ days: number; n: number }>(
          `SELECT round(extract(epoch FROM now() - received_at) / 86400)::int AS days, count(*)::int AS n
             FROM ${q}.inbox GROUP BY 1 ORDER BY 1`,
        );
        return rows;
      },
    });
  } finally {
    await dropTestBroker(connection, [queue]);
    await connection.close().catch(() => undefined);
    await db.close();
  }
}

/** Inbox rows received 10 days, 4 days and 0 days ago, 3 of each. */
async function seedInbox(f: Fixture): Promise<void> {
  await f.db.pool.query(
    `INSERT INTO ${f.q}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, received_at)
     SELECT 'c', 'e' || d || '-' || i, 'f', 'order', 'o' || d || '-' || i, 1, 'X', now() - make_interval(days => d)
       FROM unnest(ARRAY[10, 4, 0]) d, generate_series(1, 3) i`,
  );
}

const retention = (f: Fixture, broker?: Fixture['broker']) =>
  cleanup(f.db.pool, {
    schema: f.db.schema,
    outboxRetentionMs: HOUR,
    inboxRetentionMs: 2 * DAY,
    ...WINDOWS,
    ...(broker ? { broker } : {}),
  });

describe('retention bounded by the broker', () => {
  it('cleanup keeps inbox rows younger than a message still waiting in the queue, deletes older ones', async () => {
    await withFixture(async (f) => {
      await seedInbox(f);
      await f.waiting(5 * DAY);
      const result = await retention(f, f.broker);
      assert.equal(result.broker?.status, 'bounded');
      assert.equal(result.broker.queue, f.queue);
      assert.ok(Math.abs(result.broker.oldestMessageAgeMs! - 5 * DAY) < 5_000, `${result.broker.oldestMessageAgeMs}`);
      assert.equal(result.broker.appliedRetentionMs, result.broker.oldestMessageAgeMs! + HOUR);
      assert.equal(result.inboxDeleted, 3, 'only the rows older than the waiting message (10 days)');
      assert.deepEqual(await f.inboxByAge(), [
        { days: 0, n: 3 },
        { days: 4, n: 3 },
      ]);
      // The look at the head left the message where it was.
      await waitFor(async () => (await f.channel.checkQueue(f.queue)).messageCount === 1, 'the message back');
      const head = await f.channel.get(f.queue, { noAck: true });
      assert.ok(head && head.properties.messageId === `m-${5 * DAY}`);
    });
  });

  it('with empty queues cleanup deletes by age as before', async () => {
    await withFixture(async (f) => {
      await seedInbox(f);
      const result = await retention(f, f.broker);
      assert.deepEqual(result.broker, {
        status: 'empty',
        queue: null,
        oldestMessageAgeMs: null,
        appliedRetentionMs: 2 * DAY,
      });
      assert.equal(result.inboxDeleted, 6);
      assert.deepEqual(await f.inboxByAge(), [{ days: 0, n: 3 }]);
    });
  });

  it('a waiting message of unknown age (no timestamp) keeps every inbox row', async () => {
    await withFixture(async (f) => {
      await seedInbox(f);
      await f.waiting(null);
      const result = await retention(f, f.broker);
      assert.equal(result.broker?.status, 'unknown-age');
      assert.equal(result.broker.appliedRetentionMs, null);
      assert.equal(result.inboxDeleted, 0);
      assert.equal(
        (await f.inboxByAge()).reduce((n, row) => n + row.n, 0),
        9,
      );
    });
  });

  it('compaction raises no watermark past a message still waiting in the queue', async () => {
    await withFixture(async (f) => {
      await f.db.pool.query(`CREATE TABLE ${f.q}.totals (id text PRIMARY KEY, total integer NOT NULL)`);
      const processor = new DeliveryProcessor({
        consumer: 'c',
        pool: f.db.pool,
        schema: f.db.schema,
        logger: silentLogger,
        handlers: { AmountAdded: addAmount(f.db.schema) },
      });
      try {
        await processor.processBatch([1, 2, 3].map((v) => deliveryOf(orderEvent(`E${v}`, 'o1', v))));
      } finally {
        await processor.close();
      }
      await f.db.pool.query(
        `UPDATE ${f.q}.inbox SET received_at = now() - CASE WHEN event_id = 'E1' THEN interval '10 days' ELSE interval '4 days' END`,
      );
      await f.waiting(5 * DAY);
      const compact = () =>
        compactInbox(f.db.pool, {
          schema: f.db.schema,
          consumer: 'c',
          projection: 'totals',
          olderThanMs: 2 * DAY,
          ...WINDOWS,
          broker: f.broker,
        });
      const bounded = await compact();
      assert.equal(bounded.broker.status, 'bounded');
      assert.equal(bounded.compacted, 1, 'only E1, received before the waiting message occurred');
      const left = await f.db.pool.query<{ event_id: string }>(`SELECT event_id FROM ${f.q}.inbox ORDER BY 1`);
      assert.deepEqual(
        left.rows.map((r) => r.event_id),
        ['E2', 'E3'],
      );
      await f.channel.purgeQueue(f.queue);
      const unbounded = await compact();
      assert.equal(unbounded.broker.status, 'empty');
      assert.equal(unbounded.compacted, 2, 'once the queue is empty the window alone decides');
    });
  });
});

function addAmount(schema: string): EventHandler {
  return async (event, { tx }) => {
    await applyIncrement(tx, { projection: 'totals', event, schema }, () =>
      tx.query(
        `INSERT INTO "${schema}".totals (id, total) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET total = totals.total + 1`,
        [event.aggregateId],
      ),
    );
  };
}
