import type amqp from 'amqplib';
import { silentLogger } from '../runtime/logger.js';
import { brokerFailure, openConnection, type AmqpSocketOptions } from './connection.js';
import { BrokerAddresses } from './broker-addresses.js';
import { DEFAULT_RETRY_TIERS_MS, deadQueueName, retryQueueName, retryTiers } from './queue-arguments.js';

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
 * Looks at the head of each queue without taking it away. AMQP has no "age of the oldest message",
 * so the head is fetched with basic.get and returned at once with basic.nack(requeue): it goes
 * back to its place, flagged `redelivered` (the inbox decides duplicates, not that flag). On a
 * quorum queue before RabbitMQ 4.3 a return counts towards the delivery limit: one per look, so
 * a message that sits at the head through `deliveryLimit` cleanup runs is dead-lettered to
 * `<queue>.dead` and quarantined (kept, replayable), not lost. Opens and closes its own connection.
 */
export async function readQueueHeads(
  urls: string | readonly string[],
  queues: readonly string[],
  socketOptions: AmqpSocketOptions = {},
): Promise<QueueHead[]> {
  const brokers = new BrokerAddresses(urls);
  const connection = await openConnection(brokers, 'converge-retention', silentLogger, () => undefined, socketOptions);
  try {
    const heads: QueueHead[] = [];
    for (const queue of queues) heads.push(await readHead(connection, queue));
    return heads;
  } catch (err) {
    throw brokerFailure(err, brokers.target);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

async function readHead(connection: amqp.ChannelModel, queue: string): Promise<QueueHead> {
  // A passive declare of a missing queue closes its channel, so each queue gets its own.
  const channel = await connection.createChannel();
  channel.on('error', () => undefined);
  try {
    let messages: number;
    try {
      messages = (await channel.checkQueue(queue)).messageCount;
    } catch (err) {
      if ((err as { code?: unknown }).code === 404) return { queue, exists: false, messages: 0, headTimestampMs: null };
      throw err;
    }
    const head = messages > 0 ? await channel.get(queue, { noAck: false }) : false;
    // Taken by a consumer meanwhile: nothing is waiting any more.
    if (!head) return { queue, exists: true, messages: 0, headTimestampMs: null };
    channel.nack(head, false, true);
    const seconds: unknown = head.properties.timestamp;
    const headTimestampMs = typeof seconds === 'number' && Number.isFinite(seconds) ? seconds * 1000 : null;
    return { queue, exists: true, messages: Math.max(messages, 1), headTimestampMs };
  } finally {
    await channel.close().catch(() => undefined);
  }
}
