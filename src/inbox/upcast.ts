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

/** What an event type with a handler and no `schemas` entry is taken to be. */
const UNDECLARED: Evolution = { current: 1 };

/**
 * Brings an envelope to the current schema of its eventType, one version at a time, so
 * handlers only ever see the current shape. A version newer than the current one, or a
 * missing step, throws UnsupportedSchemaVersionError (the delivery is quarantined; the raw
 * body keeps the original version, so a replay after an upgrade starts from it again).
 * An event type without an entry is at version 1 if `handlers` has a handler of its own for it:
 * that handler was written for one shape, so a later version is refused rather than handed to
 * it. Other types without an entry (a `'*'` handler's, an unhandled type) pass through unchanged.
 */
export function upcast(
  envelope: EventEnvelope,
  evolution: SchemaEvolution,
  handlers: Readonly<Record<string, unknown>> = {},
): EventEnvelope {
  const spec = evolution[envelope.eventType] ?? (Object.hasOwn(handlers, envelope.eventType) ? UNDECLARED : undefined);
  if (!spec || envelope.schemaVersion === spec.current) return envelope;
  if (envelope.schemaVersion > spec.current)
    throw new UnsupportedSchemaVersionError(
      envelope.eventType,
      envelope.schemaVersion,
      spec.current,
      spec === UNDECLARED
        ? 'newer than this consumer knows (no schemas entry for this eventType: its handler takes version 1 only)'
        : 'newer than this consumer knows',
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
