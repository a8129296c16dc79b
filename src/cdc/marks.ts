import type pg from 'pg';
import { runStatement } from '../db/statement.js';
import type { cdcSql } from './sql.js';
import { cdcTestHooks } from './test-hooks.js';

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
 * Marks confirmed rows published. `waiting` are rows the mark did not see although they are
 * still pending (their transaction was not visible to it yet: the stream can be ahead of a
 * commit's visibility): the slot must not be acknowledged past them until a later try marks them.
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
  const missing = marks.filter((m) => !found.has(m.eventId));
  await cdcTestHooks.afterIncompleteMark?.();
  return { marked, waiting: await stillToMark(pool, sql, missing) };
}

/** Marks one row failed; `waiting` when its transaction is not visible yet (try again later). */
export async function markFailed(
  pool: pg.Pool,
  sql: CdcStatements,
  fail: PendingFail,
): Promise<{ failed: RetryRow | undefined; waiting: boolean }> {
  const { rows } = await runStatement<RetryRow>(pool, sql.markUnencodable, [fail.position, fail.error]);
  if (rows[0]) return { failed: rows[0], waiting: false };
  await cdcTestHooks.afterIncompleteMark?.();
  return { failed: undefined, waiting: (await stillToMark(pool, sql, [fail])).length > 0 };
}

/**
 * Of the rows a statement did not change, the ones to try again: still invisible, or visible and
 * pending since (the statement's snapshot was taken first), rather than marked by someone else or deleted.
 */
async function stillToMark<T extends PendingMark>(
  pool: pg.Pool,
  sql: CdcStatements,
  missing: readonly T[],
): Promise<T[]> {
  if (missing.length === 0) return [];
  const { rows } = await runStatement<{ position: string }>(pool, sql.stillToMark, [
    missing.map((m) => m.position),
    missing.map((m) => m.xid),
  ]);
  const again = new Set(rows.map((r) => r.position));
  return missing.filter((m) => again.has(m.position));
}
