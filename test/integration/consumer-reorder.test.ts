/**
 * The reorder buffer: early events parked durably and drained in order, its limits, repairs that
 * close gaps, and draining on subscribe.
 * Every test has its own schema, exchange and queues (test/support/consumer-env.ts).
 */
import assert from 'node:assert/strict';
import {
  repairGaps,
  readGaps,
  silentLogger,
  type EventEnvelope,
  type EventHandler,
  type Settlement,
} from '../../src/index.js';
import { ConfigError, ContentConflictError } from '../../src/errors.js';
import { DeliveryProcessor } from '../../src/internal/index.js';
import {
  withEnv,
  type Env,
  envelope,
  applyOrder,
  collect,
  quarantineRows,
  PROJECTION,
} from '../support/consumer-env.js';
import { describe, test, waitFor, deliveryOf } from '../support/rig.js';

describe('reorder buffer', () => {
  const parkedRows = (env: Env) =>
    env.pool.query<{ event_id: string; aggregate_version: string; waiting_for: string; projection: string }>(
      `SELECT event_id, aggregate_version, waiting_for, projection FROM "${env.schema}".parked ORDER BY aggregate_version`,
    );
  const appliedIds = async (env: Env) =>
    (await env.pool.query<{ event_id: string }>(`SELECT event_id FROM "${env.schema}".applied ORDER BY seq`)).rows.map(
      (r) => r.event_id,
    );

  test('early events are parked durably and acked, and apply in order, each with its inbox row, once the missing version arrives', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      const settled = collect(consumer);
      const drained: Settlement[] = [];
      consumer.on('drained', (s) => drained.push(s));
      try {
        await consumer.ready();
        await env.publish(envelope('E3', 'o1', 3, { delta: 30 }));
        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await waitFor(async () => (await parkedRows(env)).rows.length === 2, 'E3 and E2 parked');
        await waitFor(async () => (await env.checkQueue(env.queue)).messageCount === 0, 'both deliveries acked');
        assert.deepEqual(
          (await parkedRows(env)).rows.map((r) => [
            r.event_id,
            Number(r.aggregate_version),
            Number(r.waiting_for),
            r.projection,
          ]),
          [
            ['E2', 2, 1, PROJECTION],
            ['E3', 3, 1, PROJECTION],
          ],
        );
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 0, 'a parked event is not processed');
        const gaps = await readGaps(env.pool, { schema: env.schema, consumer: env.queue });
        assert.deepEqual(
          gaps.map((g) => [
            g.consumer,
            g.projection,
            g.aggregateId,
            g.currentVersion,
            g.missingVersion,
            g.parkedVersions,
          ]),
          [[env.queue, PROJECTION, 'o1', 0, 1, [2, 3]]],
        );
        assert.deepEqual(
          await readGaps(env.pool, { schema: env.schema, olderThanMs: 3_600_000 }),
          [],
          'not open for an hour',
        );
        assert.deepEqual(
          settled.map((s) => (s.action === 'ack' ? s.outcome : s.action)),
          ['parked', 'parked'],
        );

        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await waitFor(() => consumer.stats.applied === 3, 'E1 applied and E2, E3 drained');
        assert.deepEqual(await appliedIds(env), ['E1', 'E2', 'E3']);
        assert.deepEqual(
          drained.map((s) => s.eventId),
          ['E2', 'E3'],
        );
        assert.equal((await parkedRows(env)).rows.length, 0, 'drained events leave the buffer');
        assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox`), 3);
        assert.equal(await env.count(`SELECT version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 3);
        assert.deepEqual(
          { parked: consumer.stats.parked, drained: consumer.stats.drained, retried: consumer.stats.retried },
          { parked: 2, drained: 2, retried: 0 },
        );
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.retryTier)).messageCount, 0, 'nothing went through the retry queue');
    });
  });

  test('a redelivered parked event is acked without a second row; the same eventId with other content is a conflict', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      const conflicts: ContentConflictError[] = [];
      consumer.on('conflict', (err) => conflicts.push(err));
      try {
        await consumer.ready();
        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await env.publish(envelope('E2', 'o1', 2, { delta: 99 }));
        await waitFor(() => consumer.stats.quarantined === 1, 'the conflicting copy to be quarantined');
        assert.equal(consumer.stats.parked, 2, 'both identical copies were acked as parked');
        assert.equal((await parkedRows(env)).rows.length, 1);
        const [row] = await quarantineRows(env);
        assert.equal(row!.reason, 'content-conflict');
        assert.equal(conflicts[0]?.eventId, 'E2');

        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        await waitFor(() => consumer.stats.applied === 2, 'E1 and the parked E2 applied');
        assert.equal(
          await env.count(`SELECT sum(amount) AS n FROM $schema.applied`),
          30,
          'the parked content, not the conflicting one',
        );
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('is bounded per aggregate: beyond the limit an early event waits in the retry queue instead', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({
        prefetch: 1,
        reorderBuffer: { maxPerAggregate: 1 },
        handlers: { AmountAdded: applyOrder(env.schema) },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E2', 'o1', 2));
        await env.publish(envelope('E3', 'o1', 3));
        await env.publish(envelope('F2', 'o2', 2));
        await waitFor(
          () => settled.some((s) => s.action === 'retry' && s.eventId === 'E3'),
          'E3 refused by the full buffer',
        );
        assert.ok(
          settled.some((s) => s.action === 'retry' && s.eventId === 'E3' && s.reason === 'reorder-buffer-full'),
        );
        await waitFor(async () => (await parkedRows(env)).rows.length === 2, 'E2 and F2 (another aggregate) parked');

        await env.publish(envelope('E1', 'o1', 1));
        await env.publish(envelope('F1', 'o2', 1));
        await waitFor(
          () => consumer.stats.applied === 5,
          'all five applied, E3 after its trip through the retry queue',
        );
        const ids = await appliedIds(env);
        assert.deepEqual(
          ids.filter((id) => id.startsWith('E')),
          ['E1', 'E2', 'E3'],
        );
        assert.deepEqual(
          ids.filter((id) => id.startsWith('F')),
          ['F1', 'F2'],
        );
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('a total limit caps the buffer across aggregates', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({
        prefetch: 1,
        reorderBuffer: { maxTotal: 1 },
        handlers: { AmountAdded: applyOrder(env.schema) },
      });
      const settled = collect(consumer);
      try {
        await consumer.ready();
        await env.publish(envelope('E2', 'o1', 2));
        await env.publish(envelope('F2', 'o2', 2));
        await waitFor(
          () => settled.some((s) => s.action === 'retry' && s.eventId === 'F2' && s.reason === 'reorder-buffer-full'),
          'F2 refused',
        );
        assert.equal((await parkedRows(env)).rows.length, 1);
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('an event parked just after its predecessor committed (and drained nothing) drains itself', async () => {
    await withEnv(async (env) => {
      let holdE2 = true;
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      let gapSeen!: () => void;
      const gap = new Promise<void>((resolve) => (gapSeen = resolve));
      const handler: EventHandler = async (event, context) => {
        try {
          await applyOrder(env.schema)(event, context);
        } catch (err) {
          // E2 saw the gap; hold its rollback until E1 has committed and run its own drain check.
          if (event.eventId === 'E2' && holdE2) {
            holdE2 = false;
            gapSeen();
            await released;
          }
          throw err;
        }
      };
      const options = {
        consumer: 'race',
        pool: env.pool,
        schema: env.schema,
        logger: silentLogger,
        handlers: { AmountAdded: handler },
      };
      const first = new DeliveryProcessor(options);
      const second = new DeliveryProcessor(options);
      const delivery = (e: EventEnvelope) => deliveryOf(e, { exchange: env.exchange });
      try {
        const e2 = first.process(delivery(envelope('E2', 'o1', 2)));
        await gap;
        const e1 = envelope('E1', 'o1', 1);
        assert.deepEqual(await second.process(delivery(e1)), {
          action: 'ack',
          outcome: 'applied',
          eventId: 'E1',
          occurredAt: e1.occurredAt,
        });
        release();
        assert.deepEqual(await e2, { action: 'ack', outcome: 'parked', eventId: 'E2' });
        assert.deepEqual(await appliedIds(env), ['E1', 'E2'], 'E2 was drained by the parking side');
        assert.equal((await parkedRows(env)).rows.length, 0);
      } finally {
        await first.close();
        await second.close();
      }
    });
  });

  test('repairGaps closes a gap from the source: baseline set, parked events above it drain, covered ones and late copies are done without effect', async () => {
    await withEnv(async (env) => {
      const consumer = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
        // E2 is lost on the way; E3 and E4 arrive and wait.
        await env.publish(envelope('E3', 'o1', 3, { delta: 30 }));
        await env.publish(envelope('E4', 'o1', 4, { delta: 40 }));
        await waitFor(async () => (await parkedRows(env)).rows.length === 2, 'E3 and E4 parked');
        assert.equal(consumer.stats.applied, 1);

        const unknown = await repairGaps(consumer, {
          loadSnapshot: async () => null,
          apply: async () => assert.fail('nothing to write'),
        });
        assert.deepEqual(unknown, { gaps: 1, repaired: 0, notNewer: 0, unknownAtSource: 1, drained: 0 });
        assert.equal((await parkedRows(env)).rows.length, 2, 'absence at the source changes nothing');

        // The source is at version 3 with a total of 60 (E1 + E2 + E3).
        const report = await repairGaps(consumer, {
          loadSnapshot: async (gap) => (gap.aggregateId === 'o1' ? { version: 3, amount: 60 } : null),
          apply: async (tx, snapshot, gap) => {
            await tx.query(`DELETE FROM "${env.schema}".applied WHERE aggregate_id = $1`, [gap.aggregateId]);
            await tx.query(
              `INSERT INTO "${env.schema}".applied (event_id, aggregate_id, amount) VALUES ('snapshot@3', $1, $2)`,
              [gap.aggregateId, snapshot.amount],
            );
          },
        });
        assert.deepEqual(report, { gaps: 1, repaired: 1, notNewer: 0, unknownAtSource: 0, drained: 2 });
        assert.deepEqual(
          await appliedIds(env),
          ['snapshot@3', 'E4'],
          'E3 was covered by the snapshot, E4 applied on top',
        );
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 100);
        assert.equal(await env.count(`SELECT version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`), 4);
        assert.equal(
          await env.count(`SELECT baseline_version AS n FROM $schema.projection_state WHERE aggregate_id = 'o1'`),
          3,
        );
        assert.equal((await parkedRows(env)).rows.length, 0);
        assert.equal(
          await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id IN ('E3', 'E4')`),
          2,
          'both recorded as done',
        );

        await env.publish(envelope('E2', 'o1', 2, { delta: 20 }));
        await waitFor(
          async () => (await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE event_id = 'E2'`)) === 1,
          'the late E2 recorded',
        );
        assert.equal(await env.count(`SELECT sum(amount) AS n FROM $schema.applied`), 100, 'the late E2 had no effect');
        assert.deepEqual(
          await repairGaps(consumer, {
            loadSnapshot: async () => assert.fail('no gap left'),
            apply: async () => undefined,
          }),
          { gaps: 0, repaired: 0, notNewer: 0, unknownAtSource: 0, drained: 0 },
        );
      } finally {
        await env.stop(consumer);
      }
    });
  });

  test('on subscribing, a consumer drains parked events that a repair made applicable while it was away', async () => {
    await withEnv(async (env) => {
      const first = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      await first.ready();
      await env.publish(envelope('E1', 'o1', 1, { delta: 10 }));
      await env.publish(envelope('E3', 'o1', 3, { delta: 30 }));
      await waitFor(async () => (await parkedRows(env)).rows.length === 1, 'E3 parked');
      await env.stop(first);
      // Somebody else closes the gap (a reconcile repair): the projection is now at 2.
      await env.pool.query(
        `UPDATE "${env.schema}".projection_state SET version = 2, baseline_version = 2 WHERE aggregate_id = 'o1'`,
      );
      await env.pool.query(
        `INSERT INTO "${env.schema}".applied (event_id, aggregate_id, amount) VALUES ('repair@2', 'o1', 20)`,
      );

      const second = env.start({ prefetch: 1, handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await second.ready();
        assert.equal(second.stats.drained, 1, 'drained before ready() resolved, with no new delivery');
        assert.deepEqual(await appliedIds(env), ['E1', 'repair@2', 'E3']);
        assert.equal((await parkedRows(env)).rows.length, 0);
      } finally {
        await env.stop(second);
      }
    });
  });

  test('rejects invalid limits with ConfigError naming the field', () => {
    assert.throws(
      () =>
        new DeliveryProcessor({
          consumer: 'c',
          handlers: { X: async () => undefined },
          reorderBuffer: { maxPerAggregate: 0 },
        }),
      (err: unknown) => err instanceof ConfigError && err.field === 'reorderBuffer.maxPerAggregate',
    );
  });
});
