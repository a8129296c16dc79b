/**
 * fast-check generators of hostile AMQP messages for the consumer fuzzer
 * (test/integration/fuzz-consumer.test.ts): basic properties byte for byte, header tables of
 * every AMQP field type (nested, near and over the transport's bounds, NUL, invalid UTF-8, huge,
 * negative and NaN numbers, converge's own header names with forged values, `__proto__` keys)
 * and bodies (valid envelopes, near-valid ones, garbage, empty, huge).
 *
 * A case is a description; `materialise` turns it into bytes with the run's unique ids filled in,
 * so the same case (fast-check replays it while shrinking) never meets an event it already sent.
 * Values a person could consider personal data carry SECRET_MARK, which no log line may show.
 */
import fc from 'fast-check';
import { encodeProperties, nestedTable, type RawProperties } from './raw-amqp.js';

/** In every payload value, garbage body and header text the fuzzer sends; never in a log line. */
export const SECRET_MARK = 'cvfuzzsecret';

// ---------------------------------------------------------------------------------------------
// Field tables: every type tag RabbitMQ and amqplib know, encoded by hand.
// ---------------------------------------------------------------------------------------------

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

function long(bytes: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(bytes.length);
  return Buffer.concat([head, bytes]);
}

const bytes = (min: number, max: number) =>
  fc.uint8Array({ minLength: min, maxLength: max }).map((a) => Buffer.from(a));

/** Text as bytes: UTF-8 of any code points, with NUL, and sometimes invalid UTF-8. */
const hostileText = (max: number) =>
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

// ---------------------------------------------------------------------------------------------
// Basic properties.
// ---------------------------------------------------------------------------------------------

/** Filled in by materialise with the case's eventId. */
export const EVENT_ID = Symbol('eventId');

export type HostileProperties = Omit<RawProperties, 'headers' | 'messageId'> & {
  messageId?: Buffer | string | typeof EVENT_ID;
};

const optional = <T>(arbitrary: fc.Arbitrary<T>) => fc.option(arbitrary, { nil: undefined, freq: 2 });
const shortText = hostileText(60).map((b) => b.subarray(0, 255));

export const basicProperties: fc.Arbitrary<HostileProperties> = fc.record(
  {
    contentType: optional(fc.oneof(fc.constant('application/json'), shortText)),
    contentEncoding: optional(fc.oneof(fc.constantFrom('gzip', 'identity'), shortText)),
    // The broker refuses a delivery mode other than 1 and 2 (406): rare, so most cases get through.
    deliveryMode: optional(
      fc.oneof(
        { weight: 9, arbitrary: fc.constantFrom(1, 2) },
        { weight: 1, arbitrary: fc.integer({ min: 0, max: 255 }) },
      ),
    ),
    priority: optional(fc.integer({ min: 0, max: 255 })),
    correlationId: optional(shortText),
    replyTo: optional(shortText),
    // No short TTL: a message that expires before the consumer sees it has no outcome to check.
    // A value the broker cannot read closes the publisher's channel (406): refused, no delivery.
    expiration: optional(
      fc.oneof(
        { weight: 5, arbitrary: fc.integer({ min: 600_000, max: 2 ** 31 - 1 }).map(String) },
        {
          weight: 1,
          arbitrary: fc.constantFrom('', '-1', '1e9', 'never', '0x10', '99999999999999999999', '86400000\0'),
        },
      ),
    ),
    messageId: optional(fc.oneof({ weight: 3, arbitrary: fc.constant(EVENT_ID) }, { weight: 1, arbitrary: shortText })),
    timestamp: optional(fc.oneof(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.constantFrom(0n, 2n ** 64n - 1n))),
    type: optional(fc.oneof(fc.constant('AmountAdded'), shortText)),
    // The broker checks user-id against the login: anything but guest is refused (406).
    userId: optional(
      fc.oneof({ weight: 5, arbitrary: fc.constant('guest') }, { weight: 1, arbitrary: fc.constant('mallory') }),
    ),
    appId: optional(fc.oneof(fc.constant('converge'), shortText)),
  },
  { requiredKeys: [] },
);

