import type { Executor } from '../db/executor.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import { ContentConflictError } from '../runtime/errors.js';
import { inboxSql } from './sql.js';
import { runStatement } from '../db/statement.js';
import type { SchemaRef } from '../runtime/identifier.js';

export interface InboxEntry {
  envelope: EventEnvelope;
  fingerprint: string;
}

export type InboxStatus =
  { status: 'new' } | { status: 'duplicate' } | { status: 'conflict'; conflict: ContentConflictError };

/**
 * Records events in the inbox on the consumer's transaction, in one statement. A new event
 * must be applied in the same transaction; a repeat with the same fingerprint is a
 * duplicate; a repeat with other content is a conflict. eventIds must be distinct.
 */
export async function recordInInbox(
  tx: Executor,
  schema: SchemaRef,
  consumer: string,
  entries: readonly InboxEntry[],
): Promise<Map<string, InboxStatus>> {
  const sql = inboxSql(schema);
  const inserted = await runStatement<{ event_id: string }>(tx, sql.insert, [
    consumer,
    entries.map((e) => e.envelope.eventId),
    entries.map((e) => e.fingerprint),
    entries.map((e) => e.envelope.aggregateType),
    entries.map((e) => e.envelope.aggregateId),
    entries.map((e) => e.envelope.aggregateVersion),
    entries.map((e) => e.envelope.eventType),
    entries.map((e) => e.envelope.occurredAt),
  ]);
  const result = new Map<string, InboxStatus>(inserted.rows.map((row) => [row.event_id, { status: 'new' }]));
  const seen = entries.filter((e) => !result.has(e.envelope.eventId));
  if (seen.length === 0) return result;
  // Read Committed: this statement takes a fresh snapshot, so it sees the rows that won the conflicts.
  const stored = await runStatement<{ event_id: string; fingerprint: string }>(tx, sql.storedFingerprints, [
    consumer,
    seen.map((e) => e.envelope.eventId),
  ]);
  const fingerprints = new Map(stored.rows.map((row) => [row.event_id, row.fingerprint]));
  for (const entry of seen) {
    const previous = fingerprints.get(entry.envelope.eventId);
    result.set(
      entry.envelope.eventId,
      previous === entry.fingerprint
        ? { status: 'duplicate' }
        : {
            status: 'conflict',
            conflict: new ContentConflictError(
              consumer,
              entry.envelope.eventId,
              previous ?? '(missing)',
              entry.fingerprint,
            ),
          },
    );
  }
  return result;
}
