/**
 * Publishes the broker does not confirm: a nack (a full queue with `x-overflow: reject-publish`)
 * and a confirm that does not come back in time (the broker's replies held in a TCP proxy).
 * Either way nothing is marked published, the row keeps its eventId and is retried with backoff,
 * and once the broker takes events again every aggregate arrives in version order: duplicates
 * allowed, losses not.
 */
import assert from 'node:assert/strict';
import amqp from 'amqplib';
import {
  appendToOutbox,
  silentLogger,
  withTransaction,
  Relay,
  type NewEvent,
  type RelayOptions,
  type RelayRetryInfo,
} from '../../src/index.js';
import { parseEnvelope } from '../../src/internal/index.js';
import { createLogger } from '../../src/runtime/logger.js';
import { ConfirmPublisher } from '../../src/transport/publisher.js';
import { PublishError } from '../../src/runtime/errors.js';
import {
  describe,
  test,
  AMQP_URL,
  DATABASE_URL,
  connectRabbit,
  createTestSchema,
  dropTestBroker,
  settle,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '../support/rig.js';
import { TcpProxy } from '../../kit/tcp-proxy.js';

interface OutboxRow {
  event_id: string;
  aggregate_id: string;
  aggregate_version: string;
  status: 'pending' | 'published' | 'failed';
  attempts: number;
  broker_retries: number;
  published_at: Date | null;
  claimed_by: string | null;
  last_error: string | null;
  delay_s: number;
}

interface Env {
  db: TestDatabase;
  admin: amqp.ChannelModel;
  channel: amqp.Channel;
  exchange: string;
  relays: Relay[];
  names: string[];
}

async function withEnv(work: (env: Env) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvt_rpf');
  const admin = await connectRabbit();
  admin.on('error', () => undefined);
  const channel = await admin.createChannel();
  channel.on('error', () => undefined);
  const exchange = uniqueName('cvt_rpf_x');
  await channel.assertExchange(exchange, 'topic', { durable: true });
  const env: Env = { db, admin, channel, exchange, relays: [], names: [exchange] };
  try {
    await work(env);
  } finally {
    for (const relay of env.relays) await relay.stop();
    await dropTestBroker(admin, env.names);
    await admin.close();
    await db.close();
  }
}

function relayIn(env: Env, overrides: RelayOptions = {}): Relay {
  const relay = new Relay({
    schema: env.db.schema,
    exchange: env.exchange,
    amqpUrl: AMQP_URL,
    connectionString: DATABASE_URL,
    logger: process.env.DEBUG_RELAY ? createLogger('relay', 'debug') : silentLogger,
    pollIntervalMs: 20,
    ...overrides,
  });
  env.relays.push(relay);
  return relay;
}

async function queueIn(env: Env, args: Record<string, unknown> = {}): Promise<string> {
  const queue = uniqueName('cvt_rpf_q');
  env.names.push(queue);
  await env.channel.assertQueue(queue, { durable: false, arguments: args });
  await env.channel.bindQueue(queue, env.exchange, '#');
  return queue;
}

/** Versions 1..`versions` of each aggregate, interleaved, each in its own committed transaction. */
async function appendInterleaved(env: Env, aggregates: string[], versions: number): Promise<void> {
  for (let version = 1; version <= versions; version++)
    for (const aggregateId of aggregates) {
      const event: NewEvent = {
        aggregateType: 'order',
        aggregateId,
        aggregateVersion: version,
        eventType: 'OrderChanged',
        payload: { version },
      };
      await withTransaction(env.db.pool, (client) => appendToOutbox(client, event, { schema: env.db.schema }));
    }
}

async function rows(env: Env): Promise<OutboxRow[]> {
  const { rows } = await env.db.pool.query<OutboxRow>(
    `SELECT event_id, aggregate_id, aggregate_version, status, attempts, broker_retries, published_at, claimed_by, last_error,
            extract(epoch FROM next_attempt_at - now())::float8 AS delay_s
       FROM "${env.db.schema}".outbox ORDER BY position`,
  );
  return rows;
}

/** Every message in `queue` now: the order they arrived in. */
async function drain(env: Env, queue: string): Promise<amqp.GetMessage[]> {
  const messages: amqp.GetMessage[] = [];
  for (;;) {
    const message = await env.channel.get(queue, { noAck: true });
    if (message === false) return messages;
    messages.push(message);
  }
}

/** Versions per aggregate in arrival order, from messages the relay published. */
function arrivals(messages: amqp.GetMessage[]): Map<string, number[]> {
  const byAggregate = new Map<string, number[]>();
  for (const message of messages) {
    const envelope = parseEnvelope(message.content);
    const seen = byAggregate.get(envelope.aggregateId) ?? [];
    seen.push(envelope.aggregateVersion);
    byAggregate.set(envelope.aggregateId, seen);
  }
  return byAggregate;
}

/** In order with repeats allowed (a re-sent version right after itself), and none missing. */
function assertInOrderNoLoss(seen: number[] | undefined, versions: number, what: string): void {
  assert.ok(seen, `${what}: nothing arrived`);
  const distinct = seen.filter((version, i) => i === 0 || seen[i - 1] !== version);
  assert.deepEqual(
    distinct,
    Array.from({ length: versions }, (_, i) => i + 1),
    `${what}: arrival order ${seen.join(',')}`,
  );
}

describe('relay publish failures', () => {
  test('a nack (full queue, reject-publish) marks nothing, retries with backoff without spending maxAttempts, then publishes in order', async () => {
    await withEnv(async (env) => {
      const queue = await queueIn(env, { 'x-max-length': 1, 'x-overflow': 'reject-publish' });
      // One message fills the queue: every publish the relay makes is nacked until there is room.
      env.channel.sendToQueue(queue, Buffer.from('filler'));
      await waitFor(async () => (await env.channel.checkQueue(queue)).messageCount === 1, 'the filler queued');
      await appendInterleaved(env, ['a', 'b'], 3);

      // maxAttempts 1: a single charged attempt would fail the row; a nack is not charged to it.
      const relay = relayIn(env, { backoff: { initialDelayMs: 60_000, maxDelayMs: 60_000 }, maxAttempts: 1 });
      const retries: RelayRetryInfo[] = [];
      relay.on('retry', (info) => retries.push(info));
      const first = await relay.runOnce();
      // Only the first version of each aggregate is claimable; both are nacked.
      assert.deepEqual(first, { claimed: 2, published: 0, retried: 2, failed: 0, fenced: 0, unblocked: false });
      assert.deepEqual(
        retries.map((r) => [r.attempts, r.brokerRetries, r.reason]),
        [
          [0, 1, 'nacked'],
          [0, 1, 'nacked'],
        ],
      );
      const afterNack = await rows(env);
      for (const row of afterNack) {
        assert.equal(row.status, 'pending');
        assert.equal(row.published_at, null, 'nothing marked published');
        assert.equal(row.claimed_by, null, 'claim released');
      }
      const firsts = afterNack.filter((row) => row.aggregate_version === '1');
      for (const row of firsts) {
        assert.deepEqual([row.attempts, row.broker_retries], [0, 1]);
        assert.equal(row.last_error, 'CONVERGE_PUBLISH_NACKED');
        assert.ok(row.delay_s > 25 && row.delay_s <= 60, `next attempt ~30-60 s ahead, got ${row.delay_s}`);
      }
      assert.ok(
        afterNack
          .filter((row) => row.aggregate_version !== '1')
          .every((row) => row.attempts === 0 && row.broker_retries === 0),
        'later versions were never tried',
      );
      assert.equal((await relay.runOnce()).claimed, 0, 'nothing due before the backoff ends');

      // Due again, still full: one more broker retry each, still nothing marked or failed.
      await env.db.pool.query(`UPDATE "${env.db.schema}".outbox SET next_attempt_at = now()`);
      assert.deepEqual(await relay.runOnce(), {
        claimed: 2,
        published: 0,
        retried: 2,
        failed: 0,
        fenced: 0,
        unblocked: false,
      });
      assert.deepEqual(
        (await rows(env))
          .filter((row) => row.aggregate_version === '1')
          .map((row) => [row.attempts, row.broker_retries]),
        [
          [0, 2],
          [0, 2],
        ],
      );

      // Room again: the queue is redeclared without its limit; everything goes, in order.
      await env.channel.deleteQueue(queue);
      const open = await queueIn(env);
      await env.db.pool.query(`UPDATE "${env.db.schema}".outbox SET next_attempt_at = now()`);
      const published: string[] = [];
      relay.on('published', (ids) => published.push(...ids));
      relay.start();
      await waitFor(async () => (await rows(env)).every((row) => row.status === 'published'), 'all rows published');
      const final = await rows(env);
      assert.deepEqual(
        final.filter((row) => row.aggregate_version === '1').map((row) => [row.attempts, row.broker_retries]),
        [
          [0, 2],
          [0, 2],
        ],
      );
      assert.ok(final.every((row) => row.last_error === null && row.published_at instanceof Date));
      assert.deepEqual([...published].sort(), final.map((row) => row.event_id).sort(), 'each marked once');
      const byAggregate = arrivals(await drain(env, open));
      // A nacked publish is not enqueued: exactly one copy of each version, in order.
      assert.deepEqual(byAggregate.get('a'), [1, 2, 3]);
      assert.deepEqual(byAggregate.get('b'), [1, 2, 3]);
    });
  });

  test('a missing exchange (404 channel close) is recorded as channel-closed, not nacked, as docs/reference/errors.md files it', async () => {
    await withEnv(async (env) => {
      const missing = uniqueName('cvt_rpf_missing');
      env.names.push(missing);
      await appendInterleaved(env, ['a'], 1);
      const relay = relayIn(env, {
        exchange: missing,
        declareExchange: false,
        backoff: { initialDelayMs: 60_000, maxDelayMs: 60_000 },
      });
      const retries: RelayRetryInfo[] = [];
      relay.on('retry', (info) => retries.push(info));
      const outcome = await relay.runOnce();
      assert.equal(outcome.published, 0);
      assert.deepEqual(
        retries.map((r) => r.reason),
        ['channel-closed'],
      );
      const [row] = await rows(env);
      assert.equal(row?.status, 'pending');
      assert.equal(row.published_at, null, 'nothing marked published');
      assert.equal(row.last_error, 'CONVERGE_PUBLISH_CHANNEL_CLOSED');
    });
  });

  test('a running relay keeps retrying nacked events without marking them, and publishes them in order once there is room', async () => {
    await withEnv(async (env) => {
      const queue = await queueIn(env, { 'x-max-length': 1, 'x-overflow': 'reject-publish' });
      env.channel.sendToQueue(queue, Buffer.from('filler'));
      await waitFor(async () => (await env.channel.checkQueue(queue)).messageCount === 1, 'the filler queued');
      const relay = relayIn(env, { backoff: { initialDelayMs: 20, maxDelayMs: 50 }, maxAttempts: 1 });
      const reasons = new Set<string>();
      const failed: RelayRetryInfo[] = [];
      relay.on('failed', (info) => failed.push(info));
      relay.on('retry', (info) => reasons.add(info.reason));
      relay.start();
      await relay.ready();
      await appendInterleaved(env, ['a', 'b', 'c'], 4);
      await waitFor(
        async () =>
          (await rows(env)).filter((row) => row.aggregate_version === '1').every((row) => row.broker_retries >= 3),
        'three nacked attempts of every first version',
      );
      const during = await rows(env);
      assert.ok(
        during.every((row) => row.status === 'pending' && row.published_at === null && row.attempts === 0),
        'nothing marked, failed or charged an attempt while the queue is full (maxAttempts is 1)',
      );
      assert.deepEqual([...reasons], ['nacked']);

      // Drain the filler and keep draining: every message that gets in is taken off at once.
      const received: amqp.ConsumeMessage[] = [];
      const consumer = await env.channel.consume(queue, (message) => message && received.push(message), {
        noAck: true,
      });
      await waitFor(async () => (await rows(env)).every((row) => row.status === 'published'), 'all rows published');
      await waitFor(() => received.length >= 13, 'the filler and twelve events taken off the queue');
      await env.channel.cancel(consumer.consumerTag);
      const events = received.filter((message) => message.content.toString() !== 'filler');
      const byAggregate = arrivals(events as unknown as amqp.GetMessage[]);
      for (const aggregate of ['a', 'b', 'c']) assertInOrderNoLoss(byAggregate.get(aggregate), 4, aggregate);
      assert.equal(events.length, 12, 'a nacked publish is not enqueued: one copy each');
      assert.deepEqual(failed, [], 'no row failed for the nacks');
    });
  });

  test('a confirm timeout marks nothing; once replies flow again every event is published in order', async () => {
    const proxy = await TcpProxy.inFrontOf(AMQP_URL, 5672);
    try {
      await withEnv(async (env) => {
        const queue = await queueIn(env);
        const relay = relayIn(env, {
          amqpUrl: proxy.url(AMQP_URL),
          confirmTimeoutMs: 300,
          // Each first version commits on its own and is claimed in a batch of its own: all three must be
          // in flight before the first times out, as no channel opens again while replies are held.
          concurrency: 4,
          backoff: { initialDelayMs: 20, maxDelayMs: 100 },
          reconnectBackoff: { initialDelayMs: 20, maxDelayMs: 100 },
          // Lost confirms and channels are the broker's, never charged: one charged attempt would fail a row.
          maxAttempts: 1,
          // The reconnects after a timeout meet the held handshake too: each gives up after this.
          amqpSocketOptions: { timeout: 300 },
        });
        const retries: RelayRetryInfo[] = [];
        relay.on('retry', (info) => retries.push(info));
        const failed: RelayRetryInfo[] = [];
        relay.on('failed', (info) => failed.push(info));
        const marked: string[] = [];
        relay.on('published', (ids) => marked.push(...ids));
        const errors: Error[] = [];
        relay.on('error', (err) => errors.push(err));
        relay.start();
        await relay.ready();

        proxy.holdReplies();
        await appendInterleaved(env, ['a', 'b', 'c'], 3);
        await waitFor(async () => {
          const firsts = (await rows(env)).filter((row) => row.aggregate_version === '1');
          // Publishes in flight on the channel dropped for the first timeout fail as channel-closed.
          return firsts.every((row) => row.broker_retries >= 1);
        }, 'a failed attempt for the first version of every aggregate');
        assert.ok(retries.some((retry) => retry.reason === 'confirm-timeout'));
        assert.ok(
          retries.every((retry) => retry.reason === 'confirm-timeout' || retry.reason === 'channel-closed'),
          retries.map((retry) => retry.reason).join(','),
        );
        // The channel of the timed-out publishes is dropped; connecting again fails while replies are held.
        await waitFor(() => errors.length >= 2, 'reconnects that give up on the held handshake');
        assert.deepEqual(marked, [], 'no publish marked without its confirm');
        const during = await rows(env);
        assert.ok(
          during.every((row) => row.status === 'pending' && row.published_at === null),
          'nothing marked while the replies are held',
        );
        assert.ok(
          during.every((row) => row.attempts === 0),
          'no attempt charged to an event for a lost confirm or channel',
        );
        assert.ok(
          during.filter((row) => row.aggregate_version !== '1').every((row) => row.broker_retries === 0),
          'later versions wait for their predecessor',
        );

        proxy.releaseReplies();
        await waitFor(async () => (await rows(env)).every((row) => row.status === 'published'), 'all rows published');
        const final = await rows(env);
        assert.deepEqual(
          [...new Set(marked)].sort(),
          final.map((row) => row.event_id).sort(),
          'every event marked by this relay',
        );
        const messages = await waitFor(async () => {
          const taken = await drain(env, queue);
          return taken.length > 0 && taken;
        }, 'messages in the queue');
        const byAggregate = arrivals(messages);
        for (const aggregate of ['a', 'b', 'c']) assertInOrderNoLoss(byAggregate.get(aggregate), 3, aggregate);
        assert.deepEqual(failed, [], 'no row failed for the lost confirms');
      });
    } finally {
      await proxy.close();
    }
  });

  /** A confirm publisher on its own connection through a proxy that can hold the broker's replies. */
  async function withProxiedPublisher(
    work: (env: Env, publisher: ConfirmPublisher, proxy: TcpProxy) => Promise<void>,
  ): Promise<void> {
    const proxy = await TcpProxy.inFrontOf(AMQP_URL, 5672);
    const connection = await amqp.connect(proxy.url(AMQP_URL));
    connection.on('error', () => undefined);
    try {
      await withEnv(async (env) => {
        await queueIn(env);
        await work(env, new ConfirmPublisher(await connection.createConfirmChannel()), proxy);
      });
    } finally {
      await connection.close().catch(() => undefined);
      await proxy.close();
    }
  }

  test('a retired channel lets the publishes in flight on it get their confirms, then closes', async () => {
    await withProxiedPublisher(async (env, publisher, proxy) => {
      proxy.holdReplies();
      const inFlight = settle(publisher.publish(env.exchange, 'a.b', Buffer.from('{}'), { messageId: 'm1' }, 10_000));
      const retired = publisher.retire();
      assert.equal(publisher.closed, false, 'not closed under a publish that waits for its confirm');
      proxy.releaseReplies();
      const outcome = await inFlight;
      assert.ok(outcome.ok, 'the publish in flight was confirmed, not failed as channel-closed');
      await retired;
      assert.equal(publisher.closed, true);
    });
  });

  test('a confirm that arrives after its timeout does not resolve the publish it timed out', async () => {
    await withProxiedPublisher(async (env, publisher, proxy) => {
      const body = Buffer.from('{}');
      proxy.holdReplies();
      const late = await settle(publisher.publish(env.exchange, 'late', body, { messageId: 'late' }, 200));
      assert.ok(!late.ok && late.error instanceof PublishError && late.error.reason === 'confirm-timeout');
      proxy.releaseReplies();
      // Confirms come in order: once the next publish is confirmed, the late one's ack came in too.
      await publisher.publish(env.exchange, 'next', body, { messageId: 'next' }, 10_000);
      await publisher.close();
    });
  });
});
