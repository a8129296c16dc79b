/**
 * The read model the projection and repair tests share: a migrated schema with an
 * `order_projection` table (id, amount, deleted), `apply` callbacks that record their label
 * when they actually run, and readers for the row and its projection state.
 */
import type pg from 'pg';
import { readProjectionState, type Executor, type ProjectionState, type QueryResultLike } from '../../src/index.js';
import { createTestSchema, type TestDatabase } from './rig.js';

export const PROJECTION = 'order_search';
export const AGGREGATE_TYPE = 'order';

export interface ReadModel {
  db: TestDatabase;
  pool: pg.Pool;
  schema: string;
  /** Fully qualified read model table. */
  readModel: string;
  /** Labels of every `apply` callback that actually ran, in order. */
  calls: string[];
  /** An incremental `apply`: adds `amount` to the read model row on the given transaction. */
  addAmount: (
    tx: Executor,
    aggregateId: string,
    amount: number,
    label: string,
  ) => () => Promise<QueryResultLike<unknown>>;
  /** A snapshot `apply`: replaces the read model row on the given transaction. */
  replace: (
    tx: Executor,
    aggregateId: string,
    amount: number,
    deleted: boolean,
    label: string,
  ) => () => Promise<QueryResultLike<unknown>>;
  state(aggregateId: string): Promise<ProjectionState | null>;
  row(aggregateId: string): Promise<{ id: string; amount: number; deleted: boolean } | undefined>;
}

/** Runs `work` on a fresh read model; the schema goes with the test (or is kept if it failed, see the rig). */
export async function withReadModel(prefix: string, work: (model: ReadModel) => Promise<void>): Promise<void> {
  const db = await createTestSchema(prefix);
  try {
    const schema = db.schema;
    const readModel = `"${schema}".order_projection`;
    await db.pool.query(
      `CREATE TABLE ${readModel} (id text PRIMARY KEY, amount int NOT NULL, deleted boolean NOT NULL DEFAULT false)`,
    );
    const calls: string[] = [];
    await work({
      db,
      pool: db.pool,
      schema,
      readModel,
      calls,
      addAmount: (tx, aggregateId, amount, label) => async () => {
        calls.push(label);
        return tx.query(
          `INSERT INTO ${readModel} (id, amount, deleted) VALUES ($1, $2, false)
           ON CONFLICT (id) DO UPDATE SET amount = ${readModel}.amount + EXCLUDED.amount`,
          [aggregateId, amount],
        );
      },
      replace: (tx, aggregateId, amount, deleted, label) => async () => {
        calls.push(label);
        return tx.query(
          `INSERT INTO ${readModel} (id, amount, deleted) VALUES ($1, $2, $3)
           ON CONFLICT (id) DO UPDATE SET amount = EXCLUDED.amount, deleted = EXCLUDED.deleted`,
          [aggregateId, amount, deleted],
        );
      },
      state: (aggregateId) =>
        readProjectionState(db.pool, { schema, projection: PROJECTION, aggregateType: AGGREGATE_TYPE, aggregateId }),
      row: async (aggregateId) => {
        const { rows } = await db.pool.query<{ id: string; amount: number; deleted: boolean }>(
          `SELECT id, amount, deleted FROM ${readModel} WHERE id = $1`,
          [aggregateId],
        );
        return rows[0];
      },
    });
  } finally {
    await db.close();
  }
}
