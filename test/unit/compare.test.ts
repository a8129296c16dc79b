import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classify, compareIds } from '../../src/reconcile/compare.js';
import { mergePages } from '../../src/reconcile/compare.js';

const row = (id: string, version: number, extra: { deleted?: boolean; fields?: Record<string, unknown> } = {}) => ({
  id,
  version,
  ...extra,
});

describe('classify', () => {
  it('names each kind of difference', () => {
    assert.equal(classify(row('a', 2), undefined), 'missing');
    assert.equal(classify(row('a', 3), row('a', 2)), 'stale');
    assert.equal(classify(row('a', 2), row('a', 3)), 'ahead');
    assert.equal(classify(row('a', 2, { fields: { amount: 5 } }), row('a', 2, { fields: { amount: 6 } })), 'mismatch');
    assert.equal(classify(row('a', 2, { deleted: true }), row('a', 2)), 'mismatch');
    assert.equal(classify(undefined, row('a', 2)), 'extra');
  });

  it('agrees when versions and the fields both sides report are equal, whatever the number types', () => {
    assert.equal(
      classify(row('a', 2, { fields: { amount: 5, note: 'x' } }), row('a', 2, { fields: { amount: '5' } })),
      null,
    );
    assert.equal(classify(row('a', 2), row('a', 2, { fields: { amount: 1 } })), null);
  });

  it('a deletion known to the source and absent from the projection is no difference; a tombstone only in the projection is none either', () => {
    assert.equal(classify(row('a', 4, { deleted: true }), undefined), null);
    assert.equal(classify(undefined, row('a', 4, { deleted: true })), null);
  });
});

describe('compareIds', () => {
  it('orders by UTF-8 bytes like COLLATE "C": upper case before lower case, digits first, multi-byte last', () => {
    const ids = ['b', 'B', 'a-1', 'a10', 'a9', 'é', 'Z', '0'];
    assert.deepEqual([...ids].sort(compareIds), ['0', 'B', 'Z', 'a-1', 'a10', 'a9', 'b', 'é']);
  });
});

describe('mergePages', () => {
  it('settles ids up to the smaller last id while both sides have more, and keeps the rest for the next page', () => {
    const { pairs, sourceRest, targetRest } = mergePages(
      [row('a', 1), row('c', 1), row('e', 1)],
      [row('a', 1), row('b', 1), row('d', 1)],
      false,
      false,
    );
    assert.deepEqual(
      pairs.map(([s, t]) => `${s?.id ?? '-'}${t?.id ?? '-'}`),
      ['aa', '-b', 'c-', '-d'],
    );
    assert.deepEqual(
      sourceRest.map((r) => r.id),
      ['e'],
    );
    assert.deepEqual(targetRest, []);
  });

  it('settles everything once both sides are done, and a finished side lets the other settle its whole page', () => {
    assert.equal(mergePages([row('a', 1)], [row('b', 1)], true, true).pairs.length, 2);
    const oneDone = mergePages([row('a', 1)], [row('b', 1), row('c', 1)], true, false);
    assert.deepEqual(
      oneDone.pairs.map(([s, t]) => `${s?.id ?? '-'}${t?.id ?? '-'}`),
      ['a-', '-b', '-c'],
    );
  });
});
