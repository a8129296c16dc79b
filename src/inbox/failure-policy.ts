import { isTransientDatabaseError } from '../db/transaction.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import {
  BodyTooLargeError,
  ContentConflictError,
  ConvergeError,
  EnvelopeValidationError,
  MalformedBodyError,
  PermanentError,
  StaleVersionError,
  TransientError,
  UnsupportedSchemaVersionError,
  VersionGapError,
} from '../runtime/errors.js';
import type { QuarantineReason } from './types.js';

/** What a failed delivery (or parked event) should become. Pure data; the processor carries it out. */
export type FailureDecision =
  /** An early incremental event: keep it in the reorder buffer until `waitingFor` applies on `projection`. */
  | { action: 'park'; projection: string; waitingFor: number }
  /** A parked event whose predecessor is still missing: it stays where it is. */
  | { action: 'stay-parked' }
  /**
   * Its own version is taken: a copy of an event whose inbox row was compacted is done
   * without effect if the version is at or below the compaction watermark; else `otherwise`.
   */
  | { action: 'check-compaction'; otherwise: Extract<FailureDecision, { action: 'quarantine' }> }
  /** Roll back and try again after the backoff. */
  | { action: 'retry'; reason: string }
  /** Waiting cannot help: keep it for a person (the detail goes to the quarantine row, never to logs). */
  | { action: 'quarantine'; reason: QuarantineReason; detail: string };

export interface FailureContext {
  /** The event, when the body parsed far enough to have one. */
  envelope: Pick<EventEnvelope, 'kind' | 'aggregateType' | 'aggregateId' | 'aggregateVersion'> | null;
  /** 1 on the first attempt. */
  attempt: number;
  maxAttempts: number;
  /** The reorder buffer is on. */
  reorderBuffer: boolean;
  /** The event comes from the reorder buffer. */
  parked: boolean;
}

/**
 * The one place where a failure is judged, version gaps and stale versions included. A gap
 * and an unavailable database always wait, because skipping would lose an effect: an early
 * incremental event parks (or stays parked), any other gap retries. Handler errors retry up
 * to `maxAttempts` and are then quarantined; conflicts and malformed messages are
 * quarantined at once. A handler chooses explicitly with PermanentError (quarantine now) or
 * TransientError (wait without limit).
 */
export function decideFailure(err: unknown, context: FailureContext): FailureDecision {
  const { envelope } = context;
  if (err instanceof VersionGapError) {
    if (envelope && context.reorderBuffer && envelope.kind === 'incremental') {
      return context.parked
        ? { action: 'stay-parked' }
        : { action: 'park', projection: err.key.projection, waitingFor: err.currentVersion + 1 };
    }
    return { action: 'retry', reason: 'version-gap' };
  }
  if (err instanceof StaleVersionError) {
    const otherwise = quarantine('stale-version', err, context);
    return envelope && isAbout(err, envelope) ? { action: 'check-compaction', otherwise } : otherwise;
  }
  const reason = permanentReason(err);
  if (reason) return quarantine(reason, err, context);
  if (err instanceof TransientError) return { action: 'retry', reason: 'handler-transient' };
  if (isTransientDatabaseError(err)) return { action: 'retry', reason: 'database-unavailable' };
  if (context.attempt >= context.maxAttempts) return quarantine('handler-failed', err, context);
  return { action: 'retry', reason: 'handler-error' };
}

/** Failures that no amount of waiting fixes, by the reason an operator filters on. */
function permanentReason(err: unknown): QuarantineReason | null {
  if (err instanceof ContentConflictError) return 'content-conflict';
  // The body-level subclasses first: an operator filters a broken producer apart from a wrong field.
  if (err instanceof BodyTooLargeError) return 'body-too-large';
  if (err instanceof MalformedBodyError) return 'malformed-body';
  if (err instanceof EnvelopeValidationError) return 'invalid-envelope';
  if (err instanceof PermanentError) return 'handler-permanent';
  if (err instanceof UnsupportedSchemaVersionError) return 'unsupported-schema-version';
  return null;
}

function quarantine(
  reason: QuarantineReason,
  err: unknown,
  context: FailureContext,
): Extract<FailureDecision, { action: 'quarantine' }> {
  // The quarantine row sits next to the raw body, so the handler's full message may go there (never into logs).
  const detail =
    err instanceof ConvergeError
      ? err.message
      : `handler failed after ${context.attempt} attempts: ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`;
  return { action: 'quarantine', reason, detail };
}

/** The stale version is this event's own (not one a handler hit while writing another aggregate). */
function isAbout(err: StaleVersionError, envelope: NonNullable<FailureContext['envelope']>): boolean {
  return (
    err.key.aggregateType === envelope.aggregateType &&
    err.key.aggregateId === envelope.aggregateId &&
    err.eventVersion === envelope.aggregateVersion
  );
}
