import type pg from 'pg';
import { z } from 'zod';
import { schemaRef } from '../runtime/identifier.js';
import { ConfigError } from '../runtime/errors.js';

import {
  defineOptions,
  functionOption,
  parseOptions,
  poolOption,
  type OptionsInput,
  type OptionsOutput,
  schemaOption,
} from '../runtime/options.js';
import { opsSql } from './sql.js';
import { brokerRetentionOption, checkBroker, type BrokerCheck } from './broker-retention.js';
import { dropProcessedPartitions, type PartitionRetentionResult } from './partition-retention.js';
import { readPartitionLayout } from '../schema/partitioning.js';

export interface CleanupResult {
  outboxDeleted: number;
  inboxDeleted: number;
  batches: number;
  /** With inboxRetentionMs: how the messages still waiting in the broker bounded the inbox deletion. */
  broker?: BrokerCheck;
  /** A partitioned schema: the partitions dropped, and those past retention kept (rows are then never deleted one by one). */
  partitions?: PartitionRetentionResult;
}

/** The windows and batching that inbox deletion and compaction share; each says when it requires them. */
export const retentionFields = {
  retryHorizonMs: z
    .number()
    .int()
    .min(0)
    .describe('Longest time a delivery can still come back from the broker (retry backoff, redelivery), in ms.'),
  quarantineReplayWindowMs: z
    .number()
    .int()
    .min(0)
    .describe('How long a quarantined message may still be replayed, in ms.'),
  batchSize: z.number().int().min(1).max(100_000).default(1_000),
  maxBatches: z.number().int().min(1).optional(),
};

const cleanupShape = {
  schema: schemaOption,
  outboxRetentionMs: z
    .number()
    .int()
    .min(0)
    .describe('Published outbox rows older than this are deleted, in ms; failed and pending rows never are.'),
  inboxRetentionMs: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe(
      'Inbox rows received longer ago than this are deleted, in ms; omit to keep the inbox. A deleted row no longer ' +
        'marks a redelivery as a duplicate, so this must exceed retryHorizonMs and quarantineReplayWindowMs.',
    ),
  retryHorizonMs: retentionFields.retryHorizonMs
    .optional()
    .describe(
      'Longest time a delivery can still come back from the broker (retry backoff, redelivery), in ms; required with inboxRetentionMs.',
    ),
  quarantineReplayWindowMs: retentionFields.quarantineReplayWindowMs
    .optional()
    .describe('How long a quarantined message may still be replayed, in ms; required with inboxRetentionMs.'),
  broker: brokerRetentionOption,
  batchSize: retentionFields.batchSize.describe('Rows deleted per statement, each its own short transaction.'),
  maxBatches: retentionFields.maxBatches.describe(
    'Stop after this many batches per table in one call; unlimited when omitted.',
  ),
};

export const cleanupOptions = defineOptions('cleanup', z.strictObject(cleanupShape));

export type CleanupOptions = OptionsInput<typeof cleanupOptions>;
type ResolvedCleanup = OptionsOutput<typeof cleanupOptions>;

export const scheduleCleanupOptions = defineOptions(
  'scheduleCleanup',
  z.strictObject({
    ...cleanupShape,
    intervalMs: z.number().int().min(1).describe('Time between two cleanup runs, in ms.'),
    onError: functionOption<(err: unknown) => void>('(err: unknown) => void')
      .optional()
      .describe('Called with the error of a failed run; the schedule keeps going.'),
    onResult: functionOption<(result: CleanupResult) => void>('(result: CleanupResult) => void')
      .optional()
      .describe('Called with the row counts of each finished run.'),
  }),
);

export type ScheduledCleanupOptions = OptionsInput<typeof scheduleCleanupOptions>;

/**
 * Checks the windows before anything is deleted; the error names the field and both values.
 * `field` is the caller's name for the inbox window (compaction calls it `olderThanMs`).
 */
