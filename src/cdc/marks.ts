import type pg from 'pg';
import { runStatement } from '../db/statement.js';
import type { cdcSql } from './sql.js';

/** A confirmed event whose row is still to be marked, with the id of the transaction that inserted it. */
export interface PendingMark {
  position: string;
  eventId: string;
  xid: number;
}

/** An event no consumer could accept, to be marked failed with why. */
export interface PendingFail extends PendingMark {
  error: string;
}

export interface RetryRow {
  event_id: string;
  attempts: number;
  broker_retries: number;
}

type CdcStatements = ReturnType<typeof cdcSql>;

/**
 * Marks confirmed rows published. `waiting` are the rows whose inserting transaction is not
 * visible yet (the stream can be ahead of the commit's visibility): they are neither marked nor
 * done, and the slot must not be acknowledged past them until a later try marks them.
 */
export async function markPublished(
  pool: pg.Pool,
  sql: CdcStatements,
  marks: readonly PendingMark[],
): Promise<{ marked: string[]; waiting: PendingMark[] }> {
  const { rows } = await runStatement<{ event_id: string }>(pool, sql.markPublished, [marks.map((m) => m.position)]);
  const marked = rows.map((r) => r.event_id);
  if (marked.length === marks.length) return { marked, waiting: [] };
  const found = new Set(marked);
  return {
    marked,
    waiting: await notYetVisible(
      pool,
      sql,
      marks.filter((m) => !found.has(m.eventId)),
    ),
  };
}

/** Marks one row failed; `waiting` when its transaction is not visible yet (try again later). */
export async function markFailed(
  pool: pg.Pool,
  sql: CdcStatements,
  fail: PendingFail,
): Promise<{ failed: RetryRow | undefined; waiting: boolean }> {
  const { rows } = await runStatement<RetryRow>(pool, sql.markUnencodable, [fail.position, fail.error]);
  if (rows[0]) return { failed: rows[0], waiting: false };
  return { failed: undefined, waiting: (await notYetVisible(pool, sql, [fail])).length > 0 };
}

/** Rows a statement did not find: the ones still invisible, rather than marked by someone else or deleted. */
async function notYetVisible<T extends PendingMark>(
  pool: pg.Pool,
  sql: CdcStatements,
  missing: readonly T[],
): Promise<T[]> {
  if (missing.length === 0) return [];
  const { rows } = await runStatement<{ position: string }>(pool, sql.notYetVisible, [
    missing.map((m) => m.position),
    missing.map((m) => m.xid),
  ]);
  const invisible = new Set(rows.map((r) => r.position));
  return missing.filter((m) => invisible.has(m.position));
}
