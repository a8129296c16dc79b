/**
 * Consistent source reads for repair (sourceSnapshot, snapshotPages) against the real PostgreSQL.
 * The source is an order header (version, total) and its lines, read in two statements; a writer
 * changes a line and the header in one transaction and commits between the reader's two
 * statements (a hook, so the interleaving is forced, not timed). Read committed, that tears a
 * row: the header of one version with the lines of the next. In one snapshot it never does, and
 * every state a repair writes is one the source had at some commit.
 */
import assert from 'node:assert/strict';
import type pg from 'pg';
import {
  reconcile,
  repairGaps,
  silentLogger,
  snapshotPages,
  sourceSnapshot,
  withTransaction,
  type PagedReader,
  type ReconcileRow,
} from '../../src/index.js';
import { ConfigError } from '../../src/errors.js';
import { describe, it, createTestSchema, type TestDatabase } from '../support/rig.js';

const PROJECTION = 'order_view';
const TYPE = 'order';

interface Source {
  db: TestDatabase;
  q: string;
  /** One committed change of `id`: line 1 and the header's total move by `delta`, the version by one. */
  change(id: string, delta: number): Promise<void>;
  /** Header then lines, in two statements on `client`, with `between` run in the middle. */
  readPage(client: Queryable, after: string | null, limit: number, between: Hook): Promise<ReconcileRow[]>;
  readOne(client: Queryable, id: string, between: Hook): Promise<OrderState | null>;
  /** Every repaired row that is not a state the source had at a commit (or whose total is not its lines' sum). */
  tornRepairs(): Promise<RepairRow[]>;
  repairs(): Promise<number>;
  apply(tx: pg.PoolClient, id: string, state: OrderState): Promise<void>;
}

interface RepairRow {
  id: string;
  version: string;
  total: number;
  lines_sum: number;
}

interface OrderState {
  version: number;
  total: number;
  linesSum: number;
}

type Hook = (ids: string[]) => Promise<void>;
/** A snapshot's client, or the pool itself for the naive reader (each statement on whichever connection). */
type Queryable = pg.ClientBase | pg.Pool;

async function withSource(fn: (s: Source) => Promise<void>): Promise<void> {
  const db = await createTestSchema('cvs');
  const q = `"${db.schema}"`;
  await db.pool.query(
    `CREATE TABLE ${q}.orders (id text PRIMARY KEY, version bigint NOT NULL, total integer NOT NULL)`,
  );
  await db.pool.query(
    `CREATE TABLE ${q}.order_lines (order_id text NOT NULL, line_no integer NOT NULL, amount integer NOT NULL, PRIMARY KEY (order_id, line_no))`,
  );
  // Every state the source had at a commit, written by the same transactions.
  await db.pool.query(
    `CREATE TABLE ${q}.source_history (id text NOT NULL, version bigint NOT NULL, total integer NOT NULL)`,
  );
  await db.pool.query(
    `CREATE TABLE ${q}.order_view (id text PRIMARY KEY, version bigint NOT NULL, total integer NOT NULL, lines_sum integer NOT NULL)`,
  );
  await db.pool.query(
    `CREATE TABLE ${q}.repair_log (id text NOT NULL, version bigint NOT NULL, total integer NOT NULL, lines_sum integer NOT NULL)`,
  );
  const source: Source = {
    db,
    q,
    change: (id, delta) =>
      withTransaction(db.pool, async (tx) => {
        await tx.query(`UPDATE ${q}.order_lines SET amount = amount + $2 WHERE order_id = $1 AND line_no = 1`, [
          id,
          delta,
        ]);
        await tx.query(
          `WITH moved AS (UPDATE ${q}.orders SET total = total + $2, version = version + 1 WHERE id = $1 RETURNING id, version, total)
           INSERT INTO ${q}.source_history SELECT id, version, total FROM moved`,
          [id, delta],
        );
      }),
    async readPage(client, after, limit, between) {
      const headers = await client.query<{ id: string; version: string; total: number }>(
        `SELECT id, version, total FROM ${q}.orders WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
        [after ?? '', limit],
      );
      await between(headers.rows.map((r) => r.id));
      const sums = await linesOf(
        client,
        headers.rows.map((r) => r.id),
      );
      return headers.rows.map((r) => ({
        id: r.id,
        version: Number(r.version),
        fields: { total: r.total, linesSum: sums.get(r.id) ?? 0 },
      }));
    },
    async readOne(client, id, between) {
      const header = await client.query<{ version: string; total: number }>(
        `SELECT version, total FROM ${q}.orders WHERE id = $1`,
        [id],
      );
      await between([id]);
      const row = header.rows[0];
      if (!row) return null;
      const sums = await linesOf(client, [id]);
      return { version: Number(row.version), total: row.total, linesSum: sums.get(id) ?? 0 };
    },
    async tornRepairs() {
      const { rows } = await db.pool.query<RepairRow>(
        `SELECT r.* FROM ${q}.repair_log r
          WHERE r.total <> r.lines_sum
             OR NOT EXISTS (SELECT 1 FROM ${q}.source_history h WHERE h.id = r.id AND h.version = r.version AND h.total = r.total)`,
      );
      return rows;
    },
    async repairs() {
      const { rows } = await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${q}.repair_log`);
      return Number(rows[0]!.n);
    },
    async apply(tx, id, state) {
      await tx.query(
        `INSERT INTO ${q}.order_view (id, version, total, lines_sum) VALUES ($1, $2, $3, $4)
         ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, total = EXCLUDED.total, lines_sum = EXCLUDED.lines_sum`,
        [id, state.version, state.total, state.linesSum],
      );
      await tx.query(`INSERT INTO ${q}.repair_log VALUES ($1, $2, $3, $4)`, [
        id,
        state.version,
        state.total,
        state.linesSum,
      ]);
    },
  };
  async function linesOf(client: Queryable, ids: string[]): Promise<Map<string, number>> {
    const { rows } = await client.query<{ order_id: string; sum: string }>(
      `SELECT order_id, sum(amount) AS sum FROM ${q}.order_lines WHERE order_id = ANY($1) GROUP BY order_id`,
      [ids],
    );
    return new Map(rows.map((r) => [r.order_id, Number(r.sum)]));
  }
  try {
    await fn(source);
  } finally {
    await db.close();
  }
}

