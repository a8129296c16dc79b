/**
 * shareConnection (src/transport/shared-connection.ts) on the in-process broker: views share one
 * connection, each closes only what it opened, a lost connection reaches every view and the next
 * connect opens a fresh one; confirms stay per view. And startTenants' option checks.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createInProcessTransport, startTenants } from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { shareConnection } from '../../src/transport/shared-connection.js';
import type { ConnectRequest, Transport, TransportConnection } from '../../src/transport/transport.js';

/** The in-process transport, counting the connections it opens and keeping them for the test to end. */
function counting(): { transport: Transport; opened: TransportConnection[]; close(): Promise<void> } {
  const inner = createInProcessTransport();
  const opened: TransportConnection[] = [];
  return {
    opened,
    close: () => inner.close(),
    transport: {
      kind: inner.kind,
      failure: (err) => inner.failure(err),
      async connect(request: ConnectRequest) {
        const connection = await inner.connect(request);
        opened.push(connection);
        return connection;
      },
    },
  };
}

function request(closed: (Error | undefined)[] = []): ConnectRequest {
  return { name: 'view', signal: new AbortController().signal, onClose: (err) => closed.push(err) };
}

const body = Buffer.from('{}');
const props = (id: string) => ({ messageId: id });

describe('shareConnection', () => {
  test('views share one connection; closing one leaves the others publishing; the last one out closes it', async () => {
    const broker = counting();
    const shared = shareConnection(broker.transport, 'converge-tenants test');
    const [a, b] = await Promise.all([shared.connect(request()), shared.connect(request())]);
    assert.equal(broker.opened.length, 1);
    assert.equal(shared.connectionsOpened, 1);
    assert.equal(shared.openViews, 2);
    await a.declareQueues({
      queue: 'q',
      retryQueue: 'q.retry',
      deadQueue: null,
      exchange: 'x',
      bindings: ['#'],
      queueType: 'classic',
      deliveryLimit: 5,
    });
    const pa = await a.openPublisher();
    const pb = await b.openPublisher();
    await a.close();
    assert.equal(pa.closed, true, "a's publisher closed with a");
    await pb.publish('x', 'k', body, props('e1'), 1_000);
    assert.equal(shared.openViews, 1);
    await b.close();
    await shared.closed();
    assert.equal(shared.openViews, 0);
    await assert.rejects(pb.publish('x', 'k', body, props('e2'), 1_000));
    await broker.close();
  });

  test('a lost connection closes every view, and the next connect opens a fresh one', async () => {
    const broker = counting();
    const shared = shareConnection(broker.transport, 'converge-tenants test');
    const closedA: (Error | undefined)[] = [];
    const closedB: (Error | undefined)[] = [];
    const a = await shared.connect(request(closedA));
    const b = await shared.connect(request(closedB));
    await broker.opened[0]!.close();
    assert.deepEqual([closedA.length, closedB.length], [1, 1]);
    await assert.rejects(a.openPublisher(), /connection closed/);
    const c = await shared.connect(request());
    assert.equal(shared.connectionsOpened, 2);
    await Promise.all([a.close(), b.close(), c.close()]);
    assert.deepEqual([closedA.length, closedB.length], [1, 1], 'onClose once per view');
    await shared.closed();
    await broker.close();
  });

  test('startTenants refuses what would break the budget or cross tenants, naming the field', () => {
    const base = { schemas: ['a', 'b'], connectionString: 'postgres://x@127.0.0.1:1/x', amqpUrl: 'amqp://x' };
    const fields = (options: object): string[] => {
      try {
        startTenants({ ...base, ...options });
      } catch (err) {
        assert.ok(err instanceof ConfigError, String(err));
        return err.problems.map((p) => p.path);
      }
      assert.fail('accepted');
    };
    assert.deepEqual(fields({ schemas: ['a', 'a'] }), ['schemas']);
    assert.deepEqual(fields({ schemas: ['A-1'] }), ['schemas.0']);
    assert.deepEqual(fields({ maxConections: 3 }), ['maxConections']);
    assert.deepEqual(fields({ maxConnections: 1 }), ['maxConnections']);
    assert.deepEqual(fields({ relay: { claim: 'exclusive' } }), ['relay.claim']);
    assert.deepEqual(fields({ relay: { schema: 'x', listen: true } }), ['relay.schema', 'relay.listen']);
    assert.deepEqual(fields({ relay: { batchSiz: 5 } }), ['relay.batchSiz']);
    const handlers = { '*': async () => undefined };
    assert.deepEqual(fields({ consumer: () => ({ queue: 'q', exchange: 'x', handlers }) }), ['consumer.exchange']);
    assert.deepEqual(fields({ consumer: () => ({ queue: 'q', handlerz: handlers }) }), [
      'consumer.handlerz',
      'consumer.handlers',
    ]);
  });
});
