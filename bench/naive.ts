/**
 * The naive pipeline (see workers/naive-*.ts): its own outbox table with a `published` flag,
 * a claim → publish → flag relay and a batching consumer without inbox or version checks.
 * Tables live in the run's schema; one partial index makes the claim an index scan, because a
 * naive design that rescans its whole history per claim would be a straw man.
 */
import { Worker } from './child.js';
import { appliedInReadModelCheck, prefill, READ_TABLE, settle } from './converge.js';
import { brokerNames, checkpoint, declareSink, type BenchContext } from './env.js';
import {
  drain,
  eventAt,
  latencyOf,
  pacedRun,
  startConsumerThenRelay,
  sustainedRate,
  withPipeline,
  type DrainCost,
  type Pipeline,
  type SustainedResult,
} from './measure.js';
import { rate, type LatencySummary } from './stats.js';

export async function createNaiveTables(ctx: BenchContext): Promise<void> {
  const s = `"${ctx.schema}"`;
  // occurred_at is not in the textbook table; it is the same transaction now() converge stamps, for the latency reference.
  await ctx.pool.query(`CREATE TABLE ${s}.naive_outbox (
    id bigserial PRIMARY KEY, aggregate_id text NOT NULL, version bigint NOT NULL, payload jsonb NOT NULL,
    published boolean NOT NULL DEFAULT false, occurred_at timestamptz NOT NULL DEFAULT now())`);
  await ctx.pool.query(`CREATE INDEX naive_outbox_unpublished ON ${s}.naive_outbox (id) WHERE NOT published`);
  await ctx.pool.query(
    `CREATE TABLE ${s}.naive_projection (id text PRIMARY KEY, amount bigint NOT NULL, version bigint NOT NULL)`,
  );
}

interface Options {
  latency: boolean;
  ttlMs: number;
  target: number;
}

function openNaive(ctx: BenchContext, names: { exchange: string; queue: string }, options: Options) {
  return async (group: Pipeline['group']): Promise<Omit<Pipeline, 'group'>> => {
    const s = `"${ctx.schema}"`;
    await ctx.pool.query(`TRUNCATE ${s}.naive_outbox, ${s}.naive_projection`);
    await checkpoint(ctx.pool);
    await declareSink(ctx, names.exchange, names.queue);
    const base = { schema: ctx.schema, target: options.target, ttlMs: options.ttlMs };
    const [consumer, relay] = await Promise.all([
      Worker.spawn('naive-consumer', {
        ...base,
        queue: names.queue,
        prefetch: 1000,
        batch: 500,
        lingerMs: 10,
        latency: options.latency,
      }),
      Worker.spawn('naive-relay', { ...base, exchange: names.exchange, batch: 1000, idleMs: 10 }),
    ]);
    await startConsumerThenRelay(group, consumer, relay);
    return {
      consumer,
      async insert(client, from, to) {
        const events = Array.from({ length: to - from }, (_, k) => eventAt(from + k));
        await client.query(
          `INSERT INTO ${s}.naive_outbox (aggregate_id, version, payload) SELECT * FROM unnest($1::text[], $2::bigint[], $3::jsonb[])`,
          [events.map((e) => e.aggregateId), events.map((e) => e.version), events.map(() => '{"delta":1}')],
        );
      },
      async applied() {
        const { rows } = await ctx.pool.query<{ applied: string }>(
          `SELECT coalesce(sum(version), 0) AS applied FROM ${s}.naive_projection`,
        );
        return Number(rows[0]!.applied);
      },
    };
  };
}

/** naive_pipeline: N events in transactions of 100, rate = N / (first insert → last projection commit). */
export async function naiveSustained(ctx: BenchContext, total: number, timeoutMs: number): Promise<SustainedResult> {
  const names = brokerNames(ctx, 'naive');
  try {
    const { value } = await withPipeline(
      'naive_pipeline',
      openNaive(ctx, names, { latency: false, ttlMs: timeoutMs + 60_000, target: total }),
      (pipeline) => sustainedRate(ctx.pool, pipeline, total, timeoutMs, 'naive_pipeline'),
    );
    return value;
  } finally {
    await names.remove();
  }
}

export async function naiveLatency(
  ctx: BenchContext,
  perSecond: number,
  durationMs: number,
  timeoutMs: number,
): Promise<LatencySummary> {
  const names = brokerNames(ctx, 'naivelat');
  try {
    const target = Math.round((perSecond * durationMs) / 1000);
    const { value, results } = await withPipeline(
      'naive latency',
      openNaive(ctx, names, { latency: true, ttlMs: durationMs + timeoutMs + 60_000, target }),
      (pipeline) => pacedRun(ctx.pool, pipeline, perSecond, durationMs, timeoutMs, `naive latency at ${perSecond}/s`),
    );
    return latencyOf(results, value.total, 'naive latency');
  } finally {
    await names.remove();
  }
}

/**
 * naive_consumer_apply: the queue converge's consumer_apply gets (same envelopes, same count),
 * drained by the naive consumer into the same read-model table with the same upsert, but no
 * inbox, no version check and no projection state: the baseline for consumer_apply.
 */
export async function naiveConsumerApply(
  ctx: BenchContext,
  events: number,
  timeoutMs: number,
): Promise<{ rate: number; cost: DrainCost }> {
  const s = `"${ctx.schema}"`;
  await ctx.pool.query(`TRUNCATE ${s}.${READ_TABLE}`);
  await settle(ctx.pool, [`${s}.${READ_TABLE}`]);
  const { elapsedMs, cost } = await drain(ctx, 'naive_consumer_apply', {
    prefix: 'naiveapply',
    fill: ({ exchange }) => prefill(ctx, exchange, events, timeoutMs),
    spawn: async ({ queue }) => [
      await Worker.spawn('naive-consumer', {
        schema: ctx.schema,
        table: READ_TABLE,
        shape: 'envelope',
        queue,
        prefetch: 1000,
        batch: 500,
        lingerMs: 10,
        latency: false,
        target: events,
        ttlMs: timeoutMs + 120_000,
      }),
    ],
    target: events,
    timeoutMs,
    check: appliedInReadModelCheck(ctx.pool, ctx.schema, events),
  });
  return { rate: rate(events, elapsedMs), cost };
}
