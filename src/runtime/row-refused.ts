/**
 * A row PostgreSQL refuses to write: an integrity constraint violation (SQLSTATE class 23: a check,
 * a unique key, a foreign key, NOT NULL). For an outbox row that is a fact about the row, not the
 * database: retrying the same statement fails the same way, so the row is set aside as failed with
 * the constraint named, and the rows beside it go on (src/relay, src/cdc, migration 17).
 */

import { backoffDelay, type BackoffPolicy } from './backoff.js';
import type { Logger } from './logger.js';

/** The last_error prefix of an outbox row the table's rules refuse. */
export const ROW_REFUSED = 'CONVERGE_OUTBOX_ROW_REFUSED';

interface PgErrorFields {
  code?: unknown;
  constraint?: unknown;
}

/** Whether an error is PostgreSQL refusing a row (class 23), as opposed to the database failing. */
export function isRowRefused(err: unknown): boolean {
  const code = (err as PgErrorFields | null)?.code;
  return typeof code === 'string' && /^23[0-9A-Z]{3}$/.test(code);
}

/** A constraint name fit for a log line or last_error: an identifier, bounded, else left out. */
export function constraintName(err: unknown): string | undefined {
  const name = (err as PgErrorFields | null)?.constraint;
  return typeof name === 'string' && /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/.test(name) ? name : undefined;
}

/**
 * Why a row was refused, for its last_error: the code, the constraint and the SQLSTATE. Never the
 * error's message or detail: PostgreSQL's detail quotes the failing row, payload and all.
 */
export function refusalReason(err: unknown): string {
  const code = String((err as PgErrorFields | null)?.code);
  const name = constraintName(err);
  return `${ROW_REFUSED}: ${name ? `constraint ${name}` : 'an integrity rule'} (SQLSTATE ${code})`;
}

/**
 * Rows PostgreSQL refused even to mark failed (a rule that binds failed rows too): left pending and
 * tried again once their backoff ends. Times are passed in, so this is tested without clocks.
 */
export class SkippedRows {
  readonly #rows = new Map<string, { until: number; times: number }>();

  constructor(private readonly backoff: BackoffPolicy) {}

  /** Skips the row for its next backoff; returns the delay (one log line per delay, never a tight loop). */
  skip(position: string, now: number, random: () => number = Math.random): number {
    const times = (this.#rows.get(position)?.times ?? 0) + 1;
    const delay = backoffDelay(times, this.backoff, random);
    this.#rows.set(position, { until: now + delay, times });
    return delay;
  }

  /** Positions still inside their backoff, to leave out of a claim or a try. */
  excluded(now: number): string[] {
    return [...this.#rows].flatMap(([position, { until }]) => (until > now ? [position] : []));
  }

  /** The row was written after all (marked, rescheduled or failed): forget it. */
  forget(position: string): void {
    this.#rows.delete(position);
  }
}

/** What setting a row aside needs: how to mark it failed with a reason (its event id, or undefined if no row changed). */
export interface SetAsideTarget {
  logger: Logger;
  relayId: string;
  skipped: SkippedRows;
  markRefused: (position: string, reason: string) => Promise<string | undefined>;
}

/** `failed`: marked failed; `gone`: no longer the relay's to mark (written by someone else); `skipped`: refused again, left pending. */
export type SetAsideOutcome = 'failed' | 'gone' | 'skipped';

/**
 * One row the table refused (err, class 23): marked failed with the constraint named, so the rest
 * of the outbox flows and an operator sees why (`converge status`). If even that is refused, it is
 * skipped with backoff, one log line per backoff.
 */
export async function setAsideRow(target: SetAsideTarget, position: string, err: unknown): Promise<SetAsideOutcome> {
  const reason = refusalReason(err);
  try {
    const eventId = await target.markRefused(position, reason);
    target.skipped.forget(position);
    if (eventId === undefined) return 'gone';
    target.logger.error(
      { relayId: target.relayId, eventId, reason },
      'outbox row refused by the table: set aside as failed, the rest flows',
    );
    return 'failed';
  } catch (markErr) {
    if (!isRowRefused(markErr)) throw markErr;
    const delayMs = target.skipped.skip(position, performance.now());
    target.logger.warn(
      { relayId: target.relayId, position, reason, markReason: refusalReason(markErr), delayMs },
      'outbox row refused by the table, and refused to be marked failed too: skipped, tried again after the delay',
    );
    return 'skipped';
  }
}

/**
 * Runs a statement over items at once; if the table refuses one of them, runs it item by item, so
 * one row never stops the others. Returns what the statement returned and the refused items with
 * their errors, for the caller to set aside.
 */
export async function eachUnlessRefused<T, R>(
  items: readonly T[],
  run: (items: T[]) => Promise<R[]>,
): Promise<{ rows: R[]; refused: { item: T; err: unknown }[] }> {
  try {
    return { rows: await run([...items]), refused: [] };
  } catch (err) {
    if (!isRowRefused(err) || items.length === 0) throw err;
  }
  const rows: R[] = [];
  const refused: { item: T; err: unknown }[] = [];
  for (const item of items) {
    try {
      rows.push(...(await run([item])));
    } catch (err) {
      if (!isRowRefused(err)) throw err;
      refused.push({ item, err });
    }
  }
  return { rows, refused };
}
