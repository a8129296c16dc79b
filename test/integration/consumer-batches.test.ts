/**
 * Batch consumers: one transaction per batch with per-delivery outcomes, and set-based versioning.
 * Every test has its own schema, exchange and queues (test/support/consumer-env.ts).
 */
import assert from 'node:assert/strict';
import type amqp from 'amqplib';
import { applyIncrements, silentLogger } from '../../src/index.js';
import { DeliveryProcessor } from '../../src/internal/index.js';
import { withEnv, envelope, applyOrder, PROJECTION } from '../support/consumer-env.js';
import { describe, test, waitFor } from '../support/rig.js';

describe('batches', () => {
  test('one transaction per batch keeps every delivery’s own outcome, and a failing event never takes the others down', async () => {
    await withEnv(async (env) => {
      await env.withChannel(async (ch) => {
        await ch.assertQueue(env.queue, { durable: true });
        await ch.bindQueue(env.queue, env.exchange, '#');
      });
      const calls: string[] = [];
      const processor = new DeliveryProcessor({
        consumer: 'batch-test',
        pool: env.pool,
        schema: env.schema,
        logger: silentLogger,
        handlers: {
          AmountAdded: async (event, context) => {
            calls.push(event.eventId);
            if (event.aggregateId === 'poison') throw new Error('handler bug');
            await applyOrder(env.schema)(event, context);
          },
        },
      });
      try {
        const sent = [
          envelope('A2', 'a', 2),
          envelope('A1', 'a', 1),
          envelope('C1', 'c', 1),
          envelope('P1', 'poison', 1),
          envelope('A3', 'a', 3),
          envelope('A1', 'a', 1),
          envelope('A1', 'a', 1, { delta: 99 }),
        ];
        for (const e of sent) await env.publish(e);
        await env.publishRaw('order.AmountAdded', Buffer.from('not json'));
        const messages: amqp.GetMessage[] = [];
        await waitFor(async () => {
          const message = await env.channel.get(env.queue, { noAck: false });
          if (message) messages.push(message);
          return messages.length === sent.length + 1;
        }, 'all eight deliveries');
        const settlements = await processor.processBatch(messages);
        for (const message of messages) env.channel.ack(message);
        const summary = settlements.map((s) =>
          s.action === 'retry'
            ? `retry:${s.reason}`
            : s.outcome === 'quarantined'
              ? `quarantined:${s.reason}`
              : s.outcome,
        );
        assert.deepEqual(summary, [
          'applied',
          'applied',
          'applied',
          'retry:handler-error',
          'applied',
          'duplicate',
          'quarantined:content-conflict',
          'quarantined:malformed-body',
        ]);
        const applied = await env.db.pool.query<{ event_id: string }>(
          `SELECT event_id FROM "${env.schema}".applied ORDER BY seq`,
        );
        assert.deepEqual(
          applied.rows.map((r) => r.event_id).filter((id) => id.startsWith('A')),
          ['A1', 'A2', 'A3'],
          'A1, A2, A3 applied in version order',
        );
        assert.equal(
          await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'P1'`),
          0,
          'the failing event left no inbox row',
        );
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 4);
        assert.equal(
          await env.count(`SELECT count(*) AS n FROM $schema.applied`),
          4,
          'each applied exactly once despite the batch being re-run one by one',
        );
      } finally {
        await processor.close();
      }
    });
  });

  test('a batch in which one handler catches an SQL error: COMMIT answered by ROLLBACK, the others still apply, the bad one retries', async () => {
    await withEnv(async (env) => {
      await env.withChannel(async (ch) => {
        await ch.assertQueue(env.queue, { durable: true });
        await ch.bindQueue(env.queue, env.exchange, '#');
      });
      const apply = applyOrder(env.schema);
      const processor = new DeliveryProcessor({
        consumer: 'batch-commit-test',
        pool: env.pool,
        schema: env.schema,
        logger: silentLogger,
        handlers: {
          AmountAdded: async (event, context) => {
            await apply(event, context);
            if (event.aggregateId !== 'z') return;
            try {
              await context.tx.query('SELECT 1 / 0');
            } catch {
              // swallowed on purpose: the transaction of the whole batch is aborted now
            }
          },
        },
      });
      try {
        // z sorts last in the batch's version order, so no statement runs after the caught error but COMMIT.
        const sent = [envelope('A1', 'a', 1), envelope('Z1', 'z', 1), envelope('C1', 'c', 1), envelope('A2', 'a', 2)];
        for (const e of sent) await env.publish(e);
        const messages: amqp.GetMessage[] = [];
        await waitFor(async () => {
          const message = await env.channel.get(env.queue, { noAck: false });
          if (message) messages.push(message);
          return messages.length === sent.length;
        }, 'all four deliveries');
        const settlements = await processor.processBatch(messages);
        for (const message of messages) env.channel.ack(message);
        assert.deepEqual(
          settlements.map((s) => (s.action === 'retry' ? `retry:${s.reason}` : s.outcome)),
          ['applied', 'retry:handler-error', 'applied', 'applied'],
        );
        const eventIds = async (table: 'inbox' | 'applied') =>
          (
            await env.pool.query<{ event_id: string }>(
              `SELECT event_id FROM "${env.schema}".${table} ORDER BY event_id`,
            )
          ).rows.map((r) => r.event_id);
        assert.deepEqual(await eventIds('inbox'), ['A1', 'A2', 'C1'], 'the good ones committed; Z1 left no inbox row');
        assert.deepEqual(await eventIds('applied'), ['A1', 'A2', 'C1'], 'each good one applied exactly once');
      } finally {
        await processor.close();
      }
    });
  });

  test('a batch handler gets each batch’s new events at once and set-based versioning keeps per-aggregate order', async () => {
    await withEnv(async (env) => {
      const batches: number[] = [];
      const consumer = env.start({
        batchHandler: async (events, { tx }) => {
          batches.push(events.length);
          await applyIncrements(tx, { projection: PROJECTION, events, schema: env.schema }, async (applicable) => {
            let rows = 0;
            for (const event of applicable) {
              rows += (
                await tx.query(
                  `INSERT INTO "${env.schema}".applied (event_id, aggregate_id, amount) VALUES ($1, $2, $3)`,
                  [event.eventId, event.aggregateId, event.aggregateVersion],
                )
              ).rowCount!;
            }
            return rows;
          });
        },
        batchSize: 50,
      });
      await consumer.ready();
      for (let version = 1; version <= 20; version++) {
        for (const id of ['x', 'y', 'z']) await env.publish(envelope(`${id}${version}`, id, version));
      }
      await waitFor(
        async () => (await env.count(`SELECT count(*) AS n FROM $schema.applied`)) === 60,
        'all 60 events applied',
      );
      const rows = await env.db.pool.query<{ aggregate_id: string; amount: number }>(
        `SELECT aggregate_id, amount FROM "${env.schema}".applied ORDER BY seq`,
      );
      for (const id of ['x', 'y', 'z']) {
        assert.deepEqual(
          rows.rows.filter((r) => r.aggregate_id === id).map((r) => r.amount),
          Array.from({ length: 20 }, (_, i) => i + 1),
        );
      }
      assert.equal(
        batches.reduce((a, b) => a + b, 0),
        60,
      );
      assert.ok(batches.every((size) => size <= 50));
    });
  });
});
