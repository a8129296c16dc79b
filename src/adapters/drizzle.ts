/**
 * `converge-events/drizzle`: converge on a Drizzle (node-postgres) transaction and Drizzle on
 * converge's. `executorFromDrizzle(tx)` runs converge's statements through `tx.execute` (Drizzle
 * keeps the transaction's client private), passing each `$n` as a Drizzle parameter in place;
 * `drizzleFromExecutor(tx)` gives a Drizzle database on `tx`'s node-postgres client whose
 * `transaction()` is refused, since a BEGIN/COMMIT there would end converge's transaction.
 */
import { sql, type SQL, type TablesRelationalConfig } from 'drizzle-orm';
import { drizzle, type NodePgDatabase, type NodePgQueryResultHKT } from 'drizzle-orm/node-postgres';
import type { DrizzleConfig } from 'drizzle-orm/utils';
import type { PgTransaction } from 'drizzle-orm/pg-core';
import type pg from 'pg';
import type { Executor, QueryResultLike } from '../db/executor.js';
import { AdapterError } from '../runtime/errors.js';
import { nodePostgresClient } from './node-postgres.js';
import { splitParameters, valuesInOrder } from './placeholders.js';

const ADAPTER = 'drizzle';

/** The Executor for a Drizzle transaction (`db.transaction(async (tx) => ...)`, node-postgres driver). */
export function executorFromDrizzle<S extends Record<string, unknown>, T extends TablesRelationalConfig>(
  tx: PgTransaction<NodePgQueryResultHKT, S, T>,
): Executor {
  if (typeof (tx as Partial<PgTransaction<NodePgQueryResultHKT, S, T>>).rollback !== 'function')
    throw new AdapterError(ADAPTER, 'pass the transaction (tx), not the database');
  return {
    async query<R>(text: string, values: unknown[] = []): Promise<QueryResultLike<R>> {
      const result = (await tx.execute(drizzleSql(text, values))) as pg.QueryResult;
      return { rows: result.rows as R[], rowCount: result.rowCount };
    },
  };
}

/** `$n` SQL as Drizzle SQL: the text between parameters verbatim, each parameter a bound value. */
function drizzleSql(text: string, values: readonly unknown[]): SQL {
  const split = splitParameters(text);
  const bound = valuesInOrder(split, values, ADAPTER);
  const chunks: SQL[] = [];
  split.parts.forEach((part, index) => {
    chunks.push(sql.raw(part));
    if (index < bound.length) chunks.push(sql`${sql.param(bound[index])}`);
  });
  return sql.join(chunks);
}

/** A Drizzle database on the consumer's (or any converge) transaction: its queries run on `tx`. */
export function drizzleFromExecutor<S extends Record<string, unknown> = Record<string, never>>(
  tx: Executor,
  config: DrizzleConfig<S> = {},
): NodePgDatabase<S> {
  const client = nodePostgresClient(tx, ADAPTER) as pg.PoolClient;
  const db = drizzle<S, pg.PoolClient>({ ...config, client });
  return Object.assign(db, {
    transaction: () =>
      Promise.reject(
        new AdapterError(ADAPTER, 'the transaction belongs to converge: it commits or rolls back, not this view'),
      ),
  });
}
