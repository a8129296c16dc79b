/**
 * A real 3-node RabbitMQ cluster (kit/rabbit-cluster.ts, spare nodes on their own ports; the shared
 * broker on 5672 is never touched): relay and consumers are given every node's URL and must keep
 * delivering every event exactly once while nodes are stopped, killed and restarted. One cluster
 * serves the whole file; every test brings all three nodes back before it ends, because a quorum
 * queue needs two of three.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import {
  appendToOutbox,
  applyIncrement,
  declarePartitionedTopology,
  silentLogger,
  startConsumer,
  startPartitionedConsumers,
  startRelay,
  withTransaction,
  type Consumer,
  type EventHandler,
  type Logger,
  type Relay,
} from '../../src/index.js';
import { RabbitCluster, type RabbitNode } from '../../kit/rabbit-cluster.js';
import { after, before, createTestSchema, describe, test, waitFor, type TestDatabase } from '../support/rig.js';

const BACKOFF = { initialDelayMs: 50, maxDelayMs: 500 };
const AGGREGATES = ['o1', 'o2', 'o3', 'o4', 'o5', 'o6'];
// A node's restart takes 10-30 s, and up to two minutes on a machine loaded by other runs: waits and
// timeouts are bounded generously (they are limits against a hang, not assertions about speed).
const SLOW = 90_000;
const TIMEOUT = { timeout: 360_000 };

let cluster: RabbitCluster | undefined;

before(async () => {
  cluster = await RabbitCluster.start();
}, TIMEOUT);

// The rig runs file-level after hooks even when a test failed, before its leak check.
after(async () => {
  await cluster?.teardown();
});

function nodes(): RabbitCluster {
  assert.ok(cluster, 'the cluster started');
  return cluster;
}

/** Brings every stopped node back, so the next test starts with all three. */
async function restoreNodes(): Promise<void> {
  const c = nodes();
  const up = new Set(c.running().map((n) => n.name));
  await Promise.all(c.nodes.filter((n) => !up.has(n.name)).map((n) => c.startNode(n)));
}

/** The node whose AMQP port a component last reported connecting to (its 'connected to RabbitMQ' log line). */
class ConnectionLog implements Logger {
  readonly connectedPorts: number[] = [];
  debug(): void {}
  warn(): void {}
  error(): void {}
  info(obj: object, msg: string): void {
    const broker = (obj as { broker?: string }).broker;
    if (msg === 'connected to RabbitMQ' && broker) this.connectedPorts.push(Number(broker.split(':').pop()));
  }
  get connections(): number {
    return this.connectedPorts.length;
  }
  node(): RabbitNode | undefined {
    const port = this.connectedPorts[this.connectedPorts.length - 1];
    return nodes().nodes.find((n) => n.port === port);
  }
}

interface ClusterEnv {
  db: TestDatabase;
  schema: string;
  exchange: string;
  queue: string;
  /** Appends `n` more incremental events, spread over AGGREGATES, each in its own transaction. */
  append(n: number): Promise<void>;
  appended(): number;
  /** Appends continuously (one event per `pauseMs`) until the returned stop is called. */
  produce(pauseMs: number): () => Promise<void>;
  /** A handler that applies the next version and logs (consumer label, aggregate, version) in commit order. */
  handler(label: string): EventHandler;
  count(sql: string): Promise<number>;
  close(): Promise<void>;
}

/** A broker name that only this file's cluster will ever see. */
function clusterName(prefix: string): string {
  return `${prefix}.${Date.now().toString(36)}.${randomBytes(4).toString('hex')}`;
}

