import type pg from 'pg';
import { runStatement } from '../db/statement.js';
import { backoffDelay, type BackoffPolicy } from '../runtime/backoff.js';
import type { Logger } from '../runtime/logger.js';
import { isRowRefused, refusalReason } from '../runtime/row-refused.js';
import type { ResolvedRelayOptions } from './options.js';
import type { relaySql } from './sql.js';

/**
 * Rows PostgreSQL refused even to mark failed (a rule that binds failed rows too): left pending and
 * out of every claim until their backoff ends. Times are passed in, so this is tested without clocks.
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

  /** Positions still inside their backoff, to leave out of a claim. */
  excluded(now: number): string[] {
    return [...this.#rows].flatMap(([position, { until }]) => (until > now ? [position] : []));
  }

  /** The row was written after all (marked, rescheduled or failed): forget it. */
  forget(position: string): void {
    this.#rows.delete(position);
  }
}

export interface SetAsideContext {
  pool: pg.Pool;
  sql: ReturnType<typeof relaySql>;
  logger: Logger;
  relayId: string;
  owner: string | null;
  skipped: SkippedRows;
}

/** A relay's set-aside context: an exclusive relay writes no claim, so its owner is null (claim.ts). */
export function setAsideContext(
  pool: pg.Pool,
  sql: ReturnType<typeof relaySql>,
  options: ResolvedRelayOptions,
): SetAsideContext {
  const owner = options.claim === 'exclusive' ? null : options.relayId;
  const { logger, relayId, backoff } = options;
  return { pool, sql, logger, relayId, owner, skipped: new SkippedRows(backoff) };
}

/**
 * One row the table refused (err, class 23): marked failed with the constraint named, so the rest
 * of the outbox flows and an operator sees why (`converge status`). If even that is refused, it is
 * skipped with backoff. True when it was marked failed.
 */
export async function setAside(ctx: SetAsideContext, position: string, err: unknown): Promise<boolean> {
  const reason = refusalReason(err);
  try {
    const { rows } = await runStatement<{ event_id: string }>(ctx.pool, ctx.sql.markRefused, [
      position,
      reason,
      ctx.owner,
    ]);
    ctx.skipped.forget(position);
    if (rows[0])
      ctx.logger.error(
        { relayId: ctx.relayId, eventId: rows[0].event_id, reason },
        'outbox row refused by the table: set aside as failed, the rest flows',
      );
    return rows.length > 0;
  } catch (markErr) {
    if (!isRowRefused(markErr)) throw markErr;
    const delayMs = ctx.skipped.skip(position, performance.now());
    ctx.logger.warn(
      { relayId: ctx.relayId, position, reason, markReason: refusalReason(markErr), delayMs },
      'outbox row refused by the table, and refused to be marked failed too: skipped, tried again after the delay',
    );
    return false;
  }
}

/**
 * Runs a statement over rows at once; if the table refuses one of them, runs it row by row and sets
 * aside the refused ones, so one row never stops the others. Returns what the statement returned,
 * how many rows were refused, and how many of those were marked failed (the others are skipped).
 */
export async function eachUnlessRefused<R>(
  ctx: SetAsideContext,
  positions: string[],
  run: (positions: string[]) => Promise<R[]>,
): Promise<{ rows: R[]; failed: number; refused: number }> {
  try {
    return { rows: await run(positions), failed: 0, refused: 0 };
  } catch (err) {
    if (!isRowRefused(err) || positions.length === 0) throw err;
  }
  const rows: R[] = [];
  let failed = 0;
  let refused = 0;
  for (const position of positions) {
    try {
      rows.push(...(await run([position])));
    } catch (err) {
      if (!isRowRefused(err)) throw err;
      refused++;
      if (await setAside(ctx, position, err)) failed++;
    }
  }
  return { rows, failed, refused };
}
