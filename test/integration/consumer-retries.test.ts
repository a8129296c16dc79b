/**
 * Retries: bounded through the retry tiers, serialization re-runs, handler-chosen Permanent/Transient
 * errors, outage-like errors that never quarantine, and version gaps without the reorder buffer.
 * Every test has its own schema, exchange and queues (test/support/consumer-env.ts).
 */
import assert from 'node:assert/strict';
import { PermanentError, TransientError } from '../../src/errors.js';
import { ATTEMPT_HEADER } from '../../src/inbox/index.js';
import {
  withEnv,
  envelope,
  applyOrder,
  collect,
  quarantineRows,
  capturingLogger,
  SECRET,
} from '../support/consumer-env.js';
import { describe, test, waitFor } from '../support/rig.js';

describe('consumer retries', () => {
  test('a handler that always fails is retried through the retry tiers and quarantined after maxAttempts', async () => {
    await withEnv(async (env) => {
      const attempts: number[] = [];
      const consumer = env.start({
        maxAttempts: 3,
        handlers: {
          AmountAdded: async (event, { tx, attempt }) => {
            attempts.push(attempt);
            await tx.query(`INSERT INTO "${env.schema}".applied (event_id, aggregate_id, amount) VALUES ($1, $2, 1)`, [
              event.eventId,
              event.aggregateId,
            ]);
            throw new Error('downstream rejected the order');
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.quarantined === 1, 'the delivery to be quarantined');

        assert.deepEqual(attempts, [1, 2, 3], 'the handler ran exactly maxAttempts times with growing attempt numbers');
        assert.deepEqual(
          settled.map((s) =>
            s.action === 'retry'
              ? `retry:${s.attempt}:${s.reason}`
              : s.outcome === 'quarantined'
                ? `quarantined:${s.reason}`
                : s.outcome,
          ),
          ['retry:1:handler-error', 'retry:2:handler-error', 'quarantined:handler-failed'],
        );
        assert.equal(consumer.stats.retried, 2);
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0, 'no inbox row was ever committed');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 0, 'every attempt rolled back');

        const [row, ...more] = await quarantineRows(env);
        assert.equal(more.length, 0);
        assert.equal(row!.reason, 'handler-failed');
        assert.deepEqual(
          [row!.failure_class, row!.attempts, row!.event_type, row!.schema_version, row!.times_seen],
          ['exhausted', 3, 'AmountAdded', 1, 1],
        );
        assert.equal(row!.event_id, 'E1');
        assert.match(row!.detail, /after 3 attempts/);
        assert.match(row!.detail, /downstream rejected the order/);
        // The quarantined copy is the one that came back from the retry queue.
        const headers = row!.properties.headers ?? {};
        assert.equal(headers[ATTEMPT_HEADER], 2, 'the third delivery carried the attempt counter of the second');
        const deaths = headers['x-death'] as { queue: string; reason: string }[] | undefined;
        assert.ok(
          Array.isArray(deaths) && deaths.some((d) => d.queue === env.retryTier && d.reason === 'expired'),
          JSON.stringify(deaths),
        );
        assert.equal(row!.properties.messageId, 'E1', 'the copy kept the messageId');
        // After the first trip the delivery's routing key is the queue name (dead-lettered via the default
        // exchange); the header must keep the routing key the event was first published with.
        assert.equal(
          headers['x-converge-original-routing-key'],
          'order.AmountAdded',
          'original routing key survives a second retry',
        );
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
      assert.equal((await env.checkQueue(env.retryTier)).messageCount, 0, 'nothing left waiting');
    });
  });

  test('a serialization failure re-runs the whole transaction in-process: handler twice, applied once', async () => {
    await withEnv(async (env) => {
      const attempts: number[] = [];
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        handlers: {
          AmountAdded: async (event, ctx) => {
            attempts.push(ctx.attempt);
            await apply(event, ctx);
            if (attempts.length === 1)
              throw Object.assign(new Error('could not serialize access due to concurrent update'), { code: '40001' });
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        const sent = envelope('E1', 'o1', 1, { delta: 3 });
        await env.publish(sent);
        await waitFor(() => settled.length === 1, 'the delivery to settle');
        assert.deepEqual(settled[0], { action: 'ack', outcome: 'applied', eventId: 'E1', occurredAt: sent.occurredAt });
        assert.deepEqual(attempts, [1, 1], 'same delivery, transaction run twice');
        assert.equal(consumer.stats.retried, 0, 'no trip through the retry queue');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 1);
        assert.equal(
          await env.count(`SELECT count(*) AS n FROM $schema.applied`),
          1,
          'the first run rolled back completely',
        );
        assert.equal(await env.count(`SELECT version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 1);
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('a handler chooses: PermanentError is quarantined on the first attempt, TransientError waits past maxAttempts; neither message reaches the logs', async () => {
    await withEnv(async (env) => {
      const logger = capturingLogger();
      let transientLeft = 4;
      const consumer = env.start({
        logger,
        maxAttempts: 2,
        handlers: {
          AmountAdded: async (event, context) => {
            if (event.aggregateId === 'closed') throw new PermanentError(`order closed for ${SECRET}`);
            if (transientLeft-- > 0) throw new TransientError(`search down, token ${SECRET}`);
            await applyOrder(env.schema)(event, context);
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('P1', 'closed', 1));
        await env.publish(envelope('T1', 'o1', 1));
        await waitFor(
          () => consumer.stats.applied === 1 && consumer.stats.quarantined === 1,
          'P1 quarantined and T1 applied',
        );
        const forP1 = settled.filter((s) => s.eventId === 'P1');
        assert.deepEqual(
          forP1.map((s) => (s.action === 'ack' && s.outcome === 'quarantined' ? s.reason : s.action)),
          ['handler-permanent'],
          'no retry at all',
        );
        const forT1 = settled
          .filter((s) => s.eventId === 'T1')
          .map((s) => (s.action === 'retry' ? s.reason : s.action === 'ack' ? s.outcome : ''));
        assert.deepEqual(
          forT1,
          ['handler-transient', 'handler-transient', 'handler-transient', 'handler-transient', 'applied'],
          'four waits, more than maxAttempts 2',
        );
        const [row] = await quarantineRows(env);
        assert.equal(row!.reason, 'handler-permanent');
        assert.match(row!.detail, /order closed/, "the handler's message is kept for a person in the quarantine row");
        for (const record of logger.records)
          assert.ok(!record.includes(SECRET), `log line leaks the handler's message: ${record}`);
        assert.ok(
          logger.records.some((r) => r.includes('CONVERGE_TRANSIENT')),
          'the retries are logged by code',
        );
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('an outage-like error keeps retrying past maxAttempts and never quarantines', async () => {
    await withEnv(async (env) => {
      const attempts: number[] = [];
      const apply = applyOrder(env.schema);
      const consumer = env.start({
        maxAttempts: 2,
        handlers: {
          AmountAdded: async (event, ctx) => {
            attempts.push(ctx.attempt);
            // 4 runs per delivery (withTransaction retries 3 times): fail for the first three deliveries.
            if (attempts.length <= 12) throw Object.assign(new Error('could not serialize access'), { code: '40001' });
            await apply(event, ctx);
          },
        },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1));
        await waitFor(() => consumer.stats.applied === 1, 'the delivery to apply eventually');
        assert.deepEqual(attempts, [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4]);
        assert.deepEqual(
          settled.map((s) => (s.action === 'retry' ? s.reason : s.outcome)),
          ['database-unavailable', 'database-unavailable', 'database-unavailable', 'applied'],
        );
        assert.equal(consumer.stats.quarantined, 0, 'attempt 4 > maxAttempts 2, still not given up');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), 1);
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('without the reorder buffer a version gap sends the later event through the retry queue; with prefetch 1 both still apply in order', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({
        prefetch: 1,
        reorderBuffer: false,
        handlers: { AmountAdded: applyOrder(env.schema) },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await waitFor(() => consumer.stats.applied === 2, 'both events to apply');
        const { rows } = await env.pool.query<{ event_id: string }>(
          `SELECT event_id FROM "${env.schema}".applied ORDER BY seq`,
        );
        assert.deepEqual(
          rows.map((r) => r.event_id),
          ['E1', 'E2'],
          'applied in version order',
        );
        assert.ok(
          settled.some((s) => s.action === 'retry' && s.eventId === 'E2' && s.reason === 'version-gap'),
          'E2 waited as a version gap',
        );
        assert.equal(await env.count(`SELECT version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 2);
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 30);
        assert.equal(consumer.stats.quarantined, 0);
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.queue)).messageCount, 0);
      assert.equal((await env.checkQueue(env.retryTier)).messageCount, 0);
    });
  });
});
