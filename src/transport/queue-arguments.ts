/**
 * The arguments of a consumer's queues, the one place both startConsumer and
 * declarePartitionedTopology take them from. Pure: no broker involved, unit-tested.
 *
 * A classic queue set is the queue with no arguments and its retry tiers `<queue>.retry.<delay>`
 * dead-lettering back into it (plus `<queue>.retry`, the single retry queue of earlier versions). A quorum set adds a `.dead` queue and an
 * explicit delivery limit everywhere: RabbitMQ 4 gives a quorum queue without one a limit of 20
 * and then drops the message (or dead-letters it, if the queue has a target), so converge never
 * leaves the limit to the broker's default. Past the limit, the queue dead-letters the message
 * at-least-once into `<queue>.dead`, where the consumer quarantines it (inbox/dead-letter.ts).
 */

import { z } from 'zod';

export type QueueType = 'classic' | 'quorum';

/** Returns of one message (nack/requeue, a lost channel) a quorum queue allows before dead-lettering it. */
export const DEFAULT_DELIVERY_LIMIT = 20;

/**
 * The `.dead` queue's limit: high enough never to be reached. Nothing may dead-letter out of it
 * (RabbitMQ drops a message whose dead-lettering cycles back to a queue it died in), so passing
 * the limit would drop the message; the consumer never returns a dead message with a nack, only
 * a lost channel while it holds one counts. Explicit, because RabbitMQ 4 would otherwise apply 20.
 */
export const DEAD_QUEUE_DELIVERY_LIMIT = 1_000_000;

export type QueueArguments = Record<string, unknown>;

export interface QueueSetArguments {
  main: QueueArguments;
  /** The single retry queue of earlier versions, still declared so the copies in it drain back. */
  retry: QueueArguments;
  /** One per delay tier, shortest first: the retry arguments plus the tier as queue-level TTL. */
  tiers: QueueArguments[];
  /** Null for a classic set: it has no dead queue. */
  dead: QueueArguments | null;
}

export function retryQueueName(queue: string): string {
  return `${queue}.retry`;
}

/**
 * The delays of the retry tiers, in ms: one queue per tier, so a copy waiting 10 minutes never holds
 * back one waiting a second (RabbitMQ expires messages only at the head of a queue).
 */
export const DEFAULT_RETRY_TIERS_MS: readonly number[] = [1_000, 5_000, 30_000, 120_000, 600_000];

/** The retry tiers option, declared once for startConsumer and declarePartitionedTopology. */
export const retryTiersOption = z
  .array(
    z
      .number()
      .int()
      .min(1)
      .max(2 ** 32 - 1),
  )
  .min(1)
  .max(32)
  .default([...DEFAULT_RETRY_TIERS_MS])
  .describe(
    'Delays of the retry tiers, in ms: one queue `<queue>.retry.<delay>` per tier, so a short retry never waits behind a long one. A retry goes to the shortest tier at least as long as its backoff delay (the longest tier caps it) and comes back between its delay and its tier. Removing a tier leaves its queue behind: it drains on its own; delete it once empty.',
  );

/** A retry queue whose copies all wait at most `delayMs` before they dead-letter back. */
export interface RetryTier {
  queue: string;
  delayMs: number;
}

/** `<queue>.retry.<delay>`, the delay written as `250ms`, `5s` or `2m` so the name says what it holds. */
export function retryTierQueueName(queue: string, delayMs: number): string {
  return `${queue}.retry.${delayLabel(delayMs)}`;
}

function delayLabel(ms: number): string {
  if (ms % 60_000 === 0) return `${ms / 60_000}m`;
  if (ms % 1_000 === 0) return `${ms / 1_000}s`;
  return `${ms}ms`;
}

/** The tiers of `queue`, shortest first, without repeats. */
export function retryTiers(queue: string, delaysMs: readonly number[]): RetryTier[] {
  return [...new Set(delaysMs)]
    .sort((a, b) => a - b)
    .map((delayMs) => ({ queue: retryTierQueueName(queue, delayMs), delayMs }));
}

/**
 * The tier a copy that should wait `delayMs` goes to: the shortest tier at least that long, so a
 * retry never comes back before its backoff asked; past the longest tier, the longest (the wait is
 * capped there). The copy keeps its own delay as per-message expiry, the lower of the two TTLs
 * wins: it comes back after its delay unless a copy ahead of it in the same tier waits longer,
 * and never later than its tier. Jittered delays thus stay spread out within a tier.
 */
export function chooseRetryTier<T extends { delayMs: number }>(tiers: readonly T[], delayMs: number): T {
  if (tiers.length === 0) throw new Error('no retry tiers');
  return tiers.find((tier) => tier.delayMs >= delayMs) ?? tiers[tiers.length - 1]!;
}

export function deadQueueName(queue: string): string {
  return `${queue}.dead`;
}

/**
 * Dead-lettering that cannot lose the message: at-least-once keeps it in the source queue until
 * the target confirmed it, and needs reject-publish (at-most-once, the default, drops the
 * message when the target is missing or full).
 */
function deadLetterTo(queue: string): QueueArguments {
  return {
    'x-dead-letter-exchange': '',
    'x-dead-letter-routing-key': queue,
    'x-dead-letter-strategy': 'at-least-once',
    'x-overflow': 'reject-publish',
  };
}

/**
 * The arguments of `queue`, its retry tiers, the single retry queue of earlier versions and
 * (quorum only) its dead queue. A tier holds copies with a per-message expiry no longer than its
 * queue-level TTL (quorum queues honour both since RabbitMQ 3.10, at the head, as classic queues
 * do) and dead-letters them back into `queue`.
 */
export function queueSetArguments(
  queue: string,
  mode: { queueType: QueueType; deliveryLimit: number; retryTiers?: readonly { delayMs: number }[] },
): QueueSetArguments {
  const tiers = (retry: QueueArguments) =>
    (mode.retryTiers ?? []).map((tier) => ({ ...retry, 'x-message-ttl': tier.delayMs }));
  if (mode.queueType === 'classic') {
    const retry = { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue };
    return { main: {}, retry, tiers: tiers(retry), dead: null };
  }
  const quorum = { 'x-queue-type': 'quorum' };
  const retry = { ...quorum, 'x-delivery-limit': mode.deliveryLimit, ...deadLetterTo(queue) };
  return {
    main: { ...quorum, 'x-delivery-limit': mode.deliveryLimit, ...deadLetterTo(deadQueueName(queue)) },
    retry,
    tiers: tiers(retry),
    dead: { ...quorum, 'x-delivery-limit': DEAD_QUEUE_DELIVERY_LIMIT },
  };
}
