import { isTransientDatabaseError } from '../db/transaction.js';
import { BodyTooLargeError, ContentConflictError, EnvelopeValidationError, MalformedBodyError, PermanentError, StaleVersionError, TransientError, UnsupportedSchemaVersionError, VersionGapError } from '../runtime/errors.js';
import type { QuarantineReason } from './quarantine.js';

export type FailureAction =
  /** Roll back and try again later; `endless` failures are never given up on (a gap, an outage). */
  | { action: 'retry'; endless: boolean; reason: string }
  /** Waiting cannot help: keep it for a person and acknowledge the delivery. */
  | { action: 'quarantine'; reason: QuarantineReason };

/**
 * What to do with a delivery whose transaction failed. A version gap and an unavailable
 * database always wait, because skipping would lose an effect; handler errors retry up to
 * `maxAttempts` and are then quarantined; conflicts and malformed messages are quarantined at
 * once. A handler chooses explicitly with PermanentError (quarantine now) or TransientError
 * (wait without limit).
 */
export function classifyFailure(err: unknown, attempt: number, maxAttempts: number): FailureAction {
  if (err instanceof ContentConflictError) return { action: 'quarantine', reason: 'content-conflict' };
  // The body-level subclasses first: an operator filters a broken producer apart from a wrong field.
  if (err instanceof BodyTooLargeError) return { action: 'quarantine', reason: 'body-too-large' };
  if (err instanceof MalformedBodyError) return { action: 'quarantine', reason: 'malformed-body' };
  if (err instanceof EnvelopeValidationError) return { action: 'quarantine', reason: 'invalid-envelope' };
  if (err instanceof StaleVersionError) return { action: 'quarantine', reason: 'stale-version' };
  if (err instanceof PermanentError) return { action: 'quarantine', reason: 'handler-permanent' };
  if (err instanceof UnsupportedSchemaVersionError) return { action: 'quarantine', reason: 'unsupported-schema-version' };
  if (err instanceof TransientError) return { action: 'retry', endless: true, reason: 'handler-transient' };
  if (err instanceof VersionGapError) return { action: 'retry', endless: true, reason: 'version-gap' };
  if (isTransientDatabaseError(err)) return { action: 'retry', endless: true, reason: 'database-unavailable' };
  if (attempt >= maxAttempts) return { action: 'quarantine', reason: 'handler-failed' };
  return { action: 'retry', endless: false, reason: 'handler-error' };
}
