/**
 * stop() while the broker does not answer: a connect that hangs (the broker accepts and never
 * speaks), a connection that stalls mid-session (its replies held back), a reconnect into a
 * black hole. Relay and consumer must still stop, and leave no connection or timer behind (the
 * proxy counts the sockets; the rig checks timers after the file). The broker is taken away
 * through kit/tcp-proxy.ts, never touched.
 */
import assert from 'node:assert/strict';
import {
  appendToOutbox,
  silentLogger,
  startRelay,
  withTransaction,
  type Consumer,
  type Relay,
  type RelayOptions,
} from '../../src/index.js';
import { applyOrder, withEnv as withConsumerEnv } from '../support/consumer-env.js';
import {
  describe,
  test,
  AMQP_URL,
  DATABASE_URL,
  connectRabbit,
  createTestSchema,
  dropTestBroker,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '../support/rig.js';
import { TcpProxy } from '../../kit/tcp-proxy.js';

/** Long enough for any bounded stop; a stop() that hangs fails the test instead of the file. */
const STOP_TEST = { timeout: 60_000 };

async function withProxy(work: (proxy: TcpProxy) => Promise<void>): Promise<void> {
  const proxy = await TcpProxy.inFrontOf(AMQP_URL, 5672);
  try {
    await work(proxy);
  } finally {
    await proxy.close();
  }
}

async function noConnectionLeft(proxy: TcpProxy): Promise<void> {
  await waitFor(() => proxy.connections === 0, 'every connection through the proxy closed');
}

interface RelayEnv {
  proxy: TcpProxy;
  db: TestDatabase;
  start(overrides?: RelayOptions): Relay;
  append(aggregateId: string, version: number): Promise<void>;
}

async function withRelayEnv(work: (env: RelayEnv) => Promise<void>): Promise<void> {
  await withProxy(async (proxy) => {
    const db = await createTestSchema('cvt_rstop');
    const admin = await connectRabbit();
    const exchange = uniqueName('cvt_rstop_x');
    const queue = uniqueName('cvt_rstop_q');
    const channel = await admin.createChannel();
    await channel.assertExchange(exchange, 'topic', { durable: true });
    await channel.assertQueue(queue, { durable: false });
    await channel.bindQueue(queue, exchange, '#');
    await channel.close();
    const relays: Relay[] = [];
    try {
      await work({
        proxy,
        db,
        start(overrides = {}) {
          const relay = startRelay({
            schema: db.schema,
            exchange,
            amqpUrl: proxy.url(AMQP_URL),
            connectionString: DATABASE_URL,
            logger: silentLogger,
            pollIntervalMs: 20,
            reconnectBackoff: { initialDelayMs: 20, maxDelayMs: 100 },
            ...overrides,
          });
          relays.push(relay);
          return relay;
        },
        async append(aggregateId, version) {
          await withTransaction(db.pool, (client) =>
            appendToOutbox(
              client,
              {
                aggregateType: 'order',
                aggregateId,
                aggregateVersion: version,
                eventType: 'OrderChanged',
                payload: {},
              },
              { schema: db.schema },
            ),
          );
        },
      });
    } finally {
      for (const relay of relays) await relay.stop();
      await dropTestBroker(admin, [queue, exchange]);
      await admin.close();
      await db.close();
    }
  });
}

async function outboxRows(
  db: TestDatabase,
): Promise<{ status: string; attempts: number; broker_retries: number; claimed_by: string | null }[]> {
  const { rows } = await db.pool.query<{
    status: string;
    attempts: number;
    broker_retries: number;
    claimed_by: string | null;
  }>(`SELECT status, attempts, broker_retries, claimed_by FROM "${db.schema}".outbox ORDER BY position`);
  return rows;
}

describe('relay stop() while the broker does not answer', () => {
  test('a connect that hangs (accepted, never answered) is abandoned', STOP_TEST, async () => {
    await withRelayEnv(async (env) => {
      env.proxy.blackhole();
      // Without a connect timeout of its own choosing the relay would wait for ever.
      const relay = env.start({ amqpSocketOptions: { timeout: 3_600_000 } });
      await waitFor(() => env.proxy.connections > 0, 'the relay connecting into the black hole');
      await relay.stop();
      assert.equal(relay.connected, false);
      await noConnectionLeft(env.proxy);
    });
  });

  test('a reconnect into a black hole is abandoned', STOP_TEST, async () => {
    await withRelayEnv(async (env) => {
      const relay = env.start({ amqpSocketOptions: { timeout: 3_600_000 } });
      await relay.ready();
      env.proxy.blackhole();
      await env.append('o-1', 1);
      await waitFor(() => env.proxy.connections > 0, 'the relay reconnecting into the black hole');
      await relay.stop();
      await noConnectionLeft(env.proxy);
      assert.deepEqual(
        (await outboxRows(env.db)).map((row) => row.status),
        ['pending'],
      );
    });
  });

  test('a stalled connection with nothing in flight is closed without its close-ok', STOP_TEST, async () => {
    await withRelayEnv(async (env) => {
      const relay = env.start();
      await relay.ready();
      env.proxy.holdReplies();
      await relay.stop();
      await noConnectionLeft(env.proxy);
    });
  });

  test(
    'a stalled connection with a batch in flight: the batch times out, is rescheduled, and stop() returns',
    STOP_TEST,
    async () => {
      await withRelayEnv(async (env) => {
        const relay = env.start({ confirmTimeoutMs: 500 });
        await relay.ready();
        env.proxy.holdReplies();
        await env.append('o-1', 1);
        await waitFor(async () => (await outboxRows(env.db))[0]?.claimed_by != null, 'the event claimed and sent');
        await relay.stop();
        // A lost confirm is a broker retry: rescheduled, never charged to the event.
        assert.deepEqual(await outboxRows(env.db), [
          { status: 'pending', attempts: 0, broker_retries: 1, claimed_by: null },
        ]);
        await noConnectionLeft(env.proxy);
      });
    },
  );
});

describe('consumer stop() while the broker does not answer', () => {
  async function withProxiedConsumer(work: (proxy: TcpProxy, start: () => Consumer) => Promise<void>): Promise<void> {
    await withProxy((proxy) =>
      withConsumerEnv((env) =>
        work(proxy, () =>
          env.start({
            amqpUrl: proxy.url(AMQP_URL),
            handlers: { AmountAdded: applyOrder(env.schema) },
            amqpSocketOptions: { timeout: 3_600_000 },
          }),
        ),
      ),
    );
  }

  test('a connect that hangs is abandoned', STOP_TEST, async () => {
    await withProxiedConsumer(async (proxy, start) => {
      proxy.blackhole();
      const consumer = start();
      await waitFor(() => proxy.connections > 0, 'the consumer connecting into the black hole');
      await consumer.stop();
      await noConnectionLeft(proxy);
    });
  });

  test('a reconnect into a black hole is abandoned', STOP_TEST, async () => {
    await withProxiedConsumer(async (proxy, start) => {
      const consumer = start();
      await consumer.ready();
      proxy.blackhole();
      await waitFor(() => proxy.connections > 0, 'the consumer reconnecting into the black hole');
      await consumer.stop();
      await noConnectionLeft(proxy);
    });
  });

  test('a stalled subscription is closed without its cancel-ok and close-ok', STOP_TEST, async () => {
    await withProxiedConsumer(async (proxy, start) => {
      const consumer = start();
      await consumer.ready();
      proxy.holdReplies();
      await consumer.stop();
      assert.equal(consumer.subscribed, false);
      await noConnectionLeft(proxy);
    });
  });
});
