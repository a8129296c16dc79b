/** The failure policy with an event in hand: parking, staying parked, the compaction check, and what each decision carries. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CommitRolledBackError,
  ContentConflictError,
  PermanentError,
  StaleVersionError,
  VersionGapError,
} from '../../src/errors.js';
import { decideFailure, type FailureContext } from '../../src/internal/index.js';

const key = { projection: 'order_view', aggregateType: 'order', aggregateId: '42' };
const event = { kind: 'incremental' as const, aggregateType: 'order', aggregateId: '42', aggregateVersion: 5 };

function context(overrides: Partial<FailureContext> = {}): FailureContext {
  return { envelope: event, attempt: 1, maxAttempts: 3, reorderBuffer: true, parked: false, ...overrides };
}

describe('decideFailure', () => {
  test('an early incremental event parks, waiting for the version after the current one, on the projection that reported the gap', () => {
    assert.deepEqual(decideFailure(new VersionGapError(key, 5, 3), context()), {
      action: 'park',
      projection: 'order_view',
      waitingFor: 4,
    });
  });

  test('a parked event that still has a gap stays parked, whatever the attempt', () => {
    for (const attempt of [1, 3, 100])
      assert.deepEqual(decideFailure(new VersionGapError(key, 5, 3), context({ parked: true, attempt })), {
        action: 'stay-parked',
      });
  });

  test('a gap waits through the retry queue without a reorder buffer, for a snapshot event, or without an event', () => {
    const gap = new VersionGapError(key, 5, 3);
    assert.deepEqual(decideFailure(gap, context({ reorderBuffer: false })), { action: 'retry', reason: 'version-gap' });
    assert.deepEqual(decideFailure(gap, context({ envelope: { ...event, kind: 'snapshot' } })), {
      action: 'retry',
      reason: 'version-gap',
    });
    assert.deepEqual(decideFailure(gap, context({ envelope: null, attempt: 50 })), {
      action: 'retry',
      reason: 'version-gap',
    });
  });

  test("a stale version of the event's own aggregate and version checks the compaction watermark, else quarantines as stale", () => {
    const stale = new StaleVersionError(key, 5, 7);
    const decision = decideFailure(stale, context());
    assert.equal(decision.action, 'check-compaction');
    assert.deepEqual(decision.action === 'check-compaction' && decision.otherwise, {
      action: 'quarantine',
      reason: 'stale-version',
      detail: stale.message,
    });
    assert.deepEqual(decideFailure(stale, context({ parked: true })).action, 'check-compaction');
  });

  test('a stale version a handler hit on another aggregate (or another version) is quarantined at once', () => {
    const other = new StaleVersionError({ ...key, aggregateId: '43' }, 5, 7);
    assert.deepEqual(decideFailure(other, context()), {
      action: 'quarantine',
      reason: 'stale-version',
      detail: other.message,
    });
    const otherVersion = new StaleVersionError(key, 4, 7);
    assert.equal(decideFailure(otherVersion, context()).action, 'quarantine');
  });

  test('the quarantine detail is the converge message, or names the attempts and the handler error (for the quarantine row only)', () => {
    const conflict = new ContentConflictError('orders', 'E1', 'a'.repeat(64), 'b'.repeat(64));
    assert.deepEqual(decideFailure(conflict, context()), {
      action: 'quarantine',
      reason: 'content-conflict',
      detail: conflict.message,
    });
    assert.deepEqual(decideFailure(new PermanentError('order 7 is closed'), context()), {
      action: 'quarantine',
      reason: 'handler-permanent',
      detail: 'order 7 is closed',
    });
    assert.deepEqual(decideFailure(new TypeError('x is undefined'), context({ attempt: 3 })), {
      action: 'quarantine',
      reason: 'handler-failed',
      detail: 'handler failed after 3 attempts: TypeError: x is undefined',
    });
    assert.deepEqual(decideFailure('plain string', context({ attempt: 3 })), {
      action: 'quarantine',
      reason: 'handler-failed',
      detail: 'handler failed after 3 attempts: plain string',
    });
  });

  test('handler errors retry below maxAttempts, parked or not', () => {
    assert.deepEqual(decideFailure(new Error('boom'), context({ attempt: 2 })), {
      action: 'retry',
      reason: 'handler-error',
    });
    assert.deepEqual(decideFailure(new Error('boom'), context({ attempt: 2, parked: true })), {
      action: 'retry',
      reason: 'handler-error',
    });
  });

  test('a COMMIT answered by ROLLBACK is a handler error: retried below maxAttempts, then quarantined with its message', () => {
    const rolledBack = new CommitRolledBackError();
    assert.deepEqual(decideFailure(rolledBack, context({ attempt: 2 })), { action: 'retry', reason: 'handler-error' });
    assert.deepEqual(decideFailure(rolledBack, context({ attempt: 3 })), {
      action: 'quarantine',
      reason: 'handler-failed',
      detail: rolledBack.message,
    });
  });

  test('is pure: the same inputs give the same decision and the inputs are not changed', () => {
    const ctx = context();
    const frozen = JSON.stringify(ctx);
    const gap = new VersionGapError(key, 5, 3);
    assert.deepEqual(decideFailure(gap, ctx), decideFailure(gap, ctx));
    assert.equal(JSON.stringify(ctx), frozen);
  });
});
