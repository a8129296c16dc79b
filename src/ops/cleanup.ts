import type pg from 'pg';
import { z } from 'zod';
import { schemaRef } from '../runtime/identifier.js';
import { ConfigError } from '../runtime/errors.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import { functionOption, identifierOption, parseOptions, poolOption } from '../runtime/options.js';
import { opsSql } from './sql.js';

export interface CleanupOptions {
  schema?: string;
  /** Published outbox rows older than this are deleted. Failed and pending rows never are. */
  outboxRetentionMs: number;
  /**
   * Inbox rows received longer ago than this are deleted; omit to keep the inbox. A deleted
   * inbox row no longer recognises a redelivery as a duplicate, so this window must exceed
   * both `retryHorizonMs` and `quarantineReplayWindowMs`.
   */
  inboxRetentionMs?: number;
  /** The longest a delivery can still come back from the broker (retry queue backoff, redelivery). */
  retryHorizonMs?: number;
  /** How long a quarantined message may still be replayed. */
  quarantineReplayWindowMs?: number;
  /** Rows per DELETE (one short transaction each). Default 1,000. */
  batchSize?: number;
  /** Stop after this many batches per table in one call. Default unlimited. */
  maxBatches?: number;
}

export interface CleanupResult {
  outboxDeleted: number;
  inboxDeleted: number;
  batches: number;
}

const schema = z.strictObject({
  schema: identifierOption.optional(),
  outboxRetentionMs: z.number().int().min(0),
  inboxRetentionMs: z.number().int().min(1).optional(),
  retryHorizonMs: z.number().int().min(0).optional(),
  quarantineReplayWindowMs: z.number().int().min(0).optional(),
  batchSize: z.number().int().min(1).max(100_000).optional(),
  maxBatches: z.number().int().min(1).optional(),
});

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
 * Deletes what retention allows in bounded batches, each its own short autocommit DELETE that
 * skips rows another cleaner holds, so any number of processes can run it at once and none
 * holds long locks or builds one huge transaction.
 */
export async function cleanup(pool: pg.Pool, input: CleanupOptions): Promise<CleanupResult> {
  parseOptions(poolOption, pool, 'pool');
  const options = parseOptions(schema, input);
  validateRetention(options);
  const sql = opsSql(schemaRef(options.schema ?? DEFAULT_SCHEMA));
  const batchSize = options.batchSize ?? 1_000;
  const result: CleanupResult = { outboxDeleted: 0, inboxDeleted: 0, batches: 0 };
  const drain = async (text: string, retentionMs: number): Promise<number> => {
    let deleted = 0;
    for (let batch = 0; options.maxBatches === undefined || batch < options.maxBatches; batch++) {
      const { rowCount } = await pool.query(text, [retentionMs, batchSize]);
      result.batches++;
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < batchSize) break;
    }
    return deleted;
  };
  result.outboxDeleted = await drain(sql.deletePublishedOutbox, options.outboxRetentionMs);
  if (options.inboxRetentionMs !== undefined)
    result.inboxDeleted = await drain(sql.deleteOldInbox, options.inboxRetentionMs);
  return result;
}

/** Runs `cleanup` every `intervalMs` until the returned function is called; errors go to `onError`. */
export interface ScheduledCleanupOptions extends CleanupOptions {
  intervalMs: number;
  onError?: (err: unknown) => void;
  onResult?: (result: CleanupResult) => void;
}

const scheduleSchema = schema.extend({
  intervalMs: z.number().int().min(1),
  onError: functionOption<(err: unknown) => void>().optional(),
  onResult: functionOption<(result: CleanupResult) => void>().optional(),
});

export function scheduleCleanup(pool: pg.Pool, input: ScheduledCleanupOptions): () => Promise<void> {
  parseOptions(poolOption, pool, 'pool');
  const { intervalMs, onError, onResult, ...options } = parseOptions(scheduleSchema, input);
  validateRetention(options);
  let running: Promise<void> = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(() =>
      cleanup(pool, options).then(
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
