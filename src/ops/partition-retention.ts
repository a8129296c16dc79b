import type pg from 'pg';
import { commit } from '../db/transaction.js';
import type { SchemaRef } from '../runtime/identifier.js';
import { pastRetention, type PartitionRange, type PartitionedTable } from '../schema/partition-plan.js';
import { partitionSql } from '../schema/partition-sql.js';
import { databaseNow, listPartitions } from '../schema/partitioning.js';

/** A partition retention looked at and left in place, and why (never a row's content). */
export interface KeptPartition {
  partition: string;
  reason: 'unpublished-rows' | 'lock-timeout';
}

export interface PartitionRetentionResult {
  dropped: string[];
  kept: KeptPartition[];
}

/** How long a drop waits for the parent's lock before it gives up until the next run (appends queue behind it meanwhile). */
export const DROP_LOCK_TIMEOUT_MS = 2_000;

/**
 * Drops whole partitions instead of deleting rows: an outbox partition once its range ended
 * `outboxRetentionMs` ago and it holds no pending or failed row, an inbox partition once its range
 * ended `inboxRetentionMs` ago (already bounded by the windows and the broker, as for row deletion).
 * The partition now receiving rows is never past retention, so inserts never reach a dropped range.
 */
export async function dropProcessedPartitions(
  pool: pg.Pool,
  schema: SchemaRef,
  retention: { outboxRetentionMs: number; inboxRetentionMs: number | null },
): Promise<PartitionRetentionResult> {
  const result: PartitionRetentionResult = { dropped: [], kept: [] };
  const nowMs = await databaseNow(pool);
  const windows: [PartitionedTable, number | null][] = [
    ['outbox', retention.outboxRetentionMs],
    ['inbox', retention.inboxRetentionMs],
  ];
  for (const [table, retentionMs] of windows) {
    if (retentionMs === null) continue;
    const due = pastRetention(await listPartitions(pool, schema, table), nowMs, retentionMs);
    for (const partition of due) {
      const outcome = await dropOne(pool, schema, table, partition);
      if (outcome === 'dropped') result.dropped.push(partition.name);
      else result.kept.push({ partition: partition.name, reason: outcome });
    }
  }
  return result;
}

/**
 * One partition in one transaction, locked (parent, then partition) before its rows are checked, so
 * no relay claims or marks them meanwhile and the check and the drop see the same rows. DETACH needs
 * the parent's exclusive lock anyway; lock_timeout bounds how long appends queue behind it.
 */
async function dropOne(
  pool: pg.Pool,
  schema: SchemaRef,
  table: PartitionedTable,
  partition: PartitionRange,
): Promise<'dropped' | KeptPartition['reason']> {
  const sql = partitionSql(schema);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(`SET LOCAL lock_timeout = ${DROP_LOCK_TIMEOUT_MS}`);
    // Parent first, as every query on the table takes them: the other order deadlocks with a relay's claim.
    await client.query(sql.lockExclusive(table));
    await client.query(sql.lockExclusive(partition.name));
    if (table === 'outbox') {
      const { rows } = await client.query<{ held: boolean }>(sql.unpublishedIn(partition.name));
      if (rows[0]!.held) {
        await client.query('ROLLBACK');
        return 'unpublished-rows';
      }
    }
    await client.query(sql.detach(table, partition.name));
    await client.query(sql.drop(partition.name));
    await commit(client);
    return 'dropped';
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    if ((err as { code?: string }).code === '55P03') return 'lock-timeout';
    throw err;
  } finally {
    client.release();
  }
}
