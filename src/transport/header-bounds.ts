/**
 * Checks an AMQP content header's basic properties before amqplib decodes them. amqplib's
 * field-table decoder recurses once per nested table, so a table nested a few thousand levels
 * deep (7 bytes a level, far under frame_max; any producer can publish one) overflows the stack
 * and takes the connection down at every delivery of it. This walk is iterative and bounded:
 * what passes it amqplib decodes safely; what does not is delivered with its headers set aside
 * (header-guard.ts) and quarantined by the consumer. Pure functions over bytes, no I/O.
 */

export interface HeaderBounds {
  /** Tables and arrays nested in one another, the header table itself being level 1. */
  maxDepth: number;
  /** Field-table entries and array elements, counted over every level. */
  maxEntries: number;
  /** Bytes of the encoded header table. */
  maxBytes: number;
}

/**
 * Generous for real traffic: converge's own headers are one level deep, RabbitMQ's x-death is
 * three (array of tables holding an array); a 64-level table is decoded in a few µs and a few
 * KiB of stack. 1 MiB is eight times RabbitMQ's default frame_max (a content header is one frame).
 */
export const DEFAULT_HEADER_BOUNDS: Readonly<HeaderBounds> = Object.freeze({
  maxDepth: 64,
  maxEntries: 10_000,
  maxBytes: 1024 * 1024,
});

/**
 * Which bound a header table broke: `malformed` is a table no decoder can read (unknown type,
 * truncated); `prototype-key` one with a key `__proto__` at some level, which amqplib's decoder
 * (`table[key] = value`) turns into the decoded table's prototype: a Buffer there breaks
 * JSON.stringify and re-encoding, a table there lends its keys (x-converge-attempt…) to the
 * headers as inherited ones.
 */
export type HeaderBound = 'depth' | 'entries' | 'bytes' | 'malformed' | 'prototype-key';

/** Why a content header's properties were not handed to amqplib; `detail` names the bound and offsets, never content. */
export interface HeaderRejection {
  bound: HeaderBound;
  detail: string;
  /** The bytes set aside: the header table's content, or the whole properties when they are malformed outside it. */
  raw: Buffer;
}

type Scan = { ok: true } | { ok: false; bound: HeaderBound; detail: string };

/** Per type tag: its value's fixed size, or one of the kinds below; anything else amqplib cannot decode. */
const UNKNOWN = -1;
const LONG_BYTES = -2; // 'S', 'x': a 4-byte length, then that many bytes
const TABLE = -3; // 'F'
const ARRAY = -4; // 'A'
const TAGS = new Int8Array(256).fill(UNKNOWN);
for (const [tag, size] of Object.entries({
  t: 1,
  b: 1,
  B: 1,
  s: 2,
  u: 2,
  I: 4,
  i: 4,
  f: 4,
  D: 5,
  d: 8,
  l: 8,
  T: 8,
  V: 0,
}))
  TAGS[tag.charCodeAt(0)] = size;
TAGS[0x53] = LONG_BYTES;
TAGS[0x78] = LONG_BYTES;
TAGS[0x46] = TABLE;
TAGS[0x41] = ARRAY;

/** The one key whose UTF-8 bytes amqplib's decoder does not store as an own property. */
const PROTO = Buffer.from('__proto__');

/**
 * Walks the content of a field table (the pairs, without the table's own 4-byte length) with an
 * explicit stack: every length must fit inside its container, every type tag must be one
 * amqplib knows, and the bounds must hold.
 */
export function scanFieldTable(bytes: Buffer, bounds: HeaderBounds = DEFAULT_HEADER_BOUNDS): Scan {
  return scanTable(bytes, 0, bytes.length, bounds);
}

