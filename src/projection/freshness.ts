import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { aggregateTypeOption, projectionNameOption } from '../runtime/option-fields.js';
import type { Executor } from '../db/executor.js';
import { runStatement } from '../db/statement.js';

import { FreshnessTimeoutError } from '../runtime/errors.js';
import { schemaRef } from '../runtime/identifier.js';
import {
  defineOptions,
  functionOption,
  poolOption,
  signalOption,
  type OptionsInput,
  schemaOption,
} from '../runtime/options.js';
import { projectionSql } from './sql.js';

const aggregateShape = {
  schema: schemaOption,
  projection: projectionNameOption.describe(
    'Projection name, as the consumer applies it (projection_state.projection).',
  ),
  aggregateType: aggregateTypeOption.describe('Aggregate type of the events.'),
  aggregateId: z.string().min(1).describe('Aggregate id.'),
};
const version = z.number().int().min(0);

export const waitForVersionOptions = defineOptions(
  'waitForVersion',
  z
    .strictObject({
      pool: poolOption.describe('pg.Pool the projection state is read through; the caller keeps ownership.'),
      ...aggregateShape,
      version: version.describe(
        'Resolve once the projection has applied the aggregate at this version or later (a trusted snapshot counts).',
      ),
      timeoutMs: z
        .number()
        .int()
        .min(0)
        .default(5_000)
        .describe('Reject with FreshnessTimeoutError after this long, in ms.'),
      signal: signalOption.optional().describe('Stops waiting: the promise rejects with the signal’s reason.'),
      minPollMs: z
        .number()
        .int()
        .min(1)
        .default(10)
        .describe('First pause between two reads of the projection state, in ms; it doubles after each read.'),
      maxPollMs: z
        .number()
        .int()
        .min(1)
        .default(250)
        .describe('Longest pause between two reads, in ms: the most a caller waits past the apply.'),
    })
    .refine((o) => o.maxPollMs >= o.minPollMs, { message: 'must be at least minPollMs', path: ['maxPollMs'] }),
);
export type WaitForVersionOptions = OptionsInput<typeof waitForVersionOptions>;

export const freshnessOptions = defineOptions(
  'readFreshness',
  z.strictObject({
    ...aggregateShape,
    sourceVersion: version
      .optional()
      .describe(
        "The aggregate's version in the source, when the caller knows it; otherwise the newest outbox event's version (same database only).",
      ),
  }),
);
export type FreshnessOptions = OptionsInput<typeof freshnessOptions>;

/** What `waitForVersion` saw when the projection caught up. */
export interface WaitResult {
  /** The applied version, at least the one waited for. */
  version: number;
  /** Reads of the projection state it took. */
  reads: number;
  waitedMs: number;
}

/** How far one projection is behind the source for one aggregate. Versions are 0 when nothing exists. */
export interface Freshness {
  projection: string;
  aggregateType: string;
  aggregateId: string;
  /** The version the projection has applied (0: nothing yet). */
  appliedVersion: number;
  /** The last trusted full snapshot's version, if one was applied. */
  baselineVersion: number | null;
  /** The aggregate's version in the source: the caller's, or the newest outbox event's. */
  sourceVersion: number;
  sourceVersionFrom: 'caller' | 'outbox';
  /** sourceVersion - appliedVersion, never below 0. */
  versionsBehind: number;
  caughtUp: boolean;
  /** Age of the oldest outbox event of the aggregate the projection has not applied; null when none is in the outbox. */
  oldestUnappliedAgeSeconds: number | null;
}

/**
 * Pause before read number `read` + 1: `minPollMs` doubling up to `maxPollMs`. A waiter costs
 * one primary-key read per pause, so at most 1000 / maxPollMs reads a second once it has waited a while.
 */
export function pollDelay(read: number, poll: { minPollMs: number; maxPollMs: number }): number {
  return Math.min(poll.maxPollMs, poll.minPollMs * 2 ** Math.min(read, 30));
}

/**
 * Resolves once `projection` has applied the aggregate at `version` or later; rejects with
 * FreshnessTimeoutError after `timeoutMs`, or with the signal's reason when it aborts. Reads the
 * projection state with a bounded backoff (no LISTEN connection, nothing added to the consumer's
 * commit): see docs/freshness.md for what a waiter costs.
 */
export async function waitForVersion(input: WaitForVersionOptions): Promise<WaitResult> {
  const options = waitForVersionOptions.parse(input);
  const read = projectionSql(schemaRef(options.schema)).read;
  const params = [options.projection, options.aggregateType, options.aggregateId];
  const started = Date.now();
  const deadline = started + options.timeoutMs;
  let appliedVersion = 0;
  for (let reads = 1; ; reads++) {
    options.signal?.throwIfAborted();
    const { rows } = await runStatement<{ version: string }>(options.pool, read, params);
    appliedVersion = rows[0] ? Number(rows[0].version) : 0;
    if (appliedVersion >= options.version) return { version: appliedVersion, reads, waitedMs: Date.now() - started };
    const remaining = deadline - Date.now();
    if (remaining <= 0)
      throw new FreshnessTimeoutError(
        options.projection,
        options.aggregateType,
        options.aggregateId,
        options.version,
        appliedVersion,
        options.timeoutMs,
      );
    await pause(Math.min(pollDelay(reads - 1, options), remaining), options.signal);
  }
}

