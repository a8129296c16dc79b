import assert from 'node:assert/strict';
import {
  applyIncrement,
  applyIncrements,
  applySnapshot,
  readProjectionState,
  withTransaction,
  type ProjectionTarget,
  type SnapshotTarget,
} from '../../src/index.js';
import { InvalidIdentifierError, StaleVersionError, VersionGapError } from '../../src/errors.js';
import { AGGREGATE_TYPE, PROJECTION, withReadModel, type ReadModel } from '../support/read-model.js';
import { describe, it, backendPid, isBlockedOnLock, settle, waitFor } from '../support/rig.js';

interface Fixture extends ReadModel {
  /** Fully qualified stand-in for the inbox row written in the same consumer transaction. */
  marker: string;
  target(aggregateId: string, version: number): ProjectionTarget;
  snapshot(aggregateId: string, version: number, deleted?: boolean): SnapshotTarget;
  rawState(
    aggregateId: string,
  ): Promise<{ version: string; baseline_version: string | null; deleted: boolean } | undefined>;
  markers(): Promise<string[]>;
}

/** Each test gets the shared read model plus a marker table standing in for the inbox. */
async function withFixture(work: (f: Fixture) => Promise<void>): Promise<void> {
  await withReadModel('cvt_proj', async (model) => {
    const { schema, pool } = model;
    const marker = `"${schema}".consumed_marker`;
    await pool.query(`CREATE TABLE ${marker} (event_id text PRIMARY KEY)`);
    await work({
      ...model,
      marker,
      target: (aggregateId, version) => ({
        projection: PROJECTION,
        schema,
        event: { aggregateType: AGGREGATE_TYPE, aggregateId, aggregateVersion: version },
      }),
      snapshot: (aggregateId, version, deleted) => ({
        projection: PROJECTION,
        schema,
        event: { aggregateType: AGGREGATE_TYPE, aggregateId, aggregateVersion: version },
        ...(deleted === undefined ? {} : { deleted }),
      }),
      rawState: async (aggregateId) => {
        const { rows } = await pool.query<{ version: string; baseline_version: string | null; deleted: boolean }>(
          `SELECT version, baseline_version, deleted FROM "${schema}".projection_state
            WHERE projection = $1 AND aggregate_type = $2 AND aggregate_id = $3`,
          [PROJECTION, AGGREGATE_TYPE, aggregateId],
        );
        return rows[0];
      },
      markers: async () => {
        const { rows } = await pool.query<{ event_id: string }>(`SELECT event_id FROM ${marker} ORDER BY event_id`);
        return rows.map((r) => r.event_id);
      },
    });
  });
}

/** One consumer transaction: the inbox stand-in row and the projection move together or not at all. */
function consume(f: Fixture, eventId: string, aggregateId: string, version: number, amount: number) {
  return withTransaction(f.pool, async (client) => {
    await client.query(`INSERT INTO ${f.marker} (event_id) VALUES ($1)`, [eventId]);
    return applyIncrement(client, f.target(aggregateId, version), f.addAmount(client, aggregateId, amount, eventId));
  });
}

