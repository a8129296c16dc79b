/** The inbox retention the broker allows (ops/broker-retention.ts): pure, no broker involved. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { boundInboxRetention, NOT_CONFIGURED_WARNING } from '../../src/ops/broker-retention.js';
import { consumerQueues } from '../../src/transport/queue-age.js';
import type { QueueHead } from '../../src/transport/queue-age.js';

const NOW = 1_800_000_000_000;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const head = (queue: string, ageMs: number | null, messages = 1, exists = true): QueueHead => ({
  queue,
  exists,
  messages,
  headTimestampMs: ageMs === null ? null : NOW - ageMs,
});

describe('inbox retention bounded by the broker', () => {
  it('without a broker: the retention as given, with the documented warning', () => {
    assert.deepEqual(boundInboxRetention(2 * DAY, null, NOW, HOUR), {
      status: 'not-configured',
      queue: null,
      oldestMessageAgeMs: null,
      appliedRetentionMs: 2 * DAY,
      warning: NOT_CONFIGURED_WARNING,
    });
  });

  it('empty or missing queues leave the retention as it is', () => {
    const heads = [head('q', null, 0), head('q.retry.1s', 5 * DAY, 0), head('q.dead', null, 0, false)];
    assert.deepEqual(boundInboxRetention(2 * DAY, heads, NOW, HOUR), {
      status: 'empty',
      queue: null,
      oldestMessageAgeMs: null,
      appliedRetentionMs: 2 * DAY,
    });
  });

  it('the oldest waiting message plus the margin, when that is longer than the retention', () => {
    const heads = [head('q', 3 * DAY), head('q.retry.30s', 5 * DAY), head('q.retry.1s', 10)];
    assert.deepEqual(boundInboxRetention(2 * DAY, heads, NOW, HOUR), {
      status: 'bounded',
      queue: 'q.retry.30s',
      oldestMessageAgeMs: 5 * DAY,
      appliedRetentionMs: 5 * DAY + HOUR,
    });
  });

  it('a waiting message younger than the retention does not shorten it', () => {
    const check = boundInboxRetention(2 * DAY, [head('q', HOUR)], NOW, HOUR);
    assert.equal(check.status, 'bounded');
    assert.equal(check.appliedRetentionMs, 2 * DAY);
  });

  it('a timestamp from a clock ahead counts as age 0, never negative', () => {
    const check = boundInboxRetention(DAY, [head('q', -HOUR)], NOW, HOUR);
    assert.equal(check.oldestMessageAgeMs, 0);
    assert.equal(check.appliedRetentionMs, DAY);
  });

  it('a waiting head without a timestamp: unknown age, nothing may be deleted', () => {
    assert.deepEqual(boundInboxRetention(2 * DAY, [head('q', 9 * DAY), head('q.retry', null)], NOW, HOUR), {
      status: 'unknown-age',
      queue: 'q.retry',
      oldestMessageAgeMs: null,
      appliedRetentionMs: null,
    });
  });

  it("a consumer's messages wait in its queue, its retry tiers, the legacy retry queue and the dead queue", () => {
    assert.deepEqual(consumerQueues('q', [5_000, 1_000]), ['q', 'q.retry.1s', 'q.retry.5s', 'q.retry', 'q.dead']);
  });
});
