import assert from 'node:assert/strict';
import type pg from 'pg';
import {
  applyIncrement,
  repairFromSnapshot,
  withTransaction,
  type RepairResult,
  type TrustedSnapshot,
} from '../../src/index.js';
import { InvalidIdentifierError } from '../../src/errors.js';
import { AGGREGATE_TYPE, PROJECTION, withReadModel, type ReadModel } from '../support/read-model.js';
import { describe, it, backendPid, isBlockedOnLock, settle, waitFor } from '../support/rig.js';

/** repairFromSnapshot's apply reports nothing; the read model's writers return their query result. */
const quietly = (write: () => Promise<unknown>) => async () => {
  await write();
};

interface Fixture extends ReadModel {
  /** One consumer transaction applying an incremental event that adds `amount` to the read model. */
  increment(aggregateId: string, version: number, amount: number, label?: string): Promise<unknown>;
  /** One reconciler transaction repairing from a trusted snapshot that holds `amount`. */
  repair(
    snapshot: Partial<TrustedSnapshot> & Pick<TrustedSnapshot, 'aggregateId' | 'sourceVersion' | 'observedVersion'>,
    amount: number,
    label: string,
  ): Promise<RepairResult>;
  snapshot(
    partial: Partial<TrustedSnapshot> & Pick<TrustedSnapshot, 'aggregateId' | 'sourceVersion' | 'observedVersion'>,
  ): TrustedSnapshot;
}

/** Each test gets the shared read model, with increment and repair transactions on it. */
async function withFixture(work: (f: Fixture) => Promise<void>): Promise<void> {
  await withReadModel('cvt_repair', async (model) => {
    const { schema, pool, addAmount, replace } = model;
    const snapshot: Fixture['snapshot'] = (partial) => ({
      projection: PROJECTION,
      aggregateType: AGGREGATE_TYPE,
      schema,
      ...partial,
    });
    await work({
      ...model,
      snapshot,
      increment: (aggregateId, version, amount, label = `v${version}`) =>
        withTransaction(pool, (client) =>
          applyIncrement(
            client,
            {
              projection: PROJECTION,
              schema,
              event: { aggregateType: AGGREGATE_TYPE, aggregateId, aggregateVersion: version },
            },
            addAmount(client, aggregateId, amount, label),
          ),
        ),
      repair: (partial, amount, label) =>
        withTransaction(pool, (client) => {
          const snap = snapshot(partial);
          return repairFromSnapshot(
            client,
            snap,
            quietly(replace(client, snap.aggregateId, amount, snap.deleted ?? false, label)),
          );
        }),
    });
  });
}

/** Brings aggregate `o1` to version 2 through incremental events: amount 10 then +20. */
async function atVersionTwo(f: Fixture): Promise<void> {
  assert.deepEqual(await f.increment('o1', 1, 10), { applied: true, version: 1 });
  assert.deepEqual(await f.increment('o1', 2, 20), { applied: true, version: 2 });
  assert.deepEqual(await f.state('o1'), { version: 2, baselineVersion: null, deleted: false });
  assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 30, deleted: false });
}

/** Two explicit transactions on two connections, always released. */
async function withTwoTransactions(
  pool: pg.Pool,
  work: (a: pg.PoolClient, b: pg.PoolClient) => Promise<void>,
): Promise<void> {
  const a = await pool.connect();
  const b = await pool.connect();
  try {
    await a.query('BEGIN');
    await b.query('BEGIN');
    await work(a, b);
  } finally {
    await a.query('ROLLBACK').catch(() => undefined);
    await b.query('ROLLBACK').catch(() => undefined);
    a.release();
    b.release();
  }
}

