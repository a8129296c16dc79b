/**
 * Measurement machinery shared by the naive pipeline and converge, so both are timed the
 * same way: same events, same producer, same "done" condition (read from the database,
 * i.e. committed), same clock.
 */
import { cpuPerEvent, postmasterPid, readCpu } from './cpu.js';
import type pg from 'pg';
import { brokerNames, declareSink, note, sleep, TimeoutError, withTimeout, type BenchContext } from './env.js';
import { WorkerGroup, type Worker, type WorkerResult } from './child.js';
import { summarizeLatency, type LatencySummary } from './stats.js';

/** Aggregates events are spread over, round-robin, so each one's versions 1..k lie ~10k positions apart. */
export const AGGREGATES = 10_000;

export function eventAt(i: number): { aggregateId: string; version: number } {
  return { aggregateId: `a${i % AGGREGATES}`, version: Math.floor(i / AGGREGATES) + 1 };
}

export interface DoneCheck {
  done: boolean;
  /** How far it got, for the timeout message. */
  status: string;
}

/**
 * Polls `check` (a database query, so only committed work counts) until it reports done and
 * returns the time it did. Workers report progress over IPC; once they claim the target the
 * poll tightens to a few ms, which keeps the end time precise without a tight poll loading
 * the two cores for the whole run. Fails at once if a worker dies, and after `timeoutMs`
 * with how far it got.
 */
export async function waitUntil(
  label: string,
  options: {
    timeoutMs: number;
    check: () => Promise<DoneCheck>;
    group: WorkerGroup;
    /** Workers whose summed progress is compared with `target` (default: all of the group). */
    counting?: Worker[];
    target: number;
    pollMs?: number;
    describe?: () => Promise<string>;
  },
): Promise<number> {
  const { group, target } = options;
  const counting = options.counting ?? group.workers;
  const progress = () => counting.reduce((sum, w) => sum + w.progress, 0);
  const pollMs = options.pollMs ?? 100;
  const started = performance.now();
  let wake: () => void = () => undefined;
  const onProgress = () => progress() >= target && wake();
  for (const worker of counting) worker.on('progress', onProgress);
  try {
    for (;;) {
      const result = await Promise.race([
        withTimeout(options.check(), 30_000, `${label}: progress query`),
        group.failure,
      ]);
      if (result.done) return performance.now();
      const left = started + options.timeoutMs - performance.now();
      if (left <= 0) {
        const detail = options.describe ? await options.describe().catch((err: Error) => err.message) : result.status;
        throw new TimeoutError(
          `${label}: not done after ${(options.timeoutMs / 1000).toFixed(0)} s (${detail}; workers reported ${progress()}/${target})${group.lastErrors()}`,
        );
      }
      const interval = progress() >= target ? 5 : progress() >= target * 0.95 ? 10 : pollMs;
      await Promise.race([
        sleep(Math.min(interval, left)),
        new Promise<void>((resolve) => (wake = resolve)),
        group.failure,
      ]);
    }
  } finally {
    for (const worker of counting) worker.off('progress', onProgress);
  }
}

/** The exchange and sink queue of one drain (brokerNames). */
export interface SinkNames {
  exchange: string;
  queue: string;
}

/** What one event cost in a drain window: CPU per party, and the workers' statements to PostgreSQL. */
export interface DrainCost {
  cpu: ReturnType<typeof cpuPerEvent>;
  /** Statements (= round trips) the drain's workers sent per event, from start until stopped. */
  statementsPerEvent: number;
  /** WAL the server wrote per event in the window (the whole server's: the bench runs alone on it). */
  walBytesPerEvent: number;
}

export interface Drain {
  /** From sending the workers their start to the check that saw the work done, in ms. */
  elapsedMs: number;
  cost: DrainCost;
  workers: Worker[];
  /** The workers' final reports, in spawn order. */
  results: WorkerResult[];
}

/**
 * One drain measurement, the same for every relay and consumer: declares an exchange with a sink
 * queue bound to everything, lets `fill` put in what the workers are to drain, spawns them, starts
 * them all at once (the clock starts here), waits until `check` reports done and stops them. On
 * any failure the workers are killed; the broker objects are removed either way.
 */