describe('applyIncrement', () => {
  it('applies v1 on an empty projection, then v2 on top of it', async () => {
    await withFixture(async (f) => {
      assert.equal(await f.state('o1'), null);

      const first = await withTransaction(f.pool, (client) =>
        applyIncrement(client, f.target('o1', 1), f.addAmount(client, 'o1', 10, 'v1')),
      );
      assert.deepEqual(first, { applied: true, version: 1 });
      assert.deepEqual(f.calls, ['v1']);
      assert.deepEqual(await f.state('o1'), { version: 1, baselineVersion: null, deleted: false });
      assert.deepEqual(await f.rawState('o1'), { version: '1', baseline_version: null, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 10, deleted: false });

      const second = await withTransaction(f.pool, (client) =>
        applyIncrement(client, f.target('o1', 2), f.addAmount(client, 'o1', 20, 'v2')),
      );
      assert.deepEqual(second, { applied: true, version: 2 });
      assert.deepEqual(f.calls, ['v1', 'v2']);
      assert.deepEqual(await f.state('o1'), { version: 2, baselineVersion: null, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 30, deleted: false });
    });
  });

  it('keeps aggregates and projections independent', async () => {
    await withFixture(async (f) => {
      await withTransaction(f.pool, (client) =>
        applyIncrement(client, f.target('o1', 1), f.addAmount(client, 'o1', 1, 'o1v1')),
      );
      await withTransaction(f.pool, (client) =>
        applyIncrement(client, f.target('o2', 1), f.addAmount(client, 'o2', 2, 'o2v1')),
      );
      // Same aggregate, other projection: starts at its own version 1.
      const other = await withTransaction(f.pool, (client) =>
        applyIncrement(client, { ...f.target('o1', 1), projection: 'order_stats' }, async () => {
          f.calls.push('stats');
          return 'unchanged';
        }),
      );
      assert.deepEqual(other, { applied: true, version: 1 });
      assert.deepEqual(f.calls, ['o1v1', 'o2v1', 'stats']);
      assert.deepEqual(await f.state('o1'), { version: 1, baselineVersion: null, deleted: false });
      assert.deepEqual(await f.state('o2'), { version: 1, baselineVersion: null, deleted: false });
      const stats = await readProjectionState(f.pool, {
        schema: f.schema,
        projection: 'order_stats',
        aggregateType: AGGREGATE_TYPE,
        aggregateId: 'o1',
      });
      assert.deepEqual(stats, { version: 1, baselineVersion: null, deleted: false });
    });
  });

  it('refuses v2 before v1 with a VersionGapError that rolls the whole consumer transaction back, then applies v1 and v2 in order', async () => {
    await withFixture(async (f) => {
      // v2 overtakes v1: the event must wait, apply must not run, and the inbox row must not survive.
      await assert.rejects(consume(f, 'e2', 'o1', 2, 20), (err: unknown) => {
        assert.ok(err instanceof VersionGapError, `expected VersionGapError, got ${String(err)}`);
        assert.equal(err.code, 'CONVERGE_VERSION_GAP');
        assert.equal(err.eventVersion, 2);
        assert.equal(err.currentVersion, 0);
        assert.deepEqual(err.key, { projection: PROJECTION, aggregateType: AGGREGATE_TYPE, aggregateId: 'o1' });
        return true;
      });
      assert.deepEqual(f.calls, []);
      assert.deepEqual(await f.markers(), [], 'the marker row written in the same transaction is rolled back');
      assert.equal(await f.state('o1'), null);
      assert.equal(await f.row('o1'), undefined);

      // v1 arrives and applies, then the redelivered v2 applies on top: 10 then 20.
      assert.deepEqual(await consume(f, 'e1', 'o1', 1, 10), { applied: true, version: 1 });
      assert.deepEqual(await consume(f, 'e2', 'o1', 2, 20), { applied: true, version: 2 });
      assert.deepEqual(f.calls, ['e1', 'e2']);
      assert.deepEqual(await f.markers(), ['e1', 'e2']);
      assert.deepEqual(await f.state('o1'), { version: 2, baselineVersion: null, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 30, deleted: false });
    });
  });

  it('reports a gap against the current version when the event is further ahead', async () => {
    await withFixture(async (f) => {
      await consume(f, 'e1', 'o1', 1, 10);
      await assert.rejects(consume(f, 'e3', 'o1', 3, 30), (err: unknown) => {
        assert.ok(err instanceof VersionGapError);
        assert.equal(err.eventVersion, 3);
        assert.equal(err.currentVersion, 1);
        return true;
      });
      assert.deepEqual(f.calls, ['e1']);
      assert.deepEqual(await f.markers(), ['e1']);
      assert.deepEqual(await f.state('o1'), { version: 1, baselineVersion: null, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 10, deleted: false });
    });
  });

  it('throws StaleVersionError when another event claims a version already applied', async () => {
    await withFixture(async (f) => {
      await consume(f, 'e1', 'o1', 1, 10);
      await consume(f, 'e2', 'o1', 2, 20);

      await assert.rejects(consume(f, 'e2-other', 'o1', 2, 999), (err: unknown) => {
        assert.ok(err instanceof StaleVersionError, `expected StaleVersionError, got ${String(err)}`);
        assert.equal(err.code, 'CONVERGE_STALE_VERSION');
        assert.equal(err.eventVersion, 2);
        assert.equal(err.currentVersion, 2);
        return true;
      });
      // An older version claimed again is stale too (v1 takes the `start` path first).
      await assert.rejects(consume(f, 'e1-other', 'o1', 1, 999), (err: unknown) => {
        assert.ok(err instanceof StaleVersionError);
        assert.equal(err.eventVersion, 1);
        assert.equal(err.currentVersion, 2);
        return true;
      });

      assert.deepEqual(f.calls, ['e1', 'e2']);
      assert.deepEqual(await f.markers(), ['e1', 'e2']);
      assert.deepEqual(await f.state('o1'), { version: 2, baselineVersion: null, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 30, deleted: false });
    });
  });

  it('lets exactly one of two concurrent transactions apply the same v1', async () => {
    await withFixture(async (f) => {
      const first = await f.pool.connect();
      const second = await f.pool.connect();
      try {
        await first.query('BEGIN');
        await second.query('BEGIN');

        const firstResult = await applyIncrement(first, f.target('o1', 1), f.addAmount(first, 'o1', 10, 'first'));
        assert.deepEqual(firstResult, { applied: true, version: 1 });

        const secondPid = await backendPid(second);
        const racing = settle(applyIncrement(second, f.target('o1', 1), f.addAmount(second, 'o1', 10, 'second')));
        await waitFor(() => isBlockedOnLock(f.pool, secondPid), 'the second transaction to block on the first one');

        await first.query('COMMIT');
        const outcome = await racing;
        await second.query('ROLLBACK');

        assert.equal(outcome.ok, false, 'the second transaction must not apply v1 again');
        if (!outcome.ok) {
          assert.ok(
            outcome.error instanceof StaleVersionError,
            `expected StaleVersionError, got ${String(outcome.error)}`,
          );
          assert.equal(outcome.error.eventVersion, 1);
          assert.equal(outcome.error.currentVersion, 1);
        }
        assert.deepEqual(f.calls, ['first'], 'apply ran exactly once in total');
        assert.deepEqual(await f.state('o1'), { version: 1, baselineVersion: null, deleted: false });
        assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 10, deleted: false });
      } finally {
        first.release();
        second.release();
      }
    });
  });

  it('lets exactly one of two concurrent transactions advance the same v2', async () => {
    await withFixture(async (f) => {
      await consume(f, 'e1', 'o1', 1, 10);
      const first = await f.pool.connect();
      const second = await f.pool.connect();
      try {
        await first.query('BEGIN');
        await second.query('BEGIN');

        assert.deepEqual(await applyIncrement(first, f.target('o1', 2), f.addAmount(first, 'o1', 20, 'first')), {
          applied: true,
          version: 2,
        });

        const secondPid = await backendPid(second);
        const racing = settle(applyIncrement(second, f.target('o1', 2), f.addAmount(second, 'o1', 20, 'second')));
        await waitFor(() => isBlockedOnLock(f.pool, secondPid), 'the second transaction to block on the version row');

        await first.query('COMMIT');
        const outcome = await racing;
        await second.query('ROLLBACK');

        assert.equal(outcome.ok, false);
        if (!outcome.ok) {
          assert.ok(
            outcome.error instanceof StaleVersionError,
            `expected StaleVersionError, got ${String(outcome.error)}`,
          );
          assert.equal(outcome.error.currentVersion, 2);
        }
        assert.deepEqual(f.calls, ['e1', 'first']);
        assert.deepEqual(await f.state('o1'), { version: 2, baselineVersion: null, deleted: false });
        assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 30, deleted: false });
      } finally {
        first.release();
        second.release();
      }
    });
  });
  // Versions are bigint in PostgreSQL and validated up to Number.MAX_SAFE_INTEGER in envelopes, but
  // the `advance` statement (src/projection/sql.ts) lets PostgreSQL infer `$4` as int4 from `$4 - 1`.
  it('advances versions beyond the int4 range', async () => {
    await withFixture(async (f) => {
      const big = 2_147_483_647;
      const snap = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', big), f.replace(client, 'o1', 1, false, 'snap')),
      );
      assert.deepEqual(snap, { applied: true, version: big });
      const next = await withTransaction(f.pool, (client) =>
        applyIncrement(client, f.target('o1', big + 1), f.addAmount(client, 'o1', 1, 'next')),
      );
      assert.deepEqual(next, { applied: true, version: big + 1 });
      assert.deepEqual(await f.state('o1'), { version: big + 1, baselineVersion: big, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 2, deleted: false });
    });
  });
});

