import { storableText } from '../envelope/storable.js';

/**
 * Bounds for values taken from a message before they reach SQL. A header or property holds
 * whatever its publisher sent; a column has a type. Pure functions: each returns the value when
 * it fits, `undefined` when it does not (the caller decides: ignore it, or quarantine with a reason).
 */

/** An integer in [min, max], from a number or bigint as AMQP decoders give them; anything else is undefined. */
export function boundedInteger(value: unknown, min: number, max: number): number | undefined {
  if (typeof value === 'bigint') return value >= BigInt(min) && value <= BigInt(max) ? Number(value) : undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) return undefined;
  return value >= min && value <= max ? value : undefined;
}

/**
 * Text PostgreSQL stores unchanged (no U+0000, no lone surrogate) and at most `maxBytes` in UTF-8;
 * not text (a byte array, a number) is undefined. Empty only if allowed.
 */
export function boundedText(
  value: unknown,
  maxBytes: number,
  options: { allowEmpty?: boolean } = {},
): string | undefined {
  if (typeof value !== 'string') return undefined;
  if (value === '' && !options.allowEmpty) return undefined;
  if (value.length > maxBytes || Buffer.byteLength(value, 'utf8') > maxBytes) return undefined;
  return storableText(value) ? value : undefined;
}

/**
 * `text` made storable and short enough for a column a person reads: U+0000 and lone surrogates
 * become U+FFFD, and past `maxChars` UTF-16 units it is cut (never inside a surrogate pair) and marked.
 */
export function storableTruncated(text: string, maxChars: number): string {
  const storable = text.replaceAll('\u0000', '\uFFFD').replace(LONE_SURROGATE, '\uFFFD');
  if (storable.length <= maxChars) return storable;
  const marker = '…';
  let end = Math.max(0, maxChars - marker.length);
  if (end > 0 && /[\uD800-\uDBFF]/.test(storable[end - 1]!)) end--;
  return storable.slice(0, end) + marker;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
