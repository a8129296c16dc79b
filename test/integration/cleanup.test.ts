// test-files: plain-layout, retention here deletes rows one by one; a partitioned schema drops whole partitions instead (partitions.test.ts)
/** Retention against the real PostgreSQL: bounded batches, concurrent cleaners, windows validated first. */
import assert from 'node:assert/strict';
import { appendToOutbox, Relay, silentLogger, withTransaction } from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { cleanup, scheduleCleanup } from '../../src/ops/index.js';
import {
  describe,
  it,
  connectRabbit,
  createTestSchema,
  uniqueName,
  waitFor,
  type TestDatabase,
  dropTestBroker,
  AMQP_URL,
} from '../support/rig.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

async function withDb(fn: (db: TestDatabase, q: string) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvx');
  try {
    await fn(db, `"${db.schema}"`);
  } finally {
    await db.close();
  }
}

async function seedOutbox(
  db: TestDatabase,
  q: string,
  n: number,
  status: string,
  age: string,
  prefix: string,
): Promise<void> {
  await db.pool.query(
    `INSERT INTO ${q}.outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload, status, published_at)
     SELECT $4 || i, 'order', $4 || i, 1, 'X', '{}', $2, CASE WHEN $2 = 'published' THEN now() - $3::interval END FROM generate_series(1, $1::int) i`,
    [n, status, age, prefix],
  );
}

