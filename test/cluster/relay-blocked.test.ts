/**
 * A broker resource alarm, for real: a spare RabbitMQ node of its own (kit/rabbit-cluster.ts, never
 * the shared broker) gets a tiny memory high watermark, so it blocks every connection that
 * publishes. The relay sees its connection blocked, says so (warn log with the reason, gauge 1),
 * claims nothing more and lets the publishes it sent wait without a confirm timeout: no attempt
 * is counted and nothing is marked. When the alarm clears it resumes and everything is published,
 * each event once, in order.
 */
import assert from 'node:assert/strict';
import amqp from 'amqplib';
import prom from 'prom-client';
import { appendToOutbox, withTransaction, Relay, type Logger } from '../../src/index.js';
import { instrumentRelay } from '../../src/metrics/index.js';
import { parseEnvelope } from '../../src/internal/index.js';
import {
  after,
  before,
  describe,
  test,
  DATABASE_URL,
  createTestSchema,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '../support/rig.js';
import { RabbitCluster, type RabbitNode } from '../../kit/rabbit-cluster.js';

/** The relay's confirm timeout here: short, so that a block it did not recognise would burn attempts fast. */
const CONFIRM_TIMEOUT_MS = 200;
const MAX_ATTEMPTS = 3;
/** RabbitMQ's default relative watermark; restoring it clears the alarm on this machine. */
const NORMAL_WATERMARK = 0.4;

let spare: RabbitCluster | undefined;
let node: RabbitNode;

before(async () => {
  spare = await RabbitCluster.start({ size: 1 });
  node = spare.nodes[0]!;
});

after(async () => {
  await spare?.teardown();
});

interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error';
  fields: Record<string, unknown>;
  msg: string;
}

