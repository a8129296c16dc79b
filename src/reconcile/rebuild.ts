import type pg from 'pg';
import { z } from 'zod';
import { functionOption, identifierOption, parseOptions, poolOption } from '../runtime/options.js';
import { schemaRef } from '../runtime/identifier.js';
import { withTransaction } from '../db/transaction.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import type { ReconcileRow } from './compare.js';
import { reconcile, type PagedReader, type ReconcileProgress, type ReconcileReport } from './reconcile.js';
import { reconcileSql } from './sql.js';

const optionsSchema = z.strictObject({
  schema: identifierOption.optional(),
  projection: z.string().min(1),
  aggregateType: z.string().min(1),
  source: functionOption<PagedReader>(),
  reset: functionOption<RebuildOptions['reset']>(),
  apply: functionOption<RebuildOptions['apply']>(),
  pageSize: z.number().int().min(1).max(100_000).optional(),
  maxRowsPerSecond: z.number().positive().optional(),
  onProgress: functionOption<(progress: ReconcileProgress) => void>().optional(),
});

export interface RebuildOptions {
  schema?: string;
  projection: string;
  aggregateType: string;
  /** The source of truth, read from the primary: every aggregate at its current version. */
  source: PagedReader;
  /** Empties the read model on the same transaction that forgets the versions (e.g. TRUNCATE). */
  reset: (tx: pg.PoolClient) => Promise<void>;
  /** Writes one aggregate of the read model from its source row (and removes it when `deleted`). */
  apply: (tx: pg.PoolClient, row: ReconcileRow) => Promise<void>;
  pageSize?: number;
  maxRowsPerSecond?: number;
  onProgress?: (progress: ReconcileProgress) => void;
}

/**
 * Rebuilds a lost or corrupted projection from a versioned source snapshot. It forgets the
 * projection's versions and empties the read model in one transaction, then writes every
 * source row with its version as the baseline watermark. The inbox is left alone: events it
 * already holds are duplicates or covered by the baseline, so they cannot block the rebuild
 * or be applied twice, and events above the source's version apply on top afterwards.
 * Stop the projection's consumers first; they drain what they parked when they resubscribe.
 */
export async function rebuildProjection(pool: pg.Pool, input: RebuildOptions): Promise<ReconcileReport> {
  const options = parseOptions(optionsSchema, input);
  parseOptions(poolOption, pool, 'pool');
  const schema = schemaRef(options.schema ?? DEFAULT_SCHEMA);
  const sql = reconcileSql(schema);
  await withTransaction(pool, async (tx) => {
    await tx.query(sql.forget, [options.projection, options.aggregateType]);
    await options.reset(tx);
  });
  return reconcile(pool, {
    schema: schema.name,
    projection: options.projection,
    aggregateType: options.aggregateType,
    source: options.source,
    repair: { apply: options.apply },
    ...(options.pageSize ? { pageSize: options.pageSize } : {}),
    ...(options.maxRowsPerSecond ? { maxRowsPerSecond: options.maxRowsPerSecond } : {}),
    ...(options.onProgress ? { onProgress: options.onProgress } : {}),
  });
}
