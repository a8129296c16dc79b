import { createHash } from 'node:crypto';
import type { EventEnvelope } from './envelope.js';

/**
 * JSON with object keys sorted at every depth and no whitespace, so two encodings of the
 * same value (different key order, different spacing) produce the same text.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new TypeError('canonical JSON cannot encode a non-finite number');
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(',')}]`;
  if (typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function') {
    // Match JSON.stringify, so a Date fingerprints as the ISO string the receiver will see.
    return canonicalJson((value as { toJSON(): unknown }).toJSON());
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(',')}}`;
  }
  throw new TypeError(`canonical JSON cannot encode a ${typeof value}`);
}

/**
 * SHA-256 (hex) over the canonical JSON of the fields that say what happened:
 * eventId, aggregateType, aggregateId, aggregateVersion, eventType, schemaVersion, kind,
 * payload and tenantId. Delivery metadata (occurredAt, traceparent) is left out, so a
 * re-encoding of the same event by another producer still matches.
 */
export function fingerprint(envelope: EventEnvelope): string {
  const content = {
    eventId: envelope.eventId,
    aggregateType: envelope.aggregateType,
    aggregateId: envelope.aggregateId,
    aggregateVersion: envelope.aggregateVersion,
    eventType: envelope.eventType,
    schemaVersion: envelope.schemaVersion,
    kind: envelope.kind,
    payload: envelope.payload,
    tenantId: envelope.tenantId ?? null,
  };
  return createHash('sha256').update(canonicalJson(content)).digest('hex');
}
