import { createHmac, timingSafeEqual } from 'node:crypto';

/** The values of converge's own headers, as a retry copy or a replay sets them. */
export interface ConvergeHeaders {
  attempt?: number;
  originExchange?: string;
  originRoutingKey?: string;
  replayOf?: string;
  replayToken?: string;
}

const SIGNATURE = /^[0-9a-f]{64}$/;

/**
 * HMAC-SHA256 (hex) with the schema's header key over a version tag, every converge header value
 * (each length-prefixed, an absent one marked apart from an empty one), the messageId and the
 * body: a signature copied onto another message, or kept while a value changes, no longer matches.
 */
export function signHeaders(key: Buffer, messageId: string, body: Buffer, values: ConvergeHeaders): string {
  const hmac = createHmac('sha256', key).update('converge-headers-v1\n');
  const fields = [
    messageId,
    values.attempt === undefined ? undefined : String(values.attempt),
    values.originExchange,
    values.originRoutingKey,
    values.replayOf,
    values.replayToken,
  ];
  for (const field of fields) hmac.update(field === undefined ? '-\n' : `${Buffer.byteLength(field)}:${field}\n`);
  return hmac.update(body).digest('hex');
}

/** True when `signature` is the signature of exactly these values, messageId and body (compared in constant time). */
export function signatureMatches(
  key: Buffer,
  messageId: string,
  body: Buffer,
  values: ConvergeHeaders,
  signature: string,
): boolean {
  if (!SIGNATURE.test(signature)) return false;
  const expected = Buffer.from(signHeaders(key, messageId, body, values), 'hex');
  return timingSafeEqual(expected, Buffer.from(signature, 'hex'));
}
