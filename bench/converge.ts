/**
 * converge through its public API only: outbox appends in this process, relay and consumer
 * in worker processes (workers/relay.ts, workers/consumer.ts).
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { appendManyToOutbox, appendToOutbox, type NewEvent } from '../src/index.js';
import { DEFAULT_ROUTING_KEY, encodeMessage, routingKeyFromTemplate } from '../src/internal/index.js';
import { quoteIdentifier } from '../src/runtime/identifier.js';
import { Worker, type WorkerResult } from './child.js';
import { brokerNames, checkpoint, DATABASE_URL, TimeoutError, type BenchContext } from './env.js';
import {
  AGGREGATES,
  drain,
  eventAt,
  latencyOf,
  pacedRun,
  startConsumerThenRelay,
  sustainedRate,
  withPipeline,
  type DoneCheck,
  type DrainCost,
  type Pipeline,
  type SustainedResult,
} from './measure.js';
import { benchEnvelope, publishWindowed } from './raw.js';
import { rate, summarizeLatency, type LatencySummary } from './stats.js';

/** Options the benchmark passes; `optional` ones are used only if the running src knows them. */
export interface Tuning {
  /** undefined: the relay's default (the memory stage measures default options). */
  relayBatchSize: number | undefined;
  relayOptional: Record<string, unknown>;
  consumerPrefetch: number;
  consumerOptional: Record<string, unknown>;
}

export const READ_TABLE = 'bench_read';
export const PROJECTION = 'bench_read';

/** The read model the consumer handler writes next to converge's projection_state. */
export async function createReadTable(pool: pg.Pool, schema: string): Promise<void> {
  await pool.query(
    `CREATE TABLE ${quoteIdentifier(schema)}.${READ_TABLE} (id text PRIMARY KEY, amount bigint NOT NULL, version bigint NOT NULL)`,
  );
}

function newEvent(i: number): NewEvent {
  const { aggregateId, version } = eventAt(i);
  return {
    aggregateType: 'order',
    aggregateId,
    aggregateVersion: version,
    eventType: 'AmountAdded',
    payload: { delta: 1 },
  };
}

export async function appliedInReadModel(pool: pg.Pool, schema: string): Promise<number> {
  const { rows } = await pool.query<{ applied: string }>(
    `SELECT coalesce(sum(version), 0) AS applied FROM ${quoteIdentifier(schema)}.${READ_TABLE}`,
  );
  return Number(rows[0]!.applied);
}

/** appendToOutbox, one event per transaction on one connection. */
export async function outboxSingle(ctx: BenchContext, count: number, timeoutMs: number): Promise<number> {
  await ctx.pool.query(`TRUNCATE ${quoteIdentifier(ctx.schema)}.outbox`);
  const client = await ctx.pool.connect();
  try {
    const deadline = performance.now() + timeoutMs;
    const started = performance.now();
    for (let i = 0; i < count; i++) {
      await client.query('BEGIN');
      await appendToOutbox(client, newEvent(i), { schema: ctx.schema });
      await client.query('COMMIT');
      if (performance.now() > deadline)
        throw new TimeoutError(`outbox_single: only ${i + 1}/${count} events in ${timeoutMs / 1000} s`);
    }
    return rate(count, performance.now() - started);
  } finally {
    client.release();
  }
}

/** appendManyToOutbox, 500 events per transaction. */
export async function outboxBatch(ctx: BenchContext, count: number, timeoutMs: number): Promise<number> {
  await ctx.pool.query(`TRUNCATE ${quoteIdentifier(ctx.schema)}.outbox`);
  const client = await ctx.pool.connect();
  try {
    const deadline = performance.now() + timeoutMs;
    const started = performance.now();
    for (let from = 0; from < count; from += 500) {
      const events = Array.from({ length: Math.min(500, count - from) }, (_, k) => newEvent(from + k));
      await client.query('BEGIN');
      await appendManyToOutbox(client, events, { schema: ctx.schema });
      await client.query('COMMIT');
      if (performance.now() > deadline)
        throw new TimeoutError(`outbox_batch: only ${from + events.length}/${count} events in ${timeoutMs / 1000} s`);
    }
    return rate(count, performance.now() - started);
  } finally {
    client.release();
  }
}

