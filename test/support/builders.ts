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

/**
 * One fixed envelope whose payload has every JSON kind, nested: what the envelope checks and the
 * relay's row mapping must carry through unchanged (a fixed occurredAt, so it compares exactly).
 */
export const nestedPaymentEvent: EventEnvelope = Object.freeze({
  eventId: 'c2d4a1e0-5b7f-4f1a-8d2e-3a9b0c1d2e3f',
  aggregateType: 'order',
  aggregateId: 'o-7',
  aggregateVersion: 3,
  eventType: 'OrderPaid',
  schemaVersion: 1,
  kind: 'incremental',
  payload: { amount: 10, nested: { list: [1, 'two', null, true, { three: 3 }] } },
  occurredAt: '2024-05-01T10:00:00.750Z',
});
