/**
 * Reading your own writes against real PostgreSQL: waitForVersion resolves when a consumer's
 * transaction applies the version (and not before it commits), times out with
 * FreshnessTimeoutError, honours its abort signal; readFreshness reports behind and caught up
 * from the outbox or a caller's source version; readFresh reads the source while the projection is
 * behind. The consumer transaction is applyIncrement in withTransaction, as the consumer runs it.
 */
import assert from 'node:assert/strict';
import {
  appendToOutbox,
  applyIncrement,
  applySnapshot,
  readFresh,
  readFreshness,
  waitForVersion,
  withTransaction,
} from '../../src/index.js';
import { FreshnessTimeoutError } from '../../src/errors.js';
import { AGGREGATE_TYPE, PROJECTION, withReadModel, type ReadModel } from '../support/read-model.js';
import { describe, it, settle } from '../support/rig.js';

function apply(m: ReadModel, aggregateId: string, version: number, amount: number) {
  return withTransaction(m.pool, (tx) =>
    applyIncrement(
      tx,
      {
        schema: m.schema,
        projection: PROJECTION,
        event: { aggregateType: AGGREGATE_TYPE, aggregateId, aggregateVersion: version },
      },
      m.addAmount(tx, aggregateId, amount, `v${version}`),
    ),
  );
}

/** The producer's side: the business change's outbox row, `agoMs` old. */
function produce(m: ReadModel, aggregateId: string, version: number, agoMs = 0) {
  return appendToOutbox(
    m.pool,
    {
      aggregateType: AGGREGATE_TYPE,
      aggregateId,
      aggregateVersion: version,
      eventType: 'AmountAdded',
      payload: { delta: 1 },
      occurredAt: new Date(Date.now() - agoMs),
    },
    { schema: m.schema },
  );
}

const key = (m: ReadModel, aggregateId: string) => ({
  schema: m.schema,
  projection: PROJECTION,
  aggregateType: AGGREGATE_TYPE,
  aggregateId,
});

describe('waitForVersion', () => {
  it('resolves once the consumer transaction that applies the version commits, not before', async () => {
    await withReadModel('cvt_fresh', async (m) => {
      await apply(m, 'o1', 1, 10);
      const tx = await m.pool.connect();
      try {
        await tx.query('BEGIN');
        await applyIncrement(
          tx,
          {
            schema: m.schema,
            projection: PROJECTION,
            event: { aggregateType: AGGREGATE_TYPE, aggregateId: 'o1', aggregateVersion: 2 },
          },
          m.addAmount(tx, 'o1', 5, 'v2'),
        );
        let resolved = false;
        const waiting = waitForVersion({ pool: m.pool, ...key(m, 'o1'), version: 2, timeoutMs: 10_000 }).then((r) => {
          resolved = true;
          return r;
        });
        // Uncommitted, version 2 is not there: a second waiter times out meanwhile, the first still waits.
        const early = await settle(waitForVersion({ pool: m.pool, ...key(m, 'o1'), version: 2, timeoutMs: 200 }));
        assert.ok(!early.ok && early.error instanceof FreshnessTimeoutError);
        assert.equal(early.error.appliedVersion, 1);
        assert.equal(resolved, false);
        await tx.query('COMMIT');
        const result = await waiting;
        assert.equal(result.version, 2);
        assert.ok(result.reads >= 2, `read ${result.reads} times`);
        assert.equal((await m.row('o1'))?.amount, 15);
      } finally {
        tx.release();
      }
    });
  });

  it('counts a trusted snapshot: a baseline at or above the version resolves it', async () => {
    await withReadModel('cvt_fresh', async (m) => {
      await withTransaction(m.pool, (tx) =>
        applySnapshot(
          tx,
          {
            schema: m.schema,
            projection: PROJECTION,
            event: { aggregateType: AGGREGATE_TYPE, aggregateId: 'o2', aggregateVersion: 7 },
          },
          m.replace(tx, 'o2', 70, false, 's7'),
        ),
      );
      const result = await waitForVersion({ pool: m.pool, ...key(m, 'o2'), version: 5, timeoutMs: 0 });
      assert.deepEqual([result.version, result.reads], [7, 1]);
    });
  });

  it('rejects with FreshnessTimeoutError naming the versions once timeoutMs has passed', async () => {
    await withReadModel('cvt_fresh', async (m) => {
      await apply(m, 'o3', 1, 1);
      const started = Date.now();
      const outcome = await settle(
        waitForVersion({ pool: m.pool, ...key(m, 'o3'), version: 2, timeoutMs: 300, minPollMs: 10, maxPollMs: 100 }),
      );
      const elapsed = Date.now() - started;
      assert.equal(outcome.ok, false);
      const error = (outcome as { error: unknown }).error;
      assert.ok(error instanceof FreshnessTimeoutError);
      assert.equal(error.code, 'CONVERGE_FRESHNESS_TIMEOUT');
      assert.deepEqual([error.version, error.appliedVersion, error.timeoutMs], [2, 1, 300]);
      assert.ok(elapsed >= 300 && elapsed < 2_000, `gave up after ${elapsed} ms`);
    });
  });

  it('stops with the signal’s reason when aborted, without waiting for its timeout', async () => {
    await withReadModel('cvt_fresh', async (m) => {
      const controller = new AbortController();
      const started = Date.now();
      const waiting = settle(
        waitForVersion({ pool: m.pool, ...key(m, 'o4'), version: 1, timeoutMs: 60_000, signal: controller.signal }),
      );
      const reason = new Error('request cancelled');
      setImmediate(() => controller.abort(reason));
      const outcome = await waiting;
      assert.equal(outcome.ok, false);
      assert.equal((outcome as { error: unknown }).error, reason);
      assert.ok(Date.now() - started < 5_000);
    });
  });
});

