import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventEnvelope } from '../../src/envelope/envelope.js';
import { canonicalJson, fingerprint } from '../../src/envelope/fingerprint.js';
import { orderEvent } from '../support/builders.js';

function envelope(overrides: Partial<EventEnvelope> = {}): EventEnvelope {
  return orderEvent('6f1c2f8e-93a4-4c4e-9a55-0d6d1b7f0a11', 'o-1', 3, {
    eventType: 'OrderPaid',
    payload: {
      amount: 1250,
      currency: 'EUR',
      lines: [
        { sku: 'a', qty: 1 },
        { sku: 'b', qty: 2 },
      ],
      meta: { by: 'u1', at: { h: 1, m: 2 } },
    },
    occurredAt: '2024-05-01T10:00:00.000Z',
    tenantId: 't-1',
    ...overrides,
  });
}

describe('canonicalJson', () => {
  it('ignores key order at every depth', () => {
    const a = { z: 1, a: { y: [1, { q: true, b: null }], b: 'x' }, m: { n: { p: 1, o: 2 } } };
    const b = { m: { n: { o: 2, p: 1 } }, a: { b: 'x', y: [1, { b: null, q: true }] }, z: 1 };
    assert.equal(canonicalJson(a), canonicalJson(b));
    assert.equal(canonicalJson(a), '{"a":{"b":"x","y":[1,{"b":null,"q":true}]},"m":{"n":{"o":2,"p":1}},"z":1}');
  });

  it('keeps array order, because order inside arrays is content', () => {
    assert.notEqual(canonicalJson([1, 2]), canonicalJson([2, 1]));
  });

  it('matches JSON.stringify for undefined members, so a JSON round trip keeps the text', () => {
    const value = { a: undefined, b: [undefined, 1] };
    assert.equal(canonicalJson(value), '{"b":[null,1]}');
    assert.equal(canonicalJson(JSON.parse(JSON.stringify(value))), canonicalJson(value));
  });

  it('rejects non-finite numbers at any depth instead of silently writing null', () => {
    assert.throws(() => canonicalJson(Number.NaN), TypeError);
    assert.throws(() => canonicalJson({ a: [Number.POSITIVE_INFINITY] }), TypeError);
    assert.throws(() => canonicalJson({ a: { b: Number.NEGATIVE_INFINITY } }), TypeError);
    assert.throws(() => fingerprint(envelope({ payload: { total: Number.NaN } })), TypeError);
  });

  it('rejects values JSON cannot carry', () => {
    assert.throws(() => canonicalJson(10n), TypeError);
    assert.throws(() => canonicalJson(() => 1), TypeError);
    assert.throws(() => canonicalJson(Symbol('s')), TypeError);
  });
});

describe('fingerprint', () => {
  it('is 64 lower-case hex characters (SHA-256)', () => {
    assert.match(fingerprint(envelope()), /^[0-9a-f]{64}$/);
  });

  // Stored in every inbox row: the value for a given event must never change between releases.
  it('keeps the value earlier releases stored', () => {
    assert.equal(fingerprint(envelope()), 'd2569b3bbf9d7567dc13cc11b54fac465f2c9b1b5a71fc863958d04fae6cb05f');
    assert.equal(
      fingerprint(envelope({ tenantId: undefined })),
      '31776a972186578c56cc9929ca7d57a0c83506d5981f518fa8870a6f852ff4f4',
    );
  });

  it('is stable for the same content', () => {
    assert.equal(fingerprint(envelope()), fingerprint(envelope()));
  });

  it('does not depend on payload key order', () => {
    const reordered = envelope({
      payload: {
        meta: { at: { m: 2, h: 1 }, by: 'u1' },
        lines: [
          { qty: 1, sku: 'a' },
          { qty: 2, sku: 'b' },
        ],
        currency: 'EUR',
        amount: 1250,
      },
    });
    assert.equal(fingerprint(reordered), fingerprint(envelope()));
  });

  it('survives the JSON round trip the wire applies', () => {
    const original = envelope();
    assert.equal(fingerprint(JSON.parse(JSON.stringify(original)) as EventEnvelope), fingerprint(original));
  });

  const contentChanges: Array<[string, Partial<EventEnvelope>]> = [
    ['eventId', { eventId: '6f1c2f8e-93a4-4c4e-9a55-0d6d1b7f0a12' }],
    ['aggregateType', { aggregateType: 'invoice' }],
    ['aggregateId', { aggregateId: 'o-2' }],
    ['aggregateVersion', { aggregateVersion: 4 }],
    ['eventType', { eventType: 'OrderRefunded' }],
    ['schemaVersion', { schemaVersion: 2 }],
    ['kind', { kind: 'snapshot' }],
    [
      'payload (top-level value)',
      {
        payload: {
          amount: 1251,
          currency: 'EUR',
          lines: [
            { sku: 'a', qty: 1 },
            { sku: 'b', qty: 2 },
          ],
          meta: { by: 'u1', at: { h: 1, m: 2 } },
        },
      },
    ],
    [
      'payload (deep value)',
      {
        payload: {
          amount: 1250,
          currency: 'EUR',
          lines: [
            { sku: 'a', qty: 1 },
            { sku: 'b', qty: 2 },
          ],
          meta: { by: 'u1', at: { h: 1, m: 3 } },
        },
      },
    ],
    [
      'payload (array order)',
      {
        payload: {
          amount: 1250,
          currency: 'EUR',
          lines: [
            { sku: 'b', qty: 2 },
            { sku: 'a', qty: 1 },
          ],
          meta: { by: 'u1', at: { h: 1, m: 2 } },
        },
      },
    ],
    [
      'payload (type of a value)',
      {
        payload: {
          amount: '1250',
          currency: 'EUR',
          lines: [
            { sku: 'a', qty: 1 },
            { sku: 'b', qty: 2 },
          ],
          meta: { by: 'u1', at: { h: 1, m: 2 } },
        },
      },
    ],
    ['tenantId (changed)', { tenantId: 't-2' }],
    ['tenantId (removed)', { tenantId: undefined }],
  ];
  for (const [field, change] of contentChanges) {
    it(`changes when ${field} changes`, () => {
      assert.notEqual(fingerprint(envelope(change)), fingerprint(envelope()));
    });
  }

  // occurredAt and traceparent describe a delivery, not what happened: a re-encoding by
  // another producer (new trace, re-stamped clock) must still count as the same event.
  it('ignores occurredAt', () => {
    assert.equal(fingerprint(envelope({ occurredAt: '2030-01-01T00:00:00.000Z' })), fingerprint(envelope()));
  });

  it('ignores traceparent', () => {
    const traced = envelope({ traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
    const retraced = envelope({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00' });
    assert.equal(fingerprint(traced), fingerprint(envelope()));
    assert.equal(fingerprint(retraced), fingerprint(traced));
  });
});
