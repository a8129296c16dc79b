import { createHash } from 'node:crypto';
import { ATTEMPT_HEADER, ORIGIN_EXCHANGE_HEADER, ORIGIN_ROUTING_KEY_HEADER, REPLAY_OF_HEADER } from './headers.js';
import type { RawDelivery } from './types.js';

/**
 * AMQP headers and properties may hold anything a publisher sent, U+0000 included, which
 * PostgreSQL text and jsonb refuse. A message must still be quarantined with what it carried:
 * the exact properties go in as JSON text (JSON escapes U+0000 and lone surrogates, so the text
 * is always storable), and jsonb gets a copy with those characters replaced, for queries only.
 */
export function encodeProperties(properties: object): { exact: string; queryable: string } {
  const exact = JSON.stringify(properties, exactValue);
  return { exact, queryable: JSON.stringify(JSON.parse(exact), (_, value: unknown) => storableValue(value)) };
}

/**
 * The properties as they were stored: the exact JSON text when there is one (rows since migration
 * 10), else the jsonb copy. Header values JSON has no form for come back as they were sent
 * (see exactValue), so a replay publishes bytes as bytes.
 */
export function decodeProperties<T>(exact: string | null | undefined, queryable: T): T {
  return exact == null ? queryable : (JSON.parse(exact, (_, value: unknown) => revivedValue(value)) as T);
}

/**
 * Tags for what JSON cannot hold as it is: bytes (an AMQP 'x' value, a Buffer, which JSON would
 * make `{type:'Buffer',data}`, a table on the way back) and the numbers it writes as null or 0.
 */
const BYTES_TAG = '$converge.bytes';
const NUMBER_TAG = '$converge.number';

/** JSON.stringify's replacer: `this[key]` is the value before toJSON (a Buffer's turns it into a plain object). */
function exactValue(this: unknown, key: string, value: unknown): unknown {
  const raw = (this as Record<string, unknown>)[key];
  if (Buffer.isBuffer(raw)) return { [BYTES_TAG]: raw.toString('base64') };
  if (typeof raw === 'number' && (!Number.isFinite(raw) || Object.is(raw, -0)))
    return { [NUMBER_TAG]: Object.is(raw, -0) ? '-0' : String(raw) };
  return typeof value === 'bigint' ? value.toString() : value;
}

function revivedValue(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const keys = Object.keys(value);
  const tagged = (value as Record<string, unknown>)[keys[0]!];
  if (keys.length === 1 && keys[0] === BYTES_TAG && typeof tagged === 'string') return Buffer.from(tagged, 'base64');
  if (keys.length === 1 && keys[0] === NUMBER_TAG && typeof tagged === 'string') return Number(tagged);
  // Rows stored before the tag: JSON.stringify wrote a Buffer as this, and nothing else converge stores looks so.
  const legacy = value as { type?: unknown; data?: unknown };
  if (keys.length === 2 && legacy.type === 'Buffer' && isByteArray(legacy.data)) return Buffer.from(legacy.data);
  return value;
}

function isByteArray(value: unknown): value is number[] {
  return Array.isArray(value) && value.every((byte) => Number.isInteger(byte) && byte >= 0 && byte <= 255);
}

/** `text` with U+0000 and lone surrogates replaced by U+FFFD, for text columns a person reads (ids, details). */
export function storableString(text: string): string {
  return text.replaceAll('\u0000', '\uFFFD').replace(LONE_SURROGATE, '\uFFFD');
}

export function storableOrNull(text: string | null): string | null {
  return text === null ? null : storableString(text);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

function storableValue(value: unknown): unknown {
  if (typeof value === 'string') return storableString(value);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([key, child]) => [storableString(key), child]));
}

/** Headers converge sets on each trip through the retry queue or a replay: not part of what was sent. */
const TRANSPORT_HEADERS = new Set([
  ATTEMPT_HEADER,
  ORIGIN_EXCHANGE_HEADER,
  ORIGIN_ROUTING_KEY_HEADER,
  REPLAY_OF_HEADER,
]);

/**
 * Identifies a message by what its publisher sent: body and properties, without converge's
 * per-trip headers. Two byte-identical copies (a redelivery, a second publish) get the same
 * hash and so update one open quarantine row.
 */
export function messageHash(delivery: Pick<RawDelivery, 'content' | 'properties'>): string {
  const { headers = {}, ...rest } = delivery.properties;
  const sent = Object.fromEntries(Object.entries(headers).filter(([name]) => !TRANSPORT_HEADERS.has(name)));
  const properties = encodeProperties({ ...rest, headers: sent }).exact;
  return createHash('sha256')
    .update(`${Buffer.byteLength(properties)}:`)
    .update(properties)
    .update(delivery.content)
    .digest('hex');
}
