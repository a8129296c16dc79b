import { hash } from 'node:crypto';
import type { EventEnvelope } from './envelope.js';

/**
 * JSON with object keys sorted at every depth and no whitespace, so two encodings of the
 * same value (different key order, different spacing) produce the same text.
 */
export function canonicalJson(value: unknown): string {
  // Appends to one string instead of building entry arrays: the consumer fingerprints every
  // delivery, and the arrays were most of its garbage.
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('canonical JSON cannot encode a non-finite number');
      return JSON.stringify(value);
    case 'object':
      if (value === null) return 'null';
      if (Array.isArray(value)) return canonicalArray(value);
      // Match JSON.stringify, so a Date fingerprints as the ISO string the receiver will see.
      if (typeof (value as { toJSON?: unknown }).toJSON === 'function')
        return canonicalJson((value as { toJSON(): unknown }).toJSON());
      return canonicalObject(value as Record<string, unknown>);
    default:
      throw new TypeError(`canonical JSON cannot encode a ${typeof value}`);
  }
}

function canonicalArray(items: readonly unknown[]): string {
  let out = '[';
  for (let i = 0; i < items.length; i++) {
    if (i > 0) out += ',';
    // A hole writes nothing, as Array.prototype.map and join did before.
    if (i in items) out += canonicalJson(items[i] ?? null);
  }
  return `${out}]`;
}

function canonicalObject(object: Record<string, unknown>): string {
  // Default sort compares UTF-16 code units, the same order as `<` on strings.
  const keys = Object.keys(object).sort();
  let out = '{';
  let first = true;
  for (const key of keys) {
    const item = object[key];
    if (item === undefined) continue;
    out += `${first ? '' : ','}${JSON.stringify(key)}:${canonicalJson(item)}`;
    first = false;
  }
  return `${out}}`;
}

/** The fingerprinted fields in canonical (sorted) order. */
const FINGERPRINTED = [
  'aggregateId',
  'aggregateType',
  'aggregateVersion',
  'eventId',
  'eventType',
  'kind',
  'payload',
  'schemaVersion',
  'tenantId',
] as const satisfies readonly (keyof EventEnvelope)[];

/**
 * SHA-256 (hex) over the canonical JSON of the fields that say what happened:
 * eventId, aggregateType, aggregateId, aggregateVersion, eventType, schemaVersion, kind,
 * payload and tenantId. Delivery metadata (occurredAt, traceparent) is left out, so a
 * re-encoding of the same event by another producer still matches.
 */
export function fingerprint(envelope: EventEnvelope): string {
  // canonicalJson of { eventId, aggregateType, …, tenantId ?? null }, written out in sorted key order.
  let text = '';
  for (let i = 0; i < FINGERPRINTED.length; i++) {
    const key = FINGERPRINTED[i]!;
    const value = key === 'tenantId' ? (envelope.tenantId ?? null) : envelope[key];
    if (value !== undefined) text += `${text === '' ? '{"' : ',"'}${key}":${canonicalJson(value)}`;
  }
  // One-shot hash: no Hash object per delivery (a quarter of createHash's time here).
  return hash('sha256', text === '' ? '{}' : `${text}}`, 'hex');
}
