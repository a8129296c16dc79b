import type pg from 'pg';
import { z } from 'zod';
import { schemaRef } from '../runtime/identifier.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import { validateRetention } from './cleanup.js';
import { identifierOption, parseOptions, poolOption } from '../runtime/options.js';
import { opsSql } from './sql.js';

export interface CompactionOptions {
  schema?: string;
  /** The inbox scope whose rows are compacted. */
  consumer: string;
  /**
   * The projection whose applied version bounds the watermark. Only its contiguous applied
   * version is safe: the highest version seen in the inbox may sit above a gap (parked events).
   */
  projection: string;
  /**
   * Inbox rows received longer ago than this may be compacted. After compaction a copy of an
   * event with the same eventId but different content can no longer be told from a duplicate
   * (its fingerprint is gone), so this must exceed both windows below.
   */
  olderThanMs: number;
  /** The longest a delivery can still come back from the broker (retry queue backoff, redelivery). */
  retryHorizonMs: number;
  /** How long a quarantined message may still be replayed. */
  quarantineReplayWindowMs: number;
  /** Inbox rows per statement (one short transaction each). Default 1,000. */
  batchSize?: number;
  /** Stop after this many batches in one call. Default unlimited. */
  maxBatches?: number;
}

export interface CompactionResult {
  /** Inbox rows deleted. */
  compacted: number;
  /** Watermark rows written; an aggregate touched by several batches counts once per batch. */
  watermarks: number;
  batches: number;
}

const schema = z.strictObject({
  schema: identifierOption.optional(),
  consumer: z.string().min(1),
  projection: z.string().min(1),
  olderThanMs: z.number().int().min(1),
  retryHorizonMs: z.number().int().min(0),
  quarantineReplayWindowMs: z.number().int().min(0),
  batchSize: z.number().int().min(1).max(100_000).optional(),
  maxBatches: z.number().int().min(1).optional(),
});

/**
 * Replaces old inbox rows by a per-aggregate watermark, for long retention without an inbox
 * that grows forever. A row goes only if the projection has applied its version: a
 * redelivered copy then fails the version check (StaleVersionError), and the processor, seeing
 * the watermark, acks it as a duplicate instead of quarantining it. Rows above the applied
 * version (beyond a gap) stay, so the watermark is never the highest version seen.
 * Each batch is one statement; concurrent compactors skip each other's rows.
 */
export async function compactInbox(pool: pg.Pool, input: CompactionOptions): Promise<CompactionResult> {
  parseOptions(poolOption, pool, 'pool');
  const options = parseOptions(schema, input);
  validateRetention(
    {
      inboxRetentionMs: options.olderThanMs,
      retryHorizonMs: options.retryHorizonMs,
      quarantineReplayWindowMs: options.quarantineReplayWindowMs,
    },
    'olderThanMs',
  );
  const sql = opsSql(schemaRef(options.schema ?? DEFAULT_SCHEMA));
  const batchSize = options.batchSize ?? 1_000;
  const result: CompactionResult = { compacted: 0, watermarks: 0, batches: 0 };
  for (let batch = 0; options.maxBatches === undefined || batch < options.maxBatches; batch++) {
    const { rows } = await pool.query<{ compacted: number; watermarks: number }>(sql.compactInbox, [
      options.consumer,
      options.projection,
      options.olderThanMs,
      batchSize,
    ]);
    const { compacted, watermarks } = rows[0]!;
    result.batches++;
    result.compacted += compacted;
    result.watermarks += watermarks;
    if (compacted < batchSize) break;
  }
  return result;
}
