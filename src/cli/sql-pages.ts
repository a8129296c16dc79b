import type pg from 'pg';
import type { Executor } from '../db/executor.js';
import { ConfigError } from '../runtime/errors.js';
import type { PagedReader, ReconcileRow } from '../reconcile/index.js';

// Adapters from SQL text given on the command line to the reader and writer functions that
// reconcile() and rebuildProjection() take.

/** A page query given as text: `$1` the id to start after ('' at the start), `$2` the page size. */
export function sqlReader(pool: pg.Pool, text: string): PagedReader {
  return async (after, limit) => {
    const { rows } = await pool.query<Record<string, unknown>>(text, [after ?? '', limit]);
    return rows.map(toRow);
  };
}

/** A single-row query given as text: `$1` the id; null when the row does not exist. */
export function sqlLookup(pool: pg.Pool, text: string): (id: string) => Promise<ReconcileRow | null> {
  return async (id) => {
    const { rows } = await pool.query<Record<string, unknown>>(text, [id]);
    return rows[0] ? toRow(rows[0]) : null;
  };
}

function toRow(raw: Record<string, unknown>): ReconcileRow {
  const { id, version, deleted, ...fields } = raw;
  if (id === undefined || version === undefined)
    throw new ConfigError('source-sql', 'the page query must return the columns id and version');
  return {
    id: idText(id),
    version: Number(version),
    deleted: deleted === true,
    ...(Object.keys(fields).length > 0 ? { fields } : {}),
  };
}

/**
 * The user's write statement with its four parameters typed up front (a statement that does
 * not use all four would otherwise fail with "could not determine data type"); the row is
 * also available as the CTE `converge_row (id, version, fields, deleted)`.
 */
export function applyStatement(applySql: string): (tx: Executor, row: ReconcileRow) => Promise<void> {
  const typed = 'converge_row (id, version, fields, deleted) AS (SELECT $1::text, $2::bigint, $3::jsonb, $4::boolean)';
  const leadingWith = /^\s*with\s+(recursive\s+)?/i.exec(applySql);
  const text = leadingWith
    ? `WITH ${leadingWith[1] ?? ''}${typed}, ${applySql.slice(leadingWith[0].length)}`
    : `WITH ${typed} ${applySql}`;
  return async (tx, row) => {
    await tx.query(text, [row.id, row.version, JSON.stringify(row.fields ?? {}), row.deleted ?? false]);
  };
}

/** Ids are compared as text (COLLATE "C"); pg hands text, uuid and bigint columns over as strings, int as numbers. */
function idText(id: unknown): string {
  if (typeof id === 'string') return id;
  if (typeof id === 'number' || typeof id === 'bigint') return id.toString();
  throw new ConfigError('source-sql', 'the page query must return id as text or a number');
}
