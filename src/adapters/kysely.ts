/**
 * `converge-events/kysely`: converge on a Kysely transaction and Kysely on converge's.
 * `executorFromKysely(trx)` runs converge's statements on the Kysely transaction's own
 * connection; `kyselyFromExecutor(tx)` gives a Kysely whose every query runs on `tx` (the
 * consumer's transaction) and which may not open or end a transaction of its own.
 */
import {
  CompiledQuery,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Driver,
  type KyselyConfig,
  type QueryResult,
} from 'kysely';
import type { Executor, QueryResultLike } from '../db/executor.js';
import { AdapterError } from '../runtime/errors.js';

const ADAPTER = 'kysely';

/** What the executor needs of a Kysely transaction; any `Transaction<DB>` has it. */
export type KyselyTransactionLike = Pick<Kysely<object>, 'isTransaction' | 'executeQuery'>;

/** The Executor for a Kysely transaction (`db.transaction().execute(async (trx) => ...)`). */
export function executorFromKysely(trx: KyselyTransactionLike): Executor {
  if (!trx.isTransaction) throw new AdapterError(ADAPTER, 'pass the transaction (trx), not the Kysely instance');
  return {
    async query<R>(text: string, values: unknown[] = []): Promise<QueryResultLike<R>> {
      const result = await trx.executeQuery<R>(CompiledQuery.raw(text, values));
      const affected = result.numAffectedRows;
      return { rows: result.rows, rowCount: affected === undefined ? result.rows.length : Number(affected) };
    },
  };
}

/** A Kysely on the consumer's (or any converge) transaction: queries run on `tx`, transactions are refused. */
export function kyselyFromExecutor<DB>(tx: Executor, config: Omit<KyselyConfig, 'dialect'> = {}): Kysely<DB> {
  const driver = new ExecutorDriver(tx);
  return new Kysely<DB>({
    ...config,
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => driver,
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
}

const AFFECTING = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE']);

/** One connection, already inside a transaction the owner (the consumer) commits. */
class ExecutorDriver implements Driver {
  readonly #connection: DatabaseConnection;

  constructor(tx: Executor) {
    this.#connection = {
      async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
        const result = await tx.query<R>(compiled.sql, [...compiled.parameters]);
        // node-postgres says which command ran; Kysely counts affected rows only for writes.
        const command = (result as { command?: unknown }).command;
        const counts = typeof command === 'string' ? AFFECTING.has(command) : true;
        return counts && result.rowCount !== null
          ? { rows: result.rows, numAffectedRows: BigInt(result.rowCount) }
          : { rows: result.rows };
      },
      streamQuery(): AsyncIterableIterator<QueryResult<never>> {
        throw new AdapterError(ADAPTER, 'streaming is not supported on a converge transaction');
      },
    };
  }

  async init(): Promise<void> {}
  async acquireConnection(): Promise<DatabaseConnection> {
    return this.#connection;
  }
  async releaseConnection(): Promise<void> {}
  async destroy(): Promise<void> {}
  beginTransaction(): Promise<void> {
    return refuse();
  }
  commitTransaction(): Promise<void> {
    return refuse();
  }
  rollbackTransaction(): Promise<void> {
    return refuse();
  }
}

function refuse(): Promise<never> {
  return Promise.reject(
    new AdapterError(ADAPTER, 'the transaction belongs to converge: it commits or rolls back, not this view'),
  );
}
