import { HEADER } from '../transport/wire.js';
import type { RawDelivery } from './types.js';

/** Header carrying how many times a delivery has been tried (set on the copies sent to the retry queue). */
export const ATTEMPT_HEADER = 'x-converge-attempt';
/** Headers that keep the first exchange and routing key of a delivery across trips through the retry queue. */
export const ORIGIN_EXCHANGE_HEADER = 'x-converge-original-exchange';
export const ORIGIN_ROUTING_KEY_HEADER = 'x-converge-original-routing-key';

/** This delivery's attempt number: 1 when it comes for the first time. */
export function readAttempt(delivery: { properties: { headers?: Record<string, unknown> | undefined } }): number {
  const previous = Number(delivery.properties.headers?.[ATTEMPT_HEADER] ?? 0);
  return Number.isInteger(previous) && previous >= 0 ? previous + 1 : 1;
}

/** Header naming the quarantine row a replayed message came from, so the consumer can record what became of it. */
export const REPLAY_OF_HEADER = 'x-converge-replay-of';

/**
 * The quarantine row id this delivery replays, or null. Anything that is not a plain positive
 * integer is ignored rather than trusted: it ends up as a bigint parameter of the consumer's transaction.
 */
export function readReplayOf(delivery: {
  properties: { headers?: Record<string, unknown> | undefined };
}): string | null {
  const value = delivery.properties.headers?.[REPLAY_OF_HEADER];
  if (typeof value !== 'string' && typeof value !== 'number') return null;
  const id = String(value);
  return /^[1-9][0-9]{0,17}$/.test(id) ? id : null;
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
 * default exchange under the queue's name, so the first values travel in headers (set by converge, as strings).
 */
export function originOf(delivery: Pick<RawDelivery, 'fields' | 'properties'>): {
  exchange: string;
  routingKey: string;
} {
  const headers = delivery.properties.headers ?? {};
  const exchange = headers[ORIGIN_EXCHANGE_HEADER];
  const routingKey = headers[ORIGIN_ROUTING_KEY_HEADER];
  return {
    exchange: typeof exchange === 'string' ? exchange : delivery.fields.exchange,
    routingKey: typeof routingKey === 'string' ? routingKey : delivery.fields.routingKey,
  };
}
