import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventEnvelope } from '../../src/envelope/envelope.js';
import { fingerprint } from '../../src/envelope/fingerprint.js';
import {
  DEFAULT_MAX_ENVELOPE_BYTES,
  MAX_JSON_DEPTH,
  nestingExceeds,
  parseEnvelope,
  validateEnvelope,
} from '../../src/envelope/validate.js';
import {
  BodyTooLargeError,
  ConvergeError,
  EnvelopeValidationError,
  MalformedBodyError,
} from '../../src/runtime/errors.js';

// Messages end up in logs and quarantine rows; anything that looks like data must stay out of them.
const MARKER = 'SECRET-PII-123';

function good(): EventEnvelope {
  return {
    eventId: '0b5e8a0c-2f0e-4a7d-9a47-5d8c6f3e2b10',
    aggregateType: 'order',
    aggregateId: 'o-42',
    aggregateVersion: 7,
    eventType: 'OrderPaid',
    schemaVersion: 1,
    kind: 'incremental',
    payload: { customerEmail: `${MARKER}@example.com`, note: MARKER, amount: 1999 },
    occurredAt: '2024-05-01T10:00:00.000Z',
  };
}

function body(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value));
}

type ErrorClass = typeof EnvelopeValidationError | typeof MalformedBodyError | typeof BodyTooLargeError;

const CODES = new Map<ErrorClass, string>([
  [EnvelopeValidationError, 'CONVERGE_INVALID_ENVELOPE'],
  [MalformedBodyError, 'CONVERGE_MALFORMED_BODY'],
  [BodyTooLargeError, 'CONVERGE_BODY_TOO_LARGE'],
]);

/**
 * Runs `fn`, requires an EnvelopeValidationError (exactly of class `kind`, which carries its
 * own code) naming `field`, and checks nothing secret leaked.
 */
function expectInvalid(
  fn: () => unknown,
  field: string,
  kind: ErrorClass = EnvelopeValidationError,
): EnvelopeValidationError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  assert.ok(caught instanceof EnvelopeValidationError, `expected EnvelopeValidationError, got ${String(caught)}`);
  assert.ok(caught instanceof ConvergeError);
  assert.equal(caught.constructor, kind);
  assert.equal(caught.code, CODES.get(kind));
  assert.equal(caught.name, kind.name);
  assert.equal(caught.field, field);
  assert.ok(caught.message.includes(`"${field}"`), `message names the field: ${caught.message}`);
  assert.ok(!caught.message.includes(MARKER), `message leaks data: ${caught.message}`);
  assert.ok(!String(caught.stack).includes(MARKER), 'stack leaks data');
  return caught;
}

function without(field: keyof EventEnvelope): Record<string, unknown> {
  const copy: Record<string, unknown> = { ...good() };
  delete copy[field];
  return copy;
}

