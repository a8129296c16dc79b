import type { Executor } from '../db/executor.js';
import { originOf, readAttempt } from './headers.js';
import { inboxSql } from './sql.js';
import { storableTruncated } from './bounds.js';
import { encodeProperties, messageHash, storableOrNull } from './stored-properties.js';
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

/** Longest detail kept: a handler's error message can be of any length. */
export const MAX_DETAIL_CHARS = 4000;
/** Longest exchange, routing key or eventType kept (AMQP names are at most 255 bytes). */
const MAX_NAME_CHARS = 255;

/**
 * Keeps a message for a person: raw body, properties and headers, reason and time. The
 * database is the right place for the payload; logs only ever see the quarantine id. Every
 * value from the message is bounded first (bounds.ts, headers.ts); should PostgreSQL still
 * refuse the row for what it holds, a minimal row keeps the message instead (fallbackRow).
 * Runs in the caller's transaction, under a savepoint so that a refused row leaves it usable.
 */
export async function quarantine(executor: Executor, schema: SchemaRef, entry: QuarantineEntry): Promise<string> {
  const sql = inboxSql(schema);
  const row = quarantineRow(entry);
  // A message with an eventId and a fingerprint is known by them; any other by its bytes.
  const statement = entry.eventId !== null && entry.fingerprint !== null ? sql.quarantine : sql.quarantineByHash;
  await executor.query(SAVEPOINT);
  try {
    const { rows } = await executor.query<{ id: string }>(statement, row);
    await executor.query(RELEASE);
    return String(rows[0]?.id);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (!refusedForContent(code)) throw err;
    await executor.query(ROLLBACK_TO);
    const { rows } = await executor.query<{ id: string }>(sql.quarantineByHash, fallbackRow(entry, String(code)));
    return String(rows[0]?.id);
  }
}

const SAVEPOINT = 'SAVEPOINT converge_quarantine';
const RELEASE = 'RELEASE SAVEPOINT converge_quarantine';
const ROLLBACK_TO = 'ROLLBACK TO SAVEPOINT converge_quarantine';

/** Data exceptions (22: out of range, bad encoding, bad JSON) and program limits (54: too deep, too long). */
export function refusedForContent(code: unknown): boolean {
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('54'));
}

/** The parameters of the quarantine statements for `entry`, each bounded. */
export function quarantineRow(entry: QuarantineEntry): unknown[] {
  const origin = originOf(entry.delivery);
  const metadata = bodyMetadata(entry.delivery.content);
  const properties = encodeProperties(entry.delivery.properties);
  return [
    entry.consumer,
    storableOrNull(entry.eventId),
    entry.reason,
    // A handler's message may quote the payload: what the producer marked sensitive never gets stored there.
    storableTruncated(
      scrubDetail(entry.detail, entry.delivery.properties.headers, entry.delivery.content),
      MAX_DETAIL_CHARS,
    ),
    entry.fingerprint,
    storableTruncated(origin.exchange, MAX_NAME_CHARS),
    storableTruncated(origin.routingKey, MAX_NAME_CHARS),
    properties.queryable,
    entry.delivery.content,
    metadata.eventType === null ? null : storableTruncated(metadata.eventType, MAX_NAME_CHARS),
    metadata.schemaVersion,
    failureClass(entry.reason),
    readAttempt(entry.delivery),
    properties.exact,
    messageHash(entry.delivery),
  ];
}

/**
 * The row kept when PostgreSQL refused the normal one for what the message holds: the reason,
 * the SQLSTATE that refused it, the body (bytea stores any bytes) and the properties as base64 of
 * their JSON text (ASCII, so storable), known by the hash of its bytes. Nothing else from the message.
 */
export function fallbackRow(entry: QuarantineEntry, sqlstate: string): unknown[] {
  const propertiesBase64 = Buffer.from(encodeProperties(entry.delivery.properties).exact, 'utf8').toString('base64');
  return [
    entry.consumer,
    null,
    entry.reason,
    `${entry.reason}; the quarantine row was refused with SQLSTATE ${sqlstate.replace(/[^0-9A-Z]/g, '?')}, so it is stored without its fields: the properties are base64 in properties.unstored`,
    null,
    null,
    null,
    JSON.stringify({ unstored: { propertiesBase64, sqlstate } }),
    entry.delivery.content,
    null,
    null,
    failureClass(entry.reason),
    1,
    null,
    messageHash(entry.delivery),
  ];
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
