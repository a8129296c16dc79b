/**
 * The CDC relay's test fixture: a migrated schema on the logical-replication PostgreSQL
 * (CDC_DATABASE_URL, never the shared server), a slot and publication of its own, a broker
 * exchange and a queue whose messages are collected. close() stops the relays and drops the slot
 * first (a leftover slot retains WAL forever), then the publication, schema and broker objects.
 */
import assert from 'node:assert/strict';
import type amqp from 'amqplib';
import pg from 'pg';
import { appendToOutbox, silentLogger, withTransaction, type EventEnvelope, type NewEvent } from '../../src/index.js';
import { CdcRelay, createCdcSlot, dropCdcSlot, showCdcSlot, type CdcRelayOptions } from '../../src/relay/index.js';
import { migrate } from '../../src/schema/migrate.js';
import {
  AMQP_URL,
  CDC_DATABASE_URL,
  CDC_PG_HINT,
  DATABASE_URL,
  KEEP_FAILED,
  connectRabbit,
  createTestSchema,
  dropBrokerNames,
  redactUrl,
  registry,
  uniqueName,
  waitFor,
  PARTITIONED,
  type TestDatabase,
} from './rig.js';
import { CleanupSteps } from './cleanup.js';

export interface Received {
  envelope: EventEnvelope;
  content: Buffer;
  properties: amqp.MessageProperties;
  routingKey: string;
}

/** A pool on the logical-replication server; a missing server fails naming it and how to start it. */
export async function connectCdcPostgres(max = 5, databaseUrl = CDC_DATABASE_URL): Promise<pg.Pool> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max, connectionTimeoutMillis: 5000 });
  pool.on('error', () => undefined);
  try {
    const { rows } = await pool.query<{ wal_level: string }>('SHOW wal_level');
    if (rows[0]?.wal_level !== 'logical') throw new Error(`wal_level is ${rows[0]?.wal_level}, not logical`);
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw new Error(
      `PostgreSQL with wal_level=logical is not reachable at ${redactUrl(databaseUrl)} (${(err as Error).message}); ${CDC_PG_HINT}`,
    );
  }
  registry.pool(pool);
  return pool;
}

export interface OutboxTestRow {
  position: string;
  event_id: string;
  aggregate_id: string;
  aggregate_version: string;
  status: string;
  attempts: number;
  broker_retries: number;
  last_error: string | null;
}

export class CdcRig {
  readonly relays: CdcRelay[] = [];
  readonly received: Received[] = [];
  readonly exchange = uniqueName('cvt_cdc_x');
  readonly queue = uniqueName('cvt_cdc_q');
  readonly slot = uniqueName('cvt_cdc_slot');
  readonly publication = uniqueName('cvt_cdc_pub');
  /** Queues a test declared besides the collecting one, deleted with it. */
  readonly #queues: string[] = [];

  private constructor(
    readonly databaseUrl: string,
    readonly pool: pg.Pool,
    readonly schema: string,
    readonly connection: amqp.ChannelModel,
    readonly channel: amqp.Channel,
  ) {}

  /**
   * `bind`: the routing key pattern the collecting queue is bound with (omit for none yet);
   * `databaseUrl`: another server with wal_level=logical than CDC_DATABASE_URL's.
   */
  static async open(bind: string | undefined = '#', databaseUrl = CDC_DATABASE_URL): Promise<CdcRig> {
    const pool = await connectCdcPostgres(5, databaseUrl);
    const schema = uniqueName('cvt_cdc');
    await migrate(pool, { schema, ...(PARTITIONED ? { partitioned: true as const } : {}) });
    const connection = await connectRabbit();
    connection.on('error', () => undefined);
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    const rig = new CdcRig(databaseUrl, pool, schema, connection, channel);
    await channel.assertExchange(rig.exchange, 'topic', { durable: true });
    await channel.assertQueue(rig.queue, { durable: false });
    if (bind !== undefined) await rig.bind(bind);
    await channel.consume(
      rig.queue,
      (message) => {
        if (!message) return;
        rig.received.push({
          envelope: JSON.parse(message.content.toString()) as EventEnvelope,
          content: message.content,
          properties: message.properties,
          routingKey: message.fields.routingKey,
        });
      },
      { noAck: true },
    );
    return rig;
  }

  async bind(pattern: string): Promise<void> {
    await this.channel.bindQueue(this.queue, this.exchange, pattern);
  }

  /** Another queue on the exchange, bound with `pattern` and declared with `args` (e.g. a length limit). */
  async queueIn(pattern: string, args: Record<string, unknown> = {}): Promise<string> {
    const queue = uniqueName('cvt_cdc_q');
    this.#queues.push(queue);
    await this.channel.assertQueue(queue, { durable: false, arguments: args });
    await this.channel.bindQueue(queue, this.exchange, pattern);
    return queue;
  }

  async createSlot(): Promise<void> {
    await createCdcSlot(this.pool, { schema: this.schema, slot: this.slot, publication: this.publication });
  }

