import type { QueryResultLike } from '../db/executor.js';
import { NoRowsWrittenError, type WrittenFor } from '../runtime/errors.js';
import { reportBlocked } from './guard.js';

/**
 * What a projection write callback returns: the query result of its write (its `rowCount`
 * counts), a number of rows it changed, or `'unchanged'` for an event that legitimately
 * changes no row (a type this read model ignores, a delete of a row already gone); the
 * version advances either way. A callback that returns nothing does not compile: an UPDATE
 * that found no row must not pass for a write.
 */
export type WriteResult = QueryResultLike<unknown> | number | 'unchanged';

/**
 * Throws NoRowsWrittenError (reported on `tx` like a version gap, so the consumer rolls back
 * even if the handler catches it) when `result` counts fewer than `expected` rows. A null
 * rowCount counts as 0; so does anything that is not a WriteResult (a JavaScript caller's
 * `undefined`), which keeps a missing return loud at runtime too.
 */
export function checkWrite(
  tx: object,
  result: WriteResult,
  expected: number,
  projection: string,
  writtenFor: WrittenFor,
): void {
  if (result === 'unchanged') return;
  const rows = rowsOf(result);
  if (rows >= expected) return;
  throw reportBlocked(tx, new NoRowsWrittenError(projection, rows, expected, writtenFor));
}

function rowsOf(result: unknown): number {
  if (typeof result === 'number') return Number.isFinite(result) ? result : 0;
  const count = (result as { rowCount?: unknown } | null | undefined)?.rowCount;
  return typeof count === 'number' ? count : 0;
}
