/**
 * The in-process transport against the transport contract (test/conformance/transport.ts), and
 * what only it promises: topic matching as AMQP does it, and no timer left once closed.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createInProcessTransport, topicMatches } from '../../src/transport/in-process.js';
import type { QueueSet } from '../../src/transport/transport.js';
import { transportConformance } from '../conformance/transport.js';

let names = 0;

/** Queue `q` (retry `q.retry`, no dead queue) bound to everything on exchange `x`. */
const QUEUES: QueueSet = {
  queue: 'q',
  retryQueue: 'q.retry',
  deadQueue: null,
  exchange: 'x',
  bindings: ['#'],
  queueType: 'classic',
  deliveryLimit: 20,
};

async function waitFor<T>(condition: () => T | undefined | false, description: string, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = condition();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

transportConformance('in-process', { describe, test, uniqueName: (prefix) => `${prefix}_${++names}`, waitFor }, () => {
  const transport = createInProcessTransport();
  return { transport, dispose: () => transport.close() };
});

describe('in-process transport', () => {
  test('topic patterns match as AMQP topic exchanges do', () => {
    assert.ok(topicMatches('#', ''));
    assert.ok(topicMatches('#', 'a.b.c'));
    assert.ok(topicMatches('a.#', 'a'));
    assert.ok(topicMatches('a.#.z', 'a.z'));
    assert.ok(topicMatches('a.#.z', 'a.b.c.z'));
    assert.ok(topicMatches('*.b', 'a.b'));
    assert.ok(!topicMatches('*.b', 'b'));
    assert.ok(!topicMatches('a.*', 'a.b.c'));
    assert.ok(!topicMatches('a', 'ab'));
  });

  test('closing it drops pending messages with their expiry timers and ends its connections', async () => {
    const transport = createInProcessTransport();
    let closed = 0;
    const connection = await transport.connect({
      name: 't',
      signal: new AbortController().signal,
      onClose: () => closed++,
    });
    await connection.declareQueues(QUEUES);
    const publisher = await connection.openPublisher();
    await publisher.publish('', 'q.retry', Buffer.from('x'), { messageId: 'a', expiration: '60000' }, 1000);
    assert.equal(transport.depth('q.retry'), 1);
    await transport.close();
    // Its expiry timer was cleared with it (they are unref'd, so the leak check of node:test would not see them).
    assert.equal(transport.depth('q.retry'), 0);
    assert.equal(closed, 1);
    await assert.rejects(publisher.publish('', 'q', Buffer.from('x'), { messageId: 'b' }, 1000), {
      reason: 'channel-closed',
    });
  });

  test('aborting the connect signal ends the connection and returns its unacked deliveries', async () => {
    const transport = createInProcessTransport();
    const abort = new AbortController();
    const connection = await transport.connect({ name: 't', signal: abort.signal, onClose: () => undefined });
    await connection.declareQueues(QUEUES);
    await (await connection.openPublisher()).publish('x', 'k', Buffer.from('x'), { messageId: 'a' }, 1000);
    let got = 0;
    await connection.subscribe('q', () => got++, { prefetch: 1 });
    await waitFor(() => got === 1, 'the delivery');
    assert.equal(transport.depth('q'), 0);
    abort.abort();
    assert.equal(transport.depth('q'), 1);
    await transport.close();
  });
});
