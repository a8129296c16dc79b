import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { diagnose, drainEstimate, queueThroughput } from '../../src/ops/diagnose.js';
import type { PipelineFacts } from '../../src/ops/facts.js';

function healthy(): PipelineFacts {
  return {
    windowSeconds: 60,
    sampleSeconds: 5,
    stallAfterSeconds: 30,
    sources: [{ source: 'public.orders', aggregateType: 'order', ahead: 0, sampleIds: [] }],
    outbox: {
      pending: 4,
      pendingBefore: 6,
      failed: 0,
      oldestPendingAgeSeconds: 0.2,
      arrivalPerSecond: 300,
      publishedPerSecond: 300.4,
    },
    cdcSlots: [],
    cdcRetainedWalWarnBytes: 1024 ** 3,
    queues: [
      {
        queue: 'search',
        consumer: 'search',
        projection: 'order_search',
        depth: 10,
        depthBefore: 12,
        consumers: 1,
        completedPerSecond: 300,
        inboxInWindow: 18_000,
        projectionUpdatesInWindow: 9_000,
      },
    ],
    gaps: { stuckAggregates: 0, oldestAgeSeconds: null, parked: 0, sample: [] },
    failures: { outboxFailed: 0, quarantined: {}, effects: { failed: 0, stalePending: 0, sampleEffects: [] } },
    horizon: {
      // A short transaction holds the horizon at every moment: that alone is healthy.
      holders: [{ kind: 'transaction', holder: '4242 app', ageSeconds: 0.05, transactionsBehind: 3, state: 'active' }],
      warnAfterSeconds: 300,
    },
    partitions: [],
  };
}

describe('drain estimate', () => {
  it("is the backlog over the net rate: the article's 300 in, 500 out drains 200 per second", () => {
    assert.deepEqual(drainEstimate(10_000, 300, 500), {
      arrivalPerSecond: 300,
      completionPerSecond: 500,
      backlog: 10_000,
      drainSeconds: 50,
    });
  });

  it('never drains when completion does not exceed arrival, and an empty backlog is drained', () => {
    assert.equal(drainEstimate(10, 500, 500).drainSeconds, null);
    assert.equal(drainEstimate(10, 600, 500).drainSeconds, null);
    assert.equal(drainEstimate(0, 600, 500).drainSeconds, 0);
  });

  it('derives a queue arrival rate from what the consumer recorded plus the backlog growth', () => {
    const queue = { ...healthy().queues[0]!, depth: 1_000, depthBefore: 2_000, completedPerSecond: 500 };
    const throughput = queueThroughput(queue, 5);
    assert.equal(throughput.arrivalPerSecond, 300, '500/s recorded while the backlog fell by 200/s');
    assert.equal(throughput.drainSeconds, 5);
  });
});

