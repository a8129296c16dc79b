import type pg from 'pg';
import { runStatement } from '../../db/statement.js';
import { eachUnlessRefused, isRowRefused } from '../../runtime/row-refused.js';
import type { cdcSql } from '../sql.js';

/** A confirmed event whose row is still to be marked, with the transaction that inserted it (id, commit LSN). */
export interface PendingMark {
  position: string;
  eventId: string;
  xid: number;
  commitLsn: string;
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

/** A row the table refused to mark (class 23), with PostgreSQL's error: to be set aside (held.ts). */
export interface RefusedMark<T extends PendingMark = PendingMark> {
  item: T;
  err: unknown;
}

type CdcStatements = ReturnType<typeof cdcSql>;

/**
 * Marks confirmed rows published. `waiting` are rows the mark did not see although they are
 * still pending (their transaction was not visible to it yet: the stream can be ahead of a
 * commit's visibility): the slot must not be acknowledged past them until a later try marks them.
 * `refused`: rows the table refused to mark; if there are any, the others are marked row by row.
 */
export async function markPublished(
  pool: pg.Pool,
  sql: CdcStatements,
  marks: readonly PendingMark[],
  afterIncompleteMark?: () => Promise<void>,
): Promise<{ marked: string[]; waiting: PendingMark[]; refused: RefusedMark[] }> {
  const { rows, refused } = await eachUnlessRefused(
    marks,
    async (these) =>
      (await runStatement<{ event_id: string }>(pool, sql.markPublished, [these.map((m) => m.position)])).rows,
  );
  const marked = rows.map((r) => r.event_id);
  if (marked.length + refused.length === marks.length) return { marked, waiting: [], refused };
  const done = new Set([...marked, ...refused.map((r) => r.item.eventId)]);
  const missing = marks.filter((m) => !done.has(m.eventId));
  await afterIncompleteMark?.();
  return { marked, waiting: await stillToMark(pool, sql, missing), refused };
}

/** Marks one row failed; `waiting` when its transaction is not visible yet (try again later); `refused` by the table. */
export async function markFailed(
  pool: pg.Pool,
  sql: CdcStatements,
  fail: PendingFail,
  afterIncompleteMark?: () => Promise<void>,
): Promise<{ failed: RetryRow | undefined; waiting: boolean; refused?: unknown }> {
  let rows: RetryRow[];
  try {
    ({ rows } = await runStatement<RetryRow>(pool, sql.markUnencodable, [fail.position, fail.error]));
  } catch (err) {
    if (!isRowRefused(err)) throw err;
    return { failed: undefined, waiting: false, refused: err };
  }
  if (rows[0]) return { failed: rows[0], waiting: false };
  await afterIncompleteMark?.();
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

/** The row as the stream sent it, with the stops of the stream at it the table refused to count. */
export interface StoppedRow {
  position: string;
  event_id: string;
  attempts: number;
  broker_retries: number;
}

/**
 * Counts one stop of the stream at `row` (countRetry): a return as an attempt (`charged`), else a
 * broker retry. If the table refuses the write (class 23), the stops are counted in `uncounted`
 * (the relay's, so across sessions) instead, so the backoff still grows; `refused` is the error.
 */
export async function countRetry(
  pool: pg.Pool,
  sql: CdcStatements,
  uncounted: Map<string, number>,
  stop: { row: StoppedRow; code: string; charged: boolean },
): Promise<{ counted: RetryRow; refused?: unknown }> {
  const { row, code, charged } = stop;
  const streamed = { event_id: row.event_id, attempts: row.attempts, broker_retries: row.broker_retries };
  try {
    const { rows } = await runStatement<RetryRow>(pool, sql.countRetry, [row.position, code, charged]);
    uncounted.delete(row.position);
    return { counted: rows[0] ?? streamed };
  } catch (err) {
    if (!isRowRefused(err)) throw err;
    const stops = (uncounted.get(row.position) ?? 0) + 1;
    uncounted.set(row.position, stops);
    const attempts = streamed.attempts + (charged ? stops : 0);
    return {
      counted: { ...streamed, attempts, broker_retries: streamed.broker_retries + (charged ? 0 : stops) },
      refused: err,
    };
  }
}

export function retryInfo(row: RetryRow, reason: string) {
  return { eventId: row.event_id, attempts: row.attempts, brokerRetries: row.broker_retries, reason };
}
