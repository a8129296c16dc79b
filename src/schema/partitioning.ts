import type pg from 'pg';
import type { Executor } from '../db/executor.js';
import { commit } from '../db/transaction.js';
import { ConfigError } from '../runtime/errors.js';
import type { SchemaRef } from '../runtime/identifier.js';
import {
  PARTITIONED_TABLES,
  intervalStart,
  partitionName,
  partitionsToCreate,
  type PartitionRange,
  type PartitionedTable,
} from './partition-plan.js';
import { partitionSql } from './partition-sql.js';
import { migrateSql } from './sql.js';
import { migrations } from './migrations.js';

/** The statements of the migration that makes outbox inserts send NOTIFY (2). */
function notifyMigration(schema: SchemaRef): string[] {
  return migrations.find((migration) => migration.version === 2)!.statements(schema);
}

/** The server's clock, which stamps created_at and received_at: partitions follow it, not this host's. */
export async function databaseNow(executor: Executor): Promise<number> {
  const { rows } = await executor.query<{ now_ms: number }>(
    'SELECT extract(epoch FROM now())::float8 * 1000 AS now_ms',
  );
  return Number(rows[0]!.now_ms);
}

/** How a partitioned table rolls: one partition per `intervalMs`, `ahead` of them made before they are needed. */
export interface PartitionLayout {
  table: PartitionedTable;
  intervalMs: number;
  ahead: number;
  storage: string[] | null;
}

export interface Partitioning {
  intervalMs: number;
  ahead: number;
}

const TABLES = Object.keys(PARTITIONED_TABLES) as PartitionedTable[];

/** The layouts of a partitioned schema, or an empty list for the plain layout. */
export async function readPartitionLayout(executor: Executor, schema: SchemaRef): Promise<PartitionLayout[]> {
  const sql = partitionSql(schema);
  const probe = await executor.query<{ present: boolean }>(sql.layoutExists, [`${schema.quoted}.partition_layout`]);
  if (!probe.rows[0]?.present) return [];
  const { rows } = await executor.query<{
    table_name: PartitionedTable;
    interval_ms: number;
    ahead: number;
    storage: string[] | null;
  }>(sql.readLayout);
  return rows.map((row) => ({
    table: row.table_name,
    intervalMs: Number(row.interval_ms),
    ahead: row.ahead,
    storage: row.storage,
  }));
}

/** The partitions of one table with their ranges. */
export async function listPartitions(
  executor: Executor,
  schema: SchemaRef,
  table: PartitionedTable,
): Promise<PartitionRange[]> {
  const sql = partitionSql(schema);
  const { rows } = await executor.query<{ name: string; from_ms: number | null; to_ms: number }>(sql.listPartitions, [
    sql.quotedTable(table),
  ]);
  return rows.map((row) => ({
    name: row.name,
    fromMs: row.from_ms === null ? null : Number(row.from_ms),
    toMs: Number(row.to_ms),
  }));
}

/**
 * Turns the plain outbox and inbox into range partitions by time, on the migration's transaction
 * (its advisory lock held). Rows are not copied: each table becomes the first partition of its
 * new parent, `<table>_legacy`, covering everything up to the end of the current interval, and
 * goes once retention finds it fully processed. Idempotent; changing the interval is refused.
 */
export async function convertToPartitions(
  client: pg.ClientBase,
  schema: SchemaRef,
  partitioning: Partitioning,
  nowMs: number,
): Promise<PartitionedTable[]> {
  const sql = partitionSql(schema);
  await client.query(sql.createLayout);
  const existing = await readPartitionLayout(client, schema);
  const converted: PartitionedTable[] = [];
  for (const table of TABLES) {
    const layout = existing.find((l) => l.table === table);
    if (layout !== undefined) {
      if (layout.intervalMs !== partitioning.intervalMs)
        throw new ConfigError(
          'partitioned.intervalMs',
          `${table} is partitioned by ${layout.intervalMs} ms; changing the interval of a partitioned schema is not supported`,
        );
      continue;
    }
    await convertTable(client, schema, table, partitioning, nowMs);
    converted.push(table);
  }
  await createMissing(client, schema, nowMs);
  return converted;
}

