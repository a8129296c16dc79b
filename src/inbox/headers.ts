import { randomBytes } from 'node:crypto';
import { HEADER } from '../transport/wire.js';
import { boundedInteger, boundedText } from './bounds.js';
import { signHeaders, signatureMatches, type ConvergeHeaders } from './header-signature.js';
import type { RawDelivery, Settlement } from './types.js';

export type { ConvergeHeaders } from './header-signature.js';

/** Header carrying how many times a delivery has been tried (set on the copies sent to the retry queue). */
export const ATTEMPT_HEADER = 'x-converge-attempt';
/** Headers that keep the first exchange and routing key of a delivery across trips through the retry queue. */
export const ORIGIN_EXCHANGE_HEADER = 'x-converge-original-exchange';
export const ORIGIN_ROUTING_KEY_HEADER = 'x-converge-original-routing-key';
/** Header naming the quarantine row a replayed message came from, so the consumer can record what became of it. */
export const REPLAY_OF_HEADER = 'x-converge-replay-of';
/** The random token the replay stored on that row: only the replay that wrote it records an outcome there. */
export const REPLAY_TOKEN_HEADER = 'x-converge-replay-token';
/** HMAC-SHA256 (hex) over the headers above, the messageId and the body, with the schema's header key. */
export const SIGNATURE_HEADER = 'x-converge-signature';

/** The headers converge writes to steer its own bookkeeping; honoured only when signed (header-signature.ts). */
export const CONVERGE_HEADERS = [
  ATTEMPT_HEADER,
  ORIGIN_EXCHANGE_HEADER,
  ORIGIN_ROUTING_KEY_HEADER,
  REPLAY_OF_HEADER,
  REPLAY_TOKEN_HEADER,
  SIGNATURE_HEADER,
] as const;

/**
 * The highest attempt number a header may carry: far above any maxAttempts (which is capped
 * lower), far below PostgreSQL's integer, so the quarantine row's `attempts` always fits.
 */
export const MAX_ATTEMPT = 1_000_000;
/** AMQP's own limit for exchange names and routing keys (shortstr), in UTF-8 bytes. */
const MAX_AMQP_NAME_BYTES = 255;
const REPLAY_ID = /^[1-9][0-9]{0,17}$/;
const REPLAY_TOKEN = /^[0-9a-f]{32}$/;

type Headers = Record<string, unknown> | undefined;
type WithHeaders = { properties: { headers?: Headers } };

/** What a delivery's converge headers say once checked: the trusted values, and the names of headers ignored. */
export interface HeaderVerdict {
  trusted: ConvergeHeaders;
  /** Converge headers present but not honoured (unsigned, forged, or out of range): counted by the consumer. */
  untrusted: string[];
}

/**
 * The converge headers of a message, each bounded (a value out of range counts as absent), or
 * `invalid` naming those present but out of range. Pure: no key, no trust.
 */
export function parseConvergeHeaders(headers: Headers): { values: ConvergeHeaders; invalid: string[] } {
  const h = headers ?? {};
  const values: ConvergeHeaders = {};
  const invalid: string[] = [];
  const take = <K extends keyof ConvergeHeaders>(name: string, key: K, parse: (v: unknown) => ConvergeHeaders[K]) => {
    const raw = ownHeader(h, name);
    if (raw === undefined) return;
    const value = parse(raw);
    if (value === undefined) invalid.push(name);
    else values[key] = value;
  };
  take(ATTEMPT_HEADER, 'attempt', (v) => boundedInteger(v, 1, MAX_ATTEMPT));
  take(ORIGIN_EXCHANGE_HEADER, 'originExchange', (v) => boundedText(v, MAX_AMQP_NAME_BYTES, { allowEmpty: true }));
  take(ORIGIN_ROUTING_KEY_HEADER, 'originRoutingKey', (v) => boundedText(v, MAX_AMQP_NAME_BYTES, { allowEmpty: true }));
  take(REPLAY_OF_HEADER, 'replayOf', (v) => matching(v, REPLAY_ID));
  take(REPLAY_TOKEN_HEADER, 'replayToken', (v) => matching(v, REPLAY_TOKEN));
  return { values, invalid };
}

/** A header the message itself carries: never a name inherited from Object.prototype. */
function ownHeader(headers: Record<string, unknown>, name: string): unknown {
  return Object.hasOwn(headers, name) ? headers[name] : undefined;
}

function matching(value: unknown, pattern: RegExp): string | undefined {
  if (typeof value !== 'string' && typeof value !== 'number') return undefined;
  const text = String(value);
  return pattern.test(text) ? text : undefined;
}

/**
 * Checks a delivery's converge headers against `key` (null: no key, nothing is trusted). All of
 * them are honoured when the signature covers exactly them, the messageId and the body; otherwise
 * none is (attempt 1, origin from the delivery, not a replay) and each present one is named in
 * `untrusted`: a forged header, or one from a converge that did not sign yet. Pure.
 */
export function verifyConvergeHeaders(
  key: Buffer | null,
  delivery: Pick<RawDelivery, 'content' | 'properties'>,
): HeaderVerdict {
  const headers = delivery.properties.headers ?? {};
  const present = CONVERGE_HEADERS.filter((name) => ownHeader(headers, name) !== undefined);
  if (present.length === 0) return { trusted: {}, untrusted: [] };
  const { values, invalid } = parseConvergeHeaders(headers);
  const signature = ownHeader(headers, SIGNATURE_HEADER);
  const signed =
    key !== null &&
    invalid.length === 0 &&
    typeof signature === 'string' &&
    signatureMatches(key, messageIdOf(delivery), delivery.content, values, signature);
  return signed ? { trusted: values, untrusted: [] } : { trusted: {}, untrusted: present };
}

