/**
 * `npm run bench [-- --quick] [--json] [--history] [--vacuum [--vacuum-events N]] [--rss | --rss-backlog N] [--reps K]`
 *
 * One run measures raw baselines, a naive pipeline and converge on the local PostgreSQL and
 * RabbitMQ, side by side, and prints a table (plus one JSON line last on stdout with --json).
 * Each value is the median over the repetitions; repetitions of comparable measurements are
 * interleaved so that background noise hits both sides of a ratio alike. A measurement that
 * fails or times out is reported with its reason and the run goes on; everything the run
 * created is removed at the end, also after a failure or Ctrl-C.
 */
import { rm } from 'node:fs/promises';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { migrate } from '../src/index.js';
import { quoteIdentifier } from '../src/runtime/identifier.js';
import {
  consumerApply,
  createReadTable,
  e2eLatency,
  e2eSustained,
  outboxBatch,
  outboxSingle,
  relayDrain,
  type Tuning,
} from './converge.js';
import { cdcRelayChoice, cdcRelayDrain, openCdc, withFreshSlot, type CdcBench } from './cdc.js';
import { compileWorkers, killAllWorkers } from './child.js';
import { assertLoopback, Cleanup, note, openBroker, openPool, runAbort, unique, type BenchContext } from './env.js';
import { createHistorySchema, HISTORY_CONSUMER } from './history.js';
import { deadTuples, withPinnedHorizon } from './vacuum.js';
import type { DrainCost, SustainedResult } from './measure.js';
import { createNaiveTables, naiveConsumerApply, naiveLatency, naiveSustained } from './naive.js';
import {
  rawConsume,
  rawPgBatchInsert,
  rawPgRoundTrip,
  rawPgSingleCommit,
  rawPublish,
  rawPublishSameShape,
} from './raw.js';
import { derivedFigures, evaluateTargets, jsonLine, renderTable, type Results } from './report.js';
import { median } from './stats.js';

const USAGE = `usage: npm run bench -- [--quick] [--json] [--history] [--vacuum] [--vacuum-events N]
                      [--rss] [--rss-backlog N] [--reps K]
                      [--only raw,outbox,relay,consumer,e2e,latency,history,vacuum,rss]
                      [--relay-options JSON] [--consumer-options JSON]`;

/** Bad flags end the run before anything is created, with the usage instead of a stack trace. */
function usageError(message: string): never {
  console.error(`${message}\n${USAGE}`);
  process.exit(2);
}

const { values: flags } = (() => {
  try {
    return parseArgs({
      options: {
        quick: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        history: { type: 'boolean', default: false },
        vacuum: { type: 'boolean', default: false },
        'vacuum-events': { type: 'string' },
        rss: { type: 'boolean', default: false },
        'rss-backlog': { type: 'string' },
        reps: { type: 'string' },
        only: { type: 'string' },
        'relay-options': { type: 'string' },
        'consumer-options': { type: 'string' },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    });
  } catch (err) {
    return usageError((err as Error).message);
  }
})();
if (flags.help) {
  console.log(USAGE);
  process.exit(0);
}

function positiveInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw.replace(/_/g, ''));
  if (!Number.isInteger(value) || value < 1) usageError(`--${name} must be a positive integer (got ${raw})`);
  return value;
}

