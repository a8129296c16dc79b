/**
 * The consumer's normal path against the real services: declaration, prefetch, ack only after commit,
 * duplicates, next-hop outbox events, a crash between commit and ack, and graceful stop.
 * Every test has its own schema, exchange and queues (test/support/consumer-env.ts).
 */
import assert from 'node:assert/strict';
import pg from 'pg';
import { Relay, appendToOutbox, silentLogger, withTransaction, type EventEnvelope } from '../../src/index.js';
import {
  withEnv,
  envelope,
  applyOrder,
  gate,
  collect,
  capturingLogger,
  quarantineRows,
  SECRET,
} from '../support/consumer-env.js';
import { describe, test, DATABASE_URL, uniqueName, waitFor, rabbitmqctl, AMQP_URL } from '../support/rig.js';

describe('consumer delivery and ack-after-commit', () => {
  test('declares a durable queue bound to the exchange and a dead-lettering <queue>.retry', async () => {
    await withEnv(async (env) => {
      const seen: string[] = [];
      const consumer = env.start({ handlers: { AmountAdded: async (event) => void seen.push(event.eventId) } });
      await consumer.ready();

      const main = await env.checkQueue(env.queue);
      assert.equal(main.queue, env.queue);
      assert.equal(main.consumerCount, 1, 'the consumer is subscribed to the main queue');
      const retry = await env.checkQueue(env.retryTier);
      assert.equal(retry.queue, env.retryTier);
      assert.equal(retry.consumerCount, 0, 'nobody consumes a retry tier: copies only expire back');
      assert.equal(
        (await env.checkQueue(env.retryQueue)).consumerCount,
        0,
        'the retry queue of earlier versions stays',
      );

      // Durable (a non-durable redeclaration is refused) and the retry queue dead-letters to the main queue.
      await assert.rejects(
        env.withChannel((ch) => ch.assertQueue(env.queue, { durable: false })),
        /PRECONDITION/,
      );
      await env.withChannel((ch) =>
        ch.assertQueue(env.retryTier, {
          durable: true,
          arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': env.queue, 'x-message-ttl': 1000 },
        }),
      );
      await assert.rejects(
        env.withChannel((ch) =>
          ch.assertQueue(env.retryTier, {
            durable: true,
            arguments: {
              'x-dead-letter-exchange': '',
              'x-dead-letter-routing-key': 'elsewhere',
              'x-message-ttl': 1000,
            },
          }),
        ),
        /PRECONDITION/,
      );
      await assert.rejects(
        env.withChannel((ch) => ch.assertExchange(env.exchange, 'fanout', { durable: true })),
        /PRECONDITION/,
      );

      // Bound: an event published to the exchange reaches the handler.
      await env.publish(envelope('E1', 'o1', 1));
      await waitFor(() => seen.includes('E1'), 'the event to reach the handler through the binding');
    });
  });

  test('prefetch bounds the unacknowledged deliveries while the handler is blocked', async () => {
    await withEnv(async (env) => {
      const gates = Array.from({ length: 5 }, gate);
      let calls = 0;
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        prefetch: 2,
        handlers: {
          AmountAdded: async (event, ctx) => {
            const mine = gates[calls++]!;
            await mine.promise;
            await apply(event, ctx);
          },
        },
      });
      try {
        await consumer.ready();
        for (let i = 1; i <= 5; i++) await env.publish(envelope(`E${i}`, `o${i}`, 1));

        await waitFor(() => calls === 1, 'the first delivery to reach the handler');
        await waitFor(
          async () => (await env.checkQueue(env.queue)).messageCount === 3,
          'two deliveries taken, three ready',
        );
        for (let i = 0; i < 10; i++) {
          const { messageCount } = await env.checkQueue(env.queue);
          assert.equal(messageCount, 3, 'never more than prefetch (2) deliveries are out');
          assert.equal(calls, 1, 'deliveries are processed one at a time');
        }

        gates[0]!.open();
        await waitFor(() => calls === 2, 'the second delivery to start once the first committed');
        await waitFor(
          async () => (await env.checkQueue(env.queue)).messageCount === 2,
          'the freed slot to be refilled',
        );
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 1);

        for (const g of gates) g.open();
        await waitFor(
          async () => (await env.count(`SELECT count(*) AS n FROM $schema.applied`)) === 5,
          'all five to apply',
        );
        await waitFor(() => consumer.stats.applied === 5, 'all five to be settled');
      } finally {
        for (const g of gates) g.open();
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'all five were acked');
      assert.equal(calls, 5);
    });
  });

  test('acks only after commit: blocked in the transaction → unacked and invisible; released → committed and acked', async () => {
    await withEnv(async (env) => {
      const entered = gate();
      const release = gate();
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        handlers: {
          AmountAdded: async (event, ctx) => {
            await apply(event, ctx); // inbox row and projection written, not committed
            entered.open();
            await release.promise;
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 7 }));
        await entered.promise;

        const queued = await env.checkQueue(env.queue);
        assert.equal(queued.messageCount, 0, 'the delivery left the ready list');
        const listing = await rabbitmqctl(['list_queues', 'name', 'messages_unacknowledged']);
        const line = listing.split('\n').find((l) => l.split('\t')[0] === env.queue);
        assert.equal(
          line?.split('\t')[1]?.trim(),
          '1',
          `one unacknowledged delivery while the transaction is open (${line})`,
        );

        // A separate connection sees nothing of the open transaction.
        const other = new pg.Client({ connectionString: DATABASE_URL });
        await other.connect();
        try {
          const inbox = await other.query(`SELECT 1 FROM "${env.schema}".inbox WHERE event_id = 'E1'`);
          const applied = await other.query(`SELECT 1 FROM "${env.schema}".applied`);
          assert.equal(inbox.rowCount, 0, 'inbox row not visible before commit');
          assert.equal(applied.rowCount, 0, 'projection write not visible before commit');
        } finally {
          await other.end();
        }
        assert.equal(settled.length, 0, 'nothing settled while the transaction is open');

        release.open();
        await waitFor(() => settled.length === 1, 'the delivery to settle');
        assert.deepEqual(
          { ...settled[0], occurredAt: undefined },
          { action: 'ack', outcome: 'applied', eventId: 'E1', occurredAt: undefined },
        );
        assert.equal(
          await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E1'`),
          1,
          'inbox row committed',
        );
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 7);
      } finally {
        release.open();
        await env.stop(consumer);
      }
      // An unacked delivery would be back in the ready list once the consumer's channel closed.
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'acked');
      assert.equal((await env.checkQueue(env.retryTier)).messageCount, 0, 'never parked');
    });
  });

  test('a handler that catches an SQL error: COMMIT answered by ROLLBACK is never acked as applied; retried, then quarantined', async () => {
    await withEnv(async (env) => {
      const logger = capturingLogger();
      const apply = applyOrder(env.schema);
      const attempts: number[] = [];
      await env.pool.query(`CREATE TABLE "${env.schema}".seen (event_id text PRIMARY KEY)`);
      await env.pool.query(`INSERT INTO "${env.schema}".seen (event_id) VALUES ('E1')`);
      const consumer = env.start({
        logger,
        maxAttempts: 2,
        handlers: {
          AmountAdded: async (event, ctx) => {
            attempts.push(ctx.attempt);
            await apply(event, ctx);
            try {
              // "Already seen, ignore it": the unique violation aborts the whole transaction.
              await ctx.tx.query(`INSERT INTO "${env.schema}".seen (event_id) VALUES ($1)`, [event.eventId]);
            } catch {
              // swallowed on purpose
            }
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 7, note: SECRET }));
        // An ack as applied ends the wait too, so that defect fails at once with what happened.
        const applied = () => settled.some((s) => s.action === 'ack' && s.outcome === 'applied');
        await waitFor(() => consumer.stats.quarantined === 1 || applied(), 'the delivery to be quarantined');
        assert.deepEqual(
          settled.map((s) => (s.action === 'retry' ? `retry:${s.attempt}:${s.reason}` : `${s.outcome}`)),
          ['retry:1:handler-error', 'quarantined'],
          'never acked as applied',
        );
        assert.deepEqual(attempts, [1, 2]);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0, 'no inbox row committed');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 0, 'no projection write committed');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.projection_state`), 0, 'no version moved');
        const [row, ...more] = await quarantineRows(env);
        assert.equal(more.length, 0);
        assert.equal(row!.reason, 'handler-failed');
        assert.equal(row!.event_id, 'E1');
        assert.match(row!.detail, /COMMIT with ROLLBACK/);
        const hints = logger.records.filter((r) =>
          r.includes('"msg":"PostgreSQL answered COMMIT with ROLLBACK: a handler caught'),
        );
        assert.equal(hints.length, 2, `one hint per attempt: ${logger.records.join('\n')}`);
        assert.match(hints[0]!, /"eventId":"E1".*SAVEPOINT/);
        assert.ok(!logger.records.some((r) => r.includes(SECRET)), 'no payload in the logs');
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'settled');
      assert.equal((await env.checkQueue(env.retryTier)).messageCount, 0, 'nothing left waiting');
    });
  });

  test('the same event delivered again (same fingerprint, even re-encoded) runs the handler once', async () => {
    await withEnv(async (env) => {
      let calls = 0;
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        handlers: { AmountAdded: async (event, ctx) => void (calls++, await apply(event, ctx)) },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        const event = envelope('E1', 'o1', 1, { delta: 5, note: { b: 2, a: 1 } });
        await env.publish(event);
        await env.publish(event);
        // Another producer's encoding: keys in another order, other spacing, another occurredAt.
        const reordered = `{ "payload": {"note": {"a": 1, "b": 2}, "delta": 5}, "occurredAt": "2020-01-01T00:00:00.000Z", "kind": "incremental",
          "schemaVersion": 1, "eventType": "AmountAdded", "aggregateVersion": 1, "aggregateId": "o1", "aggregateType": "order", "eventId": "E1" }`;
        await env.publishRaw('order.AmountAdded', Buffer.from(reordered), { messageId: 'E1' });

        await waitFor(() => settled.length === 3, 'three deliveries to settle');
        assert.deepEqual(
          settled.map((s) => (s.action === 'ack' ? s.outcome : s.action)),
          ['applied', 'duplicate', 'duplicate'],
        );
        assert.equal(calls, 1, 'the handler ran once');
        assert.equal(consumer.stats.applied, 1);
        assert.equal(consumer.stats.duplicate, 2);
        assert.equal(consumer.stats.quarantined, 0);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 1);
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 5);
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'duplicates are acked');
    });
  });

  test('a next-hop outbox event commits only with the handler, and once', async () => {
    await withEnv(async (env) => {
      const attempts: number[] = [];
      const secondAttempt = gate();
      const consumer = env.start({
        handlers: {
          AmountAdded: async (event, { tx, attempt, schema }) => {
            attempts.push(attempt);
            if (attempt > 1) await secondAttempt.promise; // hold the retry until the first outcome is checked
            await appendToOutbox(
              tx,
              {
                eventId: `${event.eventId}:sms`,
                aggregateType: 'notification',
                aggregateId: event.aggregateId,
                aggregateVersion: 1,
                eventType: 'SmsRequested',
                payload: { order: event.aggregateId },
              },
              { schema },
            );
            if (attempt === 1) throw new Error('sms template service unavailable');
          },
        },
      });
      const settled = collect(consumer);
      const outboxRows = () => env.count(`SELECT count(*) AS n FROM $schema.outbox`);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => settled.length >= 1, 'the first attempt to settle');
        assert.equal(settled[0]!.action, 'retry');
        assert.equal(await outboxRows(), 0, 'the failed attempt left no next-hop event');
        secondAttempt.open();

        await waitFor(() => consumer.stats.applied === 1, 'the second attempt to commit');
        assert.deepEqual(attempts, [1, 2]);
        const { rows } = await env.pool.query(`SELECT event_id, event_type, status FROM "${env.schema}".outbox`);
        assert.deepEqual(rows, [{ event_id: 'E1:sms', event_type: 'SmsRequested', status: 'pending' }]);

        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.duplicate === 1, 'the redelivered copy to be recognised');
        assert.equal(await outboxRows(), 1, 'a duplicate adds no second next-hop event');
        assert.deepEqual(attempts, [1, 2], 'the handler did not run for the duplicate');
      } finally {
        secondAttempt.open();
        await env.stop(consumer);
      }
    });
  });

  test('end to end: outbox → relay → consumer → next-hop outbox → relay → second consumer', async () => {
    await withEnv(async (env) => {
      const smsQueue = uniqueName('cvc.sms');
      env.extraQueues.push(smsQueue);
      const apply = applyOrder(env.schema);
      const orders = env.start({
        bindings: ['order.#'],
        handlers: {
          AmountAdded: async (event, ctx) => {
            await apply(event, ctx);
            await appendToOutbox(
              ctx.tx,
              {
                eventId: `${event.eventId}:sms`,
                aggregateType: 'notification',
                aggregateId: event.aggregateId,
                aggregateVersion: 1,
                eventType: 'SmsRequested',
                payload: {},
              },
              { schema: ctx.schema },
            );
          },
        },
      });
      const received: EventEnvelope[] = [];
      const sms = env.start({
        queue: smsQueue,
        bindings: ['notification.#'],
        handlers: { SmsRequested: async (event) => void received.push(event) },
      });
      const relay = new Relay({
        amqpUrl: AMQP_URL,
        pool: env.pool,
        schema: env.schema,
        exchange: env.exchange,
        logger: silentLogger,
        pollIntervalMs: 20,
      }).start();
      try {
        await Promise.all([orders.ready(), sms.ready()]);
        const { eventId } = await withTransaction(env.pool, (tx) =>
          appendToOutbox(
            tx,
            {
              aggregateType: 'order',
              aggregateId: 'o9',
              aggregateVersion: 1,
              eventType: 'AmountAdded',
              payload: { delta: 4 },
            },
            { schema: env.schema },
          ),
        );
        // The handler runs inside the transaction: wait for the settled (committed) delivery, not only the call.
        await waitFor(
          () => received.length === 1 && sms.stats.applied === 1,
          'the next hop to reach the second consumer',
        );
        assert.equal(received[0]!.eventId, `${eventId}:sms`);
        assert.equal(orders.stats.applied, 1);
        assert.equal(orders.stats.quarantined, 0, 'the order queue never saw the notification');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE consumer = $1`, [smsQueue]), 1);
        await waitFor(
          async () => (await env.count(`SELECT count(*) AS n FROM $schema.outbox WHERE status = 'published'`)) === 2,
          'both outbox rows marked published',
        );
      } finally {
        await relay.stop();
      }
    });
  });

  test('a crash between commit and ack (afterCommit hook) leaves the delivery unacked; the redelivery is a duplicate', async () => {
    await withEnv(async (env) => {
      let crashes = 0;
      const consumer = env.start({
        handlers: { AmountAdded: applyOrder(env.schema) },
        hooks: {
          afterCommit: () => {
            if (crashes++ === 0) throw new Error('crash after commit');
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 5 }));
        await waitFor(
          () => settled.some((s) => s.action === 'ack' && s.outcome === 'duplicate'),
          'the redelivered copy to be recognised',
        );
        assert.deepEqual(
          settled.map((s) => s.action === 'ack' && s.outcome),
          ['duplicate'],
          'the first settlement was never reported: the process "died" before the ack',
        );
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E1'`), 1);
        assert.equal(consumer.stats.applied, 0, 'stats count settlements reported after the ack');
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0, 'acked at last');
    });
  });

  test('stop() lets the delivery in progress commit and ack, and takes no new one', async () => {
    await withEnv(async (env) => {
      const entered = gate();
      const release = gate();
      const apply = applyOrder(env.schema);
      let calls = 0;
      const consumer = env.start({
        prefetch: 1,
        handlers: {
          AmountAdded: async (event, ctx) => {
            calls++;
            await apply(event, ctx);
            entered.open();
            await release.promise;
          },
        },
      });
      await consumer.ready();
      await env.publish(envelope('E1', 'o1', 1));
      await entered.promise;
      await env.publish(envelope('E2', 'o2', 1)); // held back by prefetch 1

      let stopped = false;
      const stopping = env.stop(consumer).then(() => void (stopped = true));
      // stop() cancels the subscription first; only then does it wait for the handler.
      await waitFor(
        async () => (await env.checkQueue(env.queue)).consumerCount === 0,
        'the subscription to be cancelled',
      );
      assert.equal(stopped, false, 'stop() waits for the transaction in progress');
      assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0, 'not committed yet');

      release.open();
      await stopping;
      assert.equal(
        await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E1'`),
        1,
        'committed before stop() returned',
      );
      assert.equal(consumer.stats.applied, 1);
      assert.equal(calls, 1, 'no new delivery taken while stopping');
      const queued = await env.checkQueue(env.queue);
      assert.equal(queued.messageCount, 1, 'E1 acked (not back in the queue); E2 still waiting for the next consumer');
      assert.equal(queued.consumerCount, 0);
    });
  });
});
