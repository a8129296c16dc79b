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

/** Which bound a header table broke: `malformed` is a table no decoder can read (unknown type, truncated). */
export type HeaderBound = 'depth' | 'entries' | 'bytes' | 'malformed';

/** Why a content header's properties were not handed to amqplib; `detail` names the bound and offsets, never content. */
export interface HeaderRejection {
  bound: HeaderBound;
  detail: string;
  /** The bytes set aside: the header table's content, or the whole properties when they are malformed outside it. */
  raw: Buffer;
}

type Scan = { ok: true } | { ok: false; bound: HeaderBound; detail: string };

/** Fixed sizes of the field values amqplib decodes (AMQP 0-9-1 with RabbitMQ's errata). */
const FIXED: Readonly<Record<string, number>> = {
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
};

/**
 * Walks the content of a field table (the pairs, without the table's own 4-byte length) with an
 * explicit stack: every length must fit inside its container, every type tag must be one
 * amqplib knows, and the bounds must hold.
 */
export function scanFieldTable(bytes: Buffer, bounds: HeaderBounds = DEFAULT_HEADER_BOUNDS): Scan {
  if (bytes.length > bounds.maxBytes)
    return { ok: false, bound: 'bytes', detail: `header table of ${bytes.length} bytes, over ${bounds.maxBytes}` };
  const stack: { end: number; table: boolean }[] = [{ end: bytes.length, table: true }];
  let at = 0;
  let entries = 0;
  const malformed = (what: string): Scan => ({
    ok: false,
    bound: 'malformed',
    detail: `header table malformed: ${what} at byte ${at}`,
  });
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    if (at === top.end) {
      stack.pop();
      continue;
    }
    if (++entries > bounds.maxEntries)
      return { ok: false, bound: 'entries', detail: `header table holds more than ${bounds.maxEntries} entries` };
    if (top.table) {
      if (at + 1 > top.end) return malformed('truncated field name');
      at += 1 + bytes[at]!;
    }
    if (at + 1 > top.end) return malformed('truncated field');
    const tag = String.fromCharCode(bytes[at]!);
    at += 1;
    const fixed = FIXED[tag];
    if (fixed !== undefined) {
      if (at + fixed > top.end) return malformed('truncated value');
      at += fixed;
      continue;
    }
    if (tag !== 'S' && tag !== 'x' && tag !== 'F' && tag !== 'A') return malformed('unknown field type');
    if (at + 4 > top.end) return malformed('truncated length');
    const end = at + 4 + bytes.readUInt32BE(at);
    if (end > top.end) return malformed('length past its container');
    at += 4;
    if (tag === 'S' || tag === 'x') {
      at = end;
      continue;
    }
    if (stack.length + 1 > bounds.maxDepth)
      return { ok: false, bound: 'depth', detail: `header table nested deeper than ${bounds.maxDepth} levels` };
    stack.push({ end, table: tag === 'F' });
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
  const flags = bytes.readUInt16BE(0);
  const properties: Record<string, unknown> = {};
  let rejection: HeaderRejection | null = null;
  let at = 2;
  for (const [index, [name, kind]] of PROPERTIES.entries()) {
    if ((flags & (0x8000 >> index)) === 0) continue;
    const size = kind === 'octet' ? 1 : kind === 'timestamp' ? 8 : kind === 'shortstr' ? 1 + (bytes[at] ?? 0) : 0;
    if (kind === 'table') {
      const end = at + 4 + (at + 4 <= bytes.length ? bytes.readUInt32BE(at) : 0);
      if (at + 4 > bytes.length || end > bytes.length) {
        rejection = truncated(bytes, name, at);
        break;
      }
      const table = bytes.subarray(at + 4, end);
      const scan = scanFieldTable(table, bounds);
      if (!scan.ok) rejection = { bound: scan.bound, detail: scan.detail, raw: Buffer.from(table) };
      properties.headers = {};
      at = end;
      continue;
    }
    if (at >= bytes.length || at + size > bytes.length) {
      rejection = truncated(bytes, name, at);
      break;
    }
    if (kind === 'octet') properties[name] = bytes[at];
    else if (kind === 'timestamp') properties[name] = Number(bytes.readBigUInt64BE(at));
    else properties[name] = bytes.toString('utf8', at + 1, at + size);
    at += size;
  }
  return rejection ? { ok: false, properties, rejection } : { ok: true };
}

function truncated(bytes: Buffer, name: string, at: number): HeaderRejection {
  return {
    bound: 'malformed',
    detail: `basic properties malformed: ${name} truncated at byte ${at}`,
    raw: Buffer.from(bytes),
  };
}
