import type pg from 'pg';
import { z } from 'zod';
import { schemaRef } from '../runtime/identifier.js';

import { retentionFields, validateRetention } from './cleanup.js';
import { inboxScopeOption, projectionNameOption } from '../runtime/option-fields.js';
import { defineOptions, parseOptions, poolOption, type OptionsInput, schemaOption } from '../runtime/options.js';
import { opsSql } from './sql.js';
import { brokerRetentionOption, checkBroker, type BrokerCheck } from './broker-retention.js';

export interface CompactionResult {
  /** Inbox rows deleted. */
  compacted: number;
  /** Watermark rows written; an aggregate touched by several batches counts once per batch. */
  watermarks: number;
  batches: number;
  /** How the messages still waiting in the broker bounded the compaction. */
  broker: BrokerCheck;
}

export const compactionOptions = defineOptions(
  'compactInbox',
  z.strictObject({
    schema: schemaOption,
    consumer: inboxScopeOption.describe('Inbox scope (consumer name) whose rows are compacted.'),
    projection: projectionNameOption.describe(
      'Projection whose contiguous applied version bounds each watermark (not the highest version seen, which may sit above a gap).',
    ),
    olderThanMs: z
      .number()
      .int()
      .min(1)
      .describe(
        'Inbox rows received longer ago than this may be compacted, in ms. Afterwards a same-id copy with other content ' +
          'looks like a duplicate, so this must exceed retryHorizonMs and quarantineReplayWindowMs.',
      ),
    retryHorizonMs: retentionFields.retryHorizonMs,
    quarantineReplayWindowMs: retentionFields.quarantineReplayWindowMs,
    broker: brokerRetentionOption,
    batchSize: retentionFields.batchSize.describe('Inbox rows per statement, each its own short transaction.'),
    maxBatches: retentionFields.maxBatches.describe(
      'Stop after this many batches in one call; unlimited when omitted.',
    ),
  }),
);

export type CompactionOptions = OptionsInput<typeof compactionOptions>;

/**
 * Replaces old inbox rows by a per-aggregate watermark, for long retention without an inbox
 * that grows forever. A row goes only if the projection has applied its version: a
 * redelivered copy then fails the version check (StaleVersionError), and the processor, seeing
 * the watermark, acks it as a duplicate instead of quarantining it. Rows above the applied
 * version (beyond a gap) stay, so the watermark is never the highest version seen.
 * Rows younger than the oldest message still waiting in the consumer's queues (`broker`) stay.
 * Each batch is one statement; concurrent compactors skip each other's rows.
 */
export async function compactInbox(pool: pg.Pool, input: CompactionOptions): Promise<CompactionResult> {
  parseOptions(poolOption, pool, 'pool');
  const options = compactionOptions.parse(input);
  validateRetention(
    {
      inboxRetentionMs: options.olderThanMs,
      retryHorizonMs: options.retryHorizonMs,
      quarantineReplayWindowMs: options.quarantineReplayWindowMs,
    },
    'olderThanMs',
  );
  const sql = opsSql(schemaRef(options.schema));
  const { batchSize } = options;
  const broker = await checkBroker(options.olderThanMs, options.broker);
  const result: CompactionResult = { compacted: 0, watermarks: 0, batches: 0, broker };
  // A waiting message of unknown age: no watermark may rise past what it could be a copy of.
  const olderThanMs = broker.appliedRetentionMs;
  if (olderThanMs === null) return result;
  for (let batch = 0; options.maxBatches === undefined || batch < options.maxBatches; batch++) {
    const { rows } = await pool.query<{ compacted: number; watermarks: number }>(sql.compactInbox, [
      options.consumer,
      options.projection,
      olderThanMs,
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
