import type pg from 'pg';
import { z } from 'zod';
import { defineOptions, functionOption, parseOptions, poolOption, type OptionsInput } from '../runtime/options.js';
import { schemaRef } from '../runtime/identifier.js';
import { withTransaction } from '../db/transaction.js';
import type { ReconcileRow } from './compare.js';
import { reconcileShape, runReconcile, SAMPLE_SIZE, type ReconcileReport } from './reconcile.js';
import { reconcileSql } from './sql.js';

export const rebuildOptions = defineOptions(
  'rebuildProjection',
  z.strictObject({
    ...reconcileShape,
    source: reconcileShape.source.describe(
      'The source of truth, read from the primary: every aggregate at its current version.',
    ),
    reset: functionOption<(tx: pg.PoolClient) => Promise<void>>('(tx: pg.PoolClient) => Promise<void>').describe(
      'Empties the read model on the same transaction that forgets the versions (e.g. TRUNCATE).',
    ),
    apply: functionOption<(tx: pg.PoolClient, row: ReconcileRow) => Promise<void>>(
      '(tx: pg.PoolClient, row: ReconcileRow) => Promise<void>',
    ).describe('Writes one aggregate of the read model from its source row (removes it when `deleted`).'),
  }),
);

export type RebuildOptions = OptionsInput<typeof rebuildOptions>;

/**
 * Rebuilds a lost or corrupted projection from a versioned source snapshot. It forgets the
 * projection's versions and empties the read model in one transaction, then writes every
 * source row with its version as the baseline watermark. The inbox is left alone: events it
 * already holds are duplicates or covered by the baseline, so they cannot block the rebuild
 * or be applied twice, and events above the source's version apply on top afterwards.
 * Stop the projection's consumers first; they drain what they parked when they resubscribe.
 */
export async function rebuildProjection(pool: pg.Pool, input: RebuildOptions): Promise<ReconcileReport> {
  const { reset, apply, ...options } = rebuildOptions.parse(input);
  parseOptions(poolOption, pool, 'pool');
  const sql = reconcileSql(schemaRef(options.schema));
  await withTransaction(pool, async (tx) => {
    await tx.query(sql.forget, [options.projection, options.aggregateType]);
    await reset(tx);
  });
  return runReconcile(pool, { ...options, sampleSize: SAMPLE_SIZE, repair: { apply } });
}
