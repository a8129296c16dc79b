import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { schemaNameOption } from '../runtime/option-fields.js';
import { schemaRef, type SchemaRef } from '../runtime/identifier.js';
import { defineOptions, type OptionsInput } from '../runtime/options.js';
import type { Executor } from '../db/executor.js';
import { ConcurrencyConflictError, EnvelopeValidationError } from '../runtime/errors.js';
import type { EventEnvelope, NewEvent } from '../envelope/envelope.js';
import {
  eventCatalogOption,
  producePayload,
  type ProducedPayload,
  type EventCatalog,
  type NewEventOf,
  type UntypedEvents,
} from '../envelope/events.js';
import { validateEnvelope } from '../envelope/validate.js';
import { encodeSensitivePaths } from '../envelope/redact.js';
import { DEFAULT_SCHEMA } from '../runtime/defaults.js';
import { outboxSql } from './sql.js';
import { runStatement } from '../db/statement.js';
import { traceAppend } from '../telemetry/index.js';

export const outboxOptions = defineOptions(
  'appendToOutbox',
  z.strictObject({
    // A plain string here: the name check stays schemaRef's, so a bad name still throws InvalidIdentifierError.
    schema: schemaNameOption.describe("Schema holding converge's tables."),
    events: eventCatalogOption
      .optional()
      .describe(
        'Event catalog from defineEvents: eventType must be one of its types and the payload its type; with schemas, a payload that fails its schema throws PayloadValidationError and nothing is written, fields the schema does not keep are not written, and the sensitive paths are recorded with the event.',
      ),
  }),
);

/** `I` is the producer-side payload map, inferred from `events` (or given: `appendToOutbox<OrderEvents>(...)`). */
export type OutboxOptions<I extends object = UntypedEvents> = Omit<OptionsInput<typeof outboxOptions>, 'events'> & {
  events?: EventCatalog<object, I>;
};

/**
 * The schema an options object names. This runs inside the caller's transaction for every
 * event, so each options object is validated once (again only if its schema changes).
 */
const resolved = new WeakMap<object, { input: unknown; events: unknown; ref: SchemaRef }>();

function schemaOf(options: OutboxOptions<object> | undefined): SchemaRef {
  if (options === undefined) return schemaRef(DEFAULT_SCHEMA);
  const cached = resolved.get(options);
  if (cached && cached.input === options.schema && cached.events === options.events) return cached.ref;
  const ref = schemaRef(outboxOptions.parse(options).schema);
  resolved.set(options, { input: options.schema, events: options.events, ref });
  return ref;
}

export interface AppendedEvent {
  eventId: string;
  position: string;
}

/**
 * Inserts the event into the outbox on the executor the caller passes, which must be the
 * connection that holds the caller's business transaction: the event commits or rolls
 * back with the business change. Nothing is buffered in memory and no connection is opened.
 */
export async function appendToOutbox<I extends object = UntypedEvents>(
  executor: Executor,
  // NoInfer: the map comes from the catalog (or the type argument) alone; an event typed over the
  // whole catalog (NewEventOf<typeof catalog>) would otherwise be read as the map itself.
  event: NewEventOf<NoInfer<I>>,
  options?: OutboxOptions<I>,
): Promise<AppendedEvent> {
  const [appended] = await appendManyToOutbox<I>(executor, [event], options);
  return appended!;
}

/**
 * Inserts many events with one statement on the caller's transaction, in the given order.
 * Every event is validated before anything is sent, so one bad event fails the call whole.
 */
export async function appendManyToOutbox<I extends object = UntypedEvents>(
  executor: Executor,
  events: readonly NewEventOf<NoInfer<I>>[],
  options?: OutboxOptions<I>,
): Promise<AppendedEvent[]> {
  const sql = outboxSql(schemaOf(options));
  if (events.length === 0) return [];
  return traceAppend((traceparent) => insertEvents(executor, sql, events as readonly NewEvent[], options, traceparent));
}

/**
 * The insert itself. An event without a traceparent gets the append span's, so its trace goes
 * on through the relay and the consumer (none without an OpenTelemetry SDK: the column stays null).
 */
async function insertEvents(
  executor: Executor,
  sql: ReturnType<typeof outboxSql>,
  events: readonly NewEvent[],
  options: OutboxOptions<object> | undefined,
  traceparent: string | undefined,
): Promise<AppendedEvent[]> {
  const checked = events.map(toEnvelope);
  // What is stored (and so what the relay sends and the consumer fingerprints) is the checked
  // payload without the fields the schema dropped; nothing is derived from the payload as given.
  const produced: ProducedPayload[] = [];
  for (const envelope of checked)
    produced.push(await producePayload(options?.events, envelope.eventType, envelope.payload));
  const envelopes = checked.map((envelope, i) => ({ ...envelope, payload: produced[i]!.payload }));
  const { rows } = await runStatement<{ position: string; event_id: string }>(executor, sql.insert, [
    envelopes.map((e) => e.eventId),
    envelopes.map((e) => e.aggregateType),
    envelopes.map((e) => e.aggregateId),
    envelopes.map((e) => e.aggregateVersion),
    envelopes.map((e) => e.eventType),
    envelopes.map((e) => e.schemaVersion),
    envelopes.map((e) => e.kind),
    envelopes.map((e) => JSON.stringify(e.payload)),
    events.map((event, i) => (event.occurredAt === undefined ? null : envelopes[i]!.occurredAt)),
    envelopes.map((e) => e.traceparent ?? traceparent ?? null),
    envelopes.map((e) => e.tenantId ?? null),
    produced.map(({ sensitive }) => (sensitive === undefined ? null : encodeSensitivePaths(sensitive))),
  ]);
  return rows.map((row) => ({ eventId: row.event_id, position: String(row.position) }));
}

/** Applies defaults and validates, so a bad event fails in the caller's transaction, not at the relay. */
function toEnvelope(event: NewEvent): EventEnvelope {
  if (event.occurredAt instanceof Date && Number.isNaN(event.occurredAt.getTime()))
    throw new EnvelopeValidationError('occurredAt', 'invalid date');
  const occurredAt =
    event.occurredAt instanceof Date ? event.occurredAt.toISOString() : (event.occurredAt ?? new Date().toISOString());
  const candidate: Record<string, unknown> = {
    eventId: event.eventId ?? randomUUID(),
    aggregateType: event.aggregateType,
    aggregateId: typeof event.aggregateId === 'number' ? String(event.aggregateId) : event.aggregateId,
    aggregateVersion: event.aggregateVersion,
    eventType: event.eventType,
    schemaVersion: event.schemaVersion ?? 1,
    kind: event.kind ?? 'incremental',
    payload: event.payload,
    occurredAt,
  };
  if (event.traceparent !== undefined) candidate.traceparent = event.traceparent;
  if (event.tenantId !== undefined) candidate.tenantId = event.tenantId;
  return validateEnvelope(candidate);
}

/**
 * Runs a conditional business update (`... WHERE id = $1 AND version = $2`) and throws
 * ConcurrencyConflictError unless exactly one row changed. Thrown inside the caller's
 * transaction, it makes the business change and its outbox row roll back together.
 */
export async function updateExactlyOne(executor: Executor, text: string, values: unknown[] = []): Promise<void> {
  const result = await executor.query(text, values);
  const changed = result.rowCount ?? 0;
  if (changed !== 1) throw new ConcurrencyConflictError(changed);
}
