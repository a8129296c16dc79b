import pg from 'pg';
import { z } from 'zod';
import type { Executor } from '../db/executor.js';

import { schemaRef } from '../runtime/identifier.js';
import { defineOptions, schemaOption } from '../runtime/options.js';
import { constraintName, isRowRefused, refusalReason } from '../runtime/row-refused.js';
import { opsSql } from './sql.js';

export const retryFailedOptions = defineOptions(
  'retryFailedEvents',
  z.strictObject({
    schema: schemaOption,
    eventId: z.string().min(1).optional().describe('Only this event.'),
  }),
);

/** A failed row the table refused to put back to pending: it stays failed, its last_error says why. */
export interface RetryRefusedRow {
  /** The row's outbox position (its primary key), as text: a bigint. */
  position: string;
  eventId: string;
  /** The constraint PostgreSQL named, when it is a plain identifier. */
  constraint: string | null;
  /** The SQLSTATE (class 23, e.g. 23514 for a check). */
  sqlState: string;
  /** What last_error now holds (unless even that was refused): a code and a constraint, never a value of the row. */
  reason: string;
}

export interface RetryFailedResult {
  /** eventIds put back to pending, in position order when retried row by row. */
  retried: string[];
  /** Rows the table's rules refuse as pending (a value breaks a rule): left failed, to be fixed first. */
  refused: RetryRefusedRow[];
}

type Sql = ReturnType<typeof opsSql>;

/**
 * Sends failed outbox events (all, or one by id) through the relay again, with their original
 * eventIds. One set-based UPDATE first; if the table refuses it (class 23: a failed row that still
 * breaks a rule, e.g. one migration 17 set aside), row by row, so one bad row never blocks the
 * others: each refused row stays failed with its constraint in last_error (`converge status`).
 */
export async function retryFailedEvents(
  executor: Executor,
  input: z.input<typeof retryFailedOptions.schema> = {},
): Promise<RetryFailedResult> {
  const options = retryFailedOptions.parse(input);
  const sql = opsSql(schemaRef(options.schema));
  const eventId = options.eventId ?? null;
  const isolate = await isolation(executor);
  try {
    const { rows } = await isolate(() => executor.query<{ event_id: string }>(sql.retryFailed, [eventId]));
    return { retried: rows.map((row) => row.event_id), refused: [] };
  } catch (err) {
    if (!isRowRefused(err)) throw err;
  }
  const result: RetryFailedResult = { retried: [], refused: [] };
  const { rows } = await executor.query<{ position: string; event_id: string }>(sql.failedRows, [eventId]);
  for (const row of rows) {
    try {
      const retried = await isolate(() => executor.query<{ event_id: string }>(sql.retryFailedRow, [row.position]));
      result.retried.push(...retried.rows.map((r) => r.event_id));
    } catch (err) {
      if (!isRowRefused(err)) throw err;
      result.refused.push(await keepRefused(executor, sql, isolate, row, err));
    }
  }
  return result;
}

/** Records in the row's last_error why it was not retried; a rule that binds failed rows too may refuse even that. */
async function keepRefused(
  executor: Executor,
  sql: Sql,
  isolate: Isolate,
  row: { position: string; event_id: string },
  err: unknown,
): Promise<RetryRefusedRow> {
  const reason = `${refusalReason(err)} on outbox retry`;
  try {
    await isolate(() => executor.query(sql.markRetryRefused, [row.position, reason]));
  } catch (markErr) {
    if (!isRowRefused(markErr)) throw markErr;
  }
  const sqlState = String((err as { code?: unknown }).code);
  return { position: row.position, eventId: row.event_id, constraint: constraintName(err) ?? null, sqlState, reason };
}

type Isolate = <T>(statement: () => Promise<T>) => Promise<T>;

/**
 * How a refused statement is kept from taking the others with it. On a pool each statement commits
 * on its own. Inside the caller's transaction a refusal would abort it, so each statement runs under
 * a savepoint; a client outside any transaction cannot open one (25P01) and needs none.
 */
async function isolation(executor: Executor): Promise<Isolate> {
  const direct: Isolate = (statement) => statement();
  if (executor instanceof pg.Pool) return direct;
  try {
    await executor.query(SAVEPOINT);
    await executor.query(RELEASE);
  } catch (err) {
    if ((err as { code?: unknown }).code === '25P01') return direct;
    throw err;
  }
  return async (statement) => {
    await executor.query(SAVEPOINT);
    try {
      const result = await statement();
      await executor.query(RELEASE);
      return result;
    } catch (err) {
      // The statement's error is the one to report; if even the rollback fails, the next statement says so.
      await executor
        .query(ROLLBACK_TO)
        .then(() => executor.query(RELEASE))
        .catch(() => undefined);
      throw err;
    }
  };
}

const SAVEPOINT = 'SAVEPOINT converge_retry';
const RELEASE = 'RELEASE SAVEPOINT converge_retry';
const ROLLBACK_TO = 'ROLLBACK TO SAVEPOINT converge_retry';
