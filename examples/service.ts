/**
 * A plain `pg` service: each command changes an order and records its event in the outbox in the
 * same transaction, so the event exists exactly when the change does.
 *
 *   tsx service.ts place <orderId> <amount>   creates the order (version 1, event OrderPlaced)
 *   tsx service.ts add <orderId> <delta>      adds to its amount (next version, event AmountAdded)
 *
 * Environment: DATABASE_URL, EXAMPLE_SCHEMA (default `shop`: converge's tables and this example's).
 */
import pg from 'pg';
import { createConverge, updateExactlyOne, withTransaction, type Converge } from 'converge-events';
import { orderEvents, type OrderEvents } from './events.js';

const connectionString = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = process.env.EXAMPLE_SCHEMA ?? 'shop';
const orders = `${pg.escapeIdentifier(schema)}.orders`;

type Shop = Converge<OrderEvents>;

async function placeOrder(converge: Shop, orderId: string, amount: number): Promise<number> {
  return withTransaction(converge.pool, async (client) => {
    await client.query(`INSERT INTO ${orders} (id, amount, version) VALUES ($1, $2, 1)`, [orderId, amount]);
    await converge.append(client, {
      aggregateType: 'order',
      aggregateId: orderId,
      aggregateVersion: 1,
      eventType: 'OrderPlaced',
      payload: { amount },
    });
    return 1;
  });
}

async function addAmount(converge: Shop, orderId: string, delta: number): Promise<number> {
  return withTransaction(converge.pool, async (client) => {
    const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${orders} WHERE id = $1`, [orderId]);
    if (!rows[0]) throw new Error(`no order ${orderId}`);
    const version = rows[0].version + 1;
    // Conditional on the version just read: a concurrent change makes this throw ConcurrencyConflictError,
    // which rolls back the business row and the event together.
    await updateExactlyOne(
      client,
      `UPDATE ${orders} SET amount = amount + $1, version = $2 WHERE id = $3 AND version = $4`,
      [delta, version, orderId, version - 1],
    );
    await converge.append(client, {
      aggregateType: 'order',
      aggregateId: orderId,
      aggregateVersion: version,
      eventType: 'AmountAdded',
      payload: { delta },
    });
    return version;
  });
}

const [command, orderId, value] = process.argv.slice(2);
const amount = Number(value);
if ((command !== 'place' && command !== 'add') || !orderId || !Number.isInteger(amount)) {
  console.error('usage: service.ts place|add <orderId> <integer>');
  process.exit(2);
}

// A producer needs no broker: only what relays or consumes does.
const converge = createConverge({ connectionString, schema, events: orderEvents });
try {
  await converge.migrate(); // idempotent; a deployment would run `converge migrate` once instead
  await converge.pool.query(
    `CREATE TABLE IF NOT EXISTS ${orders} (id text PRIMARY KEY, amount int NOT NULL, version int NOT NULL)`,
  );
  const version =
    command === 'place' ? await placeOrder(converge, orderId, amount) : await addAmount(converge, orderId, amount);
  console.log(`order ${orderId} at version ${version}`);
} finally {
  await converge.close();
}
