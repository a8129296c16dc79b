import { DEFAULT_HEADER_BOUNDS } from './header-bounds.js';

/**
 * Turns headers as amqplib decoded them (or as a quarantine row stored them) into a table
 * amqplib encodes faithfully, before converge publishes them again (a retry copy, a dead-letter
 * copy, a replay). amqplib's encoder guesses a wire type from each JS value, and some values its
 * own decoder produced it then refuses or changes: a non-integer at or above 2^50 (BigInt() of a
 * fraction), NaN and -Infinity (taken for integers), -0 (sent as the integer 0), a key that
 * decoding widened past 255 bytes (invalid UTF-8 becomes U+FFFD), a table with a `!` key (its
 * type trapdoor), a table over its 64 KiB scratch buffer. A throw there sends the delivery round
 * the retry path for ever; a changed value hands the next consumer different headers.
 *
 * So every value is given the explicit type that decodes back to the same JS value (amqplib's
 * `{ '!': type, value }` form), and what cannot be carried at all is left out, as a whole top-level
 * header, and named in `x-converge-headers-omitted` (an array of strings) on the copy. Pure, no I/O.
 */

/** Names the headers a copy was published without; kept (and extended) on copies of copies. */
export const HEADERS_OMITTED_HEADER = 'x-converge-headers-omitted';

/**
 * The most header-table bytes (its content, without the 4-byte length) amqplib can encode: its
 * field tables are written into one 64 KiB scratch buffer, length included.
 */
export const AMQPLIB_TABLE_BYTES = 65_536 - 4;

/** Room kept in a content-header frame for everything but the header table (frame overhead, other properties). */
const OTHER_PROPERTIES_BYTES = 4096;

/** Header-table bytes a content-header frame of `frameMax` bytes (0: no limit) can carry. */
export function headerTableBudget(frameMax: number): number {
  return frameMax > 0 ? Math.min(AMQPLIB_TABLE_BYTES, frameMax - OTHER_PROPERTIES_BYTES) : AMQPLIB_TABLE_BYTES;
}

export interface EncodableHeaders {
  /** The table to hand amqplib: every value typed so it decodes back to what it was. */
  headers: Record<string, unknown>;
  /** Top-level headers left out, in the order they came; also in HEADERS_OMITTED_HEADER unless empty. */
  omitted: string[];
  /** The encoded table's content bytes. */
  bytes: number;
}

/** A value ready for amqplib, and what it costs on the wire (type tag included) and in entries. */
interface Carried {
  value: unknown;
  bytes: number;
  entries: number;
}

const MAX_KEY_BYTES = 255;
/** What a copy may hold and still pass the receiving consumer's guard (header-bounds.ts). */
const MAX_DEPTH = DEFAULT_HEADER_BOUNDS.maxDepth;
const MAX_ENTRIES = DEFAULT_HEADER_BOUNDS.maxEntries;
/** The omitted names a marker lists at most, so the marker itself stays small. */
const MAX_MARKER_NAMES = 32;

/**
 * The headers as amqplib can carry them within `maxBytes` (see headerTableBudget). Headers
 * whose value cannot be carried are omitted; if the rest is still too big, the largest go first.
 * Idempotent: a table it returned comes back unchanged.
 */