describe('cleanup', () => {
  it('deletes only published outbox rows older than the retention, in bounded batches, with two cleaners at once', async () => {
    await withDb(async (db, q) => {
      await seedOutbox(db, q, 2_500, 'published', '2 hours', 'old-');
      await seedOutbox(db, q, 10, 'published', '1 minute', 'new-');
      await seedOutbox(db, q, 5, 'pending', '0', 'pend-');
      await seedOutbox(db, q, 5, 'failed', '0', 'fail-');
      await db.pool.query(`UPDATE ${q}.outbox SET occurred_at = now() - interval '3 hours'`);
      const [a, b] = await Promise.all([
        cleanup(db.pool, { schema: db.schema, outboxRetentionMs: HOUR, batchSize: 300 }),
        cleanup(db.pool, { schema: db.schema, outboxRetentionMs: HOUR, batchSize: 300 }),
      ]);
      assert.equal(a.outboxDeleted + b.outboxDeleted, 2_500);
      // Which cleaner gets how much is up to the scheduler (one may finish before the other starts);
      // that the work went in batches of at most 300 rows is not.
      assert.ok(a.batches + b.batches >= Math.ceil(2_500 / 300), `bounded batches: ${a.batches} + ${b.batches}`);
      const left = await db.pool.query(
        `SELECT status, count(*)::int AS n FROM ${q}.outbox GROUP BY status ORDER BY status`,
      );
      assert.deepEqual(left.rows, [
        { status: 'failed', n: 5 },
        { status: 'pending', n: 5 },
        { status: 'published', n: 10 },
      ]);
    });
  });

  it('stops after maxBatches and goes on where it stopped on the next call', async () => {
    await withDb(async (db, q) => {
      await seedOutbox(db, q, 250, 'published', '2 hours', 'old-');
      assert.deepEqual(
        await cleanup(db.pool, { schema: db.schema, outboxRetentionMs: HOUR, batchSize: 100, maxBatches: 1 }),
        { outboxDeleted: 100, inboxDeleted: 0, batches: 1 },
      );
      assert.equal(
        (await cleanup(db.pool, { schema: db.schema, outboxRetentionMs: HOUR, batchSize: 100 })).outboxDeleted,
        150,
      );
    });
  });

  it('deletes inbox rows only past a replay window that exceeds the retry horizon and the quarantine replay window', async () => {
    await withDb(async (db, q) => {
      await db.pool.query(
        `INSERT INTO ${q}.inbox (consumer, event_id, fingerprint, aggregate_type, aggregate_id, aggregate_version, event_type, received_at)
         SELECT 'c', 'e' || i, 'f', 'order', 'o' || i, 1, 'X', now() - CASE WHEN i <= 1200 THEN interval '3 days' ELSE interval '1 hour' END
           FROM generate_series(1, 1210) i`,
      );
      const windows = { retryHorizonMs: HOUR, quarantineReplayWindowMs: DAY };
      assert.throws(
        () =>
          scheduleCleanup(db.pool, {
            schema: db.schema,
            outboxRetentionMs: HOUR,
            inboxRetentionMs: DAY,
            ...windows,
            intervalMs: 1_000,
          }),
        (err: unknown) =>
          err instanceof ConfigError &&
          err.field === 'inboxRetentionMs' &&
          /must exceed .* quarantine replay window \(86400000 ms\)/.test(err.message),
      );
      await assert.rejects(
        cleanup(db.pool, { schema: db.schema, outboxRetentionMs: HOUR, inboxRetentionMs: 2 * DAY }),
        (err: unknown) => err instanceof ConfigError && err.field === 'inboxRetentionMs',
      );
      assert.equal(
        Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${q}.inbox`)).rows[0]?.n),
        1_210,
        'nothing deleted before the windows were valid',
      );
      const result = await cleanup(db.pool, {
        schema: db.schema,
        outboxRetentionMs: HOUR,
        inboxRetentionMs: 2 * DAY,
        ...windows,
        batchSize: 500,
      });
      assert.equal(result.inboxDeleted, 1_200);
      assert.equal(result.broker?.status, 'not-configured', 'no broker given: by age alone, and the result says so');
      assert.match(result.broker.warning ?? '', /no broker given/);
      assert.equal(Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${q}.inbox`)).rows[0]?.n), 10);
    });
  });

  it('scheduleCleanup runs on its interval until stopped', async () => {
    await withDb(async (db, q) => {
      await seedOutbox(db, q, 40, 'published', '2 hours', 'old-');
      const results: number[] = [];
      const stop = scheduleCleanup(db.pool, {
        schema: db.schema,
        outboxRetentionMs: HOUR,
        intervalMs: 50,
        onResult: (r) => results.push(r.outboxDeleted),
      });
      await waitFor(() => results.length >= 2, 'two scheduled runs');
      await stop();
      assert.equal(results[0], 40);
      assert.equal(results[1], 0);
    });
  });

  it('runs safely under concurrent writes: producers append and a relay publishes while cleaners delete; nothing pending is touched and nothing is lost', async () => {
    await withDb(async (db, q) => {
      const exchange = uniqueName('cvx-x');
      const queue = uniqueName('cvx-q');
      const connection = await connectRabbit();
      const channel = await connection.createChannel();
      await channel.assertExchange(exchange, 'topic', { durable: true }); // as the relay declares it
      await channel.assertQueue(queue, { durable: false });
      await channel.bindQueue(queue, exchange, '#');
      const received = new Set<string>();
      await channel.consume(queue, (message) => message && received.add(String(message.properties.messageId)), {
        noAck: true,
      });
      const relay = new Relay({
        amqpUrl: AMQP_URL,
        pool: db.pool,
        schema: db.schema,
        exchange,
        logger: silentLogger,
        pollIntervalMs: 10,
        batchSize: 50,
      }).start();
      const deleted: number[] = [];
      // Retention 0: every published row is fair game the moment it is marked.
      const cleaners = [1, 2].map(() =>
        scheduleCleanup(db.pool, {
          schema: db.schema,
          outboxRetentionMs: 0,
          batchSize: 25,
          intervalMs: 5,
          onResult: (r) => deleted.push(r.outboxDeleted),
        }),
      );
      const appended: string[] = [];
      try {
        await Promise.all(
          [0, 1, 2].map(async (producer) => {
            for (let version = 1; version <= 100; version++) {
              const { eventId } = await withTransaction(db.pool, (tx) =>
                appendToOutbox(
                  tx,
                  {
                    aggregateType: 'order',
                    aggregateId: `p${producer}`,
                    aggregateVersion: version,
                    eventType: 'Placed',
                    payload: { version },
                  },
                  { schema: db.schema },
                ),
              );
              appended.push(eventId);
            }
          }),
        );
        await waitFor(
          () => appended.every((id) => received.has(id)) || undefined,
          'every appended event to reach the broker',
          30_000,
        );
        await waitFor(
          async () =>
            Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${q}.outbox`)).rows[0]?.n) === 0 ||
            undefined,
          'the cleaners to catch up',
        );
      } finally {
        await Promise.all(cleaners.map((stop) => stop()));
        await relay.stop();
        await dropTestBroker(connection, [queue, exchange]);
        await connection.close();
      }
      assert.equal(appended.length, 300);
      assert.equal(
        deleted.reduce((a, b) => a + b, 0),
        300,
        'each published row deleted exactly once across both cleaners',
      );
    });
  });
});
