import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { judgeIncrement, planIncrements } from '../../src/projection/index.js';
import { aggregateKey, consecutiveRuns } from '../../src/projection/versions.js';

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

describe('planIncrements', () => {
  const ev = (id: string, version: number) => ({ aggregateType: 'order', aggregateId: id, aggregateVersion: version });
  const state = (entries: [string, number, number | null][]) =>
    new Map(
      entries.map(([id, version, baselineVersion]) => [
        aggregateKey({ aggregateType: 'order', aggregateId: id }),
        { version, baselineVersion },
      ]),
    );

  it('chains consecutive versions of one aggregate inside a batch, whatever their arrival order', () => {
    const plan = planIncrements([ev('a', 3), ev('a', 1), ev('a', 2)], state([]));
    assert.deepEqual(
      plan.apply.map((e) => e.aggregateVersion),
      [1, 2, 3],
    );
    assert.equal(plan.blocked, undefined);
    assert.equal(plan.finalVersions.get(aggregateKey(ev('a', 0))), 3);
  });

  it('starts from the stored version and keeps aggregates apart', () => {
    const plan = planIncrements([ev('a', 5), ev('b', 1)], state([['a', 4, null]]));
    assert.deepEqual(
      plan.apply.map((e) => `${e.aggregateId}${e.aggregateVersion}`),
      ['a5', 'b1'],
    );
  });

  it('blocks on the first gap and reports the version reached', () => {
    const plan = planIncrements([ev('a', 1), ev('a', 3)], state([]));
    assert.deepEqual(plan.blocked, { event: ev('a', 3), verdict: 'gap', currentVersion: 1 });
  });

  it('blocks a version already present with a stale verdict', () => {
    const plan = planIncrements([ev('a', 2)], state([['a', 2, null]]));
    assert.equal(plan.blocked?.verdict, 'stale');
  });

  it('counts events at or below the baseline as covered and applies the next one', () => {
    const plan = planIncrements([ev('a', 3), ev('a', 4), ev('a', 2)], state([['a', 3, 3]]));
    assert.deepEqual(
      plan.covered.map((e) => e.aggregateVersion),
      [2, 3],
    );
    assert.deepEqual(
      plan.apply.map((e) => e.aggregateVersion),
      [4],
    );
    assert.equal(plan.blocked, undefined);
  });
});

describe('consecutiveRuns', () => {
  const ev = (id: string, version: number) => ({ aggregateType: 'order', aggregateId: id, aggregateVersion: version });

  it('groups a batch into one sorted run per aggregate when versions are consecutive', () => {
    const runs = consecutiveRuns([ev('b', 7), ev('a', 3), ev('b', 6), ev('a', 2), ev('c', 1)]);
    assert.deepEqual(
      runs?.map((r) => [r.aggregateId, r.first, r.last, r.events.map((e) => e.aggregateVersion)]),
      [
        ['a', 2, 3, [2, 3]],
        ['b', 6, 7, [6, 7]],
        ['c', 1, 1, [1]],
      ],
    );
  });

  it('returns null for a hole or a repeated version inside one aggregate', () => {
    assert.equal(consecutiveRuns([ev('a', 1), ev('a', 3)]), null);
    assert.equal(consecutiveRuns([ev('a', 2), ev('a', 2)]), null);
  });

  it('keeps aggregate types apart', () => {
    const runs = consecutiveRuns([ev('a', 1), { aggregateType: 'user', aggregateId: 'a', aggregateVersion: 5 }]);
    assert.equal(runs?.length, 2);
  });
});
