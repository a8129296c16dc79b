import type { Options } from 'amqplib';
import { ConfigError, EnvelopeValidationError } from '../runtime/errors.js';
import type { EventEnvelope } from '../envelope/envelope.js';

export const CONTENT_TYPE = 'application/json';

export const HEADER = {
  aggregateType: 'x-aggregate-type',
  aggregateId: 'x-aggregate-id',
  aggregateVersion: 'x-aggregate-version',
  schemaVersion: 'x-schema-version',
  kind: 'x-event-kind',
  tenantId: 'x-tenant-id',
  traceparent: 'traceparent',
} as const;

/** Default routing key: `{aggregateType}.{eventType}`, e.g. `order.OrderPaid`. */
export const DEFAULT_ROUTING_KEY = '{aggregateType}.{eventType}';

/** Envelope fields a routing key may name: scalars only, so none stringifies as `[object Object]`. */
type Placeholder = 'aggregateType' | 'eventType' | 'kind' | 'tenantId' | 'schemaVersion';
const PLACEHOLDERS = new Set<string>([
  'aggregateType',
  'eventType',
  'kind',
  'tenantId',
  'schemaVersion',
] satisfies Placeholder[]);

export type RoutingKeyFn = (envelope: EventEnvelope) => string;

/**
 * Turns a template such as `{tenantId}.{aggregateType}.{eventType}` into a function.
 * Unknown placeholders fail at configuration time rather than on the first publish.
 */
export function routingKeyFromTemplate(template: string, field = 'routingKey'): RoutingKeyFn {
  for (const match of template.matchAll(/\{([^}]*)\}/g)) {
    if (!PLACEHOLDERS.has(match[1] ?? '')) throw new ConfigError(field, `unknown placeholder {${match[1]}}`);
  }
  if (Buffer.byteLength(template) > 255) throw new ConfigError(field, 'longer than 255 bytes');
  return (envelope) =>
    template.replace(/\{(\w+)\}/g, (_, key: string) => {
      const value = envelope[key as Placeholder];
      return value === undefined ? '_' : String(value);
    });
}

export interface EncodedMessage {
  routingKey: string;
  content: Buffer;
  options: Options.Publish;
}

/** The body is the whole envelope; properties and headers mirror it for brokers, routers and tracing. */
export function encodeMessage(envelope: EventEnvelope, routingKey: RoutingKeyFn): EncodedMessage {
  const headers: Record<string, string | number> = {
    [HEADER.aggregateType]: envelope.aggregateType,
    [HEADER.aggregateId]: envelope.aggregateId,
    [HEADER.aggregateVersion]: envelope.aggregateVersion,
    [HEADER.schemaVersion]: envelope.schemaVersion,
    [HEADER.kind]: envelope.kind,
  };
  if (envelope.tenantId !== undefined) headers[HEADER.tenantId] = envelope.tenantId;
  if (envelope.traceparent !== undefined) headers[HEADER.traceparent] = envelope.traceparent;
  const key = routingKey(envelope);
  // AMQP caps routing keys at 255 bytes; a longer one would be refused by the client at publish time.
  if (Buffer.byteLength(key) > 255)
    throw new EnvelopeValidationError('routingKey', 'longer than 255 bytes once filled in');
  return {
    routingKey: key,
    content: Buffer.from(JSON.stringify(envelope)),
    options: {
      messageId: envelope.eventId,
      type: envelope.eventType,
      contentType: CONTENT_TYPE,
      timestamp: Math.floor(Date.parse(envelope.occurredAt) / 1000),
      persistent: true,
      mandatory: true,
      appId: 'converge',
      headers,
    },
  };
}
