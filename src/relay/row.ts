import type { EventEnvelope } from '../envelope/envelope.js';
import { ENVELOPE_LIMITS, storableText, validateEnvelope } from '../envelope/validate.js';
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
  const envelope = outboxRowToEnvelope(row);
  // The full validation builds a copy of every event and its errors; nearly every row passes the
  // plain checks below, which accept nothing the full one would refuse.
  return plainlyValid(envelope) ? envelope : validateEnvelope(envelope);
}

const NAME = new RegExp(ENVELOPE_LIMITS.namePattern);
const TRACEPARENT = new RegExp(ENVELOPE_LIMITS.traceparentPattern);
/** Objects and arrays walked before the plain check leaves a payload to the full validation. */
const PLAIN_PAYLOAD_NODES = 10_000;

/**
 * True only if validateEnvelope accepts `envelope` as it is (false says nothing: the full
 * validation decides). Lengths are compared in UTF-16 units, never fewer than characters.
 */
export function plainlyValid(envelope: EventEnvelope): boolean {
  return (
    plainText(envelope.eventId) &&
    plainName(envelope.aggregateType) &&
    plainText(envelope.aggregateId) &&
    plainVersion(envelope.aggregateVersion) &&
    plainName(envelope.eventType) &&
    plainVersion(envelope.schemaVersion) &&
    (envelope.kind === 'incremental' || envelope.kind === 'snapshot') &&
    plainTimestamp(envelope.occurredAt) &&
    (envelope.traceparent === undefined ||
      (typeof envelope.traceparent === 'string' && TRACEPARENT.test(envelope.traceparent))) &&
    (envelope.tenantId === undefined || plainText(envelope.tenantId)) &&
    plainPayload(envelope.payload)
  );
}

function plainText(value: unknown): boolean {
  return (
    typeof value === 'string' &&
    value.length > 0 &&
    value.length <= ENVELOPE_LIMITS.textMaxLength &&
    value.trim() !== '' &&
    storableText(value)
  );
}

function plainName(value: unknown): boolean {
  return typeof value === 'string' && value.length <= ENVELOPE_LIMITS.nameMaxLength && NAME.test(value);
}

function plainVersion(value: unknown): boolean {
  return Number.isSafeInteger(value) && (value as number) > 0;
}

/** Date.toISOString() of a year 0000-9999: `YYYY-MM-DDTHH:mm:ss.sssZ`. */
function plainTimestamp(value: unknown): boolean {
  return typeof value === 'string' && value.length === 24 && value.charCodeAt(0) !== 43 && value.endsWith('Z');
}

/**
 * Every string and key storable in PostgreSQL text and every number finite, as validateEnvelope
 * requires. A payload of more than PLAIN_PAYLOAD_NODES objects and arrays (a cycle among them) is
 * left to the full validation, which visits each once.
 */
function plainPayload(payload: unknown): boolean {
  if (payload === undefined) return false;
  if (typeof payload !== 'object' || payload === null) return plainScalar(payload);
  const pending: unknown[] = [payload];
  let visited = 0;
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item !== 'object' || item === null) {
      if (!plainScalar(item)) return false;
      continue;
    }
    if (++visited > PLAIN_PAYLOAD_NODES) return false;
    if (Array.isArray(item)) {
      for (const child of item as unknown[]) pending.push(child);
      continue;
    }
    for (const key in item) {
      if (!Object.hasOwn(item, key)) continue;
      if (!storableText(key)) return false;
      pending.push((item as Record<string, unknown>)[key]);
    }
  }
  return true;
}

function plainScalar(value: unknown): boolean {
  if (typeof value === 'string') return storableText(value);
  if (typeof value === 'number') return Number.isFinite(value);
  return value === null || typeof value === 'boolean';
}
