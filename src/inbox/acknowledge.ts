import type { Logger } from '../runtime/logger.js';
import type { RetryTier } from '../transport/queue-arguments.js';
import type { TransportDelivery, TransportPublisher } from '../transport/transport.js';
import { parkForRetry } from './retry-copy.js';
import type { Settlement } from './types.js';

/**
 * Settles a committed batch. A delivery to retry is acked only once the broker confirmed its copy
 * in the retry queue; when all are ackable one ack-multiple settles the batch; one that could not be parked goes back after its backoff (counted towards a
 * quorum deliveryLimit). A settle on a connection that closed after the commit is a no-op: the
 * broker redelivers and the inbox recognises the duplicate.
 */
export async function acknowledgeBatch(
  messages: TransportDelivery[],
  settlements: Settlement[],
  retryPublisher: TransportPublisher | undefined,
  options: { retryTiers: readonly RetryTier[]; logger: Logger },
): Promise<void> {
  // The usual batch: nothing to copy, no promise per delivery.
  if (!settlements.some((s) => s.action === 'retry')) {
    messages[messages.length - 1]?.ackAllUpTo();
    return;
  }
  const ackable = await Promise.all(
    messages.map(async (message, i) => {
      const settlement = settlements[i]!;
      return settlement.action === 'retry' ? parkForRetry(retryPublisher, options, message, settlement) : true;
    }),
  );
  // Every earlier delivery of the subscription is settled already (one batch at a time): one ack-multiple covers all.
  if (ackable.every(Boolean)) messages[messages.length - 1]?.ackAllUpTo();
  else messages.forEach((message, i) => (ackable[i] ? message.ack() : message.nack({ requeue: true })));
}

/** Processing itself broke: every delivery of the batch goes back for redelivery. */
export function requeueBatch(messages: TransportDelivery[]): void {
  for (const message of messages) message.nack({ requeue: true });
}
