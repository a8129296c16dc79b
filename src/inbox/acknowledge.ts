import { PublishError } from '../runtime/errors.js';
import type { Logger } from '../runtime/logger.js';
import type { RetryTier } from '../transport/queue-arguments.js';
import type { TransportDelivery, TransportPublisher } from '../transport/transport.js';
import { parkForRetry } from './retry-copy.js';
import type { RawDelivery, RetrySettlement, Settlement } from './types.js';

/**
 * Quarantines a delivery whose retry copy amqplib refused to encode (reason `unencodable-copy`),
 * resolving to the quarantined settlement, or to a retry when the row could not be written.
 */
export type QuarantineUncopyable = (
  delivery: RawDelivery,
  settlement: RetrySettlement,
  error: PublishError,
) => Promise<Settlement>;

export interface AcknowledgeOptions {
  retryTiers: readonly RetryTier[];
  logger: Logger;
  quarantineUncopyable: QuarantineUncopyable;
}

/**
 * Settles a committed batch and returns the settlements as they ended. A delivery to retry is
 * acked only once the broker confirmed its copy in the retry queue; when all are ackable one
 * ack-multiple settles the batch; one that could not be parked goes back after its backoff
 * (counted towards a quorum deliveryLimit). One whose copy amqplib cannot encode would come back
 * for ever with the same copy, so it is quarantined instead and acked once its row is committed.
 * A settle on a connection that closed after the commit is a no-op: the broker redelivers and the
 * inbox recognises the duplicate.
 */
export async function acknowledgeBatch(
  messages: TransportDelivery[],
  settlements: Settlement[],
  retryPublisher: TransportPublisher | undefined,
  options: AcknowledgeOptions,
): Promise<Settlement[]> {
  // The usual batch: nothing to copy, no promise per delivery.
  if (!settlements.some((s) => s.action === 'retry')) {
    messages[messages.length - 1]?.ackAllUpTo();
    return settlements;
  }
  const settled = await Promise.all(
    messages.map(async (message, i): Promise<[ackable: boolean, settlement: Settlement]> => {
      const settlement = settlements[i]!;
      if (settlement.action !== 'retry') return [true, settlement];
      const parked = await parkForRetry(retryPublisher, options, message, settlement);
      if (!(parked instanceof PublishError)) return [parked === 'parked', settlement];
      const quarantined = await options.quarantineUncopyable(message, settlement, parked);
      // No row (database down): back after the backoff, as a copy that failed to park.
      if (quarantined.action === 'retry') await new Promise((resolve) => setTimeout(resolve, quarantined.delayMs));
      const { untrustedHeaders } = settlement;
      return [quarantined.action === 'ack', untrustedHeaders ? { ...quarantined, untrustedHeaders } : quarantined];
    }),
  );
  // Every earlier delivery of the subscription is settled already (one batch at a time): one ack-multiple covers all.
  if (settled.every(([ackable]) => ackable)) messages[messages.length - 1]?.ackAllUpTo();
  else messages.forEach((message, i) => (settled[i]![0] ? message.ack() : message.nack({ requeue: true })));
  return settled.map(([, settlement]) => settlement);
}

/** Processing itself broke: every delivery of the batch goes back for redelivery. */
export function requeueBatch(messages: TransportDelivery[]): void {
  for (const message of messages) message.nack({ requeue: true });
}