/** Verdicts of the deliveries checked by this process, by delivery object; a delivery never checked trusts nothing. */
const verdicts = new WeakMap<object, HeaderVerdict & { key: Buffer | null }>();

/**
 * Checks `delivery` once and remembers the verdict (and the key, to sign its retry copy) for the
 * readers below. Returns the names of the converge headers it ignored.
 */
export function trustHeaders(delivery: RawDelivery, key: Buffer | null): string[] {
  const known = verdicts.get(delivery);
  if (known && known.key === key) return known.untrusted;
  const verdict = verifyConvergeHeaders(key, delivery);
  verdicts.set(delivery, { ...verdict, key });
  return verdict.untrusted;
}

function trusted(delivery: WithHeaders): ConvergeHeaders {
  return verdicts.get(delivery)?.trusted ?? {};
}

/** `settlements` with the converge headers each delivery carried but converge did not honour, where there were any. */
export function markUntrusted(settlements: Settlement[], untrusted: readonly string[][]): Settlement[] {
  return settlements.map((settlement, i) =>
    untrusted[i]?.length ? { ...settlement, untrustedHeaders: untrusted[i] } : settlement,
  );
}

/** This delivery's attempt number: 1 when it comes for the first time, or when its attempt header is not converge's. */
export function readAttempt(delivery: WithHeaders): number {
  const previous = trusted(delivery).attempt;
  return previous === undefined ? 1 : Math.min(previous, MAX_ATTEMPT - 1) + 1;
}

/** The quarantine row this delivery replays and the token that replay stored there, or null (not a trusted replay). */
export function readReplayOf(delivery: WithHeaders): { id: string; token: string } | null {
  const { replayOf, replayToken } = trusted(delivery);
  return replayOf !== undefined && replayToken !== undefined ? { id: replayOf, token: replayToken } : null;
}

/**
 * The converge headers of the copy of `delivery` sent to the retry queue: the next attempt, the
 * first origin, a trusted replay's id and token, signed with the key the delivery was checked
 * with. A delivery checked without a key gets unsigned headers, which the next consumer ignores.
 */
export function retryHeaders(delivery: RawDelivery, messageId: string, attempt: number): Record<string, unknown> {
  const origin = originOf(delivery);
  const { replayOf, replayToken } = trusted(delivery);
  const values: ConvergeHeaders = {
    attempt: Math.min(attempt, MAX_ATTEMPT),
    originExchange: origin.exchange,
    originRoutingKey: origin.routingKey,
    ...(replayOf !== undefined && replayToken !== undefined ? { replayOf, replayToken } : {}),
  };
  return signedHeaders(verdicts.get(delivery)?.key ?? null, messageId, delivery.content, values);
}

/** A fresh replay token: 128 random bits, stored on the quarantine row and sent in REPLAY_TOKEN_HEADER. */
export function newReplayToken(): string {
  return randomBytes(16).toString('hex');
}

/** `values` as converge headers, with their signature when there is a key. */
export function signedHeaders(
  key: Buffer | null,
  messageId: string,
  body: Buffer,
  values: ConvergeHeaders,
): Record<string, unknown> {
  const headers: Record<string, unknown> = {};
  if (values.attempt !== undefined) headers[ATTEMPT_HEADER] = values.attempt;
  if (values.originExchange !== undefined) headers[ORIGIN_EXCHANGE_HEADER] = values.originExchange;
  if (values.originRoutingKey !== undefined) headers[ORIGIN_ROUTING_KEY_HEADER] = values.originRoutingKey;
  if (values.replayOf !== undefined) headers[REPLAY_OF_HEADER] = values.replayOf;
  if (values.replayToken !== undefined) headers[REPLAY_TOKEN_HEADER] = values.replayToken;
  if (key !== null) headers[SIGNATURE_HEADER] = signHeaders(key, messageId, body, values);
  return headers;
}

/** `headers` without any converge header: what a copy keeps of what its publisher sent. */
export function withoutConvergeHeaders(headers: Record<string, unknown> = {}): Record<string, unknown> {
  const own = new Set<string>(CONVERGE_HEADERS);
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !own.has(name)));
}

/** The messageId a signature covers: the property as sent, or empty. */
export function messageIdOf(delivery: Pick<RawDelivery, 'properties'>): string {
  const id = delivery.properties.messageId;
  return typeof id === 'string' ? id : '';
}

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * `{ traceId }` for a log line about this delivery, or nothing: the trace id from the envelope's
 * traceparent, else from the AMQP `traceparent` header (a body that failed to parse still has
 * it). Only the 32-hex trace id, which joins the line to the trace; nothing from the payload.
 */
export function traceFields(
  delivery: { properties: { headers?: Record<string, unknown> | undefined } },
  envelope?: { traceparent?: string } | null,
): { traceId?: string } {
  const traceparent = envelope?.traceparent ?? delivery.properties.headers?.[HEADER.traceparent];
  const match = typeof traceparent === 'string' ? TRACEPARENT.exec(traceparent) : null;
  return match ? { traceId: match[1]! } : {};
}

/**
 * Where the delivery first came from. After a trip through the retry queue it arrives via the
 * default exchange under the queue's name, so the first values travel in (signed) headers;
 * without a valid signature the delivery's own exchange and routing key are all that is known.
 */
export function originOf(delivery: Pick<RawDelivery, 'fields' | 'properties'>): {
  exchange: string;
  routingKey: string;
} {
  const { originExchange, originRoutingKey } = trusted(delivery);
  return {
    exchange: originExchange ?? delivery.fields.exchange,
    routingKey: originRoutingKey ?? delivery.fields.routingKey,
  };
}