describe('validateEnvelope', () => {
  it('accepts a complete envelope and returns the same content', () => {
    const input = {
      ...good(),
      traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      tenantId: 'tenant-a',
    };
    assert.deepEqual(validateEnvelope(input), input);
  });

  it('accepts the optional fields being absent, a snapshot kind, a null payload and an offset timestamp', () => {
    const input = { ...good(), kind: 'snapshot' as const, payload: null, occurredAt: '2024-05-01T12:00:00+02:00' };
    assert.deepEqual(validateEnvelope(input), input);
  });

  const required: Array<keyof EventEnvelope> = [
    'eventId',
    'aggregateType',
    'aggregateId',
    'aggregateVersion',
    'eventType',
    'schemaVersion',
    'kind',
    'payload',
    'occurredAt',
  ];
  for (const field of required) {
    it(`rejects a missing ${field}, naming it`, () => {
      expectInvalid(() => validateEnvelope(without(field)), field);
      expectInvalid(() => parseEnvelope(body(without(field))), field);
    });
  }

  it('treats an explicitly undefined payload as missing', () => {
    expectInvalid(() => validateEnvelope({ ...good(), payload: undefined }), 'payload');
  });

  const wrongTypes: Array<[keyof EventEnvelope, unknown]> = [
    ['eventId', 42],
    ['aggregateType', { name: MARKER }],
    ['aggregateId', 42],
    ['aggregateVersion', '7'],
    ['eventType', [MARKER]],
    ['schemaVersion', '1'],
    ['kind', 1],
    ['occurredAt', 1714557600000],
    ['traceparent', 1],
    ['tenantId', false],
  ];
  for (const [field, value] of wrongTypes) {
    it(`rejects ${field} of the wrong type`, () => {
      expectInvalid(() => validateEnvelope({ ...good(), [field]: value }), field);
    });
  }

  it('rejects a kind outside the enum without echoing it', () => {
    const err = expectInvalid(() => validateEnvelope({ ...good(), kind: MARKER }), 'kind');
    assert.match(err.message, /allowed values/);
  });

  for (const version of [0, -1, 1.5, Number.MAX_SAFE_INTEGER + 2]) {
    it(`rejects aggregateVersion ${version}`, () => {
      expectInvalid(() => validateEnvelope({ ...good(), aggregateVersion: version }), 'aggregateVersion');
    });
  }

  it('rejects schemaVersion 0', () => {
    expectInvalid(() => validateEnvelope({ ...good(), schemaVersion: 0 }), 'schemaVersion');
  });

  it('rejects empty strings and over-long ids', () => {
    expectInvalid(() => validateEnvelope({ ...good(), eventId: '' }), 'eventId');
    expectInvalid(() => validateEnvelope({ ...good(), aggregateId: 'x'.repeat(201) }), 'aggregateId');
    expectInvalid(() => validateEnvelope({ ...good(), tenantId: '' }), 'tenantId');
  });

  it('rejects blank and whitespace-only ids of every kind', () => {
    for (const blank of [' ', '   ', '\t', '\n \r', '\u00a0', '\u3000', '\ufeff'])
      for (const field of ['eventId', 'aggregateId', 'tenantId'] as const) {
        const err = expectInvalid(() => validateEnvelope({ ...good(), [field]: blank }), field);
        assert.match(err.message, /must not be blank or only whitespace/);
      }
    // Spaces inside an id are data, not blankness.
    assert.equal(validateEnvelope({ ...good(), aggregateId: ' o 42 ' }).aggregateId, ' o 42 ');
  });

  it('rejects text PostgreSQL cannot store unchanged (U+0000, lone surrogates) in every text field', () => {
    for (const bad of ['a\u0000b', '\u0000', 'x\ud800', '\udc00y', 'a\udbff\u0000'])
      for (const field of ['eventId', 'aggregateId', 'tenantId'] as const) {
        const err = expectInvalid(() => validateEnvelope({ ...good(), [field]: `${MARKER}${bad}` }), field);
        assert.match(err.message, /U\+0000 or a lone surrogate/);
      }
    for (const field of ['aggregateType', 'eventType', 'occurredAt', 'traceparent'] as const)
      expectInvalid(() => validateEnvelope({ ...good(), [field]: 'a\u0000' }), field);
    // A well-formed pair (an emoji) and other control characters are storable and stay valid.
    assert.equal(
      validateEnvelope({ ...good(), aggregateId: 'o-\ud83d\ude00\u0001\u001f' }).aggregateId,
      'o-😀\u0001\u001f',
    );
  });

  it('rejects U+0000 or a lone surrogate anywhere in the payload, keys included, without echoing it', () => {
    const payloads = [
      { note: `${MARKER}\u0000` },
      { deep: [{ list: ['ok', `x\ud800${MARKER}`] }] },
      { [`k\u0000${MARKER}`]: 1 },
      `\u0000${MARKER}`,
    ];
    for (const payload of payloads) {
      const err = expectInvalid(() => validateEnvelope({ ...good(), payload }), 'payload');
      assert.match(err.message, /PostgreSQL text cannot store/);
    }
    // The same through a received body, where the character arrives as a JSON escape.
    const text = JSON.stringify({ ...good(), aggregateId: 'o-\u0000' });
    assert.ok(text.includes('\\u0000'));
    expectInvalid(() => parseEnvelope(Buffer.from(text)), 'aggregateId');
  });

  it('rejects names with characters unsafe for routing keys, without echoing them', () => {
    expectInvalid(() => validateEnvelope({ ...good(), aggregateType: `order ${MARKER}` }), 'aggregateType');
    const err = expectInvalid(() => validateEnvelope({ ...good(), eventType: `Order#${MARKER}` }), 'eventType');
    // A value that fails a pattern is not a "regex" of its own: the detail says what it missed.
    assert.equal(
      err.message,
      'invalid envelope field "eventType": does not match the pattern (letters, digits, _ . : - only)',
    );
  });

  it('rejects a malformed occurredAt or traceparent without echoing it', () => {
    expectInvalid(() => validateEnvelope({ ...good(), occurredAt: MARKER }), 'occurredAt');
    expectInvalid(() => validateEnvelope({ ...good(), occurredAt: '2024-05-01T10:00:00' }), 'occurredAt');
    // Valid ISO, but PostgreSQL timestamptz has no year 0: the inbox insert would fail on every retry (issue 26).
    expectInvalid(() => validateEnvelope({ ...good(), occurredAt: '0000-01-01T00:00:00Z' }), 'occurredAt');
    const err = expectInvalid(() => validateEnvelope({ ...good(), traceparent: `00-${MARKER}` }), 'traceparent');
    assert.match(err.message, /does not match the pattern \(W3C traceparent\)$/);
  });

  it('rejects an unknown extra field, naming it', () => {
    const err = expectInvalid(() => validateEnvelope({ ...good(), extra: MARKER }), 'extra');
    assert.match(err.message, /unknown field/);
  });

  it('rejects non-objects at the root', () => {
    expectInvalid(() => validateEnvelope(null), '(root)');
    expectInvalid(() => validateEnvelope([good()]), '(root)');
    expectInvalid(() => validateEnvelope(MARKER), '(root)');
  });
});

