import type { AmqpSocketOptions } from './connection.js';
import { RabbitMqTransport } from './rabbitmq.js';
import type { TransportConnection } from './transport.js';
import { DEFAULT_RETRY_TIERS_MS, deadQueueName, retryQueueName, retryTiers } from './queue-arguments.js';
import { withConnection } from './short-lived.js';

/** What a look at the head of one queue found. */
export interface QueueHead {
  queue: string;
  /** False when the broker has no such queue (a classic set has no `.dead`, a tier not declared). */
  exists: boolean;
  /** Ready messages (not those a consumer holds unacked). */
  messages: number;
  /**
   * The head message's `timestamp` property in ms since the epoch (the relay sets it to the event's
   * occurredAt; retry copies keep it), or null when the queue is empty or the head carries none.
   */
  headTimestampMs: number | null;
}

/**
 * Every queue a consumer's messages can wait in: the queue, its retry tiers, the single retry queue
 * of earlier versions and `<queue>.dead` (quorum). Tiers no longer configured are not listed: name
 * their delays in `tiersMs` until they are empty.
 */
export function consumerQueues(queue: string, tiersMs: readonly number[] = DEFAULT_RETRY_TIERS_MS): string[] {
  return [queue, ...retryTiers(queue, tiersMs).map((tier) => tier.queue), retryQueueName(queue), deadQueueName(queue)];
}

/**
 * Looks at the head of each queue without taking it away (the transport's peekHead). On RabbitMQ
 * that is basic.get and basic.nack(requeue): the head goes back to its place, flagged
 * `redelivered` (the inbox decides duplicates, not that flag). On a quorum queue before RabbitMQ
 * 4.3 a return counts towards the delivery limit: one per look, so a message that sits at the head
 * through `deliveryLimit` cleanup runs is dead-lettered to `<queue>.dead` and quarantined (kept,
 * replayable), not lost. Opens and closes its own RabbitMQ connection; readQueueHeadsOn takes one.
 */
export async function readQueueHeads(
  urls: string | readonly string[],
  queues: readonly string[],
  socketOptions: AmqpSocketOptions = {},
): Promise<QueueHead[]> {
  const transport = new RabbitMqTransport({ urls, socketOptions });
  try {
    return await withConnection(transport, 'converge-retention', (connection) => readQueueHeadsOn(connection, queues));
  } catch (err) {
    throw transport.failure(err);
  }
}

/** readQueueHeads on a connection of any transport. */
export async function readQueueHeadsOn(
  connection: TransportConnection,
  queues: readonly string[],
): Promise<QueueHead[]> {
  const heads: QueueHead[] = [];
  for (const queue of queues) heads.push(await readHead(connection, queue));
  return heads;
}

async function readHead(connection: TransportConnection, queue: string): Promise<QueueHead> {
  const counts = await connection.inspectQueue(queue);
  if (!counts) return { queue, exists: false, messages: 0, headTimestampMs: null };
  const head = counts.messages > 0 ? await connection.peekHead(queue) : null;
  // Taken by a consumer meanwhile: nothing is waiting any more.
  if (!head) return { queue, exists: true, messages: 0, headTimestampMs: null };
  const seconds: unknown = head.properties.timestamp;
  const headTimestampMs = typeof seconds === 'number' && Number.isFinite(seconds) ? seconds * 1000 : null;
  return { queue, exists: true, messages: Math.max(counts.messages, 1), headTimestampMs };
}
