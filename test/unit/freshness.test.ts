/** The pure parts of reading your own writes: the waiter's backoff and readFresh's choice. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError } from '../../src/errors.js';
import { chooseRead, pollDelay, waitForVersionOptions, type Freshness } from '../../src/projection/freshness.js';

const freshness = (applied: number, source: number, oldestUnappliedAgeSeconds: number | null): Freshness => ({
  projection: 'order_view',
  aggregateType: 'order',
  aggregateId: 'o-1',
  appliedVersion: applied,
  baselineVersion: null,
  sourceVersion: source,
  sourceVersionFrom: 'outbox',
  versionsBehind: Math.max(0, source - applied),
  caughtUp: applied >= source,
  oldestUnappliedAgeSeconds,
});

describe('pollDelay', () => {
  it('doubles from minPollMs and stays at maxPollMs', () => {
    const poll = { minPollMs: 10, maxPollMs: 250 };
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 100].map((read) => pollDelay(read, poll)),
      [10, 20, 40, 80, 160, 250, 250, 250],
    );
  });

  it('costs about 1000 / maxPollMs reads a second once waiting long: 8 reads in the first second by default', () => {
    const poll = { minPollMs: 10, maxPollMs: 250 };
    let elapsed = 0;
    let reads = 1;
    while (elapsed + pollDelay(reads - 1, poll) <= 1_000) elapsed += pollDelay(reads++ - 1, poll);
    assert.equal(reads, 8);
  });
});

describe('waitForVersion options', () => {
  it('rejects a maxPollMs below minPollMs and a negative version, naming the fields', () => {
    const pool = { query: () => undefined, connect: () => undefined };
    assert.throws(
      () =>
        waitForVersionOptions.parse({
          pool,
          projection: 'p',
          aggregateType: 't',
          aggregateId: 'a',
          version: -1,
          minPollMs: 50,
          maxPollMs: 10,
        }),
      (err: unknown) => err instanceof ConfigError && err.problems.map((p) => p.path).join() === 'version,maxPollMs',
    );
  });
});

describe('chooseRead', () => {
  it('reads the source below the version the caller knows, whatever the budget', () => {
    assert.deepEqual(chooseRead(freshness(3, 3, null), { minVersion: 4, lagBudgetMs: 60_000 }), {
      from: 'source',
      reason: 'below-known-version',
    });
  });

  it('reads the source when the oldest unapplied event is older than the budget', () => {
    assert.deepEqual(chooseRead(freshness(3, 5, 6), { lagBudgetMs: 5_000 }), { from: 'source', reason: 'over-budget' });
    assert.deepEqual(chooseRead(freshness(3, 5, 4), { lagBudgetMs: 5_000 }), { from: 'projection', reason: 'fresh' });
  });

  it('without minVersion or budget, reads the projection only once it has caught up with the outbox', () => {
    assert.deepEqual(chooseRead(freshness(3, 5, 1), {}), { from: 'source', reason: 'behind-source' });
    assert.deepEqual(chooseRead(freshness(5, 5, null), {}), { from: 'projection', reason: 'fresh' });
  });

  it('with minVersion met, a projection behind newer events is still fresh enough', () => {
    assert.deepEqual(chooseRead(freshness(4, 9, 100), { minVersion: 4 }), { from: 'projection', reason: 'fresh' });
  });
});
