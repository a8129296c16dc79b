/** Shared builders for the events and deliveries tests feed to the library. */
import type { EventEnvelope } from '../../src/envelope/envelope.js';
import { DEFAULT_ROUTING_KEY, encodeMessage, routingKeyFromTemplate } from '../../src/transport/wire.js';

const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);

/** An incremental `order` event (AmountAdded, payload { delta: 1 } unless overridden). */
export function orderEvent(
  eventId: string,
  aggregateId = 'o1',
  version = 1,
  overrides: Partial<EventEnvelope> = {},
): EventEnvelope {
  return {
    eventId,
    aggregateType: 'order',
    aggregateId,
    aggregateVersion: version,
    eventType: 'AmountAdded',
    schemaVersion: 1,
    kind: 'incremental',
    payload: { delta: 1 },
    occurredAt: new Date().toISOString(),
    ...overrides,
  };
}

/** A delivery as the consumer sees it from the broker, encoded as the relay would publish `event`. */
export function deliveryOf(
  event: EventEnvelope,
  fields: { exchange?: string; routingKey?: string; redelivered?: boolean; deliveryTag?: number } = {},
) {
  return {
    content: encodeMessage(event, routingKey).content,
    fields: { exchange: 'x', routingKey: 'order.AmountAdded', ...fields },
    properties: { messageId: event.eventId, headers: {} as Record<string, unknown> },
  };
}
