/**
 * The relay on the in-process transport (docs/transports.md): the same claim → publish → mark
 * cycle as on RabbitMQ, with the same invariant: a row is marked published only once the
 * transport confirmed it and did not return it.
 */
import assert from 'node:assert/strict';
import { appendToOutbox, withTransaction, type NewEvent } from '../../src/index.js';
import type { TransportDelivery } from '../../src/transport/transport.js';
import { withInProcessFixture } from '../support/in-process-fixture.js';
import { describe, it, waitFor } from '../support/rig.js';

function event(aggregateId: string, version: number, aggregateType = 'order'): NewEvent {
  return { aggregateType, aggregateId, aggregateVersion: version, eventType: 'OrderChanged', payload: { version } };
}

async function withRelayOnInProcess(
  bindings: string[],
  work: (ctx: {
    append: (events: NewEvent[]) => Promise<string[]>;
    received: TransportDelivery[];
    rows: () => Promise<{ event_id: string; status: string; last_error: string | null }[]>;
  }) => Promise<void>,
): Promise<void> {
  return withInProcessFixture('cvt_relay_ip', async ({ db, transport, exchange, startRelay }) => {
    const queue = `${exchange}.q`;
    const connection = await transport.connect({
      name: 'test',
      signal: new AbortController().signal,
      onClose: () => undefined,
    });
    await connection.declareQueues({
      queue,
      retryQueue: `${queue}.retry`,
      deadQueue: null,
      exchange,
      bindings,
      queueType: 'classic',
      deliveryLimit: 20,
    });
    const received: TransportDelivery[] = [];
    await connection.subscribe(queue, (d) => received.push(d), { prefetch: 100 });
    const relay = startRelay({ maxAttempts: 1 });
    await relay.ready({ timeoutMs: 10_000 });
    await work({
      received,
      append: (events) =>
        withTransaction(db.pool, async (client) => {
          const ids: string[] = [];
          for (const e of events) ids.push((await appendToOutbox(client, e, { schema: db.schema })).eventId);
          return ids;
        }),
      rows: async () =>
        (
          await db.pool.query<{ event_id: string; status: string; last_error: string | null }>(
            `SELECT event_id, status, last_error FROM "${db.schema}".outbox ORDER BY position`,
          )
        ).rows,
    });
  });
}

describe('relay on the in-process transport', () => {
  it('publishes committed events in per-aggregate order and marks them published once confirmed', async () => {
    await withRelayOnInProcess(['order.*'], async ({ append, received, rows }) => {
      const ids = await append([event('o1', 1), event('o1', 2), event('o2', 1)]);
      await waitFor(async () => (await rows()).every((r) => r.status === 'published'), 'all rows published');
      await waitFor(() => received.length === 3, 'three deliveries');
      assert.deepEqual(received.map((d) => d.properties.messageId).sort(), [...ids].sort());
      assert.ok(received.every((d) => d.fields.routingKey === 'order.OrderChanged'));
      // Per-aggregate order: o1 version 2 is claimed only once version 1 is marked published.
      const versionsOfO1 = received
        .map((d) => JSON.parse(d.content.toString()) as { aggregateId: string; aggregateVersion: number })
        .filter((e) => e.aggregateId === 'o1')
        .map((e) => e.aggregateVersion);
      assert.deepEqual(versionsOfO1, [1, 2]);
    });
  });

  it('does not mark an unroutable event published: the return counts as a failed attempt', async () => {
    await withRelayOnInProcess(['order.*'], async ({ append, received, rows }) => {
      await append([event('i1', 1, 'invoice')]);
      const [row] = await waitFor(async () => {
        const all = await rows();
        return all[0]?.status === 'failed' && all;
      }, 'the returned row marked failed after maxAttempts');
      assert.equal(row!.last_error, 'CONVERGE_PUBLISH_RETURNED');
      assert.equal(received.length, 0);
    });
  });
});
