import { DEFAULT_CONFIRM_TIMEOUT_MS } from '../runtime/defaults.js';
import { describeError, type Logger } from '../runtime/logger.js';
import { PublishError } from '../runtime/errors.js';
import { copyProperties } from '../transport/property-encoding.js';
import { chooseRetryTier, type RetryTier } from '../transport/queue-arguments.js';
import type { TransportPublisher } from '../transport/transport.js';
import { retryHeaders, traceFields, withoutConvergeHeaders } from './headers.js';
import type { RawDelivery, RetrySettlement } from './types.js';

/**
 * What became of a retry copy: `parked` once the broker confirmed it (the original may then be
 * acked); `failed` when it could not be parked, after holding the delivery for its backoff so a
 * broken retry path cannot turn into a hot redelivery loop (the delivery goes back); a PublishError
 * `unencodable` when amqplib refused the copy itself, which no number of tries can change (the
 * caller quarantines the delivery instead: see acknowledge.ts).
 */
export type ParkResult = 'parked' | 'failed' | PublishError;

/** Copies a delivery that must wait to the retry queue (publishRetryCopy). */
export async function parkForRetry(
  publisher: TransportPublisher | undefined,
  options: { retryTiers: readonly RetryTier[]; logger: Logger },
  delivery: RawDelivery,
  settlement: RetrySettlement,
): Promise<ParkResult> {
  try {
    if (!publisher) throw new Error('no retry channel');
    await publishRetryCopy(publisher, options.retryTiers, delivery, settlement);
    return 'parked';
  } catch (err) {
    const unencodable = err instanceof PublishError && err.reason === 'unencodable';
    options.logger.warn(
      { eventId: settlement.eventId, ...traceFields(delivery), ...describeError(err) },
      unencodable
        ? 'could not encode the retry copy of a delivery; quarantining it'
        : 'could not park delivery for retry; requeueing it after the backoff',
    );
    if (unencodable) return err;
    await new Promise((resolve) => setTimeout(resolve, settlement.delayMs));
    return 'failed';
  }
}

/**
 * Copies a delivery that must wait to the retry tier of its backoff (chooseRetryTier), with the
 * backoff as its own expiry (capped by the tier's TTL) and the next attempt number, signed
 * (headers.ts retryHeaders); resolves once the broker confirmed the copy. The same path serves a
 * fresh delivery and a parked event drained for a retry: both are RawDeliveries.
 */
export async function publishRetryCopy(
  publisher: TransportPublisher,
  tiers: readonly RetryTier[],
  delivery: RawDelivery,
  settlement: RetrySettlement,
): Promise<void> {
  const id = delivery.properties.messageId;
  // What amqplib cannot carry is left out and named; the messageId is signed as the copy carries it
  // (a substitute for one too long), since that is what the next consumer verifies against.
  const { properties } = copyProperties({
    ...delivery.properties,
    messageId: typeof id === 'string' ? id : `unidentified-${delivery.fields.deliveryTag}`,
  });
  const { messageId } = properties;
  const tier = chooseRetryTier(tiers, settlement.delayMs);
  await publisher.publish(
    '',
    tier.queue,
    delivery.content,
    {
      ...properties,
      messageId,
      // Converge's own headers only as this consumer vouches for them (signed): a forged one is not passed on.
      headers: {
        ...withoutConvergeHeaders(withoutBrokerTripHeaders(properties.headers)),
        ...retryHeaders(delivery, messageId, settlement.attempt),
      },
      expiration: String(Math.min(settlement.delayMs, tier.delayMs)),
      persistent: true,
    },
    DEFAULT_CONFIRM_TIMEOUT_MS,
  );
}

/**
 * The headers a broker adds per trip (deaths, quorum delivery count) describe the delivery being
 * copied, not the copy. Kept on a copy they would do harm: RabbitMQ drops a dead-lettered message
 * whose x-death already names the target queue (cycle detection), so a replayed message that once
 * died in `<queue>` (delivery limit) would be dropped on its next way back from the retry queue.
 * The delivery that arrives after the trip carries the broker's fresh x-death again.
 */
export function withoutBrokerTripHeaders(headers: Record<string, unknown> = {}): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !BROKER_TRIP_HEADER.test(name)));
}

const BROKER_TRIP_HEADER = /^x-(death|first-death-.*|last-death-.*|delivery-count)$/;
