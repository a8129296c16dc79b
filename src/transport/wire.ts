import { createHash } from 'node:crypto';
import type { Options } from 'amqplib';
import { ConfigError, EnvelopeValidationError } from '../runtime/errors.js';
import type { EventEnvelope } from '../envelope/envelope.js';
import { SENSITIVE_HEADER } from '../envelope/redact.js';

export const CONTENT_TYPE = 'application/json';

/**
 * Headers older converge versions (and tools that read headers only) know. The relay now sends
 * `traceparent` alone, and only when the event has one: every field is in the body, and a header
 * table costs the broker per message (docs/performance.md#wire-format). Consumers still accept
 * messages that carry the others; nothing in converge reads them.
 */
export const HEADER = {
  aggregateType: 'x-aggregate-type',
  aggregateId: 'x-aggregate-id',
  aggregateVersion: 'x-aggregate-version',
  schemaVersion: 'x-schema-version',
  kind: 'x-event-kind',
  tenantId: 'x-tenant-id',
  traceparent: 'traceparent',
} as const;

/**
 * The AMQP property that carries the partition key, which the consistent-hash exchange of a
 * partitioned consumer group hashes (`hash-property`), so that needs no header table.
 */
export const PARTITION_PROPERTY = 'correlation_id';

/** AMQP short strings (correlation_id among them) hold at most 255 bytes. */
const SHORTSTR_MAX_BYTES = 255;

/**
 * The aggregate an event belongs to, as one short string: `{aggregateType}/{aggregateId}`
 * (a type never contains `/`). An id too long for an AMQP property is replaced by the SHA-256
 * of that string, which is just as stable: the same aggregate always gets the same key.
 */
export function partitionKey(envelope: Pick<EventEnvelope, 'aggregateType' | 'aggregateId'>): string {
  const key = `${envelope.aggregateType}/${envelope.aggregateId}`;
  if (Buffer.byteLength(key) <= SHORTSTR_MAX_BYTES) return key;
  return `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

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
  // Split once here: a replace() with a callback per message cost the relay more than the key is worth.
  const parts = template.split(/\{(\w+)\}/g);
  const literals = parts.filter((_, i) => i % 2 === 0);
  const fields = parts.filter((_, i) => i % 2 === 1) as Placeholder[];
  return (envelope) => {
    let key = literals[0]!;
    for (let i = 0; i < fields.length; i++) {
      const value = envelope[fields[i]!];
      key += (value === undefined ? '_' : String(value)) + literals[i + 1]!;
    }
    return key;
  };
}

export interface EncodedMessage {
  routingKey: string;
  content: Buffer;
  options: Options.Publish & { messageId: string; mandatory: true };
}

/**
 * The body is the whole envelope, which is all a consumer reads. The properties name the event
 * for brokers and tools, `correlationId` carries the partition key, the header `traceparent`
 * lets a consumer continue the trace before it parses the body, and `x-converge-sensitive`
 * (the outbox row's sensitive_fields) tells every display which payload paths to mask.
 */
export function encodeMessage(
  envelope: EventEnvelope,
  routingKey: RoutingKeyFn,
  sensitiveFields?: string | null,
): EncodedMessage {
  const key = routingKey(envelope);
  // AMQP caps routing keys at 255 bytes; a longer one would be refused by the client at publish time.
  if (Buffer.byteLength(key) > 255)
    throw new EnvelopeValidationError('routingKey', 'longer than 255 bytes once filled in');
  const options: EncodedMessage['options'] = {
    messageId: envelope.eventId,
    correlationId: partitionKey(envelope),
    type: envelope.eventType,
    contentType: CONTENT_TYPE,
    timestamp: Math.floor(Date.parse(envelope.occurredAt) / 1000),
    persistent: true,
    mandatory: true,
    appId: 'converge',
  };
  const headers: Record<string, string> = {};
  if (envelope.traceparent !== undefined) headers[HEADER.traceparent] = envelope.traceparent;
  // Only events written with a catalog carry it: displays mask the whole payload of one without.
  if (typeof sensitiveFields === 'string') headers[SENSITIVE_HEADER] = sensitiveFields;
  // No empty table: a header table costs the broker per message (docs/performance.md#wire-format).
  if (Object.keys(headers).length > 0) options.headers = headers;
  return { routingKey: key, content: Buffer.from(JSON.stringify(envelope)), options };
}

/**
 * The header table earlier versions sent with every message (HEADER), for tests and for
 * measuring what it costs; consumers accept messages with or without it.
 */
export function legacyHeaders(envelope: EventEnvelope): Record<string, string | number> {
  const headers: Record<string, string | number> = {
    [HEADER.aggregateType]: envelope.aggregateType,
    [HEADER.aggregateId]: envelope.aggregateId,
    [HEADER.aggregateVersion]: envelope.aggregateVersion,
    [HEADER.schemaVersion]: envelope.schemaVersion,
    [HEADER.kind]: envelope.kind,
  };
  if (envelope.tenantId !== undefined) headers[HEADER.tenantId] = envelope.tenantId;
  if (envelope.traceparent !== undefined) headers[HEADER.traceparent] = envelope.traceparent;
  return headers;
}
