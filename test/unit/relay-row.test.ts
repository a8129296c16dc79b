import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventEnvelope } from '../../src/envelope/envelope.js';
import { validateEnvelope } from '../../src/envelope/validate.js';
import { EnvelopeValidationError } from '../../src/runtime/errors.js';
import { plainlyValid, publishableEnvelope, outboxRowToEnvelope } from '../../src/relay/row.js';
import type { OutboxEnvelopeRow } from '../../src/relay/sql.js';
import { encodeMessage, routingKeyFromTemplate, DEFAULT_ROUTING_KEY } from '../../src/transport/wire.js';

const base: EventEnvelope = {
  eventId: 'c2d4a1e0-5b7f-4f1a-8d2e-3a9b0c1d2e3f',
  aggregateType: 'order',
  aggregateId: 'o-7',
  aggregateVersion: 3,
  eventType: 'OrderPaid',
  schemaVersion: 1,
  kind: 'incremental',
  payload: { amount: 10, nested: { list: [1, 'two', null, true, { three: 3 }] } },
  occurredAt: '2024-05-01T10:00:00.750Z',
};

function fullyValid(envelope: unknown): boolean {
  try {
    validateEnvelope(envelope);
    return true;
  } catch {
    return false;
  }
}

const cyclic: Record<string, unknown> = { a: 1 };
cyclic.self = cyclic;

/** Each one breaks (or nearly breaks) one rule the consumers check. */
const variants: [string, Partial<Record<keyof EventEnvelope, unknown>>][] = [
  ['blank eventId', { eventId: '  ' }],
  ['eventId at the limit', { eventId: 'x'.repeat(200) }],
  ['eventId over the limit', { eventId: 'x'.repeat(201) }],
  ['eventId of 200 astral characters', { eventId: '😀'.repeat(200) }],
  ['eventId with U+0000', { eventId: 'a\u0000' }],
  ['eventId with a lone surrogate', { eventId: 'a\ud800' }],
  ['empty eventId', { eventId: '' }],
  ['aggregateType with a space', { aggregateType: 'a b' }],
  ['aggregateType with a non-ASCII letter', { aggregateType: 'é' }],
  ['aggregateType over the limit', { aggregateType: 'a'.repeat(201) }],
  ['eventType empty', { eventType: '' }],
  ['aggregateVersion 0', { aggregateVersion: 0 }],
  ['aggregateVersion unsafe', { aggregateVersion: 2 ** 53 }],
  ['aggregateVersion fractional', { aggregateVersion: 1.5 }],
  ['aggregateVersion NaN', { aggregateVersion: Number.NaN }],
  ['schemaVersion negative', { schemaVersion: -1 }],
  ['unknown kind', { kind: 'other' }],
  ['null payload', { payload: null }],
  ['missing payload', { payload: undefined }],
  ['string payload', { payload: 'text' }],
  ['payload with Infinity', { payload: { x: [Infinity] } }],
  ['payload with NaN', { payload: Number.NaN }],
  ['payload key with U+0000', { payload: { '\u0000': 1 } }],
  ['payload string with a lone surrogate', { payload: ['\udc00'] }],
  ['cyclic payload', { payload: cyclic }],
  ['occurredAt of year 10000', { occurredAt: '+010000-01-01T00:00:00.000Z' }],
  ['occurredAt of year 0', { occurredAt: '0000-02-29T00:00:00.000Z' }],
  ['occurredAt with an offset', { occurredAt: '2024-05-01T12:00:00.000+02:00' }],
  ['occurredAt not a date', { occurredAt: 'yesterday at noon xx' }],
  ['traceparent', { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' }],
  ['malformed traceparent', { traceparent: '00-XYZ' }],
  ['tenantId', { tenantId: 'acme' }],
  ['blank tenantId', { tenantId: ' ' }],
];

describe('plainlyValid', () => {
  it('accepts a plain event', () => {
    assert.equal(plainlyValid(base), true);
  });

  for (const [name, change] of variants)
    it(`never accepts what validateEnvelope refuses: ${name}`, () => {
      const envelope = { ...base, ...change } as EventEnvelope;
      if (plainlyValid(envelope)) assert.equal(fullyValid(envelope), true);
    });
});

describe('publishableEnvelope', () => {
  const row: OutboxEnvelopeRow = {
    event_id: base.eventId,
    aggregate_type: base.aggregateType,
    aggregate_id: base.aggregateId,
    aggregate_version: '3',
    event_type: base.eventType,
    schema_version: 1,
    kind: 'incremental',
    payload: base.payload,
    occurred_at: new Date(base.occurredAt),
    traceparent: null,
    tenant_id: 'acme',
  };

  it('encodes to the same bytes as the fully validated envelope', () => {
    const routingKey = routingKeyFromTemplate(DEFAULT_ROUTING_KEY);
    const fast = encodeMessage(publishableEnvelope(row), routingKey);
    const full = encodeMessage(validateEnvelope(outboxRowToEnvelope(row)), routingKey);
    assert.equal(fast.content.toString(), full.content.toString());
    assert.deepEqual(fast.options, full.options);
    assert.equal(fast.routingKey, full.routingKey);
  });

  it('still names the field of a row the full validation refuses', () => {
    assert.throws(
      () => publishableEnvelope({ ...row, aggregate_id: ' ' }),
      (err: unknown) => err instanceof EnvelopeValidationError && err.field === 'aggregateId',
    );
  });
});
