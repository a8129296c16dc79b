import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { boundedInteger, boundedText, storableTruncated } from '../../src/inbox/bounds.js';
import { storableInstant } from '../../src/envelope/storable.js';

describe('bounds for values from a message', () => {
  it('boundedInteger keeps safe integers in range only', () => {
    assert.equal(boundedInteger(5, 1, 10), 5);
    assert.equal(boundedInteger(10n, 1, 10), 10);
    for (const value of [0, 11, 2 ** 31, 2 ** 53, 1.5, Number.NaN, Infinity, '5', null, undefined, 11n, -1n])
      assert.equal(boundedInteger(value, 1, 10), undefined, String(value));
  });

  it('boundedText refuses NUL, lone surrogates, byte arrays and too many UTF-8 bytes', () => {
    assert.equal(boundedText('orders', 255), 'orders');
    assert.equal(boundedText('', 255), undefined);
    assert.equal(boundedText('', 255, { allowEmpty: true }), '');
    assert.equal(boundedText('é'.repeat(128), 255), undefined, '256 bytes in 128 characters');
    assert.equal(boundedText('é'.repeat(127), 255), 'é'.repeat(127));
    for (const value of ['a\u0000', '\uD800', 'x\uDC00y', Buffer.from('orders'), 7, null])
      assert.equal(boundedText(value, 255), undefined, JSON.stringify(value));
  });

  it('storableTruncated makes text storable and cuts it without splitting a surrogate pair', () => {
    assert.equal(storableTruncated('a\u0000b\uD800', 10), 'a\uFFFDb\uFFFD');
    assert.equal(storableTruncated('abcdef', 4), 'abc…');
    const cut = storableTruncated('ab😀cdef', 4);
    assert.equal(cut, 'ab…');
    assert.equal(storableTruncated('x'.repeat(10_000), 4000).length, 4000);
  });

  it('storableInstant refuses year 0000, which PostgreSQL timestamptz cannot hold', () => {
    assert.equal(storableInstant('0000-01-01T00:00:00Z'), false);
    assert.equal(storableInstant('0000-12-31T23:00:00-02:00'), false);
    assert.equal(storableInstant('0001-01-01T00:00:00+01:00'), true);
    assert.equal(storableInstant('9999-12-31T23:59:59.999Z'), true);
  });
});