describe('diagnose', () => {
  it('finds nothing in a pipeline that keeps up', () => {
    assert.deepEqual(diagnose(healthy()), []);
  });

  it('names the producer when a source version has no outbox event, with ids only', () => {
    const facts = healthy();
    facts.sources[0] = { source: 'public.orders', aggregateType: 'order', ahead: 2, sampleIds: ['o-7', 'o-9'] };
    const [finding, ...rest] = diagnose(facts);
    assert.equal(rest.length, 0);
    assert.equal(finding!.kind, 'source-without-event');
    assert.equal(finding!.stage, 'producer');
    assert.equal(finding!.subject, 'public.orders');
    assert.match(finding!.evidence, /2 public\.orders row\(s\).*o-7, o-9/);
    assert.match(finding!.lookAt, /appendToOutbox/);
  });

  it('calls an old pending event a relay stall, and a growing but young backlog a warning', () => {
    const old = healthy();
    old.outbox = {
      ...old.outbox,
      oldestPendingAgeSeconds: 600,
      arrivalPerSecond: 0,
      publishedPerSecond: 0,
      pending: 4,
      pendingBefore: 4,
    };
    assert.deepEqual(
      diagnose(old).map((f) => [f.kind, f.severity, f.stage]),
      [['outbox-growing', 'stalled', 'relay']],
    );
    const growing = healthy();
    growing.outbox = {
      ...growing.outbox,
      pending: 900,
      pendingBefore: 400,
      arrivalPerSecond: 300,
      publishedPerSecond: 200,
      oldestPendingAgeSeconds: 2,
    };
    assert.deepEqual(
      diagnose(growing).map((f) => [f.kind, f.severity]),
      [['outbox-growing', 'warning']],
    );
  });

  it('reports failed outbox events as a stall', () => {
    const facts = healthy();
    facts.outbox.failed = 3;
    assert.deepEqual(
      diagnose(facts).map((f) => f.kind),
      ['outbox-failed'],
    );
  });

  it('blames the consumer for a backlog the inbox does not take, not for one that shrinks', () => {
    const stuck = healthy();
    stuck.queues[0] = { ...stuck.queues[0]!, depth: 500, depthBefore: 480, consumers: 0, completedPerSecond: 0 };
    const [finding] = diagnose(stuck);
    assert.deepEqual([finding!.kind, finding!.stage, finding!.subject], ['broker-backlog', 'consumer', 'search']);
    assert.match(finding!.evidence, /500 ready message\(s\), 0 subscriber/);
    const draining = healthy();
    draining.queues[0] = { ...draining.queues[0]!, depth: 500, depthBefore: 900, completedPerSecond: 0 };
    assert.deepEqual(
      diagnose(draining),
      [],
      'a shrinking queue is being consumed even if no inbox row is new (duplicates)',
    );
  });

  it('reports a missing queue', () => {
    const facts = healthy();
    facts.queues[0] = { ...facts.queues[0]!, depth: null, depthBefore: null, consumers: null };
    assert.deepEqual(
      diagnose(facts).map((f) => [f.kind, f.stage]),
      [['queue-missing', 'broker']],
    );
  });

  it('blames the projection when the inbox grows and the projection does not change', () => {
    const facts = healthy();
    facts.queues[0] = { ...facts.queues[0]!, projectionUpdatesInWindow: 0 };
    const [finding] = diagnose(facts);
    assert.deepEqual([finding!.kind, finding!.stage], ['inbox-without-projection', 'projection']);
    assert.match(finding!.lookAt, /row counts/);
    const unnamed = healthy();
    const { projection: _p, projectionUpdatesInWindow: _u, ...rest } = unnamed.queues[0]!;
    unnamed.queues[0] = rest;
    assert.deepEqual(diagnose(unnamed), [], 'no projection named, nothing to compare');
  });

  it('reports aggregates stuck on a missing version with examples', () => {
    const facts = healthy();
    facts.gaps = {
      stuckAggregates: 1,
      parked: 2,
      oldestAgeSeconds: 95,
      sample: [
        { consumer: 'search', aggregateType: 'order', aggregateId: 'o1', currentVersion: 3, parkedVersions: [5, 6] },
      ],
    };
    const [finding] = diagnose(facts);
    assert.deepEqual([finding!.kind, finding!.stage], ['missing-versions', 'ordering']);
    assert.match(finding!.evidence, /order\/o1 at 3, waiting 5,6/);
  });

  it('warns about open quarantine by reason, without calling it a stall', () => {
    const facts = healthy();
    facts.failures.quarantined = { 'handler-permanent': 2, 'invalid-envelope': 1 };
    const [finding] = diagnose(facts);
    assert.deepEqual([finding!.kind, finding!.severity], ['quarantined', 'warning']);
    assert.match(finding!.evidence, /3 open.*handler-permanent 2, invalid-envelope 1/);
  });

  it('warns about remote effects failed for good and about keys whose outcome was never recorded, naming the effects', () => {
    const facts = healthy();
    facts.failures.effects = { failed: 2, stalePending: 0, sampleEffects: ['send-sms'] };
    const failed = diagnose(facts);
    assert.deepEqual(
      failed.map((f) => [f.kind, f.severity, f.stage]),
      [['effects-failed', 'warning', 'consumer']],
    );
    assert.match(failed[0]!.evidence, /2 remote effect key\(s\) failed for good \(send-sms\)/);
    assert.match(failed[0]!.lookAt, /retryFailedEffect/);
    facts.failures.effects = { failed: 0, stalePending: 3, sampleEffects: ['charge-card', 'send-sms'] };
    const unknown = diagnose(facts);
    assert.deepEqual(
      unknown.map((f) => f.kind),
      ['effects-outcome-unknown'],
    );
    assert.match(unknown[0]!.evidence, /3 remote effect key\(s\) pending for over 30 s \(charge-card, send-sms\)/);
  });

  describe('CDC slots', () => {
    const slot = {
      slot: 'converge_cdc',
      exists: true,
      active: true,
      retainedWalBytes: 64 * 1024,
      walStatus: 'reserved',
    };

    it('says nothing about a slot a relay streams from with little WAL retained', () => {
      const facts = { ...healthy(), cdcSlots: [slot] };
      assert.deepEqual(diagnose(facts), []);
    });

    it('calls a slot nothing reads a warning while events are young, a stall once the oldest is past the threshold', () => {
      const facts = { ...healthy(), cdcSlots: [{ ...slot, active: false, retainedWalBytes: 3 * 1024 ** 2 }] };
      const [young] = diagnose(facts);
      assert.deepEqual(
        [young!.kind, young!.severity, young!.stage, young!.subject],
        ['cdc-slot-inactive', 'warning', 'relay', 'converge_cdc'],
      );
      assert.match(young!.evidence, /retains 3\.0 MiB of WAL/);
      facts.outbox = { ...facts.outbox, oldestPendingAgeSeconds: 31 };
      const stalled = diagnose(facts).find((f) => f.kind === 'cdc-slot-inactive');
      assert.equal(stalled?.severity, 'stalled');
    });

    it('warns about retained WAL at the threshold even while a relay streams, not below it', () => {
      const facts = { ...healthy(), cdcRetainedWalWarnBytes: 1024 ** 3 };
      facts.cdcSlots = [{ ...slot, retainedWalBytes: 1024 ** 3 - 1 }];
      assert.deepEqual(diagnose(facts), []);
      facts.cdcSlots = [{ ...slot, retainedWalBytes: 1024 ** 3 }];
      const [finding] = diagnose(facts);
      assert.deepEqual([finding!.kind, finding!.severity], ['cdc-slot-retaining-wal', 'warning']);
      assert.match(finding!.evidence, /1\.0 GiB of WAL \(warning at 1\.0 GiB\)/);
    });

    it('calls a missing or invalidated slot a stall, whatever the WAL', () => {
      const missing = diagnose({
        ...healthy(),
        cdcSlots: [{ ...slot, exists: false, active: false, walStatus: null }],
      });
      assert.deepEqual(
        missing.map((f) => [f.kind, f.severity]),
        [['cdc-slot-missing', 'stalled']],
      );
      assert.match(missing[0]!.lookAt, /converge cdc slot create --slot converge_cdc/);
      const lost = diagnose({ ...healthy(), cdcSlots: [{ ...slot, active: false, walStatus: 'lost' }] });
      assert.deepEqual(
        lost.map((f) => [f.kind, f.severity]),
        [['cdc-slot-lost', 'stalled']],
      );
    });
  });
});