export function encodableHeaders(headers: unknown, maxBytes: number = AMQPLIB_TABLE_BYTES): EncodableHeaders {
  const previous = headerNames(isPlainTable(headers) ? ownValue(headers, HEADERS_OMITTED_HEADER) : undefined);
  const kept = new Map<string, Carried & { size: number }>();
  const omitted: string[] = [];
  if (isPlainTable(headers)) {
    for (const name of Object.keys(headers)) {
      if (name === HEADERS_OMITTED_HEADER) continue;
      const value = headers[name];
      if (value === undefined) continue; // amqplib leaves it out too: no header, nothing lost
      const carried = validKey(name) ? carry(value, 2) : null;
      if (carried) kept.set(name, { ...carried, size: 1 + Buffer.byteLength(name) + carried.bytes });
      else omitted.push(name);
    }
  }
  let bytes = 0;
  let entries = 0;
  for (const entry of kept.values()) {
    bytes += entry.size;
    entries += 1 + entry.entries;
  }
  const marker = () => omittedMarker([...previous, ...omitted]);
  // Largest first: one oversized header costs the copy that header, not every one after it;
  // converge's own (attempt, origin, replay) last, since they steer what happens to the copy.
  const cost = ([name, entry]: [string, { size: number }]) => (name.startsWith('x-converge-') ? -1 : entry.size);
  const bySize = [...kept.entries()].sort((a, b) => cost(b) - cost(a));
  for (const [name, entry] of bySize) {
    const extra = marker();
    if (bytes + extra.bytes <= maxBytes && entries + extra.entries <= MAX_ENTRIES) break;
    kept.delete(name);
    omitted.push(name);
    bytes -= entry.size;
    entries -= 1 + entry.entries;
  }
  const out: Record<string, unknown> = {};
  for (const [name, entry] of kept) out[name] = entry.value;
  const extra = marker();
  if (extra.entries > 0) {
    out[HEADERS_OMITTED_HEADER] = extra.value;
    bytes += extra.bytes;
  }
  return { headers: out, omitted, bytes };
}

/** The marker header's value and cost; none when nothing was ever omitted. */
function omittedMarker(names: string[]): Carried {
  const unique = [...new Set(names)];
  if (unique.length === 0) return { value: undefined, bytes: 0, entries: 0 };
  const listed = unique.slice(0, MAX_MARKER_NAMES);
  if (unique.length > listed.length) listed.push(`… ${unique.length - listed.length} more`);
  const value = listed.map((name) =>
    Buffer.byteLength(name) <= MAX_KEY_BYTES ? name : `${Buffer.from(name).subarray(0, 200).toString()}…`,
  );
  const bytes = value.reduce(
    (sum, name) => sum + 5 + Buffer.byteLength(name),
    1 + Buffer.byteLength(HEADERS_OMITTED_HEADER) + 5,
  );
  return { value, bytes, entries: 1 + value.length };
}

/** The names an earlier copy's marker listed (strings only: the header may come from anyone). */
function headerNames(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((name): name is string => typeof name === 'string') : [];
}

/** A table key amqplib can write and no decoder turns into a prototype. */
function validKey(name: string): boolean {
  return name !== '__proto__' && Buffer.byteLength(name) <= MAX_KEY_BYTES;
}

/**
 * `value` as amqplib should be given it, or null if it cannot be carried. `depth` is the level
 * a table or array here would be at (the header table being 1).
 */
function carry(value: unknown, depth: number): Carried | null {
  switch (typeof value) {
    case 'string':
      return { value, bytes: 5 + Buffer.byteLength(value), entries: 0 };
    case 'boolean':
      return { value, bytes: 2, entries: 0 };
    case 'number':
      return carryNumber(value);
    case 'bigint':
      return carryNumber(Number(value)); // never decoded by amqplib; a caller's own value, sent as a number
    case 'object':
      break;
    default:
      return null; // undefined in an array, functions, symbols: amqplib throws on each
  }
  if (value === null) return { value, bytes: 1, entries: 0 };
  if (Buffer.isBuffer(value)) return { value, bytes: 5 + value.length, entries: 0 };
  if (value instanceof Uint8Array) {
    const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    return { value: bytes, bytes: 5 + bytes.length, entries: 0 };
  }
  if (Object.hasOwn(value, '!')) return carryTyped(value as Record<string, unknown>);
  if (depth > MAX_DEPTH) return null;
  if (Array.isArray(value)) return carryArray(value, depth);
  if (isPlainTable(value)) return carryTable(value, depth);
  return null; // a Date, a Map, a class: amqplib would send its own keys as a table
}

function carryArray(items: unknown[], depth: number): Carried | null {
  const value: unknown[] = [];
  let bytes = 5;
  let entries = 0;
  for (const item of items) {
    const carried = carry(item, depth + 1);
    if (!carried) return null; // one element less would change what the array says
    value.push(carried.value);
    bytes += carried.bytes;
    entries += 1 + carried.entries;
  }
  return { value, bytes, entries };
}

