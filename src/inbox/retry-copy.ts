import { DEFAULT_CONFIRM_TIMEOUT_MS } from '../runtime/defaults.js';
import type { ConfirmPublisher } from '../transport/publisher.js';
import { ATTEMPT_HEADER, ORIGIN_EXCHANGE_HEADER, ORIGIN_ROUTING_KEY_HEADER } from './headers.js';
import type { RawDelivery, RetrySettlement } from './types.js';

/**
 * Copies a delivery that must wait to the retry queue with its backoff as expiry and the
 * next attempt number; resolves once the broker confirmed the copy. The same path serves a
 * fresh delivery and a parked event drained for a retry: both are RawDeliveries.
 */
export async function publishRetryCopy(publisher: ConfirmPublisher, retryQueue: string, delivery: RawDelivery, settlement: RetrySettlement): Promise<void> {
  const messageId = typeof delivery.properties.messageId === 'string' ? delivery.properties.messageId : `unidentified-${delivery.fields.deliveryTag}`;
  await publisher.publish('', retryQueue, delivery.content, {
    ...delivery.properties,
    messageId,
    headers: { ...delivery.properties.headers, [ATTEMPT_HEADER]: settlement.attempt, ...originHeaders(delivery) },
    expiration: String(settlement.delayMs),
    persistent: true,
  }, DEFAULT_CONFIRM_TIMEOUT_MS);
}

/**
 * Where the delivery first came from. After a trip through the retry queue it arrives via the
 * default exchange under the queue's name, so the first values are carried in headers.
 */
function originHeaders(delivery: RawDelivery): Record<string, string> {
  const headers = delivery.properties.headers ?? {};
  return {
    [ORIGIN_EXCHANGE_HEADER]: String(headers[ORIGIN_EXCHANGE_HEADER] ?? delivery.fields.exchange),
    [ORIGIN_ROUTING_KEY_HEADER]: String(headers[ORIGIN_ROUTING_KEY_HEADER] ?? delivery.fields.routingKey),
  };
}
