// test-files: session, only an outbox NOTIFY (LISTEN) starts the relay's cycles: its poll is an hour
/**
 * The relay losing RabbitMQ for a while: its reconnect backoff is a floor that outbox NOTIFYs
 * do not cut short, and it publishes what was written meanwhile once the broker is back. The
 * broker is taken away through a TCP proxy (kit/tcp-proxy.ts), never restarted, since
 * other test runs share it.
 */
import assert from 'node:assert/strict';
import { appendToOutbox, silentLogger, startRelay, withTransaction, type Relay } from '../../src/index.js';
import { Idle } from '../../src/runtime/sleep.js';
import {
  describe,
  mock,
  test,
  AMQP_URL,
  DATABASE_URL,
  connectRabbit,
  createTestSchema,
  dropBrokerNames,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '../support/rig.js';
import { TcpProxy } from '../../kit/tcp-proxy.js';

async function withProxiedRelay(
  reconnectBackoff: { initialDelayMs: number; maxDelayMs: number; factor?: number },
  work: (env: {
    relay: Relay;
    proxy: TcpProxy;
    db: TestDatabase;
    append: (n: number) => Promise<void>;
  }) => Promise<void>,
): Promise<void> {
  const proxy = await TcpProxy.inFrontOf(AMQP_URL, 5672);
  const db = await createTestSchema('cvt_rr');
  const exchange = uniqueName('cvt_rr_x');
  const queue = uniqueName('cvt_rr_q');
  // The relay publishes with `mandatory`: without a bound queue every event would come back.
  const admin = await connectRabbit();
  const channel = await admin.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertQueue(queue, { durable: false });
  await channel.bindQueue(queue, exchange, '#');
  await channel.close();
  const relay = startRelay({
    schema: db.schema,
    exchange,
    amqpUrl: proxy.url(AMQP_URL),
    connectionString: DATABASE_URL,
    logger: silentLogger,
    // Only NOTIFY (or the end of a backoff) starts a cycle while the test runs.
    pollIntervalMs: 3_600_000,
    reconnectBackoff,
  });
  let version = 0;
  const append = async (n: number) => {
    for (let i = 0; i < n; i++)
      await withTransaction(db.pool, (client) =>
        appendToOutbox(
          client,
          {
            aggregateType: 'order',
            aggregateId: 'o-1',
            aggregateVersion: ++version,
            eventType: 'OrderChanged',
            payload: { version },
          },
          { schema: db.schema },
        ),
      );
  };
  try {
    await work({ relay, proxy, db, append });
  } finally {
    await relay.stop();
    await proxy.close();
    await dropBrokerNames(admin, [queue, exchange]);
    await admin.close();
    await db.close();
  }
}

describe('relay reconnect backoff', () => {
  test('outbox NOTIFYs while the broker is down do not cut the reconnect backoff short', async () => {
    let wakes = 0;
    // eslint-disable-next-line @typescript-eslint/unbound-method -- called with the Idle as `this` below
    const wake = Idle.prototype.wake;
    mock.method(Idle.prototype, 'wake', function (this: Idle) {
      wakes++;
      wake.call(this);
    });
    try {
      // After the second failure the next attempt is half an hour away: a third attempt within
      // the test can only come from something cutting that wait short.
      await withProxiedRelay({ initialDelayMs: 10, maxDelayMs: 3_600_000, factor: 1_000_000 }, async (env) => {
        const errors: Error[] = [];
        env.relay.on('error', (err) => errors.push(err));
        await env.relay.ready();
        env.proxy.cut();
        await env.append(1);
        await waitFor(() => errors.length >= 2, 'two failed cycles after the broker went away');
        const seen = wakes;
        await env.append(3);
        await waitFor(() => wakes >= seen + 3, 'the three NOTIFYs to reach the relay');
        await env.relay.stop();
        assert.equal(errors.length, 2, 'no attempt beyond the two before the long backoff');
        const { rows } = await env.db.pool.query<{ status: string }>(
          `SELECT status FROM "${env.db.schema}".outbox ORDER BY position`,
        );
        assert.deepEqual(
          rows.map((row) => row.status),
          ['pending', 'pending', 'pending', 'pending'],
          'nothing marked while the broker was away',
        );
      });
    } finally {
      mock.restoreAll();
    }
  });

  test('publishes, in order, what was written while the broker was away once it is back', async () => {
    await withProxiedRelay({ initialDelayMs: 10, maxDelayMs: 50 }, async (env) => {
      const errors: Error[] = [];
      const published: string[] = [];
      env.relay.on('error', (err) => errors.push(err));
      env.relay.on('published', (ids) => published.push(...ids));
      await env.relay.ready();
      env.proxy.cut();
      await env.append(3);
      await waitFor(() => errors.length >= 2, 'failed cycles while the broker is away');
      assert.deepEqual(published, []);
      env.proxy.restore();
      await waitFor(() => published.length === 3, 'the three events after the broker came back');
      const { rows } = await env.db.pool.query<{ event_id: string; status: string }>(
        `SELECT event_id, status FROM "${env.db.schema}".outbox ORDER BY position`,
      );
      assert.deepEqual(
        published,
        rows.map((row) => row.event_id),
        'published in outbox order',
      );
      assert.ok(rows.every((row) => row.status === 'published'));
    });
  });
});
