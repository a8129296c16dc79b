import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { acknowledgeBatch, type QuarantineUncopyable } from '../../src/inbox/acknowledge.js';
import type { RetrySettlement, Settlement } from '../../src/inbox/types.js';
import { PublishError, type PublishFailure } from '../../src/runtime/errors.js';
import { silentLogger } from '../../src/runtime/logger.js';
import type { TransportDelivery, TransportPublisher } from '../../src/transport/transport.js';

/** A delivery that records how it was settled. */
function delivery(tag: number): TransportDelivery & { settled: string[] } {
  const settled: string[] = [];
  return {
    settled,
    content: Buffer.from('{}'),
    fields: { exchange: 'x', routingKey: 'k', redelivered: false, deliveryTag: tag },
    properties: { messageId: `m-${tag}` },
    ack: () => settled.push('ack'),
    ackAllUpTo: () => settled.push('ackAllUpTo'),
    nack: ({ requeue }) => settled.push(requeue ? 'requeue' : 'drop'),
  };
}

/** A publisher whose every publish fails with `reason`. */
function failing(reason: PublishFailure): TransportPublisher {
  return {
    publish: () => Promise.reject(new PublishError(reason)),
    closed: false,
    holdTimeouts() {},
    resumeTimeouts() {},
    close: () => Promise.resolve(),
    retire: () => Promise.resolve(),
    carriedHeaders: (headers) => ({ headers, omitted: [] }),
  };
}

const retry: RetrySettlement = { action: 'retry', delayMs: 1, attempt: 1, reason: 'handler-error', eventId: 'e-1' };
const applied: Settlement = { action: 'ack', outcome: 'applied', eventId: 'e-0', occurredAt: '2026-01-01T00:00:00Z' };
const quarantined: Settlement = {
  action: 'ack',
  outcome: 'quarantined',
  reason: 'unencodable-copy',
  eventId: 'e-1',
  quarantineId: '7',
};

function options(quarantineUncopyable: QuarantineUncopyable) {
  return { retryTiers: [{ queue: 'q.retry.1s', delayMs: 1000 }], logger: silentLogger, quarantineUncopyable };
}

describe('acknowledgeBatch', () => {
  it('quarantines a delivery whose retry copy amqplib cannot encode, then acks the batch', async () => {
    const messages = [delivery(1), delivery(2)];
    const asked: [string, string][] = [];
    const settled = await acknowledgeBatch(
      messages,
      [applied, { ...retry, untrustedHeaders: ['x-converge-attempt'] }],
      failing('unencodable'),
      options(async (d, s, err) => {
        asked.push([String(d.properties.messageId), `${s.eventId} ${err.reason}`]);
        return quarantined;
      }),
    );
    assert.deepEqual(asked, [['m-2', 'e-1 unencodable']]);
    assert.deepEqual(settled, [applied, { ...quarantined, untrustedHeaders: ['x-converge-attempt'] }]);
    assert.deepEqual(
      messages.map((m) => m.settled),
      [[], ['ackAllUpTo']],
    );
  });

  it('requeues a delivery whose quarantine row could not be written', async () => {
    const messages = [delivery(1)];
    const settled = await acknowledgeBatch(
      messages,
      [retry],
      failing('unencodable'),
      options(async () => ({ ...retry, reason: 'quarantine-unavailable' })),
    );
    assert.equal(settled[0]!.action, 'retry');
    assert.deepEqual(messages[0]!.settled, ['requeue']);
  });

  it('requeues a delivery whose copy failed for another reason, without quarantining it', async () => {
    const messages = [delivery(1)];
    const settled = await acknowledgeBatch(
      messages,
      [retry],
      failing('nacked'),
      options(() => assert.fail('not an unencodable copy')),
    );
    assert.deepEqual(settled, [retry]);
    assert.deepEqual(messages[0]!.settled, ['requeue']);
  });
});