/** `count` orders at version 1, each with two lines summing to its total. */
async function seed(s: Source, count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, (_, i) => `o${String(i).padStart(2, '0')}`);
  for (const id of ids) {
    await s.db.pool.query(`INSERT INTO ${s.q}.orders VALUES ($1, 1, 30)`, [id]);
    await s.db.pool.query(`INSERT INTO ${s.q}.order_lines VALUES ($1, 1, 10), ($1, 2, 20)`, [id]);
    await s.db.pool.query(`INSERT INTO ${s.q}.source_history VALUES ($1, 1, 30)`, [id]);
  }
  return ids;
}

/** Between the two statements, the writer commits a change to every order of the page. */
const writerCommitsBetween =
  (s: Source): Hook =>
  async (ids) => {
    for (const id of ids) await s.change(id, 5);
  };

const toState = (row: ReconcileRow): OrderState => ({
  version: row.version,
  total: row.fields!.total as number,
  linesSum: row.fields!.linesSum as number,
});

function reconcileWith(s: Source, source: PagedReader) {
  return reconcile(s.db.pool, {
    schema: s.db.schema,
    projection: PROJECTION,
    aggregateType: TYPE,
    source,
    pageSize: 3,
    repair: { apply: (tx, row) => s.apply(tx, row.id, toState(row)) },
  });
}

