import type { QueryResultLike } from '../db/executor.js';
import { NoRowsWrittenError, type WrittenFor } from '../runtime/errors.js';
import { reportBlocked } from './guard.js';

/**
 * The row counts the drivers and ORMs converge has adapters for report, each under its own name,
 * so a write callback returns what its library gave it and converts nothing by hand.
 */
export type AffectedRows =
  /** node-postgres and Drizzle's node-postgres driver (a null rowCount counts as 0). */
  | QueryResultLike<unknown>
  /** Kysely: insert (`numInsertedOrUpdatedRows`), update, delete, and a raw `sql` query (`numAffectedRows`). */
  | { readonly numInsertedOrUpdatedRows?: bigint | undefined }
  | { readonly numUpdatedRows: bigint }
  | { readonly numDeletedRows: bigint }
  | { readonly numAffectedRows?: bigint | undefined }
  /** TypeORM: update and delete (`affected`), insert and upsert (one identifier per row). */
  | { readonly affected?: number | null | undefined }
  | { readonly identifiers: readonly unknown[] }
  /** MikroORM: a query builder or `execute(..., 'run')` result. */
  | { readonly affectedRows: number };

/**
 * What a projection write callback returns: its library's result (AffectedRows), the rows a
 * `RETURNING` gave back (an array: its length counts, or the sum of the counts it holds, as
 * Kysely's `execute()` returns), a number of rows it changed, or `'unchanged'` for an event that
 * legitimately changes no row (a type this read model ignores, a delete of a row already gone);
 * the version advances either way. A callback that returns nothing does not compile: an UPDATE
 * that found no row must not pass for a write.
 */
export type WriteResult = AffectedRows | readonly unknown[] | number | bigint | 'unchanged';

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

/** Where each library puts its count; the first present one counts. */
const COUNT_FIELDS = [
  'rowCount',
  'numInsertedOrUpdatedRows',
  'numUpdatedRows',
  'numDeletedRows',
  'numAffectedRows',
  'affected',
  'affectedRows',
] as const;

/** Rows a WriteResult counts; anything unrecognised (a JavaScript caller's `undefined`) counts 0. */
export function rowsOf(result: unknown): number {
  if (typeof result === 'number') return Number.isFinite(result) ? result : 0;
  if (typeof result === 'bigint') return Number(result);
  if (Array.isArray(result)) {
    const counted = result.length > 0 && result.every((item) => countField(item) !== undefined);
    return counted ? result.reduce<number>((sum, item) => sum + rowsOf(item), 0) : result.length;
  }
  const field = countField(result);
  if (field !== undefined) return countOf((result as Record<string, unknown>)[field]);
  const identifiers = (result as { identifiers?: unknown } | null | undefined)?.identifiers;
  return Array.isArray(identifiers) ? identifiers.length : 0;
}

function countField(value: unknown): (typeof COUNT_FIELDS)[number] | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  return COUNT_FIELDS.find((field) => field in value);
}

function countOf(value: unknown): number {
  if (typeof value === 'bigint') return Number(value);
  return typeof value === 'number' && Number.isFinite(value) ? value : 0;
}
