/**
 * The live load retention runs beside: converge's relay draining an outbox that a feeder keeps
 * topped up with pending events, so the relay never runs dry and its rate is what the database
 * lets it do while retention works on the same tables. The relay runs in this process (through
 * the public API): retention itself is a few SQL statements waiting on the server, so it takes
 * next to no CPU from the relay here.
 */
import type pg from 'pg';
import { Relay, silentLogger } from '../src/index.js';
import { quoteIdentifier } from '../src/runtime/identifier.js';
import { AMQP_URL, DATABASE_URL, deleteBrokerObjects, sleep, unique, type BenchContext } from './env.js';

/** The feeder appends once fewer than this many events wait, so a claim always finds a full batch. */
const LOW_WATER = 30_000;
/**
 * Events per feeder transaction: small, like an application's. (With the partitioned parent's trigger
 * on, which holds two advisory locks per appended row until commit, 10,000 rows in one transaction ran
 * the server out of shared lock memory at max_locks_per_transaction 64.)
 */
const CHUNK = 500;
/**
 * The sink queue keeps only the newest messages: a drain of millions of events during a long
 * DELETE would otherwise pile gigabytes into the broker, and no consumer is part of this measurement.
 */
const QUEUE_MAX_LENGTH = 100_000;

/** What the relay published and the server wrote in one window of time. */
export interface WindowStats {
  seconds: number;
  published: number;
  /** Events published per second over the window. */
  rate: number;
  /** The longest time in the window without a confirmed batch: a lock the relay waited on shows here. */
  maxGapMs: number;
  walBytes: number;
  /** The fewest events waiting for the relay in the window (0: the feeder set the pace, not the relay). */
  lowestBacklog: number;
}

export async function walLsn(pool: pg.Pool): Promise<string> {
  const { rows } = await pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  return rows[0]!.lsn;
}

export async function walBytesSince(pool: pg.Pool, lsn: string): Promise<number> {
  const { rows } = await pool.query<{ bytes: string }>(
    'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text AS bytes',
    [lsn],
  );
  return Number(rows[0]!.bytes);
}

export class LiveLoad {
  readonly #pool: pg.Pool;
  readonly #schema: string;
  readonly #exchange = unique('bench.ret.x');
  readonly #queue = unique('bench.ret.q');
  #relay: Relay | undefined;
  #feeding: Promise<void> | undefined;
  #stopping = false;
  #inserted = 0;
  #published = 0;
  #lowestBacklog = Number.POSITIVE_INFINITY;
  /** performance.now() of every confirmed batch, for the gaps. */
  readonly #batchTimes: number[] = [];
  #failure: Error | undefined;

  constructor(pool: pg.Pool, schema: string) {
    this.#pool = pool;
    this.#schema = schema;
  }

  /** Declares the sink, registers its removal, starts relay and feeder. */
  async start(ctx: BenchContext): Promise<void> {
    ctx.cleanup.add(`delete ${this.#queue}`, () =>
      deleteBrokerObjects(ctx.broker, { queues: [this.#queue], exchanges: [this.#exchange] }),
    );
    ctx.cleanup.add(`stop the relay on ${this.#schema}`, () => this.stop());
    const channel = await ctx.broker.createChannel();
    try {
      await channel.assertExchange(this.#exchange, 'topic', { durable: true });
      await channel.assertQueue(this.#queue, { durable: true, arguments: { 'x-max-length': QUEUE_MAX_LENGTH } });
      await channel.bindQueue(this.#queue, this.#exchange, '#');
    } finally {
      await channel.close().catch(() => undefined);
    }
    // The same batching as `npm run bench` (batchSize 1000, concurrency 4).
    const relay = new Relay({
      connectionString: DATABASE_URL,
      amqpUrl: AMQP_URL,
      schema: this.#schema,
      exchange: this.#exchange,
      batchSize: 1000,
      concurrency: 4,
      logger: silentLogger,
    });
    relay.on('published', (eventIds) => {
      this.#published += eventIds.length;
      this.#batchTimes.push(performance.now());
    });
    relay.on('error', (err) => (this.#failure ??= err));
    this.#relay = relay.start();
    this.#feeding = this.#feed();
  }

  /** The fewest events waiting since the last call: 0 means the feeder, not the relay, set the pace then. */
  takeLowestBacklog(): number {
    const lowest = this.#lowestBacklog;
    this.#lowestBacklog = Number.POSITIVE_INFINITY;
    return lowest;
  }

  get published(): number {
    return this.#published;
  }

  /** Throws the first relay or feeder error, so a window that measured a broken load is not reported. */
  check(): void {
    if (this.#failure !== undefined) throw this.#failure;
  }

  /** Longest stretch of [fromMs, toMs] (performance.now()) without a confirmed batch. */
  maxGapMs(fromMs: number, toMs: number): number {
    let last = fromMs;
    let gap = 0;
    for (const at of this.#batchTimes) {
      if (at <= fromMs) continue;
      if (at > toMs) break;
      gap = Math.max(gap, at - last);
      last = at;
    }
    return Math.max(gap, toMs - last);
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.#feeding;
    await this.#relay?.stop();
    this.#relay = undefined;
  }

  /**
   * Appends with triggers off (session_replication_role = replica, superuser): on the partitioned
   * parent the per-row uniqueness trigger probes every partition, which held appends to a few
   * hundred events/s beside 5M-row partitions, so the relay ran dry and the figure measured the
   * feeder. Off, the relay sets the pace on both layouts (and never sleeps: it always has a backlog).
   */
  async #feed(): Promise<void> {
    const s = quoteIdentifier(this.#schema);
    const append = `INSERT INTO ${s}.outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
      SELECT gen_random_uuid()::text, 'order', gen_random_uuid()::text, 1, 'AmountAdded', '{"delta":1}'::jsonb
        FROM generate_series(1, $1::int)`;
    const client = await this.#pool.connect().catch((err: unknown) => {
      this.#failure ??= err instanceof Error ? err : new Error(String(err));
    });
    if (!client) return;
    try {
      await client.query('SET session_replication_role = replica');
      while (!this.#stopping) {
        const backlog = this.#inserted - this.#published;
        if (this.#inserted > 0) this.#lowestBacklog = Math.min(this.#lowestBacklog, backlog);
        if (backlog >= LOW_WATER) {
          await sleep(5);
          continue;
        }
        await client.query(append, [CHUNK]);
        this.#inserted += CHUNK;
      }
    } catch (err) {
      this.#failure ??= err instanceof Error ? err : new Error(String(err));
    } finally {
      await client.query('RESET session_replication_role').catch(() => undefined);
      client.release();
    }
  }
}
