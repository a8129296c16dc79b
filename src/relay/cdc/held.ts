import type pg from 'pg';
import { runStatement } from '../../db/statement.js';
import type { BackoffPolicy } from '../../runtime/backoff.js';
import type { Logger } from '../../runtime/logger.js';
import { setAsideRow, SkippedRows, type SetAsideTarget } from '../../runtime/row-refused.js';
import { parseLsn } from './lsn.js';
import type { PendingFail, PendingMark, RefusedMark } from './marks.js';
import type { cdcSql } from '../sql.js';

export type HeldMark = PendingMark | PendingFail;

/**
 * Confirmed rows whose mark the table refused (class 23, e.g. a NOT VALID check an old row
 * breaks). Each is set aside as failed with the constraint named, and the rest are marked as
 * usual. A row refused even that stays pending and is held: its mark is tried again after a
 * backoff (one log line each), and the slot is acknowledged no further than its transaction's
 * commit meanwhile. Its event is published already, but acknowledging past it would leave the row
 * pending for good: the slot would never send it again, so nothing would ever mark it.
 */
export class HeldMarks {
  readonly #held = new Map<string, HeldMark>();
  readonly #skipped: SkippedRows;
  readonly #target: SetAsideTarget;

  constructor(
    pool: pg.Pool,
    sql: ReturnType<typeof cdcSql>,
    context: { logger: Logger; relayId: string; backoff: BackoffPolicy },
  ) {
    this.#skipped = new SkippedRows(context.backoff);
    this.#target = {
      logger: context.logger,
      relayId: context.relayId,
      skipped: this.#skipped,
      markRefused: async (position, reason) =>
        (await runStatement<{ event_id: string }>(pool, sql.markRefused, [position, reason])).rows[0]?.event_id,
    };
  }

  /** Sets the refused rows aside; the ones refused again are held. */
  async setAside(refused: readonly RefusedMark<HeldMark>[]): Promise<void> {
    for (const { item, err } of refused)
      if ((await setAsideRow(this.#target, item.position, err)) === 'skipped') this.#held.set(item.position, item);
  }

  /** Held rows whose backoff has ended, taken out to be marked again (settle() them after). */
  due(now: number): HeldMark[] {
    const waiting = new Set(this.#skipped.excluded(now));
    const due = [...this.#held.values()].filter((held) => !waiting.has(held.position));
    for (const held of due) this.#held.delete(held.position);
    return due;
  }

  /** After a try of `due`: the ones not held again were written, their backoff is forgotten. */
  settle(due: readonly HeldMark[]): void {
    for (const held of due) if (!this.#held.has(held.position)) this.#skipped.forget(held.position);
  }

  /** Puts rows back that a failed flush took out, with their backoff as it was. */
  restore(due: readonly HeldMark[]): void {
    for (const held of due) this.#held.set(held.position, held);
  }

  /**
   * How far the slot may be flushed instead of `flushTo`: at most to the commit LSN of the first
   * held transaction, which PostgreSQL then sends again (it skips only commits below the flush).
   */
  cap(flushTo: bigint): bigint {
    let cap = flushTo;
    for (const held of this.#held.values()) {
      const commit = parseLsn(held.commitLsn);
      if (commit < cap) cap = commit;
    }
    return cap;
  }

  get size(): number {
    return this.#held.size;
  }
}
