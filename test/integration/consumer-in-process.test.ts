/**
 * Relay and consumer on the in-process transport (docs/transports.md): outbox → relay → queue →
 * consumer → inbox + projection, with the same invariants as on RabbitMQ. A handler failure takes
 * the delayed-retry path through the retry tier `<queue>.retry.1s`, and the delivery is acked only after commit.
 */
import assert from 'node:assert/strict';
import { appendToOutbox, withTransaction } from '../../src/index.js';
import { withInProcessFixture } from '../support/in-process-fixture.js';
import { describe, it, waitFor } from '../support/rig.js';

describe('relay and consumer on the in-process transport', () => {
  it('applies every event once, retrying a failed handler through the retry queue', () =>
    withInProcessFixture('cvt_cons_ip', async ({ db, transport, exchange, startConsumer, startRelay }) => {
      await db.pool.query(`CREATE TABLE "${db.schema}".applied (event_id uuid PRIMARY KEY, attempt int NOT NULL)`);
      const queue = `${exchange}.orders`;
      const consumer = startConsumer({
        queue,
        bindings: ['order.*'],
        queueType: 'classic',
        backoff: { initialDelayMs: 50, maxDelayMs: 100, factor: 2 },
        handlers: {
          OrderChanged: async (event, { tx, attempt }) => {
            await tx.query(`INSERT INTO "${db.schema}".applied (event_id, attempt) VALUES ($1, $2)`, [
              event.eventId,
              attempt,
            ]);
            // Fails its whole first attempt (in a batch and in the per-delivery fallback alike): only the retry applies it.
            if (event.aggregateId === 'o2' && attempt === 1) throw new Error('downstream not ready');
          },
        },
      });
      const relay = startRelay();
      await consumer.ready({ timeoutMs: 10_000 });
      await relay.ready({ timeoutMs: 10_000 });
      await withTransaction(db.pool, async (tx) => {
        for (const [id, version] of [
          ['o1', 1],
          ['o2', 1],
          ['o1', 2],
        ] as const)
          await appendToOutbox(
            tx,
            {
              aggregateType: 'order',
              aggregateId: id,
              aggregateVersion: version,
              eventType: 'OrderChanged',
              payload: {},
            },
            { schema: db.schema },
          );
      });
      const rows = await waitFor(async () => {
        const { rows } = await db.pool.query<{ event_id: string; attempt: number }>(
          `SELECT event_id, attempt FROM "${db.schema}".applied ORDER BY attempt`,
        );
        return rows.length === 3 && rows;
      }, 'three events applied');
      // The failed first attempt rolled back with its transaction; the retry came back as attempt 2.
      assert.deepEqual(
        rows.map((r) => r.attempt),
        [1, 1, 2],
      );
      await waitFor(() => consumer.stats.retried >= 1 || undefined, 'the retry counted');
      await waitFor(() => transport.depth(queue) === 0 && transport.depth(`${queue}.retry.1s`) === 0, 'queues drained');
    }));
});
