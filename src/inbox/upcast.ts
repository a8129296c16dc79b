import type { EventEnvelope } from '../envelope/envelope.js';
import { UnsupportedSchemaVersionError } from '../runtime/errors.js';

/** Turns the payload of version n into the payload of version n + 1. Pure: no I/O. */
export type Upcaster = (payload: unknown) => unknown;

/** Per eventType: the version handlers are written for, and one upcaster per older version. */
export type SchemaEvolution = Record<string, { current: number; upcasters?: Record<number, Upcaster> }>;

/**
 * Brings an envelope to the current schema of its eventType, one version at a time, so
 * handlers only ever see the current shape. A version newer than the current one, or a
 * missing step, throws UnsupportedSchemaVersionError (the delivery is quarantined; the raw
 * body keeps the original version, so a replay after an upgrade starts from it again).
 * Event types without an entry pass through unchanged.
 */
export function upcast(envelope: EventEnvelope, evolution: SchemaEvolution): EventEnvelope {
  const spec = evolution[envelope.eventType];
  if (!spec || envelope.schemaVersion === spec.current) return envelope;
  if (envelope.schemaVersion > spec.current)
    throw new UnsupportedSchemaVersionError(
      envelope.eventType,
      envelope.schemaVersion,
      spec.current,
      'newer than this consumer knows',
    );
  let payload = envelope.payload;
  for (let version = envelope.schemaVersion; version < spec.current; version++) {
    const step = spec.upcasters?.[version];
    if (!step)
      throw new UnsupportedSchemaVersionError(
        envelope.eventType,
        envelope.schemaVersion,
        spec.current,
        `no upcaster from version ${version}`,
      );
    payload = step(payload);
  }
  return { ...envelope, payload, schemaVersion: spec.current };
}