function capture(lines: LogLine[]): Logger {
  const at =
    (level: LogLine['level']) =>
    (fields: object, msg: string): void => {
      lines.push({ level, fields: fields as Record<string, unknown>, msg });
    };
  return { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

interface Env {
  db: TestDatabase;
  connection: amqp.ChannelModel;
  channel: amqp.Channel;
  exchange: string;
  queue: string;
  logs: LogLine[];
  registry: prom.Registry;
  relay: Relay;
  append(aggregateId: string, version: number): Promise<void>;
  rows(): Promise<{ aggregate_id: string; status: string; attempts: number; claimed_by: string | null }[]>;
}

async function withEnv(work: (env: Env) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvt_rblk');
  const connection = await amqp.connect(node.url);
  connection.on('error', () => undefined);
  const channel = await connection.createChannel();
  const exchange = uniqueName('cvt_rblk_x');
  const queue = uniqueName('cvt_rblk_q');
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertQueue(queue, { durable: false });
  await channel.bindQueue(queue, exchange, '#');
  const logs: LogLine[] = [];
  const relay = new Relay({
    schema: db.schema,
    exchange,
    amqpUrl: node.url,
    connectionString: DATABASE_URL,
    logger: capture(logs),
    pollIntervalMs: 20,
    confirmTimeoutMs: CONFIRM_TIMEOUT_MS,
    maxAttempts: MAX_ATTEMPTS,
    backoff: { initialDelayMs: 10, maxDelayMs: 20 },
  });
  const registry = new prom.Registry();
  instrumentRelay(relay, registry);
  try {
    await work({
      db,
      connection,
      channel,
      exchange,
      queue,
      logs,
      registry,
      relay,
      async append(aggregateId, version) {
        await withTransaction(db.pool, (client) =>
          appendToOutbox(
            client,
            { aggregateType: 'order', aggregateId, aggregateVersion: version, eventType: 'OrderChanged', payload: {} },
            { schema: db.schema },
          ),
        );
      },
      async rows() {
        const { rows } = await db.pool.query<{
          aggregate_id: string;
          status: string;
          attempts: number;
          claimed_by: string | null;
        }>(`SELECT aggregate_id, status, attempts, claimed_by FROM "${db.schema}".outbox ORDER BY position`);
        return rows;
      },
    });
  } finally {
    await relay.stop();
    await spare!.setMemoryWatermark(node, NORMAL_WATERMARK);
    await channel.deleteQueue(queue).catch(() => undefined);
    await channel.deleteExchange(exchange).catch(() => undefined);
    await connection.close().catch(() => undefined);
    await db.close();
  }
}

async function gauge(registry: prom.Registry): Promise<number | undefined> {
  const metric = await registry.getSingleMetric('converge_relay_broker_blocked')?.get();
  return metric?.values[0]?.value;
}

/** Blocks the relay: raises the alarm, then gives the relay something to publish, which is when the broker blocks a connection. */
async function blockRelay(env: Env): Promise<void> {
  await spare!.setMemoryWatermark(node, 0.000001);
  await env.append('a', 2);
  await env.append('b', 1);
  await waitFor(() => env.relay.brokerBlocked, 'the relay to see its connection blocked', 30_000);
}

describe('relay under a broker resource alarm (a spare node)', () => {
  test('pauses without counting attempts or marking anything, says so, and resumes when the alarm clears', async () => {
    await withEnv(async (env) => {
      env.relay.start();
      await env.relay.ready();
      await env.append('a', 1);
      await waitFor(async () => (await env.rows()).every((row) => row.status === 'published'), 'a first event');
      assert.equal(await gauge(env.registry), 0);

      await blockRelay(env);
      const blockedAt = performance.now();
      assert.equal(await gauge(env.registry), 1, 'the gauge says blocked');
      const warning = env.logs.find((line) => line.level === 'warn' && /blocked/.test(line.msg));
      assert.ok(warning, 'a warn line says the connection is blocked');
      assert.match(String(warning.fields.reason), /memory/, 'with the broker’s reason');
      // Without the pause, every publish would have timed out (and the rows failed) several times over by now.
      await waitFor(
        () => performance.now() - blockedAt >= 4 * MAX_ATTEMPTS * CONFIRM_TIMEOUT_MS,
        'several confirm timeouts into the block',
      );
      await env.append('a', 3);
      const during = await env.rows();
      assert.deepEqual(
        during.map((row) => [row.aggregate_id, row.status, row.attempts]),
        [
          ['a', 'published', 0],
          ['a', 'pending', 0],
          ['b', 'pending', 0],
          ['a', 'pending', 0],
        ],
        'nothing marked, no attempt counted while blocked',
      );
      assert.ok(!env.logs.some((line) => line.msg.includes('retry scheduled')), 'no retry while blocked');

      await spare!.setMemoryWatermark(node, NORMAL_WATERMARK);
      await waitFor(() => !env.relay.brokerBlocked, 'the relay to see its connection unblocked', 30_000);
      assert.equal(await gauge(env.registry), 0);
      assert.ok(env.logs.some((line) => line.level === 'info' && /unblocked/.test(line.msg)));
      await waitFor(async () => (await env.rows()).every((row) => row.status === 'published'), 'all published');
      assert.deepEqual(
        (await env.rows()).map((row) => row.attempts),
        [0, 0, 0, 0],
        'no attempt counted for the wait',
      );
      const versions = new Map<string, number[]>();
      for (;;) {
        const message = await env.channel.get(env.queue, { noAck: true });
        if (message === false) break;
        const envelope = parseEnvelope(message.content);
        versions.set(envelope.aggregateId, [...(versions.get(envelope.aggregateId) ?? []), envelope.aggregateVersion]);
      }
      assert.deepEqual(Object.fromEntries(versions), { a: [1, 2, 3], b: [1] }, 'each event once, in order');
    });
  });

  test('stop() while blocked returns and gives the claims back without counting an attempt', async () => {
    await withEnv(async (env) => {
      env.relay.start();
      await env.relay.ready();
      await env.append('a', 1);
      await waitFor(async () => (await env.rows()).every((row) => row.status === 'published'), 'a first event');
      await blockRelay(env);
      await env.relay.stop();
      assert.equal(await gauge(env.registry), 0, 'a stopped relay is not blocked');
      assert.deepEqual(
        (await env.rows()).map((row) => [row.aggregate_id, row.status, row.attempts, row.claimed_by]),
        [
          ['a', 'published', 0, null],
          ['a', 'pending', 0, null],
          ['b', 'pending', 0, null],
        ],
      );
    });
  });
});