describe('applySnapshot', () => {
  it('applies only when newer and records the snapshot version as the baseline', async () => {
    await withFixture(async (f) => {
      const applied = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', 2), f.replace(client, 'o1', 50, false, 'snap2')),
      );
      assert.deepEqual(applied, { applied: true, version: 2 });
      assert.deepEqual(f.calls, ['snap2']);
      assert.deepEqual(await f.state('o1'), { version: 2, baselineVersion: 2, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 50, deleted: false });

      const equal = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', 2), f.replace(client, 'o1', 77, false, 'snap2-again')),
      );
      assert.deepEqual(equal, { applied: false, reason: 'not-newer', version: 2 });
      const older = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', 1), f.replace(client, 'o1', 11, false, 'snap1')),
      );
      assert.deepEqual(older, { applied: false, reason: 'not-newer', version: 2 });
      assert.deepEqual(f.calls, ['snap2'], 'apply is not called for a snapshot that is not newer');
      assert.deepEqual(await f.state('o1'), { version: 2, baselineVersion: 2, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 50, deleted: false });

      const newer = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', 5), f.replace(client, 'o1', 70, false, 'snap5')),
      );
      assert.deepEqual(newer, { applied: true, version: 5 });
      assert.deepEqual(f.calls, ['snap2', 'snap5']);
      assert.deepEqual(await f.state('o1'), { version: 5, baselineVersion: 5, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 70, deleted: false });
    });
  });

  it('writes a versioned tombstone that an older snapshot cannot resurrect, and a newer one can', async () => {
    await withFixture(async (f) => {
      await consume(f, 'e1', 'o1', 1, 10);
      await consume(f, 'e2', 'o1', 2, 20);

      const tombstone = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', 4, true), f.replace(client, 'o1', 0, true, 'tomb4')),
      );
      assert.deepEqual(tombstone, { applied: true, version: 4 });
      assert.deepEqual(await f.state('o1'), { version: 4, baselineVersion: 4, deleted: true });
      assert.deepEqual(await f.rawState('o1'), { version: '4', baseline_version: '4', deleted: true });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 0, deleted: true });

      const olderAlive = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', 3, false), f.replace(client, 'o1', 33, false, 'snap3')),
      );
      assert.deepEqual(olderAlive, { applied: false, reason: 'not-newer', version: 4 });
      const equalAlive = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', 4, false), f.replace(client, 'o1', 44, false, 'snap4')),
      );
      assert.deepEqual(equalAlive, { applied: false, reason: 'not-newer', version: 4 });
      assert.deepEqual(f.calls, ['e1', 'e2', 'tomb4']);
      assert.deepEqual(await f.state('o1'), { version: 4, baselineVersion: 4, deleted: true }, 'still a tombstone');
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 0, deleted: true });

      const newerAlive = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', 6, false), f.replace(client, 'o1', 60, false, 'snap6')),
      );
      assert.deepEqual(newerAlive, { applied: true, version: 6 });
      assert.deepEqual(f.calls, ['e1', 'e2', 'tomb4', 'snap6']);
      assert.deepEqual(await f.state('o1'), { version: 6, baselineVersion: 6, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 60, deleted: false });
    });
  });

  it('a tombstone snapshot of a never-seen aggregate records the deletion with its version', async () => {
    await withFixture(async (f) => {
      const result = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('gone', 7, true), f.replace(client, 'gone', 0, true, 'tomb7')),
      );
      assert.deepEqual(result, { applied: true, version: 7 });
      assert.deepEqual(await f.state('gone'), { version: 7, baselineVersion: 7, deleted: true });
      assert.deepEqual(await f.row('gone'), { id: 'gone', amount: 0, deleted: true });
      // Late incremental history the deletion already contains is acknowledged without effect.
      const late = await withTransaction(f.pool, (client) =>
        applyIncrement(client, f.target('gone', 1), f.addAmount(client, 'gone', 5, 'late1')),
      );
      assert.deepEqual(late, { applied: false, reason: 'covered-by-baseline', version: 7 });
      assert.deepEqual(f.calls, ['tomb7']);
      assert.deepEqual(await f.state('gone'), { version: 7, baselineVersion: 7, deleted: true });
    });
  });

  it('after a snapshot at v3, incremental v2 and v3 are covered by the baseline and v4 applies on top', async () => {
    await withFixture(async (f) => {
      await consume(f, 'e1', 'o1', 1, 10);
      await consume(f, 'e2', 'o1', 2, 20);
      const snap = await withTransaction(f.pool, (client) =>
        applySnapshot(client, f.snapshot('o1', 3), f.replace(client, 'o1', 100, false, 'snap3')),
      );
      assert.deepEqual(snap, { applied: true, version: 3 });
      assert.deepEqual(await f.state('o1'), { version: 3, baselineVersion: 3, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 100, deleted: false });

      assert.deepEqual(await consume(f, 'e2-late', 'o1', 2, 20), {
        applied: false,
        reason: 'covered-by-baseline',
        version: 3,
      });
      assert.deepEqual(await consume(f, 'e3-late', 'o1', 3, 30), {
        applied: false,
        reason: 'covered-by-baseline',
        version: 3,
      });
      assert.deepEqual(f.calls, ['e1', 'e2', 'snap3'], 'no apply call for covered events');
      // Covered events are acknowledged: their inbox stand-in rows commit.
      assert.deepEqual(await f.markers(), ['e1', 'e2', 'e2-late', 'e3-late']);
      assert.deepEqual(await f.state('o1'), { version: 3, baselineVersion: 3, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 100, deleted: false });

      assert.deepEqual(await consume(f, 'e4', 'o1', 4, 5), { applied: true, version: 4 });
      assert.deepEqual(f.calls, ['e1', 'e2', 'snap3', 'e4']);
      assert.deepEqual(await f.state('o1'), { version: 4, baselineVersion: 3, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 105, deleted: false });

      // Above the baseline but already applied: stale, not covered.
      await assert.rejects(consume(f, 'e4-other', 'o1', 4, 5), StaleVersionError);
      // Beyond current + 1 with a baseline: still a gap.
      await assert.rejects(
        consume(f, 'e6', 'o1', 6, 5),
        (err: unknown) => err instanceof VersionGapError && err.currentVersion === 4,
      );
      assert.deepEqual(f.calls, ['e1', 'e2', 'snap3', 'e4']);
      assert.deepEqual(await f.state('o1'), { version: 4, baselineVersion: 3, deleted: false });
      assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 105, deleted: false });
    });
  });
});

