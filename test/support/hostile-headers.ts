/**
 * fast-check generators of hostile AMQP header tables for the consumer fuzzer: every AMQP field
 * type encoded by hand (amqplib's encoder would refuse or change many of them), nested, near and
 * over the transport's bounds (src/transport/header-bounds.ts), NUL, invalid UTF-8, huge,
 * negative and NaN numbers, converge's own header names with forged values, `__proto__` keys.
 */
import fc from 'fast-check';
import { nestedTable } from './raw-amqp.js';

/** In every payload value, garbage body and header text the fuzzer sends; never in a log line. */
export const SECRET_MARK = 'cvfuzzsecret';

export type FieldValue =
  | { t: 't'; v: boolean }
  | { t: 'b' | 'B' | 's' | 'u' | 'I' | 'i'; v: number }
  | { t: 'l' | 'T'; v: bigint }
  | { t: 'f' | 'd'; v: number }
  | { t: 'D'; places: number; digits: number }
  | { t: 'S' | 'x'; v: Buffer }
  | { t: 'V' }
  | { t: 'A'; v: FieldValue[] }
  | { t: 'F'; v: Entry[] }
  /** Bytes placed as they are: tables built without recursion (thousands deep) or near a size bound. */
  | { t: 'raw'; v: Buffer };

export type Entry = [key: Buffer, value: FieldValue];

const INTEGER_WRITERS = {
  b: (b: Buffer, v: number) => b.writeInt8(v),
  B: (b: Buffer, v: number) => b.writeUInt8(v),
  s: (b: Buffer, v: number) => b.writeInt16BE(v),
  u: (b: Buffer, v: number) => b.writeUInt16BE(v),
  I: (b: Buffer, v: number) => b.writeInt32BE(v),
  i: (b: Buffer, v: number) => b.writeUInt32BE(v),
} as const;
const INTEGER_SIZES = { b: 1, B: 1, s: 2, u: 2, I: 4, i: 4 } as const;

export function encodeField(value: FieldValue): Buffer {
  if (value.t === 'raw') return value.v;
  const tag = Buffer.from(value.t, 'latin1');
  const fixed = (size: number, write: (out: Buffer) => unknown) => {
    const out = Buffer.alloc(size);
    write(out);
    return Buffer.concat([tag, out]);
  };
  switch (value.t) {
    case 't':
      return fixed(1, (out) => out.writeUInt8(value.v ? 1 : 0));
    case 'b':
    case 'B':
    case 's':
    case 'u':
    case 'I':
    case 'i':
      return fixed(INTEGER_SIZES[value.t], (out) => INTEGER_WRITERS[value.t](out, value.v));
    case 'l':
      return fixed(8, (out) => out.writeBigInt64BE(value.v));
    case 'T':
      return fixed(8, (out) => out.writeBigUInt64BE(value.v));
    case 'f':
      return fixed(4, (out) => out.writeFloatBE(value.v));
    case 'd':
      return fixed(8, (out) => out.writeDoubleBE(value.v));
    case 'D':
      return fixed(5, (out) => (out.writeUInt8(value.places), out.writeUInt32BE(value.digits, 1)));
    case 'V':
      return tag;
    case 'S':
    case 'x':
      return Buffer.concat([tag, long(value.v)]);
    case 'A':
      return Buffer.concat([tag, long(Buffer.concat(value.v.map(encodeField)))]);
    case 'F':
      return Buffer.concat([tag, long(encodeEntries(value.v))]);
  }
}

/** A table's content (its pairs, without the table's 4-byte length), as RawMessage.headersBytes takes it. */
export function encodeEntries(entries: readonly Entry[]): Buffer {
  return Buffer.concat(entries.flatMap(([key, value]) => [Buffer.from([key.length]), key, encodeField(value)]));
}

export function long(bytes: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(bytes.length);
  return Buffer.concat([head, bytes]);
}

export const bytes = (min: number, max: number) =>
  fc.uint8Array({ minLength: min, maxLength: max }).map((a) => Buffer.from(a));

/** Text as bytes: UTF-8 of any code points, with NUL, and sometimes invalid UTF-8. */
export const hostileText = (max: number) =>
  fc.oneof(
    fc.string({ unit: 'binary', maxLength: max }).map((s) => Buffer.from(s)),
    fc.string({ maxLength: max }).map((s) => Buffer.from(`${s}\0${s}`)),
    bytes(0, max),
    fc.constantFrom(Buffer.from([0xc3]), Buffer.from([0xff, 0xfe]), Buffer.from([0xed, 0xa0, 0x80])),
  );

/** Names converge reads or RabbitMQ sets, forged; `__proto__`; and any other key. */
export const CONVERGE_HEADERS = [
  'x-converge-attempt',
  'x-converge-replay-of',
  'x-converge-original-exchange',
  'x-converge-original-routing-key',
  'x-converge-sensitive',
  'traceparent',
  'x-death',
  'x-first-death-queue',
  'x-delivery-count',
  '__proto__',
  'constructor',
];

