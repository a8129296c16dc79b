/**
 * Where the benchmark runs and how it cleans up. It only ever talks to services on this
 * machine (it floods them and drops what it creates), names everything it creates uniquely,
 * and keeps a stack of undo steps that runs even when a measurement fails.
 */
import { DEFAULT_RETRY_TIERS_MS, retryTiers } from '../src/transport/queue-arguments.js';
import amqp from 'amqplib';
import pg from 'pg';
import {
  AMQP_HINT,
  AMQP_URL,
  CDC_DATABASE_URL,
  CDC_PG_HINT,
  DATABASE_URL,
  PG_HINT,
  redactUrl as redact,
  uniqueName,
} from '../kit/services.js';

export { AMQP_URL, DATABASE_URL };

/** Refuses anything but loopback: a benchmark pointed at a shared server would hurt it and measure the network. */
export function assertLoopback(): void {
  for (const [variable, url] of [
    ['DATABASE_URL', DATABASE_URL],
    ['CDC_DATABASE_URL', CDC_DATABASE_URL],
    ['AMQP_URL', AMQP_URL],
  ] as const) {
    const host = new URL(url).hostname;
    if (host !== '127.0.0.1' && host !== 'localhost')
      throw new Error(`${variable} must point at 127.0.0.1 for the benchmark (got host ${host})`);
  }
}

/** Lower-case and short enough to be a schema name as well as a queue or exchange name (the kit's uniqueName). */
export const unique = uniqueName;

/**
 * Aborted on SIGINT/SIGTERM: no new measurement or worker starts after it, so the cleanup
 * that follows is not raced by a stage creating fresh queues and schemas.
 */
export const runAbort = new AbortController();

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class TimeoutError extends Error {}

/** Rejects with `message` if `work` has not settled after `ms`; the timer never keeps the process alive. */
export async function withTimeout<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${message} (timed out after ${(ms / 1000).toFixed(0)} s)`)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export function openPool(max: number): Promise<pg.Pool> {
  return openPoolAt(DATABASE_URL, max);
}

/** A pool on `url`, checked once; a server that does not answer ends the run with how to start it. */
export async function openPoolAt(url: string, max: number): Promise<pg.Pool> {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    connectionTimeoutMillis: 5000,
    application_name: 'converge-bench',
  });
  pool.on('error', () => undefined); // an idle connection dying must not end the run; the next query reports it
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    await pool.end().catch(() => undefined);
    const hint = url === DATABASE_URL ? PG_HINT : CDC_PG_HINT;
    throw new Error(`PostgreSQL is not reachable at ${redact(url)} (${(err as Error).message}); ${hint}`);
  }
  return pool;
}

export async function openBroker(): Promise<amqp.ChannelModel> {
  try {
    const connection = await withTimeout(
      amqp.connect(AMQP_URL, { timeout: 5000, noDelay: true }),
      6000,
      'connecting to RabbitMQ',
    );
    connection.on('error', () => undefined); // surfaced through the failing channel operation instead
    return connection;
  } catch (err) {
    throw new Error(`RabbitMQ is not reachable at ${redact(AMQP_URL)} (${(err as Error).message}); ${AMQP_HINT}`);
  }
}

/**
 * Undo steps in reverse order of creation. Steps are registered before the thing they undo
 * is created, so a failure half-way through creation is still cleaned up (drops are idempotent).
 */
export class Cleanup {
  readonly #steps: { label: string; run: () => Promise<unknown> }[] = [];

  add(label: string, run: () => Promise<unknown>): void {
    this.#steps.push({ label, run });
  }

  /** Runs every step (each bounded in time), returns the failures instead of stopping at the first. */
  async runAll(): Promise<string[]> {
    const failures: string[] = [];
    while (this.#steps.length > 0) {
      const step = this.#steps.pop()!;
      try {
        await withTimeout(step.run(), 30_000, `cleanup: ${step.label}`);
      } catch (err) {
        failures.push(`${step.label}: ${(err as Error).message}`);
      }
    }
    return failures;
  }
}

/** Deletes queues and exchanges on a fresh channel each, since a failed delete closes its channel. */
export async function deleteBrokerObjects(
  connection: amqp.ChannelModel,
  objects: { queues?: string[]; exchanges?: string[] },
): Promise<void> {
  for (const queue of objects.queues ?? []) {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await channel.deleteQueue(queue).catch(() => undefined);
    await channel.close().catch(() => undefined);
  }
  for (const exchange of objects.exchanges ?? []) {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await channel.deleteExchange(exchange).catch(() => undefined);
    await channel.close().catch(() => undefined);
  }
}

/**
 * Flushes dirty buffers before a measurement so a checkpoint triggered by the previous stage's
 * writes does not land inside this one. Best effort: without the privilege we just measure.
 */
export async function checkpoint(pool: pg.Pool): Promise<void> {
  await pool.query('CHECKPOINT').catch(() => undefined);
}

/** Progress lines go to stderr so stdout holds only the table and the JSON line. */
export function note(message: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}\n`);
}

/** What every measurement gets: the run's pool, a broker connection for setup, the run's schema and cleanup stack. */
export interface BenchContext {
  pool: pg.Pool;
  broker: amqp.ChannelModel;
  /** The run's converge schema (migrated); measurements truncate what they use. */
  schema: string;
  /** The server `pool` is on, for the workers; DATABASE_URL unless set (the CDC measurements' logical server). */
  databaseUrl?: string;
  cleanup: Cleanup;
}

/**
 * A fresh exchange and queue name. Their deletion is registered with the run's cleanup before
 * they exist; `remove()` deletes them right after the measurement so a run never piles up
 * hundreds of thousands of messages in the broker (the registered step is then a no-op).
 */
export function brokerNames(
  ctx: BenchContext,
  prefix: string,
): { exchange: string; queue: string; remove(): Promise<void> } {
  const exchange = unique(`bench.${prefix}.x`);
  const queue = unique(`bench.${prefix}.q`);
  // `<queue>.retry` and the retry tiers are the companion queues converge's consumer declares.
  const companions = [`${queue}.retry`, ...retryTiers(queue, DEFAULT_RETRY_TIERS_MS).map((tier) => tier.queue)];
  const remove = () => deleteBrokerObjects(ctx.broker, { queues: [queue, ...companions], exchanges: [exchange] });
  ctx.cleanup.add(`delete ${queue}`, remove);
  return { exchange, queue, remove };
}

/** Declares a topic exchange with one durable queue bound to everything, as converge's consumer would. */
export async function declareSink(ctx: BenchContext, exchange: string, queue: string): Promise<void> {
  const channel = await ctx.broker.createChannel();
  try {
    await channel.assertExchange(exchange, 'topic', { durable: true });
    await channel.assertQueue(queue, { durable: true });
    await channel.bindQueue(queue, exchange, '#');
  } finally {
    await channel.close().catch(() => undefined);
  }
}
