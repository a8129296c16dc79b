/**
 * `converge-events/knex`: converge on a knex transaction and knex on converge's.
 * `executorFromKnex(trx)` runs converge's statements through `trx.raw` (knex keeps the
 * transaction's connection to itself), translating `$n` to knex's `?` with the tokenizer in
 * placeholders.ts; `knexFromExecutor(tx, knex)` gives a knex whose every query runs on `tx`,
 * where `transaction()` opens a savepoint instead of a transaction. Type-only imports: this
 * module never loads knex itself.
 */
import type { Knex } from 'knex';
import type { Executor } from '../db/executor.js';
import { executorOnKnexTransaction, knexViewOn } from './knex-core.js';

/** The Executor for a knex transaction (`knex.transaction(async (trx) => ...)`). */
export function executorFromKnex(trx: Knex.Transaction): Executor {
  return executorOnKnexTransaction(trx, 'knex');
}

/**
 * A knex on the consumer's (or any converge) transaction: every query runs on `tx`, and
 * `transaction()` makes a savepoint. Do not `destroy()` it: it shares `knex`'s pool.
 */
export function knexFromExecutor(tx: Executor, knex: Knex): Knex {
  return knexViewOn(tx, knex, 'knex');
}
