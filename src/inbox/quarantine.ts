import type { Executor } from '../db/executor.js';
import { originOf, readAttempt } from './headers.js';
import { inboxSql } from './sql.js';
import type { QuarantineReason, RawDelivery } from './types.js';
import type { SchemaRef } from '../runtime/identifier.js';

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
 * database is the right place for the payload; logs only ever see the quarantine id.
 */
export async function quarantine(executor: Executor, schema: SchemaRef, entry: QuarantineEntry): Promise<string> {
  const origin = originOf(entry.delivery);
  const metadata = bodyMetadata(entry.delivery.content);
  const { rows } = await executor.query<{ id: string }>(inboxSql(schema).quarantine, [
    entry.consumer,
    entry.eventId,
    entry.reason,
    entry.detail,
    entry.fingerprint,
    origin.exchange,
    origin.routingKey,
    JSON.stringify(entry.delivery.properties, (_, value: unknown) =>
      typeof value === 'bigint' ? value.toString() : value,
    ),
    entry.delivery.content,
    metadata.eventType,
    metadata.schemaVersion,
    failureClass(entry.reason),
    readAttempt(entry.delivery),
  ]);
  return String(rows[0]?.id);
}

/** `exhausted`: it was retried up to maxAttempts. `permanent`: retrying could not have helped. */
export function failureClass(reason: QuarantineReason): 'permanent' | 'exhausted' {
  return reason === 'handler-failed' ? 'exhausted' : 'permanent';
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
