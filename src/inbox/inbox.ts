import type { Executor } from '../db/executor.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import { ContentConflictError } from '../errors.js';
import { inboxSql } from './sql.js';

export type InboxStatus = 'new' | 'duplicate';

/**
 * Records the event in the inbox on the consumer's transaction. A new event returns 'new'
 * and must be applied in the same transaction; a repeat with the same fingerprint returns
 * 'duplicate'; a repeat with other content throws ContentConflictError.
 */
export async function recordInInbox(
  tx: Executor,
  schema: string,
  consumer: string,
  envelope: EventEnvelope,
  fingerprint: string,
): Promise<InboxStatus> {
  const sql = inboxSql(schema);
  const inserted = await tx.query(sql.insert, [
    consumer,
    envelope.eventId,
    fingerprint,
    envelope.aggregateType,
    envelope.aggregateId,
    envelope.aggregateVersion,
    envelope.eventType,
  ]);
  if ((inserted.rowCount ?? 0) === 1) return 'new';
  // Read Committed: this statement takes a fresh snapshot, so it sees the row that won the conflict.
  const { rows } = await tx.query<{ fingerprint: string }>(sql.storedFingerprint, [consumer, envelope.eventId]);
  const stored = rows[0]?.fingerprint;
  if (stored === fingerprint) return 'duplicate';
  throw new ContentConflictError(consumer, envelope.eventId, stored ?? '(missing)', fingerprint);
}
