import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type BackoffPolicy, DEFAULT_BACKOFF, backoffDelay } from '../../src/runtime/backoff.js';
import { DEFAULT_RECONNECT_BACKOFF } from '../../src/runtime/defaults.js';

const policy: BackoffPolicy = { initialDelayMs: 100, maxDelayMs: 5_000, factor: 2 };
const top = () => 1;
const bottom = () => 0;

describe('backoffDelay', () => {
  it('uses the initial delay on attempt 1', () => {
    assert.equal(backoffDelay(1, policy, top), 100);
    assert.equal(backoffDelay(1, DEFAULT_BACKOFF, top), DEFAULT_BACKOFF.initialDelayMs);
  });

  it('grows by the factor per attempt until the cap', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6].map((attempt) => backoffDelay(attempt, policy, top)),
      [100, 200, 400, 800, 1600, 3200],
    );
    assert.equal(backoffDelay(3, { ...policy, factor: 3 }, top), 900);
  });

  it('never exceeds maxDelayMs, even for huge attempt numbers', () => {
    for (const attempt of [7, 8, 20, 61, 1_000, Number.MAX_SAFE_INTEGER]) {
      assert.equal(backoffDelay(attempt, policy, top), 5_000, `attempt ${attempt}`);
    }
  });

  it('keeps jitter within [capped/2, capped]', () => {
    for (const attempt of [1, 2, 3, 4, 5, 6, 7, 50]) {
      const capped = Math.min(policy.maxDelayMs, policy.initialDelayMs * policy.factor ** (attempt - 1));
      assert.equal(backoffDelay(attempt, policy, bottom), capped / 2, `lower bound at attempt ${attempt}`);
      assert.equal(backoffDelay(attempt, policy, top), capped, `upper bound at attempt ${attempt}`);
      const middle = backoffDelay(attempt, policy, () => 0.5);
      assert.ok(middle >= capped / 2 && middle <= capped, `middle ${middle} at attempt ${attempt}`);
    }
  });

  it('clamps a misbehaving random source into the same range', () => {
    assert.equal(
      backoffDelay(3, policy, () => -5),
      200,
    );
    assert.equal(
      backoffDelay(3, policy, () => 7),
      400,
    );
  });

  it('treats attempt 0 or below like attempt 1', () => {
    assert.equal(backoffDelay(0, policy, top), 100);
    assert.equal(backoffDelay(-3, policy, bottom), 50);
  });

  it('returns whole milliseconds within range with the real random source', () => {
    for (let i = 0; i < 200; i++) {
      const delay = backoffDelay(4, policy);
      assert.ok(Number.isInteger(delay));
      assert.ok(delay >= 400 && delay <= 800, String(delay));
    }
  });

  it('defaults to 200 ms growing by 2 up to 30 s', () => {
    assert.deepEqual(DEFAULT_BACKOFF, { initialDelayMs: 200, maxDelayMs: 30_000, factor: 2 });
    assert.equal(backoffDelay(2, undefined, top), 400);
    assert.equal(backoffDelay(100, undefined, top), 30_000);
  });
});

describe('DEFAULT_RECONNECT_BACKOFF', () => {
  it('retries soon after a broker or database comes back: no delay above 1 s, however long the outage', () => {
    for (const attempt of [1, 5, 10, 100, 10_000])
      assert.ok(backoffDelay(attempt, DEFAULT_RECONNECT_BACKOFF, top) <= 1_000, `attempt ${attempt}`);
  });

  it('does not hammer a service that stays down: at least 0.5 s apart once it has failed a few times', () => {
    for (const attempt of [5, 10, 100, 10_000])
      assert.ok(backoffDelay(attempt, DEFAULT_RECONNECT_BACKOFF, bottom) >= 500, `attempt ${attempt}`);
  });
});