/** Declares on whichever node answers first; the declaring connection is closed again at once. */
async function declare(work: (channel: amqp.Channel) => Promise<void>, via?: RabbitNode): Promise<void> {
  const node = via ?? nodes().running()[0]!;
  const connection = await amqp.connect(node.url);
  connection.on('error', () => undefined);
  try {
    await work(await connection.createChannel());
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** A quorum queue and its retry companion (quorum too, so no copy lives on one node only). */
async function declareQuorumQueue(channel: amqp.Channel, exchange: string, queue: string): Promise<void> {
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await channel.bindQueue(queue, exchange, '#');
  await channel.assertQueue(`${queue}.retry`, {
    durable: true,
    arguments: { 'x-queue-type': 'quorum', 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue },
  });
}

async function clusterEnv(): Promise<ClusterEnv> {
  const db = await createTestSchema('cvcl', 12);
  const q = `"${db.schema}"`;
  await db.pool.query(
    `CREATE TABLE ${q}.applied (seq bigserial PRIMARY KEY, consumer text NOT NULL, event_id text NOT NULL, aggregate_id text NOT NULL, version bigint NOT NULL)`,
  );
  const exchange = clusterName('cvcl.x');
  const queue = clusterName('cvcl.q');
  const versions = new Map<string, number>();
  let appended = 0;
  const appendOne = async () => {
    const aggregateId = AGGREGATES[appended % AGGREGATES.length]!;
    const version = (versions.get(aggregateId) ?? 0) + 1;
    versions.set(aggregateId, version);
    appended++;
    await withTransaction(db.pool, (client) =>
      appendToOutbox(
        client,
        {
          aggregateType: 'order',
          aggregateId,
          aggregateVersion: version,
          eventType: 'AmountAdded',
          payload: { delta: 1 },
        },
        { schema: db.schema },
      ),
    );
  };
  return {
    db,
    schema: db.schema,
    exchange,
    queue,
    async append(n) {
      for (let i = 0; i < n; i++) await appendOne();
    },
    appended: () => appended,
    produce(pauseMs) {
      let running = true;
      const loop = (async () => {
        while (running) {
          await appendOne();
          await new Promise((resolve) => setTimeout(resolve, pauseMs));
        }
      })();
      return async () => {
        running = false;
        await loop;
      };
    },
    handler(label) {
      return async (event, { tx }) => {
        await applyIncrement(tx, { projection: 'cluster_view', event, schema: db.schema }, () =>
          // Written after the projection row is locked at the previous version: seq is apply order.
          tx.query(`INSERT INTO ${q}.applied (consumer, event_id, aggregate_id, version) VALUES ($1, $2, $3, $4)`, [
            label,
            event.eventId,
            event.aggregateId,
            event.aggregateVersion,
          ]),
        );
      };
    },
    async count(sql) {
      const { rows } = await db.pool.query<{ n: string }>(sql.replaceAll('$schema', q));
      return Number(rows[0]?.n ?? 0);
    },
    close: () => db.close(),
  };
}

function relayOn(env: ClusterEnv, urls: string[], logger: Logger = silentLogger): Relay {
  return startRelay({
    amqpUrl: urls,
    pool: env.db.pool,
    schema: env.schema,
    exchange: env.exchange,
    relayId: clusterName('relay'),
    pollIntervalMs: 50,
    confirmTimeoutMs: 5_000,
    backoff: BACKOFF,
    reconnectBackoff: BACKOFF,
    logger,
  });
}

function consumerOn(env: ClusterEnv, urls: string[], logger: Logger = silentLogger, label = 'c'): Consumer {
  return startConsumer({
    amqpUrl: urls,
    queue: env.queue,
    exchange: env.exchange,
    consumer: 'cluster',
    pool: env.db.pool,
    schema: env.schema,
    declare: false,
    backoff: BACKOFF,
    reconnectBackoff: BACKOFF,
    logger,
    handlers: { AmountAdded: env.handler(label) },
  });
}

/** Every appended event published, applied once and in the inbox once; per aggregate versions 1..n in apply order. */
async function assertExactlyOnce(env: ClusterEnv): Promise<void> {
  const total = env.appended();
  await waitFor(
    async () => (await env.count(`SELECT count(*) AS n FROM $schema.applied`)) >= total,
    `all ${total} events applied`,
    SLOW,
  );
  assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.outbox WHERE status <> 'published'`), 0);
  assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.outbox`), total);
  assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.applied`), total, 'each event applied once');
  assert.equal(await env.count(`SELECT count(DISTINCT event_id) AS n FROM $schema.applied`), total);
  assert.equal(await env.count(`SELECT count(*) AS n FROM $schema.inbox WHERE consumer = 'cluster'`), total);
  assert.equal(
    await env.count(
      `SELECT count(*) AS n FROM $schema.outbox o WHERE NOT EXISTS (SELECT 1 FROM $schema.applied a WHERE a.event_id = o.event_id)`,
    ),
    0,
    'no outbox event without its application',
  );
  const { rows } = await env.db.pool.query<{ aggregate_id: string; versions: string[] }>(
    `SELECT aggregate_id, array_agg(version ORDER BY seq) AS versions FROM "${env.schema}".applied GROUP BY aggregate_id`,
  );
  for (const row of rows) {
    const versions = row.versions.map(Number);
    assert.deepEqual(
      versions,
      versions.map((_, i) => i + 1),
      `${row.aggregate_id} applied in order without gaps`,
    );
  }
}

async function appliedCount(env: ClusterEnv): Promise<number> {
  return env.count(`SELECT count(*) AS n FROM $schema.applied`);
}

/** Waits until `more` further events were applied than now: the pipeline is moving. */
async function progresses(env: ClusterEnv, more: number, what: string): Promise<void> {
  const from = await appliedCount(env);
  await waitFor(async () => (await appliedCount(env)) >= from + more, `${more} more events applied ${what}`, SLOW);
}

describe('RabbitMQ cluster: failover between nodes', () => {
  test(
    'relay and consumer keep delivering exactly once while their node is stopped, then killed',
    TIMEOUT,
    async () => {
      const c = nodes();
      const env = await clusterEnv();
      await declare((ch) => declareQuorumQueue(ch, env.exchange, env.queue));
      const relayLog = new ConnectionLog();
      const consumerLog = new ConnectionLog();
      const relay = relayOn(env, c.urls, relayLog);
      const consumer = consumerOn(env, c.urls, consumerLog);
      const stopProducing = env.produce(10);
      try {
        await consumer.ready();
        await progresses(env, 20, 'before any fault');
        const first = consumerLog.node();
        assert.equal(first, c.nodes[0], 'the first URL is tried first');
        assert.equal(relayLog.node(), c.nodes[0]);

        await c.stopNode(first!, 'graceful');
        await waitFor(() => consumerLog.node() !== first && consumerLog.node(), 'the consumer on another node', SLOW);
        await waitFor(() => relayLog.node() !== first && relayLog.node(), 'the relay on another node', SLOW);
        await progresses(env, 20, 'after a graceful stop of their node');
        await c.startNode(first!);

        const second = consumerLog.node()!;
        const connectionsBefore = consumerLog.connections;
        await c.stopNode(second, 'kill');
        await waitFor(
          () => consumerLog.connections > connectionsBefore && consumerLog.node() !== second,
          'the consumer reconnected to a surviving node',
          SLOW,
        );
        await progresses(env, 20, 'after kill -9 of their node');
        await stopProducing();
        await assertExactlyOnce(env);
      } finally {
        await stopProducing();
        await relay.stop();
        await consumer.stop();
        await restoreNodes();
        await env.close();
      }
    },
  );

  test(
    "stopping the quorum queue's leader node: consumption continues after the leader election",
    TIMEOUT,
    async () => {
      const c = nodes();
      const env = await clusterEnv();
      await declare((ch) => declareQuorumQueue(ch, env.exchange, env.queue));
      const leader = await waitFor(() => c.queueLeader(env.queue), 'the queue to have a leader');
      // Relay and consumer sit on followers: their connections survive, only the queue's leader moves.
      const followers = c.urls.filter((url) => url !== leader.url);
      const consumerLog = new ConnectionLog();
      const relay = relayOn(env, followers);
      const consumer = consumerOn(env, followers, consumerLog);
      try {
        await consumer.ready();
        await env.append(30);
        await waitFor(async () => (await appliedCount(env)) === 30, 'the events before the leader stops', SLOW);

        await c.stopNode(leader, 'graceful');
        const successor = await waitFor(
          async () => {
            const now = await c.queueLeader(env.queue).catch(() => undefined);
            return now && now !== leader ? now : undefined;
          },
          'a new leader elected',
          SLOW,
        );
        assert.notEqual(successor, leader);
        await env.append(30);
        await assertExactlyOnce(env);
        assert.equal(consumerLog.connections, 1, 'the consumer kept its connection: only the leader moved');
      } finally {
        await relay.stop();
        await consumer.stop();
        await restoreNodes();
        await env.close();
      }
    },
  );

  test('partitioned consumers keep single-active-consumer order across the loss of a node', TIMEOUT, async () => {
    const c = nodes();
    const env = await clusterEnv();
    const queuePrefix = clusterName('cvcl.parts');
    const partitions = 3;
    const [lost, , keeper] = c.nodes as [RabbitNode, RabbitNode, RabbitNode];
    // Declared through the node that stays up: the classic retry companions live there.
    await declare(async (ch) => {
      await declarePartitionedTopology(ch, { exchange: env.exchange, queuePrefix, partitions, queueType: 'quorum' });
    }, keeper);
    // Handlers of both groups note which aggregates they are inside right now: two at once is a violation.
    const inside = new Map<string, string>();
    const overlaps: string[] = [];
    const watched =
      (label: string): EventHandler =>
      async (event, context) => {
        const other = inside.get(event.aggregateId);
        if (other !== undefined) overlaps.push(`${event.aggregateId}: ${other} and ${label}`);
        inside.set(event.aggregateId, label);
        try {
          await env.handler(label)(event, context);
        } finally {
          if (inside.get(event.aggregateId) === label) inside.delete(event.aggregateId);
        }
      };
    const group = (label: string, urls: string[]) =>
      startPartitionedConsumers({
        amqpUrl: urls,
        queuePrefix,
        partitions,
        consumer: 'cluster',
        exchange: env.exchange,
        pool: env.db.pool,
        schema: env.schema,
        backoff: BACKOFF,
        reconnectBackoff: BACKOFF,
        logger: silentLogger,
        handlers: { AmountAdded: watched(label) },
      });
    const relay = relayOn(env, [keeper.url]);
    // A subscribes first, so it is active on every partition; B, on other nodes, waits.
    const groupA = group('A', [lost.url, ...c.urls.filter((u) => u !== lost.url)]);
    const groupB: Consumer[] = [];
    const stopProducing = env.produce(10);
    try {
      await Promise.all(groupA.map((consumer) => consumer.ready()));
      groupB.push(...group('B', c.urls.filter((u) => u !== lost.url).reverse()));
      await Promise.all(groupB.map((consumer) => consumer.ready()));
      await progresses(env, 30, 'with group A active');

      await c.stopNode(lost, 'kill');
      await progresses(env, 30, "after A's node was killed");
      await stopProducing();
      await assertExactlyOnce(env);

      assert.deepEqual(overlaps, [], 'no aggregate was inside two consumers at once');
      const { rows } = await env.db.pool.query<{ aggregate_id: string; consumers: string }>(
        `SELECT aggregate_id, string_agg(consumer, '' ORDER BY seq) AS consumers FROM "${env.schema}".applied GROUP BY aggregate_id`,
      );
      for (const row of rows)
        assert.match(row.consumers, /^A+B+$/, `${row.aggregate_id}: A until its node went, then B alone`);
    } finally {
      await stopProducing();
      await relay.stop();
      await Promise.all([...groupA, ...groupB].map((consumer) => consumer.stop()));
      await declare(async (ch) => {
        for (let p = 0; p < partitions; p++) {
          await ch.deleteQueue(`${queuePrefix}.p${p}`);
          await ch.deleteQueue(`${queuePrefix}.p${p}.retry`);
        }
      }, keeper).catch(() => undefined);
      await restoreNodes();
      await env.close();
    }
  });

  test('a restarted node rejoins the cluster and serves relays and consumers again', TIMEOUT, async () => {
    const c = nodes();
    const env = await clusterEnv();
    const node = c.nodes[1]!;
    await c.stopNode(node, 'kill');
    try {
      await c.startNode(node);
      await declare((ch) => declareQuorumQueue(ch, env.exchange, env.queue));
      const status = await c.ctl(c.nodes[0]!, ['cluster_status', '--formatter', 'json']);
      const running = (JSON.parse(status) as { running_nodes: string[] }).running_nodes;
      assert.ok(running.includes(node.name), `${node.name} is a running member again`);
      // Only the restarted node's URL: every event must pass through it.
      const consumerLog = new ConnectionLog();
      const relay = relayOn(env, [node.url]);
      const consumer = consumerOn(env, [node.url, c.nodes[0]!.url], consumerLog);
      try {
        await consumer.ready();
        await env.append(30);
        await assertExactlyOnce(env);
        assert.equal(consumerLog.node(), node, 'the consumer is served by the restarted node');
      } finally {
        await relay.stop();
        await consumer.stop();
      }
    } finally {
      await restoreNodes();
      await env.close();
    }
  });
});
