import { createHash } from 'node:crypto';

/**
 * Turns AMQP basic properties as amqplib decoded them (or as a quarantine row stored them) into
 * properties amqplib encodes faithfully, before converge publishes them again (a retry copy, a
 * replay), as header-encoding.ts does for the header table. amqplib's decoder produces values its
 * own encoder refuses: a `timestamp` of 2^64 - 1 reads as a number that rounds up to 2^64, which
 * BigInt() cannot write into 64 bits; a short string (`messageId`, `type`, `correlationId`, …) of
 * 255 bytes of invalid UTF-8 reads as up to 765 bytes of U+FFFD, over AMQP's 255-byte limit. A
 * throw there failed every retry copy of the message, so a failing handler retried it for ever.
 *
 * What amqplib would refuse, or would send as another value, is left out (never clamped: a clamped
 * timestamp or a cut string would claim a value the producer did not send) and named in
 * `x-converge-properties-omitted` (an array of property names) on the copy, beside the headers'
 * `x-converge-headers-omitted`: apart, because a header may have a property's name. The one
 * exception is `messageId`, which a copy needs (return matching, the signature of converge's
 * headers): one too long is replaced by `sha256:<hex>` of it (as wire.ts partitionKey does) and
 * named too. Pure, no I/O.
 */

/** Names the properties a copy was published without (or, for messageId, with a substitute for). */
export const PROPERTIES_OMITTED_HEADER = 'x-converge-properties-omitted';

/** AMQP short strings hold at most 255 bytes. */
const SHORTSTR_MAX_BYTES = 255;

/** Properties amqplib writes as a short string; messageId apart (see carriedMessageId). */
const SHORT_STRINGS = [
  'contentType',
  'contentEncoding',
  'correlationId',
  'replyTo',
  'expiration',
  'type',
  'userId',
  'appId',
] as const;

/** Every basic property but headers: what a marker may name. */
const PROPERTY_NAMES: ReadonlySet<string> = new Set([
  'messageId',
  ...SHORT_STRINGS,
  'deliveryMode',
  'priority',
  'timestamp',
  'clusterId',
]);

export interface EncodableProperties<T> {
  /** The properties to hand amqplib; the very object given when nothing had to change. */
  properties: T;
  /** Properties left out (or messageId replaced), messageId first; also in PROPERTIES_OMITTED_HEADER unless empty. */
  omitted: string[];
}

/**
 * `properties` as amqplib can carry them. Keys that are no AMQP property (amqplib's `persistent`,
 * `mandatory`, …) pass through untouched, and so does `headers` but for the marker. Idempotent.
 */
export function encodableProperties<T extends object>(
  properties: T,
  dropped: ReadonlySet<string> = NOTHING_DROPPED,
): EncodableProperties<T> {
  const given = properties as Record<string, unknown>;
  const omitted: string[] = [];
  let messageId: string | undefined;
  for (const name of PROPERTY_NAMES) {
    const value = given[name];
    if (value === undefined || value === null) continue; // amqplib leaves it out too: nothing lost
    if (name === 'messageId') {
      messageId = typeof value === 'string' ? carriedMessageId(value) : undefined;
      if (messageId !== value) omitted.push(name);
    } else if (dropped.has(name) || !carried(name, value, given)) omitted.push(name);
  }
  if (omitted.length === 0) return { properties, omitted };
  const out: Record<string, unknown> = { ...given };
  for (const name of omitted) delete out[name];
  if (messageId !== undefined) out.messageId = messageId;
  const headers = isTable(given.headers) ? given.headers : {};
  const previous = headers[PROPERTIES_OMITTED_HEADER];
  out.headers = { ...headers, [PROPERTIES_OMITTED_HEADER]: [...new Set([...propertyNames(previous), ...omitted])] };
  return { properties: out as T, omitted };
}

const NOTHING_DROPPED: ReadonlySet<string> = new Set();
const DROPPED_FROM_COPIES: ReadonlySet<string> = new Set(['userId']);

/**
 * The properties of a copy converge publishes on its own connection (a retry copy, a replay): as
 * encodableProperties, and without `userId`, left out and named. RabbitMQ closes a channel that
 * publishes a user-id other than its connection's login (406), and a message's user-id names the
 * user who published the original, which the copy's publisher is not.
 */
export function copyProperties<T extends object>(properties: T): EncodableProperties<T> {
  return encodableProperties(properties, DROPPED_FROM_COPIES);
}

/**
 * The messageId a copy of a message with `messageId` carries: the same, or when amqplib cannot
 * write it (over 255 bytes once encoded, as invalid UTF-8 becomes after decoding) `sha256:<hex>`
 * of it, which is just as stable. A caller signs with this value, which is what the receiver reads.
 */
export function carriedMessageId(messageId: string): string {
  if (fitsShortString(messageId)) return messageId;
  return `sha256:${createHash('sha256').update(messageId).digest('hex')}`;
}

/** True when amqplib writes `value` as property `name` and a decoder reads back the same value. */
function carried(name: string, value: unknown, properties: Record<string, unknown>): boolean {
  switch (name) {
    case 'expiration':
      // amqplib sends expiration.toString(): a number is written as its decimal text.
      return typeof value === 'string' ? fitsShortString(value) : Number.isSafeInteger(value);
    case 'deliveryMode':
      // amqplib takes `persistent` over deliveryMode: then this value is not sent at all.
      return properties.persistent !== undefined || isIntegerIn(value, 0, 256);
    case 'priority':
      return isIntegerIn(value, 0, 256);
    case 'timestamp':
      // Written with BigInt(value) into 64 unsigned bits: 2^64 (2^64 - 1 rounded) throws, a fraction too.
      return isIntegerIn(value, 0, 2 ** 64);
    case 'clusterId':
      return false; // amqplib never sends it (deprecated in AMQP 0-9-1): a copy is without it
    default:
      return typeof value === 'string' && fitsShortString(value);
  }
}

function fitsShortString(text: string): boolean {
  // A UTF-16 code unit is at most 3 UTF-8 bytes: most strings need no count.
  return text.length * 3 <= SHORTSTR_MAX_BYTES || Buffer.byteLength(text) <= SHORTSTR_MAX_BYTES;
}

function isIntegerIn(value: unknown, min: number, below: number): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value < below;
}

/** The property names an earlier copy's marker listed (the header may come from anyone: known names only). */
function propertyNames(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((name): name is string => PROPERTY_NAMES.has(name as string)) : [];
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !Buffer.isBuffer(value);
}