// ---------------------------------------------------------------------------------------------
// Bodies.
// ---------------------------------------------------------------------------------------------

/** An envelope without its ids (materialise gives each case fresh ones), with marked payload values. */
export interface EnvelopeShape {
  eventType: string;
  aggregateType: string;
  aggregateVersion: number;
  kind: string;
  payload: Record<string, unknown>;
  occurredAt: string;
  traceparent?: string;
}

/** How many times the test's handler fails this event before it succeeds. */
export const failTimes = fc.oneof(
  { weight: 8, arbitrary: fc.constant(0) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 4 }) },
);

const envelopeShape: fc.Arbitrary<EnvelopeShape> = fc.record(
  {
    eventType: fc.oneof({ weight: 9, arbitrary: fc.constant('AmountAdded') }, { weight: 1, arbitrary: fc.string() }),
    aggregateType: fc.oneof(fc.constant('order'), fc.string({ minLength: 1, maxLength: 20 })),
    aggregateVersion: fc.oneof(fc.constant(1), fc.integer({ min: 1, max: 2 ** 31 - 1 }), fc.constant(2 ** 53 - 1)),
    kind: fc.constantFrom('incremental', 'snapshot'),
    payload: fc.record({
      delta: fc.integer(),
      failTimes,
      secret: fc.string({ maxLength: 8 }).map((s) => `${SECRET_MARK}-${s}`),
      extra: fc.jsonValue({ maxDepth: 3 }),
    }),
    occurredAt: fc
      .date({ min: new Date('1970-01-01'), max: new Date('2200-01-01'), noInvalidDate: true })
      .map((d) => d.toISOString()),
    traceparent: fc.oneof(
      fc.constant('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'),
      fc.string({ maxLength: 60 }),
    ),
  },
  { requiredKeys: ['eventType', 'aggregateType', 'aggregateVersion', 'kind', 'payload', 'occurredAt'] },
);

const ENVELOPE_FIELDS = [
  'eventId',
  'aggregateType',
  'aggregateId',
  'aggregateVersion',
  'eventType',
  'schemaVersion',
  'kind',
  'payload',
  'occurredAt',
  'traceparent',
  'tenantId',
] as const;

/** One field deleted or set to a value of the wrong type, out of range, or merely odd. */
const mutation = fc.record({
  field: fc.constantFrom(...ENVELOPE_FIELDS, '__proto__', 'unexpected'),
  value: fc.oneof(
    fc.constant(undefined),
    fc.jsonValue({ maxDepth: 2 }),
    fc.constantFrom(0, -1, 2, 1.5, 1e308, -1e308, 2 ** 53, 2 ** 31, '', '\0', 'x'.repeat(10_000), null, [], {}),
  ),
});

export type BodySpec =
  | { kind: 'valid'; envelope: EnvelopeShape }
  | { kind: 'near-valid'; envelope: EnvelopeShape; mutation: { field: string; value: unknown } }
  | { kind: 'truncated'; envelope: EnvelopeShape; keep: number }
  | { kind: 'bom'; envelope: EnvelopeShape }
  | { kind: 'garbage'; bytes: Buffer }
  | { kind: 'json'; value: unknown }
  | { kind: 'deep-json'; depth: number }
  | { kind: 'empty' }
  | { kind: 'sized'; envelope: EnvelopeShape; bytes: number };

/** DEFAULT_MAX_ENVELOPE_BYTES (src/envelope/validate.ts): a body over it is never parsed. */
export const MAX_BODY = 256 * 1024;

