/**
 * `converge-events/typeorm`: converge on a TypeORM transaction and TypeORM on converge's.
 * `executorFromTypeOrm(manager)` runs converge's statements on the node-postgres client of the
 * manager's query runner (no placeholder translation: TypeORM's postgres driver is node-postgres);
 * `typeOrmFromExecutor(tx, dataSource)` gives an EntityManager whose query runner is `tx`'s
 * client and counts as inside a transaction, so `save()` does not open one. Type-only imports.
 */
import type pg from 'pg';
import type { DataSource, EntityManager } from 'typeorm';
import type { Executor, QueryResultLike } from '../db/executor.js';
import { AdapterError } from '../runtime/errors.js';
import { nodePostgresClient } from './node-postgres.js';

const ADAPTER = 'typeorm';

/** The Executor for a TypeORM transaction (`dataSource.transaction(async (manager) => ...)`). */
export function executorFromTypeOrm(manager: EntityManager): Executor {
  const runner = manager.queryRunner;
  if (runner === undefined || !runner.isTransactionActive)
    throw new AdapterError(ADAPTER, 'the EntityManager is not inside a transaction');
  return {
    async query<R>(text: string, values: unknown[] = []): Promise<QueryResultLike<R>> {
      // PostgresQueryRunner.connect() hands back the connection its transaction runs on.
      const client = (await runner.connect()) as pg.ClientBase;
      const result = await client.query(text, values);
      return { rows: result.rows as R[], rowCount: result.rowCount };
    },
  };
}

/** An EntityManager on the consumer's (or any converge) transaction: its queries run on `tx`, transactions are refused. */
export function typeOrmFromExecutor(tx: Executor, dataSource: DataSource): EntityManager {
  const client = nodePostgresClient(tx, ADAPTER);
  const runner = dataSource.createQueryRunner();
  const refuse = () =>
    Promise.reject(
      new AdapterError(ADAPTER, 'the transaction belongs to converge: it commits or rolls back, not this view'),
    );
  Object.assign(runner, {
    isTransactionActive: true,
    connect: () => Promise.resolve(client),
    release: () => Promise.resolve(),
    startTransaction: refuse,
    commitTransaction: refuse,
    rollbackTransaction: refuse,
  });
  return runner.manager;
}
