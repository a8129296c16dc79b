/**
 * The cluster tests' environment: one 3-node RabbitMQ cluster per file (kit/rabbit-cluster.ts, spare
 * nodes on their own ports; the shared broker on 5672 is never touched), a migrated schema with an
 * `applied` log per test, quorum queues on the cluster, and relays and consumers given node URLs.
 */
import {
  DEFAULT_DELIVERY_LIMIT,
  DEFAULT_RETRY_TIERS_MS,
  queueSetArguments,
  retryTiers,
} from '../../src/transport/queue-arguments.js';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import {
  appendToOutbox,
  applyIncrement,
  startConsumer,
  startRelay,
  withTransaction,
  type Consumer,
  type EventHandler,
  type Logger,
  type Relay,
} from '../../src/index.js';
import { RabbitCluster, type RabbitNode } from '../../kit/rabbit-cluster.js';
import { after, before, createTestSchema, waitFor, type TestDatabase } from './rig.js';

export const BACKOFF = { initialDelayMs: 50, maxDelayMs: 500 };
/**
 * The relay's schedule for events the broker did not take. While a quorum queue elects a leader
 * after its node stopped, RabbitMQ nacks every publish to it (for 25 s and more on this machine);
 * nacks are broker retries, never failing a row, so the cap only bounds how soon after the election
 * the relay tries again.
 */
export const PUBLISH_BACKOFF = { initialDelayMs: 100, maxDelayMs: 2_000 };
const AGGREGATES = ['o1', 'o2', 'o3', 'o4', 'o5', 'o6'];
// A node's restart takes 10-30 s, and up to two minutes on a machine loaded by other runs: waits and
// timeouts are bounded generously (they are limits against a hang, not assertions about speed).
export const SLOW = 90_000;
export const TIMEOUT = { timeout: 360_000 };

let cluster: RabbitCluster | undefined;

/**
 * Starts the file's cluster before its tests and removes it after them, also when a test failed (the
 * rig runs file-level after hooks before its leak check) and when the runner terminates the file
 * (its --test-timeout sends SIGTERM, which leaves no time for after hooks).
 */
export function useCluster(): void {
  before(async () => {
    cluster = await RabbitCluster.start();
  }, TIMEOUT);
  after(async () => {
    await cluster?.teardown();
    cluster = undefined;
  });
  process.once('SIGTERM', () => {
    cluster?.killNow();
    process.exit(143);
  });
}

export function nodes(): RabbitCluster {
  assert.ok(cluster, 'the cluster started');
  return cluster;
}

/**
 * Brings every stopped node back. Each test calls it first, so a test may end with a node down (the
 * next one restarts it, or the teardown removes it): one restart fewer per file.
 */
export async function restoreNodes(): Promise<void> {
  const c = nodes();
  const up = new Set(c.running().map((n) => n.name));
  await Promise.all(c.nodes.filter((n) => !up.has(n.name)).map((n) => c.startNode(n)));
}

// CONVERGE_CLUSTER_LOG=1 prints the relay's and consumer's log lines (codes and ids, never payloads):
// what to look at when a failover test stalls.
const echo = process.env.CONVERGE_CLUSTER_LOG === '1';
function echoLine(level: string, obj: object, msg: string): void {
  if (echo) process.stderr.write(`${new Date().toISOString()} ${level} ${msg} ${JSON.stringify(obj)}\n`);
}

/** The node whose AMQP port a component last reported connecting to (its 'connected to RabbitMQ' log line). */
export class ConnectionLog implements Logger {
  readonly connectedPorts: number[] = [];
  debug(): void {}
  warn(obj: object, msg: string): void {
    echoLine('warn', obj, msg);
  }
  error(obj: object, msg: string): void {
    echoLine('error', obj, msg);
  }
  info(obj: object, msg: string): void {
    echoLine('info', obj, msg);
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

export interface ClusterEnv {
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
export function clusterName(prefix: string): string {
  return `${prefix}.${Date.now().toString(36)}.${randomBytes(4).toString('hex')}`;
}

/** Declares on whichever node answers first; the declaring connection is closed again at once. */
export async function declare(work: (channel: amqp.Channel) => Promise<void>, via?: RabbitNode): Promise<void> {
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
export async function declareQuorumQueue(channel: amqp.Channel, exchange: string, queue: string): Promise<void> {
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await channel.bindQueue(queue, exchange, '#');
  await channel.assertQueue(`${queue}.retry`, {
    durable: true,
    arguments: {
      'x-queue-type': 'quorum',
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': queue,
      // Expired copies go back at least once, never dropped while the queue's leader moves.
      'x-dead-letter-strategy': 'at-least-once',
      'x-overflow': 'reject-publish',
    },
  });
  // The consumers start with declare: false, so their retry tiers are declared here, as startConsumer would.
  const tiers = retryTiers(queue, DEFAULT_RETRY_TIERS_MS);
  const { tiers: tierArgs } = queueSetArguments(queue, {
    queueType: 'quorum',
    deliveryLimit: DEFAULT_DELIVERY_LIMIT,
    retryTiers: tiers,
  });
  for (const [i, tier] of tiers.entries())
    await channel.assertQueue(tier.queue, { durable: true, arguments: tierArgs[i] });
}

export async function clusterEnv(): Promise<ClusterEnv> {
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

export function relayOn(env: ClusterEnv, urls: string[], logger: Logger = new ConnectionLog()): Relay {
  return startRelay({
    amqpUrl: urls,
    pool: env.db.pool,
    schema: env.schema,
    exchange: env.exchange,
    relayId: clusterName('relay'),
    pollIntervalMs: 50,
    confirmTimeoutMs: 5_000,
    backoff: PUBLISH_BACKOFF,
    reconnectBackoff: BACKOFF,
    logger,
  });
}

export function consumerOn(
  env: ClusterEnv,
  urls: string[],
  logger: Logger = new ConnectionLog(),
  label = 'c',
): Consumer {
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
export async function assertExactlyOnce(env: ClusterEnv): Promise<void> {
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

export async function appliedCount(env: ClusterEnv): Promise<number> {
  return env.count(`SELECT count(*) AS n FROM $schema.applied`);
}

/** Waits until `more` further events were applied than now: the pipeline is moving. */
export async function progresses(env: ClusterEnv, more: number, what: string): Promise<void> {
  const from = await appliedCount(env);
  await waitFor(async () => (await appliedCount(env)) >= from + more, `${more} more events applied ${what}`, SLOW);
}
