/**
 * Several broker addresses on one machine: nodes that refuse or never answer are passed over
 * within the connect timeout, and a client that lost its node reconnects to another. The
 * "nodes" here are TCP proxies in front of the shared broker (the real 3-node cluster runs in
 * test/cluster/failover.test.ts); what is tested is the address handling, not RabbitMQ's clustering.
 */
import assert from 'node:assert/strict';
import { appendToOutbox, silentLogger, startRelay, withTransaction, type Logger } from '../../src/index.js';
import { openConnection } from '../../src/transport/connection.js';
import { ServiceUnavailableError } from '../../src/runtime/errors.js';
import { freePort } from '../../kit/ports.js';
import { TcpProxy } from '../../kit/tcp-proxy.js';
import {
  after,
  before,
  test,
  AMQP_URL,
  connectRabbit,
  createTestSchema,
  dropTestBroker,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '../support/rig.js';

let closedPortUrl: string;

before(async () => {
  const port = await freePort();
  const url = new URL(AMQP_URL);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  closedPortUrl = url.toString();
});

function recordingLogger(): Logger & { lines: { level: string; msg: string; fields: object }[] } {
  const lines: { level: string; msg: string; fields: object }[] = [];
  const at =
    (level: string) =>
    (fields: object, msg: string): void =>
      void lines.push({ level, msg, fields });
  return { lines, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

test('a refused node and a silent node are passed over; the connection lands on the node that answers', async () => {
  const silent = await TcpProxy.inFrontOf(AMQP_URL, 5672);
  silent.blackhole();
  const logger = recordingLogger();
  try {
    const connection = await openConnection(
      [closedPortUrl, silent.url(AMQP_URL), AMQP_URL],
      'failover-test',
      logger,
      () => undefined,
      { timeout: 300 },
    );
    await connection.close();
    const connected = logger.lines.find((line) => line.msg === 'connected to RabbitMQ');
    const broker = new URL(AMQP_URL);
    assert.deepEqual(connected?.fields, { broker: `${broker.hostname}:${broker.port || 5672}` });
    assert.equal(logger.lines.filter((line) => line.msg.startsWith('RabbitMQ node refused')).length, 2);
  } finally {
    await silent.close();
  }
});

test('when no node answers, the error is typed and names the last node tried, never a password', async () => {
  const url = new URL(closedPortUrl);
  url.password = 'failover-secret';
  await assert.rejects(
    openConnection([url.toString(), closedPortUrl], 'failover-test', silentLogger, () => undefined),
    (err: unknown) => {
      assert.ok(err instanceof ServiceUnavailableError);
      assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${url.port}`));
      assert.doesNotMatch(err.message, /failover-secret/);
      return true;
    },
  );
});

let db: TestDatabase;
before(async () => {
  db = await createTestSchema('cvt_fo');
});
after(async () => {
  await db.close();
});

test('a relay whose node goes away publishes through the next node', async () => {
  const nodeA = await TcpProxy.inFrontOf(AMQP_URL, 5672);
  const nodeB = await TcpProxy.inFrontOf(AMQP_URL, 5672);
  const exchange = uniqueName('cvt_fo_x');
  const queue = uniqueName('cvt_fo_q');
  const admin = await connectRabbit();
  const channel = await admin.createChannel();
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertQueue(queue, { durable: false });
  await channel.bindQueue(queue, exchange, '#');
  const relay = startRelay({
    schema: db.schema,
    exchange,
    amqpUrl: [nodeA.url(AMQP_URL), nodeB.url(AMQP_URL)],
    pool: db.pool,
    logger: silentLogger,
    reconnectBackoff: { initialDelayMs: 20, maxDelayMs: 100 },
  });
  const append = (version: number) =>
    withTransaction(db.pool, (tx) =>
      appendToOutbox(
        tx,
        { aggregateType: 'order', aggregateId: 'fo-1', aggregateVersion: version, eventType: 'Noted', payload: {} },
        { schema: db.schema },
      ),
    );
  const depth = async () => (await channel.checkQueue(queue)).messageCount;
  try {
    await append(1);
    await waitFor(async () => (await depth()) === 1, 'the first event through node A');
    assert.ok(nodeA.connections > 0 && nodeB.connections === 0, 'node A, the first given, serves first');
    nodeA.cut();
    await append(2);
    await waitFor(async () => (await depth()) === 2, 'the second event through node B');
    assert.ok(nodeB.connections > 0, 'the relay moved to node B');
  } finally {
    await relay.stop();
    await nodeA.close();
    await nodeB.close();
    await channel.close();
    await dropTestBroker(admin, [queue, exchange]);
    await admin.close();
  }
});