export async function drain(
  ctx: BenchContext,
  label: string,
  options: {
    /** Names the exchange and queue (brokerNames). */
    prefix: string;
    fill?: (names: SinkNames) => Promise<void>;
    spawn: (names: SinkNames) => Promise<Worker[]>;
    target: number;
    timeoutMs: number;
    check: () => Promise<DoneCheck>;
    describe?: () => Promise<string>;
  },
): Promise<Drain> {
  const names = brokerNames(ctx, options.prefix);
  const group = new WorkerGroup();
  try {
    await declareSink(ctx, names.exchange, names.queue);
    await options.fill?.(names);
    for (const worker of await options.spawn(names)) group.add(worker);
    const postmaster = await postmasterPid(ctx.pool);
    const walBefore = await walPosition(ctx.pool);
    const cpuBefore = readCpu(postmaster);
    const started = performance.now();
    await group.startAll();
    const done = await waitUntil(label, {
      timeoutMs: options.timeoutMs,
      group,
      target: options.target,
      check: options.check,
      describe: options.describe,
    });
    const cpu = cpuPerEvent(cpuBefore, readCpu(postmaster), options.target);
    const walBytes = (await walPosition(ctx.pool)) - walBefore;
    const results = await group.stopAll();
    const statements = results.reduce((sum, r) => sum + Number(r.data.statements ?? 0), 0);
    return {
      elapsedMs: done - started,
      cost: { cpu, statementsPerEvent: statements / options.target, walBytesPerEvent: walBytes / options.target },
      workers: group.workers,
      results,
    };
  } catch (err) {
    group.killAll();
    throw err;
  } finally {
    await names.remove();
  }
}

/** Inserts events [from, to) inside an already open transaction. */
export type Insert = (client: pg.PoolClient, from: number, to: number) => Promise<void>;

