/** The failure policy without an event: which consumer failures wait (retry), and which go to a person (quarantine). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  ContentConflictError,
  EnvelopeValidationError,
  MalformedBodyError,
  BodyTooLargeError,
  StaleVersionError,
  VersionGapError,
  PermanentError,
  TransientError,
} from '../../src/errors.js';
import { decideFailure } from '../../src/internal/index.js';
import { describeError } from '../../src/runtime/logger.js';

const key = { projection: 'order_view', aggregateType: 'order', aggregateId: '42' };

function pgError(code: string, message = `simulated ${code}`): Error & { code: string } {
  return Object.assign(new Error(message), { code });
}

/** The policy's verdict for a failure with no event to park, without the quarantine detail. */
function classifyFailure(err: unknown, attempt: number, maxAttempts: number): { action: string; reason?: string } {
  const decision = decideFailure(err, { envelope: null, attempt, maxAttempts, reorderBuffer: false, parked: false });
  return decision.action === 'quarantine' ? { action: 'quarantine', reason: decision.reason } : decision;
}

describe('decideFailure without an event', () => {
  test('a content conflict is quarantined at once, whatever the attempt', () => {
    const err = new ContentConflictError('orders', 'E1', 'a'.repeat(64), 'b'.repeat(64));
    for (const attempt of [1, 2, 10, 1000]) {
      assert.deepEqual(classifyFailure(err, attempt, 10), { action: 'quarantine', reason: 'content-conflict' });
    }
  });

  test('an invalid envelope is quarantined at once', () => {
    const err = new EnvelopeValidationError('aggregateId', 'expected string');
    assert.deepEqual(classifyFailure(err, 1, 10), { action: 'quarantine', reason: 'invalid-envelope' });
    assert.deepEqual(classifyFailure(err, 99, 10), { action: 'quarantine', reason: 'invalid-envelope' });
  });

  test('a malformed or oversized body is quarantined at once with its own reason', () => {
    for (const attempt of [1, 99]) {
      assert.deepEqual(classifyFailure(new MalformedBodyError('not valid UTF-8'), attempt, 10), {
        action: 'quarantine',
        reason: 'malformed-body',
      });
      assert.deepEqual(classifyFailure(new BodyTooLargeError(10 * 1024 * 1024, 256 * 1024), attempt, 10), {
        action: 'quarantine',
        reason: 'body-too-large',
      });
    }
  });

  test('a stale version is quarantined at once', () => {
    const err = new StaleVersionError(key, 3, 5);
    assert.deepEqual(classifyFailure(err, 1, 10), { action: 'quarantine', reason: 'stale-version' });
  });

  test('a version gap waits without limit, even far past maxAttempts', () => {
    const err = new VersionGapError(key, 7, 5);
    for (const attempt of [1, 3, 10, 11, 1000]) {
      assert.deepEqual(classifyFailure(err, attempt, 3), { action: 'retry', reason: 'version-gap' });
    }
  });

  for (const code of ['40001', '40P01', '57P01', '08006', 'ECONNREFUSED']) {
    test(`a database error with code ${code} waits without limit (database-unavailable)`, () => {
      for (const attempt of [1, 3, 1000]) {
        assert.deepEqual(classifyFailure(pgError(code), attempt, 3), {
          action: 'retry',
          reason: 'database-unavailable',
        });
      }
    });
  }

  test('a plain object carrying a transient code (not an Error instance) is also transient', () => {
    assert.deepEqual(classifyFailure({ code: '40001' }, 50, 3), { action: 'retry', reason: 'database-unavailable' });
  });

  test('a lost connection recognised by its message waits without limit', () => {
    assert.deepEqual(classifyFailure(new Error('Connection terminated unexpectedly'), 1000, 3), {
      action: 'retry',
      reason: 'database-unavailable',
    });
  });

  test('a non-transient SQLSTATE (unique violation) is an ordinary handler error', () => {
    assert.deepEqual(classifyFailure(pgError('23505'), 1, 3), { action: 'retry', reason: 'handler-error' });
    assert.deepEqual(classifyFailure(pgError('23505'), 3, 3), { action: 'quarantine', reason: 'handler-failed' });
  });

  test('a plain Error retries (bounded) below maxAttempts and is quarantined from maxAttempts on', () => {
    const err = new Error('handler blew up');
    for (const attempt of [1, 2, 4]) {
      assert.deepEqual(classifyFailure(err, attempt, 5), { action: 'retry', reason: 'handler-error' });
    }
    for (const attempt of [5, 6, 1000]) {
      assert.deepEqual(classifyFailure(err, attempt, 5), { action: 'quarantine', reason: 'handler-failed' });
    }
  });

  test('maxAttempts 1 quarantines a handler error on the first attempt', () => {
    assert.deepEqual(classifyFailure(new Error('x'), 1, 1), { action: 'quarantine', reason: 'handler-failed' });
  });

  test('thrown non-Error values are handler errors, never a crash', () => {
    for (const thrown of ['a string', 42, null, undefined, { message: 'no code' }]) {
      assert.deepEqual(classifyFailure(thrown, 1, 2), { action: 'retry', reason: 'handler-error' });
      assert.deepEqual(classifyFailure(thrown, 2, 2), { action: 'quarantine', reason: 'handler-failed' });
    }
  });
});

describe('handler-chosen classification', () => {
  test('PermanentError is quarantined at once as handler-permanent, on the first attempt', () => {
    assert.deepEqual(classifyFailure(new PermanentError('order 7 is closed'), 1, 10), {
      action: 'quarantine',
      reason: 'handler-permanent',
    });
  });

  test('TransientError waits without limit, even past maxAttempts', () => {
    for (const attempt of [1, 10, 11, 500]) {
      assert.deepEqual(classifyFailure(new TransientError('search cluster unavailable'), attempt, 10), {
        action: 'retry',
        reason: 'handler-transient',
      });
    }
  });

  test('their messages, written by handlers, never reach a log line: only class and code', () => {
    assert.deepEqual(describeError(new PermanentError('customer alice@example.com rejected')), {
      err: 'PermanentError',
      code: 'CONVERGE_PERMANENT',
    });
    assert.deepEqual(describeError(new TransientError('token s3cr3t expired')), {
      err: 'TransientError',
      code: 'CONVERGE_TRANSIENT',
    });
  });
});
