import { DEFAULT_CONFIRM_TIMEOUT_MS } from '../runtime/defaults.js';
import type amqp from 'amqplib';
import { describeError, type Logger } from '../runtime/logger.js';
import type { ConfirmPublisher } from '../transport/publisher.js';
import { ATTEMPT_HEADER, ORIGIN_EXCHANGE_HEADER, ORIGIN_ROUTING_KEY_HEADER, originOf, traceFields } from './headers.js';
import type { RawDelivery, RetrySettlement } from './types.js';

/**
 * Copies a delivery that must wait to the retry queue. True once the broker confirmed the copy
 * (the original may then be acked); false if the copy could not be parked, after holding the
 * delivery for its backoff so a broken retry path cannot turn into a hot redelivery loop.
 */
export async function parkForRetry(
  publisher: ConfirmPublisher | undefined,
  options: { retryQueue: string; logger: Logger },
  delivery: RawDelivery,
  settlement: RetrySettlement,
): Promise<boolean> {
  try {
    if (!publisher) throw new Error('no retry channel');
    await publishRetryCopy(publisher, options.retryQueue, delivery, settlement);
    return true;
  } catch (err) {
    options.logger.warn(
      { eventId: settlement.eventId, ...traceFields(delivery), ...describeError(err) },
      'could not park delivery for retry; requeueing it after the backoff',
    );
    await new Promise((resolve) => setTimeout(resolve, settlement.delayMs));
    return false;
  }
}

/**
 * Copies a delivery that must wait to the retry queue with its backoff as expiry and the
 * next attempt number; resolves once the broker confirmed the copy. The same path serves a
 * fresh delivery and a parked event drained for a retry: both are RawDeliveries.
 */
export async function publishRetryCopy(
  publisher: ConfirmPublisher,
  retryQueue: string,
  delivery: RawDelivery,
  settlement: RetrySettlement,
): Promise<void> {
  const messageId =
    typeof delivery.properties.messageId === 'string'
      ? delivery.properties.messageId
      : `unidentified-${delivery.fields.deliveryTag}`;
  await publisher.publish(
    '',
    retryQueue,
    delivery.content,
    {
      ...delivery.properties,
      messageId,
      headers: { ...delivery.properties.headers, [ATTEMPT_HEADER]: settlement.attempt, ...originHeaders(delivery) },
      expiration: String(settlement.delayMs),
      persistent: true,
    },
    DEFAULT_CONFIRM_TIMEOUT_MS,
  );
}

/** The first exchange and routing key, kept across trips through the retry queue. */
function originHeaders(delivery: RawDelivery): Record<string, string> {
  const origin = originOf(delivery);
  return { [ORIGIN_EXCHANGE_HEADER]: origin.exchange, [ORIGIN_ROUTING_KEY_HEADER]: origin.routingKey };
}

/**
 * Declares the consumer's exchange, queue and bindings, and the retry queue whose expired
 * copies go back to the main queue through the default exchange.
 */
export async function declareQueues(
  channel: amqp.Channel,
  options: { queue: string; retryQueue: string; exchange: string; bindings: readonly string[] },
): Promise<void> {
  const { queue, retryQueue, exchange } = options;
  await channel.assertExchange(exchange, 'topic', { durable: true });
  await channel.assertQueue(queue, { durable: true });
  for (const pattern of options.bindings) await channel.bindQueue(queue, exchange, pattern);
  await channel.assertQueue(retryQueue, {
    durable: true,
    arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': queue },
  });
}