describe('parseEnvelope', () => {
  it('parses a good body', () => {
    assert.deepEqual(parseEnvelope(body(good())), good());
  });

  it('accepts a body of exactly the default limit', () => {
    const base = body({ ...good(), payload: { pad: '' } });
    const padded = { ...good(), payload: { pad: 'x'.repeat(DEFAULT_MAX_ENVELOPE_BYTES - base.length) } };
    assert.equal(body(padded).length, DEFAULT_MAX_ENVELOPE_BYTES);
    assert.equal(parseEnvelope(body(padded)).eventId, good().eventId);
  });

  it('rejects a body over the default 256 KiB limit before parsing it', () => {
    assert.equal(DEFAULT_MAX_ENVELOPE_BYTES, 256 * 1024);
    const big = body({
      ...good(),
      payload: { blob: MARKER.repeat(Math.ceil(DEFAULT_MAX_ENVELOPE_BYTES / MARKER.length)) },
    });
    const err = expectInvalid(() => parseEnvelope(big), '(body)', BodyTooLargeError);
    assert.match(err.message, new RegExp(`${big.length} bytes exceeds limit of ${DEFAULT_MAX_ENVELOPE_BYTES}`));
  });

  it('applies a custom limit', () => {
    const small = body(good());
    assert.equal(parseEnvelope(small, small.length).eventId, good().eventId);
    expectInvalid(() => parseEnvelope(small, small.length - 1), '(body)', BodyTooLargeError);
  });

  it('counts bytes, not characters', () => {
    const multibyte = body({ ...good(), payload: { s: 'é'.repeat(100) } });
    assert.ok(multibyte.length > JSON.stringify({ ...good(), payload: { s: 'é'.repeat(100) } }).length);
    expectInvalid(() => parseEnvelope(multibyte, multibyte.length - 50), '(body)', BodyTooLargeError);
  });

  it('rejects invalid JSON without echoing the body', () => {
    const err = expectInvalid(
      () => parseEnvelope(Buffer.from(`{"eventId": "${MARKER}", `)),
      '(body)',
      MalformedBodyError,
    );
    assert.match(err.message, /not valid JSON/);
  });

  it('rejects a JSON array body', () => {
    const err = expectInvalid(() => parseEnvelope(body([good()])), '(body)', MalformedBodyError);
    assert.match(err.message, /expected a JSON object/);
  });

  it('rejects JSON scalars and null', () => {
    expectInvalid(() => parseEnvelope(Buffer.from('null')), '(body)', MalformedBodyError);
    expectInvalid(() => parseEnvelope(Buffer.from(`"${MARKER}"`)), '(body)', MalformedBodyError);
    expectInvalid(() => parseEnvelope(Buffer.from('42')), '(body)', MalformedBodyError);
  });

  it('rejects an empty, blank or truncated body as not valid JSON', () => {
    assert.match(
      expectInvalid(() => parseEnvelope(Buffer.alloc(0)), '(body)', MalformedBodyError).message,
      /not valid JSON: empty body/,
    );
    assert.match(
      expectInvalid(() => parseEnvelope(Buffer.from(' \n ')), '(body)', MalformedBodyError).message,
      /not valid JSON/,
    );
    const whole = body(good());
    for (const cut of [1, 10, whole.length / 2, whole.length - 1]) {
      assert.match(
        expectInvalid(() => parseEnvelope(whole.subarray(0, cut)), '(body)', MalformedBodyError).message,
        /not valid JSON/,
        `cut at ${cut}`,
      );
    }
  });

  it('rejects invalid UTF-8 instead of replacing it with U+FFFD', () => {
    const text = JSON.stringify(good());
    const at = text.indexOf(MARKER);
    for (const bad of [[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]]) {
      const mangled = Buffer.concat([Buffer.from(text.slice(0, at)), Buffer.from(bad), Buffer.from(text.slice(at))]);
      assert.match(
        expectInvalid(() => parseEnvelope(mangled), '(body)', MalformedBodyError).message,
        /not valid UTF-8/,
        bad.join(' '),
      );
    }
    // A byte order mark stays what it was: not JSON.
    assert.match(
      expectInvalid(
        () => parseEnvelope(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body(good())])),
        '(body)',
        MalformedBodyError,
      ).message,
      /not valid JSON/,
    );
  });

  it(`accepts ${MAX_JSON_DEPTH} levels of nesting in the whole body and rejects one more, before parsing`, () => {
    // The envelope object is level 1 and the payload object level 2.
    const nested = (levels: number) =>
      body({ ...good(), payload: { deep: JSON.parse('['.repeat(levels) + ']'.repeat(levels)) as unknown } });
    assert.equal(parseEnvelope(nested(MAX_JSON_DEPTH - 2)).eventId, good().eventId);
    assert.match(
      expectInvalid(() => parseEnvelope(nested(MAX_JSON_DEPTH - 1)), '(body)', MalformedBodyError).message,
      new RegExp(`nested deeper than ${MAX_JSON_DEPTH} levels`),
    );
    // 100,000 levels fit in the size limit; without the check fingerprinting overflowed the stack.
    const hostile = Buffer.from(`{"payload":${'['.repeat(100_000)}${']'.repeat(100_000)},"note":"${MARKER}"}`);
    assert.ok(hostile.length < DEFAULT_MAX_ENVELOPE_BYTES);
    expectInvalid(() => parseEnvelope(hostile), '(body)', MalformedBodyError);
  });

  it('counts nesting outside strings only', () => {
    assert.equal(nestingExceeds(Buffer.from(`{"a":"${'['.repeat(100)}"}`), 2), false);
    assert.equal(nestingExceeds(Buffer.from(`{"a":"\\\\\\"{{{{","b":[[1]]}`), 3), false);
    assert.equal(nestingExceeds(Buffer.from(`{"a":"\\\\","b":[[[1]]]}`), 3), true);
    assert.equal(nestingExceeds(Buffer.from(`{"a":"é","b":[{"c":[1]}]}`), 3), true);
  });

  it('rejects a payload number beyond the range of a double (it would parse to Infinity)', () => {
    const text = JSON.stringify({ ...good(), payload: { amount: 1, nested: [{ n: 0 }] } });
    for (const huge of ['1e400', '-1e400']) {
      const err = expectInvalid(() => parseEnvelope(Buffer.from(text.replace('"n":0', `"n":${huge}`))), 'payload');
      assert.match(err.message, /outside the range of a double/);
    }
    expectInvalid(() => validateEnvelope({ ...good(), payload: { a: [Number.NaN] } }), 'payload');
    // The check walks outgoing payloads too: a cycle must end the walk, not loop forever.
    const cyclic: Record<string, unknown> = { amount: 1 };
    cyclic.self = cyclic;
    assert.equal(validateEnvelope({ ...good(), payload: cyclic }).eventId, good().eventId);
  });

  it('keeps huge finite numbers as doubles, with a stable fingerprint', () => {
    const text = JSON.stringify({ ...good(), payload: { big: 0 } });
    const a = parseEnvelope(Buffer.from(text.replace('"big":0', '"big":123456789012345678901234567890')));
    const b = parseEnvelope(Buffer.from(text.replace('"big":0', '"big":1.2345678901234568e29')));
    assert.equal((a.payload as { big: number }).big, 1.2345678901234568e29);
    assert.equal(fingerprint(a), fingerprint(b), 'the fingerprint is over the parsed double, so both spellings match');
    expectInvalid(
      () => parseEnvelope(Buffer.from(text.replace('"aggregateVersion":7', '"aggregateVersion":9007199254740993'))),
      'aggregateVersion',
    );
    expectInvalid(
      () => parseEnvelope(Buffer.from(text.replace('"aggregateVersion":7', '"aggregateVersion":1e400'))),
      'aggregateVersion',
    );
  });

  it('validates the parsed object like validateEnvelope', () => {
    expectInvalid(() => parseEnvelope(body({ ...good(), aggregateVersion: 0 })), 'aggregateVersion');
    expectInvalid(() => parseEnvelope(body({ ...good(), unexpected: MARKER })), 'unexpected');
  });
});
