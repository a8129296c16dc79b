/**
 * `converge-events/mikro-orm`: converge on a MikroORM transaction and MikroORM on converge's
 * (MikroORM 6 with `@mikro-orm/postgresql`, whose transactions are knex transactions).
 * `executorFromMikroOrm(em)` runs converge's statements on the transaction `em` is in;
 * `mikroOrmFromExecutor(tx, em)` forks `em` onto `tx`, where `flush()` and `transactional()`
 * make savepoints inside converge's transaction. Type-only imports.
 */
import type { EntityManager, Knex } from '@mikro-orm/postgresql';
import type { Executor } from '../db/executor.js';
import { AdapterError } from '../runtime/errors.js';
import { executorOnKnexTransaction, knexViewOn } from './knex-core.js';

const ADAPTER = 'mikro-orm';

/** The Executor for the transaction a MikroORM EntityManager is in (`em.transactional(async (em) => ...)`). */
export function executorFromMikroOrm(em: EntityManager): Executor {
  const trx = em.getTransactionContext<Knex.Transaction>();
  if (trx === undefined) throw new AdapterError(ADAPTER, 'the EntityManager is not inside a transaction');
  return executorOnKnexTransaction(trx, ADAPTER);
}

/** A fork of `em` whose queries and flushes run on `tx` (the consumer's transaction), never on a connection of its own. */
export function mikroOrmFromExecutor<E extends EntityManager>(tx: Executor, em: E): E {
  const fork = em.fork();
  fork.setTransactionContext(knexViewOn(tx, em.getKnex(), ADAPTER));
  return fork;
}
