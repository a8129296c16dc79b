/**
 * Retry tiers on RabbitMQ at the consumer's level: an upgrade from the single `<queue>.retry` lets
 * what waits there drain back and apply. The tier choice is unit-tested (test/unit/queue-arguments.test.ts);
 * a 1 s copy not held back behind a 30 s one is in the transport conformance suite.
 */
import assert from 'node:assert/strict';
import { encodeMessage, DEFAULT_ROUTING_KEY, routingKeyFromTemplate } from '../../src/internal/index.js';
import { applyOrder, envelope, withEnv } from '../support/consumer-env.js';
import { describe, test, waitFor } from '../support/rig.js';

describe('retry tiers', () => {
  test('a copy left in the single retry queue of an earlier version drains back and applies after the upgrade', async () => {
    await withEnv(async (env) => {
      // What an earlier version left: its queue and `<queue>.retry` holding a copy with a per-message expiry.
      await env.withChannel(async (ch) => {
        await ch.assertQueue(env.queue, { durable: true });
        await ch.assertQueue(env.retryQueue, {
          durable: true,
          arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': env.queue },
        });
      });
      const message = encodeMessage(envelope('E1', 'o1', 1), routingKeyFromTemplate(DEFAULT_ROUTING_KEY));
      env.channel.sendToQueue(env.retryQueue, message.content, { ...message.options, expiration: '3000' });
      await env.channel.waitForConfirms();
      const consumer = env.start({ handlers: { AmountAdded: applyOrder(env.schema) } });
      try {
        await consumer.ready();
        assert.equal((await env.checkQueue(env.retryQueue)).messageCount, 1, 'declaring again kept what waits');
        await waitFor(
          async () => (await env.count(`SELECT count(*) AS n FROM $schema.applied WHERE event_id = 'E1'`)) === 1,
          'the drained copy applied',
        );
      } finally {
        await env.stop(consumer);
      }
      assert.equal((await env.checkQueue(env.retryQueue)).messageCount, 0, 'the old retry queue is empty');
    });
  });
});
