import type amqp from 'amqplib';
import type { ConsumeMessage } from 'amqplib';
import type { Logger } from '../runtime/logger.js';
import type { ConfirmPublisher } from '../transport/publisher.js';
import { parkForRetry } from './retry-copy.js';
import type { Settlement } from './types.js';

/**
 * Settles a committed batch on its delivery channel. A delivery to retry is acked only once the
 * broker confirmed its copy in the retry queue. Every earlier delivery on this channel is already
 * settled, so one ack-multiple covers the batch; one that could not be parked goes back after its
 * backoff (counted towards a quorum deliveryLimit).
 */
export async function acknowledgeBatch(
  channel: amqp.Channel,
  messages: ConsumeMessage[],
  settlements: Settlement[],
  retryPublisher: ConfirmPublisher | undefined,
  options: { retryQueue: string; logger: Logger },
): Promise<void> {
  const ackable = await Promise.all(
    messages.map(async (message, i) => {
      const settlement = settlements[i]!;
      return settlement.action === 'retry' ? parkForRetry(retryPublisher, options, message, settlement) : true;
    }),
  );
  if (ackable.every(Boolean)) safeSettle(() => channel.ack(messages[messages.length - 1]!, true));
  else
    messages.forEach((message, i) =>
      safeSettle(() => (ackable[i] ? channel.ack(message) : channel.nack(message, false, true))),
    );
}

/** Processing itself broke: every delivery of the batch goes back for redelivery. */
export function requeueBatch(channel: amqp.Channel, messages: ConsumeMessage[]): void {
  for (const message of messages) safeSettle(() => channel.nack(message, false, true));
}

function safeSettle(settle: () => void): void {
  try {
    settle();
  } catch {
    // The channel closed after commit: the broker redelivers and the inbox recognises the duplicate.
  }
}