describe('consistent source reads for repair', () => {
  it('a read-committed reader split over two statements makes reconcile repair a torn state (the failure the snapshot prevents)', async () => {
    await withSource(async (s) => {
      await seed(s, 4);
      const naive: PagedReader = async (after, limit) => {
        const client = await s.db.pool.connect();
        try {
          return await s.readPage(client, after, limit, writerCommitsBetween(s));
        } finally {
          client.release();
        }
      };
      const report = await reconcileWith(s, naive);
      assert.equal(report.repaired, 4);
      const torn = await s.tornRepairs();
      assert.equal(torn.length, 4, 'every repaired row mixes the header of version 1 with the lines of version 2');
    });
  });

  it('snapshotPages: the same interleaving, and a writer committing throughout, never make reconcile repair a torn state', async () => {
    await withSource(async (s) => {
      const ids = await seed(s, 8);
      // A second writer changes random orders without pause while the passes run.
      let writing = true;
      let background = 0;
      const writer = (async () => {
        while (writing) {
          await s.change(ids[background % ids.length]!, 1 + (background % 7));
          background++;
        }
      })();
      try {
        const source = snapshotPages(s.db.pool, (client, after, limit) =>
          s.readPage(client, after, limit, writerCommitsBetween(s)),
        );
        for (let pass = 0; pass < 4; pass++) {
          const report = await reconcileWith(s, source);
          assert.ok(report.complete);
          assert.equal(report.differences.ahead, 0, 'a repair never writes a version the source did not have yet');
        }
      } finally {
        writing = false;
        await writer;
      }
      assert.ok(background > 0, 'the background writer committed while reconcile ran');
      assert.ok((await s.repairs()) >= 8 * 3, 'each pass found every order stale and repaired it');
      assert.deepEqual(await s.tornRepairs(), [], 'every repaired row is a state the source had at a commit');
    });
  });

  it('repairGaps with loadSnapshot in sourceSnapshot writes one committed state; the naive read does not', async () => {
    await withSource(async (s) => {
      await seed(s, 2);
      // Each order waits for version 2 (a parked event of version 3), as a consumer that lost an event would.
      for (const id of ['o00', 'o01'])
        await s.db.pool.query(
          `INSERT INTO ${s.q}.parked (consumer, event_id, fingerprint, projection, aggregate_type, aggregate_id, aggregate_version, waiting_for, properties, body)
           VALUES ('c', $1, 'f', $2, $3, $1, 9, 2, '{}', '')`,
          [id, PROJECTION, TYPE],
        );
      const consumer = {
        pool: s.db.pool,
        options: { schema: s.db.schema, consumer: 'c', logger: silentLogger },
        drainAggregate: () => Promise.resolve(0),
      };
      const between = writerCommitsBetween(s);
      const report = await repairGaps(consumer, {
        loadSnapshot: (gap) =>
          gap.aggregateId === 'o00'
            ? sourceSnapshot(s.db.pool, (client) => s.readOne(client, gap.aggregateId, between))
            : // The naive read: two statements, each seeing what committed before it.
              s.readOne(s.db.pool, gap.aggregateId, between),
        apply: (tx, snapshot, gap) => s.apply(tx, gap.aggregateId, snapshot),
      });
      assert.equal(report.repaired, 2);
      const torn = await s.tornRepairs();
      assert.deepEqual(
        torn.map((r) => r.id),
        ['o01'],
        'only the naive read repaired a torn state',
      );
    });
  });

  it('sourceSnapshot: read only, one snapshot for every statement, shareable with another connection by its exported id', async () => {
    await withSource(async (s) => {
      await seed(s, 1);
      const seen = await sourceSnapshot(
        s.db.pool,
        async (client, { snapshotId }) => {
          assert.match(snapshotId ?? '', /^[0-9A-F]+-[0-9A-F]+-\d+$/);
          const before = await s.readOne(client, 'o00', () => s.change('o00', 5));
          // Another connection joins the same snapshot: it sees version 1 too, not the commit since.
          const joined = await sourceSnapshot(s.db.pool, (other) => s.readOne(other, 'o00', async () => {}), {
            snapshotId: snapshotId!,
          });
          const write = await client.query(`UPDATE ${s.q}.orders SET total = 0`).catch((err: unknown) => err);
          return { before, joined, write };
        },
        { exportSnapshot: true },
      );
      assert.deepEqual(seen.before, { version: 1, total: 30, linesSum: 30 });
      assert.deepEqual(seen.joined, seen.before);
      assert.equal((seen.write as { code?: string }).code, '25006', 'a write inside the snapshot is refused');
      assert.deepEqual(
        await sourceSnapshot(s.db.pool, (client) => s.readOne(client, 'o00', async () => {})),
        { version: 2, total: 35, linesSum: 35 },
        'the next snapshot sees the commit',
      );
      await assert.rejects(
        sourceSnapshot(s.db.pool, async () => 1, { snapshotId: "x'; DROP TABLE orders; --" }),
        (err: unknown) => err instanceof ConfigError && err.field === 'snapshotId',
      );
    });
  });
});
