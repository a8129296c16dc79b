import type pg from 'pg';
import { z } from 'zod';
import { withReadTransaction } from '../db/transaction.js';
import { defineOptions, parseOptions, poolOption, type OptionsInput } from '../runtime/options.js';
import type { ReconcileRow } from './compare.js';
import type { PagedReader } from './reconcile.js';
import { SNAPSHOT_ID, snapshotSql } from './sql.js';

export const sourceSnapshotOptions = defineOptions(
  'sourceSnapshot',
  z.strictObject({
    exportSnapshot: z
      .boolean()
      .default(false)
      .describe(
        'Export the snapshot (pg_export_snapshot) and pass its id to the reader, so another connection can join it while the reader runs.',
      ),
    snapshotId: z
      .string()
      .regex(SNAPSHOT_ID, 'must be an id returned by pg_export_snapshot()')
      .optional()
      .describe('Join a snapshot another open sourceSnapshot exported instead of taking a new one.'),
  }),
);

export type SourceSnapshotOptions = OptionsInput<typeof sourceSnapshotOptions>;

/** What the reader of a sourceSnapshot gets besides its client. */
export interface SnapshotInfo {
  /** The exported snapshot's id (exportSnapshot or snapshotId given), else null. */
  snapshotId: string | null;
}

/**
 * Runs `read` on a client inside one REPEATABLE READ, READ ONLY transaction of the source's
 * database: every statement it runs sees the same committed state, so a row assembled from
 * several statements (a header and its lines, two tables, a version and the fields it
 * covers) is one version of the aggregate, never fields of two. The transaction ends (with
 * ROLLBACK: it wrote nothing) when `read` returns: keep each one short (a page, one aggregate), since an open snapshot holds
 * back vacuum on the whole source database.
 */
export async function sourceSnapshot<T>(
  pool: pg.Pool,
  read: (client: pg.PoolClient, snapshot: SnapshotInfo) => Promise<T>,
  input: SourceSnapshotOptions = {},
): Promise<T> {
  parseOptions(poolOption, pool, 'pool');
  const options = sourceSnapshotOptions.parse(input);
  return withReadTransaction(pool, async (client) => {
    await client.query(snapshotSql.repeatableReadOnly);
    let snapshotId: string | null = options.snapshotId ?? null;
    if (snapshotId !== null) await client.query(snapshotSql.importSnapshot(snapshotId));
    else if (options.exportSnapshot) {
      const { rows } = await client.query<{ id: string }>(snapshotSql.exportSnapshot);
      snapshotId = rows[0]!.id;
    }
    return read(client, { snapshotId });
  });
}

/**
 * A PagedReader for reconcile and rebuildProjection whose every page is read by `page` in a
 * snapshot of its own (sourceSnapshot): consistent within the page, short-lived across the
 * scan. Rows of different pages may come from different moments, which reconcile allows: each
 * row is judged and repaired on its own, with its own version.
 */
export function snapshotPages(
  pool: pg.Pool,
  page: (client: pg.PoolClient, after: string | null, limit: number) => Promise<ReconcileRow[]>,
): PagedReader {
  parseOptions(poolOption, pool, 'pool');
  return (after, limit) => sourceSnapshot(pool, (client) => page(client, after, limit));
}
