/**
 * fast-check generators of hostile AMQP messages for the consumer fuzzer
 * (test/integration/fuzz-consumer.test.ts): basic properties byte for byte, header tables
 * (hostile-headers.ts) and bodies (valid envelopes, near-valid ones, garbage, empty, huge).
 *
 * A case is a description; `materialise` turns it into bytes with the run's unique ids filled in,
 * so the same case (fast-check replays it while shrinking) never meets an event it already sent.
 * Values a person could consider personal data carry SECRET_MARK, which no log line may show.
 */
import fc from 'fast-check';
import { SECRET_MARK, bytes, encodeEntries, headerTable, hostileText, type Entry } from './hostile-headers.js';
import { encodeProperties, type RawProperties } from './raw-amqp.js';

export { SECRET_MARK, type Entry, type FieldValue } from './hostile-headers.js';

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
    aggregateType: fc.oneof(
      { weight: 5, arbitrary: fc.constant('order') },
      { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 20 }) },
    ),
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
    // Mostly well formed: the near-valid bodies are where fields go wrong.
    traceparent: fc.oneof(
      { weight: 5, arbitrary: fc.constant('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01') },
      { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
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
