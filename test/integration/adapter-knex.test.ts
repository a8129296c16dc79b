/** converge-events/knex against the adapter contract (test/support/adapter-contract.ts). */
import knexFactory, { type Knex } from 'knex';
import { executorFromKnex, knexFromExecutor } from '../../src/adapters/knex.js';
import { adapterContract } from '../support/adapter-contract.js';

adapterContract('knex', async ({ connectionString, schema }) => {
  const knex = knexFactory({ client: 'pg', connection: connectionString, pool: { min: 0, max: 2 } });
  return {
    transaction: (work) =>
      knex.transaction(async (trx) => {
        const insertOrder = async (id: string, version: number) => {
          await trx.withSchema(schema).insert({ id, version }).into('orders');
        };
        await work({ insertOrder, executor: executorFromKnex(trx) });
      }),
    async writeThroughView(tx, row) {
      const view = knexFromExecutor(tx, knex);
      // A nested transaction on the view is a savepoint inside the consumer's transaction.
      // Without RETURNING: typed number[], in fact node-postgres's result with its rowCount.
      return view.transaction((nested) =>
        nested
          .withSchema(schema)
          .insert({ event_id: row.eventId, aggregate_id: row.aggregateId, amount: row.amount })
          .into('order_rows'),
      );
    },
    async failThroughView(tx) {
      await knexFromExecutor(tx, knex).raw('SELECT 1 / 0');
    },
    // knex sends COMMIT and resolves whatever its command tag says.
    commitAnsweredByRollback: 'resolves',
    executorOutsideTransaction: () => executorFromKnex(knex as unknown as Knex.Transaction),
    close: () => knex.destroy(),
  };
});
