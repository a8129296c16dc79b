/**
 * The article's warning: a projection restored from an old backup while the inbox keeps its
 * newest rows. Replaying cannot fix it (the inbox calls every old event a duplicate); a
 * rebuild from the versioned source does, and later events apply on top.
 */
import assert from 'node:assert/strict';
import { applyIncrement, rebuildProjection, silentLogger } from '../../src/index.js';
import { CommitRolledBackError } from '../../src/errors.js';
import { DeliveryProcessor } from '../../src/internal/index.js';
import { describe, it, createTestSchema, orderEvent, deliveryOf } from '../support/rig.js';

const PROJECTION = 'order_view';

function delivery(eventId: string, version: number, delta: number) {
  return deliveryOf(orderEvent(eventId, 'o1', version, { payload: { delta } }));
}

describe('rebuildProjection', () => {
  it('restores a projection that an old backup rolled back while the inbox kept its newest rows, and later events apply on top', async () => {
    const db = await createTestSchema('cvb');
    const q = `"${db.schema}"`;
    await db.pool.query(
      `CREATE TABLE ${q}.orders (id text PRIMARY KEY, version bigint NOT NULL, amount integer NOT NULL)`,
    );
    await db.pool.query(`CREATE TABLE ${q}.order_view (id text PRIMARY KEY, amount integer NOT NULL)`);
    const processor = new DeliveryProcessor({
      consumer: 'view',
      pool: db.pool,
      schema: db.schema,
      logger: silentLogger,
      handlers: {
        AmountAdded: async (event, { tx }) => {
          await applyIncrement(tx, { projection: PROJECTION, event, schema: db.schema }, async () => {
            return tx.query(
              `INSERT INTO ${q}.order_view (id, amount) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET amount = order_view.amount + $2`,
              [event.aggregateId, (event.payload as { delta: number }).delta],
            );
          });
        },
      },
    });
    const amount = async () =>
      (await db.pool.query<{ amount: number }>(`SELECT amount FROM ${q}.order_view WHERE id = 'o1'`)).rows[0]?.amount;
    try {
      for (const [id, version, delta] of [
        ['E1', 1, 10],
        ['E2', 2, 20],
        ['E3', 3, 30],
      ] as const)
        assert.equal((await processor.process(delivery(id, version, delta))).action, 'ack');
      await db.pool.query(`INSERT INTO ${q}.orders VALUES ('o1', 3, 60), ('o2', 1, 5)`);
      assert.equal(await amount(), 60);

      // The "old backup": read model and versions back at E1, inbox untouched.
      await db.pool.query(`UPDATE ${q}.order_view SET amount = 10`);
      await db.pool.query(`UPDATE ${q}.projection_state SET version = 1`);
      const replayed = await processor.process(delivery('E2', 2, 20));
      assert.deepEqual(replayed, { action: 'ack', outcome: 'duplicate', eventId: 'E2' }, 'replaying cannot repair it');
      assert.equal(await amount(), 10);

      const report = await rebuildProjection(db.pool, {
        schema: db.schema,
        projection: PROJECTION,
        aggregateType: 'order',
        source: async (after, limit) =>
          (
            await db.pool.query<{ id: string; version: string; amount: number }>(
              `SELECT id, version, amount FROM ${q}.orders WHERE id COLLATE "C" > $1 ORDER BY id COLLATE "C" LIMIT $2`,
              [after ?? '', limit],
            )
          ).rows.map((r) => ({ id: r.id, version: Number(r.version), fields: { amount: r.amount } })),
        reset: async (tx) => void (await tx.query(`TRUNCATE ${q}.order_view`)),
        apply: async (tx, row) =>
          void (await tx.query(`INSERT INTO ${q}.order_view (id, amount) VALUES ($1, $2)`, [
            row.id,
            row.fields!.amount,
          ])),
      });
      assert.equal(report.repaired, 2);
      assert.equal(await amount(), 60);
      const state = await db.pool.query(
        `SELECT aggregate_id, version, baseline_version FROM ${q}.projection_state ORDER BY aggregate_id`,
      );
      assert.deepEqual(state.rows, [
        { aggregate_id: 'o1', version: '3', baseline_version: '3' },
        { aggregate_id: 'o2', version: '1', baseline_version: '1' },
      ]);

      assert.equal(((await processor.process(delivery('E3', 3, 30))) as { outcome: string }).outcome, 'duplicate');
      assert.equal(((await processor.process(delivery('E4', 4, 40))) as { outcome: string }).outcome, 'applied');
      assert.equal(await amount(), 100, 'E4 on top of the rebuilt state, nothing applied twice');
    } finally {
      await processor.close();
      await db.close();
    }
  });

  it('a reset that catches an SQL error rejects with CommitRolledBackError: nothing is forgotten, nothing rebuilt', async () => {
    const db = await createTestSchema('cvb');
    const q = `"${db.schema}"`;
    try {
      await db.pool.query(`CREATE TABLE ${q}.orders (id text PRIMARY KEY, version bigint NOT NULL)`);
      await db.pool.query(`CREATE TABLE ${q}.order_view (id text PRIMARY KEY, amount integer NOT NULL)`);
      await db.pool.query(`INSERT INTO ${q}.orders VALUES ('o1', 3)`);
      await db.pool.query(`INSERT INTO ${q}.order_view VALUES ('o1', 10)`);
      await db.pool.query(
        `INSERT INTO ${q}.projection_state (projection, aggregate_type, aggregate_id, version) VALUES ($1, 'order', 'o1', 1)`,
        [PROJECTION],
      );
      const applied: string[] = [];
      const run = rebuildProjection(db.pool, {
        schema: db.schema,
        projection: PROJECTION,
        aggregateType: 'order',
        source: async (after) => (after === null ? [{ id: 'o1', version: 3 }] : []),
        reset: async (tx) => {
          await tx.query(`TRUNCATE ${q}.order_view`);
          try {
            await tx.query('SELECT 1 / 0');
          } catch {
            // swallowed on purpose
          }
        },
        apply: async (_tx, row) => void applied.push(row.id),
      });
      await assert.rejects(run, (err: unknown) => err instanceof CommitRolledBackError);
      assert.deepEqual(applied, [], 'no row was rebuilt on a reset that did not happen');
      const view = await db.pool.query(`SELECT id, amount FROM ${q}.order_view`);
      assert.deepEqual(view.rows, [{ id: 'o1', amount: 10 }], 'the TRUNCATE rolled back');
      const state = await db.pool.query(`SELECT version FROM ${q}.projection_state`);
      assert.deepEqual(state.rows, [{ version: '1' }], 'the versions were not forgotten');
    } finally {
      await db.close();
    }
  });
});
