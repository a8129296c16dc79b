import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SkippedRows } from '../../src/relay/set-aside.js';

test('a skipped row is left out of claims for a growing backoff, then claimable again, and forgotten once written', () => {
  const skipped = new SkippedRows({ initialDelayMs: 200, maxDelayMs: 1000, factor: 2 });
  const lowest = () => 0;
  assert.equal(skipped.skip('7', 0, lowest), 100);
  assert.deepEqual(skipped.excluded(0), ['7']);
  assert.deepEqual(skipped.excluded(99), ['7']);
  assert.deepEqual(skipped.excluded(100), [], 'claimable again once its delay ended');
  assert.equal(skipped.skip('7', 100, lowest), 200, 'the next skip waits longer');
  assert.equal(skipped.skip('7', 300, lowest), 400);
  assert.equal(
    skipped.skip('7', 700, () => 1),
    1000,
    'capped at maxDelayMs',
  );
  assert.equal(
    skipped.skip('7', 1700, () => 1),
    1000,
  );
  skipped.skip('9', 0, lowest);
  skipped.forget('7');
  assert.deepEqual(skipped.excluded(10), ['9']);
  assert.equal(skipped.skip('7', 10, lowest), 100, 'a forgotten row starts over');
});
