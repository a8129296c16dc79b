import type { EventEnvelope } from '../envelope/envelope.js';
import type { IsUntyped, PayloadsOf, UntypedEvents } from '../envelope/events.js';
import { UnsupportedSchemaVersionError } from '../runtime/errors.js';

/**
 * Turns the payload of version n into the payload of version n + 1. Pure: no I/O. A method,
 * so an upcaster may annotate the old shape it reads (`(p: { cents: number }) => ...`); with an
 * event catalog holding schemas, the consumer checks the final result against the schema.
 */
export type Upcaster = { up(payload: unknown): unknown }['up'];

/** The version handlers are written for, and one upcaster per older version. */
export interface Evolution {
  current: number;
  upcasters?: Record<number, Upcaster>;
}

/** Per eventType; with an event map or catalog `C` the keys must be its event types. */
export type SchemaEvolution<C = UntypedEvents> =
  IsUntyped<PayloadsOf<C>> extends true ? Record<string, Evolution> : { [K in keyof PayloadsOf<C>]?: Evolution };

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
