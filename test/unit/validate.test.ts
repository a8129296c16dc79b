import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventEnvelope } from '../../src/envelope/envelope.js';
import { fastValidated, slowValidated, validateEnvelope } from '../../src/envelope/validate.js';
import { EnvelopeValidationError } from '../../src/runtime/errors.js';
import { nestedPaymentEvent } from '../support/builders.js';

// validateEnvelope's contract (fields, messages, limits) is tested in envelope.test.ts; this file
// holds its two paths together: the fast one may only ever leave work to the slow one.

const base: EventEnvelope = nestedPaymentEvent;

const cyclic: Record<string, unknown> = { a: 1 };
cyclic.self = cyclic;

/** 10,001 objects, one inside the other: more than the fast path walks. */
function deeplyNested(): Record<string, unknown> {
  let payload: Record<string, unknown> = { leaf: 'ok' };
  for (let i = 0; i < 10_000; i++) payload = { inner: payload };
  return payload;
}

class Money {
  constructor(
    readonly amount: number,
    readonly currency: string,
  ) {}
}

function changed(change: Partial<Record<keyof EventEnvelope | 'extra', unknown>>): unknown {
  return { ...base, ...change };
}

/** Each one breaks (or nearly breaks) one rule the consumers check, or is valid in an unusual way. */
const variants: [string, unknown][] = [
  ['blank eventId', changed({ eventId: '  ' })],
  ['eventId at the limit', changed({ eventId: 'x'.repeat(200) })],
  ['eventId over the limit', changed({ eventId: 'x'.repeat(201) })],
  ['eventId of 200 astral characters', changed({ eventId: '😀'.repeat(200) })],
  ['eventId with U+0000', changed({ eventId: 'a\u0000' })],
  ['eventId with a lone surrogate', changed({ eventId: 'a\ud800' })],
  ['empty eventId', changed({ eventId: '' })],
  ['aggregateType with a space', changed({ aggregateType: 'a b' })],
  ['aggregateType with a non-ASCII letter', changed({ aggregateType: 'é' })],
  ['aggregateType over the limit', changed({ aggregateType: 'a'.repeat(201) })],
  ['eventType empty', changed({ eventType: '' })],
  ['aggregateVersion 0', changed({ aggregateVersion: 0 })],
  ['aggregateVersion unsafe', changed({ aggregateVersion: 2 ** 53 })],
  ['aggregateVersion fractional', changed({ aggregateVersion: 1.5 })],
  ['aggregateVersion NaN', changed({ aggregateVersion: Number.NaN })],
  ['schemaVersion negative', changed({ schemaVersion: -1 })],
  ['unknown kind', changed({ kind: 'other' })],
  ['null payload', changed({ payload: null })],
  ['missing payload', changed({ payload: undefined })],
  ['string payload', changed({ payload: 'text' })],
  ['payload with Infinity', changed({ payload: { x: [Infinity] } })],
  ['payload with NaN', changed({ payload: Number.NaN })],
  ['payload key with U+0000', changed({ payload: { '\u0000': 1 } })],
  ['payload string with a lone surrogate', changed({ payload: ['\udc00'] })],
  ['payload holding undefined', changed({ payload: { a: undefined } })],
  ['cyclic payload', changed({ payload: cyclic })],
  ['payload of more than 10,000 nested objects', changed({ payload: deeplyNested() })],
  ['payload of a class instance', changed({ payload: new Money(10, 'EUR') })],
  ['envelope of a null prototype', Object.assign(Object.create(null) as object, base)],
  ['envelope of a class instance', Object.assign(new Money(1, 'EUR'), base)],
  ['extra unknown key', changed({ extra: 1 })],
  ['traceparent present but undefined', changed({ traceparent: undefined })],
  ['tenantId present but undefined', changed({ tenantId: undefined })],
  ['occurredAt of year 10000', changed({ occurredAt: '+010000-01-01T00:00:00.000Z' })],
  ['occurredAt of year 0', changed({ occurredAt: '0000-02-29T00:00:00.000Z' })],
  ['occurredAt of February 29 in a common year', changed({ occurredAt: '2023-02-29T00:00:00.000Z' })],
  ['occurredAt with an offset', changed({ occurredAt: '2024-05-01T12:00:00.000+02:00' })],
  ['occurredAt without fractional seconds', changed({ occurredAt: '2024-05-01T12:00:00Z' })],
  ['occurredAt not a date', changed({ occurredAt: 'yesterday at noon xx' })],
  ['traceparent', changed({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' })],
  ['malformed traceparent', changed({ traceparent: '00-XYZ' })],
  ['tenantId', changed({ tenantId: 'acme' })],
  ['blank tenantId', changed({ tenantId: ' ' })],
];

function slowOutcome(value: unknown): { accepted: EventEnvelope } | { refused: unknown } {
  try {
    return { accepted: slowValidated(value) };
  } catch (err) {
    return { refused: err };
  }
}

describe('fastValidated', () => {
  it('accepts a plain event, with and without the optional fields', () => {
    assert.deepEqual(fastValidated(base), base);
    const full = { ...base, traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tenantId: 'acme' };
    assert.deepEqual(fastValidated(full), full);
  });

  for (const [name, envelope] of variants)
    it(`never accepts what slowValidated refuses, and returns what it returns: ${name}`, () => {
      const fast = fastValidated(envelope);
      const slow = slowOutcome(envelope);
      if ('refused' in slow) {
        assert.ok(slow.refused instanceof EnvelopeValidationError);
        assert.equal(fast, undefined);
      }
      if (fast !== undefined) {
        assert.ok('accepted' in slow);
        assert.deepEqual(fast, slow.accepted);
        // The same key order, so both encode to the same bytes, and the payload as given.
        assert.deepEqual(Object.keys(fast), Object.keys(slow.accepted));
        assert.equal(fast.payload, slow.accepted.payload);
      }
    });

  it('leaves an over-long or cyclic payload to the slow path, which accepts it', () => {
    for (const payload of [deeplyNested(), cyclic]) {
      const envelope = { ...base, payload };
      assert.equal(fastValidated(envelope), undefined);
      assert.equal(slowValidated(envelope).payload, payload);
      assert.equal(validateEnvelope(envelope).payload, payload);
    }
  });
});