describe('readFreshness', () => {
  it('reports behind from the outbox (versions and the age of the oldest unapplied event), then caught up', async () => {
    await withReadModel('cvt_fresh', async (m) => {
      await produce(m, 'o5', 1, 60_000);
      await apply(m, 'o5', 1, 1);
      await produce(m, 'o5', 2, 30_000);
      await produce(m, 'o5', 3, 10_000);

      const behind = await readFreshness(m.pool, key(m, 'o5'));
      assert.deepEqual(
        { ...behind, oldestUnappliedAgeSeconds: undefined },
        {
          projection: PROJECTION,
          aggregateType: AGGREGATE_TYPE,
          aggregateId: 'o5',
          appliedVersion: 1,
          baselineVersion: null,
          sourceVersion: 3,
          sourceVersionFrom: 'outbox',
          versionsBehind: 2,
          caughtUp: false,
          oldestUnappliedAgeSeconds: undefined,
        },
      );
      // Version 2's age, not version 1's (applied) nor version 3's.
      assert.ok(behind.oldestUnappliedAgeSeconds! >= 30 && behind.oldestUnappliedAgeSeconds! < 45);

      await apply(m, 'o5', 2, 1);
      await apply(m, 'o5', 3, 1);
      const caughtUp = await readFreshness(m.pool, key(m, 'o5'));
      assert.deepEqual([caughtUp.appliedVersion, caughtUp.versionsBehind, caughtUp.caughtUp], [3, 0, true]);
      assert.equal(caughtUp.oldestUnappliedAgeSeconds, null);
    });
  });

  it("takes the caller's source version over the outbox, and knows an aggregate it has never seen", async () => {
    await withReadModel('cvt_fresh', async (m) => {
      const unknown = await readFreshness(m.pool, { ...key(m, 'o6'), sourceVersion: 4 });
      assert.deepEqual(
        [
          unknown.appliedVersion,
          unknown.sourceVersion,
          unknown.sourceVersionFrom,
          unknown.versionsBehind,
          unknown.caughtUp,
        ],
        [0, 4, 'caller', 4, false],
      );
      const none = await readFreshness(m.pool, key(m, 'o6'));
      assert.deepEqual([none.sourceVersion, none.caughtUp], [0, true]);
    });
  });
});

describe('readFresh', () => {
  it('reads the source while the projection is below the known version or over budget, the projection otherwise', async () => {
    await withReadModel('cvt_fresh', async (m) => {
      await produce(m, 'o7', 1, 20_000);
      await apply(m, 'o7', 1, 10);
      await produce(m, 'o7', 2, 20_000);
      const reads = (minVersion?: number, lagBudgetMs?: number) =>
        readFresh(m.pool, {
          ...key(m, 'o7'),
          ...(minVersion === undefined ? {} : { minVersion }),
          ...(lagBudgetMs === undefined ? {} : { lagBudgetMs }),
          readProjection: async () => (await m.row('o7'))!.amount,
          readSource: async () => 15,
        });

      const known = await reads(2);
      assert.deepEqual([known.from, known.reason, known.value], ['source', 'below-known-version', 15]);
      const overBudget = await reads(undefined, 5_000);
      assert.deepEqual([overBudget.from, overBudget.reason, overBudget.value], ['source', 'over-budget', 15]);
      const withinBudget = await reads(undefined, 60_000);
      assert.deepEqual([withinBudget.from, withinBudget.value], ['projection', 10]);
      const strict = await reads();
      assert.deepEqual([strict.from, strict.reason], ['source', 'behind-source']);

      await apply(m, 'o7', 2, 5);
      const fresh = await reads(2);
      assert.deepEqual([fresh.from, fresh.reason, fresh.value], ['projection', 'fresh', 15]);
    });
  });
});