function jsonObject(name: string, raw: string | undefined): Record<string, unknown> {
  if (raw === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    usageError(`--${name} is not valid JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    usageError(`--${name} must be a JSON object`);
  return value as Record<string, unknown>;
}

const quick = flags.quick;
/** Sizes and time bounds. The quick run stays under 90 s; the full one aims at 10 minutes. */
const plan = {
  mode: quick ? 'quick' : 'full',
  reps: positiveInt('reps', flags.reps, quick ? 1 : 3),
  rawMessages: quick ? 20_000 : 30_000,
  pgSingle: quick ? 1_000 : 5_000,
  pgBatch: quick ? 50_000 : 200_000,
  outboxSingle: quick ? 1_000 : 5_000,
  outboxBatch: quick ? 20_000 : 100_000,
  drainRows: quick ? 20_000 : 100_000,
  consumerEvents: quick ? 20_000 : 100_000,
  e2eEvents: quick ? 10_000 : 30_000,
  latencyMs: quick ? 4_000 : 10_000,
  historyRows: 5_000_000,
  // The aim is about 1M events with the horizon pinned (issue 29); a quick run drains a tenth.
  vacuumEvents:
    flags['vacuum-events'] !== undefined || flags.vacuum
      ? positiveInt('vacuum-events', flags['vacuum-events'], quick ? 100_000 : 1_000_000)
      : null,
  // The RSS target is about a 1M backlog; a quick run that asks for --rss gets a smaller one (and says the target does not apply).
  rssBacklog:
    flags['rss-backlog'] !== undefined || flags.rss
      ? positiveInt('rss-backlog', flags['rss-backlog'], quick ? 200_000 : 1_000_000)
      : null,
  /** Every measurement's own bound; a stage over it fails with how far it got. */
  timeoutMs: {
    raw: quick ? 20_000 : 60_000,
    pipeline: quick ? 30_000 : 120_000,
    latencyDrain: quick ? 15_000 : 30_000,
    history: 300_000,
  },
};

const GROUPS = ['raw', 'outbox', 'relay', 'consumer', 'e2e', 'latency', 'history', 'vacuum', 'rss'] as const;
const only = flags.only ? new Set(flags.only.split(',')) : null;
for (const group of only ?? [])
  if (!(GROUPS as readonly string[]).includes(group)) usageError(`--only: unknown group ${group}`);
const wanted = (group: (typeof GROUPS)[number]) => {
  if (group === 'history' && !flags.history) return false;
  if (group === 'vacuum' && plan.vacuumEvents === null) return false;
  if (group === 'rss' && plan.rssBacklog === null) return false;
  return only === null || only.has(group);
};

const tuning: Tuning = {
  relayBatchSize: 1000,
  // `concurrency` appeared in RelayOptions while this was written; the worker checks that the running src knows it.
  relayOptional: { concurrency: 4, ...jsonObject('relay-options', flags['relay-options']) },
  consumerPrefetch: 1000,
  // Likewise for consumer batching: used if ConsumerOptions has it, reported as unsupported otherwise.
  consumerOptional: { batchSize: 500, ...jsonObject('consumer-options', flags['consumer-options']) },
};

const samples: Record<string, number[]> = {};
const errors: Record<string, string> = {};
const workerOptions: Record<string, unknown> = {};

interface Measurement {
  /** The JSON key a failure is reported under. */
  key: string;
  run: () => Promise<Record<string, number>>;
}

/** Runs the measurements rep-major (A1 B1 A2 B2 …); one that fails is not repeated. */
async function repeat(reps: number, measurements: Measurement[]): Promise<void> {
  for (let rep = 1; rep <= reps; rep++) {
    for (const m of measurements) {
      if (errors[m.key] || runAbort.signal.aborted) continue;
      const started = performance.now();
      try {
        const values = await m.run();
        for (const [key, value] of Object.entries(values)) (samples[key] ??= []).push(value);
        const shown = Object.entries(values)
          .map(([k, v]) => `${k}=${v.toFixed(v < 100 ? 2 : 0)}`)
          .join(' ');
        note(`${m.key} rep ${rep}/${reps}: ${shown} (${((performance.now() - started) / 1000).toFixed(1)} s)`);
      } catch (err) {
        errors[m.key] = (err as Error).message;
        note(`${m.key} FAILED: ${(err as Error).message}`);
      }
    }
  }
}

/** CPU per event per party and statements per event in a drain's window. */
const costFigures = (key: string, cost: DrainCost): Record<string, number> => ({
  [`${key}_cpu_ms`]: cost.cpu.total,
  [`${key}_cpu_ms_node`]: cost.cpu.node,
  [`${key}_cpu_ms_postgres`]: cost.cpu.postgres,
  [`${key}_cpu_ms_rabbitmq`]: cost.cpu.rabbitmq,
  [`${key}_statements_per_1000_events`]: cost.statementsPerEvent * 1000,
  [`${key}_wal_bytes_per_event`]: cost.walBytesPerEvent,
});

/** A sustained rate and the CPU milliseconds per event each party spent in its window. */
const sustainedFigures = (key: string, r: SustainedResult): Record<string, number> => ({
  [key]: r.rate,
  [`${key}_cpu_ms`]: r.cpu.total,
  [`${key}_cpu_ms_node`]: r.cpu.node,
  [`${key}_cpu_ms_postgres`]: r.cpu.postgres,
  [`${key}_cpu_ms_rabbitmq`]: r.cpu.rabbitmq,
});

const resultOf = (key: string): number | null => {
  const value = median(samples[key] ?? []);
  return Number.isFinite(value) ? value : null;
};

/** The CDC relay's schema, slot and publication on the logical server, made once per run when first needed. */
let cdcBench: Promise<CdcBench> | undefined;
const cdc = (ctx: BenchContext) => (cdcBench ??= openCdc(ctx));

/**
 * The relay's drain and the consumer's apply of `events`, each run once without and once with the
 * horizon pinned for the whole run (bench/vacuum.ts), interleaved, and the dead tuples each left.
 */
async function measureVacuumPressure(ctx: BenchContext, events: number): Promise<void> {
  // A bound against a hang, not a speed assertion: 1M events at 1,000/s would be 1,000 s.
  const timeoutMs = Math.max(plan.timeoutMs.pipeline, events * 2);
  const measure = async (suffix: 'unpinned' | 'pinned') => {
    const relay = await relayDrain(ctx, {
      schema: ctx.schema,
      rows: events,
      relays: 1,
      truncate: true,
      timeoutMs,
      tuning,
      label: `relay_drain_${suffix}`,
    });
    const consumer = await consumerApply(ctx, {
      schema: ctx.schema,
      events,
      inboxConsumer: 'bench_vacuum',
      truncateInbox: true,
      timeoutMs,
      tuning,
      label: `consumer_apply_${suffix}`,
    });
    const dead = await deadTuples(ctx.pool, ctx.schema);
    return {
      [`relay_drain_${suffix}`]: relay.rate,
      [`consumer_apply_${suffix}`]: consumer.rate,
      [`outbox_dead_tuples_${suffix}`]: dead.outbox,
      [`inbox_dead_tuples_${suffix}`]: dead.inbox,
      [`projection_state_dead_tuples_${suffix}`]: dead.projectionState,
    };
  };
  await repeat(plan.reps, [
    { key: 'vacuum_unpinned', run: () => measure('unpinned') },
    { key: 'vacuum_pinned', run: () => withPinnedHorizon(ctx, () => measure('pinned')) },
  ]);
}

async function measureAll(ctx: BenchContext): Promise<void> {
  const t = plan.timeoutMs;
  if (wanted('raw')) {
    await repeat(plan.reps, [
      { key: 'raw_publish', run: async () => ({ raw_publish: await rawPublish(ctx, plan.rawMessages, t.raw) }) },
      { key: 'raw_consume', run: async () => ({ raw_consume: await rawConsume(ctx, plan.rawMessages, t.raw) }) },
    ]);
    await repeat(plan.reps, [
      {
        key: 'raw_pg_single_commit',
        run: async () => ({ raw_pg_single_commit: await rawPgSingleCommit(ctx, plan.pgSingle, t.raw) }),
      },
      {
        key: 'raw_pg_round_trip_us',
        run: async () => ({ raw_pg_round_trip_us: await rawPgRoundTrip(ctx, plan.pgSingle, t.raw) }),
      },
      {
        key: 'raw_pg_batch_insert',
        run: async () => ({ raw_pg_batch_insert: await rawPgBatchInsert(ctx, plan.pgBatch, t.raw) }),
      },
    ]);
  }
  if (wanted('outbox')) {
    await repeat(plan.reps, [
      { key: 'outbox_single', run: async () => ({ outbox_single: await outboxSingle(ctx, plan.outboxSingle, t.raw) }) },
      { key: 'outbox_batch', run: async () => ({ outbox_batch: await outboxBatch(ctx, plan.outboxBatch, t.raw) }) },
    ]);
  }
  if (wanted('relay')) {
    const drain = async (relays: number, claim?: 'exclusive') => {
      const r = await relayDrain(ctx, {
        schema: ctx.schema,
        rows: plan.drainRows,
        relays,
        truncate: true,
        timeoutMs: t.pipeline,
        tuning: claim ? { ...tuning, relayOptional: { ...tuning.relayOptional, claim } } : tuning,
        label: claim ? `relay_drain_${claim}` : relays === 1 ? 'relay_drain' : 'relay_drain_2relays',
      });
      if (claim) return r;
      workerOptions.relay = r.options;
      return r;
    };
    await repeat(plan.reps, [
      {
        key: 'raw_publish_same_shape',
        run: async () => ({
          raw_publish_same_shape: await rawPublishSameShape(ctx, plan.rawMessages, t.raw),
        }),
      },
      {
        key: 'relay_drain',
        run: async () => {
          const r = await drain(1);
          return {
            ...costFigures('relay_drain', r.cost),
            relay_drain: r.rate,
            relay_peak_rss_mb: r.peakRssMb,
            relay_baseline_rss_mb: r.baselineRssMb,
          };
        },
      },
      { key: 'relay_drain_2relays', run: async () => ({ relay_drain_2relays: (await drain(2)).rate }) },
      {
        key: 'relay_drain_exclusive',
        run: async () => {
          const r = await drain(1, 'exclusive');
          return { ...costFigures('relay_drain_exclusive', r.cost), relay_drain_exclusive: r.rate };
        },
      },
      {
        key: 'cdc_relay_drain',
        run: async () => {
          const r = await cdcRelayDrain(await cdc(ctx), plan.drainRows, t.pipeline);
          return { ...costFigures('cdc_relay_drain', r.cost), cdc_relay_drain: r.rate };
        },
      },
    ]);
  }
  if (wanted('consumer')) {
    await repeat(plan.reps, [
      {
        key: 'naive_consumer_apply',
        run: async () => {
          const r = await naiveConsumerApply(ctx, plan.consumerEvents, t.pipeline);
          return { ...costFigures('naive_consumer_apply', r.cost), naive_consumer_apply: r.rate };
        },
      },
      {
        key: 'consumer_apply',
        run: async () => {
          const r = await consumerApply(ctx, {
            schema: ctx.schema,
            events: plan.consumerEvents,
            inboxConsumer: 'bench_apply',
            truncateInbox: true,
            timeoutMs: t.pipeline,
            tuning,
            label: 'consumer_apply',
          });
          workerOptions.consumer = r.options;
          return {
            ...costFigures('consumer_apply', r.cost),
            consumer_apply: r.rate,
            consumer_peak_rss_mb: r.peakRssMb,
          };
        },
      },
    ]);
  }
  if (wanted('e2e')) {
    await repeat(plan.reps, [
      {
        key: 'naive_pipeline',
        run: async () => sustainedFigures('naive_pipeline', await naiveSustained(ctx, plan.e2eEvents, t.pipeline)),
      },
      {
        key: 'e2e_sustained',
        run: async () => sustainedFigures('e2e_sustained', await e2eSustained(ctx, plan.e2eEvents, t.pipeline, tuning)),
      },
      {
        key: 'cdc_e2e_sustained',
        run: async () => {
          const label = 'cdc_e2e_sustained';
          const r = await withFreshSlot(await cdc(ctx), (bench) =>
            e2eSustained(bench.ctx, plan.e2eEvents, t.pipeline, tuning, label, cdcRelayChoice(bench)),
          );
          return sustainedFigures(label, r);
        },
      },
    ]);
  }
  if (wanted('latency')) {
    await repeat(plan.reps, [
      {
        key: 'e2e_latency_1000_p50_ms',
        run: async () => {
          const l = await e2eLatency(ctx, 1000, plan.latencyMs, t.latencyDrain, tuning, 'e2e_latency_1000');
          return {
            e2e_latency_1000_p50_ms: l.p50,
            e2e_latency_1000_p99_ms: l.p99,
            e2e_latency_1000_max_ms: l.max,
            e2e_latency_1000_applied_rate: l.applied,
            e2e_latency_1000_to_confirm_p50_ms: l.stages.toConfirm.p50,
            e2e_latency_1000_to_confirm_p99_ms: l.stages.toConfirm.p99,
            e2e_latency_1000_to_handler_p50_ms: l.stages.confirmToHandler.p50,
            e2e_latency_1000_to_handler_p99_ms: l.stages.confirmToHandler.p99,
            e2e_latency_1000_to_commit_p50_ms: l.stages.handlerToCommit.p50,
            e2e_latency_1000_to_commit_p99_ms: l.stages.handlerToCommit.p99,
          };
        },
      },
      {
        key: 'naive_latency_1000_p50_ms',
        run: async () => {
          const l = await naiveLatency(ctx, 1000, plan.latencyMs, t.latencyDrain);
          return { naive_latency_1000_p50_ms: l.p50, naive_latency_1000_p99_ms: l.p99 };
        },
      },
      {
        key: 'cdc_latency_1000_p50_ms',
        run: async () => {
          const l = await withFreshSlot(await cdc(ctx), (bench) =>
            e2eLatency(
              bench.ctx,
              1000,
              plan.latencyMs,
              t.latencyDrain,
              tuning,
              'cdc_latency_1000',
              cdcRelayChoice(bench),
            ),
          );
          return {
            cdc_latency_1000_p50_ms: l.p50,
            cdc_latency_1000_p99_ms: l.p99,
            cdc_latency_1000_applied_rate: l.applied,
          };
        },
      },
    ]);
    const sustained = resultOf('e2e_sustained');
    if (sustained === null)
      errors.e2e_latency_half_p50_ms = 'needs e2e_sustained, which was not measured (include the e2e group)';
    else {
      const half = Math.max(1, Math.round(sustained / 2));
      await repeat(plan.reps, [
        {
          key: 'e2e_latency_half_p50_ms',
          run: async () => {
            const l = await e2eLatency(ctx, half, plan.latencyMs, t.latencyDrain, tuning, 'e2e_latency_half');
            return {
              e2e_latency_half_rate: half,
              e2e_latency_half_p50_ms: l.p50,
              e2e_latency_half_p99_ms: l.p99,
              e2e_latency_half_max_ms: l.max,
              e2e_latency_half_applied_rate: l.applied,
            };
          },
        },
      ]);
    }
  }
  if (wanted('history')) {
    let schema: string | undefined;
    try {
      schema = await createHistorySchema(ctx, plan.historyRows, t.history);
    } catch (err) {
      errors.relay_history_ratio = `history seed failed: ${(err as Error).message}`;
    }
    if (schema) {
      const histSchema = schema;
      await repeat(plan.reps, [
        {
          key: 'relay_drain_history',
          run: async () => ({
            relay_drain_history: (
              await relayDrain(ctx, {
                schema: histSchema,
                rows: plan.drainRows,
                relays: 1,
                truncate: false,
                timeoutMs: t.pipeline,
                tuning,
                label: 'relay_drain_history',
              })
            ).rate,
          }),
        },
        {
          key: 'consumer_apply_history',
          run: async () => ({
            consumer_apply_history: (
              await consumerApply(ctx, {
                schema: histSchema,
                events: plan.consumerEvents,
                inboxConsumer: HISTORY_CONSUMER,
                truncateInbox: false,
                timeoutMs: t.pipeline,
                tuning,
                label: 'consumer_apply_history',
              })
            ).rate,
          }),
        },
      ]);
    }
  }
  if (wanted('vacuum') && plan.vacuumEvents !== null) await measureVacuumPressure(ctx, plan.vacuumEvents);
  if (wanted('rss') && plan.rssBacklog !== null) {
    const rows = plan.rssBacklog;
    // Generous: this stage exists to watch memory, not speed; it still ends with a message instead of hanging.
    const timeoutMs = Math.max(300_000, rows * 2);
    // One repetition whatever --reps says: a 1M drain takes minutes and peak RSS is not a noisy figure.
    const compiledIn = await compileWorkers();
    ctx.cleanup.add('remove the compiled workers', () => rm(compiledIn, { recursive: true, force: true }));
    await repeat(1, [
      {
        key: 'relay_backlog_peak_rss_mb',
        run: async () => {
          const r = await relayDrain(ctx, {
            schema: ctx.schema,
            rows,
            relays: 1,
            truncate: true,
            timeoutMs,
            // The target is about default options: no batch size or concurrency of the bench's choosing.
            tuning: { ...tuning, relayBatchSize: undefined, relayOptional: {} },
            label: 'relay_backlog',
            compiledIn,
          });
          workerOptions.relay_backlog = r.options;
          return {
            relay_backlog_rows: rows,
            relay_backlog_drain: r.rate,
            relay_backlog_peak_rss_mb: r.peakRssMb,
            relay_backlog_baseline_rss_mb: r.baselineRssMb,
          };
        },
      },
    ]);
  }
}

function results(): Results {
  const r: Results = {};
  for (const key of Object.keys(samples)) r[key] = resultOf(key);
  return { ...r, ...derivedFigures(r, samples) };
}

async function main(): Promise<number> {
  const started = performance.now();
  const cleanup = new Cleanup();
  // `on`, not `once`: tsx relays a signal a second time if the first was not acknowledged quickly,
  // and with no listener left its preflight would exit on the spot, skipping the cleanup.
  const onSignal = (signal: NodeJS.Signals) => {
    if (runAbort.signal.aborted) return;
    note(`${signal}: stopping workers, then cleaning up`);
    runAbort.abort();
    killAllWorkers();
    // The stage in flight fails at once (its workers are gone) and the normal cleanup below runs;
    // should it hang anyway, clean up from here and leave.
    setTimeout(() => void cleanup.runAll().finally(() => process.exit(130)), 20_000).unref();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  note(`mode ${plan.mode}, ${plan.reps} rep(s), ${cpus().length} cores`);
  assertLoopback();
  const pool = await openPool(6);
  cleanup.add('close pool', () => pool.end());
  const broker = await openBroker();
  cleanup.add('close broker connection', () => broker.close());
  const schema = unique('bench');
  const ctx: BenchContext = { pool, broker, schema, cleanup };
  cleanup.add(`drop schema ${schema}`, () => pool.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`));
  try {
    await migrate(pool, { schema });
    await createReadTable(pool, schema);
    await createNaiveTables(ctx);
    await measureAll(ctx);
  } catch (err) {
    errors.run = (err as Error).message;
  } finally {
    const failures = await cleanup.runAll();
    if (failures.length > 0) errors.cleanup = failures.join('; ');
  }
  if (runAbort.signal.aborted) {
    note('interrupted: cleaned up, no report');
    return 130;
  }
  const r = results();
  const targets = evaluateTargets(r, errors);
  const seconds = (performance.now() - started) / 1000;
  const meta = {
    mode: plan.mode,
    reps: plan.reps,
    sizes: {
      raw: plan.rawMessages,
      drain: plan.drainRows,
      consumer: plan.consumerEvents,
      e2e: plan.e2eEvents,
      latency_s: plan.latencyMs / 1000,
      history: flags.history ? plan.historyRows : null,
      vacuumEvents: plan.vacuumEvents,
      rss_backlog: plan.rssBacklog,
    },
    relay_options: workerOptions.relay ?? null,
    consumer_options: workerOptions.consumer ?? null,
    relay_backlog_options: workerOptions.relay_backlog ?? null,
    cores: cpus().length,
    node: process.version,
    duration_s: Math.round(seconds),
  };
  console.log(`converge bench (${plan.mode}, median of ${plan.reps}, ${cpus().length} cores, ${seconds.toFixed(0)} s)`);
  console.log(
    `  relay options: ${JSON.stringify(meta.relay_options)}   consumer options: ${JSON.stringify(meta.consumer_options)}`,
  );
  console.log(renderTable(r, targets, errors));
  if (flags.json) console.log(jsonLine(r, targets, errors, meta));
  return Object.keys(errors).length > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    console.error(`bench failed: ${err.message}`);
    process.exit(1);
  },
);
