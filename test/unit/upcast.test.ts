import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type EventEnvelope } from '../../src/index.js';
import { UnsupportedSchemaVersionError } from '../../src/errors.js';
import { upcast } from '../../src/internal/index.js';

const v = (schemaVersion: number, payload: unknown, eventType = 'OrderPaid'): EventEnvelope => ({
  eventId: 'e1',
  aggregateType: 'order',
  aggregateId: 'o1',
  aggregateVersion: 1,
  eventType,
  schemaVersion,
  kind: 'incremental',
  payload,
  occurredAt: '2026-12-02T00:00:00.000Z',
});

const evolution = {
  OrderPaid: {
    current: 3,
    upcasters: {
      1: (p: unknown) => ({ ...(p as object), currency: 'EUR' }),
      2: (p: unknown) => {
        const { amount, ...rest } = p as { amount: number };
        return { ...rest, amountCents: amount * 100 };
      },
    },
  },
};

describe('upcast', () => {
  it('walks an old event up one version at a time to the current shape', () => {
    assert.deepEqual(upcast(v(1, { amount: 5 }), evolution), v(3, { currency: 'EUR', amountCents: 500 }));
    assert.deepEqual(
      upcast(v(2, { amount: 5, currency: 'USD' }), evolution),
      v(3, { currency: 'USD', amountCents: 500 }),
    );
  });

  it('leaves current events and unregistered types untouched', () => {
    const current = v(3, { amountCents: 1 });
    assert.equal(upcast(current, evolution), current);
    const other = v(7, { x: 1 }, 'Unrelated');
    assert.equal(upcast(other, evolution), other);
  });

  it('takes a type with its own handler and no schemas entry to be at version 1; a "*" handler passes every version', () => {
    const handlers = { Unrelated: () => undefined, '*': () => undefined };
    const first = v(1, { x: 1 }, 'Unrelated');
    assert.equal(upcast(first, evolution, handlers), first);
    assert.throws(
      () => upcast(v(2, { x: 1 }, 'Unrelated'), evolution, handlers),
      (err: unknown) =>
        err instanceof UnsupportedSchemaVersionError &&
        err.message ===
          'Unrelated schemaVersion 2 (current 1): newer than this consumer knows (no schemas entry for this eventType: its handler takes version 1 only)',
    );
    const wildcard = v(5, { x: 1 }, 'OnlyWildcard');
    assert.equal(upcast(wildcard, evolution, handlers), wildcard);
    assert.deepEqual(upcast(v(1, { amount: 5 }), evolution, { OrderPaid: () => undefined }).schemaVersion, 3);
  });

  it('refuses a newer version and a missing step with UnsupportedSchemaVersionError', () => {
    assert.throws(
      () => upcast(v(4, {}), evolution),
      (err: unknown) =>
        err instanceof UnsupportedSchemaVersionError &&
        err.code === 'CONVERGE_UNSUPPORTED_SCHEMA_VERSION' &&
        /newer/.test(err.message),
    );
    assert.throws(
      () => upcast(v(1, {}), { OrderPaid: { current: 3, upcasters: { 2: (p: unknown) => p } } }),
      (err: unknown) => err instanceof UnsupportedSchemaVersionError && /no upcaster from version 1/.test(err.message),
    );
  });
});
