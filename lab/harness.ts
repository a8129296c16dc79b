/**
 * The lab's world: a source `orders` table written by a service, converge's outbox, a broker
 * exchange and queue, and an `order_projection` read model kept by a consumer. Every environment
 * has its own schema, exchange and queue names and removes them on close.
 *
 * The broker is reached only through the Transport seam, so every scenario runs the same on
 * RabbitMQ and on the in-process transport (lab/broker.ts picks one).
 */
import pg from 'pg';
import { AMQP_URL, DATABASE_URL, connectPostgres, uniqueName } from '../kit/services.js';
import {
  appendToOutbox,
  applyIncrement,
  grantsSql,
  migrate,
  silentLogger,
  updateExactlyOne,
  withTransaction,
  type EventEnvelope,
  type EventHandler,
  type Subscription,
  type Transport,
  type TransportConnection,
  type TransportDelivery,
  type TransportPublisher,
} from '../src/index.js';
import { encodeMessage, routingKeyFromTemplate } from '../src/internal/index.js';
import { DEFAULT_RETRY_TIERS_MS, retryTiers } from '../src/transport/queue-arguments.js';
import { labTransportKind, openLabBroker, type LabTransportKind } from './broker.js';

export { AMQP_URL, DATABASE_URL };
export const PROJECTION = 'order_projection';

export class LabCheckError extends Error {}

/** A lab assertion: records what was checked, throws with the same words when it does not hold. */
export function check(checks: string[], condition: boolean, description: string, observed?: unknown): void {
  if (!condition)
    throw new LabCheckError(`${description}${observed === undefined ? '' : ` (observed ${JSON.stringify(observed)})`}`);
  checks.push(description);
}

/**
 * A pull from the lab queue (AMQP's basic.get, which the Transport seam does not have): a
 * subscription with prefetch 1, so at most one message is out at a time and the rest stay in the
 * queue. Subscribed at the first pull only, so scenarios that run a consumer on the queue never
 * compete with it.
 */
export class Puller {
  readonly #arrived: TransportDelivery[] = [];
  #waiting: ((delivery: TransportDelivery) => void) | undefined;
  #subscription: Promise<Subscription> | undefined;

  constructor(
    readonly connection: TransportConnection,
    readonly queue: string,
  ) {}