describe('readProjectionState', () => {
  it('returns null for an unknown aggregate and the state otherwise', async () => {
    await withFixture(async (f) => {
      assert.equal(await f.state('nobody'), null);
      await consume(f, 'e1', 'o1', 1, 10);
      assert.equal(await f.state('nobody'), null);
      assert.equal(
        await readProjectionState(f.pool, {
          schema: f.schema,
          projection: 'other_projection',
          aggregateType: AGGREGATE_TYPE,
          aggregateId: 'o1',
        }),
        null,
      );
      assert.equal(
        await readProjectionState(f.pool, {
          schema: f.schema,
          projection: PROJECTION,
          aggregateType: 'customer',
          aggregateId: 'o1',
        }),
        null,
      );
      assert.deepEqual(await f.state('o1'), { version: 1, baselineVersion: null, deleted: false });
    });
  });

  it('validates the schema name before touching the database', async () => {
    await withFixture(async (f) => {
      for (const schema of ['Bad-Schema', 'x"; DROP TABLE t; --', '1abc', '']) {
        await assert.rejects(
          readProjectionState(f.pool, {
            schema,
            projection: PROJECTION,
            aggregateType: AGGREGATE_TYPE,
            aggregateId: 'o1',
          }),
          (err: unknown) => err instanceof InvalidIdentifierError && err.code === 'CONVERGE_INVALID_IDENTIFIER',
        );
        await assert.rejects(
          withTransaction(f.pool, (client) =>
            applyIncrement(client, { ...f.target('o1', 1), schema }, f.addAmount(client, 'o1', 1, 'bad-inc')),
          ),
          InvalidIdentifierError,
        );
        await assert.rejects(
          withTransaction(f.pool, (client) =>
            applySnapshot(client, { ...f.snapshot('o1', 1), schema }, f.replace(client, 'o1', 1, false, 'bad-snap')),
          ),
          InvalidIdentifierError,
        );
      }
      assert.deepEqual(f.calls, []);
      assert.equal(await f.state('o1'), null);
      assert.equal(await f.row('o1'), undefined);
    });
  });
});

