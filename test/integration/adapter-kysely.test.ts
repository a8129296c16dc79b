/** converge-events/kysely against the adapter contract (test/support/adapter-contract.ts). */
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { executorFromKysely, kyselyFromExecutor } from '../../src/adapters/kysely.js';
import { adapterContract } from '../support/adapter-contract.js';

interface Tables {
  orders: { id: string; version: number };
  order_rows: { event_id: string; aggregate_id: string; amount: number };
}

adapterContract('kysely', async ({ connectionString, schema }) => {
  const db = new Kysely<Tables>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString, max: 2 }) }) });
  return {
    transaction: (work) =>
      db.transaction().execute(async (trx) => {
        const insertOrder = async (id: string, version: number) => {
          await trx.withSchema(schema).insertInto('orders').values({ id, version }).execute();
        };
        await work({ insertOrder, executor: executorFromKysely(trx) });
      }),
    writeThroughView: (tx, row) =>
      kyselyFromExecutor<Tables>(tx)
        .withSchema(schema)
        .insertInto('order_rows')
        .values({ event_id: row.eventId, aggregate_id: row.aggregateId, amount: row.amount })
        .executeTakeFirstOrThrow(), // an InsertResult: numInsertedOrUpdatedRows, a bigint
    failThroughView: (tx) => sql`SELECT 1 / 0`.execute(kyselyFromExecutor(tx)),
    // Kysely's PostgreSQL driver checks the COMMIT's command tag (AbortedTransactionError).
    commitAnsweredByRollback: 'rejects',
    executorOutsideTransaction: () => executorFromKysely(db),
    close: () => db.destroy(),
  };
});
