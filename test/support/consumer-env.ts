/**
 * The consumer tests' environment: one migrated schema with an `applied` table, one exchange,
 * one queue (plus extras), a confirm channel to publish on; consumers stopped and everything
 * removed on close. Built on the test rig, so a failed test can keep it (CONVERGE_KEEP_FAILED).
 */
import { DEFAULT_RETRY_TIERS_MS, retryTierQueueName } from '../../src/transport/queue-arguments.js';
import type amqp from 'amqplib';
import type { TransportPublisher } from '../../src/transport/transport.js';
import type pg from 'pg';
import {
  applyIncrement,
  silentLogger,
  startConsumer,
  type Consumer,
  type ConsumerOptions,
  type EventEnvelope,
  type EventHandler,
  type Logger,
  type Settlement,
} from '../../src/index.js';
import { DEFAULT_ROUTING_KEY, encodeMessage, routingKeyFromTemplate } from '../../src/internal/index.js';
import type { UntypedEvents } from '../../src/envelope/events.js';
import { orderEvent } from './builders.js';
import {
  KEEP_FAILED,
  connectRabbit,
  createTestSchema,
  dropBrokerNames,
  openConfirmPublisher,
  uniqueName,
  AMQP_URL,
  withChannel,
  type TestDatabase,
} from './rig.js';

export const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);
export const BACKOFF = { initialDelayMs: 20, maxDelayMs: 100 };
export const PROJECTION = 'order_view';
export const SECRET = 'SECRET-PII-42';

// ---------------------------------------------------------------------------------------------
// Environment: one schema, one exchange, one queue (plus extras), consumers stopped on close.
// ---------------------------------------------------------------------------------------------

export interface Env {
  db: TestDatabase;
  schema: string;
  pool: pg.Pool;
  connection: amqp.ChannelModel;
  channel: amqp.ConfirmChannel;
  /** The transport's publisher on a confirm channel of its own, e.g. for replayQuarantined. */
  publisher: TransportPublisher;
  exchange: string;
  queue: string;
  /** The single retry queue of earlier versions: still declared, never sent to. */
  retryQueue: string;
  /** The retry tier a retry with the test backoff (BACKOFF, at most 100 ms) goes to: the shortest default tier. */
  retryTier: string;
  /** Starts a consumer on this env's queue/exchange/schema (overridable) and stops it on close. */
  start<M extends object = UntypedEvents>(options: Partial<ConsumerOptions<M>>): Consumer<M>;
  stop(consumer: Consumer): Promise<void>;
  /** Publishes an envelope (as the relay would encode it) and waits for the broker's confirm. */
  publish(envelope: EventEnvelope): Promise<Buffer>;
  /** Publishes arbitrary bytes to the exchange and waits for the confirm. */
  publishRaw(key: string, content: Buffer, options?: amqp.Options.Publish): Promise<Buffer>;
  /** queue.declare passive on a throwaway channel (a missing queue would close the channel). */
  checkQueue(name: string): Promise<amqp.Replies.AssertQueue>;
  withChannel<T>(fn: (channel: amqp.Channel) => Promise<T>): Promise<T>;
  count(sql: string, values?: unknown[]): Promise<number>;
  /** Names of extra queues this test declared, deleted (with their `.retry`) on close. */
  extraQueues: string[];
}

