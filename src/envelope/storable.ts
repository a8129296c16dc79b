/**
 * What PostgreSQL text and jsonb, and JSON on its way through, keep unchanged: the envelope's
 * checks of its text fields and of the payload, without anything of the envelope itself.
 */

/** True if PostgreSQL text (and jsonb) can store `value` unchanged: no U+0000, no lone surrogate. */
export function storableText(value: string): boolean {
  return !value.includes('\u0000') && !LONE_SURROGATE.test(value);
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * An ISO 8601 datetime (as the envelope's pattern admits: a four-digit year) that PostgreSQL
 * timestamptz and JS Date both hold: year 0000 is valid ISO but PostgreSQL refuses it (22008),
 * which would fail the inbox insert on every retry instead of quarantining the event once.
 */
export function storableInstant(text: string): boolean {
  return !text.startsWith('0000') && Number.isFinite(Date.parse(text));
}

/** Every string and key in `value` is storable text (iterative, like isFiniteThroughout). */
export function storableThroughout(value: unknown): boolean {
  const pending: unknown[] = [value];
  const seen = new Set<object>();
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string' && !storableText(item)) return false;
    if (typeof item !== 'object' || item === null || seen.has(item)) continue;
    seen.add(item);
    if (!Array.isArray(item)) for (const key of Object.keys(item)) if (!storableText(key)) return false;
    for (const child of Array.isArray(item) ? item : Object.values(item)) pending.push(child);
  }
  return true;
}

/**
 * No non-finite number anywhere in `value`. Iterative, so an outgoing payload of any depth
 * cannot overflow the stack, and each object is visited once, so a cycle (which
 * fingerprinting rejects later) cannot loop here.
 */
export function isFiniteThroughout(value: unknown): boolean {
  const pending: unknown[] = [value];
  const seen = new Set<object>();
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'number' && !Number.isFinite(item)) return false;
    if (typeof item !== 'object' || item === null || seen.has(item)) continue;
    seen.add(item);
    // A loop, not push(...items): spreading a 100,000-element array would itself overflow the stack.
    for (const child of Array.isArray(item) ? item : Object.values(item)) pending.push(child);
  }
  return true;
}

/** Objects and arrays the fast path walks in a payload before it leaves the payload to the slow path. */
const PLAIN_PAYLOAD_NODES = 10_000;

/**
 * Every string and key storable in PostgreSQL text and every number finite, as the slow path's
 * two walks require, in one walk without a set of visited objects. A payload of more than
 * PLAIN_PAYLOAD_NODES objects and arrays (a cycle among them) goes the slow way, which visits
 * each once. Anything but JSON's scalars (undefined, a function, a bigint) goes the slow way too.
 */
export function plainPayload(payload: unknown): boolean {
  if (typeof payload !== 'object' || payload === null) return plainScalar(payload);
  const pending: unknown[] = [payload];
  let visited = 0;
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item !== 'object' || item === null) {
      if (!plainScalar(item)) return false;
      continue;
    }
    if (++visited > PLAIN_PAYLOAD_NODES) return false;
    if (Array.isArray(item)) {
      for (const child of item as unknown[]) pending.push(child);
      continue;
    }
    for (const key in item) {
      if (!Object.hasOwn(item, key)) continue;
      if (!storableText(key)) return false;
      pending.push((item as Record<string, unknown>)[key]);
    }
  }
  return true;
}

function plainScalar(value: unknown): boolean {
  if (typeof value === 'string') return storableText(value);
  if (typeof value === 'number') return Number.isFinite(value);
  return value === null || typeof value === 'boolean';
}
