import type { PublishError, PublishFailure } from '../runtime/errors.js';

/**
 * Whether a failed publish says something about the event itself. A return (no queue bound for
 * its routing key) and an unencodable row stay what they are however often they are retried, so
 * they count towards maxAttempts. A nack, a lost confirm or a lost channel say the broker could
 * not take anything just then (a queue at its length limit, a quorum queue electing a leader, a
 * node going away): the event is retried with backoff for as long as that lasts, and never marked
 * failed for it, or a leader election would fail every event published during it.
 */
export function chargedToEvent(reason: PublishFailure): boolean {
  return reason === 'returned' || reason === 'unencodable';
}

/** A publish that failed only because its connection or channel did (not the broker refusing the event). */
export function lostWithConnection(error: PublishError): boolean {
  return error.reason === 'confirm-timeout' || error.reason === 'channel-closed';
}

/**
 * The retry number a row's backoff grows with: every failed publish of it, charged or not, so a
 * broker refusing for minutes is retried at the capped delay, not in a tight loop.
 */
export function retryNumber(row: { attempts: number; broker_retries: number }): number {
  return row.attempts + row.broker_retries + 1;
}
