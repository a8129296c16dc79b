import type { Executor } from '../db/executor.js';
import { originOf, readAttempt } from './headers.js';
import { inboxSql } from './sql.js';
import { encodeProperties, messageHash, storableOrNull, storableString } from './stored-properties.js';
import type { QuarantineReason, RawDelivery } from './types.js';
import type { SchemaRef } from '../runtime/identifier.js';
import { scrubDetail } from '../envelope/redact.js';

export type { QuarantineReason, RawDelivery } from './types.js';

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
 * database is the right place for the payload; logs only ever see the quarantine id. Whatever
 * the message carries, the row can be written: see stored-properties.ts.
 */
export async function quarantine(executor: Executor, schema: SchemaRef, entry: QuarantineEntry): Promise<string> {
  const origin = originOf(entry.delivery);
  const metadata = bodyMetadata(entry.delivery.content);
  const properties = encodeProperties(entry.delivery.properties);
  // A message with an eventId and a fingerprint is known by them; any other by its bytes.
  const sql = inboxSql(schema);
  const statement = entry.eventId !== null && entry.fingerprint !== null ? sql.quarantine : sql.quarantineByHash;
  const { rows } = await executor.query<{ id: string }>(statement, [
    entry.consumer,
    storableOrNull(entry.eventId),
    entry.reason,
    // A handler's message may quote the payload: what the producer marked sensitive never gets stored there.
    storableString(scrubDetail(entry.detail, entry.delivery.properties.headers, entry.delivery.content)),
    entry.fingerprint,
    storableString(origin.exchange),
    storableString(origin.routingKey),
    properties.queryable,
    entry.delivery.content,
    storableOrNull(metadata.eventType),
    metadata.schemaVersion,
    failureClass(entry.reason),
    readAttempt(entry.delivery),
    properties.exact,
    messageHash(entry.delivery),
  ]);
  return String(rows[0]?.id);
}

/**
 * `exhausted`: it was tried up to a limit (maxAttempts, or the queue's deliveryLimit).
 * `permanent`: retrying could not have helped.
 */
export function failureClass(reason: QuarantineReason): 'permanent' | 'exhausted' {
  return reason === 'handler-failed' || reason === 'delivery-limit-exceeded' ? 'exhausted' : 'permanent';
}

/** eventType and schemaVersion as the body states them, if it is JSON that says so (bodies of any shape end up here). */
export function bodyMetadata(content: Buffer): { eventType: string | null; schemaVersion: number | null } {
  const none = { eventType: null, schemaVersion: null };
  if (content.length > 1024 * 1024) return none;
  try {
    const body = JSON.parse(content.toString('utf8')) as { eventType?: unknown; schemaVersion?: unknown } | null;
    if (typeof body !== 'object' || body === null) return none;
    return {
      eventType: typeof body.eventType === 'string' ? body.eventType.slice(0, 200) : null,
      schemaVersion:
        Number.isInteger(body.schemaVersion) && Math.abs(body.schemaVersion as number) < 2 ** 31
          ? (body.schemaVersion as number)
          : null,
    };
  } catch {
    return none;
  }
}
