/** converge-events/drizzle (node-postgres driver) against the adapter contract (test/support/adapter-contract.ts). */
import { sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { integer, pgSchema, text } from 'drizzle-orm/pg-core';
import pg from 'pg';
import { drizzleFromExecutor, executorFromDrizzle } from '../../src/adapters/drizzle.js';
import { adapterContract } from '../support/adapter-contract.js';

adapterContract('drizzle', async ({ connectionString, schema }) => {
  const tables = pgSchema(schema);
  const orders = tables.table('orders', { id: text('id').primaryKey(), version: integer('version').notNull() });
  const orderRows = tables.table('order_rows', {
    eventId: text('event_id').primaryKey(),
    aggregateId: text('aggregate_id').notNull(),
    amount: integer('amount').notNull(),
  });
  const pool = new pg.Pool({ connectionString, max: 2 });
  const db = drizzle({ client: pool });
  return {
    transaction: (work) =>
      db.transaction(async (tx) => {
        const insertOrder = async (id: string, version: number) => {
          await tx.insert(orders).values({ id, version });
        };
        await work({ insertOrder, executor: executorFromDrizzle(tx) });
      }),
    // node-postgres's QueryResult, rowCount and all.
    writeThroughView: (tx, row) => drizzleFromExecutor(tx).insert(orderRows).values(row),
    failThroughView: (tx) => drizzleFromExecutor(tx).execute(sql`SELECT 1 / 0`),
    // Drizzle's node-postgres session sends COMMIT and does not look at its command tag.
    commitAnsweredByRollback: 'resolves',
    executorOutsideTransaction: () => executorFromDrizzle(db as unknown as Parameters<typeof executorFromDrizzle>[0]),
    close: () => pool.end(),
  };
});
