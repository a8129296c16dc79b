import type pg from 'pg';
import type { Executor } from '../db/executor.js';
import { AdapterError } from '../runtime/errors.js';

/**
 * The node-postgres client behind an executor, for the ORM views that hand the connection
 * itself to the ORM (drizzle, knex, TypeORM, MikroORM). The consumer's `tx` is one. Anything
 * else (an adapter around another ORM's transaction) throws rather than letting the ORM open a
 * connection of its own, which would write outside the consumer's transaction.
 */
export function nodePostgresClient(tx: Executor, adapter: string): pg.ClientBase {
  const candidate = tx as Partial<pg.ClientBase>;
  if (typeof candidate.escapeIdentifier === 'function' && typeof candidate.on === 'function')
    return tx as pg.ClientBase;
  throw new AdapterError(adapter, "the view needs the node-postgres client of the transaction (the consumer's tx)");
}