export function validateRetention(
  options: Pick<CleanupOptions, 'inboxRetentionMs' | 'retryHorizonMs' | 'quarantineReplayWindowMs'>,
  field = 'inboxRetentionMs',
): void {
  if (options.inboxRetentionMs === undefined) return;
  if (options.retryHorizonMs === undefined || options.quarantineReplayWindowMs === undefined) {
    throw new ConfigError(
      field,
      'needs retryHorizonMs and quarantineReplayWindowMs, so the window can be checked against them',
    );
  }
  const floor = Math.max(options.retryHorizonMs, options.quarantineReplayWindowMs);
  if (options.inboxRetentionMs <= floor) {
    throw new ConfigError(
      field,
      `${options.inboxRetentionMs} ms must exceed the broker retry horizon (${options.retryHorizonMs} ms) and the quarantine replay window (${options.quarantineReplayWindowMs} ms)`,
    );
  }
}

/**
 * Deletes what retention allows in bounded batches (a partitioned schema drops whole processed partitions instead); inbox rows younger than the oldest message still
 * waiting in the consumers' queues (`broker`) stay, however old the retention would let them be, each its own short autocommit DELETE that
 * skips rows another cleaner holds, so any number of processes can run it at once and none
 * holds long locks or builds one huge transaction.
 */
export async function cleanup(pool: pg.Pool, input: CleanupOptions): Promise<CleanupResult> {
  parseOptions(poolOption, pool, 'pool');
  const options = cleanupOptions.parse(input);
  validateRetention(options);
  return runCleanup(pool, options);
}

/** One cleanup pass with options already validated (scheduleCleanup validates once, up front). */
async function runCleanup(pool: pg.Pool, options: ResolvedCleanup): Promise<CleanupResult> {
  const schema = schemaRef(options.schema);
  const sql = opsSql(schema);
  const { batchSize } = options;
  const result: CleanupResult = { outboxDeleted: 0, inboxDeleted: 0, batches: 0 };
  // Before anything is deleted: a broker that cannot be read fails the run instead of deleting blind.
  if (options.inboxRetentionMs !== undefined)
    result.broker = await checkBroker(options.inboxRetentionMs, options.broker);
  if ((await readPartitionLayout(pool, schema)).length > 0) {
    const inboxRetentionMs = result.broker?.appliedRetentionMs ?? null;
    result.partitions = await dropProcessedPartitions(pool, schema, {
      outboxRetentionMs: options.outboxRetentionMs,
      inboxRetentionMs,
    });
    return result;
  }
  // `start` is where the first batch begins: each batch answers where it stopped, and the next goes on from there.
  const drain = async (text: string, retentionMs: number, start: string): Promise<number> => {
    let deleted = 0;
    let after = start;
    for (let batch = 0; options.maxBatches === undefined || batch < options.maxBatches; batch++) {
      const { rows } = await pool.query<{ n: number; last: string | null }>(text, [retentionMs, batchSize, after]);
      result.batches++;
      const n = rows[0]?.n ?? 0;
      deleted += n;
      if (n < batchSize) break;
      after = rows[0]?.last ?? after;
    }
    return deleted;
  };
  result.outboxDeleted = await drain(sql.deletePublishedOutbox, options.outboxRetentionMs, '0');
  const inboxRetentionMs = result.broker?.appliedRetentionMs;
  if (inboxRetentionMs !== undefined && inboxRetentionMs !== null)
    result.inboxDeleted = await drain(sql.deleteOldInbox, inboxRetentionMs, '(0,0)');
  return result;
}

/** Runs `cleanup` every `intervalMs` until the returned function is called; errors go to `onError`. */
export function scheduleCleanup(pool: pg.Pool, input: ScheduledCleanupOptions): () => Promise<void> {
  parseOptions(poolOption, pool, 'pool');
  const { intervalMs, onError, onResult, ...options } = scheduleCleanupOptions.parse(input);
  validateRetention(options);
  let running: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(() =>
      runCleanup(pool, options).then(
        (result) => onResult?.(result),
        (err: unknown) => onError?.(err),
      ),
    );
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