/** scanFieldTable over bytes[start, end), offsets in the detail counted from `start`. */
function scanTable(bytes: Buffer, start: number, end: number, bounds: HeaderBounds): Scan {
  if (end - start > bounds.maxBytes)
    return { ok: false, bound: 'bytes', detail: `header table of ${end - start} bytes, over ${bounds.maxBytes}` };
  // Container ends, and whether each is a table (names before values) or an array.
  const ends = [end];
  const tables = [true];
  let at = start;
  let entries = 0;
  const malformed = (what: string): Scan => ({
    ok: false,
    bound: 'malformed',
    detail: `header table malformed: ${what} at byte ${at - start}`,
  });
  while (ends.length > 0) {
    const top = ends[ends.length - 1]!;
    if (at === top) {
      ends.pop();
      tables.pop();
      continue;
    }
    if (++entries > bounds.maxEntries)
      return { ok: false, bound: 'entries', detail: `header table holds more than ${bounds.maxEntries} entries` };
    if (tables[tables.length - 1]) {
      if (at + 1 > top) return malformed('truncated field name');
      if (bytes[at] === PROTO.length && at + 1 + PROTO.length <= top && PROTO.equals(bytes.subarray(at + 1, at + 10)))
        return { ok: false, bound: 'prototype-key', detail: `header table key __proto__ at byte ${at - start}` };
      at += 1 + bytes[at]!;
    }
    if (at + 1 > top) return malformed('truncated field');
    const kind = TAGS[bytes[at]!]!;
    at += 1;
    if (kind >= 0) {
      if (at + kind > top) return malformed('truncated value');
      at += kind;
      continue;
    }
    if (kind === UNKNOWN) return malformed('unknown field type');
    if (at + 4 > top) return malformed('truncated length');
    const inner = at + 4 + bytes.readUInt32BE(at);
    if (inner > top) return malformed('length past its container');
    at += 4;
    if (kind === LONG_BYTES) {
      at = inner;
      continue;
    }
    if (ends.length + 1 > bounds.maxDepth)
      return { ok: false, bound: 'depth', detail: `header table nested deeper than ${bounds.maxDepth} levels` };
    ends.push(inner);
    tables.push(kind === TABLE);
  }
  return { ok: true };
}

/** amqplib's names for the basic properties, highest flag bit first; `headers` is the table. */
const PROPERTIES = [
  ['contentType', 'shortstr'],
  ['contentEncoding', 'shortstr'],
  ['headers', 'table'],
  ['deliveryMode', 'octet'],
  ['priority', 'octet'],
  ['correlationId', 'shortstr'],
  ['replyTo', 'shortstr'],
  ['expiration', 'shortstr'],
  ['messageId', 'shortstr'],
  ['timestamp', 'timestamp'],
  ['type', 'shortstr'],
  ['userId', 'shortstr'],
  ['appId', 'shortstr'],
  ['clusterId', 'shortstr'],
] as const;

/**
 * Checks encoded basic properties (flags, then the fields present). `ok` means amqplib can decode
 * them as they are. Otherwise the properties are decoded here, as amqplib would shape them, with
 * `headers` empty and the table's bytes in the rejection (a property truncated outside the table
 * ends the decode there; then the rejection keeps all the bytes).
 */
export function inspectBasicProperties(
  bytes: Buffer,
  bounds: HeaderBounds = DEFAULT_HEADER_BOUNDS,
): { ok: true } | { ok: false; properties: Record<string, unknown>; rejection: HeaderRejection } {
  if (bytes.length < 2) return { ok: true }; // amqplib's own error, for a frame no broker sends
  // Every delivery passes here: the first walk only checks; decoding is for the few it refuses.
  const rejection = walkProperties(bytes, bounds, null);
  if (!rejection) return { ok: true };
  const properties: Record<string, unknown> = {};
  walkProperties(bytes, bounds, properties);
  return { ok: false, properties, rejection };
}

/** Walks the properties present, decoding them into `into` when given; the rejection, or null. */
function walkProperties(
  bytes: Buffer,
  bounds: HeaderBounds,
  into: Record<string, unknown> | null,
): HeaderRejection | null {
  const flags = bytes.readUInt16BE(0);
  let rejection: HeaderRejection | null = null;
  let at = 2;
  for (let index = 0; index < PROPERTIES.length; index++) {
    if ((flags & (0x8000 >> index)) === 0) continue;
    const [name, kind] = PROPERTIES[index]!;
    if (kind === 'table') {
      if (at + 4 > bytes.length || at + 4 + bytes.readUInt32BE(at) > bytes.length) return truncated(bytes, name, at);
      const end = at + 4 + bytes.readUInt32BE(at);
      const scan = scanTable(bytes, at + 4, end, bounds);
      if (!scan.ok)
        rejection = { bound: scan.bound, detail: scan.detail, raw: Buffer.from(bytes.subarray(at + 4, end)) };
      if (into) into.headers = {};
      at = end;
      continue;
    }
    const size = kind === 'octet' ? 1 : kind === 'timestamp' ? 8 : 1 + (bytes[at] ?? 0);
    if (at + size > bytes.length) return truncated(bytes, name, at);
    if (into && kind === 'octet') into[name] = bytes[at];
    else if (into && kind === 'timestamp') into[name] = Number(bytes.readBigUInt64BE(at));
    else if (into) into[name] = bytes.toString('utf8', at + 1, at + size);
    at += size;
  }
  return rejection;
}

function truncated(bytes: Buffer, name: string, at: number): HeaderRejection {
  return {
    bound: 'malformed',
    detail: `basic properties malformed: ${name} truncated at byte ${at}`,
    raw: Buffer.from(bytes),
  };
}
