import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClaimFloor, FULL_SCAN_COST_FACTOR } from '../../src/relay/claim-floor.js';

describe('claim floor', () => {
  it('the first claim is a full scan; until the next is due, claims start at the lowest pending row the last one saw', () => {
    const floor = new ClaimFloor();
    const first = floor.next(0);
    assert.deepEqual(first, { floor: '0', full: true });
    // A full scan of 100 ms: the next may run 10 x 100 ms after it ended.
    floor.observed('10', first, 0, 100);
    const bounded = floor.next(150);
    assert.deepEqual(bounded, { floor: '10', full: false });
    floor.observed('42', bounded, 150, 151);
    assert.deepEqual(floor.next(200), { floor: '42', full: false });
    assert.deepEqual(floor.next(100 + FULL_SCAN_COST_FACTOR * 100 - 1).full, false);
    assert.deepEqual(floor.next(100 + FULL_SCAN_COST_FACTOR * 100), { floor: '0', full: true });
  });

  it('a claim that returned nothing reported nothing: the floor stays', () => {
    const floor = new ClaimFloor();
    floor.observed('7', floor.next(0), 0, 50);
    floor.observed(null, floor.next(60), 60, 61);
    assert.equal(floor.next(70).floor, '7');
  });

  it('a full scan may lower the floor: a row committed late below it is claimed then', () => {
    const floor = new ClaimFloor();
    floor.observed('500', floor.next(0), 0, 10);
    const full = floor.next(1_000);
    assert.equal(full.full, true);
    floor.observed('90', full, 1_000, 1_010);
    assert.equal(floor.next(1_020).floor, '90');
  });

  it('a cheap full scan may run again soon: an idle relay scans from the start as before', () => {
    const floor = new ClaimFloor();
    floor.observed(null, floor.next(1_000), 1_000, 1_000.5);
    assert.equal(floor.next(1_004).full, false);
    assert.equal(floor.next(1_006).full, true);
  });
});
