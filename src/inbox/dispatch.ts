import type pg from 'pg';
import type { EventEnvelope } from '../envelope/envelope.js';
import { catalogAccepts, validatePayload, type EventCatalog } from '../envelope/events.js';
import type { SchemaRef } from '../runtime/identifier.js';
import type { Logger } from '../runtime/logger.js';
import { watchVersions, type VersionWatch } from '../projection/index.js';
import type { BatchHandler, EventHandler, HandlerContext } from './handler.js';
import { bindProjection } from './bound-projection.js';
import { readReplayOf, traceFields } from './headers.js';
import { recordInInbox } from './inbox.js';
import { unpark } from './parking.js';
import { quarantine } from './quarantine.js';
import { recordReplayOutcomes, replayRecord } from './replay.js';
import { quarantined } from './settle.js';
import type { Candidate, Settlement } from './types.js';

export interface DispatchScope {
  schema: SchemaRef;
  consumer: string;
  handlers: Record<string, EventHandler>;
  batchHandler?: BatchHandler | undefined;
  /** The event catalog; with schemas, only its types are handled and their payloads are checked. */
  events?: EventCatalog | undefined;
  logger: Logger;
}

/** The handler for one event type, `'*'` as the fallback; undefined if none. */
export function handlerFor(scope: Pick<DispatchScope, 'handlers'>, envelope: EventEnvelope): EventHandler | undefined {
  return scope.handlers[envelope.eventType] ?? scope.handlers['*'];
}

/** Some handler takes this event: a batch handler or one for its type, and the catalog (if any) lists it. */
export function isHandled(
  scope: Pick<DispatchScope, 'handlers' | 'batchHandler' | 'events'>,
  envelope: EventEnvelope,
): boolean {
  return (
    catalogAccepts(scope.events, envelope.eventType) &&
    (scope.batchHandler !== undefined || handlerFor(scope, envelope) !== undefined)
  );
}

/**
 * The body of one consumer transaction: record the inbox rows, quarantine conflicts on the
 * same transaction, run the handlers on the new events, take drained events out of the
 * reorder buffer and record replay outcomes. Settlements by eventId. Throws (so the caller
 * rolls back) when a handler throws, and also when a handler swallowed a version gap or
 * stale version the projection helpers reported on this transaction.
 */
export async function applyInTransaction(
  tx: pg.PoolClient,
  scope: DispatchScope,
  ordered: readonly Candidate[],
): Promise<Map<string, Settlement>> {
  const { schema, consumer, logger } = scope;
  const outcome = new Map<string, Settlement>();
  const statuses = await recordInInbox(
    tx,
    schema,
    consumer,
    ordered.map((c) => ({ envelope: c.envelope, fingerprint: c.print })),
  );
  const fresh: Candidate[] = [];
  for (const candidate of ordered) {
    const status = statuses.get(candidate.envelope.eventId)!;
    const eventId = candidate.envelope.eventId;
    if (status.status === 'new') fresh.push(candidate);
    else if (status.status === 'duplicate') outcome.set(eventId, { action: 'ack', outcome: 'duplicate', eventId });
    else {
      // Recorded on the same transaction: the ack follows only once the quarantine row is durable.
      const quarantineId = await quarantine(tx, schema, {
        consumer,
        eventId,
        reason: 'content-conflict',
        detail: status.conflict.message,
        fingerprint: candidate.print,
        delivery: candidate.delivery,
      });
      logger.error(
        { eventId, ...traceFields(candidate.delivery, candidate.envelope), reason: 'content-conflict', quarantineId },
        'delivery quarantined for a person to inspect',
      );
      outcome.set(eventId, quarantined('content-conflict', eventId, quarantineId, status.conflict));
    }
  }
  if (fresh.length > 0) await runHandlers(tx, scope, fresh);
  for (const { envelope } of fresh)
    outcome.set(envelope.eventId, {
      action: 'ack',
      outcome: 'applied',
      eventId: envelope.eventId,
      occurredAt: envelope.occurredAt,
    });
  await unpark(
    tx,
    schema,
    consumer,
    ordered.filter((c) => c.parked).map((c) => c.envelope.eventId),
  );
  // Same transaction as the inbox rows: the recorded outcome commits (or rolls back) with them.
  const replayed = ordered.filter((c) => readReplayOf(c.delivery) !== null);
  if (replayed.length > 0)
    await recordReplayOutcomes(
      tx,
      schema,
      replayed.flatMap((c) => replayRecord(c.delivery, outcome.get(c.envelope.eventId)!) ?? []),
    );
  return outcome;
}