  options(overrides: Partial<CdcRelayOptions> = {}): CdcRelayOptions {
    return {
      connectionString: this.databaseUrl,
      amqpUrl: AMQP_URL,
      schema: this.schema,
      exchange: this.exchange,
      slot: this.slot,
      publication: this.publication,
      logger: silentLogger,
      markIntervalMs: 20,
      standbyRetryMs: 50,
      backoff: { initialDelayMs: 20, maxDelayMs: 100, factor: 2 },
      reconnectBackoff: { initialDelayMs: 20, maxDelayMs: 100, factor: 2 },
      ...overrides,
    };
  }

  started(overrides: Partial<CdcRelayOptions> = {}): CdcRelay {
    const relay = new CdcRelay(this.options(overrides));
    relay.on('error', () => undefined);
    this.relays.push(relay);
    return relay.start();
  }

  /** Appends events in one committed transaction. */
  async append(...events: NewEvent[]): Promise<string[]> {
    return withTransaction(this.pool, async (client) => {
      const ids: string[] = [];
      for (const event of events) ids.push((await appendToOutbox(client, event, { schema: this.schema })).eventId);
      return ids;
    });
  }

  /**
   * Appends events in one committed transaction and returns the WAL insert position inside it,
   * before its commit record: a lower bound of its commit LSN, so a slot confirmed at or below it
   * was never acknowledged past these events.
   */
  async appendBefore(...events: NewEvent[]): Promise<string> {
    return withTransaction(this.pool, async (client) => {
      for (const event of events) await appendToOutbox(client, event, { schema: this.schema });
      const { rows } = await client.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn');
      return rows[0]!.lsn;
    });
  }

  async rows(): Promise<OutboxTestRow[]> {
    const { rows } = await this.pool.query<OutboxTestRow>(`SELECT * FROM "${this.schema}".outbox ORDER BY position`);
    return rows;
  }

  async slotInfo() {
    return showCdcSlot(this.pool, this.slot);
  }

  /**
   * Per aggregate id, its versions in the order of their last copy: a stream restarted at a stop
   * resends everything after it, so the last copies must come in version order.
   */
  lastCopyOrder(): Record<string, number[]> {
    const last = new Map<string, number[]>();
    for (const { envelope } of this.received) {
      const seen = (last.get(envelope.aggregateId) ?? []).filter((v) => v !== envelope.aggregateVersion);
      last.set(envelope.aggregateId, [...seen, envelope.aggregateVersion]);
    }
    return Object.fromEntries(last);
  }

  /** Event ids in the order they arrived. */
  arrivals(): string[] {
    return this.received.map((r) => r.envelope.eventId);
  }

  async close(): Promise<void> {
    const steps = new CleanupSteps();
    const attempt = (work: () => Promise<unknown>) => steps.attempt(work);
    for (const relay of this.relays) await attempt(() => relay.stop());
    // Whatever else happened: a slot left behind would keep WAL forever. The walsender of a relay
    // just stopped may hold the slot a moment longer (55006): wait for it to go.
    await attempt(() =>
      waitFor(
        () =>
          dropCdcSlot(this.pool, { slot: this.slot, publication: this.publication }).then(
            () => true,
            (err: { code?: string }) => {
              if (err.code === '55006') return false;
              throw err;
            },
          ),
        `slot ${this.slot} released by its walsender, to drop it`,
      ),
    );
    if (!KEEP_FAILED)
      await attempt(() => dropBrokerNames(this.connection, [...this.#queues, this.queue, this.exchange]));
    await attempt(() => this.connection.close());
    await attempt(() => this.pool.query(`DROP SCHEMA IF EXISTS "${this.schema}" CASCADE`));
    await attempt(() => this.pool.end());
    steps.finish('CDC test cleanup');
  }
}

export async function withCdcRig(
  work: (rig: CdcRig) => Promise<void>,
  bind: string | undefined = '#',
  databaseUrl = CDC_DATABASE_URL,
): Promise<void> {
  const rig = await CdcRig.open(bind, databaseUrl);
  try {
    await work(rig);
  } finally {
    await rig.close();
  }
}

/**
 * A migrated schema on the shared PostgreSQL (DATABASE_URL), which has no logical decoding
 * (`wal_level=replica`, as `npm run services` sets it up): what the CDC relay must refuse at once.
 * A server with wal_level=logical there fails the test, naming why, rather than skipping it.
 */
export async function withNonLogicalSchema(work: (db: TestDatabase) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvt_cdc_nolog');
  try {
    const { rows } = await db.pool.query<{ wal_level: string }>('SHOW wal_level');
    assert.notEqual(
      rows[0]?.wal_level,
      'logical',
      `this test needs a PostgreSQL without wal_level=logical at ${redactUrl(DATABASE_URL)} (the shared server has wal_level=replica)`,
    );
    await work(db);
  } finally {
    await db.close();
  }
}

export function orderEvent(aggregateId: string, version: number, overrides: Partial<NewEvent> = {}): NewEvent {
  return {
    aggregateType: 'order',
    aggregateId,
    aggregateVersion: version,
    eventType: 'OrderChanged',
    payload: { aggregateId, version },
    ...overrides,
  };
}