async function transaction(client: pg.PoolClient, insert: Insert, from: number, to: number): Promise<void> {
  await client.query('BEGIN');
  try {
    await insert(client, from, to);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** Events [0, total) in transactions of `batch` on one connection, as fast as it goes. */
export async function produceFlat(client: pg.PoolClient, total: number, batch: number, insert: Insert): Promise<void> {
  for (let from = 0; from < total; from += batch)
    await transaction(client, insert, from, Math.min(total, from + batch));
}

/**
 * Offers `perSecond` events for `durationMs`: every `tickMs` one transaction with the events
 * due by then. A late tick (slow commit, busy loop) catches up on schedule by inserting what
 * became due, so the offered rate holds on average; `achieved` says whether it did.
 */
export async function producePaced(
  client: pg.PoolClient,
  perSecond: number,
  durationMs: number,
  insert: Insert,
  tickMs = 5,
): Promise<{ total: number; achieved: number }> {
  const total = Math.max(1, Math.round((perSecond * durationMs) / 1000));
  const started = performance.now();
  const hardStop = started + durationMs * 3 + 30_000;
  let produced = 0;
  for (let tick = 1; produced < total; tick++) {
    const due = Math.min(total, Math.floor((perSecond * (performance.now() - started)) / 1000) + 1);
    if (due > produced) {
      await transaction(client, insert, produced, due);
      produced = due;
    }
    if (performance.now() > hardStop)
      throw new TimeoutError(
        `paced producer fell behind: ${produced}/${total} events after ${((performance.now() - started) / 1000).toFixed(0)} s`,
      );
    const wait = started + tick * tickMs - performance.now();
    if (wait > 0) await sleep(wait);
  }
  return { total, achieved: (total * 1000) / (performance.now() - started) };
}

/**
 * Adds a pipeline's two workers to its group and starts the consumer first: it declares and
 * binds its queue, and a mandatory publish before that would come back unroutable.
 */
export async function startConsumerThenRelay(group: WorkerGroup, consumer: Worker, relay: Worker): Promise<void> {
  group.add(consumer);
  group.add(relay);
  await consumer.start();
  await relay.start();
}

/** A running relay → broker → consumer pipeline, naive or converge. */
export interface Pipeline {
  group: WorkerGroup;
  /** Its progress (applied events) tells when to poll closely; the relay's would say so too early. */
  consumer: Worker;
  insert: Insert;
  /** Events whose effect is committed in the read model (sum of the per-aggregate versions). */
  applied(): Promise<number>;
}

/**
 * Runs `use` against an opened pipeline, then stops its workers (killing them if anything
 * failed) and returns their final reports next to `use`'s value.
 */
export async function withPipeline<T>(
  label: string,
  open: (group: WorkerGroup) => Promise<Omit<Pipeline, 'group'>>,
  use: (pipeline: Pipeline) => Promise<T>,
): Promise<{ value: T; results: WorkerResult[] }> {
  const group = new WorkerGroup();
  try {
    const pipeline = { group, ...(await open(group)) };
    const value = await use(pipeline);
    const results = await group.stopAll();
    warnAboutDetours(results, label);
    return { value, results };
  } catch (err) {
    group.killAll();
    throw err;
  }
}

function appliedCheck(pipeline: Pipeline, total: number): () => Promise<DoneCheck> {
  return async () => {
    const applied = await pipeline.applied();
    return { done: applied >= total, status: `${applied}/${total} applied` };
  };
}

export interface SustainedResult {
  rate: number;
  /** CPU milliseconds per event in the same window, per party (bench/cpu.ts). */
  cpu: ReturnType<typeof cpuPerEvent>;
}

/**
 * N events as fast as the producer goes; rate = N / (first insert → last projection commit seen),
 * and the CPU time each party spent per event in that window.
 */
export async function sustainedRate(
  pool: pg.Pool,
  pipeline: Pipeline,
  total: number,
  timeoutMs: number,
  label: string,
): Promise<SustainedResult> {
  const postmaster = await postmasterPid(pool);
  const client = await pool.connect();
  try {
    const cpuBefore = readCpu(postmaster);
    const started = performance.now();
    await Promise.race([
      withTimeout(produceFlat(client, total, 100, pipeline.insert), timeoutMs, `${label}: producer`),
      pipeline.group.failure,
    ]);
    const left = Math.max(1000, started + timeoutMs - performance.now());
    const done = await waitUntil(label, {
      timeoutMs: left,
      check: appliedCheck(pipeline, total),
      group: pipeline.group,
      counting: [pipeline.consumer],
      target: total,
    });
    return { rate: (total * 1000) / (done - started), cpu: cpuPerEvent(cpuBefore, readCpu(postmaster), total) };
  } finally {
    client.release();
  }
}

export interface PacedResult {
  total: number;
  /** Rate the producer actually offered. */
  offered: number;
  /** total / (first insert → last commit): below `offered`, the pipeline fell behind and latency grew all along. */
  applied: number;
}

/** Paced offer, then wait until all of it is applied; the latencies come from the consumer's report. */
export async function pacedRun(
  pool: pg.Pool,
  pipeline: Pipeline,
  perSecond: number,
  durationMs: number,
  timeoutMs: number,
  label: string,
): Promise<PacedResult> {
  const client = await pool.connect();
  try {
    const started = performance.now();
    const produced = await Promise.race([
      producePaced(client, perSecond, durationMs, pipeline.insert),
      pipeline.group.failure,
    ]);
    const done = await waitUntil(label, {
      timeoutMs,
      check: appliedCheck(pipeline, produced.total),
      group: pipeline.group,
      counting: [pipeline.consumer],
      target: produced.total,
    });
    return { total: produced.total, offered: produced.achieved, applied: (produced.total * 1000) / (done - started) };
  } finally {
    client.release();
  }
}

/**
 * Deliveries converge had to retry or quarantine make a run slower for reasons worth knowing
 * (version gaps, handler errors); they are not hidden in the rate but called out on stderr.
 */
export function warnAboutDetours(results: WorkerResult[], label: string): void {
  for (const result of results) {
    const stats = result.data.stats as Record<string, number> | undefined;
    if (stats && ((stats.retried ?? 0) > 0 || (stats.quarantined ?? 0) > 0))
      note(`${label}: consumer ${JSON.stringify(stats)}`);
    const retried = result.data.retried;
    if (typeof retried === 'number' && retried > 0) note(`${label}: relay retried ${retried} publishes`);
  }
}

export function latencyOf(results: WorkerResult[], expected: number, label: string): LatencySummary {
  const samples = results.flatMap((r) => (Array.isArray(r.data.latencies) ? (r.data.latencies as number[]) : []));
  if (samples.length < expected)
    throw new Error(`${label}: only ${samples.length}/${expected} latency samples were reported by the consumer`);
  return summarizeLatency(samples);
}

/** The server's current WAL insert position, in bytes. */
async function walPosition(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ bytes: string }>(
    `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0') AS bytes`,
  );
  return Number(rows[0]!.bytes);
}