/**
 * Seeds `rows` pending events in SQL, round-robin over AGGREGATES aggregates (versions 1..k
 * each, in position order), under an aggregate-id prefix of their own so a schema with
 * history (or earlier repetitions) never collides.
 */
export async function seedBacklog(pool: pg.Pool, schema: string, rows: number): Promise<void> {
  const prefix = `d${randomBytes(3).toString('hex')}_`;
  await pool.query(
    `INSERT INTO ${quoteIdentifier(schema)}.outbox (event_id, aggregate_type, aggregate_id, aggregate_version, event_type, payload)
     SELECT gen_random_uuid()::text, 'order', $3 || (i % $2), i / $2 + 1, 'AmountAdded', '{"delta":1}'::jsonb
       FROM generate_series(0, $1::bigint - 1) AS i`,
    [rows, AGGREGATES, prefix],
  );
}

/** Same statistics and visibility map before every drain, with or without history, and no checkpoint debt from the seeding. */
export async function settle(pool: pg.Pool, tables: string[]): Promise<void> {
  for (const table of tables) await pool.query(`VACUUM (ANALYZE) ${table}`);
  await checkpoint(pool);
}

export interface ChildMeasurement {
  rate: number;
  cost: DrainCost;
  peakRssMb: number;
  /** RSS once imports and setup are done, before any work: the floor the peak is to be read against. */
  baselineRssMb: number;
  options: unknown;
}

/**
 * Seeds a backlog, starts `relays` relay processes at once and times until no row is left
 * unpublished. The sink queue is bound to everything, so every publish is routable.
 */