  async next(timeoutMs: number): Promise<TransportDelivery> {
    this.#subscription ??= this.connection.subscribe(this.queue, (delivery) => this.#deliver(delivery), {
      prefetch: 1,
    });
    await this.#subscription;
    const ready = this.#arrived.shift();
    if (ready) return ready;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiting = undefined;
        reject(new LabCheckError(`no message arrived on ${this.queue} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiting = (delivery) => {
        clearTimeout(timer);
        this.#waiting = undefined;
        resolve(delivery);
      };
    });
  }

  async cancel(): Promise<void> {
    if (this.#subscription) await (await this.#subscription).cancel();
  }

  #deliver(delivery: TransportDelivery): void {
    if (this.#waiting) this.#waiting(delivery);
    else this.#arrived.push(delivery);
  }
}

/**
 * Connection strings of the runtime roles the lab's parts run as, each granted by grantsSql
 * (`converge grants`) on the environment's schema: the relays as `relay`, the consumers as
 * `consumer`, the service's writes as `producer`. The environment's own pool (DATABASE_URL) owns
 * the schema, as the migration role does, and runs the checks and the operator's repair.
 */
export interface LabRoles {
  relay: string;
  consumer: string;
  producer: string;
}

/** LAB_RELAY_URL, LAB_CONSUMER_URL and LAB_PRODUCER_URL (docker-compose.yml's lab sets them), or null when unset. */
export function labRolesFromEnv(): LabRoles | null {
  const { LAB_RELAY_URL: relay, LAB_CONSUMER_URL: consumer, LAB_PRODUCER_URL: producer } = process.env;
  return relay && consumer && producer ? { relay, consumer, producer } : null;
}

export interface LabEnv {
  /** The owner's pool (the migration role): schema, checks, operator repairs. */
  pool: pg.Pool;
  /** What each part connects with: the runtime roles' pools, or `pool` for all when the lab runs without roles. */
  pools: { relay: pg.Pool; consumer: pg.Pool; producer: pg.Pool };
  schema: string;
  /** What the relays and consumers of the scenarios are given (startRelay/startConsumer `transport`). */
  transport: Transport;
  transportKind: LabTransportKind;
  /** The lab's own connection: its publisher and its pulls. */
  connection: TransportConnection;
  publisher: TransportPublisher;
  exchange: string;
  queue: string;
  /** Handlers of the order projection, for startConsumer / new DeliveryProcessor. */
  handlers: Record<string, EventHandler>;
  /** Messages ready in the lab queue. */
  depth(): Promise<number>;
  puller: Puller;
  close(): Promise<void>;
}

export async function createLabEnv(
  kind: LabTransportKind = labTransportKind(),
  roles: LabRoles | null = null,
): Promise<LabEnv> {
  const pool = await connectPostgres(8);
  const schema = uniqueName('lab');
  const exchange = uniqueName('lab.events');
  const queue = uniqueName('lab.orders');
  const broker = await openLabBroker(kind).catch(async (err: unknown) => {
    await pool.end();
    throw err;
  });
  const abort = new AbortController();
  const connection = await broker.transport
    .connect({ name: 'converge-lab', signal: abort.signal, onClose: () => undefined })
    .catch(async (err: unknown) => {
      await broker.close([]);
      await pool.end();
      throw broker.transport.failure(err);
    });
  await migrate(pool, { schema });
  await pool.query(
    `CREATE TABLE "${schema}".orders (id text PRIMARY KEY, amount integer NOT NULL, version bigint NOT NULL)`,
  );
  await pool.query(`CREATE TABLE "${schema}".order_projection (id text PRIMARY KEY, amount integer NOT NULL)`);
  // One row per committed application, so "applied" is counted from what really committed.
  await pool.query(
    `CREATE TABLE "${schema}".applications (event_id text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
  );
  const pools = roles ? await grantRoles(pool, schema, roles) : { relay: pool, consumer: pool, producer: pool };
  // A classic queue set bound with '#'; the scenarios' consumers take it as declared (declare: false),
  // so it has the retry tiers a consumer with default options sends its delayed retries to.
  await broker.declare(connection, {
    queue,
    retryQueue: `${queue}.retry`,
    retryTiers: retryTiers(queue, DEFAULT_RETRY_TIERS_MS),
    deadQueue: null,
    exchange,
    bindings: ['#'],
    queueType: 'classic',
    deliveryLimit: 20,
  });
  // Declared above (auto-deleted on RabbitMQ): a publisher's plain declaration would disagree (406).
  const publisher = await connection.openPublisher();
  const puller = new Puller(connection, queue);

  const handlers: Record<string, EventHandler> = {
    AmountAdded: async (event, { tx }) => {
      const { delta } = event.payload as { delta: number };
      await applyIncrement(tx, { projection: PROJECTION, event, schema }, async () => {
        const written = await tx.query(
          `INSERT INTO "${schema}".order_projection (id, amount) VALUES ($1, $2)
           ON CONFLICT (id) DO UPDATE SET amount = order_projection.amount + EXCLUDED.amount`,
          [event.aggregateId, delta],
        );
        await tx.query(`INSERT INTO "${schema}".applications (event_id) VALUES ($1)`, [event.eventId]);
        return written;
      });
    },
  };

  return {
    pool,
    pools,
    schema,
    transport: broker.transport,
    transportKind: broker.kind,
    connection,
    publisher,
    exchange,
    queue,
    handlers,
    depth: () => broker.depth(queue),
    puller,
    async close() {
      await puller.cancel().catch(() => undefined);
      await connection.close().catch(() => undefined);
      await broker.close([queue, exchange]);
      for (const rolePool of new Set(Object.values(pools))) if (rolePool !== pool) await rolePool.end();
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await pool.end();
    },
  };
}

/**
 * Runs `converge grants` for the runtime roles on the lab's schema (the read model and the
 * applications log are the consumer's projection tables), plus the service's own grant on its
 * business table, and opens a pool per role.
 */
async function grantRoles(owner: pg.Pool, schema: string, roles: LabRoles): Promise<LabEnv['pools']> {
  const role = (url: string) => decodeURIComponent(new URL(url).username);
  await owner.query(
    grantsSql({
      schema,
      relayRole: role(roles.relay),
      consumerRole: role(roles.consumer),
      producerRole: role(roles.producer),
      projectionTables: [`${schema}.order_projection`, `${schema}.applications`],
    }),
  );
  // grantsSql accepted the role names, so they are plain identifiers and safe to quote.
  await owner.query(`GRANT SELECT, INSERT, UPDATE ON "${schema}".orders TO "${role(roles.producer)}"`);
  const open = (connectionString: string) => {
    const rolePool = new pg.Pool({ connectionString, max: 4 });
    rolePool.on('error', () => undefined);
    return rolePool;
  };
  return { relay: open(roles.relay), consumer: open(roles.consumer), producer: open(roles.producer) };
}

export interface SourceWrite {
  orderId: string;
  delta: number;
  eventId?: string;
  /** The version the writer read before (a stale one loses the race); by default read in the transaction. */
  readVersion?: number;
  /** Throw after both writes, before COMMIT. */
  failBeforeCommit?: boolean;
}

/** Commits a new order at version 0 with amount 0, as the service does before any change event. */
export async function createOrder(env: LabEnv, orderId: string): Promise<void> {
  await env.pools.producer.query(`INSERT INTO "${env.schema}".orders (id, amount, version) VALUES ($1, 0, 0)`, [
    orderId,
  ]);
}

/** The order as the source has it, or null. */
export async function orderRow(env: LabEnv, orderId: string): Promise<{ amount: number; version: number } | null> {
  const { rows } = await env.pool.query<{ amount: number; version: string }>(
    `SELECT amount, version FROM "${env.schema}".orders WHERE id = $1`,
    [orderId],
  );
  const row = rows[0];
  return row ? { amount: row.amount, version: Number(row.version) } : null;
}

/**
 * The service side: one transaction moves an existing order from the version it read to the
 * next with a conditional update (`updateExactlyOne`: a lost race throws
 * ConcurrencyConflictError and rolls everything back) and appends the event on the same connection.
 */
export async function addToOrder(env: LabEnv, write: SourceWrite): Promise<{ eventId: string; version: number }> {
  return withTransaction(env.pools.producer, async (tx) => {
    let current = write.readVersion;
    if (current === undefined) {
      const { rows } = await tx.query<{ version: string }>(`SELECT version FROM "${env.schema}".orders WHERE id = $1`, [
        write.orderId,
      ]);
      current = Number(rows[0]?.version ?? 0);
    }
    await updateExactlyOne(
      tx,
      `UPDATE "${env.schema}".orders SET amount = amount + $1, version = $2 WHERE id = $3 AND version = $4`,
      [write.delta, current + 1, write.orderId, current],
    );
    const appended = await appendToOutbox(
      tx,
      {
        eventId: write.eventId,
        aggregateType: 'order',
        aggregateId: write.orderId,
        aggregateVersion: current + 1,
        eventType: 'AmountAdded',
        payload: { delta: write.delta },
      },
      { schema: env.schema },
    );
    if (write.failBeforeCommit) throw new Error('simulated failure before commit');
    return { eventId: appended.eventId, version: current + 1 };
  });
}

export function envelopeFor(
  orderId: string,
  version: number,
  delta: number,
  eventId = `E${version}-${orderId}`,
): EventEnvelope {
  return {
    eventId,
    aggregateType: 'order',
    aggregateId: orderId,
    aggregateVersion: version,
    eventType: 'AmountAdded',
    schemaVersion: 1,
    kind: 'incremental',
    payload: { delta },
    occurredAt: new Date().toISOString(),
  };
}

const routingKey = routingKeyFromTemplate('{aggregateType}.{eventType}');

/** Publishes an envelope straight to the lab exchange, as another producer or a broker replay would. */
export async function publishEnvelope(env: LabEnv, envelope: EventEnvelope): Promise<void> {
  const message = encodeMessage(envelope, routingKey);
  // Every transport publish is mandatory; the rest are the properties the relay sends.
  const { mandatory: _always, ...properties } = message.options;
  await env.publisher.publish(
    env.exchange,
    message.routingKey,
    message.content,
    { ...properties, messageId: envelope.eventId },
    10_000,
  );
}

/** The next message of the lab queue, unsettled (ack or nack it), waiting until one is there. */
export function getOne(env: LabEnv, timeoutMs = 10_000): Promise<TransportDelivery> {
  return env.puller.next(timeoutMs);
}

export async function waitUntil(
  condition: () => Promise<boolean>,
  description: string,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new LabCheckError(`timed out waiting for ${description}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export async function count(env: LabEnv, sql: string, values: unknown[] = []): Promise<number> {
  const { rows } = await env.pool.query<{ n: string }>(sql.replaceAll('$schema', `"${env.schema}"`), values);
  return Number(rows[0]?.n ?? 0);
}

export async function projectionRow(env: LabEnv, orderId: string): Promise<{ amount: number; version: number } | null> {
  const { rows } = await env.pool.query<{ amount: number; version: string }>(
    `SELECT p.amount, s.version FROM "${env.schema}".order_projection p
       JOIN "${env.schema}".projection_state s ON s.projection = $2 AND s.aggregate_type = 'order' AND s.aggregate_id = p.id
      WHERE p.id = $1`,
    [orderId, PROJECTION],
  );
  const row = rows[0];
  return row ? { amount: row.amount, version: Number(row.version) } : null;
}

export const quietLogger = silentLogger;