const key = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...CONVERGE_HEADERS).map((k) => Buffer.from(k)) },
  { weight: 3, arbitrary: hostileText(20).map((k) => k.subarray(0, 255)) },
  { weight: 1, arbitrary: bytes(255, 255) },
);

/** Numbers: the ends of each type's range, around 2^31 and 2^53, NaN and infinities. */
const number = fc.oneof(
  fc.integer({ min: -128, max: 127 }).map((v) => ({ t: 'b', v }) as const),
  fc.integer({ min: 0, max: 255 }).map((v) => ({ t: 'B', v }) as const),
  fc.integer({ min: -32768, max: 32767 }).map((v) => ({ t: 's', v }) as const),
  fc.integer({ min: 0, max: 65535 }).map((v) => ({ t: 'u', v }) as const),
  fc.oneof(fc.integer(), fc.constantFrom(-2147483648, 2147483647, -1, 0)).map((v) => ({ t: 'I', v }) as const),
  fc.oneof(fc.nat(), fc.constantFrom(4294967295, 2147483648)).map((v) => ({ t: 'i', v }) as const),
  fc
    .oneof(
      fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
      fc.constantFrom(2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n), 10n ** 9n),
    )
    .map((v) => ({ t: 'l', v }) as const),
  fc
    .oneof(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.constant(2n ** 64n - 1n))
    .map((v) => ({ t: 'T', v }) as const),
  // RabbitMQ refuses NaN and the infinities (541 on the connection): rare, so most cases get through.
  fc
    .oneof(
      { weight: 9, arbitrary: fc.float({ noNaN: true, noDefaultInfinity: true }) },
      { weight: 1, arbitrary: fc.constantFrom(NaN, Infinity) },
    )
    .map((v) => ({ t: 'f', v }) as const),
  fc
    .oneof(
      { weight: 6, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
      { weight: 3, arbitrary: fc.constantFrom(-0, 2 ** 53, 2 ** 63, 1e308, -1e19, Number.MIN_VALUE) },
      { weight: 1, arbitrary: fc.constantFrom(NaN, Infinity, -Infinity) },
    )
    .map((v) => ({ t: 'd', v }) as const),
  fc
    .record({ places: fc.integer({ min: 0, max: 255 }), digits: fc.nat({ max: 4294967295 }) })
    .map((d) => ({ t: 'D', ...d }) as const),
);

/** A value of any type, tables and arrays nested a few levels; text sometimes carries SECRET_MARK. */
export const fieldValue: fc.Arbitrary<FieldValue> = fc.letrec<{ value: FieldValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 4, arbitrary: number },
    { weight: 1, arbitrary: fc.boolean().map((v) => ({ t: 't', v }) as const) },
    { weight: 1, arbitrary: fc.constant({ t: 'V' } as const) },
    {
      weight: 3,
      arbitrary: fc
        .tuple(hostileText(40), fc.boolean())
        .map(([v, marked]) => ({ t: 'S', v: marked ? Buffer.concat([v, Buffer.from(SECRET_MARK)]) : v }) as const),
    },
    { weight: 1, arbitrary: bytes(0, 40).map((v) => ({ t: 'x', v }) as const) },
    { weight: 1, arbitrary: fc.array(tie('value'), { maxLength: 4 }).map((v) => ({ t: 'A', v }) as const) },
    {
      weight: 1,
      arbitrary: fc.array(fc.tuple(key, tie('value')), { maxLength: 4 }).map((v) => ({ t: 'F', v }) as const),
    },
  ),
})).value;

/** A table at or just past a bound of src/transport/header-bounds.ts, or past the broker's frame. */
const extreme = fc.oneof(
  // Nested under one key of the header table (level 1): n + 1 levels in all.
  fc
    .constantFrom(62, 63, 64, 200, 4_000, 10_000)
    .map((n) => ({ t: 'raw', v: Buffer.concat([Buffer.from('F'), long(nestedTable(n))]) }) as const),
  // Entries, counted over every level: a flat array of voids.
  fc
    .constantFrom(9_999, 10_000, 10_001, 20_000)
    .map((n) => ({ t: 'A', v: Array<FieldValue>(n).fill({ t: 'V' }) }) as const),
  // One long string: about the default frame_max (131,072), over which the broker refuses the frame.
  fc.constantFrom(60_000, 130_000, 140_000).map((n) => ({ t: 'x', v: Buffer.alloc(n, 0x61) }) as const),
);

export const headerTable = fc.oneof(
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 6, arbitrary: fc.array(fc.tuple(key, fieldValue), { maxLength: 8 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.array(fc.tuple(key, fieldValue), { maxLength: 3 }), key, extreme)
      .map(([entries, k, value]) => [...entries, [k, value] as Entry]),
  },
);
