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

/**
 * A batch the broker took none of and nacked: its channel is replaced before the next batch. Seen
 * on a 3-node cluster with RabbitMQ 3.10: after the quorum queue's leader node stopped, the relay's
 * channel got nothing but nacks for over 90 s although the queue had a new leader; with a fresh
 * channel after such a batch the nacks ended within a second (cluster failover test, CONVERGE_CLUSTER_LOG).
 */
export function onlyNacked(confirmed: number, rejected: PublishError[]): boolean {
  return confirmed === 0 && rejected.some((error) => error.reason === 'nacked');
}