describe('applyIncrements', () => {
  const ev = (aggregateId: string, version: number) => ({
    aggregateType: AGGREGATE_TYPE,
    aggregateId,
    aggregateVersion: version,
    amount: version * 10,
  });

  it('applies a batch across aggregates in version order with one apply call, starting new aggregates', async () => {
    await withFixture(async (f) => {
      await withTransaction(f.pool, (tx) => applyIncrement(tx, f.target('a', 1), f.addAmount(tx, 'a', 10, 'a1')));
      const calls: number[][] = [];
      const result = await withTransaction(f.pool, (tx) =>
        applyIncrements(
          tx,
          { projection: PROJECTION, events: [ev('a', 3), ev('b', 1), ev('a', 2)], schema: f.schema },
          async (events) => {
            calls.push(events.map((e) => e.aggregateVersion));
            let rows = 0;
            for (const e of events)
              rows += (await f.addAmount(tx, e.aggregateId, e.amount, `${e.aggregateId}${e.aggregateVersion}`)())
                .rowCount!;
            return rows;
          },
        ),
      );
      assert.equal(calls.length, 1);
      assert.deepEqual(
        result.applied.map((e) => `${e.aggregateId}${e.aggregateVersion}`),
        ['a2', 'a3', 'b1'],
      );
      assert.deepEqual(await f.state('a'), { version: 3, baselineVersion: null, deleted: false });
      assert.deepEqual(await f.state('b'), { version: 1, baselineVersion: null, deleted: false });
      assert.equal((await f.row('a'))?.amount, 60);
    });
  });

  it('throws VersionGapError when one event of the batch has a gap; apply is never called and the rollback undoes the healthy event too', async () => {
    await withFixture(async (f) => {
      let applied = false;
      const failure = await settle(
        withTransaction(f.pool, (tx) =>
          applyIncrements(
            tx,
            { projection: PROJECTION, events: [ev('a', 1), ev('b', 2)], schema: f.schema },
            async () => {
              applied = true;
              return 'unchanged';
            },
          ),
        ),
      );
      assert.ok(!failure.ok && failure.error instanceof VersionGapError);
      assert.equal((failure as { error: VersionGapError }).error.key.aggregateId, 'b');
      assert.equal(applied, false);
      assert.equal(await f.state('a'), null, 'the healthy event of the batch was not written either');
    });
  });

  it('mixes the one-statement path and the full plan in one batch: in-order runs move at once, a baseline-covered run is planned', async () => {
    await withFixture(async (f) => {
      await withTransaction(f.pool, (tx) => applyIncrement(tx, f.target('a', 1), f.addAmount(tx, 'a', 10, 'a1')));
      await withTransaction(f.pool, (tx) => applySnapshot(tx, f.snapshot('b', 3), f.replace(tx, 'b', 30, false, 's3')));
      const calls: string[][] = [];
      const result = await withTransaction(f.pool, (tx) =>
        applyIncrements(
          tx,
          {
            projection: PROJECTION,
            events: [ev('b', 4), ev('a', 3), ev('c', 1), ev('b', 2), ev('a', 2), ev('b', 3)],
            schema: f.schema,
          },
          async (events) => {
            calls.push(events.map((e) => `${e.aggregateId}${e.aggregateVersion}`));
            return 'unchanged';
          },
        ),
      );
      assert.equal(calls.length, 1);
      assert.deepEqual([...calls[0]!].sort(), ['a2', 'a3', 'b4', 'c1']);
      assert.ok(calls[0]!.indexOf('a2') < calls[0]!.indexOf('a3'), 'version order within an aggregate');
      assert.deepEqual(
        result.covered.map((e) => `${e.aggregateId}${e.aggregateVersion}`),
        ['b2', 'b3'],
      );
      assert.deepEqual(await f.state('a'), { version: 3, baselineVersion: null, deleted: false });
      assert.deepEqual(await f.state('b'), { version: 4, baselineVersion: 3, deleted: false });
      assert.deepEqual(await f.state('c'), { version: 1, baselineVersion: null, deleted: false });
    });
  });

  it('takes the full plan for a batch with a hole inside one aggregate and still rejects the gap', async () => {
    await withFixture(async (f) => {
      const failure = await settle(
        withTransaction(f.pool, (tx) =>
          applyIncrements(
            tx,
            { projection: PROJECTION, events: [ev('a', 1), ev('a', 3)], schema: f.schema },
            async () => 'unchanged',
          ),
        ),
      );
      assert.ok(!failure.ok && failure.error instanceof VersionGapError);
      assert.equal((failure as { error: VersionGapError }).error.eventVersion, 3);
      assert.equal(await f.state('a'), null);
    });
  });

  // The one-statement path finds each state row by key first and moves it by its row address:
  // a row another transaction moved meanwhile must not move again (PostgreSQL re-checks the
  // newest row version, whose address and version differ), and the full plan judges it instead.
  it('lets exactly one of two concurrent batch transactions advance the same run', async () => {
    await withFixture(async (f) => {
      await consume(f, 'e1', 'o1', 1, 10);
      const first = await f.pool.connect();
      const second = await f.pool.connect();
      const batch = (tx: typeof first, label: string) =>
        applyIncrements(
          tx,
          { projection: PROJECTION, events: [ev('o1', 2), ev('o1', 3)], schema: f.schema },
          async (events) => {
            let rows = 0;
            for (const e of events)
              rows += (await f.addAmount(tx, e.aggregateId, e.amount, `${label}${e.aggregateVersion}`)()).rowCount!;
            return rows;
          },
        );
      try {
        await first.query('BEGIN');
        await second.query('BEGIN');
        assert.deepEqual(
          (await batch(first, 'first')).applied.map((e) => e.aggregateVersion),
          [2, 3],
        );
        const secondPid = await backendPid(second);
        const racing = settle(batch(second, 'second'));
        await waitFor(() => isBlockedOnLock(f.pool, secondPid), 'the second transaction to block on the version row');
        await first.query('COMMIT');
        const outcome = await racing;
        await second.query('ROLLBACK');
        assert.ok(
          !outcome.ok && outcome.error instanceof StaleVersionError,
          `expected StaleVersionError, got ${outcome.ok ? 'success' : String(outcome.error)}`,
        );
        assert.deepEqual(await f.state('o1'), { version: 3, baselineVersion: null, deleted: false });
        assert.deepEqual(await f.row('o1'), { id: 'o1', amount: 60, deleted: false });
      } finally {
        first.release();
        second.release();
      }
    });
  });

  it('throws StaleVersionError for a version already present, and skips events covered by a baseline', async () => {
    await withFixture(async (f) => {
      await withTransaction(f.pool, (tx) => applySnapshot(tx, f.snapshot('a', 3), f.replace(tx, 'a', 30, false, 's3')));
      await withTransaction(f.pool, (tx) => applyIncrement(tx, f.target('c', 1), f.addAmount(tx, 'c', 10, 'c1')));
      const stale = await settle(
        withTransaction(f.pool, (tx) =>
          applyIncrements(
            tx,
            { projection: PROJECTION, events: [ev('c', 1)], schema: f.schema },
            async () => 'unchanged',
          ),
        ),
      );
      assert.ok(!stale.ok && stale.error instanceof StaleVersionError);
      const result = await withTransaction(f.pool, (tx) =>
        applyIncrements(
          tx,
          { projection: PROJECTION, events: [ev('a', 2), ev('a', 3), ev('a', 4)], schema: f.schema },
          async (events) => {
            let rows = 0;
            for (const e of events)
              rows += (await f.addAmount(tx, e.aggregateId, 1, `a${e.aggregateVersion}`)()).rowCount!;
            return rows;
          },
        ),
      );
      assert.deepEqual(
        result.covered.map((e) => e.aggregateVersion),
        [2, 3],
      );
      assert.deepEqual(
        result.applied.map((e) => e.aggregateVersion),
        [4],
      );
      assert.deepEqual(await f.state('a'), { version: 4, baselineVersion: 3, deleted: false });
    });
  });
});