async function convertTable(
  client: pg.ClientBase,
  schema: SchemaRef,
  table: PartitionedTable,
  partitioning: Partitioning,
  nowMs: number,
): Promise<void> {
  const sql = partitionSql(schema);
  const legacy = `${table}_legacy`;
  if (table === 'outbox') await client.query(sql.addCreatedAt);
  const facts = await tableFacts(client, schema, table);
  const publications = await client.query<{ pubname: string }>(sql.publicationsOf, [sql.quotedTable(table)]);
  await client.query(sql.renameTable(table, legacy));
  // The parent takes over the index names; the converted table's own indexes serve only its rows.
  for (const index of facts.indexNames) await client.query(sql.renameIndex(index, legacyIndexName(index, table)));
  if (table === 'outbox') await client.query(sql.dropNotifyTrigger(legacy));
  await client.query(sql.createParent(table, legacy));
  if (facts.sequence !== null) await client.query(sql.ownSequence(facts.sequence));
  // Same definitions as the converted table's, so ATTACH adopts those indexes instead of building them.
  for (const index of facts.indexes) await client.query(index);
  for (const grant of facts.grants) await client.query(grant);
  await client.query(table === 'outbox' ? sql.outboxGuard : sql.inboxGuard);
  await client.query(sql.guardTrigger(table));
  // Migration 2's NOTIFY trigger, applied again: it now lands on the new parent.
  if (table === 'outbox') for (const statement of notifyMigration(schema)) await client.query(statement);
  const until = intervalStart(nowMs, partitioning.intervalMs) + partitioning.intervalMs;
  await client.query(sql.attachLegacy(table, legacy, new Date(until).toISOString()));
  for (const { pubname } of publications.rows)
    for (const statement of sql.movePublication(pubname, legacy, table)) await client.query(statement);
  await client.query(sql.recordLayout, [table, partitioning.intervalMs, partitioning.ahead, facts.storage]);
}

interface TableFacts {
  storage: string[] | null;
  indexes: string[];
  indexNames: string[];
  grants: string[];
  sequence: string | null;
}

async function tableFacts(client: pg.ClientBase, schema: SchemaRef, table: PartitionedTable): Promise<TableFacts> {
  const sql = partitionSql(schema);
  const { rows } = await client.query<{
    storage: string[] | null;
    indexes: string[];
    index_names: string[];
    grants: string[];
    sequence: string | null;
  }>(sql.tableFacts, [sql.quotedTable(table)]);
  const row = rows[0]!;
  return {
    storage: row.storage,
    indexes: row.indexes,
    indexNames: row.index_names,
    grants: row.grants,
    sequence: row.sequence,
  };
}

/** `outbox_pending_idx` → `outbox_legacy_pending_idx`, within PostgreSQL's 63 bytes. */
export function legacyIndexName(index: string, table: PartitionedTable): string {
  const rest = index.startsWith(`${table}_`) ? index.slice(table.length + 1) : index;
  return `${table}_legacy_${rest}`.slice(0, 63);
}

/**
 * Creates the partitions `now` and the next `ahead` intervals need, each in its own transaction
 * with its local keys, under the migration lock so two relays never race for one. Returns their
 * names. Does nothing on a schema that is not partitioned.
 */
export async function ensurePartitions(pool: pg.Pool, schema: SchemaRef, nowMs?: number): Promise<string[]> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(migrateSql(schema).lock, [schema.name]);
    const created = await createMissing(client, schema, nowMs ?? (await databaseNow(client)));
    await commit(client);
    return created;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

async function createMissing(client: pg.ClientBase, schema: SchemaRef, nowMs: number): Promise<string[]> {
  const sql = partitionSql(schema);
  const created: string[] = [];
  for (const layout of await readPartitionLayout(client, schema)) {
    const existing = await listPartitions(client, schema, layout.table);
    for (const fromMs of partitionsToCreate(existing, nowMs, layout.intervalMs, layout.ahead)) {
      const name = partitionName(layout.table, fromMs);
      const from = new Date(fromMs).toISOString();
      const to = new Date(fromMs + layout.intervalMs).toISOString();
      await client.query(sql.createPartition(layout.table, name, from, to, layout.storage));
      await client.query(sql.localKeys(layout.table, name));
      created.push(name);
    }
  }
  return created;
}
