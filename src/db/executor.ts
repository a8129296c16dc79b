export interface QueryResultLike<R> {
  rows: R[];
  rowCount: number | null;
}

/**
 * Anything that can run a parameterised statement: a `pg.Client` or `pg.PoolClient` inside
 * the caller's transaction, or an adapter around an ORM transaction. converge never opens
 * a connection or a transaction through it.
 */
export interface Executor {
  query<R = unknown>(text: string, values?: unknown[]): Promise<QueryResultLike<R>>;
}
