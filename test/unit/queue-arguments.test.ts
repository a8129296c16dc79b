/**
 * The queue arguments of both modes, the dead-letter verdict a quarantine row gets, and the
 * broker headers a retry copy leaves behind. All pure: the broker side is in
 * test/integration/consumer-quorum.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { deadLetterVerdict, lastDeath } from '../../src/inbox/dead-letter.js';
import { withoutBrokerTripHeaders } from '../../src/inbox/retry-copy.js';
import {
  DEAD_QUEUE_DELIVERY_LIMIT,
  deadQueueName,
  queueSetArguments,
  retryQueueName,
  retryTierQueueName,
  retryTiers,
  chooseRetryTier,
  DEFAULT_RETRY_TIERS_MS,
} from '../../src/transport/queue-arguments.js';
import { backoffDelay } from '../../src/runtime/backoff.js';

describe('queue arguments', () => {
  it('classic: the queue without arguments and a retry queue dead-lettering back into it, no dead queue', () => {
    assert.deepEqual(queueSetArguments('orders', { queueType: 'classic', deliveryLimit: 5 }), {
      main: {},
      retry: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': 'orders' },
      tiers: [],
      dead: null,
    });
  });

  it('a retry tier is the retry queue with its delay as queue-level TTL, per queue type', () => {
    const tiers = retryTiers('orders', [5_000, 1_000]);
    for (const queueType of ['classic', 'quorum'] as const) {
      const args = queueSetArguments('orders', { queueType, deliveryLimit: 5, retryTiers: tiers });
      assert.deepEqual(
        args.tiers,
        tiers.map((tier) => ({ ...args.retry, 'x-message-ttl': tier.delayMs })),
      );
    }
  });

  it('quorum: explicit limits everywhere, at-least-once dead-lettering, the queue dying into <queue>.dead', () => {
    const safeDeadLettering = { 'x-dead-letter-strategy': 'at-least-once', 'x-overflow': 'reject-publish' };
    assert.deepEqual(queueSetArguments('orders', { queueType: 'quorum', deliveryLimit: 5 }), {
      main: {
        'x-queue-type': 'quorum',
        'x-delivery-limit': 5,
        'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': 'orders.dead',
        ...safeDeadLettering,
      },
      retry: {
        'x-queue-type': 'quorum',
        'x-delivery-limit': 5,
        'x-dead-letter-exchange': '',
        'x-dead-letter-routing-key': 'orders',
        ...safeDeadLettering,
      },
      tiers: [],
      dead: { 'x-queue-type': 'quorum', 'x-delivery-limit': DEAD_QUEUE_DELIVERY_LIMIT },
    });
    assert.equal(retryQueueName('orders'), 'orders.retry');
    assert.equal(deadQueueName('orders'), 'orders.dead');
  });

  it('the dead queue dead-letters nowhere: a way back would be a cycle RabbitMQ drops', () => {
    const { dead } = queueSetArguments('orders', { queueType: 'quorum', deliveryLimit: 1 });
    assert.equal(dead?.['x-dead-letter-exchange'], undefined);
  });
});

describe('retry tiers', () => {
  const tiers = retryTiers('orders', DEFAULT_RETRY_TIERS_MS);

  it('are named after their delay, shortest first, without repeats', () => {
    assert.deepEqual(
      tiers.map((t) => t.queue),
      ['orders.retry.1s', 'orders.retry.5s', 'orders.retry.30s', 'orders.retry.2m', 'orders.retry.10m'],
    );
    assert.deepEqual(retryTiers('q', [30_000, 250, 30_000, 1_500]), [
      { queue: 'q.retry.250ms', delayMs: 250 },
      { queue: 'q.retry.1500ms', delayMs: 1_500 },
      { queue: 'q.retry.30s', delayMs: 30_000 },
    ]);
    assert.equal(retryTierQueueName('q', 3_600_000), 'q.retry.60m');
  });

  it('a delay goes to the shortest tier at least as long: never back before its backoff', () => {
    const pick = (ms: number) => chooseRetryTier(tiers, ms).delayMs;
    assert.equal(pick(0), 1_000);
    assert.equal(pick(1), 1_000);
    assert.equal(pick(1_000), 1_000);
    assert.equal(pick(1_001), 5_000);
    assert.equal(pick(29_999), 30_000);
    assert.equal(pick(30_000), 30_000);
    assert.equal(pick(120_001), 600_000);
  });

  it('past the longest tier the longest caps the wait', () => {
    assert.equal(chooseRetryTier(tiers, 3_600_000).delayMs, 600_000);
    assert.throws(() => chooseRetryTier([], 1), /no retry tiers/);
  });

  it('jittered backoff delays keep their spread: each lands in a tier no shorter than itself', () => {
    const policy = { initialDelayMs: 100, maxDelayMs: 60_000, factor: 2 };
    for (let attempt = 1; attempt <= 12; attempt++)
      for (const r of [0, 0.5, 1]) {
        const delay = backoffDelay(attempt, policy, () => r);
        const tier = chooseRetryTier(tiers, delay);
        assert.ok(tier.delayMs >= delay, `attempt ${attempt}: ${delay} ms in the ${tier.delayMs} ms tier`);
        const shorter = tiers.filter((t) => t.delayMs < tier.delayMs).at(-1);
        assert.ok(!shorter || shorter.delayMs < delay, 'and in the shortest such tier');
      }
  });
});

describe('dead letters', () => {
  const x = (reason: string, queue: string) => ({ reason, queue, count: 1, exchange: '' });

  it('take the newest death: x-death is newest first, x-first-death names the oldest', () => {
    const headers = {
      'x-death': [x('delivery_limit', 'orders'), x('expired', 'orders.retry')],
      'x-first-death-reason': 'expired',
      'x-first-death-queue': 'orders.retry',
    };
    assert.deepEqual(lastDeath(headers), { reason: 'delivery_limit', queue: 'orders' });
    assert.deepEqual(lastDeath({ 'x-last-death-reason': 'rejected', 'x-last-death-queue': 'q', ...headers }), {
      reason: 'rejected',
      queue: 'q',
    });
    assert.deepEqual(lastDeath({ 'x-first-death-reason': 'maxlen', 'x-first-death-queue': 'q' }), {
      reason: 'maxlen',
      queue: 'q',
    });
    for (const odd of [undefined, {}, { 'x-death': 'nonsense' }, { 'x-death': [null] }, { 'x-death': [{ reason: 7 }] }])
      assert.deepEqual(lastDeath(odd as Record<string, unknown> | undefined), { reason: null, queue: null });
  });

  it('a delivery limit becomes delivery-limit-exceeded; any other death or none dead-lettered, named in the detail', () => {
    const limit = deadLetterVerdict({ reason: 'delivery_limit', queue: 'orders' }, 'orders.dead');
    assert.equal(limit.reason, 'delivery-limit-exceeded');
    assert.match(limit.detail, /from queue orders into orders\.dead/);
    const rejected = deadLetterVerdict({ reason: 'rejected', queue: 'orders' }, 'orders.dead');
    assert.deepEqual(rejected.reason, 'dead-lettered');
    assert.match(rejected.detail, /: rejected$/);
    assert.match(deadLetterVerdict({ reason: null, queue: null }, 'orders.dead').detail, /without an x-death/);
    // Headers the transport set aside hide x-death too: the reason is the headers, whatever the death.
    const undecodable = { detail: 'header table nested deeper than 64 levels' };
    assert.deepEqual(deadLetterVerdict({ reason: 'delivery_limit', queue: 'orders' }, 'orders.dead', undecodable), {
      reason: 'undecodable-headers',
      detail: 'found in orders.dead: header table nested deeper than 64 levels',
    });
  });

  it('a retry copy leaves the per-trip broker headers behind and keeps everything else', () => {
    const headers = {
      'x-death': [x('expired', 'orders.retry')],
      'x-first-death-reason': 'expired',
      'x-first-death-queue': 'orders.retry',
      'x-first-death-exchange': '',
      'x-last-death-reason': 'expired',
      'x-delivery-count': 3,
      'x-aggregate-id': 'o1',
      'x-deathly': 'kept',
      'x-converge-attempt': 2,
    };
    assert.deepEqual(withoutBrokerTripHeaders(headers), {
      'x-aggregate-id': 'o1',
      'x-deathly': 'kept',
      'x-converge-attempt': 2,
    });
    assert.deepEqual(withoutBrokerTripHeaders(undefined), {});
  });
});
