/**
 * What the knex and MikroORM adapters share. MikroORM 6 ships its own copy of knex, whose types
 * differ from the `knex` package's, so this works on the few members both have.
 */
import type pg from 'pg';
import type { Executor, QueryResultLike } from '../db/executor.js';
import { AdapterError } from '../runtime/errors.js';
import { nodePostgresClient } from './node-postgres.js';
import { toQuestionMarks } from './placeholders.js';

/** The members of a knex transaction the executor uses. */
export interface KnexTransactionLike {
  readonly isTransaction?: boolean;
  raw(sql: string, bindings: readonly never[]): PromiseLike<unknown>;
}

/** The members of a knex instance the view uses. */
export interface KnexLike {
  readonly client: unknown;
  readonly userParams: Record<string, unknown>;
  withUserParams(params: Record<string, unknown>): unknown;
}

export function executorOnKnexTransaction(trx: KnexTransactionLike, adapter: string): Executor {
  if (trx.isTransaction !== true) throw new AdapterError(adapter, 'pass the transaction, not the instance');
  return {
    async query<R>(text: string, values: unknown[] = []): Promise<QueryResultLike<R>> {
      const { sql, bindings } = toQuestionMarks(text, values, adapter);
      // On PostgreSQL, raw() resolves to node-postgres' own result.
      const result = (await trx.raw(sql, bindings as never[])) as pg.QueryResult;
      return { rows: result.rows as R[], rowCount: result.rowCount };
    },
  };
}

/**
 * A copy of `knex` (same dialect and settings, made with `withUserParams`) whose connection is
 * always `tx`'s node-postgres client. It counts as already inside a transaction, so knex makes
 * `transaction()` on it a savepoint and never commits converge's work.
 */
export function knexViewOn<K extends KnexLike>(tx: Executor, knex: K, adapter: string): K {
  const client = nodePostgresClient(tx, adapter);
  const view = knex.withUserParams({ ...knex.userParams }) as K;
  Object.assign(view.client as object, {
    transacting: true,
    acquireConnection: () => Promise.resolve(client),
    releaseConnection: () => Promise.resolve(),
  });
  return view;
}
