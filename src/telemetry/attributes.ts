import type { Attributes } from '@opentelemetry/api';

/**
 * Span attribute names: OpenTelemetry's messaging semantic conventions where one exists, and
 * `converge.*` for the rest. Values are identifiers, types, versions and outcome codes only:
 * never payloads, aggregate ids, tenant ids or routing keys (a custom routing key function may
 * read the payload), so a trace backend holds no personal data (invariant 6).
 */
export const ATTR = {
  system: 'messaging.system',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  destination: 'messaging.destination.name',
  messageId: 'messaging.message.id',
  batchCount: 'messaging.batch.message_count',
  consumerGroup: 'messaging.consumer.group.name',
  errorType: 'error.type',
  eventType: 'converge.event.type',
  aggregateType: 'converge.aggregate.type',
  aggregateVersion: 'converge.aggregate.version',
  errorCode: 'converge.error.code',
  outcome: 'converge.consumer.outcome',
  reason: 'converge.consumer.reason',
} as const;

export const MESSAGING_SYSTEM = 'rabbitmq';

/** The fields of an outbox row the publish span describes (the relay's claimed row has them all). */
export interface PublishedRow {
  event_id: string;
  event_type: string;
  aggregate_type: string;
  aggregate_version: string | number;
  traceparent: string | null;
}

/** What the PRODUCER span of one publish carries. */
export function publishAttributes(row: PublishedRow, exchange: string): Attributes {
  return {
    [ATTR.system]: MESSAGING_SYSTEM,
    [ATTR.operationType]: 'send',
    [ATTR.operationName]: 'publish',
    [ATTR.destination]: exchange,
    [ATTR.messageId]: row.event_id,
    [ATTR.eventType]: row.event_type,
    [ATTR.aggregateType]: row.aggregate_type,
    [ATTR.aggregateVersion]: Number(row.aggregate_version),
  };
}

/** What the span of one append carries from its start. */
export const APPEND_ATTRIBUTES: Attributes = {
  [ATTR.system]: MESSAGING_SYSTEM,
  [ATTR.operationType]: 'create',
  [ATTR.operationName]: 'append',
};

/** Added once the append is done: the message id for one event, the count for a batch (as the conventions ask). */
export function appendedAttributes(eventIds: readonly string[]): Attributes {
  return eventIds.length === 1 ? { [ATTR.messageId]: eventIds[0]! } : { [ATTR.batchCount]: eventIds.length };
}

/** A delivery as the consumer span sees it: the broker's fields and properties, never the body. */
export interface TracedDelivery {
  fields: { exchange: string };
  properties: { messageId?: unknown; headers?: Record<string, unknown> | undefined };
}

/** What the CONSUMER span of one delivery carries before it is processed. */
export function deliveryAttributes(delivery: TracedDelivery, consumer: string): Attributes {
  const attributes: Attributes = {
    [ATTR.system]: MESSAGING_SYSTEM,
    [ATTR.operationType]: 'process',
    [ATTR.operationName]: 'process',
    [ATTR.destination]: delivery.fields.exchange,
    [ATTR.consumerGroup]: consumer,
  };
  const { messageId } = delivery.properties;
  if (typeof messageId === 'string') attributes[ATTR.messageId] = messageId;
  return attributes;
}

/** The code of an error for `error.type`: a converge or PostgreSQL code, else the error's class. Never its message. */
export function errorType(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.length > 0) return code;
  return err instanceof Error ? err.name : '_OTHER';
}