function carryTable(table: Record<string, unknown>, depth: number): Carried | null {
  const value: Record<string, unknown> = {};
  let bytes = 5;
  let entries = 0;
  for (const name of Object.keys(table)) {
    const item = table[name];
    if (item === undefined) continue;
    const carried = validKey(name) ? carry(item, depth + 1) : null;
    if (!carried) return null;
    value[name] = carried.value;
    bytes += 1 + Buffer.byteLength(name) + carried.bytes;
    entries += 1 + carried.entries;
  }
  return { value, bytes, entries };
}

/**
 * An integer amqplib sends as the smallest signed type that holds it, which decodes back as the
 * same number; anything else (fractions, -0, NaN, ±Infinity) as an explicit double.
 */
function carryNumber(value: number): Carried {
  if (!Number.isInteger(value) || Object.is(value, -0) || Math.abs(value) >= 2 ** 63) return typed('double', value, 9);
  const bytes =
    value >= -128 && value < 128
      ? 2
      : value >= -0x8000 && value < 0x8000
        ? 3
        : value >= -(2 ** 31) && value < 2 ** 31
          ? 5
          : 9;
  return { value, bytes, entries: 0 };
}

function typed(type: string, value: unknown, bytes: number): Carried {
  return { value: { '!': type, value }, bytes, entries: 0 };
}

/**
 * Integer ranges of amqplib's explicit types, by every name it accepts (the upper bound
 * exclusive: 2^63 - 1 is no float64, and BigInt(2^63) overflows int64), and their wire bytes.
 */
const INTEGER_TYPES: Record<string, [min: number, below: number, bytes: number]> = {};
for (const [names, min, below, bytes] of [
  [['byte', 'int8'], -128, 128, 2],
  [['unsignedbyte', 'uint8'], 0, 256, 2],
  [['short', 'int16'], -0x8000, 0x8000, 3],
  [['unsignedshort', 'uint16'], 0, 0x10000, 3],
  [['int', 'int32'], -(2 ** 31), 2 ** 31, 5],
  [['unsignedint', 'uint32'], 0, 2 ** 32, 5],
  [['long', 'int64'], -(2 ** 63), 2 ** 63, 9],
  [['timestamp'], 0, 2 ** 64, 9],
] as const)
  for (const name of names) INTEGER_TYPES[name] = [min, below, bytes];

/**
 * An object with an own `!` key: amqplib's decoder makes one for a decimal ('D') and a timestamp
 * ('T'); its encoder reads any such object as `{ '!': type, value }`. Carried when it is a type
 * amqplib writes with a value in range (it then decodes back to the same object), else not at all:
 * a table that merely has a `!` key cannot be sent as a table by amqplib.
 */
function carryTyped(object: Record<string, unknown>): Carried | null {
  const type = object['!'];
  const value = object.value;
  if (typeof type !== 'string' || !Object.hasOwn(object, 'value')) return null;
  if (type === 'double' || type === 'float64') return typeof value === 'number' ? typed('double', value, 9) : null;
  if (type === 'float') return typeof value === 'number' ? typed('float', value, 5) : null;
  if (type === 'decimal') {
    if (!isPlainTable(value) || !Object.hasOwn(value, 'places') || !Object.hasOwn(value, 'digits')) return null;
    const { places, digits } = value;
    const valid = isIntegerIn(places, 0, 256) && isIntegerIn(digits, 0, 2 ** 32);
    return valid ? typed('decimal', { places, digits }, 6) : null;
  }
  const range = Object.hasOwn(INTEGER_TYPES, type) ? INTEGER_TYPES[type] : undefined;
  if (!range) return null;
  const [min, below, bytes] = range;
  return isIntegerIn(value, min, below) ? typed(type, value, bytes) : null;
}

function isIntegerIn(value: unknown, min: number, below: number): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= min && value < below;
}

/** A plain object (an amqplib-decoded or JSON-parsed table), not a Buffer, array or class instance. */
function isPlainTable(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

function ownValue(table: Record<string, unknown>, name: string): unknown {
  return Object.hasOwn(table, name) ? table[name] : undefined;
}