/** How far `projection` is behind the source for one aggregate, as a plain object; read-only. */
export async function readFreshness(executor: Executor, input: FreshnessOptions): Promise<Freshness> {
  const options = freshnessOptions.parse(input);
  const { rows } = await runStatement<{
    version: string | null;
    baseline_version: string | null;
    outbox_version: string | null;
    oldest_unapplied_age_seconds: string | null;
  }>(executor, projectionSql(schemaRef(options.schema)).freshness, [
    options.projection,
    options.aggregateType,
    options.aggregateId,
  ]);
  const row = rows[0]!;
  const appliedVersion = Number(row.version ?? 0);
  const sourceVersion = options.sourceVersion ?? Number(row.outbox_version ?? 0);
  return {
    projection: options.projection,
    aggregateType: options.aggregateType,
    aggregateId: options.aggregateId,
    appliedVersion,
    baselineVersion: row.baseline_version === null ? null : Number(row.baseline_version),
    sourceVersion,
    sourceVersionFrom: options.sourceVersion === undefined ? 'outbox' : 'caller',
    versionsBehind: Math.max(0, sourceVersion - appliedVersion),
    caughtUp: appliedVersion >= sourceVersion,
    oldestUnappliedAgeSeconds:
      row.oldest_unapplied_age_seconds === null ? null : Number(row.oldest_unapplied_age_seconds),
  };
}

export const readFreshOptions = defineOptions(
  'readFresh',
  z.strictObject({
    ...freshnessOptions.schema.shape,
    minVersion: version
      .optional()
      .describe(
        'A version the caller knows the source has (e.g. the one it just wrote): a projection below it is not read.',
      ),
    lagBudgetMs: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe("How old the projection's oldest unapplied event may be before the source is read instead, in ms."),
    readProjection: functionOption<() => Promise<unknown>>('() => Promise<T>').describe('Reads the projection.'),
    readSource: functionOption<() => Promise<unknown>>('() => Promise<T>').describe(
      'Reads the same data from the source of truth.',
    ),
  }),
);
export type ReadFreshOptions<T> = Omit<OptionsInput<typeof readFreshOptions>, 'readProjection' | 'readSource'> & {
  readProjection: () => Promise<T>;
  readSource: () => Promise<T>;
};

/** Why `readFresh` read where it did. */
export type FreshReadReason =
  /** The projection has what the caller asked for. */
  | 'fresh'
  /** The projection is below `minVersion`. */
  | 'below-known-version'
  /** The oldest event the projection has not applied is older than `lagBudgetMs`. */
  | 'over-budget'
  /** Neither `minVersion` nor `lagBudgetMs`: the projection is behind the newest outbox event. */
  | 'behind-source';

export interface FreshRead<T> {
  value: T;
  from: 'projection' | 'source';
  reason: FreshReadReason;
  freshness: Freshness;
}

/**
 * Where a read should go, from one freshness read. Pure: with `minVersion` the projection must
 * have it; with `lagBudgetMs` its oldest unapplied event must be younger; with neither it must
 * have caught up with the newest outbox event.
 */
export function chooseRead(
  freshness: Freshness,
  want: { minVersion?: number | undefined; lagBudgetMs?: number | undefined },
): { from: 'projection' | 'source'; reason: FreshReadReason } {
  if (want.minVersion !== undefined && freshness.appliedVersion < want.minVersion)
    return { from: 'source', reason: 'below-known-version' };
  if (
    want.lagBudgetMs !== undefined &&
    freshness.oldestUnappliedAgeSeconds !== null &&
    freshness.oldestUnappliedAgeSeconds * 1000 > want.lagBudgetMs
  )
    return { from: 'source', reason: 'over-budget' };
  if (want.minVersion === undefined && want.lagBudgetMs === undefined && !freshness.caughtUp)
    return { from: 'source', reason: 'behind-source' };
  return { from: 'projection', reason: 'fresh' };
}

/**
 * Falls back to the source when the projection is not fresh enough for this read: reads the
 * aggregate's freshness, then calls `readProjection` or `readSource`. A projection only moves
 * forward, so one judged fresh is at least that fresh when `readProjection` runs.
 */
export async function readFresh<T>(executor: Executor, input: ReadFreshOptions<T>): Promise<FreshRead<T>> {
  const options = readFreshOptions.parse(input);
  const freshness = await readFreshness(executor, {
    schema: options.schema,
    projection: options.projection,
    aggregateType: options.aggregateType,
    aggregateId: options.aggregateId,
    ...(options.sourceVersion === undefined ? {} : { sourceVersion: options.sourceVersion }),
  });
  const choice = chooseRead(freshness, options);
  const value = choice.from === 'projection' ? await input.readProjection() : await input.readSource();
  return { value, ...choice, freshness };
}

/** Sleeps `ms`; an abort rejects at once with the signal's own reason (not timers' AbortError). */
async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal ? { signal } : {});
  } catch (err) {
    signal?.throwIfAborted();
    throw err;
  }
}
