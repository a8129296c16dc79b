/** Quarantine round trip against the real services: list, show, replay through the consumer, discard with a reason. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ConfigError,
  ConvergeError,
  DEFAULT_ROUTING_KEY,
  discardQuarantined,
  encodeMessage,
  listQuarantine,
  PermanentError,
  replayQuarantined,
  routingKeyFromTemplate,
  showQuarantined,
  silentLogger,
  startConsumer,
  type EventEnvelope,
} from '../src/index.js';
import { connectRabbit, createTestSchema, uniqueName, waitFor } from './support/services.js';

const key = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);

function envelope(eventId: string, eventType: string): EventEnvelope {
  return { eventId, aggregateType: 'order', aggregateId: eventId, aggregateVersion: 1, eventType, schemaVersion: 1, kind: 'incremental', payload: { delta: 1 }, occurredAt: new Date().toISOString() };
}

describe('dlq', () => {
  it('lists with filters, shows the raw message, replays it through the normal path once fixed, and discards only with a reason', async () => {
    const db = await createTestSchema('cvq');
    const connection = await connectRabbit();
    const channel = await connection.createConfirmChannel();
    const exchange = uniqueName('cvq.events');
    const queue = uniqueName('cvq.q');
    let fixed = false;
    const applied: string[] = [];
    const consumer = startConsumer({
      queue, exchange, pool: db.pool, schema: db.schema, logger: silentLogger,
      handlers: {
        '*': async (event) => {
          if (!fixed && event.eventType === 'Refunded') throw new PermanentError('refunds are not supported yet');
          applied.push(event.eventId);
        },
      },
    });
    try {
      await consumer.ready();
      for (const e of [envelope('R1', 'Refunded'), envelope('R2', 'Refunded'), envelope('P1', 'Paid')]) {
        const message = encodeMessage(e, key);
        channel.publish(exchange, message.routingKey, message.content, message.options);
      }
      await channel.waitForConfirms();
      // A handler may run more than once for a batch that rolled back; only commits count.
      await waitFor(() => consumer.stats.quarantined === 2 && consumer.stats.applied === 1, 'two refunds quarantined, the payment applied');

      const open = await listQuarantine(db.pool, { schema: db.schema, eventType: 'Refunded' });
      assert.deepEqual(open.map((q) => [q.eventId, q.reason]).sort(), [['R1', 'handler-permanent'], ['R2', 'handler-permanent']]);
      assert.deepEqual(await listQuarantine(db.pool, { schema: db.schema, eventType: 'Paid' }), []);
      assert.deepEqual(await listQuarantine(db.pool, { schema: db.schema, olderThanMs: 3_600_000 }), [], 'none an hour old');
      const r1 = open.find((q) => q.eventId === 'R1')!;
      const shown = await showQuarantined(db.pool, r1.id, db.schema);
      assert.equal(JSON.parse(shown!.body.toString()).eventId, 'R1');
      assert.equal(shown!.properties.messageId, 'R1');

      fixed = true;
      await replayQuarantined(db.pool, channel, { id: r1.id, queue, schema: db.schema, note: 'refund handler shipped' });
      await waitFor(() => consumer.stats.applied === 2 && applied.includes('R1'), 'the replayed refund applied by the consumer');
      const r2 = open.find((q) => q.eventId === 'R2')!;
      await assert.rejects(discardQuarantined(db.pool, { id: r2.id, reason: '  ', schema: db.schema }), (err: unknown) => err instanceof ConfigError && err.field === 'reason');
      await discardQuarantined(db.pool, { id: r2.id, reason: 'duplicate refund, refunded by hand', schema: db.schema });
      await assert.rejects(replayQuarantined(db.pool, channel, { id: r2.id, queue, schema: db.schema }), (err: unknown) => err instanceof ConvergeError && err.code === 'CONVERGE_QUARANTINE_RESOLVED');
      await assert.rejects(replayQuarantined(db.pool, channel, { id: '999999', queue, schema: db.schema }), (err: unknown) => err instanceof ConvergeError && err.code === 'CONVERGE_QUARANTINE_NOT_FOUND');

      assert.deepEqual(await listQuarantine(db.pool, { schema: db.schema }), [], 'nothing open');
      const closed = await listQuarantine(db.pool, { schema: db.schema, includeResolved: true });
      assert.deepEqual(closed.map((q) => [q.eventId, q.resolution, q.resolutionNote]).sort(), [
        ['R1', 'replayed', `to ${queue}: refund handler shipped`],
        ['R2', 'discarded', 'duplicate refund, refunded by hand'],
      ]);
      const inbox = await db.pool.query(`SELECT event_id FROM "${db.schema}".inbox ORDER BY event_id`);
      assert.deepEqual(inbox.rows.map((r) => r.event_id), ['P1', 'R1'], 'the discarded refund was never applied');
    } finally {
      await consumer.stop();
      const ch = await connection.createChannel();
      await ch.deleteQueue(queue).catch(() => undefined);
      await ch.deleteQueue(`${queue}.retry`).catch(() => undefined);
      await ch.deleteExchange(exchange).catch(() => undefined);
      await connection.close();
      await db.close();
    }
  });
});
