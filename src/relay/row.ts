import type { EventEnvelope } from '../envelope/envelope.js';
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
