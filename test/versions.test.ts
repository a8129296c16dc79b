import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { judgeIncrement } from '../src/index.js';

// judgeIncrement only sees events that did NOT land on `version = eventVersion - 1`.

describe('judgeIncrement', () => {
  it('says gap when the projection has no state for the aggregate', () => {
    assert.equal(judgeIncrement(1, null), 'gap');
    assert.equal(judgeIncrement(2, null), 'gap');
  });

  it('says gap when the event is far ahead of the current version', () => {
    assert.equal(judgeIncrement(7, { version: 2, baselineVersion: null }), 'gap');
    assert.equal(judgeIncrement(3, { version: 1, baselineVersion: null }), 'gap');
  });

  it('says stale for a version at or below the current one when no baseline exists', () => {
    assert.equal(judgeIncrement(2, { version: 2, baselineVersion: null }), 'stale');
    assert.equal(judgeIncrement(1, { version: 2, baselineVersion: null }), 'stale');
  });

  it('says covered-by-baseline for a version at or below the baseline', () => {
    assert.equal(judgeIncrement(3, { version: 3, baselineVersion: 3 }), 'covered-by-baseline');
    assert.equal(judgeIncrement(2, { version: 3, baselineVersion: 3 }), 'covered-by-baseline');
    assert.equal(judgeIncrement(1, { version: 5, baselineVersion: 3 }), 'covered-by-baseline');
  });

  it('says stale for a version above the baseline but not above the current version', () => {
    assert.equal(judgeIncrement(4, { version: 5, baselineVersion: 3 }), 'stale');
    assert.equal(judgeIncrement(5, { version: 5, baselineVersion: 3 }), 'stale');
  });

  it('says gap for current + 2 even when a baseline exists', () => {
    assert.equal(judgeIncrement(5, { version: 3, baselineVersion: 3 }), 'gap');
    assert.equal(judgeIncrement(7, { version: 5, baselineVersion: 3 }), 'gap');
  });
});
