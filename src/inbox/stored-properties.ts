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
  const exact = JSON.stringify(properties, (_, value: unknown) =>
    typeof value === 'bigint' ? value.toString() : value,
  );
  return { exact, queryable: JSON.stringify(JSON.parse(exact), (_, value: unknown) => storableValue(value)) };
}

/** The properties as they were stored: the exact JSON text when there is one (rows since migration 10), else the jsonb copy. */
export function decodeProperties<T>(exact: string | null | undefined, queryable: T): T {
  return exact == null ? queryable : (JSON.parse(exact) as T);
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
