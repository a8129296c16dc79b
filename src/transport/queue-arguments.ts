/**
 * The arguments of a consumer's queues, the one place both startConsumer and
 * declarePartitionedTopology take them from. Pure: no broker involved, unit-tested.
 *
 * A classic queue set is what converge always declared: the queue with no arguments and its
 * `.retry` companion dead-lettering back into it. A quorum set adds a `.dead` queue and an
 * explicit delivery limit everywhere: RabbitMQ 4 gives a quorum queue without one a limit of 20
 * and then drops the message (or dead-letters it, if the queue has a target), so converge never
 * leaves the limit to the broker's default. Past the limit, the queue dead-letters the message
 * at-least-once into `<queue>.dead`, where the consumer quarantines it (inbox/dead-letter.ts).
 */

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
  retry: QueueArguments;
  /** Null for a classic set: it has no dead queue. */
  dead: QueueArguments | null;
}

export function retryQueueName(queue: string): string {
  return `${queue}.retry`;
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
 * The arguments of `queue`, its retry queue and (quorum only) its dead queue. The retry queue
 * holds copies with a per-message expiry (quorum queues honour it since RabbitMQ 3.10, at the
 * head, as classic queues do) and dead-letters them back into `queue`.
 */
export function queueSetArguments(
  queue: string,
  mode: { queueType: QueueType; deliveryLimit: number },
): QueueSetArguments {
  if (mode.queueType === 'classic')
    return { main: {}, retry: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue }, dead: null };
  const quorum = { 'x-queue-type': 'quorum' };
  return {
    main: { ...quorum, 'x-delivery-limit': mode.deliveryLimit, ...deadLetterTo(deadQueueName(queue)) },
    retry: { ...quorum, 'x-delivery-limit': mode.deliveryLimit, ...deadLetterTo(queue) },
    dead: { ...quorum, 'x-delivery-limit': DEAD_QUEUE_DELIVERY_LIMIT },
  };
}