describe('repairFromSnapshot', () => {
  it('does not replay a repair decided on a stale observation', async () => {
    await withFixture(async (f) => {
      await atVersionTwo(f);
      const result = await f.repair({ aggregateId: 'o1', observedVersion: 1, sourceVersion: 3 }, 300, 'repair3');
      assert.deepEqual(result, {
        repaired: false,
        reason: 'stale-observation',
        current: { version: 2, baselineVersion: null, deleted: false },
      });
      assert.deepEqual(f.calls, ['v1', 'v2'], 'apply is not called');
      assert.deepEqual(await f.state('o1'), { version: 2, baselineVersion: null, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 30, deleted: false });
    });
  });

  it('repairs when the observation still holds and the source is newer, then follows the article rules', async () => {
    await withFixture(async (f) => {
      await atVersionTwo(f);

      // The reconciler saw 2, the source has 3: repair sets version and baseline to 3.
      assert.deepEqual(await f.repair({ aggregateId: 'o1', observedVersion: 2, sourceVersion: 3 }, 300, 'repair3'), {
        repaired: true,
        version: 3,
      });
      assert.deepEqual(f.calls, ['v1', 'v2', 'repair3']);
      assert.deepEqual(await f.state('o1'), { version: 3, baselineVersion: 3, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 300, deleted: false });

      // The incremental v3 the snapshot already contains arrives late: acknowledged without effect.
      assert.deepEqual(await f.increment('o1', 3, 30, 'late3'), {
        applied: false,
        reason: 'covered-by-baseline',
        version: 3,
      });
      assert.deepEqual(f.calls, ['v1', 'v2', 'repair3']);
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 300, deleted: false });

      // v4 applies on top of the repaired state.
      assert.deepEqual(await f.increment('o1', 4, 4), { applied: true, version: 4 });
      assert.deepEqual(f.calls, ['v1', 'v2', 'repair3', 'v4']);
      assert.deepEqual(await f.state('o1'), { version: 4, baselineVersion: 3, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 304, deleted: false });

      // A snapshot at 3 cannot overwrite 4, even with an up-to-date observation.
      assert.deepEqual(
        await f.repair({ aggregateId: 'o1', observedVersion: 4, sourceVersion: 3 }, 333, 'repair3-again'),
        {
          repaired: false,
          reason: 'not-newer',
          current: { version: 4, baselineVersion: 3, deleted: false },
        },
      );
      // Nor with a stale one.
      const stale = await f.repair({ aggregateId: 'o1', observedVersion: 3, sourceVersion: 3 }, 333, 'repair3-stale');
      assert.equal(stale.repaired, false);
      assert.deepEqual(stale, {
        repaired: false,
        reason: 'stale-observation',
        current: { version: 4, baselineVersion: 3, deleted: false },
      });
      // An equal source with a current observation is not newer either.
      assert.deepEqual(await f.repair({ aggregateId: 'o1', observedVersion: 4, sourceVersion: 4 }, 444, 'repair4'), {
        repaired: false,
        reason: 'not-newer',
        current: { version: 4, baselineVersion: 3, deleted: false },
      });

      // Late incremental v3 once more, after v4: still covered, still no effect.
      assert.deepEqual(await f.increment('o1', 3, 30, 'late3-again'), {
        applied: false,
        reason: 'covered-by-baseline',
        version: 4,
      });

      assert.deepEqual(f.calls, ['v1', 'v2', 'repair3', 'v4']);
      assert.deepEqual(await f.state('o1'), { version: 4, baselineVersion: 3, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 304, deleted: false });
    });
  });

  it('creates state for a never-seen aggregate once, and treats a second "never seen" repair as stale', async () => {
    await withFixture(async (f) => {
      assert.equal(await f.state('fresh'), null);
      assert.deepEqual(
        await f.repair({ aggregateId: 'fresh', observedVersion: null, sourceVersion: 5 }, 500, 'repair5'),
        { repaired: true, version: 5 },
      );
      assert.deepEqual(f.calls, ['repair5']);
      assert.deepEqual(await f.state('fresh'), { version: 5, baselineVersion: 5, deleted: false });
      assert.deepEqual(await f.row('fresh'), { id: 'fresh', amount: 500, deleted: false });

      const again = await f.repair({ aggregateId: 'fresh', observedVersion: null, sourceVersion: 7 }, 700, 'repair7');
      assert.deepEqual(again, {
        repaired: false,
        reason: 'stale-observation',
        current: { version: 5, baselineVersion: 5, deleted: false },
      });
      assert.deepEqual(f.calls, ['repair5']);
      assert.deepEqual(await f.state('fresh'), { version: 5, baselineVersion: 5, deleted: false });
      assert.deepEqual(await f.row('fresh'), { id: 'fresh', amount: 500, deleted: false });

      // History up to the baseline is covered; the next version applies.
      assert.deepEqual(await f.increment('fresh', 1, 1), { applied: false, reason: 'covered-by-baseline', version: 5 });
      assert.deepEqual(await f.increment('fresh', 5, 1), { applied: false, reason: 'covered-by-baseline', version: 5 });
      assert.deepEqual(await f.increment('fresh', 6, 6), { applied: true, version: 6 });
      assert.deepEqual(f.calls, ['repair5', 'v6']);
      assert.deepEqual(await f.state('fresh'), { version: 6, baselineVersion: 5, deleted: false });
      assert.deepEqual(await f.row('fresh'), { id: 'fresh', amount: 506, deleted: false });
    });
  });

  it('a repair observing state that does not exist (any more) is stale', async () => {
    await withFixture(async (f) => {
      const result = await f.repair(
        { aggregateId: 'ghost', observedVersion: 2, sourceVersion: 3 },
        300,
        'repair-ghost',
      );
      assert.deepEqual(result, { repaired: false, reason: 'stale-observation', current: null });
      assert.deepEqual(f.calls, []);
      assert.equal(await f.state('ghost'), null);
      assert.equal(await f.row('ghost'), undefined);
    });
  });

  it('writes a versioned tombstone when the source no longer has the aggregate', async () => {
    await withFixture(async (f) => {
      await atVersionTwo(f);
      assert.deepEqual(
        await f.repair({ aggregateId: 'o1', observedVersion: 2, sourceVersion: 3, deleted: true }, 0, 'tomb3'),
        { repaired: true, version: 3 },
      );
      assert.deepEqual(f.calls, ['v1', 'v2', 'tomb3']);
      assert.deepEqual(await f.state('o1'), { version: 3, baselineVersion: 3, deleted: true });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 0, deleted: true });

      // The same snapshot version saying it is alive cannot resurrect it.
      assert.deepEqual(
        await f.repair({ aggregateId: 'o1', observedVersion: 3, sourceVersion: 3, deleted: false }, 99, 'alive3'),
        {
          repaired: false,
          reason: 'not-newer',
          current: { version: 3, baselineVersion: 3, deleted: true },
        },
      );
      assert.deepEqual(f.calls, ['v1', 'v2', 'tomb3']);
      assert.deepEqual(await f.state('o1'), { version: 3, baselineVersion: 3, deleted: true });

      // A never-seen aggregate that is already gone at the source gets a tombstone too.
      assert.deepEqual(
        await f.repair({ aggregateId: 'gone', observedVersion: null, sourceVersion: 4, deleted: true }, 0, 'tomb-gone'),
        { repaired: true, version: 4 },
      );
      assert.deepEqual(await f.state('gone'), { version: 4, baselineVersion: 4, deleted: true });
      assert.deepEqual(await f.row('gone'), { id: 'gone', amount: 0, deleted: true });
      assert.deepEqual(f.calls, ['v1', 'v2', 'tomb3', 'tomb-gone']);
    });
  });

  it('rejects an invalid schema name', async () => {
    await withFixture(async (f) => {
      await assert.rejects(
        f.repair({ aggregateId: 'o1', observedVersion: null, sourceVersion: 1, schema: 'Robert"); DROP' }, 1, 'bad'),
        (err: unknown) => err instanceof InvalidIdentifierError && err.code === 'CONVERGE_INVALID_IDENTIFIER',
      );
      assert.deepEqual(f.calls, []);
      assert.equal(await f.state('o1'), null);
    });
  });

  describe('racing normal consumption', () => {
    it('an increment committing while the repair waits on the row lock makes the repair stale', async () => {
      await withFixture(async (f) => {
        await atVersionTwo(f);
        await withTwoTransactions(f.pool, async (consumer, reconciler) => {
          // The consumer moves 2 → 3 and holds the row lock.
          const inc = await applyIncrement(
            consumer,
            {
              projection: PROJECTION,
              schema: f.schema,
              event: { aggregateType: AGGREGATE_TYPE, aggregateId: 'o1', aggregateVersion: 3 },
            },
            f.addAmount(consumer, 'o1', 30, 'v3'),
          );
          assert.deepEqual(inc, { applied: true, version: 3 });

          // The reconciler observed 2 and read the source at 5; its conditional write waits.
          const pid = await backendPid(reconciler);
          const snap = f.snapshot({ aggregateId: 'o1', observedVersion: 2, sourceVersion: 5 });
          const racing = settle(
            repairFromSnapshot(reconciler, snap, quietly(f.replace(reconciler, 'o1', 500, false, 'repair5'))),
          );
          await waitFor(() => isBlockedOnLock(f.pool, pid), 'the repair to wait on the row lock of the increment');

          await consumer.query('COMMIT');
          const outcome = await racing;
          assert.ok(outcome.ok, `repair must not throw: ${outcome.ok ? '' : String(outcome.error)}`);
          assert.deepEqual(outcome.value, {
            repaired: false,
            reason: 'stale-observation',
            current: { version: 3, baselineVersion: null, deleted: false },
          });
          await reconciler.query('COMMIT');
        });
        assert.deepEqual(f.calls, ['v1', 'v2', 'v3'], 'the repair never applied');
        assert.deepEqual(await f.state('o1'), { version: 3, baselineVersion: null, deleted: false });
        assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 60, deleted: false });
      });
    });

    it('a repair committing while the increment waits makes the increment covered by the baseline', async () => {
      await withFixture(async (f) => {
        await atVersionTwo(f);
        await withTwoTransactions(f.pool, async (reconciler, consumer) => {
          const snap = f.snapshot({ aggregateId: 'o1', observedVersion: 2, sourceVersion: 3 });
          assert.deepEqual(
            await repairFromSnapshot(reconciler, snap, quietly(f.replace(reconciler, 'o1', 300, false, 'repair3'))),
            { repaired: true, version: 3 },
          );

          const pid = await backendPid(consumer);
          const racing = settle(
            applyIncrement(
              consumer,
              {
                projection: PROJECTION,
                schema: f.schema,
                event: { aggregateType: AGGREGATE_TYPE, aggregateId: 'o1', aggregateVersion: 3 },
              },
              f.addAmount(consumer, 'o1', 30, 'v3'),
            ),
          );
          await waitFor(() => isBlockedOnLock(f.pool, pid), 'the increment to wait on the row lock of the repair');

          await reconciler.query('COMMIT');
          const outcome = await racing;
          assert.ok(outcome.ok, `increment must not throw: ${outcome.ok ? '' : String(outcome.error)}`);
          assert.deepEqual(outcome.value, { applied: false, reason: 'covered-by-baseline', version: 3 });
          await consumer.query('COMMIT');
        });
        assert.deepEqual(f.calls, ['v1', 'v2', 'repair3']);
        assert.deepEqual(await f.state('o1'), { version: 3, baselineVersion: 3, deleted: false });
        assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 300, deleted: false });
      });
    });

    it('a first increment committing while a "never seen" repair waits makes the repair stale', async () => {
      await withFixture(async (f) => {
        await withTwoTransactions(f.pool, async (consumer, reconciler) => {
          const inc = await applyIncrement(
            consumer,
            {
              projection: PROJECTION,
              schema: f.schema,
              event: { aggregateType: AGGREGATE_TYPE, aggregateId: 'n1', aggregateVersion: 1 },
            },
            f.addAmount(consumer, 'n1', 10, 'v1'),
          );
          assert.deepEqual(inc, { applied: true, version: 1 });

          const pid = await backendPid(reconciler);
          const snap = f.snapshot({ aggregateId: 'n1', observedVersion: null, sourceVersion: 4 });
          const racing = settle(
            repairFromSnapshot(reconciler, snap, quietly(f.replace(reconciler, 'n1', 400, false, 'repair4'))),
          );
          await waitFor(() => isBlockedOnLock(f.pool, pid), 'the repair insert to wait on the uncommitted first row');

          await consumer.query('COMMIT');
          const outcome = await racing;
          assert.ok(outcome.ok, `repair must not throw: ${outcome.ok ? '' : String(outcome.error)}`);
          assert.deepEqual(outcome.value, {
            repaired: false,
            reason: 'stale-observation',
            current: { version: 1, baselineVersion: null, deleted: false },
          });
          await reconciler.query('COMMIT');
        });
        assert.deepEqual(f.calls, ['v1']);
        assert.deepEqual(await f.state('n1'), { version: 1, baselineVersion: null, deleted: false });
        assert.deepEqual(await f.row('n1'), { id: 'n1', amount: 10, deleted: false });
      });
    });
  });
});
