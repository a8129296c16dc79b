import type pg from 'pg';
import { runStatement } from '../db/statement.js';
import type { Logger } from '../runtime/logger.js';
import {
  eachUnlessRefused as eachItemUnlessRefused,
  setAsideRow,
  SkippedRows,
  type SetAsideTarget,
} from '../runtime/row-refused.js';
import type { ResolvedRelayOptions } from './options.js';
import type { relaySql } from './sql.js';

// The pure part is shared with the CDC relay (src/runtime/row-refused.ts); this file binds it to the relay's claim.
export { SkippedRows };

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

function target(ctx: SetAsideContext): SetAsideTarget {
  return {
    logger: ctx.logger,
    relayId: ctx.relayId,
    skipped: ctx.skipped,
    markRefused: async (position, reason) => {
      const { rows } = await runStatement<{ event_id: string }>(ctx.pool, ctx.sql.markRefused, [
        position,
        reason,
        ctx.owner,
      ]);
      return rows[0]?.event_id;
    },
  };
}

/**
 * One row the table refused (err, class 23): marked failed with the constraint named, or, if even
 * that is refused, skipped with backoff (left out of claims meanwhile). True when it was marked failed.
 */
export async function setAside(ctx: SetAsideContext, position: string, err: unknown): Promise<boolean> {
  return (await setAsideRow(target(ctx), position, err)) === 'failed';
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
  const { rows, refused } = await eachItemUnlessRefused(positions, run);
  let failed = 0;
  for (const { item, err } of refused) if (await setAside(ctx, item, err)) failed++;
  return { rows, failed, refused: refused.length };
}