/**
 * Runs the user's handlers under a version watch: whatever a handler does with the errors
 * of applyIncrement(s), a gap or stale version reached on `tx` fails the transaction.
 */
async function runHandlers(tx: pg.PoolClient, scope: DispatchScope, fresh: Candidate[]): Promise<void> {
  const envelopes = await checkedEnvelopes(scope, fresh);
  const watch = watchVersions(tx, scope.schema.name);
  try {
    if (scope.batchHandler) {
      const attempt = Math.max(...fresh.map((c) => c.attempt));
      const redelivered = fresh.some((c) => c.delivery.fields.redelivered ?? false);
      await guarded(watch, () => scope.batchHandler!(envelopes, context(tx, scope, attempt, redelivered)));
      return;
    }
    for (const [i, candidate] of fresh.entries()) {
      const envelope = envelopes[i]!;
      const handler = handlerFor(scope, envelope)!;
      await guarded(watch, () =>
        handler(envelope, context(tx, scope, candidate.attempt, candidate.delivery.fields.redelivered ?? false)),
      );
    }
  } finally {
    watch.end();
  }
}

/**
 * The envelopes as handlers get them: with a catalog holding schemas, each payload checked and
 * replaced by the schema's output. A mismatch throws PayloadValidationError (an
 * EnvelopeValidationError), so the transaction rolls back and the delivery is quarantined
 * as `invalid-envelope`; the inbox and fingerprint keep the event as it was sent.
 */
async function checkedEnvelopes(scope: DispatchScope, fresh: readonly Candidate[]): Promise<EventEnvelope[]> {
  if (!scope.events?.schemas) return fresh.map((c) => c.envelope);
  const checked: EventEnvelope[] = [];
  for (const { envelope } of fresh)
    checked.push({ ...envelope, payload: await validatePayload(scope.events, envelope.eventType, envelope.payload) });
  return checked;
}

/**
 * A handler that returned normally after a blocked verdict fails as if it had let the
 * verdict through; one that threw something else after it fails with the verdict, which is
 * the real cause (a gap waits; it must not count as a handler error and end in quarantine).
 */
async function guarded(watch: VersionWatch, run: () => Promise<unknown>): Promise<void> {
  try {
    await run();
  } catch (err) {
    throw watch.blocked ?? err;
  }
  watch.throwIfBlocked();
}

function context(tx: pg.PoolClient, scope: DispatchScope, attempt: number, redelivered: boolean): HandlerContext {
  return { tx, consumer: scope.consumer, schema: scope.schema.name, attempt, redelivered, ...bindProjection(tx) };
}

/** Version order per aggregate (then arrival), so E1 and E2 arriving in one batch as E2, E1 both apply. */
export function inVersionOrder(candidates: readonly Candidate[]): Candidate[] {
  return [...candidates].sort((a, b) => {
    const x = a.envelope;
    const y = b.envelope;
    if (x.aggregateType !== y.aggregateType) return x.aggregateType < y.aggregateType ? -1 : 1;
    if (x.aggregateId !== y.aggregateId) return x.aggregateId < y.aggregateId ? -1 : 1;
    return x.aggregateVersion - y.aggregateVersion || a.index - b.index;
  });
}
