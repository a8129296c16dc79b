/** The chaos schedule draws only faults its run can inject: node faults with --cluster, the shared broker's restart without. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLUSTER_FAULT_KINDS, faultKindsFor, rotated } from '../../chaos/cluster-faults.js';
import { FAULT_KINDS, faultBag, pickFault, seededRandom, type FaultKind } from '../../chaos/schedule.js';

test('a run without a cluster never draws a node fault; a cluster run never restarts the shared broker', () => {
  const single = faultKindsFor(false, FAULT_KINDS);
  const clustered = faultKindsFor(true, FAULT_KINDS);
  for (const kind of CLUSTER_FAULT_KINDS) {
    assert.ok(!single.includes(kind));
    assert.ok(clustered.includes(kind));
  }
  assert.ok(single.includes('restart-broker'));
  assert.ok(!clustered.includes('restart-broker'));
});

test('when only deferred kinds are left in the bag, the fallback draw stays within the run kinds', () => {
  const kinds = faultKindsFor(false, ['restart-broker', 'kill-relay']);
  for (let seed = 1; seed <= 200; seed++) {
    const next = faultBag(seededRandom(seed), kinds);
    const deferred = new Set<FaultKind>(['restart-broker']);
    for (let i = 0; i < 6; i++) {
      const kind = next(deferred);
      assert.ok(kind !== undefined && kinds.includes(kind), `seed ${seed}`);
    }
  }
  assert.equal(pickFault(seededRandom(1), new Set(['restart-broker']), ['restart-broker']), 'restart-broker');
});

test('workers start on different nodes: the URL list is rotated per worker', () => {
  assert.deepEqual(rotated(['a', 'b', 'c'], 0), ['a', 'b', 'c']);
  assert.deepEqual(rotated(['a', 'b', 'c'], 1), ['b', 'c', 'a']);
  assert.deepEqual(rotated(['a', 'b', 'c'], 4), ['b', 'c', 'a']);
});