describe('a status read once, without a sample (sampleMs 0)', () => {
  function unsampled(): PipelineFacts {
    const facts = healthy();
    facts.sampleSeconds = 0;
    facts.outbox = {
      ...facts.outbox,
      pendingBefore: facts.outbox.pending,
      arrivalPerSecond: null,
      publishedPerSecond: null,
    };
    facts.queues = facts.queues.map((q) => ({ ...q, depthBefore: null, completedPerSecond: null }));
    return facts;
  }

  it('judges nothing that needs a rate: a young backlog and an idle-looking queue are not findings', () => {
    const facts = unsampled();
    facts.outbox.pending = 900;
    facts.outbox.oldestPendingAgeSeconds = 2;
    facts.queues[0] = { ...facts.queues[0]!, depth: 500, consumers: 0 };
    assert.deepEqual(diagnose(facts), []);
    assert.deepEqual(queueThroughput(facts.queues[0], 0), {
      arrivalPerSecond: null,
      completionPerSecond: null,
      backlog: 500,
      drainSeconds: null,
    });
  });

  it('still judges what a single reading shows: an old pending event is a stall, without rates in the evidence', () => {
    const facts = unsampled();
    facts.outbox.oldestPendingAgeSeconds = 840;
    const [finding] = diagnose(facts);
    assert.deepEqual([finding!.kind, finding!.severity], ['outbox-growing', 'stalled']);
    assert.match(finding!.evidence, /^4 unpublished, oldest 840 s \(rates not sampled\)$/);
    assert.equal(drainEstimate(0, null, null).drainSeconds, 0);
  });
});
