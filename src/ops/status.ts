import type { Executor } from '../db/executor.js';
import { quoteIdentifier } from '../db/identifier.js';
import { DEFAULT_SCHEMA } from '../schema/migrate.js';
import { opsSql } from './sql.js';

export interface ConvergeStatus {
  outbox: { pending: number; published: number; failed: number; oldestPendingAgeSeconds: number | null };
  quarantine: Record<string, number>;
}

/** Where work is stuck: unpublished and failed outbox rows, age of the oldest pending, open quarantine by reason. */
export async function readStatus(executor: Executor, schema = DEFAULT_SCHEMA): Promise<ConvergeStatus> {
  const sql = opsSql(quoteIdentifier(schema));
  const status: ConvergeStatus = { outbox: { pending: 0, published: 0, failed: 0, oldestPendingAgeSeconds: null }, quarantine: {} };
  const outbox = await executor.query<{ status: 'pending' | 'published' | 'failed'; n: string; oldest_age_seconds: string | null }>(sql.outboxStatus);
  for (const row of outbox.rows) {
    status.outbox[row.status] = Number(row.n);
    if (row.status === 'pending' && row.oldest_age_seconds !== null) status.outbox.oldestPendingAgeSeconds = Number(row.oldest_age_seconds);
  }
  const quarantine = await executor.query<{ reason: string; n: string }>(sql.openQuarantine);
  for (const row of quarantine.rows) status.quarantine[row.reason] = Number(row.n);
  return status;
}

/** Sends failed outbox events (all, or one by id) through the relay again, with their original eventIds. */
export async function retryFailedEvents(executor: Executor, options: { schema?: string; eventId?: string } = {}): Promise<string[]> {
  const sql = opsSql(quoteIdentifier(options.schema ?? DEFAULT_SCHEMA));
  const { rows } = await executor.query<{ event_id: string }>(sql.retryFailed, [options.eventId ?? null]);
  return rows.map((row) => row.event_id);
}
