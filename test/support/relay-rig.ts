/** The polling relay's integration-test rig: a migrated schema, an exchange and queues of its own, relays it stops. */
import assert from 'node:assert/strict';
import type amqp from 'amqplib';
import type pg from 'pg';
import {
  Relay,
  silentLogger,
  startRelay,
  withTransaction,
  appendToOutbox,
  type NewEvent,
  type RelayOptions,
} from '../../src/index.js';
import {
  AMQP_URL,
  DATABASE_URL,
  type TestDatabase,
  connectRabbit,
  createTestSchema,
  uniqueName,
  KEEP_FAILED,
  dropBrokerNames,
} from './rig.js';
import { CleanupSteps } from './cleanup.js';

export interface OutboxRow {
  position: string;
  event_id: string;
  aggregate_id: string;
  aggregate_version: string;
  status: 'pending' | 'published' | 'failed';
  attempts: number;
  next_attempt_at: Date;
  claimed_by: string | null;
  claim_expires_at: Date | null;
  published_at: Date | null;
  last_error: string | null;
}

/**
 * Everything one test needs: its own migrated schema, its own exchange name, a channel to
 * inspect the broker with, and cleanup of relays, queues, exchange and schema.
 */
export class Rig {
  readonly relays: Relay[] = [];
  readonly queues: string[] = [];
  readonly pools: pg.Pool[] = [];
  readonly gates: Gate[] = [];
  readonly exchange = uniqueName('cvt_relay_x');
  private constructor(
    readonly db: TestDatabase,
    readonly connection: amqp.ChannelModel,
    readonly channel: amqp.Channel,
  ) {}

  static async open(): Promise<Rig> {
    const db = await createTestSchema('cvt_relay');
    const connection = await connectRabbit();
    connection.on('error', () => undefined);
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    return new Rig(db, connection, channel);
  }

  get schema(): string {
    return this.db.schema;
  }

  get outbox(): string {
    return `"${this.db.schema}".outbox`;
  }

  /** Relay options every test shares: this rig's schema and exchange, silent logs. */
  relayOptions(overrides: RelayOptions = {}): RelayOptions {
    return {
      schema: this.schema,
      exchange: this.exchange,
      logger: silentLogger,
      amqpUrl: AMQP_URL,
      connectionString: DATABASE_URL,
      pollIntervalMs: 20,
      ...overrides,
    };
  }

  /** A relay that is not started: cycles run only through runOnce(). */
  relay(overrides: RelayOptions = {}): Relay {
    const relay = new Relay(this.relayOptions(overrides));
    this.relays.push(relay);
    return relay;
  }

  started(overrides: RelayOptions = {}): Relay {
    const relay = startRelay(this.relayOptions(overrides));
    this.relays.push(relay);
    return relay;
  }

  gate(): Gate {
    const held = gate();
    this.gates.push(held);
    return held;
  }

  async declareExchange(): Promise<void> {
    await this.channel.assertExchange(this.exchange, 'topic', { durable: true });
  }

  /** A queue bound to this rig's exchange with `pattern` (omit to leave it unbound). */
  async queue(pattern?: string): Promise<string> {
    const name = uniqueName('cvt_relay_q');
    await this.channel.assertQueue(name, { durable: false, exclusive: false, autoDelete: false });
    this.queues.push(name);
    if (pattern !== undefined) {
      await this.declareExchange();
      await this.channel.bindQueue(name, this.exchange, pattern);
    }
    return name;
  }

  /** Appends events in one committed transaction, the way a service does. */
  async append(...events: NewEvent[]): Promise<string[]> {
    return withTransaction(this.db.pool, async (client) => {
      const ids: string[] = [];
      for (const event of events) ids.push((await appendToOutbox(client, event, { schema: this.schema })).eventId);
      return ids;
    });
  }

  async rows(): Promise<OutboxRow[]> {
    const { rows } = await this.db.pool.query<OutboxRow>(`SELECT * FROM ${this.outbox} ORDER BY position`);
    return rows;
  }

  async row(eventId: string): Promise<OutboxRow> {
    const { rows } = await this.db.pool.query<OutboxRow>(`SELECT * FROM ${this.outbox} WHERE event_id = $1`, [eventId]);
    assert.equal(rows.length, 1, `outbox row for ${eventId}`);
    return rows[0]!;
  }

  /** Takes every message currently in the queue (confirmed publishes are already enqueued). */
  async drain(queue: string): Promise<amqp.GetMessage[]> {
    const messages: amqp.GetMessage[] = [];
    for (;;) {
      const message = await this.channel.get(queue, { noAck: true });
      if (message === false) return messages;
      messages.push(message);
    }
  }

  async close(): Promise<void> {
    const steps = new CleanupSteps();
    const attempt = (work: () => Promise<unknown>) => steps.attempt(work);
    // A test that failed while a hook was held must not leave stop() waiting on it.
    for (const held of this.gates) held.release();
    for (const relay of this.relays) await attempt(() => relay.stop());
    for (const pool of this.pools) await attempt(() => pool.end());
    // Under CONVERGE_KEEP_FAILED the test rig drops them instead, and only if the test passed.
    if (!KEEP_FAILED) await attempt(() => dropBrokerNames(this.connection, [...this.queues, this.exchange]));
    await attempt(() => this.connection.close());
    await attempt(() => this.db.close());
    steps.finish('relay test cleanup');
  }
}

export async function withRig(work: (rig: Rig) => Promise<void>): Promise<void> {
  const rig = await Rig.open();
  try {
    await work(rig);
  } finally {
    await rig.close();
  }
}

export function event(aggregateId: string, version: number, overrides: Partial<NewEvent> = {}): NewEvent {
  return {
    aggregateType: 'order',
    aggregateId,
    aggregateVersion: version,
    eventType: 'OrderChanged',
    payload: { aggregateId, version },
    ...overrides,
  };
}

export interface Gate {
  /** Lets the held hook continue. */
  release(): void;
  released: Promise<void>;
  /** Called by the hook when it starts waiting. */
  entered(): void;
  reached: Promise<void>;
}

/** A promise to hold a hook on, plus a signal that the hook was reached. */
export function gate(): Gate {
  let release!: () => void;
  let entered!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const reached = new Promise<void>((resolve) => (entered = resolve));
  return { release, released, entered, reached };
}

/** Waits until `hold` is reached, failing instead of hanging if `work` settles first. */
export async function reach(hold: Gate, work: Promise<unknown>, what: string): Promise<void> {
  await Promise.race([
    hold.reached,
    work.then(
      (result) => Promise.reject(new Error(`${what}: finished without reaching the hook (${JSON.stringify(result)})`)),
      (err: unknown) => Promise.reject(new Error(`${what}: failed before reaching the hook: ${String(err)}`)),
    ),
  ]);
}

export async function backendPids(pool: pg.Pool, applicationName: string): Promise<number[]> {
  const { rows } = await pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [
    applicationName,
  ]);
  return rows.map((row) => row.pid);
}
