/**
 * reconcile() against the real PostgreSQL: a source table with versions, a read model with
 * converge's projection_state, every class of difference, paging, resuming, rate limits and
 * repairs that never regress what a consumer wrote meanwhile.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import { applyIncrement, reconcile, withTransaction, type PagedReader, type ReconcileRow } from '../../src/index.js';
import { CommitRolledBackError } from '../../src/errors.js';
import { describe, it, createTestSchema, type TestDatabase } from '../support/rig.js';

const PROJECTION = 'order_view';
const TYPE = 'order';

interface Fixture {
  db: TestDatabase;
  q: string;
  source: PagedReader;
  target: PagedReader;
  apply: (tx: pg.PoolClient, row: ReconcileRow) => Promise<void>;
  /** Source row, and (unless `projected` is false) the same in the projection. */
  seed(id: string, version: number, amount: number, projected?: boolean): Promise<void>;
  readModel(id: string): Promise<{ amount: number; version: number } | null>;
}

async function withFixture(fn: (f: Fixture) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvr');
  const q = `"${db.schema}"`;
  await db.pool.query(
    `CREATE TABLE ${q}.orders (id text PRIMARY KEY, version bigint NOT NULL, amount integer NOT NULL, deleted boolean NOT NULL DEFAULT false)`,
  );
  await db.pool.query(`CREATE TABLE ${q}.order_view (id text PRIMARY KEY, amount integer NOT NULL)`);
  const f: Fixture = {
    db,
    q,
    source: async (after, limit) => {
      const { rows } = await db.pool.query<{ id: string; version: string; amount: number; deleted: boolean }>(
        `SELECT id, version, amount, deleted FROM ${q}.orders WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
        [after ?? '', limit],
      );
      return rows.map((r) => ({
        id: r.id,
        version: Number(r.version),
        deleted: r.deleted,
        fields: { amount: r.amount },
      }));
    },
    target: async (after, limit) => {
      const { rows } = await db.pool.query<{ id: string; version: string; amount: number | null; deleted: boolean }>(
        `SELECT s.aggregate_id AS id, s.version, s.deleted, v.amount FROM ${q}.projection_state s LEFT JOIN ${q}.order_view v ON v.id = s.aggregate_id
          WHERE s.projection = '${PROJECTION}' AND s.aggregate_id COLLATE "C" > $1 ORDER BY s.aggregate_id COLLATE "C" LIMIT $2`,
        [after ?? '', limit],
      );
      return rows.map((r) => ({
        id: r.id,
        version: Number(r.version),
        deleted: r.deleted,
        ...(r.amount === null ? {} : { fields: { amount: r.amount } }),
      }));
    },
    apply: async (tx, row) => {
      if (row.deleted) await tx.query(`DELETE FROM ${q}.order_view WHERE id = $1`, [row.id]);
      else
        await tx.query(
          `INSERT INTO ${q}.order_view (id, amount) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET amount = EXCLUDED.amount`,
          [row.id, row.fields!.amount],
        );
    },
    async seed(id, version, amount, projected = true) {
      await db.pool.query(`INSERT INTO ${q}.orders (id, version, amount) VALUES ($1, $2, $3)`, [id, version, amount]);
      if (!projected) return;
      await db.pool.query(
        `INSERT INTO ${q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ($1, $2, $3, $4)`,
        [PROJECTION, TYPE, id, version],
      );
      await db.pool.query(`INSERT INTO ${q}.order_view (id, amount) VALUES ($1, $2)`, [id, amount]);
    },
    async readModel(id) {
      const { rows } = await db.pool.query<{ amount: number; version: string }>(
        `SELECT v.amount, s.version FROM ${q}.order_view v JOIN ${q}.projection_state s ON s.aggregate_id = v.id AND s.projection = '${PROJECTION}' WHERE v.id = $1`,
        [id],
      );
      return rows[0] ? { amount: rows[0].amount, version: Number(rows[0].version) } : null;
    },
  };
  try {
    await fn(f);
  } finally {
    await db.close();
  }
}

/** One aggregate in every class, plus agreeing ones around them, across several pages. */
async function corrupt(f: Fixture): Promise<void> {
  for (let i = 0; i < 25; i++) await f.seed(`ok-${String(i).padStart(2, '0')}`, 3, 30);
  await f.seed('missing', 2, 20, false);
  await f.seed('stale', 5, 50);
  await f.db.pool.query(`UPDATE ${f.q}.projection_state SET version = 4 WHERE aggregate_id = 'stale'`);
  await f.seed('ahead', 5, 50);
  await f.db.pool.query(`UPDATE ${f.q}.projection_state SET version = 6 WHERE aggregate_id = 'ahead'`);
  await f.seed('mismatch', 3, 30);
  await f.db.pool.query(`UPDATE ${f.q}.order_view SET amount = 999 WHERE id = 'mismatch'`);
  await f.db.pool.query(
    `INSERT INTO ${f.q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ($1, $2, 'extra', 1)`,
    [PROJECTION, TYPE],
  );
  await f.db.pool.query(`INSERT INTO ${f.q}.order_view (id, amount) VALUES ('extra', 10)`);
  await f.seed('gone', 7, 70);
  await f.db.pool.query(`UPDATE ${f.q}.orders SET version = 8, deleted = true WHERE id = 'gone'`);
}

describe('reconcile', () => {
  it('classifies every difference across pages, with counts and sample ids, and agrees with itself on a clean projection', async () => {
    await withFixture(async (f) => {
      await corrupt(f);
      const progress: number[] = [];
      const report = await reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source: f.source,
        target: f.target,
        pageSize: 4,
        onProgress: (p) => progress.push(p.scanned),
      });
      assert.deepEqual(report.differences, { missing: 1, stale: 2, ahead: 1, mismatch: 1, extra: 1 });
      assert.deepEqual(report.samples, {
        missing: ['missing'],
        stale: ['gone', 'stale'],
        ahead: ['ahead'],
        mismatch: ['mismatch'],
        extra: ['extra'],
      });
      assert.equal(report.scanned, 31);
      assert.equal(report.complete, true);
      assert.equal(report.cursor, 'stale');
      assert.ok(
        progress.length > 3 && progress.every((n, i) => i === 0 || n >= progress[i - 1]!),
        'progress grows page by page',
      );

      const withoutFields = await reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source: f.source,
      });
      assert.deepEqual(
        withoutFields.differences,
        { missing: 1, stale: 2, ahead: 1, mismatch: 0, extra: 1 },
        'the default target (projection_state) compares versions only',
      );
    });
  });

  it('resumes after a cursor and stops early on a signal', async () => {
    await withFixture(async (f) => {
      await corrupt(f);
      const controller = new AbortController();
      const first = await reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source: f.source,
        target: f.target,
        pageSize: 4,
        onProgress: (p) => p.scanned >= 8 && controller.abort(),
        signal: controller.signal,
      });
      assert.equal(first.complete, false);
      const rest = await reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source: f.source,
        target: f.target,
        pageSize: 4,
        after: first.cursor,
      });
      assert.equal(first.scanned + rest.scanned, 31, 'no id compared twice or skipped');
      const total = Object.fromEntries(
        Object.keys(rest.differences).map((k) => [
          k,
          first.differences[k as 'missing'] + rest.differences[k as 'missing'],
        ]),
      );
      assert.deepEqual(total, { missing: 1, stale: 2, ahead: 1, mismatch: 1, extra: 1 });
    });
  });

  it('keeps to maxRowsPerSecond', async () => {
    await withFixture(async (f) => {
      for (let i = 0; i < 20; i++) await f.seed(`r${i}`, 1, 1);
      const report = await reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source: f.source,
        pageSize: 5,
        maxRowsPerSecond: 40,
      });
      assert.equal(report.scanned, 20);
      assert.ok(report.durationMs >= 450, `20 rows at 40/s took ${report.durationMs} ms`);
    });
  });

  it('repairs missing, stale (a deletion included) and mismatch; reports ahead and extra without touching them; a second run finds only those', async () => {
    await withFixture(async (f) => {
      await corrupt(f);
      const report = await reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source: f.source,
        target: f.target,
        pageSize: 4,
        repair: { apply: f.apply },
      });
      assert.equal(report.repaired, 4);
      assert.deepEqual(await f.readModel('missing'), { amount: 20, version: 2 });
      assert.deepEqual(await f.readModel('stale'), { amount: 50, version: 5 });
      assert.deepEqual(await f.readModel('mismatch'), { amount: 30, version: 3 });
      assert.equal(await f.readModel('gone'), null, 'the explicit deletion removed the row');
      const tomb = await f.db.pool.query(
        `SELECT version, deleted, baseline_version FROM ${f.q}.projection_state WHERE aggregate_id = 'gone'`,
      );
      assert.deepEqual(tomb.rows[0], { version: '8', deleted: true, baseline_version: '8' });
      assert.deepEqual(await f.readModel('ahead'), { amount: 50, version: 6 }, 'never regressed');
      assert.deepEqual(await f.readModel('extra'), { amount: 10, version: 1 }, 'never deleted from absence');
      const again = await reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source: f.source,
        target: f.target,
        repair: { apply: f.apply },
      });
      assert.deepEqual(again.differences, { missing: 0, stale: 0, ahead: 1, mismatch: 0, extra: 1 });
      assert.equal(again.repaired, 0);
    });
  });

  it('a repair whose apply catches an SQL error rejects with CommitRolledBackError instead of counting it repaired', async () => {
    await withFixture(async (f) => {
      await f.seed('missing', 2, 20, false);
      const run = reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source: f.source,
        target: f.target,
        repair: {
          apply: async (tx, row) => {
            await f.apply(tx, row);
            try {
              await tx.query('SELECT 1 / 0');
            } catch {
              // swallowed on purpose
            }
          },
        },
      });
      await assert.rejects(run, (err: unknown) => err instanceof CommitRolledBackError);
      assert.equal(await f.readModel('missing'), null, 'neither the row nor its version was written');
      const state = await f.db.pool.query(`SELECT 1 FROM ${f.q}.projection_state`);
      assert.equal(state.rowCount, 0);
    });
  });

  it('removes an extra row only when a point read of the source confirms it is gone', async () => {
    await withFixture(async (f) => {
      await corrupt(f);
      // 'late' is in the projection, and reaches the source only after the source page was read.
      await f.db.pool.query(
        `INSERT INTO ${f.q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ($1, $2, 'late', 1)`,
        [PROJECTION, TYPE],
      );
      await f.db.pool.query(`INSERT INTO ${f.q}.order_view (id, amount) VALUES ('late', 1)`);
      let sourceAfterPages = false;
      const source: PagedReader = async (after, limit) => {
        const page = (await f.source(after, limit)).filter((row) => row.id !== 'late');
        if (page.length < limit && !sourceAfterPages) {
          sourceAfterPages = true;
          await f.db.pool.query(`INSERT INTO ${f.q}.orders (id, version, amount) VALUES ('late', 2, 2)`);
        }
        return page;
      };
      const lookup = async (id: string) => (await f.source(null, 1_000)).find((row) => row.id === id) ?? null;
      const remove = async (tx: pg.PoolClient, id: string) =>
        void (await tx.query(`DELETE FROM ${f.q}.order_view WHERE id = $1`, [id]));
      const report = await reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source,
        target: f.target,
        repair: { apply: f.apply, lookup, remove },
      });
      assert.equal(report.differences.extra, 2, "'extra' and 'late' looked extra in the pages");
      assert.equal(await f.readModel('extra'), null, 'confirmed gone at the source: removed');
      assert.equal(
        await f.db.pool
          .query(`SELECT 1 FROM ${f.q}.projection_state WHERE aggregate_id = 'extra'`)
          .then((r) => r.rows.length),
        0,
      );
      assert.deepEqual(
        await f.readModel('late'),
        { amount: 2, version: 2 },
        'found by the point read: repaired as stale instead of removed',
      );
    });
  });

  it('never regresses a projection a consumer moved after the page was read: it re-reads and skips', async () => {
    await withFixture(async (f) => {
      await f.seed('o1', 4, 40);
      await f.db.pool.query(`UPDATE ${f.q}.projection_state SET version = 3 WHERE aggregate_id = 'o1'`);
      let consumerMoved = false;
      // The page says version 3; before the repair runs, a live consumer applies 4 and then 5.
      const target: PagedReader = async (after, limit) => {
        const page = await f.target(after, limit);
        if (!consumerMoved) {
          consumerMoved = true;
          for (const version of [4, 5]) {
            await withTransaction(f.db.pool, (tx) =>
              applyIncrement(
                tx,
                {
                  projection: PROJECTION,
                  event: { aggregateType: TYPE, aggregateId: 'o1', aggregateVersion: version },
                  schema: f.db.schema,
                },
                async () => tx.query(`UPDATE ${f.q}.order_view SET amount = amount + 5 WHERE id = 'o1'`),
              ),
            );
          }
        }
        return page;
      };
      const report = await reconcile(f.db.pool, {
        schema: f.db.schema,
        projection: PROJECTION,
        aggregateType: TYPE,
        source: f.source,
        target,
        repair: { apply: f.apply },
      });
      assert.equal(report.differences.stale, 1, 'the page it read was stale');
      assert.deepEqual([report.repaired, report.skipped], [0, 1]);
      assert.deepEqual(await f.readModel('o1'), { amount: 50, version: 5 }, "the consumer's newer write stands");
    });
  });
});