export async function relayDrain(
  ctx: BenchContext,
  options: {
    schema: string;
    rows: number;
    relays: number;
    truncate: boolean;
    timeoutMs: number;
    tuning: Tuning;
    label: string;
    /** Run the relay from compiled JavaScript in this directory (compileWorkers) instead of under tsx. */
    compiledIn?: string;
  },
): Promise<ChildMeasurement> {
  const outbox = `${quoteIdentifier(options.schema)}.outbox`;
  if (options.truncate) await ctx.pool.query(`TRUNCATE ${outbox}`);
  await seedBacklog(ctx.pool, options.schema, options.rows);
  await settle(ctx.pool, [outbox]);
  const { elapsedMs, cost, workers, results } = await drain(ctx, options.label, {
    prefix: 'drain',
    spawn: ({ exchange }) => {
      const config = {
        schema: options.schema,
        exchange,
        batchSize: options.tuning.relayBatchSize,
        optional: options.tuning.relayOptional,
        target: options.rows,
        ttlMs: options.timeoutMs + 120_000,
      };
      const spawnRelay = () => Worker.spawn('relay', config, undefined, options.compiledIn);
      return Promise.all(Array.from({ length: options.relays }, spawnRelay));
    },
    target: options.rows,
    timeoutMs: options.timeoutMs,
    check: noPendingRows(ctx.pool, outbox),
    describe: async () => {
      const { rows } = await ctx.pool.query<{ status: string; n: string }>(
        `SELECT status, count(*) AS n FROM ${outbox} GROUP BY status ORDER BY status`,
      );
      return rows.map((r) => `${r.status}=${r.n}`).join(' ');
    },
  });
  const failed = await ctx.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${outbox} WHERE status = 'failed'`);
  const failedCount = Number(failed.rows[0]?.n ?? 0);
  if (failedCount > 0) throw new Error(`${options.label}: ${failedCount} events ended as failed instead of published`);
  return {
    rate: rate(options.rows, elapsedMs),
    cost,
    peakRssMb: Math.max(...results.map((r) => r.maxRssMb)),
    baselineRssMb: Number(workers[0]!.info.rssMb),
    options: workers[0]!.info.options,
  };
}

/**
 * Done once no outbox row is pending. Shaped to match the partial index on pending positions: an
 * EXISTS over `status <> 'published'` may be planned as a sequential scan, which on a 5M-row
 * history table would load the machine 10× a second during the very measurement.
 */
export function noPendingRows(pool: pg.Pool, outbox: string): () => Promise<DoneCheck> {
  return async () => {
    const { rows } = await pool.query(
      `SELECT position FROM ${outbox} WHERE status = 'pending' ORDER BY position LIMIT 1`,
    );
    return { done: rows.length === 0, status: 'rows still pending' };
  };
}

/** Done once the read model holds `total` applied versions. */
export function appliedInReadModelCheck(pool: pg.Pool, schema: string, total: number): () => Promise<DoneCheck> {
  return async () => {
    const applied = await appliedInReadModel(pool, schema);
    return { done: applied >= total, status: `${applied}/${total} applied` };
  };
}

/** N incremental envelopes through the wire format, versions in order per aggregate. */
export async function prefill(ctx: BenchContext, exchange: string, count: number, timeoutMs: number): Promise<void> {
  const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);
  const occurredAt = new Date().toISOString();
  const channel = await ctx.broker.createConfirmChannel();
  try {
    const work = publishWindowed(channel, count, (i) => {
      const message = encodeMessage(benchEnvelope(i, occurredAt), routingKey);
      return { exchange, routingKey: message.routingKey, content: message.content, options: message.options };
    });
    await Promise.race([
      work,
      new Promise((_, reject) =>
        setTimeout(() => reject(new TimeoutError('pre-filling the queue (RabbitMQ) timed out')), timeoutMs).unref(),
      ),
    ]);
  } finally {
    await channel.close().catch(() => undefined);
  }
}

/**
 * Pre-fills a queue, then starts one consumer process on it and times until every event is
 * committed in the read model. `inboxConsumer` is the inbox scope: a history run uses the
 * scope its seeded inbox rows belong to; otherwise the inbox is emptied first.
 */
export async function consumerApply(
  ctx: BenchContext,
  options: {
    schema: string;
    events: number;
    inboxConsumer: string;
    truncateInbox: boolean;
    timeoutMs: number;
    tuning: Tuning;
    label: string;
  },
): Promise<ChildMeasurement> {
  const s = quoteIdentifier(options.schema);
  await ctx.pool.query(`TRUNCATE ${s}.${READ_TABLE}`);
  await ctx.pool.query(`DELETE FROM ${s}.projection_state WHERE projection = $1`, [PROJECTION]);
  if (options.truncateInbox) await ctx.pool.query(`TRUNCATE ${s}.inbox`);
  await settle(ctx.pool, [`${s}.inbox`, `${s}.projection_state`]);
  const { elapsedMs, cost, workers, results } = await drain(ctx, options.label, {
    prefix: 'apply',
    fill: ({ exchange }) => prefill(ctx, exchange, options.events, options.timeoutMs),
    spawn: async (names) => [
      await Worker.spawn(
        'consumer',
        consumerConfig(
          options.schema,
          names,
          options.inboxConsumer,
          options.tuning,
          false,
          options.events,
          options.timeoutMs,
        ),
      ),
    ],
    target: options.events,
    timeoutMs: options.timeoutMs,
    check: appliedInReadModelCheck(ctx.pool, options.schema, options.events),
  });
  return {
    rate: rate(options.events, elapsedMs),
    cost,
    peakRssMb: results[0]!.maxRssMb,
    baselineRssMb: Number(workers[0]!.info.rssMb),
    options: workers[0]!.info.options,
  };
}

function consumerConfig(
  schema: string,
  names: { exchange: string; queue: string },
  inboxConsumer: string,
  tuning: Tuning,
  latency: boolean,
  target: number,
  timeoutMs: number,
) {
  return {
    schema,
    queue: names.queue,
    exchange: names.exchange,
    consumer: inboxConsumer,
    projection: PROJECTION,
    readTable: READ_TABLE,
    prefetch: tuning.consumerPrefetch,
    optional: tuning.consumerOptional,
    latency,
    target,
    ttlMs: timeoutMs + 120_000,
  };
}

/** Which relay process a pipeline runs: the polling relay unless told otherwise (bench/cdc.ts). */
export interface RelayChoice {
  worker: 'relay' | 'cdc-relay';
  config: (exchange: string, ttlMs: number) => Record<string, unknown>;
}

function pollingRelay(tuning: Tuning, latency: boolean, schema: string): RelayChoice {
  return {
    worker: 'relay',
    config: (exchange, ttlMs) => ({
      schema,
      exchange,
      batchSize: tuning.relayBatchSize,
      optional: tuning.relayOptional,
      latency,
      ttlMs,
    }),
  };
}

/** Relay and consumer processes on empty tables; the producer runs in this process. */
function openConverge(
  ctx: BenchContext,
  names: { exchange: string; queue: string },
  tuning: Tuning,
  latency: boolean,
  target: number,
  timeoutMs: number,
  relay: RelayChoice = pollingRelay(tuning, latency, ctx.schema),
) {
  return async (group: Pipeline['group']): Promise<Omit<Pipeline, 'group'>> => {
    const s = quoteIdentifier(ctx.schema);
    await ctx.pool.query(`TRUNCATE ${s}.outbox, ${s}.inbox, ${s}.projection_state, ${s}.${READ_TABLE}`);
    await checkpoint(ctx.pool);
    const databaseUrl = { databaseUrl: ctx.databaseUrl ?? DATABASE_URL };
    const [consumer, relayWorker] = await Promise.all([
      Worker.spawn('consumer', {
        ...consumerConfig(ctx.schema, names, 'bench_e2e', tuning, latency, target, timeoutMs),
        ...databaseUrl,
      }),
      Worker.spawn(relay.worker, { ...relay.config(names.exchange, timeoutMs + 120_000), target, ...databaseUrl }),
    ]);
    await startConsumerThenRelay(group, consumer, relayWorker);
    return {
      consumer,
      insert: async (client, from, to) => {
        await appendManyToOutbox(
          client,
          Array.from({ length: to - from }, (_, k) => newEvent(from + k)),
          { schema: ctx.schema },
        );
      },
      applied: () => appliedInReadModel(ctx.pool, ctx.schema),
    };
  };
}

export async function e2eSustained(
  ctx: BenchContext,
  total: number,
  timeoutMs: number,
  tuning: Tuning,
  label = 'e2e_sustained',
  relay?: RelayChoice,
): Promise<SustainedResult> {
  const names = brokerNames(ctx, 'e2e');
  try {
    const { value } = await withPipeline(
      label,
      openConverge(ctx, names, tuning, false, total, timeoutMs, relay),
      (pipeline) => sustainedRate(ctx.pool, pipeline, total, timeoutMs, label),
    );
    return value;
  } finally {
    await names.remove();
  }
}

export async function e2eLatency(
  ctx: BenchContext,
  perSecond: number,
  durationMs: number,
  timeoutMs: number,
  tuning: Tuning,
  label: string,
  relay?: RelayChoice,
): Promise<LatencySummary & { offered: number; applied: number; stages: StageBreakdown }> {
  const names = brokerNames(ctx, 'e2elat');
  try {
    const target = Math.round((perSecond * durationMs) / 1000);
    const { value, results } = await withPipeline(
      label,
      openConverge(ctx, names, tuning, true, target, durationMs + timeoutMs, relay),
      (pipeline) => pacedRun(ctx.pool, pipeline, perSecond, durationMs, timeoutMs, label),
    );
    return {
      ...latencyOf(results, value.total, label),
      offered: value.offered,
      applied: value.applied,
      stages: stageBreakdown(results),
    };
  } finally {
    await names.remove();
  }
}

/** p50/p99 (ms) of each stage an event goes through, from the relay's confirm hook and the consumer's handler. */
export interface StageBreakdown {
  /** occurredAt (producer transaction start) → broker confirm: producer commit, NOTIFY, claim, publish, confirm. */
  toConfirm: LatencySummary;
  /** broker confirm → consumer handler start: delivery, batching, BEGIN and the inbox insert (negative when delivered before the confirm). */
  confirmToHandler: LatencySummary;
  /** handler start → commit and ack. */
  handlerToCommit: LatencySummary;
}

function stageBreakdown(results: WorkerResult[]): StageBreakdown {
  const confirmed = new Map(
    results.flatMap((r) => (Array.isArray(r.data.confirmedAt) ? (r.data.confirmedAt as [string, number][]) : [])),
  );
  const toConfirm: number[] = [];
  const confirmToHandler: number[] = [];
  const handlerToCommit: number[] = [];
  for (const result of results) {
    for (const [eventId, occurred, handler, committed] of (result.data.stages ?? []) as [
      string,
      number,
      number,
      number,
    ][]) {
      handlerToCommit.push(committed - handler);
      const confirm = confirmed.get(eventId);
      if (confirm === undefined) continue;
      toConfirm.push(confirm - occurred);
      confirmToHandler.push(handler - confirm);
    }
  }
  return {
    toConfirm: summarizeLatency(toConfirm),
    confirmToHandler: summarizeLatency(confirmToHandler),
    handlerToCommit: summarizeLatency(handlerToCommit),
  };
}
