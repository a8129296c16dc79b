import type { Executor } from '../db/executor.js';
import { ORIGIN_EXCHANGE_HEADER, ORIGIN_ROUTING_KEY_HEADER } from './headers.js';
import { inboxSql } from './sql.js';

export type QuarantineReason =
  | 'content-conflict'
  | 'invalid-envelope'
  | 'unknown-event-type'
  | 'stale-version'
  | 'handler-failed'
  | 'handler-permanent'
  | 'unsupported-schema-version';

export interface RawDelivery {
  content: Buffer;
  fields: { exchange: string; routingKey: string; redelivered?: boolean };
  properties: { messageId?: unknown; headers?: Record<string, unknown> | undefined };
}

export interface QuarantineEntry {
  consumer: string;
  eventId: string | null;
  reason: QuarantineReason;
  detail: string;
  fingerprint: string | null;
  delivery: RawDelivery;
}

/**
 * Keeps a message for a person: raw body, properties and headers, reason and time. The
 * database is the right place for the payload; logs only ever see the quarantine id.
 */
export async function quarantine(executor: Executor, schema: string, entry: QuarantineEntry): Promise<string> {
  const headers = entry.delivery.properties.headers;
  const { rows } = await executor.query<{ id: string }>(inboxSql(schema).quarantine, [
    entry.consumer,
    entry.eventId,
    entry.reason,
    entry.detail,
    entry.fingerprint,
    String(headers?.[ORIGIN_EXCHANGE_HEADER] ?? entry.delivery.fields.exchange),
    String(headers?.[ORIGIN_ROUTING_KEY_HEADER] ?? entry.delivery.fields.routingKey),
    JSON.stringify(entry.delivery.properties, (_, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)),
    entry.delivery.content,
  ]);
  return String(rows[0]?.id);
}