/** `prefix` names the schema, exchange and queue (`<prefix>.events`, `<prefix>.q`), so a suite can find what it left. */
export async function withEnv(fn: (env: Env) => Promise<void>, prefix = 'cvc'): Promise<void> {
  const db = await createTestSchema(prefix);
  const connection = await connectRabbit();
  connection.on('error', () => undefined);
  const channel = await connection.createConfirmChannel();
  channel.on('error', () => undefined);
  const publisher = await openConfirmPublisher(connection);
  const exchange = uniqueName(`${prefix}.events`);
  const queue = uniqueName(`${prefix}.q`);
  const consumers = new Set<Consumer>();
  const q = `"${db.schema}"`;
  await db.pool.query(
    `CREATE TABLE ${q}.applied (seq bigserial PRIMARY KEY, event_id text NOT NULL, aggregate_id text NOT NULL, amount integer NOT NULL)`,
  );
  // The tests publish before or while the consumer declares; declaring the same durable topic exchange is idempotent.
  await channel.assertExchange(exchange, 'topic', { durable: true });

  const env: Env = {
    db,
    schema: db.schema,
    pool: db.pool,
    connection,
    channel,
    publisher,
    exchange,
    queue,
    retryQueue: `${queue}.retry`,
    retryTier: retryTierQueueName(queue, DEFAULT_RETRY_TIERS_MS[0]!),
    extraQueues: [],
    start<M extends object>(options: Partial<ConsumerOptions<M>>) {
      const consumer = startConsumer<M>({
        amqpUrl: AMQP_URL,
        queue,
        exchange,
        pool: db.pool,
        schema: db.schema,
        logger: silentLogger,
        backoff: BACKOFF,
        reconnectBackoff: BACKOFF,
        ...options,
      });
      consumers.add(consumer);
      return consumer;
    },
    async stop(consumer) {
      consumers.delete(consumer);
      await consumer.stop();
    },
    async publish(envelope) {
      const message = encodeMessage(envelope, routingKey);
      channel.publish(exchange, message.routingKey, message.content, message.options);
      await channel.waitForConfirms();
      return message.content;
    },
    async publishRaw(key, content, options = {}) {
      channel.publish(exchange, key, content, { persistent: true, contentType: 'application/json', ...options });
      await channel.waitForConfirms();
      return content;
    },
    withChannel(work) {
      return withChannel(connection, work);
    },
    async checkQueue(name) {
      return env.withChannel((ch) => ch.checkQueue(name));
    },
    async count(sql, values = []) {
      const { rows } = await db.pool.query<{ n: string }>(sql.replaceAll('$schema', q), values);
      return Number(rows[0]?.n ?? 0);
    },
  };

  try {
    await fn(env);
  } finally {
    for (const consumer of consumers) await consumer.stop().catch(() => undefined);
    // Under CONVERGE_KEEP_FAILED the rig drops them instead, and only if the test passed.
    if (!KEEP_FAILED) await dropBrokerNames(connection, [queue, exchange, ...env.extraQueues]);
    await connection.close().catch(() => undefined);
    await db.close();
  }
}

/** An incremental order event with a `delta` payload, as most consumer tests publish. */
export function envelope(
  eventId: string,
  aggregateId: string,
  version: number,
  payload: unknown = { delta: 1 },
  eventType = 'AmountAdded',
): EventEnvelope {
  return orderEvent(eventId, aggregateId, version, { payload, eventType });
}

/** The order projection: versioned increment plus one `applied` row per committed application. */
export function applyOrder(schema: string): EventHandler {
  return async (event, { tx }) => {
    await applyIncrement(tx, { projection: PROJECTION, event, schema }, async () => {
      return tx.query(`INSERT INTO "${schema}".applied (event_id, aggregate_id, amount) VALUES ($1, $2, $3)`, [
        event.eventId,
        event.aggregateId,
        (event.payload as { delta: number }).delta,
      ]);
    });
  };
}

export interface Gate {
  promise: Promise<void>;
  open(): void;
}

export function gate(): Gate {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

export function collect(consumer: Consumer): Settlement[] {
  const settled: Settlement[] = [];
  consumer.on('settled', (s) => settled.push(s));
  return settled;
}

export interface QuarantineRow {
  id: string;
  consumer: string;
  event_id: string | null;
  reason: string;
  detail: string;
  fingerprint: string | null;
  exchange: string | null;
  routing_key: string | null;
  properties: { messageId?: string; headers?: Record<string, unknown> } & Record<string, unknown>;
  body: Buffer;
  quarantined_at: Date;
  resolved_at: Date | null;
  event_type: string | null;
  schema_version: number | null;
  failure_class: string | null;
  attempts: number;
  times_seen: number;
  last_seen_at: Date;
}

export async function quarantineRows(env: Env): Promise<QuarantineRow[]> {
  const { rows } = await env.pool.query<QuarantineRow>(`SELECT * FROM "${env.schema}".quarantine ORDER BY id`);
  return rows;
}

/** A logger that keeps every record, to check what reaches the logs. */
export function capturingLogger(): Logger & { records: string[] } {
  const records: string[] = [];
  const keep = (obj: object, msg: string) => void records.push(JSON.stringify({ ...obj, msg }));
  return { records, debug: keep, info: keep, warn: keep, error: keep };
}
