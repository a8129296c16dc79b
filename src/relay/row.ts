import type { EventEnvelope } from '../envelope/envelope.js';
import { validateEnvelope } from '../envelope/validate.js';
import type { OutboxEnvelopeRow } from './sql.js';

/**
 * The envelope an outbox row stands for, exactly as the relay publishes it: for tools that
 * re-send published events (a replay, a duplicate storm in a fault-injection run).
 */
export function outboxRowToEnvelope(row: OutboxEnvelopeRow): EventEnvelope {
  const envelope: EventEnvelope = {
    eventId: row.event_id,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    aggregateVersion: Number(row.aggregate_version),
    eventType: row.event_type,
    schemaVersion: row.schema_version,
    kind: row.kind,
    payload: row.payload,
    occurredAt: row.occurred_at.toISOString(),
  };
  if (row.traceparent !== null) envelope.traceparent = row.traceparent;
  if (row.tenant_id !== null) envelope.tenantId = row.tenant_id;
  return envelope;
}

/**
 * The envelope to publish for a claimed row, checked against the rules every consumer applies.
 * The table's checks catch most bad plain-SQL rows, but not rows from before migration 11 nor
 * lengths PostgreSQL counts differently; such a row throws EnvelopeValidationError (naming the
 * field, never its value), and the relay marks it failed instead of publishing it.
 */
export function publishableEnvelope(row: OutboxEnvelopeRow): EventEnvelope {
  return validateEnvelope(outboxRowToEnvelope(row));
}