export const body: fc.Arbitrary<BodySpec> = fc.oneof(
  { weight: 8, arbitrary: envelopeShape.map((envelope) => ({ kind: 'valid', envelope }) as const) },
  {
    weight: 5,
    arbitrary: fc
      .tuple(envelopeShape, mutation)
      .map(([envelope, m]) => ({ kind: 'near-valid', envelope, mutation: m }) as const),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(envelopeShape, fc.nat())
      .map(([envelope, keep]) => ({ kind: 'truncated', envelope, keep }) as const),
  },
  { weight: 1, arbitrary: envelopeShape.map((envelope) => ({ kind: 'bom', envelope }) as const) },
  { weight: 1, arbitrary: bytes(0, 200).map((b) => ({ kind: 'garbage', bytes: b }) as const) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value) => ({ kind: 'json', value }) as const) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(100, 10_000, 100_000).map((depth) => ({ kind: 'deep-json', depth }) as const),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'empty' } as const) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(envelopeShape, fc.constantFrom(MAX_BODY - 1, MAX_BODY, MAX_BODY + 1, 4 * MAX_BODY))
      .map(([envelope, size]) => ({ kind: 'sized', envelope, bytes: size }) as const),
  },
);

export interface HostileCase {
  properties: HostileProperties;
  headers: Entry[] | null;
  body: BodySpec;
}

export const hostileCase: fc.Arbitrary<HostileCase> = fc.record({
  properties: basicProperties,
  headers: headerTable,
  body,
});

// ---------------------------------------------------------------------------------------------
// From a case to bytes.
// ---------------------------------------------------------------------------------------------

export interface Materialised {
  /** The eventId the body carries when it is an envelope (or near one); unique to this run. */
  eventId: string;
  body: Buffer;
  /** The encoded basic properties, header table included. */
  propertiesBytes: Buffer;
  /** The header table's content, null when the message has none. */
  headersBytes: Buffer | null;
}

export function materialise(c: HostileCase, eventId: string): Materialised {
  const headersBytes = c.headers === null ? null : encodeEntries(c.headers);
  const { messageId, ...rest } = c.properties;
  const properties: RawProperties = { ...rest, messageId: messageId === EVENT_ID ? eventId : messageId };
  return {
    eventId,
    body: bodyBytes(c.body, eventId),
    propertiesBytes: encodeProperties(properties, headersBytes ?? undefined),
    headersBytes,
  };
}

function envelopeOf(shape: EnvelopeShape, eventId: string): Record<string, unknown> {
  return { eventId, aggregateId: `agg-${eventId}`, schemaVersion: 1, ...shape };
}

function bodyBytes(spec: BodySpec, eventId: string): Buffer {
  const json = (value: unknown) => Buffer.from(JSON.stringify(value));
  switch (spec.kind) {
    case 'valid':
      return json(envelopeOf(spec.envelope, eventId));
    case 'near-valid': {
      const envelope = envelopeOf(spec.envelope, eventId);
      const { field, value } = spec.mutation;
      // A valid eventId set by the mutation must still be new to the consumer, or the case is a duplicate.
      const unique = field === 'eventId' && typeof value === 'string' && value !== '' ? `${value}${eventId}` : value;
      if (unique === undefined) delete envelope[field];
      else
        Object.defineProperty(envelope, field, { value: unique, enumerable: true, writable: true, configurable: true });
      return json(envelope);
    }
    case 'truncated': {
      const full = json(envelopeOf(spec.envelope, eventId));
      return full.subarray(0, spec.keep % full.length);
    }
    case 'bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), json(envelopeOf(spec.envelope, eventId))]);
    case 'garbage':
      return Buffer.concat([spec.bytes, Buffer.from(SECRET_MARK)]);
    case 'json':
      return json([SECRET_MARK, spec.value]);
    case 'deep-json':
      return Buffer.from(`${'['.repeat(spec.depth)}"${SECRET_MARK}"${']'.repeat(spec.depth)}`);
    case 'empty':
      return Buffer.alloc(0);
    case 'sized': {
      const envelope = envelopeOf(spec.envelope, eventId);
      const bare = json({ ...envelope, payload: { ...spec.envelope.payload, pad: '' } }).length;
      const pad = SECRET_MARK.padEnd(Math.max(0, spec.bytes - bare), 'p');
      return json({ ...envelope, payload: { ...spec.envelope.payload, pad } });
    }
  }
}
